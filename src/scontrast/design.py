"""The study design: which replicate (donor, patient, sample) each cell comes from.

Cells of one donor are not independent draws: donors differ from each other, so a test that
treats cells as the unit reads a difference between *donors* as a difference between *groups*
(pseudo-replication). When a replicate column is declared, every p-value, error and enrichment of
scontrast is computed at the level of the replicate, with the functions of this module:

- :func:`declare_design` validates the declaration (``replicate``, ``paired``) against the cells
  and says which replicates are kept; :func:`preprocess <scontrast.preprocess.preprocess>` records
  the result in ``obs['scontrast_replicate']`` and ``uns['scontrast']['design']``.
- :func:`replicate_labellings` lists the relabellings that are equally likely under the null of
  exchangeable replicates (unpaired: which replicates are target; paired: a swap of the two labels
  within each replicate; within blocks when a block is declared), all of them when few, a random
  sample otherwise; :func:`labelling_floor` is the smallest p-value they allow.
- :func:`grouped_folds` are cross-validation folds that hold out whole replicates.
- :func:`replicate_mean_test` compares per-replicate summaries (e.g. a feature's prevalence) by
  permutation of replicate labels or sign flips.
- :func:`between_replicate_share` is the share of a score's variance that lies between replicates.
- :func:`undeclared_design_columns` finds obs columns that look like an undeclared design.

Everything here is numpy/pandas in, numpy out (no AnnData).
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .core import CannotRun, ScontrastError, check_int, check_random_state

__all__ = [
    "REPLICATE_KEY",
    "DESIGN_LIKE",
    "Design",
    "declare_design",
    "replicate_labellings",
    "labelling_floor",
    "has_mirror",
    "cell_labels",
    "cell_blocks",
    "grouped_folds",
    "replicate_mean_test",
    "between_replicate_share",
    "undeclared_design_columns",
]

#: obs column that :func:`scontrast.preprocess.preprocess` fills with each kept cell's replicate
REPLICATE_KEY = "scontrast_replicate"

#: words that name a replicate-like obs column (matched as whole words of the column name)
DESIGN_LIKE = ("donor", "patient", "sample", "individual", "subject", "mouse", "replicate", "batch",
               "orig.ident", "library")


@dataclass(frozen=True)
class Design:
    """A validated replicate design.

    Attributes
    ----------
    column : str
        The obs column the replicates were read from.
    paired : bool
        Each replicate gives cells to both groups (e.g. tumour and normal tissue of one patient).
    keep : ndarray of bool, shape (N,)
        Cells of the kept replicates.
    replicates : ndarray of str, shape (N,)
        Each cell's replicate ('' for a dropped cell).
    target_replicates, background_replicates : tuple of str
        The kept replicates of each group (paired: the same list twice).
    dropped : dict
        Dropped replicate -> the reason, one line each.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.design import declare_design
    >>> design = declare_design(np.repeat(["a", "b", "c", "d", "e"], 4), np.repeat([True, True, True, False, False], 4),
    ...                         column="donor")
    >>> type(design).__name__, design.paired, design.target_replicates, design.background_replicates
    ('Design', False, ('a', 'b', 'c'), ('d', 'e'))
    >>> int(design.keep.sum()), design.replicates[:5].tolist()
    (20, ['a', 'a', 'a', 'a', 'b'])
    """

    column: str
    paired: bool
    keep: np.ndarray
    replicates: np.ndarray
    target_replicates: tuple
    background_replicates: tuple
    dropped: dict = field(default_factory=dict)

    def summary(self) -> str:
        """One line stating the unit, e.g. ``replicate: patient, 6 target / 6 background (paired)``."""
        kind = "paired" if self.paired else "unpaired"
        return (f"replicate: {self.column}, {len(self.target_replicates)} target / "
                f"{len(self.background_replicates)} background ({kind})")

    def as_uns(self) -> dict:
        """The design as ``uns['scontrast']['design']`` holds it (h5ad-writable values)."""
        return {
            "replicate": self.column,
            "paired": bool(self.paired),
            "unit": "replicate",
            "summary": self.summary(),
            "target_replicates": np.array(self.target_replicates, dtype=str),
            "background_replicates": np.array(self.background_replicates, dtype=str),
            "dropped": np.array([f"{r}: {why}" for r, why in self.dropped.items()], dtype=str),
        }


def declare_design(replicate, is_target, *, column: str, paired: bool = False, min_cells: int = 3) -> Design:
    """Validate a replicate design against the cells.

    Parameters
    ----------
    replicate : array-like, shape (N,)
        Each cell's replicate (donor, patient, sample); missing values (NaN/None) drop the cell.
    is_target : array-like of bool, shape (N,)
    column : str
        Name of the obs column ``replicate`` came from (for messages).
    paired : bool
        False: each replicate belongs to one group; a replicate with cells in both groups is
        refused (one line suggesting ``paired: true``). True: each replicate gives cells to both
        groups; a replicate missing a group is dropped with a reason.
    min_cells : int
        A replicate with fewer cells than this in a group it belongs to is dropped with a reason.

    Returns
    -------
    Design

    Raises
    ------
    ScontrastError
        An unpaired replicate in both groups, or fewer than 2 replicates (pairs) left in a group.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.design import declare_design
    >>> donor = np.repeat(["a", "b", "c", "d"], 5)
    >>> design = declare_design(donor, np.repeat([True, True, False, False], 5), column="donor")
    >>> design.target_replicates, design.background_replicates, design.paired
    (('a', 'b'), ('c', 'd'), False)
    """
    check_int(min_cells, "min_cells_per_replicate", 1)
    if not isinstance(paired, (bool, np.bool_)):
        raise ScontrastError(f"paired: expected true or false, got {paired!r}")
    rep = pd.Series(np.asarray(replicate, dtype=object))
    is_target = np.asarray(is_target, dtype=bool)
    has = rep.notna().to_numpy()
    names = np.where(has, rep.astype(str).to_numpy(), "")
    counts = pd.crosstab(names[has], is_target[has])
    n_t = counts.get(True, pd.Series(0, index=counts.index))
    n_b = counts.get(False, pd.Series(0, index=counts.index))
    dropped: dict[str, str] = {}
    if not paired:
        both = [r for r in counts.index if n_t[r] > 0 and n_b[r] > 0]
        if both:
            raise ScontrastError(
                f"replicate '{both[0]}' of obs column '{column}' has cells in both groups ({int(n_t[both[0]])} target, "
                f"{int(n_b[both[0]])} background; {len(both)} such replicate(s)): declare paired: true if each "
                "replicate gives cells to both groups")
        for r in counts.index:
            n = int(n_t[r] + n_b[r])
            if n < min_cells:
                dropped[r] = f"{n} cell(s), fewer than min_cells_per_replicate={min_cells}"
    else:
        for r in counts.index:
            if n_t[r] == 0 or n_b[r] == 0:
                dropped[r] = f"no {'target' if n_t[r] == 0 else 'background'} cell (paired design)"
            elif min(n_t[r], n_b[r]) < min_cells:
                dropped[r] = (f"{int(n_t[r])} target / {int(n_b[r])} background cells, fewer than "
                              f"min_cells_per_replicate={min_cells} in a group")
    kept = [r for r in counts.index if r not in dropped]
    keep = has & np.isin(names, kept)
    tgt = tuple(sorted(r for r in kept if n_t[r] > 0))
    bkg = tuple(sorted(r for r in kept if n_b[r] > 0))
    need = "pairs" if paired else "replicates"
    if len(tgt) < 2 or len(bkg) < 2:
        raise ScontrastError(
            f"obs column '{column}' (replicate): {len(tgt)} target and {len(bkg)} background {need} remain"
            f"{' after dropping ' + _some(sorted(dropped)) if dropped else ''}; a replicate-level test needs "
            "at least 2 in each group")
    return Design(column=column, paired=bool(paired), keep=keep, replicates=np.where(keep, names, ""),
                  target_replicates=tgt, background_replicates=bkg, dropped=dropped)


def replicate_labellings(target_of_replicate, *, paired: bool, max_labellings: int = 1000,
                         random_state=None, blocks=None) -> tuple[np.ndarray, bool]:
    """The relabellings of replicates that are equally likely under the null.

    Parameters
    ----------
    target_of_replicate : array-like of bool, shape (R,)
        Unpaired: True for a target replicate. Paired: ignored but for its length R (the pairs).
    paired : bool
        Unpaired: a labelling chooses which R_t of the R replicates are target (C(R, R_t) of
        them). Paired: a labelling swaps the two groups' labels within some replicates (2^R).
    max_labellings : int
        All labellings when there are at most this many, else this many drawn at random
        (uniformly, with replacement, the observed labelling first).
    random_state : None, int or Generator
    blocks : array-like, shape (R,), optional
        Each replicate's block (batch, site). Unpaired: a labelling keeps every block's number of
        target replicates, so that no replicate changes group across blocks (the product over
        blocks of C(R_b, R_bt) labellings; drawn block by block when more than
        ``max_labellings``). Paired: a swap stays within its replicate, so blocks change nothing.

    Returns
    -------
    labellings : ndarray of bool, shape (L, R)
        Row 0 is the observed labelling. Unpaired: True = the replicate is target. Paired: True =
        the replicate's labels are swapped (row 0 all False).
    exact : bool
        True when every labelling is listed (the p-value is then exact).

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.design import replicate_labellings
    >>> target = np.array([True, False, True, False])      # one target donor in each of two batches
    >>> lab, exact = replicate_labellings(target, paired=False, blocks=["b1", "b1", "b2", "b2"])
    >>> lab.astype(int).tolist()                           # 2 x 2: no donor moves across batches
    [[1, 0, 1, 0], [1, 0, 0, 1], [0, 1, 1, 0], [0, 1, 0, 1]]
    """
    obs = np.asarray(target_of_replicate, dtype=bool)
    R = obs.size
    check_int(max_labellings, "max_labellings", 2)
    if blocks is not None and not paired:
        return _blocked_labellings(obs, _block_codes(blocks, R), max_labellings, random_state)
    if paired:
        total = 2 ** R
        if total <= max_labellings:
            codes = np.arange(total)
            out = ((codes[:, None] >> np.arange(R)) & 1).astype(bool)
            return out, True
        rng = check_random_state(random_state)
        out = rng.random((max_labellings, R)) < 0.5
        out[0] = False
        return out, False
    r_t = int(obs.sum())
    total = math.comb(R, r_t)
    if total <= max_labellings:
        rows = [obs]
        for chosen in itertools.combinations(range(R), r_t):
            lab = np.zeros(R, dtype=bool)
            lab[list(chosen)] = True
            if not np.array_equal(lab, obs):
                rows.append(lab)
        return np.array(rows), True
    rng = check_random_state(random_state)
    out = np.zeros((max_labellings, R), dtype=bool)
    out[0] = obs
    for i in range(1, max_labellings):
        out[i, rng.choice(R, r_t, replace=False)] = True
    return out, False


def cell_blocks(obs: pd.DataFrame, column: str) -> np.ndarray:
    """Each cell's block (N,) str from the obs column ``column``; a one-line error when absent or missing.

    Examples
    --------
    >>> import pandas as pd
    >>> from scontrast.design import cell_blocks
    >>> cell_blocks(pd.DataFrame({"batch": ["b1", "b1", "b2"]}), "batch").tolist()
    ['b1', 'b1', 'b2']
    """
    if column not in obs:
        raise ScontrastError(f"block '{column}': no such obs column; have {list(obs.columns)[:20]}")
    values = obs[column]
    if values.isna().any():
        raise ScontrastError(f"block '{column}': {int(values.isna().sum())} cell(s) have no block")
    return values.astype(str).to_numpy()


def _block_codes(blocks, R: int) -> np.ndarray:
    """Integer codes (R,) of the replicates' blocks; a one-line error for a wrong length or a missing block."""
    values = pd.Series(np.asarray(blocks, dtype=object).ravel())
    if values.size != R:
        raise ScontrastError(f"blocks: expected one block per replicate ({R}), got {values.size}")
    if values.isna().any():
        raise ScontrastError("blocks: a replicate has no block (missing value)")
    return pd.factorize(values.astype(str))[0]


