"""QUADRO: moment formulas, robust estimators, the solver and the classifier."""

import warnings

import numba
import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar
from scipy.stats import kendalltau, multivariate_normal, multivariate_t
from sklearn.base import clone
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold
from sklearn.utils.estimator_checks import check_estimator

from scontrast.core import ScontrastError, ScontrastWarning, check_random_state, spawn_seed
from scontrast.quadro import (
    QUADRO,
    Moments,
    RayleighProblem,
    RayleighScreen,
    _auc,
    _finite_cut,
    _prox_l1_affine,
    balanced_error,
    catoni_mean,
    coexpression_change,
    cross_validated_scores,
    error_threshold,
    estimate_moments,
    kendall_correlation,
    kendall_tau_matrix,
    kurtosis_parameter,
    marginal_rayleigh,
    nearest_psd,
    quadratic_mean,
    quadratic_variance,
    rayleigh_quotient,
    robust_variance,
    solve_rayleigh,
)


def _random_quadratic(d, rng):
    B = rng.standard_normal((d, d))
    Omega = 0.5 * (B + B.T)
    delta = rng.standard_normal(d)
    mu = rng.standard_normal(d)
    A = rng.standard_normal((d, d))
    Sigma = A @ A.T / d + 0.5 * np.eye(d)
    return Omega, delta, mu, Sigma


def _mc_mean_var(q, n_batches=40):
    """Monte Carlo mean and variance of q with standard errors from batches."""
    batches = np.array_split(q, n_batches)
    means = np.array([b.mean() for b in batches])
    variances = np.array([b.var(ddof=1) for b in batches])
    return (means.mean(), means.std(ddof=1) / np.sqrt(n_batches),
            variances.mean(), variances.std(ddof=1) / np.sqrt(n_batches))


def _q(Z, Omega, delta):
    return np.einsum("ij,jk,ik->i", Z, Omega, Z) - 2 * Z @ delta


# ----------------------------------------------------------------------------- M_k and L_k


def test_moments_of_q_match_monte_carlo_gaussian():
    rng = np.random.default_rng(0)
    Omega, delta, mu, Sigma = _random_quadratic(3, rng)
    Z = rng.multivariate_normal(mu, Sigma, size=400_000)
    m, m_se, v, v_se = _mc_mean_var(_q(Z, Omega, delta))
    assert abs(m - quadratic_mean(Omega, delta, mu, Sigma)) < 4 * m_se
    assert abs(v - quadratic_variance(Omega, delta, mu, Sigma, gamma=0.0)) < 4 * v_se


def test_moments_of_q_match_monte_carlo_multivariate_t():
    rng = np.random.default_rng(1)
    Omega, delta, mu, Sigma = _random_quadratic(3, rng)
    df = 12.0  # eighth moments exist, so the Monte Carlo variance is itself well behaved
    gamma = 2.0 / (df - 4.0)
    Z = multivariate_t(mu, Sigma * (df - 2) / df, df=df).rvs(size=600_000, random_state=rng)
    m, m_se, v, v_se = _mc_mean_var(_q(Z, Omega, delta))
    assert abs(m - quadratic_mean(Omega, delta, mu, Sigma)) < 4 * m_se
    L = quadratic_variance(Omega, delta, mu, Sigma, gamma=gamma)
    assert abs(v - L) < 4 * v_se
    # the test can fail: the Gaussian formula (gamma = 0) is clearly off for t tails
    assert abs(v - quadratic_variance(Omega, delta, mu, Sigma, gamma=0.0)) > 8 * v_se


def test_rayleigh_quotient_is_scale_free():
    rng = np.random.default_rng(2)
    Omega, delta, mu1, S1 = _random_quadratic(4, rng)
    _, _, mu2, S2 = _random_quadratic(4, rng)
    r = rayleigh_quotient(Omega, delta, mu1, S1, mu2, S2, gamma=0.3, pi=0.4)
    assert r > 0
    assert np.isclose(rayleigh_quotient(-3 * Omega, -3 * delta, mu1, S1, mu2, S2, 0.3, 0.4), r)


# ----------------------------------------------------------------------------- robust estimators


