"""The batched Davidson iteration of cPCA against scipy's eigh."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

from scontrast.cpca import _eigen
from scontrast.cpca._alpha import alpha_grid
from scontrast.cpca._basis import _Background
from scontrast.cpca._eigen import (
    _compact,
    _diagonal_basis_solve,
    _ritz_space,
    _ritz_starts,
    _unit_start_products,
    _unit_starts,
)

from ._helpers import sin_max_angle


def test_davidson_continuation_matches_eigh_on_random_problems():
    """The batched Davidson with coarse-to-fine starts (shared Rayleigh-Ritz) against
    scipy.linalg.eigh on random symmetric B - alpha diag(lam), including clustered lam."""
    rng = np.random.default_rng(3)
    r = 160
    for trial in range(3):
        F = rng.normal(size=(r, r // 2))
        B = F @ F.T / r + np.diag(rng.uniform(0, 2, r))
        lam = np.sort(rng.gamma(0.5 if trial else 2.0, 1.0, r))
        if trial == 2:
            lam[:20] = lam[0]  # a cluster at the bottom of the background spectrum
        alphas = alpha_grid(20, 2)
        Z, theta, res, its, gram = _diagonal_basis_solve(B.copy(), lam, alphas, 2, 1e-10, 500)
        assert res.max() <= 1e-10
        for i, a in enumerate(alphas):
            w, E = sla.eigh(B - a * np.diag(lam), subset_by_index=[r - 2, r - 1])
            assert sin_max_angle(E, Z[i]) < 1e-7, (trial, a)
            np.testing.assert_allclose(theta[i], w[::-1], rtol=1e-9, atol=1e-9 * np.abs(w).max())
        np.testing.assert_allclose(gram, Z.transpose(1, 0, 2).reshape(r, -1).T @ B @ Z.transpose(1, 0, 2).reshape(r, -1),
                                   atol=1e-9)


def _diagonal_basis_problem(r=160, seed=5):
    rng = np.random.default_rng(seed)
    F = rng.normal(size=(r, r // 2))
    B = F @ F.T / r + np.diag(rng.uniform(0, 2, r))
    return (B + B.T) / 2, np.sort(rng.gamma(1.0, 1.0, r))


@pytest.mark.parametrize("low_rank", [False, True])
def test_starts_cost_no_products_with_b(monkeypatch, low_rank):
    """The starting spaces need no product with B: unit vectors pick columns of B (and of the
    background operator, diagonal or diagonal plus low rank), the fine grid's Ritz starts combine
    the shared product B S. Only the iteration's new directions (k + 2 per alpha and sweep after
    the first) are multiplied; the starts' products are the exact ones."""
    B, lam = _diagonal_basis_problem()
    background = _low_rank_background(lam) if low_rank else _Background(lam)
    CY = background.dense()
    alphas = alpha_grid(20, 2)
    multiplied = []
    real = _eigen._apply_shifted

    def counting(apply_p, apply_q, T, a):
        multiplied.append(T.shape[0] * T.shape[1])
        return real(apply_p, apply_q, T, a)

    monkeypatch.setattr(_eigen, "_apply_shifted", counting)
    Z, theta, res, its, gram = _diagonal_basis_solve(B, background, alphas, 2, 1e-10, 500)
    assert res.max() <= 1e-10
    # each stage an alpha runs in starts without a product (an alpha the coarse stage cut short
    # starts again in the fine stage)
    late = int((its[_eigen._coarse_fine(alphas)[0]] > _eigen._COARSE_SWEEPS).sum())
    assert sum(multiplied) == 4 * (int((its - 1).sum()) - late)
    # the products the starts use instead
    V0 = _unit_starts(np.diag(B)[None, :] - alphas[:, None] * background.diagonal()[None, :], 8)
    HV0 = _unit_start_products(B, background, alphas, V0)
    np.testing.assert_allclose(HV0, np.matmul(B[None] - alphas[:, None, None] * CY[None], V0), atol=1e-12)
    space = _ritz_space(B, background, Z[::3])
    V0, HV0 = _ritz_starts(space, alphas, 8)
    np.testing.assert_allclose(np.matmul(V0.transpose(0, 2, 1), V0), np.broadcast_to(np.eye(8), (alphas.size, 8, 8)),
                               atol=1e-13)
    np.testing.assert_allclose(HV0, np.matmul(B[None] - alphas[:, None, None] * CY[None], V0), atol=1e-12)


