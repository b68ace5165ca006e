"""A location test at the level of the replicate, evaluated on every relabelling of the replicates at once.

Per-replicate summaries of the genes (a pseudobulk: ``log1p`` of the mean ``expm1`` of log-normalised
expression) are compared between the groups by an empirical-Bayes moderated t per gene, as
limma-trend computes it on pseudobulk
(Smyth 2004, *Stat. Appl. Genet. Mol. Biol.* 3:3; ``limma::squeezeVar`` with the genes' mean
expression as covariate): each gene's residual variance is shrunk towards a prior whose scale
follows the genes' mean expression and whose degrees of freedom are estimated from the spread of
all genes' variances. The statistic of a labelling is the largest ``|t|`` over the genes (the
max-T of Westfall and Young): family-wise over the genes, and it reaches any single gene's change.

Every piece (the means, the prior, the trend) is recomputed for every relabelling from the
replicate means and the labelling alone, as a few matrix products over all relabellings together,
so a labelling's statistic is one fixed function of (replicate means, labels): compared within the
set of relabellings that are equally likely under the null (:func:`scontrast.design.replicate_labellings`),
the p-value is exact. :func:`set_pvalues` and :func:`min_p_combination` combine several such
statistics (e.g. this one and SPARDA's distributional parts) over the same relabellings, exactly.

- :func:`replicate_means` -- per-(replicate, group) means of the cells, sparse input kept sparse;
- :func:`moderated_t` -- the moderated t of every gene under every labelling, shape (L, G);
- :func:`squeeze_var` -- limma's empirical-Bayes variances for many sets of genes' variances at once;
- :func:`location_statistics` -- max ``|t|`` of every labelling, for a given labelling matrix;
- :func:`location_test` -- the whole test on replicate means: p-value, floor, each gene's t and
  its max-T adjusted p-value;
- :func:`replicate_features` -- per-replicate feature families from the cells in one pass (pseudobulk
  ``location``, ``spread``, ``detected`` share, the spread freed of the donors' means and the upper ``tail``:
  :mod:`scontrast.donor_spread`);
- an opt-in ``coexpression`` family: :mod:`scontrast.donor_coexpression`;
- :func:`family_t`, :func:`family_statistics` -- a moderated t per feature of one family under
  every labelling, and each family's statistic (the mean of its ``top_k`` largest ``t^2``);
- :func:`trend_covariates` -- every family's variance trend on the genes' mean location;
- :func:`donor_test` -- the donor-level test: the families' statistics combined by min-p over one
  matrix of relabellings (exact), each family's p-value and the observed t of every feature.

numpy in, numpy out (no AnnData).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from . import donor_spread as _spread
from ._limma import squeeze_var
from .core import ScontrastError
from .design import labelling_floor, replicate_labellings

__all__ = [
    "replicate_means",
    "squeeze_var",
    "moderated_t",
    "location_statistics",
    "location_test",
    "set_pvalues",
    "min_p_combination",
    "replicate_features",
    "family_t",
    "trend_covariates",
    "family_statistics",
    "donor_test",
    "combined_parts",
    "FAMILIES",
]

# cells transformed and summed at once by replicate_means (bounds the copy expm1 makes)
_ROWS = 8192
# statistics within this relative distance tie (set_pvalues)
_TIES = 1e-9


def _blocks_and_strata(X, replicate_index, is_target, n_replicates: int, paired: bool, what: str):
    """The row blocks of ``X``, each cell's stratum (replicate, or (replicate, group) paired) and their number."""
    index = np.asarray(replicate_index, dtype=np.int64)
    is_target = np.asarray(is_target, dtype=bool)
    blocks = list(X) if isinstance(X, (list, tuple)) else [X]
    if sum(b.shape[0] for b in blocks) != index.size or is_target.size != index.size:
        raise ScontrastError(f"{what}: {sum(b.shape[0] for b in blocks)} cells, {index.size} replicate "
                             f"labels and {is_target.size} group labels")
    strata = 2 * index + ~is_target if paired else index
    k = 2 * n_replicates if paired else n_replicates
    if np.any(np.bincount(strata, minlength=k) == 0):
        raise ScontrastError(f"{what}: a replicate (or, paired, a replicate's group) has no cell")
    return blocks, strata, k


