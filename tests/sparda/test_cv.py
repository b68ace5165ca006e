"""The choice of lambda: the cross-validation rules and the warning at the ends of the path."""

import warnings

import numpy as np
import pytest

from scontrast.core import ScontrastWarning
from scontrast.sparda._estimator import SPARDA

from ._helpers import _planted


def _many_small_shifts(seed, n=200, d=40, n_diff=30):
    """Like real contrasts: many genes differ, by decreasing amounts (0.05-1.2 sd)."""
    rng = np.random.default_rng(seed)
    X, Y = rng.normal(size=(n, d)), rng.normal(size=(n, d))
    X[:, :n_diff] += np.geomspace(1.2, 0.05, n_diff)
    return X, Y


@pytest.mark.parametrize("seed", [0, 1])
def test_fraction_rule_is_sparse_where_max_takes_every_gene(seed):
    X, Y = _many_small_shifts(seed)
    kw = dict(n_permutations=0, relax_max_iter=15, random_state=0)
    frac = SPARDA(**kw).fit(X, Y)
    cv = frac.cv_results_
    best = cv["best_index"]
    # the rule: the largest lambda reaching cv_fraction of the unpenalised held-out divergence
    assert frac.cv_fraction == 0.6
    assert cv["score"][best] >= 0.6 * cv["reference_score"]
    assert np.all(cv["score"][:best] < 0.6 * cv["reference_score"])
    assert frac.lam_ == cv["lam"][best]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScontrastWarning)
        mx = SPARDA(cv_rule="max", **kw).fit(X, Y)
    assert frac.k_ < mx.k_
    # the genes kept are the most shifted ones
    assert set(np.flatnonzero(frac.beta_)) <= set(range(30))
    assert frac.k_ <= 15


def test_choice_at_the_end_of_the_path_is_warned(caplog):
    # one gene carries the whole difference: the rule takes the sparse end and states it as a finding
    # (an INFO line; no advice can change it), not a warning
    rng = np.random.default_rng(9)
    X, Y = _planted(150, 150, 10, [4], "mean", rng, effect=2.0)
    with warnings.catch_warnings(), caplog.at_level("INFO", logger="scontrast.sparda"):
        warnings.simplefilter("error", ScontrastWarning)
        model = SPARDA(n_permutations=0, random_state=0).fit(X, Y)
    assert model.cv_results_["best_index"] == 0 and list(model.selected_) == [4]
    assert [r.levelname for r in caplog.records if "largest lambda of the path" in r.getMessage()] == ["INFO"]
    # the dense end: 'max' on many small shifts takes the smallest lambda
    X, Y = _many_small_shifts(0, d=30, n_diff=30)
    with pytest.warns(ScontrastWarning, match="smallest lambda of the path"):
        SPARDA(cv_rule="max", n_lambdas=4, lam_min_ratio=0.2, n_permutations=0, relax_max_iter=10,
               random_state=0).fit(X, Y)


# --------------------------------------------------------------------------- cv_max_cells
_SMALL = dict(n_lambdas=5, relax_max_iter=10, relax_max_cells=40, n_permutations=0, random_state=3)


def test_cv_max_cells_subsamples_the_folds_only_and_draws_nothing_else():
    # the groups (260 and 230 cells) are above the cap: the folds are drawn from 120 cells of each
    rng = np.random.default_rng(11)
    X, Y = _planted(260, 230, 12, [2, 5], "mean", rng, effect=1.5)
    full = SPARDA(cv_max_cells=None, **_SMALL).fit(X, Y)
    sub = SPARDA(cv_max_cells=120, **_SMALL).fit(X, Y)
    assert full.cv_results_["n_cells"] == [260, 230]
    assert sub.cv_results_["n_cells"] == [120, 120]
    # the path is the same (its top comes from every cell); only the held-out scores differ
    np.testing.assert_array_equal(sub.cv_results_["lam"], full.cv_results_["lam"])
    assert not np.array_equal(sub.cv_results_["score"], full.cv_results_["score"])
    # the planted pair is found either way, at the same place on the path: then the fit is the same
    # to the bit, because the subsample draws from its own stream, not from the fit's
    assert sub.cv_results_["best_index"] == full.cv_results_["best_index"]
    assert set(full.selected_) == {2, 5}
    np.testing.assert_array_equal(sub.components_, full.components_)
    assert sub.divergence_ == full.divergence_


def test_cv_max_cells_at_or_above_the_groups_changes_nothing():
    rng = np.random.default_rng(12)
    X, Y = _planted(90, 70, 10, [1], "var", rng, effect=1.8)
    kw = dict(_SMALL, n_permutations=19)
    ref = SPARDA(cv_max_cells=None, **kw).fit(X, Y)
    for cap in (90, 5000):
        model = SPARDA(cv_max_cells=cap, **kw).fit(X, Y)
        assert model.cv_results_["n_cells"] == [90, 70]
        np.testing.assert_array_equal(model.cv_results_["score"], ref.cv_results_["score"])
        np.testing.assert_array_equal(model.components_, ref.components_)
        np.testing.assert_array_equal(model.null_divergences_, ref.null_divergences_)


def test_cv_max_cells_keeps_every_replicate_in_proportion():
    # unpaired: 4 target donors (60, 60, 30, 30 cells) and 3 background ones; the lambda folds hold out
    # whole donors, so the subsample must keep each donor, in proportion
    rng = np.random.default_rng(13)
    X, Y = _planted(180, 150, 8, [0], "mean", rng, effect=1.0)
    rx = np.repeat(["a", "b", "c", "d"], [60, 60, 30, 30])
    ry = np.repeat(["e", "f", "g"], [50, 50, 50])
    model = SPARDA(cv_max_cells=60, **_SMALL)
    model.fit(X, Y, replicates_x=rx, replicates_y=ry)
    Xs, Ys, reps = model._cv_cells(X, Y, np.random.default_rng(0), model.replicates_)
    assert Xs.shape[0] == 60 and Ys.shape[0] == 60
    names = reps.names[reps.index]
    kept_x, kept_y = np.unique(names[:60], return_counts=True), np.unique(names[60:], return_counts=True)
    assert dict(zip(*kept_x)) == {"a": 20, "b": 20, "c": 10, "d": 10}
    assert dict(zip(*kept_y)) == {"e": 20, "f": 20, "g": 20}
    # the cells kept are rows of the groups, with their own donors
    rows_x = [int(np.flatnonzero((X == r).all(axis=1))[0]) for r in Xs]
    assert list(rx[rows_x]) == list(names[:60])
    assert model.cv_results_["n_cells"] == [60, 60]


def test_cv_max_cells_bad_values():
    from scontrast.core import ScontrastError

    X, Y = np.ones((10, 2)), np.zeros((10, 2))
    for bad, msg in ((39, "cv_max_cells: expected"), (10**8, "cv_max_cells=100000000 is above its maximum"),
                     (2.5, "cv_max_cells: expected")):
        with pytest.raises(ScontrastError, match=msg):
            SPARDA(cv_max_cells=bad).fit(X, Y)