def test_kendall_tau_matches_scipy_with_and_without_ties():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((400, 6))
    X[:, 1] += X[:, 0]
    X[:, 2] = np.round(X[:, 2])  # ties
    X[:, 3] = np.maximum(X[:, 3] + 0.3 * X[:, 1], 0)  # zero-inflated, like expression
    X[:, 5] = X[:, 4] ** 3  # tau = 1 with column 4
    T = kendall_tau_matrix(X)
    for i in range(6):
        for j in range(6):
            expected = 1.0 if i == j else kendalltau(X[:, i], X[:, j]).statistic
            assert T[i, j] == pytest.approx(expected, abs=1e-12)


def test_kendall_constant_column_and_correlation_transform():
    rng = np.random.default_rng(4)
    rho = 0.6
    X = rng.multivariate_normal([0, 0], [[1, rho], [rho, 1]], size=4000)
    X = np.column_stack([X, np.ones(4000)])
    C = kendall_correlation(X)
    assert C[0, 1] == pytest.approx(rho, abs=0.03)  # sin(pi tau / 2) recovers the Pearson correlation
    assert C[0, 2] == 0 and C[2, 2] == 1


def test_catoni_mean_resists_huge_outliers():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(2000) + 2.0
    x[:3] = 1e6
    assert abs(x.mean() - 2.0) > 1000
    assert abs(catoni_mean(x) - 2.0) < 0.5


def test_catoni_mean_known_answers():
    rng = np.random.default_rng(6)
    half = rng.standard_t(3, size=500)
    x = np.concatenate([7.0 + half, 7.0 - half])  # symmetric about 7: h is odd, so the root is 7
    assert catoni_mean(x) == pytest.approx(7.0, abs=1e-9)
    X = rng.standard_normal((200, 3))
    assert np.allclose(catoni_mean(X + 100.0), catoni_mean(X) + 100.0)  # translation equivariant
    assert catoni_mean(np.full(10, 3.5)) == 3.5


def test_catoni_mean_beats_sample_mean_in_heavy_tails():
    rng = np.random.default_rng(7)
    X = rng.standard_t(2.5, size=(200, 400))  # 400 replicates of n = 200
    err_c = np.abs(catoni_mean(X))
    err_m = np.abs(X.mean(axis=0))
    assert np.quantile(err_c, 0.99) < np.quantile(err_m, 0.99)


def test_robust_variance_gaussian_and_translation():
    rng = np.random.default_rng(8)
    X = rng.standard_normal((20000, 3)) * [1.0, 2.0, 0.5]
    v = robust_variance(X)
    assert np.allclose(v, [1.0, 4.0, 0.25], rtol=0.05)
    assert np.allclose(robust_variance(X + 1000.0), v, rtol=1e-6)


def test_kurtosis_parameter():
    rng = np.random.default_rng(9)
    G1, G2 = rng.standard_normal((40000, 4)), rng.standard_normal((40000, 4))
    assert kurtosis_parameter(G1, G2) == pytest.approx(0.0, abs=0.05)
    df = 10
    T = multivariate_t(np.zeros(4), np.eye(4), df=df).rvs(size=200000, random_state=rng)
    assert kurtosis_parameter(T[:100000], T[100000:]) == pytest.approx(2 / (df - 4), abs=0.1)
    # two-point marginals have kurtosis 1 -> gamma = -2/3, below the bound -2/(d+2) = -1/2 for d = 2
    B = rng.choice([-1.0, 1.0], size=(1000, 2))
    assert kurtosis_parameter(B, B) == pytest.approx(-0.5)


def test_nearest_psd_known_answers():
    # S = [[a, b], [b, a]] with b > a > 0: the max-norm optimum moves every entry by (b - a) / 2
    for a, b in [(1.0, 2.0), (0.5, 3.0), (2.0, 2.5)]:
        S = np.array([[a, b], [b, a]])
        e = (b - a) / 2
        expected = np.array([[a + e, b - e], [b - e, a + e]])
        P = nearest_psd(S, norm="max", tol=1e-8)
        assert np.allclose(P, expected, atol=1e-6)
        # the Frobenius projection keeps the positive eigen-part: (a + b) v v'
        assert np.allclose(nearest_psd(S, norm="fro"), (a + b) / 2 * np.ones((2, 2)))
    S = np.array([[2.0, 0.5], [0.5, 1.0]])
    assert np.array_equal(nearest_psd(S), S)  # already PSD: unchanged