def replicate_means(X, replicate_index: np.ndarray, is_target: np.ndarray, n_replicates: int, *,
                    paired: bool, pseudobulk: bool = False) -> np.ndarray:
    """Mean of every gene over the cells of each replicate (and group, when paired).

    With ``pseudobulk``, ``X`` is read as log1p-normalised expression and the result is
    ``log1p(mean(expm1(X)))``: the log of the replicate's mean normalised expression, a
    pseudobulk's log-CPM up to the scale. On sparse, low-count cells it follows a change of
    counts more closely than the mean of the logs, which many zeros compress (measured in
    ``docs/sparda.md``). Any fixed transformation keeps the test of :func:`location_test` exact.

    Parameters
    ----------
    X : ndarray or sparse matrix, shape (N, G), or a list of them (row blocks, e.g. [target, background])
        The cells (log-normalised expression), target and background pooled.
    replicate_index : ndarray of int, shape (N,)
        Each cell's replicate, an index into ``range(n_replicates)``.
    is_target : ndarray of bool, shape (N,)
    n_replicates : int
    paired : bool

    Returns
    -------
    ndarray, shape (R, G) unpaired; (R, 2, G) paired ([target, background] of each replicate)
    """
    blocks, strata, k = _blocks_and_strata(X, replicate_index, is_target, n_replicates, paired, "replicate means")
    counts = np.bincount(strata, minlength=k).astype(float)
    M = np.zeros((k, blocks[0].shape[1]))
    start = 0
    for b in blocks:
        # _ROWS cells at a time: one sparse product each; the cells stay sparse, the means are dense (k x G)
        for s in range(0, b.shape[0], _ROWS):
            part = b[s:s + _ROWS]
            if pseudobulk:
                part = part.expm1() if sp.issparse(part) else np.expm1(np.asarray(part, dtype=float))
            rows = strata[start + s:start + s + part.shape[0]]
            S = sp.csr_matrix((1.0 / counts[rows], (rows, np.arange(part.shape[0]))), shape=(k, part.shape[0]))
            prod = S @ part
            M += np.asarray(prod.toarray() if sp.issparse(prod) else prod, dtype=float)
        start += b.shape[0]
    if pseudobulk:
        M = np.log1p(M)
    return M.reshape(n_replicates, 2, -1) if paired else M


def moderated_t(means: np.ndarray, labellings: np.ndarray, *, paired: bool) -> tuple[np.ndarray, np.ndarray]:
    """The moderated t of every gene under every labelling of the replicates.

    Unpaired: two groups of replicate means, ``t = (mean_t - mean_b) / sqrt(s~^2 (1/R_t + 1/R_b))``
    on ``R - 2`` residual degrees of freedom. Paired: the within-replicate differences
    ``target - background``, a labelling flipping the sign of those it swaps,
    ``t = mean / sqrt(s~^2 / R)`` on ``R - 1``. ``s~^2``: :func:`squeeze_var` with the genes' mean
    over all replicate means as covariate (label free).

    Parameters
    ----------
    means : ndarray, shape (R, G) unpaired or (R, 2, G) paired (:func:`replicate_means`)
    labellings : ndarray of bool, shape (L, R)
        Rows of :func:`scontrast.design.replicate_labellings` (unpaired: True = target; paired:
        True = swapped).

    Returns
    -------
    t : ndarray, shape (L, G)
    df_total : ndarray, shape (L,)
        ``d0 + df`` of every labelling (the moderated t's degrees of freedom).
    """
    M = np.asarray(means, dtype=float)
    if paired and (M.ndim != 3 or M.shape[1] != 2):
        raise ScontrastError(f"moderated t: paired means must have shape (R, 2, G), got {M.shape}")
    if not paired and M.ndim != 2:
        raise ScontrastError(f"moderated t: unpaired means must have shape (R, G), got {M.shape}")
    return family_t(M, labellings, paired=paired)


def location_statistics(means: np.ndarray, labellings: np.ndarray, *, paired: bool) -> np.ndarray:
    """The location statistic of every labelling: the largest ``|t|`` of :func:`moderated_t`, shape (L,).

    For a labelling matrix computed elsewhere (e.g. a study's precomputed relabellings): combine
    the result with other statistics of the same rows by :func:`min_p_combination`.
    """
    t, _ = moderated_t(means, labellings, paired=paired)
    return np.abs(t).max(axis=1)


