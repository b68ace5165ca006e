"""The study's donor-level test: one set of donor relabellings shared by every split.

Each donor of a split is summarised by two profiles over the split's most expressed genes: its
pseudobulk log-CPM (log of its cells' mean counts per million plus one) and the standard deviation
of its cells' log-normalised expression (the first carries mean shifts, the second changes of
spread or of a sub-state's share). The split's
statistic is the mean of the ``top_k`` largest squared moderated t statistics over these
features (donors as the unit: Welch-like unpaired, or on each donor's target-minus-background
difference when paired; each variance is shrunk towards the median of its kind of feature, as
limma moderates it, so that a feature whose donors happen to agree does not dominate).

A relabelling of the study's donors (unpaired: which donors are target, within blocks; paired:
which donors swap their two labels) applies to every split at once: each split's p-value is its
statistic's rank among the relabellings (exact when every relabelling is listed), and the global
p-value of "any split differs" is the rank of the smallest p-value over splits among the same
relabellings (min-p, Westfall & Young 1993), valid whatever the dependence between splits.
"""

from __future__ import annotations

import numpy as np

from ..design import replicate_labellings

__all__ = ["donor_features", "study_labellings", "split_statistics", "rank_pvalues", "min_p"]

TOL = 1e-9  # relative: a relabelling's statistic within this of the observed one ties it (mirrors in floating point)


def normalise(counts, n_genes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``n_genes`` most expressed genes (by mean CPM, label-free) of cells x genes ``counts``.

    Returns their columns (sorted, (G,)), their counts per million and log1p of their counts per
    10,000 (each cells x G, dense): only these G columns are made dense, so a split of many
    cells and genes costs cells x G, not cells x genes.
    """
    import scipy.sparse as sp

    X = sp.csr_matrix(counts, dtype=float) if sp.issparse(counts) else np.asarray(counts, dtype=float)
    total = np.asarray(X.sum(axis=1)).ravel()
    total[total == 0] = 1.0
    inv = 1.0 / total
    mean_share = np.asarray(X.T @ inv).ravel() / X.shape[0]
    genes = np.sort(np.argsort(-mean_share, kind="stable")[:n_genes])
    cols = X[:, genes]
    share = (cols.toarray() if sp.issparse(cols) else cols) * inv[:, None]
    return genes, share * 1e6, np.log1p(share * 1e4)


def donor_features(cpm: np.ndarray, logn: np.ndarray, unit: np.ndarray, units: list) -> tuple[np.ndarray, np.ndarray]:
    """Per unit (donor, or donor x group when paired): features and their sampling variances.

    Parameters
    ----------
    cpm, logn : ndarray, shape (n_cells, G)
        Counts per million, and log1p of counts per 10,000, of the split's genes.
    unit : ndarray, shape (n_cells,)
        Each cell's unit.
    units : list, length U
        The units, in the order of the rows returned.

    Returns
    -------
    features : ndarray, shape (U, 2G)
        Per gene, the log of the unit's mean CPM plus one (its pseudobulk log-CPM, where a fold
        change is a difference, not compressed by the zeros of single cells), then the standard
        deviation of its cells' log-normalised expression (spread).
    noise : ndarray, shape (U, 2G)
        The features' sampling variances (log mean CPM: var/n / (mean + 1)^2;
        sd: (m4 - var^2) / (4 var n); the delta method): what the unit's finite cell count adds
        to its distances.
    """
    G = cpm.shape[1]
    feats = np.empty((len(units), 2 * G))
    noise = np.empty((len(units), 2 * G))
    for i, u in enumerate(units):
        rows = unit == u
        n = int(rows.sum())
        c, x = cpm[rows], logn[rows]
        mean_c = c.mean(axis=0)
        feats[i, :G] = np.log1p(mean_c)
        mean_x = x.mean(axis=0)
        centred = x - mean_x
        var = (centred ** 2).mean(axis=0)
        feats[i, G:] = np.sqrt(var)
        m4 = (centred ** 4).mean(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            sd_var = np.where(var > 0, (m4 - var ** 2) / (4 * var * n), 0.0)
        noise[i, :G] = c.var(axis=0) / n / (mean_c + 1) ** 2
        noise[i, G:] = sd_var
    return feats, noise


def study_labellings(target_of_donor, *, paired: bool, blocks=None, max_labellings: int = 2000,
                     random_state=None) -> tuple[np.ndarray, bool]:
    """Relabellings of the study's donors, row 0 the observed one.

    :func:`scontrast.design.replicate_labellings` (SPARDA's and FANGS's own). Unpaired with
    ``blocks`` (D,): the target count is kept within each block; every such labelling when there
    are at most ``max_labellings``, else that many drawn at random (row 0 observed). Paired,
    blocks change nothing (a swap stays within its donor).

    Returns
    -------
    labellings : ndarray of bool, shape (L, D)
        Unpaired: True = target. Paired: True = the donor's labels swapped.
    exact : bool
        Every relabelling listed.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.study import study_labellings
    >>> labellings, exact = study_labellings(np.array([True, True, True, False, False, False]), paired=False)
    >>> labellings.shape, exact                              # every choice of 3 of 6 donors
    ((20, 6), True)
    """
    return replicate_labellings(np.asarray(target_of_donor, dtype=bool), paired=paired, max_labellings=max_labellings,
                                random_state=random_state, blocks=blocks)


def _top_mean(t2: np.ndarray, top_k: int) -> np.ndarray:
    k = min(top_k, t2.shape[1])
    return np.partition(t2, t2.shape[1] - k, axis=1)[:, -k:].mean(axis=1)


PRIOR_DF = 4.0  # degrees of freedom of the variance prior (limma's are of this order on small designs)


def _moderated(var: np.ndarray, df: float, kinds: np.ndarray | None) -> np.ndarray:
    """Variances (L, F) shrunk towards the median of their kind of feature (limma-style, ``PRIOR_DF``)."""
    kinds = np.zeros(var.shape[1], dtype=int) if kinds is None else kinds
    prior = np.empty_like(var)
    for k in np.unique(kinds):
        cols = kinds == k
        prior[:, cols] = np.median(var[:, cols], axis=1, keepdims=True)
    return (PRIOR_DF * prior + df * var) / (PRIOR_DF + df)


def unpaired_t(features: np.ndarray, labellings: np.ndarray, kinds: np.ndarray | None = None) -> np.ndarray:
    """Moderated two-sample t (L, F) of the features (D, F) under each labelling (L, D; True = target).

    ``kinds`` (F,): features of one kind share their variance prior. A labelling with fewer than
    2 donors in a group gets NaN.
    """
    L = labellings.astype(float)
    n1 = L.sum(axis=1, keepdims=True)
    n0 = features.shape[0] - n1
    s1, s0 = L @ features, (1 - L) @ features
    q1, q0 = L @ features ** 2, (1 - L) @ features ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        m1, m0 = s1 / n1, s0 / n0
        df = features.shape[0] - 2
        pooled = _moderated(np.maximum(q1 - s1 * m1 + q0 - s0 * m0, 0) / df, df, kinds)
        t = (m1 - m0) / np.sqrt(pooled * (1 / n1 + 1 / n0))
    t[((n1 < 2) | (n0 < 2)).ravel()] = np.nan
    return t


def paired_t(differences: np.ndarray, labellings: np.ndarray, kinds: np.ndarray | None = None) -> np.ndarray:
    """Moderated one-sample t (L, F) of the donors' differences (D, F) under sign flips (L, D; True = swapped)."""
    S = np.where(labellings, -1.0, 1.0)
    D = differences.shape[0]
    mean = S @ differences / D
    ss = (differences ** 2).sum(axis=0, keepdims=True)  # the same under every sign flip
    with np.errstate(divide="ignore", invalid="ignore"):
        var = _moderated(np.maximum(ss - D * mean ** 2, 0) / (D - 1), D - 1, kinds)
        return mean / np.sqrt(var / D)


