"""SPARDA's test and lambda folds at the level of the replicate (donor, patient, sample).

Cells of one donor are not independent draws, so relabelling *cells* (the ``permute`` test) makes
every difference between donors look like a difference between groups. Under the null that the
replicates are exchangeable between the groups, the labellings of *replicates* are equally likely:
unpaired, which replicates are target; paired (each replicate gives cells to both groups), a swap
of the two labels within some replicates. :func:`replicate_statistics` computes the ``permute``
test's statistics (the re-optimised divergence and its shape part, combined by min-p within the
set) for every such labelling, all of them when few (an exact test whose floor is the inverse of
their number), a random sample otherwise. :func:`replicate_folds` are cross-validation folds that
hold out whole replicates, so the penalty is chosen for new donors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core import ScontrastError, progress
from ..design import cell_labels, has_mirror, replicate_labellings


@dataclass(frozen=True)
class Replicates:
    """Each cell's replicate, as :meth:`SPARDA.fit` receives it.

    Attributes
    ----------
    index : ndarray of int, shape (n + m,)
        Each pooled cell's replicate (target cells first), an index into ``names``.
    names : ndarray of str, shape (R,)
    target : ndarray of bool, shape (R,)
        Unpaired: the replicate's group. Paired: all True (every replicate is in both groups).
    paired : bool
    blocks : ndarray of str, shape (R,), or None
        Each replicate's block (batch, site): relabellings keep every block's number of target
        replicates (:func:`scontrast.design.replicate_labellings`). None: no block.
    """

    index: np.ndarray
    names: np.ndarray
    target: np.ndarray
    paired: bool
    blocks: np.ndarray | None = None

    @classmethod
    def from_labels(cls, replicates_x, replicates_y, n: int, m: int, paired: bool, blocks_x=None,
                    blocks_y=None) -> Replicates:
        """Validate the replicates of the target (``n``) and background (``m``) cells, and their blocks.

        ``blocks_x``, ``blocks_y`` (n,), (m,): each cell's block, one per replicate (both or neither).
        """
        rx = np.asarray(replicates_x).astype(str)
        ry = np.asarray(replicates_y).astype(str)
        if rx.shape != (n,) or ry.shape != (m,):
            raise ScontrastError(f"replicates_x, replicates_y: expected shapes ({n},) and ({m},), got {rx.shape} and "
                                 f"{ry.shape}")
        names, index = np.unique(np.concatenate([rx, ry]), return_inverse=True)
        blocks = _replicate_blocks(blocks_x, blocks_y, index, names)
        in_x, in_y = np.isin(names, rx), np.isin(names, ry)
        if paired:
            missing = names[~(in_x & in_y)]
            if missing.size:
                raise ScontrastError(f"replicates: '{missing[0]}' has no cell in one group of a paired design")
            if names.size < 2:
                raise ScontrastError("replicates: a paired test needs at least 2 replicates")
            target = np.ones(names.size, dtype=bool)
        else:
            both = names[in_x & in_y]
            if both.size:
                raise ScontrastError(f"replicates: '{both[0]}' has cells in both groups; declare the design paired")
            if in_x.sum() < 2 or in_y.sum() < 2:
                raise ScontrastError(f"replicates: {int(in_x.sum())} target and {int(in_y.sum())} background "
                                     "replicates; a replicate-level test needs at least 2 in each group")
            target = in_x
        return cls(index=index, names=names, target=target, paired=bool(paired), blocks=blocks)

    def summary(self) -> str:
        within = "" if self.blocks is None else f", relabelled within {np.unique(self.blocks).size} blocks"
        if self.paired:
            return f"{self.names.size} replicates, paired{within}"
        return f"{int(self.target.sum())} target / {int((~self.target).sum())} background replicates{within}"


def _replicate_blocks(blocks_x, blocks_y, index: np.ndarray, names: np.ndarray) -> np.ndarray | None:
    """Each replicate's block (R,) from the cells' blocks, or None; a one-line error for a replicate in two blocks."""
    if blocks_x is None and blocks_y is None:
        return None
    if blocks_x is None or blocks_y is None:
        raise ScontrastError("blocks_x, blocks_y: give both (each cell's block) or neither")
    cells = np.concatenate([np.asarray(blocks_x, dtype=object), np.asarray(blocks_y, dtype=object)])
    if cells.shape != index.shape:
        raise ScontrastError(f"blocks_x, blocks_y: expected {index.size} cells in all, got {cells.size}")
    if any(v is None or (isinstance(v, float) and np.isnan(v)) for v in cells):
        raise ScontrastError("blocks_x, blocks_y: a cell has no block (missing value)")
    cells = cells.astype(str)
    out = np.empty(names.size, dtype=object)
    for r in range(names.size):
        values = np.unique(cells[index == r])
        if values.size > 1:
            raise ScontrastError(f"blocks: replicate '{names[r]}' is in {values.size} blocks ({', '.join(values[:3])}); "
                                 "a block is a property of the replicate")
        out[r] = values[0]
    return out.astype(str)


def _distinct_labellings(reps: Replicates, max_labellings: int, rng) -> tuple[np.ndarray, bool, int]:
    """The labellings to evaluate, whether they are all of them, and the number they stand for.

    With ``reps.blocks``, unpaired labellings keep every block's number of target replicates.
    With every labelling listed and a statistic symmetric in the two groups, a labelling and its
    mirror (all swapped, paired; the complement, with as many target as background replicates in
    every block) give the same statistic; only the half holding the observed labelling's choice for the first
    replicate is evaluated, so that ties by symmetry cannot be broken by rounding.
    """
    lab, exact = replicate_labellings(reps.target, paired=reps.paired, max_labellings=max_labellings,
                                      random_state=rng, blocks=reps.blocks)
    if exact and has_mirror(reps.target, paired=reps.paired, blocks=reps.blocks):
        lab = lab[lab[:, 0] == lab[0, 0]]
    return lab, exact, lab.shape[0]


def replicate_statistics(statistics, Z: np.ndarray, n: int, reps: Replicates, lab: np.ndarray,
                         batch: int) -> np.ndarray:
    """The two ``permute`` statistics of every replicate labelling, observed first.

    Parameters
    ----------
    statistics : callable ``(Z, n_target, perms) -> (P, 2)``
        The statistics of the labellings ``perms`` (P, n + m) whose first ``n_target`` cells
        are target (the ``permute`` test's, at its label-free penalties).
    Z : ndarray, shape (n + m, s)
        The pooled test genes, target cells first (label free).
    n : int
        Target cells (the first ``n`` rows of ``Z``).
    reps : Replicates
    lab : ndarray of bool, shape (L, R)
        The labellings of the replicates (:func:`_distinct_labellings`), the observed one first.

    Returns
    -------
    stats : ndarray, shape (L, 2)
    """
    L = lab.shape[0]
    observed = np.arange(Z.shape[0]) < n
    cells = np.array([cell_labels(row, reps.index, observed, paired=reps.paired) for row in lab])
    sizes = cells.sum(axis=1)
    if sizes.min() < 2 or (cells.shape[1] - sizes).min() < 2:
        raise ScontrastError("replicates: a relabelling leaves fewer than 2 cells in a group")
    stats = np.empty((L, 2))
    # labellings with as many target cells share one quantile grid: evaluated together
    chunks = [(size, rows[s:s + batch]) for size in np.unique(sizes)
              for rows in [np.flatnonzero(sizes == size)] for s in range(0, rows.size, batch)]
    for size, part in progress(chunks, desc=f"sparda: relabellings of the replicates ({L} in {len(chunks)} batches)",
                               logger="scontrast.sparda"):
        perms = np.array([np.r_[np.flatnonzero(cells[r]), np.flatnonzero(~cells[r])] for r in part])
        stats[part] = statistics(Z, int(size), perms)
    return stats


def replicate_folds(reps: Replicates, n: int, folds: int, seed: int) -> list[tuple[np.ndarray, ...]]:
    """Cross-validation folds of target and background cells that never split a replicate.

    Unpaired: the target replicates and the background replicates are each dealt into
    ``folds`` parts (fewer when a group has fewer replicates); paired: each replicate's target
    and background cells are held out together.

    Returns
    -------
    list of (train_x, test_x, train_y, test_y) row indices into the target (``n``) and
    background cells.
    """
    rng = np.random.default_rng(seed)
    rx, ry = reps.index[:n], reps.index[n:]
    if reps.paired:
        k = min(folds, reps.names.size)
        parts = np.array_split(rng.permutation(reps.names.size), k)
        held = [(p, p) for p in parts]
    else:
        tgt, bkg = np.flatnonzero(reps.target), np.flatnonzero(~reps.target)
        k = min(folds, tgt.size, bkg.size)
        held = list(zip(np.array_split(rng.permutation(tgt), k), np.array_split(rng.permutation(bkg), k)))
    out = []
    for hx, hy in held:
        tx, ty = np.isin(rx, hx), np.isin(ry, hy)
        out.append((np.flatnonzero(~tx), np.flatnonzero(tx), np.flatnonzero(~ty), np.flatnonzero(ty)))
    return out
