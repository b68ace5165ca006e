"""The study's donor-level test: one set of donor relabellings shared by every split.

Each donor of a split is summarised by two profiles over the split's most expressed genes: its
pseudobulk log-CPM (log of its cells' mean counts per million plus one) and the standard deviation
of its cells' log-normalised expression (the first carries mean shifts, the second changes of
spread or of a sub-state's share); the test adds a third, each gene's dispersion beyond Poisson
(:func:`scontrast.donor_spread.unit_dispersion`, free of the donors' mean differences), and a fourth,
the share of the donor's cells in the gene's upper tail (:func:`scontrast.donor_spread.unit_tail`). The test is
:func:`scontrast.donor_test.donor_test`'s: per family of profiles, limma-trend's moderated t of every
gene under every relabelling (donors as the unit: unpaired, or each donor's target-minus-background
difference when paired) and the family's largest ``t^2`` (top-k mean); the families combined by
min-p within the set of relabellings.

A relabelling of the study's donors (unpaired: which donors are target, within blocks; paired:
which donors swap their two labels) applies to every split at once: each split's p-value is its
statistic's rank among the relabellings (exact when every relabelling is listed), and the global
p-value of "any split differs" is the rank of the smallest p-value over splits among the same
relabellings (min-p, Westfall & Young 1993), valid whatever the dependence between splits.
"""

from __future__ import annotations

import numpy as np

from ..design import labelling_floor, replicate_labellings
from ..donor_test import TOP_K, combined_parts, family_t, top_mean, trend_covariates, weighted_min_p

__all__ = ["donor_features", "study_labellings", "part_statistics", "combine_parts", "rank_pvalues",
           "min_p"]

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


def _families(n_features: int, kinds: np.ndarray | None) -> list[np.ndarray]:
    """The columns of each family of features (one family without ``kinds``)."""
    kinds = np.zeros(n_features, dtype=int) if kinds is None else np.asarray(kinds)
    return [np.flatnonzero(kinds == k) for k in np.unique(kinds)]


def _valid(labellings: np.ndarray, paired: bool) -> np.ndarray:
    """Labellings (L,) that leave both groups at least 2 donors (every paired one)."""
    if paired:
        return np.ones(labellings.shape[0], dtype=bool)
    n1 = labellings.sum(axis=1)
    return (n1 >= 2) & (labellings.shape[1] - n1 >= 2)


def _family_t(features: np.ndarray, labellings: np.ndarray, kinds, *, paired: bool) -> np.ndarray:
    """Moderated t (L, F) of every feature, each family with its own limma-trend prior; NaN where a labelling
    leaves a group fewer than 2 donors.

    Unpaired, the first family (kind 0, the location) gives every family of as many features its trend covariate,
    as the donor test does (:func:`scontrast.donor_test.trend_covariates`); paired differences trend on nothing.
    """
    lab = np.asarray(labellings, dtype=bool)
    t = np.full((lab.shape[0], features.shape[1]), np.nan)
    ok = _valid(lab, paired)
    if ok.any():
        families = _families(features.shape[1], kinds)
        trend = trend_covariates({"location": features[:, families[0]]}, paired=paired).get("location")
        for cols in families:
            cov = trend if trend is not None and cols.size == trend.size else None
            t[np.ix_(ok, cols)] = family_t(features[:, cols], lab[ok], paired=paired, covariate=cov)[0]
    return t


def unpaired_t(features: np.ndarray, labellings: np.ndarray, kinds: np.ndarray | None = None) -> np.ndarray:
    """Moderated two-sample t (L, F) of the features (D, F) under each labelling (L, D; True = target).

    ``kinds`` (F,): the families; each has its own limma-trend prior
    (:func:`scontrast.donor_test.family_t`, the trend on the genes' mean log-CPM over the donors). A
    labelling with fewer than 2 donors in a group gets NaN.
    """
    return _family_t(features, labellings, kinds, paired=False)


def paired_t(differences: np.ndarray, labellings: np.ndarray, kinds: np.ndarray | None = None) -> np.ndarray:
    """Moderated one-sample t (L, F) of the donors' differences (D, F) under sign flips (L, D; True = swapped);
    each family of ``kinds`` with its own limma prior (constant: the differences carry no mean expression)."""
    return _family_t(differences, labellings, kinds, paired=True)


def part_statistics(features: np.ndarray, labellings: np.ndarray, *, paired: bool, top_k: int = TOP_K,
                    kinds: np.ndarray | None = None, tested: np.ndarray | None = None) -> np.ndarray:
    """Each family's statistic (L, n_families) under each relabelling: the mean of its ``top_k`` largest squared
    moderated t (:func:`scontrast.donor_test.top_mean`); -inf where a labelling leaves a group fewer than 2 donors.

    ``features``: unpaired (D, F) per donor; paired (D, F) each donor's target minus background features;
    ``kinds`` (F,) their families, in the order of the columns returned. ``tested`` (F,) bool, label-free: the
    features whose t enter the top ``top_k`` (default every one); each family's variance trend is still fitted on
    all its features.
    """
    lab = np.asarray(labellings, dtype=bool)
    t = _family_t(features, lab, kinds, paired=paired)
    keep = np.ones(features.shape[1], bool) if tested is None else np.asarray(tested, dtype=bool)
    T = np.column_stack([top_mean(t[:, cols[keep[cols]]], top_k) for cols in _families(features.shape[1], kinds)])
    T[~_valid(lab, paired)] = -np.inf
    return T


def combine_parts(T: np.ndarray, labellings: np.ndarray, *, paired: bool) -> np.ndarray:
    """The split's statistic (L,) from its families' (``T``, (L, n_families), :func:`part_statistics`): the
    families combined by min-p within these labellings (:func:`scontrast.donor_test.weighted_min_p`), returned as
    ``1 - p`` (larger = more extreme); -inf where a labelling leaves a group fewer than 2 donors."""
    lab = np.asarray(labellings, dtype=bool)
    # as the donor test: with so few relabellings that a family at its floor could not reach 0.05 in the min-p,
    # the first family (location) alone; the floor of the listed labellings (a mirror ties), from the design only
    floor = labelling_floor(lab, paired=paired, exact=True) if lab.shape[1] else 1.0
    out = 1.0 - weighted_min_p(T[:, :combined_parts(T.shape[1], floor)])
    out[~_valid(lab, paired)] = -np.inf
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
