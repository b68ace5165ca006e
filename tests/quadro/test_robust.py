"""Robust estimators: Catoni's mean, robust variances, Kendall's tau, the nearest PSD matrix."""

import numba
import numpy as np
import pytest
from scipy.stats import kendalltau

from scontrast.quadro._robust import catoni_mean, kendall_correlation, kendall_tau_matrix, nearest_psd, robust_variance


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
