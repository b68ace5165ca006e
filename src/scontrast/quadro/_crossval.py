"""Cross-validation: the lambda path, the inner folds that choose the lambdas, and the outer folds.

:func:`_lambda_path` lays out the (lambda1, lambda2) multiples in warm-start order;
:func:`_cross_validate_path` walks it on the inner folds of one QUADRO fit (one
:class:`_Fold` each, warm-started point to point) and :func:`_select` chooses a point;
:func:`cross_validated_scores` scores every sample by an outer model that did not see it.
"""

from __future__ import annotations

import logging
import math
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from sklearn.base import clone
from sklearn.model_selection import StratifiedKFold
from sklearn.utils import _safe_indexing

from ..bounds import MAXIMUM
from ..core import (
    CannotRun,
    ScontrastError,
    ScontrastWarning,
    blas_threads,
    check_int,
    check_option,
    check_random_state,
    progress,
    spawn_seed,
)
from ..design import grouped_folds
from ._moments import Moments
from ._scores import _auc, _quad_scores
from ._solver import RayleighProblem, RayleighSolution, solve_rayleigh
from ._utils import _take

if TYPE_CHECKING:
    from ._estimator import QUADRO

log = logging.getLogger("scontrast.quadro")

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


def _inner_folds(model: QUADRO, X, is_two, cv: int, seed: int, groups=None) -> list[_Fold]:
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
        feat, _ = model._screen(X[tr], is_two[tr])
        mom = model._moments(_take(X, tr, feat), is_two[tr])
        problem = RayleighProblem(mom)
        folds.append(_Fold(tr, va, feat, mom, problem, problem.reference_scale()))
    return folds


def _held_out_score(model: QUADRO, X, is_two, fold: _Fold, sol: RayleighSolution, s_va: np.ndarray) -> float:
    """The fold's CV score: AUC of the held-out Q ``s_va``, or minus its error at the training fold's cut."""
    va = fold.held_out
    if model.cv_scoring == "auc":
        return _auc(is_two[va], s_va)
    tr = fold.train
    t = model._threshold_of(fold.scores(X, tr, sol), is_two[tr])
    wrong = (s_va > t) != is_two[va]
    return -float(np.average(wrong, weights=model._sample_weight(is_two[va])))


def _row_behind(scores: np.ndarray, path, g: int, cv: int) -> bool:
    """Whether the lambda1 row ending at point ``g`` lies more than one standard error below the best so far."""
    done = scores[: g + 1]
    mean = done.mean(axis=1)
    top = int(np.argmax(mean))
    cut = mean[top] - done[top].std(ddof=1) / math.sqrt(cv)
    row = [i for i in range(g + 1) if path[i][0] == path[g][0]]
    return bool(mean[row].max() < cut)


def _cross_validate_path(model: QUADRO, X, is_two, path, cv: int, seed: int, groups=None):
    """Held-out scores along the lambda path.

    Returns
    -------
    scores : (n_points, cv) held-out AUC (or minus the error) of every fold, NaN
        for the points after the walk stopped; oof : (n, n_points) out-of-fold Q.
    """
    folds = _inner_folds(model, X, is_two, cv, seed, groups)
    cv = len(folds)
    scores = np.full((len(path), cv), np.nan)
    oof = np.full((X.shape[0], len(path)), np.nan)
    tol, max_iter = max(model.tol, model.cv_tol), int(model.max_iter)
    worse_rows = 0
    for g, (c1, c2) in enumerate(path):
        for f, fold in enumerate(folds):
            sol = fold.solve(c1, c2, tol, max_iter)
            s_va = fold.scores(X, fold.held_out, sol)
            oof[fold.held_out, g] = s_va
            scores[g, f] = _held_out_score(model, X, is_two, fold, sol, s_va)
        if model.patience is None or (g + 1 < len(path) and path[g + 1][0] == c1):
            continue
        # end of a lambda1 row: stop descending once rows keep falling clearly behind
        worse_rows = worse_rows + 1 if _row_behind(scores, path, g, cv) else 0
        if worse_rows >= model.patience:
            break
    return scores, oof


# --------------------------------------------------------------------------- outer cross-validation