def _blocked_labellings(obs: np.ndarray, codes: np.ndarray, max_labellings: int,
                        random_state) -> tuple[np.ndarray, bool]:
    """Unpaired labellings (L, R) that keep every block's number of target replicates, row 0 observed."""
    groups = [np.flatnonzero(codes == b) for b in np.unique(codes)]
    total = math.prod(math.comb(g.size, int(obs[g].sum())) for g in groups)
    if total <= max_labellings:
        rows = [obs]
        per_block = [list(itertools.combinations(g, int(obs[g].sum()))) for g in groups]
        for choice in itertools.product(*per_block):
            lab = np.zeros(obs.size, dtype=bool)
            for chosen in choice:
                lab[list(chosen)] = True
            if not np.array_equal(lab, obs):
                rows.append(lab)
        return np.array(rows), True
    rng = check_random_state(random_state)
    out = np.zeros((max_labellings, obs.size), dtype=bool)
    out[0] = obs
    for i in range(1, max_labellings):
        for g in groups:
            out[i, rng.choice(g, int(obs[g].sum()), replace=False)] = True
    return out, False


def labelling_floor(labellings: np.ndarray, *, paired: bool, exact: bool, symmetric: bool = True,
                    blocks=None) -> float:
    """The smallest p-value the labellings allow.

    Exact enumeration: the share of labellings that give the observed statistic by construction
    (the observed one and, for a statistic ``symmetric`` in the two groups, its mirror: all swapped
    when paired, the complement when both groups have as many replicates). Sampled: 1/L.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.design import labelling_floor, replicate_labellings
    >>> target_of_replicate = np.array([True, True, True, False, False, False])   # 3 against 3 donors
    >>> labellings, exact = replicate_labellings(target_of_replicate, paired=False)
    >>> labellings.shape, exact                                       # every way to choose 3 of 6 donors
    ((20, 6), True)
    >>> labelling_floor(labellings, paired=False, exact=exact)        # no p-value below 0.1 exists
    0.1
    """
    L = labellings.shape[0]
    if not exact:
        return 1.0 / L
    mirror = 2 if symmetric and has_mirror(labellings[0], paired=paired, blocks=blocks) else 1
    return min(1.0, mirror / L)