def test_nearest_psd_random_matrix():
    rng = np.random.default_rng(10)
    B = rng.standard_normal((12, 12))
    S = 0.5 * (B + B.T)
    P_max, P_fro = nearest_psd(S, "max"), nearest_psd(S, "fro")
    for P in (P_max, P_fro):
        assert np.allclose(P, P.T)
        assert np.linalg.eigvalsh(P)[0] > -1e-10
    # each is the nearer in its own norm
    assert np.abs(P_max - S).max() <= np.abs(P_fro - S).max() + 1e-9
    assert np.linalg.norm(P_fro - S) <= np.linalg.norm(P_max - S) + 1e-9
    # a PSD matrix of the form P_max + t (S - P_max) further than P_max is not closer: local check
    assert np.abs(P_max - S).max() <= np.abs(nearest_psd(S, "max", tol=1e-5) - S).max() * (1 + 1e-3) + 1e-12


# ----------------------------------------------------------------------------- the solver


def _small_problem(seed=11, d=3, gamma=0.4):
    rng = np.random.default_rng(seed)
    X1 = rng.standard_normal((50, d))
    X2 = rng.standard_normal((50, d)) * np.linspace(1.6, 0.7, d) + np.r_[0.4, np.zeros(d - 1)]
    return RayleighProblem(estimate_moments(X1, X2, estimator="sample", gamma=gamma))


def test_gradient_is_the_derivative_of_pi_l1_plus_l2():
    P = _small_problem(d=4)
    rng = np.random.default_rng(0)
    B = rng.standard_normal((4, 4))
    x = np.concatenate([(B + B.T).ravel(), rng.standard_normal(4)])
    Om, de = x[:16].reshape(4, 4), x[16:]
    (w1, mu1, S1), (w2, mu2, S2) = P.classes
    f = w1 * quadratic_variance(Om, de, mu1, S1, P.gamma) + w2 * quadratic_variance(Om, de, mu2, S2, P.gamma)
    assert P.value(x) == pytest.approx(f, rel=1e-12)
    # directional derivative along a symmetric direction
    C = rng.standard_normal((4, 4))
    h = np.concatenate([(C + C.T).ravel(), rng.standard_normal(4)])
    eps = 1e-6
    fd = (P.value(x + eps * h) - P.value(x - eps * h)) / (2 * eps)
    assert P.gradient(x) @ h == pytest.approx(fd, rel=1e-6)
    # the constraint vector is M_2 - M_1
    assert P.a @ x == pytest.approx(quadratic_mean(Om, de, mu2, S2) - quadratic_mean(Om, de, mu1, S1))


def test_prox_matches_a_generic_solver():
    rng = np.random.default_rng(12)
    for _ in range(5):
        v, a = rng.standard_normal(7), rng.standard_normal(7)
        a[2] = 0.0
        tau = rng.uniform(0.1, 1.0, 7)
        z, _ = _prox_l1_affine(v, a, tau)
        assert a @ z == pytest.approx(1.0, abs=1e-12)
        # reference: split z = p - q, p, q >= 0
        obj = lambda pq, v=v, tau=tau: 0.5 * np.sum((pq[:7] - pq[7:] - v) ** 2) + tau @ (pq[:7] + pq[7:])  # noqa: E731
        cons = {"type": "eq", "fun": lambda pq, a=a: a @ (pq[:7] - pq[7:]) - 1.0}
        ref = minimize(obj, np.zeros(14), method="SLSQP", bounds=[(0, None)] * 14, constraints=[cons],
                       options={"ftol": 1e-14, "maxiter": 1000})
        assert np.allclose(z, ref.x[:7] - ref.x[7:], atol=1e-6)


