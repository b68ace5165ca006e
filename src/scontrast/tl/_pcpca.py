"""AnnData front end of probabilistic contrastive PCA: ``tl.pcpca(adata, ...)``."""

from __future__ import annotations

import logging
import warnings

import anndata as ad
import numpy as np
import scipy.sparse as sp

from ..pcpca import PCPCA, max_gamma
from ._common import TARGET_KEY, group_matrices, record_params

log = logging.getLogger(__name__)

DEFAULT_GAMMA_PRIME = 0.5


def _heldout(X, Y, n_components, gamma_prime, holdout_fraction, solver, max_iter, tol, rng, random_state):
    """Held-out log-likelihood of target cells (PCPCA and PPCA fitted on the other target cells).

    Returns a dict of floats (NaN when a split is too small or gamma' is inadmissible on it).
    """
    n = X.shape[0]
    n_test = int(round(holdout_fraction * n))
    out = {"n_heldout": n_test, "heldout_loglik": float("nan"), "heldout_loglik_ppca": float("nan"),
           "heldout_note": ""}
    if n_test < 1 or n - n_test < 2:
        out["heldout_note"] = f"split of {n} target cells too small for holdout_fraction={holdout_fraction}"
        return out
    perm = rng.permutation(n)
    test, train = np.sort(perm[:n_test]), np.sort(perm[n_test:])
    Xtr, Xte = X[train], X[test]
    for key, gp in (("heldout_loglik", gamma_prime), ("heldout_loglik_ppca", 0.0)):
        model = PCPCA(n_components, gamma_prime=gp, solver=solver, max_iter=max_iter, tol=tol,
                      random_state=random_state)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # convergence of the split fit is reported by the main fit
                model.fit(Xtr, Y)
        except ValueError as exc:
            out["heldout_note"] += f"{key}: {exc}. "
            continue
        out[key] = model.score(Xte)
    out["heldout_note"] = out["heldout_note"].strip()
    return out


