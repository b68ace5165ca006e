"""The QUADRO classifier: accuracy, labels and errors, thresholds, class weights, warnings."""

import warnings

import numba
import numpy as np
import pytest
from scipy.stats import multivariate_normal
from sklearn.base import clone
from sklearn.utils.estimator_checks import check_estimator

from scontrast.core import ScontrastError, ScontrastWarning
from scontrast.quadro._estimator import QUADRO
from scontrast.quadro._moments import (
    estimate_moments,
    quadratic_mean,
    rayleigh_quotient,
)
from scontrast.quadro._scores import balanced_error
from scontrast.quadro._screen import RayleighScreen

from ._helpers import _imbalanced, _quadratic_problem


def test_classification_error_near_bayes():
    rng = np.random.default_rng(14)
    X, y, s2 = _quadratic_problem(300, rng)
    Xt, yt, _ = _quadratic_problem(20000, rng)
    d = X.shape[1]
    llr = (multivariate_normal(np.zeros(d), np.diag(s2)).logpdf(Xt)
           - multivariate_normal(np.zeros(d), np.eye(d)).logpdf(Xt))
    bayes = np.mean(np.where(llr > 0, "b", "a") != yt)
    for estimator in ("robust", "sample"):
        model = QUADRO(estimator=estimator, cv=3, lambda_grid=[1.0, 0.1, 0.01], random_state=0).fit(X, y)
        err = 1 - model.score(Xt, yt)
        assert err < bayes + 0.03, (estimator, err, bayes)
        assert model.converged_
        assert abs(model.constraint_residual_) < 1e-6
        # class 'b' (classes_[1]) has the larger variances and scores higher
        s = model.decision_function(Xt)
        assert s[yt == "b"].mean() > s[yt == "a"].mean()
        # the linear part is not needed and the fitted quadratic lives on the informative features
        assert np.abs(model.Omega_[:2, :2]).sum() > 5 * np.abs(model.Omega_[2:, 2:]).sum()


def test_constraint_holds_at_the_fitted_moments():
    rng = np.random.default_rng(15)
    X, y, _ = _quadratic_problem(80, rng)
    m = QUADRO(lambda1=0.1, lambda2=0.1, estimator="sample", cv=None).fit(X, y)
    mom = estimate_moments(X[y == "a"], X[y == "b"], estimator="sample")
    M1 = quadratic_mean(m.Omega_, m.delta_, mom.mu1, mom.Sigma1)
    M2 = quadratic_mean(m.Omega_, m.delta_, mom.mu2, mom.Sigma2)
    assert abs(M2 - M1 - 1.0) < 1e-6
    assert m.rayleigh_quotient_ == pytest.approx(
        rayleigh_quotient(m.Omega_, m.delta_, mom.mu1, mom.Sigma1, mom.mu2, mom.Sigma2, mom.gamma, mom.pi))


def test_label_handling_and_errors():
    rng = np.random.default_rng(16)
    X, y, _ = _quadratic_problem(40, rng)
    base = dict(lambda1=0.1, lambda2=0.1, cv=None)
    m1 = QUADRO(**base).fit(X, y)
    assert list(m1.classes_) == ["a", "b"]
    assert set(m1.predict(X)) <= {"a", "b"}
    # relabelled (ints, other order of appearance): the same model up to the label names
    yi = np.where(y == "a", 7, 3)  # 'a' -> 7 becomes classes_[1]: the sign flips
    m2 = QUADRO(**base).fit(X, yi)
    assert list(m2.classes_) == [3, 7]
    assert np.array_equal(np.where(m2.predict(X) == 7, "a", "b"), m1.predict(X)) or \
        np.mean(np.where(m2.predict(X) == 7, "a", "b") != m1.predict(X)) < 0.05
    # every refusal is one line "<name>: <problem>" (ScontrastError, a ValueError)
    with pytest.raises(ScontrastError, match=r"^y: has 1 class"):
        QUADRO(**base).fit(X, np.zeros(len(X)))
    with pytest.raises(ScontrastError, match=r"^y: Only binary"):
        QUADRO(**base).fit(X, np.arange(len(X)) % 3)
    with pytest.raises(ScontrastError, match=r"^y: Unknown label type"):
        QUADRO(**base).fit(X, np.linspace(0, 1, len(X)))
    with pytest.raises(ScontrastError, match=r"^X, y: .*inconsistent numbers of samples"):
        QUADRO(**base).fit(X, y[:-1])
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ScontrastError, match=r"^X, y: Input X contains NaN"):
        QUADRO(**base).fit(Xn, y)
    with pytest.raises(ScontrastError, match=r"^estimator: expected one of"):
        QUADRO(estimator="mle", **base).fit(X, y)
    with pytest.raises(ScontrastError, match=r"^cv: expected at least 2 folds"):
        QUADRO(cv=None).fit(X, y)
    with pytest.raises(ScontrastError, match=r"^cv: 5 folds need at least 10 samples per class, the smaller has 6"):
        QUADRO(cv=5).fit(X[:12], np.r_[np.zeros(6), np.ones(6)])
    with pytest.raises(ScontrastError, match=r"^lambda1: expected"):
        QUADRO(lambda1=-1.0, lambda2=0.1, cv=None).fit(X, y)
    with pytest.raises(ScontrastError, match=r"^lambda_grid: expected"):
        QUADRO(lambda_grid=[1.0, -0.1]).fit(X, y)
    with pytest.raises(ScontrastError, match=r"^lambda_grid: expected"):
        QUADRO(lambda_grid=[]).fit(X, y)
    with pytest.raises(ScontrastError, match=r"^n_jobs: expected"):
        QUADRO(n_jobs=0, **base).fit(X, y)
    with pytest.raises(ScontrastError, match=r"^gamma: expected at least"):
        QUADRO(gamma=-0.9, **base).fit(X, y)  # below -2/(d+2) = -1/3 for d = 4
    with pytest.raises(ScontrastError, match=r"^X: .*features"):
        m1.predict(X[:, :3])