def test_solver_kkt_and_generic_solver_agree():
    P = _small_problem()
    d = P.d
    ref = P.reference_scale()
    l1, l2 = 0.05 * ref[0], 0.2 * ref[1]
    sol = solve_rayleigh(P, l1, l2, tol=1e-12, max_iter=100_000)
    assert sol.converged
    assert abs(P.a @ sol.x - 1.0) < 1e-6
    # KKT: grad f + nu a + lambda * s = 0, s in the subdifferential of |x|_1
    lam = np.r_[np.full(d * d, l1), np.full(d, l2)]
    g = P.gradient(sol.x) + sol.multiplier * P.a
    nz = sol.x != 0
    assert np.abs(g[nz] + lam[nz] * np.sign(sol.x[nz])).max() < 1e-7
    assert (np.abs(g[~nz]) <= lam[~nz] + 1e-7).all()
    assert (~nz).any()  # the penalties do sparsify
    # scipy on the d(d+1)/2 + d free parameters (off-diagonals of Omega counted twice in |Omega|_1)
    iu = np.triu_indices(d)
    m = len(iu[0]) + d

    def unpack(theta):
        Om = np.zeros((d, d))
        Om[iu] = theta[: len(iu[0])]
        Om = Om + Om.T - np.diag(np.diag(Om))
        return np.concatenate([Om.ravel(), theta[len(iu[0]):]])

    w = np.r_[np.where(iu[0] == iu[1], 1.0, 2.0) * l1, np.full(d, l2)]
    obj = lambda pq: P.value(unpack(pq[:m] - pq[m:])) + w @ (pq[:m] + pq[m:])  # noqa: E731
    cons = {"type": "eq", "fun": lambda pq: P.a @ unpack(pq[:m] - pq[m:]) - 1.0}
    res = minimize(obj, np.full(2 * m, 0.1), method="SLSQP", bounds=[(0, None)] * (2 * m), constraints=[cons],
                   options={"ftol": 1e-15, "maxiter": 5000})
    assert res.success
    assert sol.objective == pytest.approx(res.fun, rel=1e-7)
    assert sol.objective <= res.fun + 1e-9
    assert np.allclose(unpack(res.x[:m] - res.x[m:]), sol.x, atol=1e-4)


def test_unpenalised_solution_maximises_the_rayleigh_quotient():
    rng = np.random.default_rng(13)
    P = _small_problem(seed=13)
    sol = solve_rayleigh(P, 0.0, 0.0, tol=1e-12, max_iter=200_000)
    (w1, mu1, S1), (w2, mu2, S2) = P.classes
    best = rayleigh_quotient(sol.Omega, sol.delta, mu1, S1, mu2, S2, P.gamma, w1)
    assert best == pytest.approx(w1 * w2 / sol.smooth, rel=1e-9)  # M_2 - M_1 = 1 makes Rq = pi(1-pi)/f
    for _ in range(200):
        B = rng.standard_normal((3, 3))
        r = rayleigh_quotient(sol.Omega + 0.05 * (B + B.T), sol.delta + 0.05 * rng.standard_normal(3),
                              mu1, S1, mu2, S2, P.gamma, w1)
        assert r <= best + 1e-9


# ----------------------------------------------------------------------------- the classifier


def _quadratic_problem(n, rng, d=4):
    """Equal means; class 'b' has variances (3, 3, 1, 1), class 'a' the identity."""
    s2 = np.r_[3.0, 3.0, np.ones(d - 2)]
    X = np.vstack([rng.standard_normal((n, d)), rng.standard_normal((n, d)) * np.sqrt(s2)])
    y = np.repeat(np.array(["a", "b"]), n)
    return X, y, s2


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


def test_error_threshold_known_answer():
    s = np.array([0.0, 1.0, 2.0, 3.0, 10.0, 11.0])
    two = np.array([False, False, False, True, True, True])
    assert error_threshold(s, two) == 2.5
    assert error_threshold(s, ~two) == -np.inf or error_threshold(s, ~two) == np.inf


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


def test_estimate_moments_standardisation():
    rng = np.random.default_rng(20)
    X1 = rng.standard_normal((200, 3)) * [1, 10, 100] + [5, 50, 500]
    X2 = rng.standard_normal((150, 3)) * [1, 10, 100] + [6, 50, 500]
    m = estimate_moments(X1, X2, estimator="sample")
    assert m.pi == pytest.approx(200 / 350)
    pooled = m.pi * np.diag(m.Sigma1) + (1 - m.pi) * np.diag(m.Sigma2)
    assert np.allclose(pooled, 1.0)
    assert np.allclose(m.pi * m.mu1 + (1 - m.pi) * m.mu2, 0.0)
    raw = estimate_moments(X1, X2, estimator="sample", standardize=False)
    assert np.allclose(raw.Sigma1, np.cov(X1, rowvar=False))
    assert isinstance(raw, Moments)


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


