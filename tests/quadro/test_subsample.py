"""``max_cells``: each fit learns from a stratified subsample, every sample is still scored held out."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import StratifiedKFold

from scontrast.core import ScontrastError, ScontrastWarning, check_random_state, spawn_seed
from scontrast.design import grouped_folds
from scontrast.quadro._estimator import QUADRO
from scontrast.quadro._outer import cross_validated_scores
from scontrast.quadro._utils import _stratified_rows

from ._helpers import _imbalanced, _quadratic_problem

FAST = dict(estimator="sample", cv=3, lambda_grid=[1.0, 0.1], lambda2=1.0, n_features=4)


def test_stratified_rows_keep_every_stratum_in_proportion():
    strata = np.repeat(np.arange(5), [500, 300, 150, 49, 1])  # the last stratum: one cell
    rows = _stratified_rows(strata, 100, np.random.default_rng(0))
    assert rows.size == 100 and np.array_equal(rows, np.unique(rows))  # ascending, no repeat
    counts = np.bincount(strata[rows], minlength=5)
    assert counts[-1] == 1  # a stratum too small for its share keeps one cell
    np.testing.assert_allclose(counts[:4], np.array([500, 300, 150, 49]) / 1000 * 100, atol=1.0)
    again = _stratified_rows(strata, 100, np.random.default_rng(0))
    assert np.array_equal(rows, again)
    assert not np.array_equal(rows, _stratified_rows(strata, 100, np.random.default_rng(1)))
    many = np.arange(30)  # more strata than the size: one of each
    assert np.array_equal(_stratified_rows(many, 10, np.random.default_rng(0)), many)


def test_fit_learns_from_a_subsample_stratified_by_class_and_deterministic():
    rng = np.random.default_rng(1)
    X, y = _imbalanced(300, 100, 6, rng)
    a = QUADRO(max_cells=80, random_state=4, **FAST).fit(X, y)
    assert a.fitted_cells_.size == 80 and a.oof_decision_.shape == (80,)
    assert int((y[a.fitted_cells_] == 1).sum()) == 20  # a quarter of the cells, a quarter of the subsample
    b = QUADRO(max_cells=80, random_state=4, **FAST).fit(X, y)
    assert np.array_equal(a.fitted_cells_, b.fitted_cells_)
    np.testing.assert_array_equal(a.Omega_, b.Omega_)
    c = QUADRO(max_cells=80, random_state=5, **FAST).fit(X, y)
    assert not np.array_equal(a.fitted_cells_, c.fitted_cells_)
    # the model is that of the subsample alone
    sub = QUADRO(max_cells=None, random_state=4, **FAST)
    rows = _stratified_rows(y.astype(np.int64), 80, np.random.default_rng(spawn_seed(check_random_state(4))))
    assert np.array_equal(rows, a.fitted_cells_)
    assert sub.fit(X[rows], y[rows]).lambda1_ is not None


def test_a_rare_class_keeps_what_the_folds_need():
    rng = np.random.default_rng(7)
    X, y = _imbalanced(390, 10, 5, rng)  # 10 rare samples: 2 in a proportional subsample of 80
    model = QUADRO(max_cells=80, random_state=0, **FAST).fit(X, y)
    assert int((y[model.fitted_cells_] == 1).sum()) == 6  # topped up to 2 cv
    assert model.fitted_cells_.size == 84 and np.array_equal(model.fitted_cells_, np.unique(model.fitted_cells_))


def test_subsample_keeps_every_replicate():
    rng = np.random.default_rng(2)
    sizes = np.r_[np.full(6, 60), 1, 2, np.full(6, 60), 1, 3]  # two tiny replicates per class
    groups = np.repeat(np.arange(sizes.size), sizes)
    y = (groups >= 8).astype(int)
    X = rng.standard_normal((groups.size, 5))
    model = QUADRO(max_cells=60, random_state=0, **FAST).fit(X, y, groups=groups)
    kept = groups[model.fitted_cells_]
    assert set(kept) == set(groups)  # every replicate, the one-cell ones too
    assert 60 <= model.fitted_cells_.size <= 64


def test_at_most_max_cells_is_bitwise_the_fit_without_the_option():
    rng = np.random.default_rng(3)
    X, y, _ = _quadratic_problem(60, rng)
    for kw in ({}, {"estimator": "robust", "n_features": None}):
        params = {**FAST, **kw}
        ref = QUADRO(max_cells=None, random_state=7, **params).fit(X, y)
        for max_cells in (X.shape[0], 10_000):  # at the bound, and the default
            got = QUADRO(max_cells=max_cells, random_state=7, **params).fit(X, y)
            assert np.array_equal(got.fitted_cells_, np.arange(X.shape[0]))
            for attr in ("Omega_", "delta_", "oof_decision_", "center_", "scale_"):
                np.testing.assert_array_equal(getattr(got, attr), getattr(ref, attr))
            assert (got.threshold_, got.lambda1_) == (ref.threshold_, ref.lambda1_)
    est = QUADRO(random_state=7, **FAST)
    assert est.max_cells == 10_000
    one = cross_validated_scores(est, X, y, 4, random_state=11)
    none = cross_validated_scores(clone(est).set_params(max_cells=None), X, y, 4, random_state=11)
    np.testing.assert_array_equal(one.decision, none.decision)
    assert np.array_equal(one.fold_fitted, np.full(4, 90))


def test_held_out_scores_come_from_models_that_never_trained_on_the_cell():
    rng = np.random.default_rng(4)
    X, y, _ = _quadratic_problem(150, rng)
    est = QUADRO(max_cells=100, random_state=5, **FAST)
    res = cross_validated_scores(est, X, y, 3, random_state=11)
    assert res.final.fitted_cells_.size == 100 and np.array_equal(res.fold_fitted, np.full(3, 100))
    folds = StratifiedKFold(3, shuffle=True, random_state=spawn_seed(check_random_state(11)))
    for train, test in folds.split(X, y):
        model = clone(est).fit(X[train], y[train])
        learned = train[model.fitted_cells_]
        assert not set(learned) & set(test)
        # every test cell, in the model's subsample's fold or not, is scored by this model
        np.testing.assert_array_equal(res.decision[test], model.decision_function(X[test]))
    # not nested: the final model's own out-of-fold scores inside its subsample, its scores outside it
    flat = cross_validated_scores(est, X, y, 3, nested=False, random_state=11)
    rows = flat.final.fitted_cells_
    rest = np.setdiff1d(np.arange(X.shape[0]), rows)
    np.testing.assert_array_equal(flat.decision[rows], flat.final.oof_decision_)
    np.testing.assert_array_equal(flat.decision[rest], flat.final.decision_function(X[rest]))


def test_replicate_folds_with_a_subsample_score_held_out_replicates():
    rng = np.random.default_rng(5)
    groups = np.repeat(np.arange(8), 50)
    y = (groups < 4).astype(int)
    X = rng.standard_normal((groups.size, 5))
    est = QUADRO(max_cells=120, random_state=0, **FAST)
    res = cross_validated_scores(est, X, y, 4, random_state=2, groups=groups)
    splits = grouped_folds(y, groups, 4, random_state=spawn_seed(check_random_state(2)))
    for train, test in splits:
        model = clone(est).fit(X[train], y[train], groups=groups[train])
        assert not set(groups[train[model.fitted_cells_]]) & set(groups[test])
        np.testing.assert_array_equal(res.decision[test], model.decision_function(X[test]))
    with pytest.warns(ScontrastWarning, match="trained on other cells of their replicates"):
        cross_validated_scores(est, X, y, 4, nested=False, random_state=2, groups=groups)


@pytest.mark.parametrize("bad, message", [
    (1, r"^max_cells: expected an integer >= 2"),
    (2.5, r"^max_cells: expected an integer >= 2"),
    ("many", r"^max_cells: expected an integer >= 2"),
    (10**8, r"^max_cells=100000000 is above its maximum 10000000$"),
])
def test_bad_max_cells_is_refused_in_one_line(bad, message):
    X, y, _ = _quadratic_problem(60, np.random.default_rng(6))
    with pytest.raises(ScontrastError, match=message) as err:
        QUADRO(max_cells=bad, random_state=0, **FAST).fit(X, y)
    assert "\n" not in str(err.value)
