"""The lambda path and the inner folds that choose the lambdas of one QUADRO fit.

:func:`_lambda_path` lays out the (lambda1, lambda2) multiples in warm-start order;
:func:`_cross_validate_path` walks it on the inner folds (one :class:`_Fold` each, warm-started
point to point) and :func:`_select` chooses a point. What a fold does with its samples (screen,
moments, threshold, weights) is the fitting estimator's and comes in as :class:`FoldSteps`, so
this module knows nothing of the estimator. The outer folds are in :mod:`._outer`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from sklearn.model_selection import StratifiedKFold

from ..bounds import MAXIMUM
from ..core import ScontrastError
from ..design import grouped_folds
from ._moments import Moments
from ._scores import _auc, _quad_scores
from ._solver import RayleighProblem, RayleighSolution, solve_rayleigh
from ._utils import _take


@dataclass(frozen=True)
class FoldSteps:
    """What an inner fold does with its samples, as the fitting estimator does it.

    ``screen(X, is_two) -> (columns kept, screen or None)``; ``moments(X, is_two) -> Moments``;
    ``threshold(scores, is_two) -> float`` (the cut on Q); ``sample_weight(is_two) -> (n,) or None``;
    ``scoring`` 'auc' or 'error'; ``tol`` and ``max_iter`` of the solver along the path;
    ``patience``: lambda1 rows falling behind before the walk stops (None = never).
    """

    screen: Callable
    moments: Callable
    threshold: Callable
    sample_weight: Callable
    scoring: str
    tol: float
    max_iter: int
    patience: int | None

# --------------------------------------------------------------------------- the lambda path


def _lambda_grid(lambda_grid) -> np.ndarray:
    """The candidate multiples ``lambda_grid`` as an array (None = ``geomspace(3, 1e-3, 6)``), or ScontrastError."""
    if lambda_grid is None:
        return np.geomspace(3.0, 1e-3, 6)
    try:
        grid = np.asarray(lambda_grid, dtype=float)
    except (TypeError, ValueError):
        grid = np.array([np.nan])
    if grid.ndim != 1 or grid.size == 0 or not np.isfinite(grid).all() or (grid < 0).any():
        raise ScontrastError(
            f"lambda_grid: expected None or a non-empty list of finite numbers >= 0, got {lambda_grid!r}")
    if grid.size > MAXIMUM["quadro"]["lambda_grid"]:
        # the path is the product of the grid with itself when both lambdas are searched
        raise ScontrastError(f"lambda_grid: {grid.size} values is above its maximum of "
                             f"{MAXIMUM['quadro']['lambda_grid']} values")
    return grid


def _lambda_path(lambda1, lambda2, lambda_grid) -> list[tuple[float, float]]:
    """The (lambda1, lambda2) multiples to walk, in warm-start order (hyper-parameters already checked).

    A lambda given is the only value of its axis, one left None takes the grid's
    values from the largest down; the path snakes through the product so that each
    point's neighbour warm-starts it.
    """
    grid = np.sort(np.unique(_lambda_grid(lambda_grid)))[::-1]
    g1 = grid if lambda1 is None else np.array([float(lambda1)])
    g2 = grid if lambda2 is None else np.array([float(lambda2)])
    path = []
    for i, c1 in enumerate(g1):
        for c2 in (g2 if i % 2 == 0 else g2[::-1]):
            path.append((float(c1), float(c2)))
    return path


def _select(path, scores, rule: str) -> int:
    """Index of the chosen grid point from the (n_points, n_folds) CV scores (larger = better)."""
    mean = scores.mean(axis=1)
    top = int(np.argmax(mean))
    if rule == "best" or scores.shape[1] < 2:
        cut = mean[top] - 1e-12
    else:
        cut = mean[top] - scores[top].std(ddof=1) / math.sqrt(scores.shape[1])
    ok = np.flatnonzero(mean >= cut)
    if rule == "1se_lambda1":
        # the largest lambda1 with a point within one standard error, then its largest lambda2 within it
        c1 = max(path[i][0] for i in ok)
        return int(max((i for i in ok if path[i][0] == c1), key=lambda i: (path[i][1], mean[i])))
    strength = np.array([math.log(max(c1, 1e-300)) + math.log(max(c2, 1e-300)) for c1, c2 in path])
    # most penalised first; ties broken by the larger lambda1, then by the better score
    key = [(-strength[i], -path[i][0], -mean[i]) for i in ok]
    return int(ok[min(range(len(ok)), key=key.__getitem__)])


# --------------------------------------------------------------------------- the inner folds


@dataclass
class _Fold:
    """One inner fold of a QUADRO fit: its samples, genes and problem, and the warm start along the path."""

    train: np.ndarray  # rows the fold's model is fitted on
    held_out: np.ndarray  # rows it scores
    features: np.ndarray  # columns kept by the screen fitted on ``train``
    moments: Moments  # of ``train`` on ``features``
    problem: RayleighProblem
    reference: tuple[float, float]  # the problem's penalty scales
    x: np.ndarray | None = None  # the last solution (packed), the next point's warm start
    nu: float = 0.0  # its constraint multiplier
    held_block: np.ndarray | None = None  # X at the held-out rows and the fold's columns, made once

    def solve(self, c1: float, c2: float, tol: float, max_iter: int) -> RayleighSolution:
        """The solution at the multiples ``(c1, c2)``, warm-started at the previous one (which it replaces)."""
        sol = solve_rayleigh(self.problem, c1 * self.reference[0], c2 * self.reference[1], x0=self.x, nu0=self.nu,
                             tol=tol, max_iter=max_iter)
        self.x, self.nu = sol.x, sol.multiplier
        return sol

    def scores(self, X: np.ndarray, rows: np.ndarray, sol: RayleighSolution) -> np.ndarray:
        """Q of ``sol`` at the samples ``rows`` of X (on the fold's columns).

        The held-out rows are scored at every point of the path: their block of X is taken once
        (from a sparse X each take is a pass over all its entries).
        """
        m = self.moments
        if rows is self.held_out:
            if self.held_block is None:
                self.held_block = _take(X, rows, self.features)
            block = self.held_block
        else:
            block = _take(X, rows, self.features)
        return _quad_scores(block, sol.Omega, sol.delta, m.center, m.scale)


def _inner_folds(steps: FoldSteps, X, is_two, cv: int, seed: int, groups=None) -> list[_Fold]:
    """The ``cv`` stratified folds, each with its genes and moments chosen on its training part only.

    With ``groups`` (each sample's replicate) no replicate is split between training and held-out
    parts (fewer folds when a class has fewer than ``cv`` replicates): the lambdas are chosen for
    new replicates, not for new cells of the same ones.
    """
    if groups is None:
        splits = StratifiedKFold(n_splits=cv, shuffle=True, random_state=seed).split(X, is_two)
    else:
        splits = grouped_folds(is_two, groups, cv, random_state=seed)
    folds = []
    for tr, va in splits:
        feat, _ = steps.screen(X[tr], is_two[tr])
        mom = steps.moments(_take(X, tr, feat), is_two[tr])
        problem = RayleighProblem(mom)
        folds.append(_Fold(tr, va, feat, mom, problem, problem.reference_scale()))
    return folds


def _held_out_score(steps: FoldSteps, X, is_two, fold: _Fold, sol: RayleighSolution, s_va: np.ndarray) -> float:
    """The fold's CV score: AUC of the held-out Q ``s_va``, or minus its error at the training fold's cut."""
    va = fold.held_out
    if steps.scoring == "auc":
        return _auc(is_two[va], s_va)
    tr = fold.train
    t = steps.threshold(fold.scores(X, tr, sol), is_two[tr])
    wrong = (s_va > t) != is_two[va]
    return -float(np.average(wrong, weights=steps.sample_weight(is_two[va])))


def _row_behind(scores: np.ndarray, path, g: int, cv: int) -> bool:
    """Whether the lambda1 row ending at point ``g`` lies more than one standard error below the best so far."""
    done = scores[: g + 1]
    mean = done.mean(axis=1)
    top = int(np.argmax(mean))
    cut = mean[top] - done[top].std(ddof=1) / math.sqrt(cv)
    row = [i for i in range(g + 1) if path[i][0] == path[g][0]]
    return bool(mean[row].max() < cut)


def _cross_validate_path(steps: FoldSteps, X, is_two, path, cv: int, seed: int, groups=None):
    """Held-out scores along the lambda path.

    Returns
    -------
    scores : (n_points, cv) held-out AUC (or minus the error) of every fold, NaN
        for the points after the walk stopped; oof : (n, n_points) out-of-fold Q.
    """
    folds = _inner_folds(steps, X, is_two, cv, seed, groups)
    cv = len(folds)
    scores = np.full((len(path), cv), np.nan)
    oof = np.full((X.shape[0], len(path)), np.nan)
    tol, max_iter = steps.tol, steps.max_iter
    worse_rows = 0
    for g, (c1, c2) in enumerate(path):
        for f, fold in enumerate(folds):
            sol = fold.solve(c1, c2, tol, max_iter)
            s_va = fold.scores(X, fold.held_out, sol)
            oof[fold.held_out, g] = s_va
            scores[g, f] = _held_out_score(steps, X, is_two, fold, sol, s_va)
        if steps.patience is None or (g + 1 < len(path) and path[g + 1][0] == c1):
            continue
        # end of a lambda1 row: stop descending once rows keep falling clearly behind
        worse_rows = worse_rows + 1 if _row_behind(scores, path, g, cv) else 0
        if worse_rows >= steps.patience:
            break
    return scores, oof