def has_mirror(target_of_replicate, *, paired: bool, blocks=None) -> bool:
    """Whether swapping the two groups of a labelling gives another labelling of the set.

    Paired: always (all labels swapped). Unpaired: when both groups have as many replicates (the
    complement), within every block when ``blocks`` (R,) are given. A statistic symmetric in the
    groups then ties every labelling with its mirror.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.design import has_mirror
    >>> has_mirror(np.array([True, True, False, False]), paired=False)   # 2 against 2: swapping gives a labelling
    True
    >>> has_mirror(np.array([True, True, True, False]), paired=False)
    False
    """
    target = np.asarray(target_of_replicate, dtype=bool)
    if paired:
        return True
    codes = np.zeros(target.size, dtype=int) if blocks is None else _block_codes(blocks, target.size)
    return all(2 * int(target[codes == b].sum()) == int((codes == b).sum()) for b in np.unique(codes))


def cell_labels(labelling: np.ndarray, replicate_index: np.ndarray, is_target: np.ndarray, *, paired: bool) -> np.ndarray:
    """Cell-level target flags under one replicate labelling.

    Parameters
    ----------
    labelling : ndarray of bool, shape (R,)
        One row of :func:`replicate_labellings`.
    replicate_index : ndarray of int, shape (N,)
        Each cell's replicate as an index into the labelling.
    is_target : ndarray of bool, shape (N,)
        The observed cell labels.

    Returns
    -------
    ndarray of bool, shape (N,)

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.design import cell_labels
    >>> replicate_index = np.array([0, 0, 1, 1])             # cells of donors 0 and 1
    >>> is_target = np.array([True, False, True, False])
    >>> cell_labels(np.array([False, True]), replicate_index, is_target, paired=False).tolist()   # donor 1 as target
    [False, False, True, True]
    """
    if paired:
        return is_target ^ labelling[replicate_index]
    return labelling[replicate_index]