def pcpca(
    adata: ad.AnnData,
    *,
    n_components: int = 2,
    gamma_prime: float | None = None,
    gamma: float | None = None,
    genes: str = "highly_variable",
    layer: str | None = None,
    key: str = TARGET_KEY,
    holdout_fraction: float = 0.2,
    on_inadmissible: str = "error",
    clip_fraction: float = 0.9,
    solver: str = "auto",
    max_iter: int = 1000,
    tol: float = 1e-9,
    random_state: int = 0,
    copy: bool = False,
):
    """Probabilistic contrastive PCA of the target cells against the background cells.

    Parameters
    ----------
    adata
        Cells x genes, log-normalised, with boolean ``obs[key]`` (True = target).
    n_components
        Latent dimension k.
    gamma_prime, gamma
        Contrast strength on the sample-size-free scale (gamma' = gamma m / n) or on the
        likelihood-exponent scale; give at most one (neither: gamma' = 0.5).
    genes
        ``'all'`` or a boolean var column (default ``'highly_variable'``).
    layer
        Matrix to use instead of ``X``. NaN entries are treated as missing at random.
    key
        Boolean obs column of the target/background split.
    holdout_fraction
        Fraction of target cells held out (split drawn with ``random_state``) to report the
        held-out log-likelihood of a model fitted on the rest; 0 skips it.
    on_inadmissible
        ``'error'`` (default): raise when gamma is outside the admissible range;
        ``'clip'``: use ``clip_fraction`` times the largest admissible gamma and warn.
    clip_fraction
        In (0, 1); see ``on_inadmissible``.
    solver, max_iter, tol
        Passed to :class:`scontrast.pcpca.PCPCA`.
    random_state
        Seed of the held-out split and the eigensolver start vector.
    copy
        Work on (and return) a copy.

    Writes
    ------
    ``obsm['X_pcpca']`` (n_obs x k) posterior means of z for every cell;
    ``varm['PCPCA_W']`` (n_vars x k) loadings, 0 for genes outside the gene set;
    ``uns['pcpca']``: params, versions, seed, gamma, gamma_prime, sigma2, max_gamma,
    max_gamma_prime, held-out log-likelihoods, fit diagnostics.
    """
    if gamma is not None and gamma_prime is not None:
        raise ValueError("gamma, gamma_prime: give at most one of the two")
    if on_inadmissible not in ("error", "clip"):
        raise ValueError(f"on_inadmissible: expected 'error' or 'clip', got {on_inadmissible!r}")
    if not 0.0 < clip_fraction < 1.0:
        raise ValueError(f"clip_fraction: expected a number in (0, 1), got {clip_fraction!r}")
    if not 0.0 <= holdout_fraction < 1.0:
        raise ValueError(f"holdout_fraction: expected a number in [0, 1), got {holdout_fraction!r}")
    params = dict(n_components=n_components, gamma_prime=gamma_prime, gamma=gamma, genes=genes, layer=layer,
                  key=key, holdout_fraction=holdout_fraction, on_inadmissible=on_inadmissible,
                  clip_fraction=clip_fraction, solver=solver, max_iter=max_iter, tol=tol)
    adata = adata.copy() if copy else adata

    X, Y, mask = group_matrices(adata, genes=genes, layer=layer, key=key, min_cells=2)
    n, m = X.shape[0], Y.shape[0]
    given = "gamma_prime" if gamma is None else "gamma"
    if gamma is None:
        gamma = (DEFAULT_GAMMA_PRIME if gamma_prime is None else float(gamma_prime)) * n / m
    gamma = float(gamma)
    bound = max_gamma(X, Y, n_components, random_state=random_state)
    requested = gamma
    clipped = False
    if gamma >= bound:
        if on_inadmissible == "error":
            raise ValueError(
                f"{given}: gamma_prime={gamma * m / n:.4g} (gamma={gamma:.4g}) is not admissible for these "
                f"{n} target and {m} background cells: need gamma_prime < {bound * m / n:.4g} "
                f"(gamma < {bound:.4g}); lower it or set on_inadmissible='clip'"
            )
        gamma = clip_fraction * bound
        clipped = True
        warnings.warn(f"pcpca: gamma_prime {requested * m / n:.4g} is not admissible (bound "
                      f"{bound * m / n:.4g}); clipped to {gamma * m / n:.4g}", stacklevel=2)

    model = PCPCA(n_components, gamma=gamma, solver=solver, max_iter=max_iter, tol=tol,
                  random_state=random_state).fit(X, Y)
    log.info("pcpca: gamma'=%.4g (bound %.4g), sigma2=%.4g, %s", model.gamma_prime_, bound * m / n,
             model.sigma2_, model.optimizer_message_)

    held = {"n_heldout": 0, "heldout_loglik": float("nan"), "heldout_loglik_ppca": float("nan"),
            "heldout_note": "holdout_fraction=0"}
    if holdout_fraction > 0:
        held = _heldout(X, Y, n_components, model.gamma_prime_, holdout_fraction, solver, max_iter, tol,
                        np.random.default_rng(random_state), random_state)

    full = adata.X if layer is None else adata.layers[layer]
    full = full[:, mask]
    full = sp.csr_matrix(full) if sp.issparse(full) else np.asarray(full)
    adata.obsm["X_pcpca"] = model.transform(full)
    W = np.zeros((adata.n_vars, n_components))
    W[mask] = model.W_
    adata.varm["PCPCA_W"] = W
    record_params(
        adata, "pcpca", params, random_state,
        gamma=float(model.gamma_), gamma_prime=float(model.gamma_prime_),
        gamma_requested=float(requested), clipped=clipped,
        sigma2=float(model.sigma2_), max_gamma=float(bound), max_gamma_prime=float(bound * m / n),
        n_target=int(n), n_background=int(m), n_genes=int(mask.sum()),
        objective=float(model.objective_), solver=model.solver_, converged=bool(model.converged_),
        n_iter=int(model.n_iter_), optimizer_message=model.optimizer_message_,
        eigenvalues=np.asarray(model.eigenvalues_, dtype=float), **held,
    )
    return adata if copy else None


__all__ = ["pcpca"]
