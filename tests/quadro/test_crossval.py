"""Cross-validation: the lambda walk, the choice rule, the outer folds."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold

from scontrast.core import ScontrastError, check_random_state, spawn_seed
from scontrast.quadro._crossval import _inner_folds, _select
from scontrast.quadro._estimator import QUADRO
from scontrast.quadro._outer import cross_validated_scores
from scontrast.quadro._scores import balanced_error
from scontrast.quadro._screen import RayleighScreen

from ._helpers import _imbalanced, _quadratic_problem


def test_grid_walk_and_early_stop_bookkeeping():
    rng = np.random.default_rng(21)
    X, y, _ = _quadratic_problem(60, rng)
    grid = [3.0, 1.0, 0.3, 0.1, 0.03]
    full = QUADRO(estimator="sample", cv=3, lambda_grid=grid, lambda2=1.0, patience=None, random_state=0).fit(X, y)
    assert not np.isnan(full.cv_results_["mean_score"]).any()
    assert np.array_equal(full.cv_results_["lambda1"], grid)  # walked from the largest lambda1 down
    short = QUADRO(estimator="sample", cv=3, lambda_grid=grid, lambda2=1.0, patience=1, random_state=0).fit(X, y)
    walked = ~np.isnan(short.cv_results_["mean_score"])
    # early stopping only drops a tail of the walk, and the explored part is identical
    assert walked[0] and not (np.diff(walked.astype(int)) > 0).any()
    assert np.allclose(short.cv_results_["mean_score"][walked], full.cv_results_["mean_score"][walked])
    with pytest.raises(ValueError, match="patience"):
        QUADRO(patience=0).fit(X, y)


def test_cv_rule_1se_lambda1_orders_the_penalties_omega_first():
    """Within one se: the largest lambda1, then its largest lambda2 (not the largest product)."""
    path = [(3.0, 3.0), (3.0, 0.3), (3.0, 0.03), (1.0, 0.03), (1.0, 0.3), (1.0, 3.0)]
    folds = np.array([-0.01, 0.0, 0.01])  # one se of the mean = 0.01 / sqrt(3) ~ 0.0058
    scores = np.array([0.700, 0.700, 0.798, 0.800, 0.790, 0.799])[:, None] + folds
    assert path[_select(path, scores, "1se_lambda1")] == (3.0, 0.03)
    assert path[_select(path, scores, "1se")] == (1.0, 3.0)  # the product: a corner with Omega
    assert path[_select(path, scores, "best")] == (1.0, 0.03)
    scores[1] = 0.797 + folds  # a more penalised lambda2 at lambda1 = 3 within one se
    assert path[_select(path, scores, "1se_lambda1")] == (3.0, 0.3)
    scores[:3] = 0.6 + folds  # no point of lambda1 = 3 within one se: the next lambda1 down
    assert path[_select(path, scores, "1se_lambda1")] == (1.0, 3.0)
    with pytest.raises(ScontrastError, match=r"^cv_rule: expected one of"):
        QUADRO(cv_rule="2se").fit(np.zeros((20, 2)) + np.arange(20)[:, None], np.r_[np.zeros(10), np.ones(10)])


def test_cross_validated_scores_are_out_of_fold():
    rng = np.random.default_rng(23)
    X, y, _ = _quadratic_problem(60, rng)
    est = QUADRO(estimator="sample", cv=3, lambda_grid=[1.0, 0.1], random_state=5)
    res = cross_validated_scores(est, X, y, 4, random_state=11)
    assert not hasattr(est, "classes_")  # the estimator given is never fitted
    assert res.decision.shape == (len(X),) and res.fold_lambdas.shape == (4, 2)
    assert np.array_equal(res.predicted, np.where(res.decision > 0, "b", "a"))
    # each fold's scores are those of a model fitted without that fold (the same outer folds, recomputed)
    folds = StratifiedKFold(4, shuffle=True, random_state=spawn_seed(check_random_state(11)))
    for k, (train, test) in enumerate(folds.split(X, y)):
        model = clone(est).fit(X[train], y[train])
        np.testing.assert_allclose(res.decision[test], model.decision_function(X[test]), rtol=1e-10, atol=1e-12)
        assert tuple(res.fold_lambdas[k]) == (model.lambda1_, model.lambda2_)
    final = clone(est).fit(X, y)
    np.testing.assert_array_equal(res.final.Omega_, final.Omega_)
    # the out-of-fold scores rank the classes (Bayes AUC 0.75 here; chance 0.5 with sd 0.05 at n = 120)
    assert roc_auc_score(y == "b", res.decision) > 0.6
    again = cross_validated_scores(est, X, y, 4, random_state=11)
    np.testing.assert_array_equal(again.decision, res.decision)


def test_cross_validated_scores_not_nested_and_errors():
    rng = np.random.default_rng(24)
    X, y, _ = _quadratic_problem(40, rng)
    est = QUADRO(estimator="sample", cv=3, lambda_grid=[1.0, 0.1], random_state=0)
    res = cross_validated_scores(est, X, y, 5, nested=False, random_state=0)
    np.testing.assert_array_equal(res.decision, res.final.oof_decision_)
    assert np.array_equal(res.predicted, res.final.classes_[(res.decision > 0).astype(int)])
    assert res.fold_lambdas.shape == (0, 2)
    with pytest.raises(ScontrastError, match=r"^nested: False .* cv is None"):
        cross_validated_scores(QUADRO(lambda1=0.1, lambda2=0.1, cv=None), X, y, nested=False)
    with pytest.raises(ScontrastError, match=r"^cv: 30 outer folds need at least 60 samples per class"):
        cross_validated_scores(est, X, y, 30)
    with pytest.raises(ScontrastError, match=r"^cv: expected an integer >= 2"):
        cross_validated_scores(est, X, y, 1)
    with pytest.raises(ScontrastError, match=r"^nested: expected one of"):
        cross_validated_scores(est, X, y, nested="yes")


def test_fold_only_gene_ranking_keeps_the_error_honest():
    """Pure noise, random labels, 3,000 ranked genes: fold-only ranking ~0.5; ranking on all cells leaks."""
    honest, leaky = [], []
    for seed in range(3):
        rng = np.random.default_rng(200 + seed)
        X = rng.standard_normal((100, 3000))
        y = rng.permutation(np.r_[np.zeros(50, dtype=int), np.ones(50, dtype=int)])
        est = QUADRO(estimator="sample", n_features=10, cv=3, lambda_grid=[1.0, 0.1], random_state=seed)
        res = cross_validated_scores(est, X, y, 5, random_state=seed)
        honest.append(balanced_error(y == 1, res.predicted == 1))
        # every outer model ranked the genes on its own training cells
        assert all(f.size == 10 for f in res.fold_features)
        # the same ranking done once on all cells (the leak the fold-wise ranking avoids)
        keep = RayleighScreen(k=10).fit(X, y).support_
        res_leak = cross_validated_scores(est.set_params(n_features=None), X[:, keep], y, 5, random_state=seed)
        est.set_params(n_features=10)
        leaky.append(balanced_error(y == 1, res_leak.predicted == 1))
    # 300 noise predictions: the balanced error's sd is about 0.5 / sqrt(300) = 0.029
    assert np.mean(honest) > 0.5 - 3 * 0.029, honest
    assert np.mean(leaky) < np.mean(honest) - 0.1, (leaky, honest)


def test_parallel_outer_folds_give_the_same_models():
    rng = np.random.default_rng(43)
    X, y = _imbalanced(90, 30, 6, rng)
    est = QUADRO(estimator="robust", cv=3, lambda_grid=[1.0, 0.1], n_features=4, random_state=3)
    one = cross_validated_scores(est.set_params(n_jobs=1), X, y, 3, random_state=5)
    two = cross_validated_scores(est.set_params(n_jobs=2), X, y, 3, random_state=5)
    np.testing.assert_allclose(two.decision, one.decision, rtol=0, atol=1e-9 * np.abs(one.decision).max())
    np.testing.assert_array_equal(two.fold_lambdas, one.fold_lambdas)
    np.testing.assert_allclose(two.final.Omega_, one.final.Omega_, rtol=0, atol=1e-9 * np.abs(one.final.Omega_).max())
    # the model's own checks of y still come first
    with pytest.raises(ScontrastError, match=r"^y: has 1 class"):
        cross_validated_scores(est.set_params(n_jobs=2), X, np.zeros(X.shape[0], dtype=int), 3)


def test_inner_and_outer_folds_never_split_a_replicate():
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(10), 12)
    is_two = groups < 5
    X = rng.standard_normal((groups.size, 4))
    folds = _inner_folds(QUADRO(n_features=None)._fold_steps(), X, is_two, 3, 0, groups)
    assert len(folds) == 3
    for fold in folds:
        assert not set(groups[fold.train]) & set(groups[fold.held_out])
    model = QUADRO(lambda1=0.5, lambda2=0.5, cv=None, n_features=None)
    out = cross_validated_scores(model, X, is_two, cv=5, random_state=0, groups=groups)
    assert out.fold_lambdas.shape == (5, 2)
    few = np.repeat(np.arange(6), 20)  # 3 replicates per class: at most 3 outer folds
    out = cross_validated_scores(model, X, few < 3, cv=5, random_state=0, groups=few)
    assert out.fold_lambdas.shape == (3, 2)