@dataclass
class OutOfFold:
    """What :func:`cross_validated_scores` returns (n samples, k outer folds).

    Attributes
    ----------
    decision : ndarray of shape (n,)
        Decision score ``Q - threshold`` of each sample by a model that did not see it
        (positive = ``final.classes_[1]``).
    predicted : ndarray of shape (n,)
        The label that model predicts.
    fold_lambdas : ndarray of shape (k, 2)
        The ``(lambda1_, lambda2_)`` of each outer model; shape (0, 2) when not nested.
    fold_features : list of k arrays
        The columns each outer model kept (empty when not nested).
    final : QUADRO
        The estimator fitted on all samples (lambdas, ``Omega_``, ``delta_``, ``threshold_``...; on its
        ``fitted_cells_`` of them with ``max_cells``).
    fold_fitted : ndarray of shape (k,), int
        The samples each outer model learned from (fewer than its training fold's with
        ``max_cells``; empty when not nested).
    """

    decision: np.ndarray
    predicted: np.ndarray
    fold_lambdas: np.ndarray
    final: QUADRO
    fold_features: list
    fold_fitted: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))


def cross_validated_scores(estimator: QUADRO, X, y, cv: int = 5, *, nested: bool = True,
                           random_state=None, groups=None) -> OutOfFold:
    """Score every sample by a QUADRO model that was not trained on it.

    ``nested=True``: ``cv`` stratified outer folds (shuffled with a seed drawn from
    ``random_state``); on each, a clone of ``estimator`` fitted on the other folds
    chooses its own lambdas and threshold by its own inner ``estimator.cv`` folds
    and scores the held-out fold, so the error of ``predicted`` is an honest
    estimate (``cv`` + 1 fits; with ``estimator.n_jobs`` > 1 they run in that many
    threads, each on one thread, with the same results). ``nested=False``: the lambdas are chosen once on
    all samples and the scores are the final model's inner out-of-fold scores
    (``oof_decision_``; a little optimistic, one fit; ``cv`` is not used).

    With ``estimator.max_cells`` below the samples of a fit, each model learns from a
    stratified subsample of its training samples and scores every sample of its test fold;
    without nesting, the samples outside the final model's subsample get its decision scores.

    Parameters
    ----------
    estimator : an unfitted :class:`QUADRO` (cloned, never modified).
    X : (n, d) array; y : (n,) binary labels.
    cv : int >= 2, outer folds; each class needs ``2 cv`` samples.
    nested : see above.
    random_state : None, int >= 0 or numpy Generator; seeds the outer folds.
    groups : None or (n,) each sample's replicate (donor, sample): outer and inner folds then
        hold out whole replicates (stratified group k-fold, fewer folds when a class has fewer
        replicates than ``cv``), so the scores are those of new replicates.

    Returns
    -------
    OutOfFold
    """
    cv = check_int(cv, "cv", 2)
    check_option(nested, "nested", [True, False])
    rng = check_random_state(random_state)
    workers = 1 if estimator.n_jobs is None else min(check_int(estimator.n_jobs, "n_jobs", 1), cv + 1)
    if groups is not None:
        groups = np.asarray(groups)
    fit_params = {} if groups is None else {"groups": groups}
    if not nested or workers == 1:
        final = clone(estimator).fit(X, y, **fit_params)
    if not nested:
        if final.oof_decision_ is None:
            raise ScontrastError("nested: False reports the estimator's own out-of-fold scores, but its cv is None")
        decision = _own_fold_scores(final, X, groups)
        return OutOfFold(decision, final.classes_[(decision > 0).astype(int)], np.empty((0, 2)), final, [])
    labels = np.asarray(y)
    if groups is not None:
        per_class = min(np.unique(groups[labels == c]).size for c in np.unique(labels))
        own_folds = getattr(estimator, "cv", None) is not None
        if own_folds and per_class < 3:  # an outer fold holds one out, and the model's own folds need 2 a class
            raise CannotRun(f"nested cross-validation holding out whole replicates needs at least 3 replicates "
                            f"in each group (one held out, 2 for each model's own folds); the smaller group has "
                            f"{per_class}")
        splits = grouped_folds(labels, groups, cv, random_state=spawn_seed(rng))
        return _outer_fits(estimator, X, y, labels, splits, workers, final if workers == 1 else None, groups)
    counts = np.unique(labels, return_counts=True)[1]
    if counts.min() < 2 * cv:
        if workers > 1:
            clone(estimator).fit(X, y)  # the model's own checks of y come first, as when fitted one at a time
        raise ScontrastError(f"cv: {cv} outer folds need at least {2 * cv} samples per class, "
                             f"the smaller has {counts.min()}")
    folds = StratifiedKFold(n_splits=cv, shuffle=True, random_state=spawn_seed(rng))
    splits = list(folds.split(X, labels))
    return _outer_fits(estimator, X, y, labels, splits, workers, final if workers == 1 else None)