def _some(names: list, shown: int = 10) -> str:
    """``'a, b, c'``, or the first ``shown`` names and how many more (a message stays one readable line)."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(map(str, names[:shown])) + more


def grouped_folds(y, groups, n_splits: int, random_state=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Stratified cross-validation folds that never split a replicate.

    Parameters
    ----------
    y : array-like, shape (N,)
        Class labels.
    groups : array-like, shape (N,)
        Each cell's replicate: all its cells fall in the same fold.
    n_splits : int
        Folds; reduced to the number of replicates of the smaller class when fewer (leave one
        replicate out per class).

    Returns
    -------
    list of (train, test) index arrays

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.design import grouped_folds
    >>> y = np.repeat([1, 0], 12)
    >>> donor = np.repeat(np.arange(6), 4)                  # 6 donors of 4 cells
    >>> folds = grouped_folds(y, donor, n_splits=3, random_state=0)
    >>> all(set(donor[train]).isdisjoint(donor[test]) for train, test in folds)   # no donor on both sides
    True
    """
    from sklearn.model_selection import StratifiedGroupKFold

    y = np.asarray(y)
    groups = np.asarray(groups)
    per_class = [np.unique(groups[y == c]).size for c in np.unique(y)]
    k = min(int(n_splits), min(per_class), np.unique(groups).size)
    if k < 2:
        # the design, not a setting, rules it out: a method records that it cannot run (scontrast.io.CannotRun)
        raise CannotRun(f"grouped folds: a class has {min(per_class)} replicate(s); holding out whole "
                        "replicates needs at least 2 in each class")
    if random_state is None or isinstance(random_state, (int, np.integer)):
        seed = random_state
    else:
        seed = int(check_random_state(random_state).integers(2**31 - 1))
    cv = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed)
    return [(tr, te) for tr, te in cv.split(np.zeros((y.size, 1)), y, groups)]