def set_pvalues(T: np.ndarray) -> np.ndarray:
    """The p-value of every member of a set of statistics within the set (larger = more extreme).

    ``p_b = #{c : T_c >= T_b} / len(T)`` (ties within a relative ``1e-9``) for every column of ``T`` (shape (L, q)): the p-value each
    labelling would get if it were the observed one. One symmetric rule for every member keeps the
    set exchangeable under the null, so a combination of these is again an exact statistic.
    """
    T = np.asarray(T, dtype=float)
    T = T[:, None] if T.ndim == 1 else T
    srt = np.sort(T, axis=0)
    # within _TIES (relative) counts as a tie: a labelling and its mirror give the same statistic up to rounding
    tol = _TIES * np.maximum(1.0, np.abs(np.where(np.isfinite(T), T, 0.0)))
    return np.column_stack([T.shape[0] - np.searchsorted(srt[:, j], T[:, j] - tol[:, j], side="left")
                            for j in range(T.shape[1])]) / T.shape[0]


def min_p_combination(T: np.ndarray) -> np.ndarray:
    """Min-p combination of the columns of ``T`` (shape (L, q), larger = more extreme), row 0 observed.

    Each labelling's parts get their p-values within the set (:func:`set_pvalues`); labellings are
    ordered by their smallest, ties broken by the next smallest and so on. Returns every labelling's
    combined p-value within the set, shape (L,): ``#{c : key_c <= key_b} / L``; the observed
    labelling's is the test's exact p-value.
    """
    L = np.asarray(T).shape[0]
    c = np.sort(np.rint(set_pvalues(T) * L).astype(np.int64), axis=1)
    # rows ranked lexicographically by np.unique (sorted distinct rows): an integer key of base L + 1 would
    # overflow int64 with 6 parts and 1,500 labellings
    _, inverse, counts = np.unique(c, axis=0, return_inverse=True, return_counts=True)
    return np.cumsum(counts)[inverse.ravel()] / L


def location_test(means: np.ndarray, target_of_replicate, *, paired: bool, max_labellings: int = 9999,
                  random_state=None) -> dict:
    """The moderated-t location test of replicate means over the relabellings of the replicates.

    Parameters
    ----------
    means : ndarray, shape (R, G) unpaired or (R, 2, G) paired (:func:`replicate_means`)
    target_of_replicate : array-like of bool, shape (R,)
        Unpaired: the replicates' groups. Paired: ignored but for R.
    paired : bool
    max_labellings, random_state
        As :func:`scontrast.design.replicate_labellings` (all relabellings when at most this many).

    Returns
    -------
    dict
        ``pvalue`` (#{max|t| >= observed} / L), ``floor``, ``exact``, ``n_labellings``,
        ``statistic`` (observed max |t|), ``t`` (G,) the observed moderated t of every gene,
        ``df`` its degrees of freedom, ``adjusted_pvalue`` (G,) each gene's max-T adjusted p-value
        (#{max|t| >= |t_g|} / L: family-wise over the genes).
    """
    lab, exact = replicate_labellings(target_of_replicate, paired=paired, max_labellings=max_labellings,
                                      random_state=random_state)
    t, df = moderated_t(means, lab, paired=paired)
    stat = np.abs(t).max(axis=1)
    tol = 1e-10 * max(1.0, float(stat.max()))
    srt = np.sort(stat)
    adj = (lab.shape[0] - np.searchsorted(srt, np.abs(t[0]) - tol, side="left")) / lab.shape[0]
    return {"pvalue": float(adj.min(initial=1.0)), "floor": labelling_floor(lab, paired=paired, exact=exact),
            "exact": bool(exact), "n_labellings": int(lab.shape[0]), "statistic": float(stat[0]),
            "t": t[0], "df": float(df[0]), "adjusted_pvalue": adj}