def test_infinite_cuts_become_finite_and_keep_the_ranking():
    scores = np.array([-2.0, 0.5, 3.0])
    lo, hi = _finite_cut(-np.inf, scores), _finite_cut(np.inf, scores)
    assert np.isfinite(lo) and lo < scores.min() and np.isfinite(hi) and hi > scores.max()
    assert _finite_cut(0.25, scores) == 0.25
    same = np.full(4, 7.0)  # no spread: still strictly outside
    assert _finite_cut(-np.inf, same) < 7.0 < _finite_cut(np.inf, same)


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


# ----------------------------------------------------------------------------- issue 16: imbalance, screening, path


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


def _imbalanced(n1, n2, d, rng):
    """Class 1 N(0, I); class 2 (rare) with variances 4 on genes 0-1 and mean 1 on gene 2."""
    X1 = rng.standard_normal((n1, d))
    X2 = rng.standard_normal((n2, d))
    X2[:, :2] *= 2.0
    X2[:, 2] += 1.0
    return np.vstack([X1, X2]), np.r_[np.zeros(n1, dtype=int), np.ones(n2, dtype=int)]


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


def test_marginal_rayleigh_is_the_one_gene_quadro_optimum():
    rng = np.random.default_rng(31)
    X1 = rng.standard_normal((300, 3)) * [1.0, 1.0, 1.0] + [0.0, 0.0, 2.0]
    X2 = rng.standard_normal((200, 3)) * [1.0, 2.0, 0.5] + [0.5, 1.0, 2.0]
    for gamma, pi in ((0.0, 0.5), (0.7, 0.6)):
        stat = marginal_rayleigh(X1, X2, gamma=gamma, pi=pi)
        for j in range(3):
            m1, m2 = X1[:, j].mean(), X2[:, j].mean()
            v1, v2 = X1[:, j].var(ddof=1), X2[:, j].var(ddof=1)

            args = (np.array([m1]), np.array([[v1]]), np.array([m2]), np.array([[v2]]), gamma, pi)
            # the quotient is scale free: maximise over the direction (cos t, sin t) of (w, b)
            grid = np.linspace(0, np.pi, 2001)
            vals = [rayleigh_quotient(np.array([[np.cos(t)]]), np.array([np.sin(t)]), *args) for t in grid]
            t0 = grid[int(np.argmax(vals))]
            fine = minimize_scalar(lambda t, a=args: -rayleigh_quotient(np.array([[np.cos(t)]]), np.array([np.sin(t)]), *a),
                                   bounds=(t0 - 2e-3, t0 + 2e-3), method="bounded", options={"xatol": 1e-12})
            best = -fine.fun
            assert stat[j] == pytest.approx(best, rel=1e-6), (gamma, j)
    # ranks a variance change and a mean shift above a gene that does not change
    rng = np.random.default_rng(32)
    A = rng.standard_normal((400, 3))
    B = rng.standard_normal((400, 3)) * [1.0, 1.8, 1.0] + [0.6, 0.0, 0.0]
    s = marginal_rayleigh(A, B)
    assert s[0] > 5 * s[2] and s[1] > 5 * s[2]


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


def test_lambda1_path_starts_where_omega_is_zero():
    rng = np.random.default_rng(34)
    X, y, _ = _quadratic_problem(150, rng)
    X = X + np.r_[0.4, 0.0, 0.0, 0.0] * (y == "b")[:, None]  # a linear part too
    problem = RayleighProblem(estimate_moments(X[y == "a"], X[y == "b"], estimator="sample"))
    top = problem.omega_zero_level()
    assert problem.reference_scale()[0] >= top  # the zero level, or the sparsest-point scale above it
    at = solve_rayleigh(problem, 1.001 * top, 0.0, tol=1e-10, max_iter=50000)
    assert not np.any(at.Omega)  # the linear rule exactly
    assert not np.any(solve_rayleigh(problem, 1.001 * problem.reference_scale()[0], 0.0, tol=1e-10, max_iter=50000).Omega)
    below = solve_rayleigh(problem, 0.8 * top, 0.0, tol=1e-10, max_iter=50000)
    assert np.count_nonzero(below.Omega) > 0


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


