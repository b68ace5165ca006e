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


def test_choice_at_the_end_of_the_path_is_warned():
    # one gene carries the whole difference: the rule takes the sparse end, and says so
    rng = np.random.default_rng(9)
    X, Y = _planted(150, 150, 10, [4], "mean", rng, effect=2.0)
    with pytest.warns(ScontrastWarning, match="largest lambda of the path"):
        model = SPARDA(n_permutations=0, random_state=0).fit(X, Y)
    assert model.cv_results_["best_index"] == 0 and list(model.selected_) == [4]
    # the dense end: 'max' on many small shifts takes the smallest lambda
    X, Y = _many_small_shifts(0, d=30, n_diff=30)
    with pytest.warns(ScontrastWarning, match="smallest lambda of the path"):
        SPARDA(cv_rule="max", n_lambdas=4, lam_min_ratio=0.2, n_permutations=0, relax_max_iter=10,
               random_state=0).fit(X, Y)