# --------------------------------------------------------------------------- #
# The donor-level test: feature families, moderated t per family, min-p over families
# --------------------------------------------------------------------------- #
# The default families and top-k: chosen on bench_donors.py --donor-test --seed 1 (6 vs 6; detected share, a 2:1 weight
# and co-expression lost power; top-k 5 and 10 alike; the dispersion more than doubled the spread power, and with the sd
# kept the study's mean-shift split stays found), reported on --seed 2 (benchmarks/results/bench_donors.txt). The tail
# family raised the sub-state and mean-shift power at --seed 4 and --seed 2 for a little of the spread's.
FAMILIES = ("location", "spread", "dispersion", "tail")
TOP_K = 10
# The level combined_parts plans for.
ALPHA = 0.05


def replicate_features(X, replicate_index: np.ndarray, is_target: np.ndarray, n_replicates: int, *,
                       paired: bool, cell_scale_of: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per-replicate feature families of every gene, from log-normalised cells, in one pass over the cells.

    - ``location``: ``log1p`` of the replicate's mean ``expm1`` expression (its pseudobulk, as
      :func:`replicate_means` with ``pseudobulk=True``);
    - ``spread``: the standard deviation of the replicate's cells' log-normalised expression
      (a change of spread or a sub-state in a share of the cells moves it, a mean shift of
      counts moves it less than the location);
    - ``detected``: the share of the replicate's cells with the gene expressed (``X > 0``);
    - ``dispersion``, ``residual_spread``, ``gene_residual_spread``: the spread freed of the
      donors' mean differences (:mod:`scontrast.donor_spread`);
    - ``tail``: the logit of the share of the replicate's cells above the gene's 90th percentile
      over all cells (:func:`scontrast.donor_spread.tail_share`: a sub-state in a share of the cells moves it).

    Sparse input stays sparse (products with a replicates x cells indicator, ``_ROWS`` cells at a time).

    Parameters
    ----------
    X : ndarray or sparse matrix, shape (N, G), or a list of them (row blocks)
    replicate_index : ndarray of int, shape (N,)
    is_target : ndarray of bool, shape (N,)
    n_replicates : int
    paired : bool
    cell_scale_of : ndarray, shape (N,), optional
        Each cell's ``expm1(x)`` of one count (``dispersion``'s Poisson part); default
        :func:`scontrast.donor_spread.cell_scale`.

    Returns
    -------
    dict of family -> ndarray, shape (R, G) unpaired; (R, 2, G) paired ([target, background])
    """
    blocks, strata, k = _blocks_and_strata(X, replicate_index, is_target, n_replicates, paired, "replicate features")
    counts = np.bincount(strata, minlength=k).astype(float)
    G = blocks[0].shape[1]
    sums = {name: np.zeros((k, G)) for name in ("x", "x2", "e", "nz", "ec", "ec2", "kec", "tail")}
    cap, given = _spread.column_quantile(blocks, _spread.CAP_QUANTILE), _spread.checked_scale(cell_scale_of, strata.size)
    tail_at = _spread.column_quantile(blocks, _spread.TAIL_QUANTILE)
    start = 0
    for b in blocks:
        for s in range(0, b.shape[0], _ROWS):
            part = b[s:s + _ROWS]
            rows_at = slice(start + s, start + s + part.shape[0])
            rows = strata[rows_at]
            S = sp.csr_matrix((1.0 / counts[rows], (rows, np.arange(part.shape[0]))), shape=(k, part.shape[0]))
            scale = _spread.cell_scale(part) if given is None else given[rows_at]
            dense = not sp.issparse(part)
            part = np.asarray(part, dtype=float) if dense else sp.csr_matrix(part, dtype=float)
            e = np.expm1(part) if dense else part.expm1()
            pieces = {"x": part, "x2": part ** 2 if dense else part.power(2), "e": e, "nz": (part != 0).astype(float),
                      "tail": _spread.tail_piece(e, tail_at), **_spread.dispersion_pieces(e, scale, cap)}
            for name, piece in pieces.items():
                prod = S @ piece
                sums[name] += np.asarray(prod.toarray() if sp.issparse(prod) else prod, dtype=float)
        start += b.shape[0]
    out = {"location": np.log1p(sums["e"]),
           "spread": np.sqrt(np.maximum(sums["x2"] - sums["x"] ** 2, 0.0)),
           "detected": sums["nz"],
           "dispersion": _spread.dispersion(sums["ec"], sums["ec2"], sums["kec"]),
           "tail": _spread.tail_share(sums["tail"], counts)}
    out["residual_spread"] = _spread.residual_spread(out["location"], out["spread"])
    out["gene_residual_spread"] = _spread.gene_residual_spread(out["location"], out["spread"])
    return {name: (v.reshape(n_replicates, 2, G) if paired else v) for name, v in out.items()}


def family_t(values: np.ndarray, labellings: np.ndarray, *, paired: bool,
             covariate: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The limma-trend moderated t of every feature of one family under every labelling.

    Parameters
    ----------
    values : ndarray
        Unpaired: (R, F), each replicate's features. Paired: (R, 2, F) [target, background] of each
        replicate (:func:`replicate_features`), or (R, F) the within-replicate differences.
    labellings : ndarray of bool, shape (L, R)
    paired : bool
    covariate : ndarray, shape (F,), optional
        The trend's covariate (label free). Default: the features' mean over every replicate (and
        group); paired differences without it: a constant prior (limma without trend).

    Returns
    -------
    t : ndarray, shape (L, F)
    df_total : ndarray, shape (L,)
    """
    V = np.asarray(values, dtype=float)
    if not paired or V.ndim == 3:
        if covariate is None:
            covariate = V.mean(axis=(0, 1)) if V.ndim == 3 else V.mean(axis=0)
        if not paired:
            return _unpaired_moderated_t(V, labellings, covariate)
        return _paired_moderated_t(V[:, 0] - V[:, 1], labellings, covariate)
    return _paired_moderated_t(V, labellings, covariate)


