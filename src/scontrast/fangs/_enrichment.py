"""Feature enrichment between the target and background cells: Fisher's exact test per feature."""

from __future__ import annotations

import numpy as np

from ..core import ScontrastError
from ..feature_samples import _as_binary


def feature_enrichment(estimate, is_target) -> dict[str, np.ndarray]:
    """Prevalence of each feature in the target and background cells and Fisher's exact test.

    estimate (N, K) binary, is_target (N,) bool with cells in both groups. Returns
    (K,) arrays ``n_target``, ``n_background`` (cells holding the feature),
    ``prevalence_target``, ``prevalence_background``, ``difference`` (target minus
    background), ``odds_ratio``, ``pvalue`` (two-sided Fisher's exact test of the 2 x 2
    table holds/lacks x target/background) and ``qvalue`` (Benjamini-Hochberg over the
    K features). The test treats the allocation as given: it is calibrated when the
    features were found blind to the groups (``tl.latent_features`` fits all cells
    together and, by default, chooses its genes without the labels).

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.fangs import feature_enrichment
    >>> is_target = np.repeat([True, False], 15)
    >>> estimate = is_target[:, None].astype(np.uint8)               # one feature, held by the target cells only
    >>> result = feature_enrichment(estimate, is_target)
    >>> result["prevalence_target"], result["prevalence_background"]
    (array([1.]), array([0.]))
    >>> bool(result["qvalue"][0] < 1e-6)                             # Fisher's exact test, BH over the features
    True
    """
    from scipy.stats import false_discovery_control, fisher_exact

    E = _as_binary(estimate, "estimate")
    t = np.asarray(is_target, dtype=bool)
    if t.shape != (E.shape[0],):
        raise ScontrastError(f"is_target: has shape {t.shape} but the estimate has {E.shape[0]} rows")
    n_t, n_b = int(t.sum()), int((~t).sum())
    if min(n_t, n_b) == 0:
        raise ScontrastError(f"is_target: {n_t} target and {n_b} background cells; both groups are needed")
    ht = E[t].sum(axis=0).astype(np.int64)
    hb = E[~t].sum(axis=0).astype(np.int64)
    odds = np.empty(E.shape[1])
    p = np.empty(E.shape[1])
    for k in range(E.shape[1]):
        res = fisher_exact([[ht[k], n_t - ht[k]], [hb[k], n_b - hb[k]]])
        odds[k], p[k] = float(res.statistic), float(res.pvalue)
    q = false_discovery_control(p) if p.size else p.copy()
    return {"n_target": ht, "n_background": hb, "prevalence_target": ht / n_t, "prevalence_background": hb / n_b,
            "difference": ht / n_t - hb / n_b, "odds_ratio": odds, "pvalue": p, "qvalue": np.asarray(q, dtype=float)}


def replicate_feature_enrichment(estimate, is_target, replicates, *, paired: bool, max_labellings: int = 9999,
                                 random_state=None, blocks=None) -> dict[str, np.ndarray]:
    """Feature enrichment with the replicate (donor, sample) as the unit.

    Each replicate's prevalence of each feature is computed in each group it gives cells to;
    the groups' replicate-mean prevalences are compared by permutation of the replicate labels
    (unpaired) or by sign flips of the within-replicate differences (paired), exactly when the
    labellings are few (:func:`scontrast.design.replicate_mean_test`), then Benjamini-Hochberg
    over the K features. Cells of one donor share that donor's prevalence, so a test over cells
    reads donor differences as group differences; this one does not.

    Parameters
    ----------
    estimate : (N, K) binary
    is_target : (N,) bool
    replicates : (N,) array-like, each cell's replicate
    paired : bool
        Every replicate gives cells to both groups.
    blocks : (N,) array-like, optional
        Each cell's block (batch, site; one per replicate): replicates are relabelled only within
        their block, and the floor follows.

    Returns
    -------
    dict of (K,) arrays ``prevalence_target``, ``prevalence_background`` (means over the group's
    replicates), ``difference``, ``pvalue``, ``qvalue``; ``replicate_names`` (R,),
    ``replicate_prevalence`` (R, K) (paired: (R, 2, K), [target, background]), the scalar
    ``pvalue_floor`` (the smallest p-value the labellings allow) and, with ``blocks``,
    ``replicate_blocks`` (R,).

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.fangs import replicate_feature_enrichment
    >>> is_target = np.repeat([True, False], 24)
    >>> donor = np.repeat(np.arange(8), 6)                   # 4 donors per group, 6 cells each
    >>> estimate = is_target[:, None].astype(np.uint8)       # a feature of every target cell and no other
    >>> result = replicate_feature_enrichment(estimate, is_target, donor, paired=False, random_state=0)
    >>> round(float(result["pvalue"][0]), 4), round(float(result["pvalue_floor"]), 4)   # 4 against 4 donors: 1/35 at best
    (0.0286, 0.0286)
    """
    from scipy.stats import false_discovery_control

    from ..design import replicate_mean_test

    E = _as_binary(estimate, "estimate").astype(float)
    t = np.asarray(is_target, dtype=bool)
    reps = np.asarray(replicates).astype(str)
    if t.shape != (E.shape[0],) or reps.shape != (E.shape[0],):
        raise ScontrastError(f"is_target, replicates: expected shape ({E.shape[0]},), got {t.shape} and {reps.shape}")
    names = np.unique(reps)
    rep_blocks = None if blocks is None else _replicate_blocks(blocks, reps, names)

    def prevalence(mask):
        return E[mask].mean(axis=0) if mask.any() else np.full(E.shape[1], np.nan)

    if paired:
        values = np.stack([[prevalence((reps == r) & t), prevalence((reps == r) & ~t)] for r in names])
        groups = np.ones(names.size, dtype=bool)
        pt, pb = values[:, 0].mean(axis=0), values[:, 1].mean(axis=0)
    else:
        groups = np.array([t[reps == r].all() for r in names])
        mixed = [r for r in names if t[reps == r].any() and not t[reps == r].all()]
        if mixed:
            raise ScontrastError(f"replicates: '{mixed[0]}' has cells in both groups; declare the design paired")
        values = np.stack([prevalence(reps == r) for r in names])
        pt, pb = values[groups].mean(axis=0), values[~groups].mean(axis=0)
    if np.isnan(values).any():
        raise ScontrastError("replicates: a replicate has no cell in a group it must cover")
    diff, p, floor = replicate_mean_test(values, groups, paired=paired, max_labellings=max_labellings,
                                         random_state=random_state, blocks=rep_blocks)
    q = false_discovery_control(p) if p.size else p.copy()
    out = {"prevalence_target": pt, "prevalence_background": pb, "difference": diff, "pvalue": p,
           "qvalue": np.asarray(q, dtype=float), "replicate_names": names, "replicate_prevalence": values,
           "pvalue_floor": floor}
    if rep_blocks is not None:
        out["replicate_blocks"] = rep_blocks
    return out


def _replicate_blocks(blocks, reps: np.ndarray, names: np.ndarray) -> np.ndarray:
    """Each replicate's block (R,) from the cells' blocks (N,); a one-line error for a replicate in two blocks."""
    cells = np.asarray(blocks).astype(str)
    if cells.shape != reps.shape:
        raise ScontrastError(f"blocks: expected shape {reps.shape}, got {cells.shape}")
    out = []
    for r in names:
        values = np.unique(cells[reps == r])
        if values.size > 1:
            raise ScontrastError(f"blocks: replicate '{r}' is in {values.size} blocks ({', '.join(values[:3])}); "
                                 "a block is a property of the replicate")
        out.append(values[0])
    return np.array(out)