def replicate_mean_test(values, target_of_replicate, *, paired: bool, max_labellings: int = 9999,
                        random_state=None, blocks=None) -> tuple[np.ndarray, np.ndarray, float]:
    """Two-sided permutation test of a per-replicate summary between the groups.

    Parameters
    ----------
    values : ndarray, shape (R, F) (unpaired) or (R, 2, F) (paired: [target, background] per pair)
        A summary per replicate (e.g. each feature's prevalence among its cells), F features.
    target_of_replicate : ndarray of bool, shape (R,)
        Unpaired: the replicates' groups. Paired: ignored but for R.
    paired : bool
        Unpaired: the difference of the groups' means of replicates, against every (or sampled)
        choice of target replicates. Paired: the mean within-pair difference, against sign flips.
    blocks : array-like, shape (R,), optional
        Each replicate's block: relabellings stay within blocks (:func:`replicate_labellings`).

    Returns
    -------
    difference : ndarray, shape (F,)
        Observed target minus background (mean over replicates).
    pvalue : ndarray, shape (F,)
        Share of labellings whose |difference| reaches the observed one (observed included).
    floor : float
        The smallest p-value these labellings allow.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.design import replicate_mean_test
    >>> values = np.array([[1.0, 0.5], [1.1, 0.4], [0.9, 0.6],     # 3 target donors, 2 features
    ...                    [0.1, 0.5], [0.0, 0.6], [0.2, 0.4]])    # 3 background donors
    >>> difference, pvalue, floor = replicate_mean_test(values, np.array([True] * 3 + [False] * 3), paired=False)
    >>> np.round(difference, 2).tolist(), np.round(pvalue, 2).tolist(), round(floor, 2)   # 20 relabellings: p >= 0.1
    ([0.9, 0.0], [0.1, 1.0], 0.1)
    """
    values = np.asarray(values, dtype=float)
    lab, exact = replicate_labellings(target_of_replicate, paired=paired, max_labellings=max_labellings,
                                      random_state=random_state, blocks=blocks)
    if paired:
        d = values[:, 0] - values[:, 1]                     # (R, F)
        signs = np.where(lab, -1.0, 1.0)                     # (L, R)
        stats = signs @ d / d.shape[0]                       # (L, F)
    else:
        t = lab.astype(float)
        stats = (t @ values) / t.sum(1, keepdims=True) - ((1 - t) @ values) / (1 - t).sum(1, keepdims=True)
    obs = stats[0]
    # relative tolerance: labellings that tie with the observed one in exact arithmetic count
    tol = 1e-12 * max(1.0, float(np.abs(stats).max(initial=0.0)))  # F = 0: nothing to test
    pvalue = (np.abs(stats) >= np.abs(obs) - tol).mean(axis=0)
    return obs, pvalue, labelling_floor(lab, paired=paired, exact=exact, blocks=blocks)