def test_fast_auc_matches_scikit_learn_with_ties():
    rng = np.random.default_rng(36)
    y = rng.random(300) < 0.2
    s = np.round(rng.standard_normal(300) + y, 1)  # many ties
    assert _auc(y, s) == pytest.approx(roc_auc_score(y, s), rel=1e-12)


def test_screen_keeps_genes_that_differ_only_in_coexpression():
    rng = np.random.default_rng(37)
    n, d = 300, 40
    A = rng.standard_normal((n, d))
    B = rng.standard_normal((n, d))
    B[:, 1] = 0.8 * B[:, 0] + 0.6 * B[:, 1]  # same marginals, correlation 0 -> 0.8
    X, y = np.vstack([A, B]), np.r_[np.zeros(n, dtype=int), np.ones(n, dtype=int)]
    z = coexpression_change(A, B)
    # |r2 - r1| / sqrt((1 + (1 + r^2)) / n) for Gaussian genes: 0.8 / sqrt(2.64 / 300) = 8.5, sd about 1
    assert z[0, 1] == z[1, 0] and abs(z[0, 1] - 0.8 / np.sqrt(2.64 / n)) < 3
    off = z[np.triu_indices(d, 1)]
    off = off[off < 10]
    # no change elsewhere: |N(0, 1)| has mean sqrt(2/pi) = 0.80 (780 pairs: se about 0.02, pairs share genes)
    assert abs(off.mean() - np.sqrt(2 / np.pi)) < 0.1
    assert set(np.flatnonzero(RayleighScreen(k=2).fit(X, y).support_)) == {0, 1}
    # marginal changes alone cannot see them
    assert not {0, 1} <= set(np.flatnonzero(RayleighScreen(k=2, n_pair_genes=0).fit(X, y).support_))


def test_identical_classes_cannot_run():
    """Identical groups are not an input to fix but a contrast QUADRO cannot fit: CannotRun, which the
    workflow records (the dataset keeps its other methods' results, tests/test_run_rule.py)."""
    from scontrast.core import CannotRun

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 4))
    with pytest.raises(CannotRun, match="^moments: the two classes have identical"):
        QUADRO(lambda1=0.1, lambda2=0.1, cv=None, n_features=None, class_weight=None).fit(
            np.vstack([X, X]), np.r_[np.zeros(40, bool), np.ones(40, bool)])


def test_compiled_gradient_and_prox_match_the_reference():
    """The compiled gradient equals RayleighProblem.gradient (dense, sparse, zero Omega); the compiled
    proximal step keeps the constraint and the soft-threshold optimality conditions."""
    from scontrast.quadro import _gradient_nb

    rng = np.random.default_rng(40)
    d = 9
    Om1, de1, mu1, S1 = _random_quadratic(d, rng)
    _, _, mu2, S2 = _random_quadratic(d, rng)
    P = RayleighProblem(Moments(mu1, S1, mu2, S2, gamma=0.4, pi=0.3, center=np.zeros(d), scale=np.ones(d)))
    sparse = np.zeros((d, d))
    sparse[[1, 1, 6, 6], [1, 6, 1, 6]] = [0.5, -1.2, -1.2, 2.0]  # two genes: the reduced S Omega S
    for Om in (Om1, sparse, np.zeros((d, d))):
        x = np.concatenate([Om.ravel(), de1])
        ref = P.gradient(x)
        got = _gradient_nb(x, np.ascontiguousarray(P._S), np.ascontiguousarray(P._mu), P._w, P.gamma, d)
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    for _ in range(20):
        v = rng.standard_normal(P.size) * 3
        tau = np.abs(rng.standard_normal(P.size)) * rng.choice([0.0, 0.5, 2.0])
        z, th = _prox_l1_affine(v, P.a, tau, 0.3)
        assert P.a @ z == pytest.approx(1.0, rel=1e-9)
        # optimality: z = soft(v - theta a, tau) coordinate-wise
        u = v - th * P.a
        np.testing.assert_allclose(z, np.sign(u) * np.maximum(np.abs(u) - tau, 0.0), rtol=0,
                                   atol=1e-12 * max(np.abs(u).max(), 1.0))