def _paired_moderated_t(D: np.ndarray, labellings: np.ndarray, covariate) -> tuple[np.ndarray, np.ndarray]:
    """Moderated one-sample t of the differences ``D`` (R, F) under sign flips (True = swapped)."""
    lab = np.asarray(labellings, dtype=bool)
    R = D.shape[0]
    if R < 2:
        raise ScontrastError(f"moderated t: {R} paired replicate(s) leave no residual degree of freedom (need >= 2)")
    signs = np.where(lab, -1.0, 1.0)
    dbar = signs @ D / R
    df = R - 1
    # the sum of squares does not depend on the signs
    s2 = np.maximum((D * D).sum(axis=0)[None, :] - R * dbar * dbar, 0.0) / df
    post, d0, _ = squeeze_var(s2, df, covariate)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(post > 0, dbar / np.sqrt(post / R), 0.0)
    return t, d0 + df


def _unpaired_moderated_t(M: np.ndarray, labellings: np.ndarray, covariate) -> tuple[np.ndarray, np.ndarray]:
    """Moderated two-sample t of the replicates' features ``M`` (R, F) under every labelling (True = target)."""
    lab = np.asarray(labellings, dtype=bool)
    R = M.shape[0]
    C = M - M.mean(axis=0)  # centred: the sums of squares below lose no digits
    w = lab.astype(float)
    rt = w.sum(axis=1, keepdims=True)
    rb = R - rt
    if rt.min() < 1 or rb.min() < 1:
        raise ScontrastError("moderated t: a labelling leaves a group without replicates")
    df = R - 2
    if df < 1:
        raise ScontrastError(f"moderated t: {R} replicates leave no residual degree of freedom (need >= 3)")
    mt = (w @ C) / rt
    mb = ((1.0 - w) @ C) / rb
    s2 = np.maximum((C * C).sum(axis=0)[None, :] - rt * mt * mt - rb * mb * mb, 0.0) / df
    post, d0, _ = squeeze_var(s2, df, covariate)
    se2 = post * (1.0 / rt + 1.0 / rb)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(se2 > 0, (mt - mb) / np.sqrt(se2), 0.0)
    return t, d0 + df