def between_replicate_share(scores, replicates) -> np.ndarray:
    """Share of each score's variance that lies between replicates (eta squared).

    Parameters
    ----------
    scores : ndarray, shape (N, k)
    replicates : array-like, shape (N,)

    Returns
    -------
    ndarray, shape (k,)
        Between-replicate sum of squares over the total, in [0, 1] (NaN for a constant score).

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.design import between_replicate_share
    >>> scores = np.r_[np.zeros(10), np.ones(10)][:, None]  # a score that only separates the two donors
    >>> between_replicate_share(scores, np.repeat(["a", "b"], 10)).tolist()
    [1.0]
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim == 1:
        scores = scores[:, None]
    codes, inverse = np.unique(np.asarray(replicates), return_inverse=True)
    centred = scores - scores.mean(0)
    n = np.bincount(inverse, minlength=codes.size).astype(float)
    means = np.stack([np.bincount(inverse, weights=centred[:, j], minlength=codes.size) for j in range(scores.shape[1])],
                     axis=1) / n[:, None]
    between = (n[:, None] * means ** 2).sum(0)
    total = (centred ** 2).sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, between / total, np.nan)


def _words(name: str) -> set[str]:
    low = str(name).lower()
    return {low} | set(re.split(r"[^a-z0-9.]+|(?<=[a-z])(?=[0-9])", low)) | set(re.split(r"[^a-z0-9]+", low))


def undeclared_design_columns(obs: pd.DataFrame, is_target, *, exclude=()) -> list[str]:
    """obs columns named like a replicate that take >= 2 values within both groups.

    A column is named like a replicate when one of its words (split at non-alphanumerics) is one of
    :data:`DESIGN_LIKE` or a plural of one (``donor``, ``patient_id``, ``sample``, ``orig.ident``,
    ``mouse``...).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from scontrast.design import undeclared_design_columns
    >>> obs = pd.DataFrame({"donor": ["a", "b"] * 4, "batch": ["x"] * 8})
    >>> undeclared_design_columns(obs, np.arange(8) < 4)     # donors in both groups, not declared
    ['donor']
    """
    is_target = np.asarray(is_target, dtype=bool)
    out = []
    for col in obs.columns:
        if col in exclude:
            continue
        words = _words(col)
        if not any(w in words or w + "s" in words or w + "es" in words for w in DESIGN_LIKE):
            continue
        values = obs[col]
        if values.loc[is_target].nunique(dropna=True) >= 2 and values.loc[~is_target].nunique(dropna=True) >= 2:
            out.append(str(col))
    return out


def stratified_subsample(n: int, size: int, strata, rng: np.random.Generator) -> np.ndarray:
    """``size`` of ``n`` rows (ascending) drawn without replacement, every stratum in proportion to its size.

    Largest remainders settle the rounding (ties: the first stratum) and every stratum keeps at
    least one row; ``strata`` (n,) labels, or None: one stratum (a plain random subsample). Used
    where a method learns from a subsample of many cells (latent_features ``max_cells``, SPARDA's
    ``cv_max_cells``), with the group and the replicate as strata.
    """
    labels = np.zeros(n, dtype=np.int64) if strata is None else np.unique(np.asarray(strata), return_inverse=True)[1]
    sizes = np.bincount(labels)
    quota = sizes * (size / n)
    take = np.maximum(np.floor(quota).astype(np.int64), 1)
    short = size - int(take.sum())
    if short > 0:
        take[np.argsort(-(quota - np.floor(quota)), kind="stable")[:short]] += 1
    take = np.minimum(take, sizes)
    picked = [rng.choice(np.flatnonzero(labels == s), int(t), replace=False) for s, t in enumerate(take)]
    return np.sort(np.concatenate(picked))
