"""The convex problem and its solver: gradient, proximal step, KKT, the path's start."""

import numpy as np
import pytest
from scipy.optimize import minimize

from scontrast.quadro._moments import (
    Moments,
    estimate_moments,
    quadratic_mean,
    quadratic_variance,
    rayleigh_quotient,
)
from scontrast.quadro._solver import RayleighProblem, _gradient_nb, _prox_l1_affine, solve_rayleigh

from ._helpers import _quadratic_problem, _random_quadratic


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


def test_compiled_gradient_and_prox_match_the_reference():
    """The compiled gradient equals RayleighProblem.gradient (dense, sparse, zero Omega); the compiled
    proximal step keeps the constraint and the soft-threshold optimality conditions."""
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