def trend_covariates(features: dict[str, np.ndarray], *, paired: bool) -> dict[str, np.ndarray]:
    """Each family's trend covariate: the genes' mean ``location`` over every replicate (and group), limma-trend's
    average log-expression, for every family of as many features as the location family.

    A gene's sd, dispersion and tail shares are noisier the fewer counts it has; the trend of their prior variance
    follows those counts (the location's mean), not the family's own level (a dispersion's mean is mostly its
    Poisson floor). Label free, so the test stays exact. Empty without a ``location`` family or when the families
    are paired differences (2-D, no mean expression left): each family then trends on its own mean (or a constant).

    Parameters
    ----------
    features : dict of family -> ndarray, (R, F) unpaired, (R, 2, F) paired or (R, F) paired differences
    paired : bool

    Returns
    -------
    dict of family -> ndarray (F,)

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.donor_test import trend_covariates
    >>> loc = np.log1p(np.arange(12.0).reshape(4, 3))              # 4 donors, 3 genes
    >>> cov = trend_covariates({"location": loc, "spread": np.ones((4, 3))}, paired=False)
    >>> np.allclose(cov["spread"], loc.mean(axis=0)), sorted(cov)
    (True, ['location', 'spread'])
    >>> trend_covariates({"location": loc}, paired=True)            # differences: no mean expression
    {}
    """
    loc = features.get("location")
    if loc is None or (paired and np.ndim(loc) == 2):
        return {}
    loc = np.asarray(loc, dtype=float)
    ave = loc.mean(axis=tuple(range(loc.ndim - 1)))
    return {name: ave for name, v in features.items() if np.shape(v)[-1] == ave.size and np.ndim(v) == loc.ndim}


def top_mean(t: np.ndarray, top_k: int) -> np.ndarray:
    """The mean of the ``top_k`` largest ``t^2`` of every row of ``t`` (L, F), shape (L,); NaN counts as 0."""
    t2 = np.nan_to_num(np.asarray(t, dtype=float), nan=0.0) ** 2
    k = int(min(max(top_k, 1), t2.shape[1]))
    return np.partition(t2, t2.shape[1] - k, axis=1)[:, -k:].mean(axis=1)


def family_statistics(features: dict[str, np.ndarray], labellings: np.ndarray, *, paired: bool,
                      top_k: int = TOP_K, covariates: dict | None = None) -> tuple[np.ndarray, dict]:
    """Each family's statistic under every labelling: the mean of its ``top_k`` largest moderated ``t^2``.

    Parameters
    ----------
    features : dict of family -> ndarray
        As :func:`family_t` reads them (one entry per family, in the order of the columns returned).
    labellings : ndarray of bool, shape (L, R)
    paired : bool
    top_k : int
        1: the largest ``t^2`` (max-T over the family's features).
    covariates : dict of family -> ndarray (F,), optional

    Returns
    -------
    T : ndarray, shape (L, n_families)
    t : dict of family -> ndarray (F,)
        The observed labelling's (row 0's) moderated t of every feature.
    """
    covariates = covariates or {}
    cols, observed = [], {}
    for name, values in features.items():
        t, _ = family_t(values, labellings, paired=paired, covariate=covariates.get(name))
        cols.append(top_mean(t, top_k))
        observed[name] = t[0]
    return np.column_stack(cols), observed


def weighted_min_p(T: np.ndarray, weights=None) -> np.ndarray:
    """Every labelling's combined p-value within the set (shape (L,)), row 0 observed: min-p of the columns'
    p-values within the set (:func:`set_pvalues`), each divided by its weight (equal weights:
    :func:`min_p_combination`). Exact for weights fixed before the data are seen."""
    T = np.asarray(T, dtype=float)
    if weights is None:
        return min_p_combination(T)
    w = np.asarray(weights, dtype=float)
    if w.shape != (T.shape[1],) or np.any(w <= 0):
        raise ScontrastError(f"weighted min-p: {T.shape[1]} positive weights expected, got {weights!r}")
    key = (set_pvalues(T) / (w / w.sum())).min(axis=1)
    tol = 1e-12 * np.abs(key).max()
    return np.searchsorted(np.sort(key), key + tol, side="right") / key.size