def split_statistics(features: np.ndarray, labellings: np.ndarray, *, paired: bool, top_k: int = 10,
                     kinds: np.ndarray | None = None) -> np.ndarray:
    """The split's statistic (L,) under each relabelling: mean of the ``top_k`` largest squared t.

    ``features``: unpaired (D, F) per donor; paired (D, F) each donor's target minus background
    features. A labelling that leaves a group with fewer than 2 donors gets -inf (never as large
    as the observed statistic).
    """
    t = (paired_t if paired else unpaired_t)(features, labellings, kinds)
    bad = ~np.isfinite(t).any(axis=1)
    t2 = np.nan_to_num(t, nan=0.0) ** 2
    out = _top_mean(t2, top_k)
    out[bad] = -np.inf
    return out


def rank_pvalues(stats: np.ndarray) -> np.ndarray:
    """p (L,) of every relabelling's statistic among all (L,): the share at least as large (ties within TOL)."""
    order = np.sort(stats)
    thresh = stats - TOL * np.maximum(1.0, np.abs(np.where(np.isfinite(stats), stats, 0)))
    return (stats.size - np.searchsorted(order, thresh, side="left")) / stats.size


def min_p(pvalues: np.ndarray) -> float:
    """Global p of "any split differs": the share of relabellings whose smallest p over splits
    (pvalues: (L, S), row 0 observed) is at most the observed one's."""
    smallest = pvalues.min(axis=1)
    return float(np.mean(smallest <= smallest[0] * (1 + TOL)))
