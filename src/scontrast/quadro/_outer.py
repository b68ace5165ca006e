"""Outer cross-validation: every sample scored by a QUADRO model that did not see it.

:func:`cross_validated_scores` fits clones of an estimator on outer folds (public scikit-learn
API only: ``clone``, ``fit``, ``decision_function``) and collects their held-out scores in an
:class:`OutOfFold`. The inner folds that choose each model's lambdas are in :mod:`._crossval`.
"""

from __future__ import annotations

import logging
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import clone
from sklearn.model_selection import StratifiedKFold

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
from ._estimator import QUADRO

log = logging.getLogger("scontrast.quadro")


def _rows(X, rows):
    """The samples ``rows`` of X: a numpy array, a scipy.sparse matrix with row indexing (CSR, CSC),
    a pandas DataFrame (by position) or a list."""
    if hasattr(X, "iloc"):
        return X.iloc[rows]
    if isinstance(X, list):
        return [X[i] for i in np.arange(len(X))[rows]]
    return X[rows]


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

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.quadro import QUADRO, cross_validated_scores
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(60, 4)), np.repeat([1, 0], 30)
    >>> X[y == 1, 0] += 2.0
    >>> res = cross_validated_scores(QUADRO(cv=3, lambda_grid=[1.0, 0.1], lambda2=1.0), X, y, cv=3, random_state=0)
    >>> type(res).__name__, len(res.fold_features), type(res.final).__name__
    ('OutOfFold', 3, 'QUADRO')
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

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.quadro import QUADRO, balanced_error, cross_validated_scores
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(120, 6))
    >>> y = np.repeat([1, 0], 60)
    >>> X[y == 1, :2] *= 3.0                                  # genes 0 and 1 spread more in class 1
    >>> res = cross_validated_scores(QUADRO(cv=3, lambda_grid=[1.0, 0.1], lambda2=1.0), X, y, cv=3, random_state=0)
    >>> res.decision.shape, res.fold_lambdas.shape            # every sample scored by a model that never saw it
    ((120,), (3, 2))
    >>> bool(balanced_error(y == 1, res.predicted == 1) < 0.3)
    True
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
    decision[rest] = final.decision_function(_rows(X, rest))
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
        fitted = [(clone(estimator).fit(_rows(X, train), labels[train], **_group_of(groups, train)), test)
                  for train, test in progress(splits, desc="quadro: outer folds", logger="scontrast.quadro")]
    else:
        fitted, final = _fit_in_threads(estimator, X, y, labels, splits, workers, groups)
    return _outer_scores(fitted, final, X, labels.shape[0], len(splits))


def _group_of(groups, rows) -> dict:
    """``fit``'s keyword for the replicates of ``rows`` (none without a design)."""
    return {} if groups is None else {"groups": groups[rows]}


def _fit_rows(model: QUADRO, X, labels, rows: np.ndarray, groups=None) -> QUADRO:
    """``model`` fitted on the samples ``rows`` of X."""
    return model.fit(_rows(X, rows), labels[rows], **_group_of(groups, rows))


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
        decision[test] = model.decision_function(_rows(X, test))
        predicted[test] = model.classes_[(decision[test] > 0).astype(int)]
        fold_lambdas[k] = model.lambda1_, model.lambda2_
        fold_features.append(model.features_)
        log.info("outer fold %d/%d: lambda1=%.3g lambda2=%.3g", k + 1, cv, model.lambda1_, model.lambda2_)
    return OutOfFold(decision, predicted, fold_lambdas, final, fold_features, fold_fitted)
