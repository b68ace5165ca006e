"""RELAX: the supergradient, the optimal plans, the eigenvalue projection, the relaxation's bound."""


import numpy as np
import ot
import pytest

from scontrast.sparda._relax import _optimal_plan, _project_relax, _simplex_eig, relax, relax_supergradient
from scontrast.sparda._tighten import tighten
from scontrast.sparda._wasserstein import projected_divergence

from ._helpers import _planted


@pytest.mark.parametrize("n,m", [(12, 12), (12, 9)])
def test_relax_supergradient_equals_brute_force(n, m):
    rng = np.random.default_rng(3)
    d = 4
    X, Y = rng.normal(size=(n, d)), rng.normal(size=(m, d)) + 0.3
    A = rng.normal(size=(d, d))
    B = A @ A.T
    B /= np.trace(B)
    F, G, _ = relax_supergradient(X, Y, B)
    Z = X[:, None, :] - Y[None, :, :]  # (n, m, d)
    cost = np.einsum("ijk,kl,ijl->ij", Z, B, Z)
    M = ot.emd(np.full(n, 1 / n), np.full(m, 1 / m), cost, numItermax=10**7)
    assert F == pytest.approx(np.sum(M * cost), rel=1e-9)
    W = np.einsum("ij,ijk,ijl->kl", M, Z, Z)
    assert np.trace(G @ B) == pytest.approx(F, rel=1e-9)
    # W_M itself may differ between optimal plans only on ties: none here
    np.testing.assert_allclose(G, W, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("n,m", [(30, 30), (200, 200), (30, 20)])
def test_optimal_plan_is_the_exact_optimum(n, m):
    # (30, 30): assignment solver; larger or unequal: warm-startable network simplex
    rng = np.random.default_rng(4)
    C = rng.normal(size=(n, m))
    rows, cols, mass, cost, _ = _optimal_plan(C)
    ref = ot.emd2(np.full(n, 1 / n), np.full(m, 1 / m), C, numItermax=10**8)
    assert cost == pytest.approx(ref, rel=1e-10)
    assert cost == pytest.approx(np.sum(mass * C[rows, cols]), rel=1e-12)
    np.testing.assert_allclose(np.bincount(rows, mass, n), 1 / n)
    np.testing.assert_allclose(np.bincount(cols, mass, m), 1 / m)


@pytest.mark.parametrize("scale", [0.01, 0.3, 5.0])
def test_partial_eigen_projection_is_exact(scale):
    rng = np.random.default_rng(5)
    A = rng.normal(size=(60, 60)) * scale
    A = (A + A.T) / 2
    lam, Q = np.linalg.eigh(A)
    w = ot.utils.proj_simplex(lam)
    ref = (Q * w) @ Q.T
    P, rank = _project_relax(A, 0.0, q=2)
    np.testing.assert_allclose(P, ref, atol=1e-12)
    assert rank == np.count_nonzero(w > 0) == _simplex_eig(A, 2)[0].size
    assert np.trace(P) == pytest.approx(1.0) and np.linalg.eigvalsh(P).min() > -1e-12


def test_relax_bound_and_tightening_never_below_start():
    rng = np.random.default_rng(6)
    X, Y = _planted(120, 120, 8, [0, 1], "cor", rng)
    mu = np.vstack([X, Y]).mean(0)  # pooled: centring each group would erase mean differences
    X, Y = X - mu, Y - mu
    rel = relax(X, Y, 0.0, max_iter=80)
    # the relaxation's value bounds the PDA objective of every unit direction
    for beta in [rel["beta"], np.eye(8)[0], np.ones(8) / np.sqrt(8)]:
        assert projected_divergence(X, Y, beta) <= rel["bound"] + 1e-9
    assert np.all(np.diff(np.maximum.accumulate(rel["history"])) >= 0)
    t0 = tighten(X, Y, rel["beta"], 8, 0.0)
    assert t0["divergence"] >= projected_divergence(X, Y, rel["beta"]) - 1e-12
    assert np.linalg.norm(t0["beta"]) == pytest.approx(1.0)
    for lam in [0.02, 0.2]:
        t = tighten(X, Y, rel["beta"], None, lam)
        assert t["objective"] >= t["start_objective"] - 1e-12
        assert t["objective"] == pytest.approx(t["divergence"] - lam * np.abs(t["beta"]).sum() ** 2)


@pytest.mark.parametrize("lam", [0.0, 0.05, 0.3])
def test_eig_fraction_is_a_fraction(lam):
    rng = np.random.default_rng(4)
    X, Y = _planted(100, 100, 10, [0, 1, 2], "cor", rng)
    mu = np.vstack([X, Y]).mean(0)
    rel = relax(X - mu, Y - mu, lam, max_iter=30)
    ev = np.linalg.eigvalsh(rel["B"])
    assert 0 < rel["eig_fraction"] <= 1 + 1e-12
    assert rel["eig_fraction"] == pytest.approx(ev[-1] / np.abs(ev).sum(), rel=1e-12)
    if lam == 0:  # psd: the same as top eigenvalue over trace
        assert rel["eig_fraction"] == pytest.approx(ev[-1] / np.trace(rel["B"]), rel=1e-9)
