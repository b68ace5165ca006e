"""Simulated data: draws from the Indian buffet process and the linear-Gaussian model, and planted gene programmes."""

from __future__ import annotations

import numpy as np

from ..core import check_random_state


def sample_ibp(n: int, alpha: float, random_state=None, max_features: int | None = None) -> np.ndarray:
    """Draw Z (n, K) uint8 from the Indian buffet process (the restaurant construction).

    Customer i takes each previous dish k with probability m_k / i and
    Poisson(alpha / i) new dishes; ``max_features`` truncates K.

    Examples
    --------
    >>> from scontrast.latent_features import sample_ibp
    >>> Z = sample_ibp(20, alpha=2.0, random_state=0)
    >>> Z.shape[0], Z.dtype.name                            # one row per cell, as many features as drawn
    (20, 'uint8')
    """
    rng = check_random_state(random_state)
    cols: list[list[int]] = []
    counts: list[int] = []
    for i in range(1, n + 1):
        for k in range(len(cols)):
            if rng.random() < counts[k] / i:
                cols[k].append(i - 1)
                counts[k] += 1
        for _ in range(rng.poisson(alpha / i)):
            if max_features is not None and len(cols) >= max_features:
                break
            cols.append([i - 1])
            counts.append(1)
    Z = np.zeros((n, len(cols)), dtype=np.uint8)
    for k, rows in enumerate(cols):
        Z[rows, k] = 1
    return Z


def simulate_linear_gaussian(Z, n_dims: int, sigma_x: float = 0.5, sigma_a: float = 1.0,
                             random_state=None) -> tuple[np.ndarray, np.ndarray]:
    """Data from the linear-Gaussian model: X = Z A + noise.

    Returns ``(X (N, n_dims), A (K, n_dims))``.

    Examples
    --------
    >>> from scontrast.latent_features import sample_ibp, simulate_linear_gaussian
    >>> Z = sample_ibp(30, alpha=2.0, random_state=0)
    >>> X, A = simulate_linear_gaussian(Z, n_dims=5, random_state=0)   # X = Z A + noise
    >>> X.shape, A.shape == (Z.shape[1], 5)
    ((30, 5), True)
    """
    rng = check_random_state(random_state)
    Z = np.asarray(Z, dtype=np.float64)
    A = rng.normal(0.0, sigma_a, size=(Z.shape[1], n_dims))
    X = Z @ A + rng.normal(0.0, sigma_x, size=(Z.shape[0], n_dims))
    return X, A


def planted_programmes(n_cells: int = 3000, n_genes: int = 60, effect: float = 1.0, seed: int = 0):
    """An AnnData of planted overlapping gene programmes (log-expression-like) and the truth.

    Returns ``(adata, gene_sets (4 lists of gene indices), enriched (4,) bool)``: half the cells
    are target (``obs['scontrast_target']``); ``var['highly_variable']`` is True for every gene;
    X = Z A + N(0, 1) shifted to be positive, A[k, gene set k] = ``effect``. Needs n_genes >= 45.
    """
    import anndata as ad
    import pandas as pd

    rng = np.random.default_rng(seed)
    t = np.arange(n_cells) < n_cells // 2
    prev = [(0.5, 0.15), (0.4, 0.1), (0.3, 0.3), (0.3, 0.3)]
    Z = np.column_stack([rng.random(n_cells) < np.where(t, pt, pb) for pt, pb in prev]).astype(np.uint8)
    sets = [list(range(0, 15)), list(range(10, 25)), list(range(20, 35)), list(range(30, 45))]
    A = np.zeros((4, n_genes))
    for k, g in enumerate(sets):
        A[k, g] = effect
    X = Z @ A + rng.normal(size=(n_cells, n_genes)) + 5.0
    adata = ad.AnnData(X=X.astype(np.float32),
                       obs=pd.DataFrame({"scontrast_target": t}, index=[f"c{i}" for i in range(n_cells)]),
                       var=pd.DataFrame({"highly_variable": np.ones(n_genes, bool)},
                                        index=[f"g{j}" for j in range(n_genes)]))
    return adata, sets, np.array([pt != pb for pt, pb in prev])


def programme_recovery(adata, sets, enriched) -> dict:
    """Match each planted programme to the FANGS feature of best gene-set Jaccard.

    A feature's gene set: the genes whose loading exceeds half its largest loading. Returns
    ``jaccard`` (4,), ``flagged`` (4,) (the matched feature has q <= 0.05), ``extra_flagged``
    (enriched features matched to no enriched programme) and ``exact`` (every programme at
    Jaccard >= 0.7 and the flagged ones = the enriched ones).
    """
    f = adata.uns["fangs"]
    L = np.asarray(f.get("loadings", np.zeros((0, adata.n_vars))))
    names = list(np.asarray(f.get("loading_names", [])).astype(str))
    col = [names.index(f"g{j}") if f"g{j}" in names else None for j in range(adata.n_vars)]
    feats = []
    for row in L:
        top = {j for j in range(adata.n_vars) if col[j] is not None and row[col[j]] > 0.5 * row.max()}
        feats.append(top)
    jac = np.zeros(len(sets))
    match = np.full(len(sets), -1)
    for k, g in enumerate(sets):
        for j, s in enumerate(feats):
            v = len(s & set(g)) / len(s | set(g)) if s else 0.0
            if v > jac[k]:
                jac[k], match[k] = v, j
    q = np.asarray(f.get("feature_qvalue", np.ones(len(feats))))
    flagged = np.array([m >= 0 and q[m] <= 0.05 for m in match])
    enriched_matches = {int(m) for m, e in zip(match, enriched) if e and m >= 0}
    extra = int(sum(1 for j in range(len(feats)) if q[j] <= 0.05 and j not in enriched_matches))
    return {"jaccard": jac, "flagged": flagged, "extra_flagged": extra,
            "exact": bool((jac >= 0.7).all() and np.array_equal(flagged, enriched) and extra == 0)}