def _own_fold_scores(final: QUADRO, X, groups=None) -> np.ndarray:
    """(n,) the final model's own out-of-fold decision scores; of the samples outside its subsample
    (``max_cells``), which it never trained on, its decision scores."""
    rows = final.fitted_cells_
    if rows.size == X.shape[0]:
        return final.oof_decision_.copy()
    decision = np.empty(X.shape[0])
    decision[rows] = final.oof_decision_
    rest = np.setdiff1d(np.arange(X.shape[0]), rows)
    decision[rest] = final.decision_function(_safe_indexing(X, rest))
    if groups is not None:
        warnings.warn(f"nested: False with max_cells={final.max_cells}: {rest.size} of {X.shape[0]} cells outside "
                      "the subsample are scored by the final model, which trained on other cells of their "
                      "replicates: their scores are not those of new replicates (nested: true holds them out)",
                      ScontrastWarning, stacklevel=3)
    return decision


def _outer_fits(estimator: QUADRO, X, y, labels, splits, workers: int, final, groups=None) -> OutOfFold:
    """Fit a clone on the training part of each outer split and score its held-out part."""
    # each outer model is a clone fitted on its training folds (what cross_validate does); the log
    # shows the progress of this long step fold by fold
    if workers == 1:
        fitted = [(clone(estimator).fit(_safe_indexing(X, train), labels[train], **_group_of(groups, train)), test)
                  for train, test in progress(splits, desc="quadro: outer folds", logger="scontrast.quadro")]
    else:
        fitted, final = _fit_in_threads(estimator, X, y, labels, splits, workers, groups)
    return _outer_scores(fitted, final, X, labels.shape[0], len(splits))


def _group_of(groups, rows) -> dict:
    """``fit``'s keyword for the replicates of ``rows`` (none without a design)."""
    return {} if groups is None else {"groups": groups[rows]}


def _fit_rows(model: QUADRO, X, labels, rows: np.ndarray, groups=None) -> QUADRO:
    """``model`` fitted on the samples ``rows`` of X."""
    return model.fit(_safe_indexing(X, rows), labels[rows], **_group_of(groups, rows))


def _fit_in_threads(estimator: QUADRO, X, y, labels, splits, workers: int, groups=None):
    """The outer models (with their test rows) and the final model, fitted in ``workers`` threads."""
    # each fit on one thread (the solver, Kendall's tau and most numpy steps release the GIL):
    # the same models as one at a time
    one = clone(estimator).set_params(n_jobs=1)
    with blas_threads(1), ThreadPoolExecutor(workers) as pool:
        last = pool.submit(clone(one).fit, X, y, **_group_of(groups, slice(None)))
        # each job takes its training rows when it starts: only the running fits' copies exist at once
        jobs = [pool.submit(_fit_rows, clone(one), X, labels, train, groups) for train, _ in splits]
        fitted = [(job.result(), test) for job, (_, test) in
                  progress(list(zip(jobs, splits, strict=True)), desc="quadro: outer folds",
                           logger="scontrast.quadro")]
        final = last.result()
    return fitted, final


def _outer_scores(fitted, final: QUADRO, X, n: int, cv: int) -> OutOfFold:
    """Each sample's decision and label by the outer model whose test fold holds it."""
    decision = np.empty(n)
    predicted = np.empty(n, dtype=final.classes_.dtype)
    fold_lambdas = np.empty((cv, 2))
    fold_features = []
    fold_fitted = np.array([model.fitted_cells_.size for model, _ in fitted], dtype=np.int64)
    for k, (model, test) in enumerate(fitted):
        decision[test] = model.decision_function(_safe_indexing(X, test))
        predicted[test] = model.classes_[(decision[test] > 0).astype(int)]
        fold_lambdas[k] = model.lambda1_, model.lambda2_
        fold_features.append(model.features_)
        log.info("outer fold %d/%d: lambda1=%.3g lambda2=%.3g", k + 1, cv, model.lambda1_, model.lambda2_)
    return OutOfFold(decision, predicted, fold_lambdas, final, fold_features, fold_fitted)