def test_predict_proba_and_threshold():
    rng = np.random.default_rng(17)
    X, y, _ = _quadratic_problem(100, rng)
    m = QUADRO(estimator="sample", cv=3, lambda_grid=[0.3, 0.03], random_state=1).fit(X, y)
    p = m.predict_proba(X)
    assert p.shape == (len(X), 2)
    assert np.allclose(p.sum(axis=1), 1)
    q = m.quadratic_score(X)
    s = m.decision_function(X)
    assert np.isfinite(m.threshold_)
    np.testing.assert_allclose(s, q - m.threshold_, rtol=0, atol=1e-12 * np.abs(q).max())
    order = np.argsort(q)
    assert (np.diff(p[order, 1]) >= -1e-12).all()  # calibrated monotonically on Q
    assert np.array_equal(m.predict(X), np.where(q > m.threshold_, "b", "a"))
    # scikit-learn's convention: the sign of the decision and the larger probability are the prediction
    assert np.array_equal(m.predict(X), np.where(s > 0, "b", "a"))
    assert np.array_equal(m.predict(X), m.classes_[np.argmax(p, axis=1)])
    slope, intercept = m.calibration_
    assert slope > 0 and intercept == pytest.approx(-slope * m.threshold_)
    assert m.oof_decision_.shape == (len(X),)
    # the threshold was chosen on the out-of-fold scores: it minimises their errors
    oof_errors = np.mean((m.oof_decision_ > 0) != (y == "b"))
    for t in np.linspace(-1, 1, 41) * np.abs(m.oof_decision_).max():
        assert oof_errors <= np.mean((m.oof_decision_ > t) != (y == "b")) + 1e-12
    assert m.lambda1_ in (0.3, 0.03) and m.lambda2_ in (0.3, 0.03)
    assert m.cv_results_["mean_score"].shape == (4,)


def test_reproducible_and_clonable():
    rng = np.random.default_rng(18)
    X, y, _ = _quadratic_problem(60, rng)
    params = dict(estimator="robust", cv=3, lambda_grid=[1.0, 0.1], random_state=42)
    a = QUADRO(**params).fit(X, y)
    b = clone(QUADRO(**params)).fit(X, y)
    assert np.array_equal(a.Omega_, b.Omega_)
    assert np.array_equal(a.oof_decision_, b.oof_decision_)
    assert a.get_params()["lambda_grid"] == [1.0, 0.1]


def test_interactions_listing():
    rng = np.random.default_rng(19)
    X, y, _ = _quadratic_problem(100, rng)
    m = QUADRO(lambda1=0.3, lambda2=1.0, estimator="sample", cv=None).fit(X, y)
    pairs, linear = m.interactions(["g0", "g1", "g2", "g3"])
    iu = np.triu_indices(4)
    assert len(pairs) == int((m.Omega_[iu] != 0).sum())
    weights = [abs(w) for _, _, w in pairs]
    assert weights == sorted(weights, reverse=True)
    assert {p[0] for p in pairs[:1]} <= {"g0", "g1"}


def test_n_jobs_caps_threads_without_changing_the_answer():
    rng = np.random.default_rng(22)
    X, y, _ = _quadratic_problem(60, rng)
    before = numba.get_num_threads()
    a = QUADRO(lambda1=0.1, lambda2=0.1, cv=3, random_state=0, n_jobs=1).fit(X, y)
    assert numba.get_num_threads() == before  # restored after fit
    b = QUADRO(lambda1=0.1, lambda2=0.1, cv=3, random_state=0).fit(X, y)
    np.testing.assert_allclose(a.Omega_, b.Omega_, rtol=0, atol=1e-9 * np.abs(b.Omega_).max())


def test_passes_scikit_learn_check_estimator():
    """The whole of scikit-learn's estimator checks, with fixed lambdas (no CV) and with a CV grid."""
    check_estimator(QUADRO(lambda1=0.1, lambda2=0.1, cv=None))
    # the one check that cannot apply with folds: 10 samples, 3 in the smaller class, where 2 folds need 4
    check_estimator(QUADRO(lambda_grid=[1.0, 0.1], cv=2),
                    expected_failed_checks={"check_fit2d_1feature": "3 samples in the smaller class; cv=2 needs 4"})