def test_kendall_kernels_agree_on_one_and_several_threads():
    rng = np.random.default_rng(41)
    X = np.round(rng.standard_normal((300, 12)), 1)  # ties too
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        serial = kendall_tau_matrix(X)
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        parallel = kendall_tau_matrix(X)
    finally:
        numba.set_num_threads(old)
    np.testing.assert_array_equal(serial, parallel)
    assert serial[0, 1] == pytest.approx(kendalltau(X[:, 0], X[:, 1]).statistic, rel=1e-12)


def test_screen_scores_are_the_chi2_tail_and_pairs_pass_bonferroni():
    from scipy.stats import chi2

    rng = np.random.default_rng(42)
    n, d = 200, 30
    A = rng.standard_normal((n, d))
    B = rng.standard_normal((n, d)) * np.r_[1.5, np.ones(d - 1)] + np.r_[0, 0.4, np.zeros(d - 2)]
    B[:, 3] = 0.7 * B[:, 2] + np.sqrt(1 - 0.49) * B[:, 3]
    X, y = np.vstack([A, B]), np.r_[np.zeros(n, dtype=int), np.ones(n, dtype=int)]
    s = RayleighScreen(k=10, n_pair_genes=30).fit(X, y)
    stat = s.marginal_ / (0.25 * (2.0 / n))
    np.testing.assert_allclose(s.scores_, -chi2.logsf(stat, 2) / np.log(10), rtol=1e-12)
    z = coexpression_change(A, B)
    iu, ju = np.triu_indices(d, 1)
    sig = {(int(i), int(j)) for i, j in zip(iu, ju, strict=True)
           if chi2.logsf(z[i, j] ** 2, 1) + np.log(iu.size) < np.log(0.05)}
    assert (2, 3) in sig
    assert {(min(i, j), max(i, j)) for i, j, _ in s.pairs_} <= sig


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



def test_coexpression_change_ignores_two_rare_genes_that_coincide():
    """Two genes expressed in the same two cells of one class (r = 1 by coincidence) and in different cells
    of the other: Fisher's z calls it a perfect co-expression change; the data-based variance does not."""
    rng = np.random.default_rng(44)
    n, d = 200, 6
    A, B = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    A[:, 4:] = 0.0
    B[:, 4:] = 0.0
    A[[3, 9], 4] = 5.0
    A[[3, 9], 5] = 5.0
    B[[3, 9], 4] = 5.0
    B[[20, 40], 5] = 5.0
    B[:, 1] = 0.6 * B[:, 0] + 0.8 * B[:, 1]  # a real change, 0 -> 0.6
    z = coexpression_change(A, B)
    assert z[4, 5] < 2 < z[0, 1]
    # Fisher's z of the same data
    r1, r2 = np.corrcoef(A, rowvar=False)[4, 5], np.corrcoef(B, rowvar=False)[4, 5]
    fisher = abs(np.arctanh(np.clip(r1, -1 + 1e-9, 1 - 1e-9)) - np.arctanh(r2)) / np.sqrt(2 / (n - 3))
    assert fisher > 50


def test_screen_gives_coexpression_the_room_marginal_changes_leave():
    """No gene changes on its own, three pairs change co-expression: all six genes are kept with k = 10
    (a fifth of the places, 2, would keep one pair)."""
    rng = np.random.default_rng(45)
    n, d = 300, 40
    A, B = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    for i in (0, 2, 4):
        B[:, i + 1] = 0.8 * B[:, i] + 0.6 * B[:, i + 1]
    X, y = np.vstack([A, B]), np.r_[np.zeros(n, dtype=int), np.ones(n, dtype=int)]
    s = RayleighScreen(k=10).fit(X, y)
    assert {0, 1, 2, 3, 4, 5} <= set(np.flatnonzero(s.support_))
    assert {(min(i, j), max(i, j)) for i, j, _ in s.pairs_} >= {(0, 1), (2, 3), (4, 5)}
    assert s.support_.sum() == 10


