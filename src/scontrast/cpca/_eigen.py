"""The eigensolvers shared by the 'covariance', 'gram' and 'implicit' solvers.

A batched block Davidson iteration (:func:`_davidson`) finds the top-k eigenpairs of
``P - alpha Q`` for a whole grid of alphas at once; :func:`_diagonal_basis_solve` runs it
(coarse third of the grid first, then the rest from Rayleigh-Ritz starts) in a basis where
the background part is diagonal; the remaining helpers are the dense reductions they need.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import scipy.linalg as sla
from scipy.linalg import blas, lapack

from ._threads import _side_by_side

# d up to which the per-alpha partial eigh is cheaper than any shared reduction.
_FULL_MAX_D = 128


def _norm_estimate(matmat, d: int, n_iter: int = 30) -> float:
    """Largest |eigenvalue| of a symmetric operator by power iteration from a fixed start."""
    v = np.random.default_rng(0).standard_normal(d)
    v /= np.linalg.norm(v)
    est = 0.0
    for _ in range(n_iter):
        w = matmat(v[:, None])[:, 0]
        est = float(np.linalg.norm(w))
        if est == 0.0:
            return 0.0
        v = w / est
    return est


def _sign_flips(U: np.ndarray) -> np.ndarray:
    """Signs (a, k) that make the largest-magnitude entry of each column of U (a, d, k) positive."""
    idx = np.abs(U).argmax(axis=1)
    picked = np.take_along_axis(U, idx[:, None, :], axis=1)[:, 0, :]
    return np.where(picked < 0, -1.0, 1.0)


def _davidson(apply_p, apply_q, p_diag, q_diag, alphas, k, V0, scale, tol, max_iter, max_basis):
    """Top-k eigenpairs of ``P - alpha Q`` for every alpha at once (batched block Davidson).

    Each alpha keeps its own search space (all of the same size, so that they
    stack); one sweep applies P and Q to the new directions of every alpha in a
    single product. Corrections are residuals divided by ``theta - diag(P - alpha Q)``
    (Davidson's preconditioner), which is exact when the matrix is diagonal.

    Parameters
    ----------
    apply_p, apply_q : callables (d, c) -> (d, c)
    p_diag, q_diag : ndarray (d,)
    alphas : ndarray (a,)
    k : int, eigenpairs wanted; two more are iterated as guards
    V0 : ndarray (a, d, b0), initial search spaces (b0 >= k + 2)
    scale : ndarray (a,), ||P - alpha Q|| estimates; convergence is
        ``||residual|| <= tol * scale``
    max_iter, max_basis : int

    Returns
    -------
    Z : (a, d, k) eigenvectors; theta : (a, k) eigenvalues (descending);
    residual : (a,) largest relative residual norm; n_iter : (a,) sweeps used
    """
    n_alpha, d, b0 = V0.shape
    kk = min(k + 2, d)
    mb = min(max(max_basis, 3 * kk, b0 + kk), d)

    H = partial(_apply_shifted, apply_p, apply_q)
    # search spaces as rows, in preallocated buffers: V[:, :m] (na, m, d), HV likewise
    V = np.zeros((n_alpha, mb, d))
    HV = np.zeros((n_alpha, mb, d))
    G = np.zeros((n_alpha, mb, mb))
    V[:, :b0] = np.linalg.qr(V0)[0].transpose(0, 2, 1)
    HV[:, :b0] = H(V[:, :b0], alphas)
    G[:, :b0, :b0] = np.matmul(V[:, :b0], HV[:, :b0].transpose(0, 2, 1))
    m = b0
    idx = np.arange(n_alpha)
    Z_out = np.zeros((n_alpha, d, k))
    theta_out = np.zeros((n_alpha, k))
    res_out = np.full(n_alpha, np.inf)
    it_out = np.zeros(n_alpha, dtype=int)
    it = 0
    while idx.size:
        it += 1
        a = alphas[idx]
        Gm = G[:, :m, :m]
        w, S = np.linalg.eigh((Gm + Gm.transpose(0, 2, 1)) / 2)
        w, S = w[:, ::-1], S[:, :, ::-1]
        St = S[:, :, :kk].transpose(0, 2, 1)            # (na, kk, m)
        wt = w[:, :kk]
        Z = np.matmul(St, V[:, :m])                     # Ritz vectors as rows (na, kk, d)
        R = np.matmul(St, HV[:, :m]) - wt[:, :, None] * Z
        res = np.linalg.norm(R, axis=2) / scale[idx][:, None]
        done = (res[:, :k].max(axis=1) <= tol) | (it >= max_iter)
        Z_out[idx] = Z[:, :k].transpose(0, 2, 1)
        theta_out[idx] = wt[:, :k]
        res_out[idx] = res[:, :k].max(axis=1)
        it_out[idx] = it
        keep = ~done
        if not keep.any():
            break
        if not keep.all():
            idx, a = idx[keep], a[keep]
            V, HV, G = V[keep], HV[keep], G[keep]
            S, w, R, wt = S[keep], w[keep], R[keep], wt[keep]
        T = _corrections(R, wt, p_diag[None, :] - a[:, None] * q_diag[None, :], 1e-8 * scale[idx][:, None, None])
        if m + kk > mb:
            m = _thick_restart(V, HV, G, S, w, m, kk)
        m = _extend(H, V, HV, G, m, T, a)
    return Z_out, theta_out, res_out, it_out


def _apply_shifted(apply_p, apply_q, T, a):
    """(P - a Q) applied to the rows of T (na, c, d), all alphas in one product."""
    nb, c, d = T.shape
    flat = T.reshape(nb * c, d).T
    out = (apply_p(flat).T.reshape(nb, c, d), apply_q(flat).T.reshape(nb, c, d))
    return out[0] - a[:, None, None] * out[1]


def _corrections(R, wt, diag, floor):
    """Davidson's corrections: residuals R (na, kk, d) divided by ``theta - diag(P - alpha Q)``.

    ``wt`` (na, kk) are the Ritz values, ``diag`` (na, d) the diagonals; denominators are kept
    at least ``floor`` (na, 1, 1) in magnitude.
    """
    den = wt[:, :, None] - diag[:, None, :]
    den = np.where(np.abs(den) < floor, np.where(den >= 0, floor, -floor), den)
    return R / den


def _thick_restart(V, HV, G, S, w, m, kk):
    """Restart the search spaces (in place) on their leading Ritz vectors; G becomes their Ritz values.

    ``S`` (na, m, m) and ``w`` (na, m) are the eigenvectors and eigenvalues of G (descending).
    Returns the new size of the search spaces.
    """
    m2 = min(2 * kk, m)
    Sr = S[:, :, :m2].transpose(0, 2, 1)
    V[:, :m2] = np.matmul(Sr, V[:, :m])
    HV[:, :m2] = np.matmul(Sr, HV[:, :m])
    G[:, :m2, :m2] = 0.0
    G[:, np.arange(m2), np.arange(m2)] = w[:, :m2]
    return m2


def _extend(H, V, HV, G, m, T, a):
    """Add the corrections T (na, kk, d), orthonormalised, to the search spaces V[:, :m] (in place).

    ``H(T, a)`` applies the operators; HV and the projected matrix G are extended alike.
    Returns the new size of the search spaces.
    """
    kk = T.shape[1]
    Vm = V[:, :m]
    for _ in range(2):  # twice is enough (Kahan's rule)
        T = T - np.matmul(np.matmul(T, Vm.transpose(0, 2, 1)), Vm)
    T = np.linalg.qr(T.transpose(0, 2, 1))[0].transpose(0, 2, 1)
    HT = H(np.ascontiguousarray(T), a)
    top = np.matmul(Vm, HT.transpose(0, 2, 1))      # (na, m, kk)
    G[:, :m, m:m + kk] = top
    G[:, m:m + kk, :m] = top.transpose(0, 2, 1)
    G[:, m:m + kk, m:m + kk] = np.matmul(T, HT.transpose(0, 2, 1))
    V[:, m:m + kk] = T
    HV[:, m:m + kk] = HT
    return m + kk


def _unit_starts(diag_values: np.ndarray, b: int) -> np.ndarray:
    """Initial search spaces: the unit vectors of the b largest diagonal entries, (a, d, b)."""
    n_alpha, d = diag_values.shape
    top = np.argsort(-diag_values, axis=1, kind="stable")[:, :b]
    V0 = np.zeros((n_alpha, d, b))
    V0[np.arange(n_alpha)[:, None], top, np.arange(b)[None, :]] = 1.0
    return V0


def _cholesky(C):
    """Upper Cholesky factor R (C = R'R) of a symmetric C (d, d), or None if C is not positive definite."""
    R, info = lapack.dpotrf(C, lower=0, clean=1)
    return R if info == 0 else None


def _congruence(C, Q, R=None):
    """Q' C Q for a symmetric C (d, d): through C = R'R when C is positive definite (half the
    flops of two products: a triangular product and a symmetric rank-d update), else directly.
    R: C's upper Cholesky factor if already known."""
    if R is None:
        R = _cholesky(C)
    if R is not None:
        RQ = blas.dtrmm(1.0, R, Q)
        return RQ.T @ RQ
    B = Q.T @ (C @ Q)
    return (B + B.T) / 2


def _congruence_two_tasks(C, Q, L=None):
    """:func:`_congruence` as pairs of tasks side by side; L: C's lower Cholesky factor (C = L L')
    or None if C is not positive definite. Returns Q' C Q (d, d)."""
    h = Q.shape[1] // 2
    if h == 0:
        return _congruence(C, Q, None if L is None else L.T)
    if L is None:
        CQ = np.hstack(_side_by_side(lambda: C @ Q[:, :h], lambda: C @ Q[:, h:]))
        B = Q.T @ CQ
        return (B + B.T) / 2
    RQ = np.hstack(_side_by_side(lambda: blas.dtrmm(1.0, L, Q[:, :h], lower=1, trans_a=1),
                                 lambda: blas.dtrmm(1.0, L, Q[:, h:], lower=1, trans_a=1)))
    return _gram_two_tasks(RQ)


def _coarse_fine(alphas: np.ndarray, step: int = 3):
    """Split grid positions into a coarse subset (every ``step``-th alpha in ascending order, and
    the largest) and the rest; short grids are all coarse. Returns two index arrays."""
    order = np.argsort(alphas, kind="stable")
    if alphas.size < 3 * step:
        return order, order[:0]
    pick = np.zeros(alphas.size, dtype=bool)
    pick[::step] = True
    pick[-1] = True
    return np.sort(order[pick]), np.sort(order[~pick])


def _shared_ritz_starts(B, lam, alphas, Z_known, V_fallback):
    """Starting spaces for ``B - alpha diag(lam)`` from eigenvectors already found at other alphas.

    Eigenvectors move smoothly with alpha, so the span S of the known ones (orthonormalised,
    dependent directions dropped) holds most of the wanted ones: a Rayleigh-Ritz step in S per
    alpha (small dense problems, ``S' B S`` shared) gives the leading Ritz vectors as starts.
    Starts only: the iteration that follows enforces the tolerance.

    Parameters
    ----------
    B : (r, r); lam : (r,); alphas : (a,); Z_known : (c, r, k); V_fallback : (a, r, b)
        Unit-vector starts used where S has fewer than b directions.

    Returns
    -------
    V0 : (a, r, b)
    """
    r = B.shape[0]
    b = V_fallback.shape[2]
    U, s, _ = np.linalg.svd(Z_known.transpose(1, 0, 2).reshape(r, -1), full_matrices=False)
    S = U[:, s > 1e-8 * s[0]]
    p = S.shape[1]
    SBS = S.T @ (B @ S)
    SLS = S.T @ (lam[:, None] * S)
    _, E = np.linalg.eigh((SBS + SBS.T)[None] / 2 - alphas[:, None, None] * SLS[None])
    take = min(b, p)
    V0 = V_fallback.copy()
    V0[:, :, :take] = np.matmul(S[None], E[:, :, ::-1][:, :, :take])
    return V0


def _diagonal_basis_solve(B, lam, alphas, k, tol, max_iter, two_tasks=False):
    """Top-k eigenvectors of ``B - alpha diag(lam)`` for every alpha (B r x r, exactly symmetric:
    every reduction here returns it so, which spares symmetrising a possibly large matrix).

    The basis in which C_Y is diagonal makes Davidson's diagonal preconditioner
    exact for the background part. A coarse third of the grid is solved first; the
    rest start from a Rayleigh-Ritz step in the span of those solutions, which saves
    about a third of the sweeps. With ``two_tasks`` each stage's alphas are split
    between two single-threaded tasks run side by side (per alpha the iteration is
    the same either way).

    Returns Z (a, r, k), theta (a, k), residual (a,), n_iter (a,), Z_all' B Z_all (a*k, a*k).
    """
    r = B.shape[0]
    kk = min(k + 2, r)
    b_diag = np.diag(B).copy()
    scale = _norm_estimate(lambda T: B @ T, r) + alphas * np.abs(lam).max(initial=0.0)
    if r <= max(_FULL_MAX_D, 8 * kk):
        Z = np.empty((alphas.size, r, k))
        theta = np.empty((alphas.size, k))
        for i, a in enumerate(alphas):
            w, E = sla.eigh(B - a * np.diag(lam), subset_by_index=[r - k, r - 1])
            Z[i], theta[i] = E[:, ::-1], w[::-1]
        res, its = np.zeros(alphas.size), np.ones(alphas.size, dtype=int)
    else:
        Z = np.empty((alphas.size, r, k))
        theta = np.empty((alphas.size, k))
        res = np.empty(alphas.size)
        its = np.empty(alphas.size, dtype=int)
        V0 = _unit_starts(b_diag[None, :] - alphas[:, None] * lam[None, :], 2 * kk)
        coarse, fine = _coarse_fine(alphas)

        def run(part):
            return _davidson(lambda T: B @ T, lambda T: lam[:, None] * T, b_diag, lam, alphas[part], k,
                             V0[part], scale[part], tol, max_iter, 6 * kk)

        for part in (coarse, fine):
            if not part.size:
                continue
            if part is fine:
                V0[fine] = _shared_ritz_starts(B, lam, alphas[fine], Z[coarse], V0[fine])
            if two_tasks and part.size >= 2:
                # interleaved halves: slow (mid-grid) and fast alphas in both
                halves = (part[0::2], part[1::2])
                outs = _side_by_side(partial(run, halves[0]), partial(run, halves[1]))
            else:
                halves, outs = (part,), (run(part),)
            for half, out in zip(halves, outs):
                Z[half], theta[half], res[half], its[half] = out
    Zs = Z.transpose(1, 0, 2).reshape(r, -1)
    return Z, theta, res, its, Zs.T @ (B @ Zs)


def _gram_two_tasks(A):
    """A' A (c, c) for A (r, c), exactly symmetric, as two balanced tasks side by side:
    the two diagonal blocks (symmetric rank-k updates) alongside the off-diagonal block."""
    c = A.shape[1]
    h = c // 2
    if h == 0:
        return A.T @ A
    a, b = A[:, :h], A[:, h:]
    out = np.empty((c, c))

    def diagonal_blocks():
        out[:h, :h] = a.T @ a
        out[h:, h:] = b.T @ b

    def off_diagonal_block():
        out[:h, h:] = a.T @ b

    _side_by_side(diagonal_blocks, off_diagonal_block)
    out[h:, :h] = out[:h, h:].T
    return out
