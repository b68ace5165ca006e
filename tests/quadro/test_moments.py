"""The moments of Q (M_k, L_k, the quotient), the kurtosis parameter and the plug-in estimates."""

import numpy as np
import pytest
from scipy.stats import multivariate_t

from scontrast.core import ScontrastError
from scontrast.quadro._estimator import QUADRO
from scontrast.quadro._moments import (
    Moments,
    estimate_moments,
    kurtosis_parameter,
    quadratic_mean,
    quadratic_variance,
    rayleigh_quotient,
)
from scontrast.quadro._solver import RayleighProblem, solve_rayleigh

from ._helpers import _random_quadratic


def _mc_mean_var(q, n_batches=40):
    """Monte Carlo mean and variance of q with standard errors from batches."""
    batches = np.array_split(q, n_batches)
    means = np.array([b.mean() for b in batches])
    variances = np.array([b.var(ddof=1) for b in batches])
    return (means.mean(), means.std(ddof=1) / np.sqrt(n_batches),
            variances.mean(), variances.std(ddof=1) / np.sqrt(n_batches))


def _q(Z, Omega, delta):
    return np.einsum("ij,jk,ik->i", Z, Omega, Z) - 2 * Z @ delta


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