def test_ledoit_wolf_shrinkage_of_the_moments():
    """d > n: the sample covariances are singular, the shrunk ones are not; n >> d: almost no change."""
    from sklearn.covariance import ledoit_wolf_shrinkage

    rng = np.random.default_rng(46)
    X1, X2 = rng.standard_normal((15, 30)), rng.standard_normal((15, 30)) * 1.5
    plain = estimate_moments(X1, X2, estimator="sample")
    shrunk = estimate_moments(X1, X2, estimator="sample", shrinkage="ledoit_wolf")
    assert np.linalg.eigvalsh(plain.Sigma1)[0] < 1e-10 < np.linalg.eigvalsh(shrunk.Sigma1)[0]
    rho = ledoit_wolf_shrinkage(X2 / plain.scale)  # the amount of the standardised genes, whose covariance is shrunk
    assert 0 < rho <= 1
    expected = (1 - rho) * plain.Sigma2 + rho * np.trace(plain.Sigma2) / 30 * np.eye(30)
    np.testing.assert_allclose(shrunk.Sigma2, expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(shrunk.mu1, plain.mu1)
    # n >> d and correlated genes (far from the identity target): the shrinkage is about nil
    L = np.linalg.cholesky(0.8 ** np.abs(np.subtract.outer(np.arange(4), np.arange(4))))
    big1, big2 = rng.standard_normal((5000, 4)) @ L.T, rng.standard_normal((5000, 4)) @ L.T
    assert ledoit_wolf_shrinkage(big1) < 0.01
    a = estimate_moments(big1, big2, estimator="sample").Sigma1
    b = estimate_moments(big1, big2, estimator="sample", shrinkage="ledoit_wolf").Sigma1
    assert np.abs(a - b).max() < 0.01
    with pytest.raises(ScontrastError, match=r"^shrinkage: expected one of"):
        QUADRO(shrinkage="oas").fit(np.vstack([X1, X2]), np.r_[np.zeros(15), np.ones(15)])


def test_shrinkage_is_per_gene_scale_free_and_auto_shrinks_only_singular_classes():
    """The Ledoit-Wolf amount is that of the standardised genes; 'auto' shrinks a class iff n_k <= d."""
    rng = np.random.default_rng(47)
    small, large = rng.standard_normal((12, 20)), rng.standard_normal((60, 20))
    units = np.geomspace(1e-3, 1e3, 20)  # the same genes in wildly different units
    a = estimate_moments(small, large, estimator="sample", shrinkage="ledoit_wolf")
    b = estimate_moments(small * units, large * units, estimator="sample", shrinkage="ledoit_wolf")
    np.testing.assert_allclose(b.Sigma1, a.Sigma1, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(b.Sigma2, a.Sigma2, rtol=1e-9, atol=1e-12)
    plain = estimate_moments(small, large, estimator="sample")
    auto = estimate_moments(small, large, estimator="sample", shrinkage="auto")
    np.testing.assert_array_equal(auto.Sigma1, a.Sigma1)  # 12 samples <= 20 genes: shrunk
    np.testing.assert_array_equal(auto.Sigma2, plain.Sigma2)  # 60 > 20: the plug-in covariance
    assert np.linalg.eigvalsh(plain.Sigma1)[0] < 1e-10 < np.linalg.eigvalsh(auto.Sigma1)[0]
    # the estimator's default: its final fit on 12 + 60 samples shrinks the small class only
    X, y = np.vstack([small, large]), np.r_[np.zeros(12, dtype=int), np.ones(60, dtype=int)]
    m = QUADRO(lambda1=1.0, lambda2=0.1, estimator="sample", cv=None).fit(X, y)
    assert m.shrinkage == "auto"
    fit_auto = estimate_moments(small, large, estimator="sample", shrinkage="auto", pi=m.pi_)
    p = RayleighProblem(fit_auto)
    ref = p.reference_scale()
    sol = solve_rayleigh(p, 1.0 * ref[0], 0.1 * ref[1])
    np.testing.assert_allclose(m.Omega_, sol.Omega, atol=1e-6 * np.abs(sol.Omega).max())


def test_cv_rule_1se_lambda1_orders_the_penalties_omega_first():
    """Within one se: the largest lambda1, then its largest lambda2 (not the largest product)."""
    from scontrast.quadro import _select

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