def test_balanced_class_weight_on_a_planted_imbalanced_problem():
    """1:15 groups: the balanced model finds the rare class; the prior-weighted one mostly calls it background."""
    d = 8
    s2 = np.r_[4.0, 4.0, np.ones(d - 2)]
    mu2 = np.r_[0.0, 0.0, 1.0, np.zeros(d - 3)]
    gains, recalls = [], []
    for seed in range(3):
        rng = np.random.default_rng(100 + seed)
        X, y = _imbalanced(600, 40, d, rng)
        Xt, yt = _imbalanced(15000, 1000, d, rng)
        bal = QUADRO(estimator="sample", cv=3, lambda_grid=[1.0, 0.1, 0.01], random_state=seed).fit(X, y)
        raw = QUADRO(estimator="sample", cv=3, lambda_grid=[1.0, 0.1, 0.01], random_state=seed,
                     class_weight=None).fit(X, y)
        assert bal.pi_ == 0.5 and raw.pi_ == pytest.approx(600 / 640)
        # the threshold minimises the balanced error of the out-of-fold scores
        oof = bal.oof_decision_
        best = balanced_error(y == 1, oof > 0)
        for t in np.quantile(oof, np.linspace(0.01, 0.99, 60)):
            assert best <= balanced_error(y == 1, oof > t) + 1e-12
        # the balanced Bayes rule: the true log-likelihood ratio cut at 0
        llr = (multivariate_normal(mu2, np.diag(s2)).logpdf(Xt) - multivariate_normal(np.zeros(d), np.eye(d)).logpdf(Xt))
        bayes = balanced_error(yt == 1, llr > 0)
        be_bal = balanced_error(yt == 1, bal.predict(Xt) == 1)
        be_raw = balanced_error(yt == 1, raw.predict(Xt) == 1)
        assert be_bal < bayes + 0.08, (seed, be_bal, bayes)
        gains.append(be_raw - be_bal)
        recalls.append(np.mean(bal.predict(Xt)[yt == 1] == 1))
    # the prior-weighted cut trades the rare class away: its balanced error is clearly worse on average
    assert np.mean(gains) > 0.05, gains
    assert min(recalls) > 0.6, recalls


def test_class_weight_dict_and_errors():
    rng = np.random.default_rng(30)
    X, y = _imbalanced(200, 40, 4, rng)
    m = QUADRO(lambda1=0.1, lambda2=0.1, cv=None, estimator="sample", class_weight={0: 1.0, 1: 5.0}).fit(X, y)
    assert m.pi_ == pytest.approx(200 / (200 + 5 * 40))
    with pytest.raises(ScontrastError, match=r"^class_weight: expected one of"):
        QUADRO(class_weight="equal").fit(X, y)
    with pytest.raises(ScontrastError, match=r"^class_weight: expected"):
        QUADRO(class_weight={0: -1.0}).fit(X, y)


def test_screen_is_fitted_on_the_training_cells():
    rng = np.random.default_rng(33)
    X, y = _imbalanced(120, 60, 30, rng)
    m = QUADRO(lambda1=0.1, lambda2=0.1, cv=None, estimator="sample", n_features=5).fit(X, y)
    screen = RayleighScreen(k=5).fit(X, y)
    np.testing.assert_array_equal(m.features_, np.flatnonzero(screen.support_))
    np.testing.assert_array_equal(m.screen_scores_, screen.scores_)
    assert {0, 1, 2} <= set(m.features_)  # the planted genes
    assert m.Omega_.shape == (5, 5) and m.decision_function(X).shape == (180,)
    pairs, linear = m.interactions([f"g{i}" for i in range(30)])
    assert {p[0] for p in pairs} | {g for g, _ in linear} <= {f"g{i}" for i in m.features_}
    assert screen.transform(X).shape == (180, 5)


def test_choice_at_the_end_of_the_path_warns():
    rng = np.random.default_rng(35)
    X, y, _ = _quadratic_problem(150, rng)
    with pytest.warns(ScontrastWarning, match=r"lambda1 chosen at the least penalised end of its path"):
        m = QUADRO(estimator="sample", cv=3, lambda_grid=[1.0, 0.99, 0.01], lambda2=1.0, cv_rule="best",
                   random_state=0).fit(X, y)
    assert m.lambda1_ == 0.01
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScontrastWarning)
        QUADRO(estimator="sample", lambda1=0.01, lambda2=1.0, cv=3, random_state=0).fit(X, y)  # nothing chosen


def test_identical_classes_cannot_run():
    """Identical groups are not an input to fix but a contrast QUADRO cannot fit: CannotRun, which the
    workflow records (the dataset keeps its other methods' results, tests/test_run_rule.py)."""
    from scontrast.core import CannotRun

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 4))
    with pytest.raises(CannotRun, match="^moments: the two classes have identical"):
        QUADRO(lambda1=0.1, lambda2=0.1, cv=None, n_features=None, class_weight=None).fit(
            np.vstack([X, X]), np.r_[np.zeros(40, bool), np.ones(40, bool)])
