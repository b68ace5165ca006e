"""Thresholds, AUC and finite cuts of the quadratic scores."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from scontrast.quadro._scores import _auc, _finite_cut, balanced_error, error_threshold


def test_error_threshold_known_answer():
    s = np.array([0.0, 1.0, 2.0, 3.0, 10.0, 11.0])
    two = np.array([False, False, False, True, True, True])
    assert error_threshold(s, two) == 2.5
    assert error_threshold(s, ~two) == -np.inf or error_threshold(s, ~two) == np.inf


def test_error_threshold_balanced_known_answer():
    s = np.arange(10.0)
    two = np.zeros(10, dtype=bool)
    two[[5, 8, 9]] = True
    # raw: cutting at 7.5 costs one error (5), at 4.5 two (6, 7)
    assert error_threshold(s, two) == 7.5
    # balanced: 7.5 costs 1/3 of class 2 (mean 1/6), 4.5 costs 2/7 of class 1 (mean 1/7)
    assert error_threshold(s, two, balanced=True) == 4.5
    # explicit weights: a class-2 sample costing 3 class-1 samples moves the cut down too
    assert error_threshold(s, two, class_weights=(1.0, 3.0)) == 4.5
    assert balanced_error(two, s > 4.5) == pytest.approx(0.5 * 2 / 7)


def test_infinite_cuts_become_finite_and_keep_the_ranking():
    scores = np.array([-2.0, 0.5, 3.0])
    lo, hi = _finite_cut(-np.inf, scores), _finite_cut(np.inf, scores)
    assert np.isfinite(lo) and lo < scores.min() and np.isfinite(hi) and hi > scores.max()
    assert _finite_cut(0.25, scores) == 0.25
    same = np.full(4, 7.0)  # no spread: still strictly outside
    assert _finite_cut(-np.inf, same) < 7.0 < _finite_cut(np.inf, same)


def test_fast_auc_matches_scikit_learn_with_ties():
    rng = np.random.default_rng(36)
    y = rng.random(300) < 0.2
    s = np.round(rng.standard_normal(300) + y, 1)  # many ties
    assert _auc(y, s) == pytest.approx(roc_auc_score(y, s), rel=1e-12)