def donor_test(features: dict[str, np.ndarray], labellings: np.ndarray, *, paired: bool, exact: bool = True,
               top_k: int = TOP_K, weights=None, extra: dict[str, np.ndarray] | None = None,
               floor: float | None = None, alpha: float = ALPHA) -> dict:
    """The donor-level test of target = background over one matrix of relabellings of the donors.

    Each family of per-donor features (:func:`replicate_features`) gets a limma-trend moderated t
    per feature under every labelling (:func:`family_t`; every family's variance trend on the genes'
    mean location, :func:`trend_covariates`) and a statistic, the mean of its
    ``top_k`` largest ``t^2``; the families (and any ``extra`` statistics of the same labellings,
    larger = more extreme) are combined by min-p within the set of labellings
    (:func:`min_p_combination`, or :func:`weighted_min_p` with ``weights``). A design with so few
    relabellings that a part at its floor could not reach ``alpha`` in that min-p (4 vs 4 donors,
    up to 7 pairs with the four default families) uses its first part, the location family, alone
    (:func:`combined_parts`); every part's own p-value is reported either way. Every statistic is a
    fixed function of (the donors' features, the labels), so under exchangeable donors the
    observed labelling's rank is uniform: ``p = #{combined p <= observed} / L`` is exact when every
    relabelling is listed (:func:`scontrast.design.replicate_labellings`,
    :func:`scontrast.study.study_labellings` with blocks), and valid when they are sampled.

    Parameters
    ----------
    features : dict of family -> ndarray, (R, F) unpaired or (R, 2, F) paired
    labellings : ndarray of bool, shape (L, R), row 0 the observed labelling
    paired : bool
    exact : bool
        Whether ``labellings`` lists every relabelling (recorded; the p-value is the same formula).
    top_k : int
    weights : array-like, shape (n_families + n_extra,), optional
    extra : dict of name -> ndarray (L,), optional
    floor : float, optional
        The smallest p the labellings allow (default :func:`scontrast.design.labelling_floor`;
        give ``1 / L`` for labellings listed without their mirrors).
    alpha : float
        The level :func:`combined_parts` plans for.

    Returns
    -------
    dict
        ``pvalue``, ``floor`` (the smallest p the labellings allow), ``n_labellings``, ``exact``,
        ``parts`` {family: its own p-value over the same labellings}, ``combined`` (the parts the
        min-p combines), ``statistics`` (L, q) every labelling's family statistics, ``level`` (L,)
        every labelling's combined p within the set, ``t`` {family: (F,) observed moderated t}.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.design import replicate_labellings
    >>> from scontrast.donor_test import donor_test
    >>> rng = np.random.default_rng(0)
    >>> loc = rng.normal(size=(8, 50)); loc[:4, :3] += 3.0        # 4 vs 4 donors, 3 genes shifted
    >>> lab, exact = replicate_labellings(np.arange(8) < 4, paired=False)
    >>> res = donor_test({"location": loc}, lab, paired=False, exact=exact)
    >>> res["n_labellings"], res["pvalue"] == res["floor"]
    (70, True)
    """
    lab = np.asarray(labellings, dtype=bool)
    T, t = family_statistics(features, lab, paired=paired, top_k=top_k, covariates=trend_covariates(features, paired=paired))
    names = list(features)
    if extra:
        T = np.column_stack([T] + [np.asarray(v, dtype=float) for v in extra.values()])
        names += list(extra)
    L = lab.shape[0]
    if floor is None:
        floor = labelling_floor(lab, paired=paired, exact=exact) if lab.shape[1] > 0 else 1.0 / L
    used = combined_parts(len(names), floor, alpha)
    level = weighted_min_p(T[:, :used], None if weights is None else np.asarray(weights, dtype=float)[:used])
    tol = 1e-10 * np.maximum(1.0, np.abs(T[0]))
    parts = {name: float(np.mean(T[:, j] >= T[0, j] - tol[j])) for j, name in enumerate(names)}
    return {"pvalue": float(level[0]), "floor": float(floor), "n_labellings": int(L), "exact": bool(exact),
            "parts": parts, "combined": names[:used], "statistics": T, "level": level, "t": t}


def combined_parts(n_parts: int, floor: float, alpha: float = ALPHA) -> int:
    """How many parts (first ones first) the min-p combines: all, unless the design allows so few relabellings that
    a part at its floor could not reach ``alpha`` in a min-p of them all (``n_parts x floor > alpha``: 4 vs 4
    donors, 6 or 7 pairs with four parts), then the first part alone (the location family). It depends on the design only, never on
    the data, so the test stays exact.

    >>> combined_parts(2, 2 / 924), combined_parts(2, 2 / 70), combined_parts(4, 1 / 462)
    (2, 1, 4)
    """
    return n_parts if n_parts * floor <= alpha else 1