def _low_rank_background(lam, seed=7):
    """diag(lam) + Z diag(beta) Z' as the torn tridiagonal basis gives it: three columns of norm
    sqrt(2) (two rows of orthogonal matrices each), spread over neighbouring blocks, beta the couplings."""
    rng = np.random.default_rng(seed)
    r = lam.size
    Z = np.zeros((r, 3))
    for j, (lo, hi) in enumerate(((0, r // 2), (r // 4, 3 * r // 4), (r // 2, r))):
        Z[lo:hi, j] = rng.normal(size=hi - lo)
    Z *= np.sqrt(2) / np.linalg.norm(Z, axis=0)
    beta = np.array([0.3, -0.2, 0.25])
    dense = np.diag(lam) + (Z * beta) @ Z.T
    return _Background(lam, beta, Z, norm=np.abs(np.linalg.eigvalsh(dense)).max())


def test_davidson_with_a_low_rank_background_matches_eigh():
    """B - alpha (diag(lam) + Z diag(beta) Z') for every alpha against scipy.linalg.eigh, with the
    gram Z' B Z the affinity needs; the low-rank term's operator against its dense form."""
    B, lam = _diagonal_basis_problem(seed=11)
    background = _low_rank_background(lam)
    CY = background.dense()
    T = np.random.default_rng(0).normal(size=(lam.size, 5))
    np.testing.assert_allclose(background.apply(T), CY @ T, atol=1e-13)
    np.testing.assert_allclose(background.diagonal(), np.diag(CY), atol=1e-15)
    alphas = alpha_grid(20, 2)
    for solve_dense in (False, True):
        if solve_dense:  # the small-problem path: dense eigh per alpha
            keep = slice(0, 40)
            Bs, bg = B[keep, keep], _Background(lam[keep], background.beta, background.Z[keep])
        else:
            Bs, bg = B, background
        r, CYs = Bs.shape[0], bg.dense()
        Z, theta, res, its, gram = _diagonal_basis_solve(Bs.copy(), bg, alphas, 2, 1e-10, 500)
        assert res.max() <= 1e-10
        for i, a in enumerate(alphas):
            w, E = sla.eigh(Bs - a * CYs, subset_by_index=[r - 2, r - 1])
            assert sin_max_angle(E, Z[i]) < 1e-7, (solve_dense, a)
            np.testing.assert_allclose(theta[i], w[::-1], rtol=1e-9, atol=1e-9 * np.abs(w).max())
        flat = Z.transpose(1, 0, 2).reshape(r, -1)
        np.testing.assert_allclose(gram, flat.T @ Bs @ flat, atol=1e-9)


def test_compact_moves_only_converged_rows():
    rng = np.random.default_rng(0)
    V, HV, G = rng.normal(size=(6, 3, 5)), rng.normal(size=(6, 3, 5)), rng.normal(size=(6, 3, 3))
    before = [A.copy() for A in (V, HV, G)]
    order = np.arange(6)
    done = np.array([False, True, False, True, False, False])
    src = _compact(V, HV, G, order, done)
    # the four active rows (0, 2, 4, 5) are now rows 0-3, in the order src says
    assert sorted(src.tolist()) == [0, 2, 4, 5] and src.tolist()[0] == 0 and src.tolist()[2] == 2
    np.testing.assert_array_equal(order[:4], src)
    for A, A0 in zip((V, HV, G), before):
        np.testing.assert_array_equal(A[:4], A0[src])


def test_low_rank_corrections_invert_the_preconditioner_exactly():
    """Woodbury against a dense solve: (theta - diag + Z diag(g) Z')^{-1} r per alpha and Ritz value."""
    rng = np.random.default_rng(2)
    na, kk, d, q = 3, 2, 30, 3
    R = rng.normal(size=(na, kk, d))
    wt = rng.normal(size=(na, kk)) + 5.0
    diag = rng.uniform(-1, 1, size=(na, d))
    Z = rng.normal(size=(d, q))
    G = rng.uniform(-0.5, 0.5, size=(na, q))
    T = _eigen._low_rank_corrections(R, wt, diag, np.full((na, 1, 1), 1e-12), Z, G)
    for i in range(na):
        for j in range(kk):
            M = np.diag(wt[i, j] - diag[i]) + (Z * G[i]) @ Z.T
            np.testing.assert_allclose(T[i, j], np.linalg.solve(M, R[i, j]), rtol=1e-10, atol=1e-12)


def test_coarse_alphas_cut_short_go_on_in_the_fine_stage(monkeypatch):
    """An alpha the coarse stage leaves unconverged at _COARSE_SWEEPS goes on in the fine stage
    with what is left of max_iter: the answers still match eigh, n_iter counts both stages and
    never exceeds max_iter."""
    B, lam = _diagonal_basis_problem(seed=13)
    alphas = alpha_grid(20, 2)
    ref = _diagonal_basis_solve(B, lam, alphas, 2, 1e-10, 500)
    monkeypatch.setattr(_eigen, "_COARSE_SWEEPS", 2)
    Z, theta, res, its, gram = _diagonal_basis_solve(B, lam, alphas, 2, 1e-10, 500)
    coarse, _ = _eigen._coarse_fine(alphas)
    assert res.max() <= 1e-10 and (its[coarse] > 2).any()  # some were cut short, and finished later
    for i in range(alphas.size):
        assert sin_max_angle(ref[0][i], Z[i]) < 1e-7
    np.testing.assert_allclose(theta, ref[1], rtol=1e-9, atol=1e-9 * np.abs(ref[1]).max())
    # a budget too small for some: they stop at max_iter in all, with their residual reported
    Z, theta, res, its, gram = _diagonal_basis_solve(B, lam, alphas, 2, 1e-10, 3)
    assert its.max() <= 3 and (res > 1e-10).any() and np.all(its[res > 1e-10] == 3)


def _orthonormality_and_span(Q, T):
    """Largest deviation of Q's rows from orthonormality, and largest residual of T's rows outside Q's span
    (relative to each row's norm), over the alphas."""
    eye = np.matmul(Q, Q.transpose(0, 2, 1)) - np.eye(Q.shape[1])
    outside = T - np.matmul(np.matmul(T, Q.transpose(0, 2, 1)), Q)
    return np.abs(eye).max(), (np.linalg.norm(outside, axis=2) / np.maximum(np.linalg.norm(T, axis=2), 1e-300)).max()


def test_orthonormal_rows_cholesky_path_with_rows_of_very_different_lengths(monkeypatch):
    """A converged column's correction is ~1e-12 the length of the others: scaled to unit rows,
    Cholesky QR handles it (Householder is not called) and gives orthonormal rows of the same span."""
    rng = np.random.default_rng(4)
    T = rng.normal(size=(5, 4, 300)) * np.array([1.0, 1e-12, 3e4, 1e-6])[None, :, None]

    def no_householder(T):
        raise AssertionError("Householder QR called on a well-conditioned block")

    monkeypatch.setattr(_eigen, "_householder_rows", no_householder)
    Q = _eigen._orthonormal_rows(T)
    ortho, outside = _orthonormality_and_span(Q, T)
    assert ortho < 1e-13 and outside < 1e-13


@pytest.mark.parametrize("kind", ["nearly dependent", "zero row"])
def test_orthonormal_rows_falls_back_to_householder(monkeypatch, kind):
    """Rows nearly parallel (cond ~1e6: Cholesky QR would lose orthogonality as cond^2 eps) or a zero
    row: Householder QR, whose rows are orthonormal to working precision (as the Davidson needs)."""
    rng = np.random.default_rng(5)
    T = rng.normal(size=(3, 4, 200))
    if kind == "nearly dependent":
        T[:, 3] = T[:, 2] + 1e-6 * rng.normal(size=(3, 200))
    else:
        T[1, 0] = 0.0
    called = []
    real = _eigen._householder_rows

    def householder(T):
        called.append(T.shape)
        return real(T)

    monkeypatch.setattr(_eigen, "_householder_rows", householder)
    Q = _eigen._orthonormal_rows(T)
    assert called == [T.shape]
    ortho, outside = _orthonormality_and_span(Q, T)
    assert ortho < 1e-13 and outside < 1e-13
    # the Cholesky factor alone would not have been orthonormal here
    if kind == "nearly dependent":
        Ts = T / np.linalg.norm(T, axis=2)[..., None]
        L = np.linalg.cholesky(np.matmul(Ts, Ts.transpose(0, 2, 1)))
        assert _orthonormality_and_span(np.linalg.inv(L) @ Ts, T)[0] > 1e-6


def test_floored_denominators_keep_their_sign():
    """|den| raised to the floor, the sign kept, zero counted positive (as Davidson's corrections need)."""
    den = np.array([[-3.0, -1e-20, 0.0, 1e-20, 2.0]])
    np.testing.assert_array_equal(_eigen._floored(den, 1e-8), [[-3.0, -1e-8, 1e-8, 1e-8, 2.0]])


def test_background_applies_to_rows_as_to_columns():
    """``T C_Y`` (rows) is ``(C_Y T')'`` for the diagonal-plus-low-rank background."""
    rng = np.random.default_rng(6)
    background = _low_rank_background(np.sort(rng.gamma(1.0, 1.0, 40)))
    T = rng.normal(size=(7, 40))
    np.testing.assert_allclose(background.apply_rows(T), background.apply(T.T).T, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(background.apply_rows(T), T @ background.dense(), rtol=1e-12, atol=1e-12)
