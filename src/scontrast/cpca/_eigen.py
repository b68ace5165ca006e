"""The eigensolvers shared by the 'covariance', 'gram' and 'implicit' solvers.

A batched block Davidson iteration (:func:`_davidson`) finds the top-k eigenpairs of
``P - alpha Q`` for a whole grid of alphas at once; :func:`_diagonal_basis_solve` runs it
(coarse third of the grid first, then the rest from Rayleigh-Ritz starts) in a basis where
the background part is diagonal (the basis and its reductions: :mod:`._basis`).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import scipy.linalg as sla

from ._basis import _Background
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


def _davidson(apply_p, apply_q, p_diag, q_diag, alphas, k, V0, scale, tol, max_iter, max_basis, HV0=None,
              return_pz=False, q_low_rank=None):
    """Top-k eigenpairs of ``P - alpha Q`` for every alpha at once (batched block Davidson).

    Each alpha keeps its own search space (all of the same size, so that they
    stack); one sweep applies P and Q to the new directions of every alpha in a
    single product. Corrections are residuals divided by ``theta - diag(P - alpha Q)``
    (Davidson's preconditioner), which is exact when the matrix is diagonal.

    Parameters
    ----------
    apply_p, apply_q : callables (c, d) -> (c, d), applying P and Q to the rows of their argument
        (vectors as rows: the search spaces are stored so, and a product from the right
        needs no transposed copies)
    p_diag, q_diag : ndarray (d,)
    alphas : ndarray (a,)
    k : int, eigenpairs wanted; two more are iterated as guards
    V0 : ndarray (a, d, b0), initial search spaces (b0 >= k + 2)
    scale : ndarray (a,), ||P - alpha Q|| estimates; convergence is
        ``||residual|| <= tol * scale``
    max_iter, max_basis : int
    HV0 : ndarray (a, d, b0), optional
        ``(P - alpha Q) V0`` when the caller has it for free (then V0 must have orthonormal
        columns): unit-vector starts pick columns of P, Ritz starts combine shared products.
    q_low_rank : (lam (d,), Z (d, q), beta (q,)), optional
        Q is exactly ``diag(lam) + Z diag(beta) Z'``: the preconditioner then inverts
        ``theta - diag(P) + alpha Q`` exactly (Woodbury), not only its diagonal.
    return_pz : bool
        also return ``P Z``, from the products the iteration already has and Q applied to Z
        (for ``Z' P Z`` without another product with P; meant for a cheap Q).

    Returns
    -------
    Z : (a, d, k) eigenvectors; theta : (a, k) eigenvalues (descending);
    residual : (a,) largest relative residual norm; n_iter : (a,) sweeps used;
    with ``return_pz`` also PZ : (a, d, k)
    """
    n_alpha, d, b0 = V0.shape
    kk = min(k + 2, d)
    mb = min(max(max_basis, 3 * kk, b0 + kk), d)

    H = partial(_apply_shifted, apply_p, apply_q)
    pairs = _column_pairs(q_low_rank[1]) if q_low_rank is not None else None
    # search spaces as rows, in preallocated buffers: V[:, :m] (na, m, d), HV likewise
    V = np.zeros((n_alpha, mb, d))
    HV = np.zeros((n_alpha, mb, d))
    G = np.zeros((n_alpha, mb, mb))
    if HV0 is None:
        V[:, :b0] = np.linalg.qr(V0)[0].transpose(0, 2, 1)
        HV[:, :b0] = H(V[:, :b0], alphas)
    else:
        V[:, :b0] = V0.transpose(0, 2, 1)
        HV[:, :b0] = HV0.transpose(0, 2, 1)
    G[:, :b0, :b0] = np.matmul(V[:, :b0], HV[:, :b0].transpose(0, 2, 1))
    m = b0
    # the alphas still iterated are the first na rows of V, HV, G (views, no copies); order maps
    # rows to alphas, and a converged alpha's rows are overwritten by a later active one's
    order = np.arange(n_alpha)
    na = n_alpha
    Z_out = np.zeros((n_alpha, d, k))
    theta_out = np.zeros((n_alpha, k))
    res_out = np.full(n_alpha, np.inf)
    it_out = np.zeros(n_alpha, dtype=int)
    PZ_out = np.zeros((n_alpha, d, k)) if return_pz else None
    it = 0
    while na:
        it += 1
        idx = order[:na]
        a = alphas[idx]
        Gm = G[:na, :m, :m]
        w, S = np.linalg.eigh((Gm + Gm.transpose(0, 2, 1)) / 2)
        w, S = w[:, ::-1], S[:, :, ::-1]
        St = S[:, :, :kk].transpose(0, 2, 1)            # (na, kk, m)
        wt = w[:, :kk]
        Z = np.matmul(St, V[:na, :m])                   # Ritz vectors as rows (na, kk, d)
        HZ = np.matmul(St, HV[:na, :m])
        R = HZ - wt[:, :, None] * Z
        res = np.linalg.norm(R, axis=2) / scale[idx][:, None]
        done = (res[:, :k].max(axis=1) <= tol) | (it >= (max_iter[idx] if np.ndim(max_iter) else max_iter))
        if done.any():
            out = idx[done]
            Z_out[out] = Z[done, :k].transpose(0, 2, 1)
            if return_pz:  # P Z = (P - a Q) Z + a Q Z
                Zd = Z[done, :k]
                QZ = apply_q(Zd.reshape(-1, d)).reshape(Zd.shape)
                PZ_out[out] = (HZ[done, :k] + a[done, None, None] * QZ).transpose(0, 2, 1)
            theta_out[out] = wt[done, :k]
            res_out[out] = res[done, :k].max(axis=1)
            it_out[out] = it
            src = _compact(V, HV, G, order, done)
            na = src.size
            if not na:
                break
            a, S, w, R, wt = a[src], S[src], w[src], R[src], wt[src]
        floor = 1e-8 * scale[order[:na]][:, None, None]
        if q_low_rank is None:
            T = _corrections(R, wt, p_diag[None, :] - a[:, None] * q_diag[None, :], floor)
        else:
            T = _low_rank_corrections(R, wt, p_diag[None, :] - a[:, None] * q_low_rank[0][None, :], floor,
                                      q_low_rank[1], a[:, None] * q_low_rank[2][None, :], pairs)
        if m + kk > mb:
            m = _thick_restart(V[:na], HV[:na], G[:na], S, w, m, kk)
        m = _extend(H, V[:na], HV[:na], G[:na], m, T, a)
    if return_pz:
        return Z_out, theta_out, res_out, it_out, PZ_out
    return Z_out, theta_out, res_out, it_out


def _compact(V, HV, G, order, done):
    """Drop the converged rows among the first ``done.size`` of V, HV, G and order (in place):
    later active rows move into their places, so only as many rows move as have converged.

    Returns src: for each of the remaining active rows, the row it came from (index into ``done``).
    """
    src = np.flatnonzero(~done)
    nk = src.size
    holes = np.flatnonzero(done[:nk])                   # converged rows inside the new prefix
    fillers = src[src >= nk]                            # active rows beyond it
    if holes.size:
        V[holes], HV[holes], G[holes] = V[fillers], HV[fillers], G[fillers]
        order[holes] = order[fillers]
    moved = np.arange(nk)
    moved[holes] = fillers
    return moved


def _apply_shifted(apply_p, apply_q, T, a):
    """(P - a Q) applied to the rows of T (na, c, d), all alphas in one product. Returns (na, c, d)."""
    nb, c, d = T.shape
    flat = T.reshape(nb * c, d)
    out = apply_p(flat).reshape(nb, c, d)
    out -= a[:, None, None] * apply_q(flat).reshape(nb, c, d)
    return out


def _corrections(R, wt, diag, floor):
    """Davidson's corrections: residuals R (na, kk, d) divided by ``theta - diag(P - alpha Q)``.

    ``wt`` (na, kk) are the Ritz values, ``diag`` (na, d) the diagonals; denominators are kept
    at least ``floor`` (na, 1, 1) in magnitude.
    """
    return R / _floored(wt[:, :, None] - diag[:, None, :], floor)


def _low_rank_corrections(R, wt, diag, floor, Z, G, pairs=None):
    """Corrections ``(theta - diag + Z diag(g) Z')^{-1} r`` for residuals R (na, kk, d): the
    diagonal ``theta - diag`` as in :func:`_corrections`, the low-rank term (Z (d, q), G (na, q):
    one g per alpha) inverted exactly by the Woodbury identity (a q x q solve per vector).

    ``pairs``: ``(i, j, Z[:, i] * Z[:, j])`` over i <= j (:func:`_column_pairs`), if precomputed.
    Products only with Z and those pairs: nothing of size (na, kk, q, d) is formed.
    """
    i, j, Zp = _column_pairs(Z) if pairs is None else pairs
    inv = 1.0 / _floored(wt[:, :, None] - diag[:, None, :], floor)
    T = R * inv                                               # D^-1 r
    na, kk, d = R.shape
    q = Z.shape[1]
    ZDZ = np.empty((na, kk, q, q))                            # Z' D^-1 Z per vector
    ZDZ[..., i, j] = (inv.reshape(-1, d) @ Zp).reshape(na, kk, -1)
    ZDZ[..., j, i] = ZDZ[..., i, j]
    M = ZDZ * G[:, None, None, :] + np.eye(q)                 # I + Z' D^-1 Z diag(g)
    y = np.linalg.solve(M, (T.reshape(-1, d) @ Z).reshape(na, kk, q, 1))[..., 0]  # (I + Z' D^-1 Z g)^-1 Z' D^-1 r
    T -= ((G[:, None, :] * y).reshape(-1, q) @ Z.T).reshape(na, kk, d) * inv
    return T


def _floored(den, floor):
    """den with every |entry| raised to at least floor (broadcast), keeping its sign (+ for 0)."""
    return np.copysign(np.maximum(np.abs(den), floor), den)


def _column_pairs(Z):
    """(i, j, Z[:, i] * Z[:, j]) over the pairs i <= j of Z's columns, (d, q (q + 1) / 2)."""
    i, j = np.triu_indices(Z.shape[1])
    return i, j, Z[:, i] * Z[:, j]


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
    for _ in range(2):  # twice is enough (Kahan's rule), for both the projection and the normalisation
        T = _orthonormal_rows(T - np.matmul(np.matmul(T, Vm.transpose(0, 2, 1)), Vm))
    HT = H(T, a)
    top = np.matmul(Vm, HT.transpose(0, 2, 1))      # (na, m, kk)
    G[:, :m, m:m + kk] = top
    G[:, m:m + kk, :m] = top.transpose(0, 2, 1)
    G[:, m:m + kk, m:m + kk] = np.matmul(T, HT.transpose(0, 2, 1))
    V[:, m:m + kk] = T
    HV[:, m:m + kk] = HT
    return m + kk


def _orthonormal_rows(T):
    """Orthonormal rows spanning those of each T[i] (na, c, d), c <= d: Cholesky QR (one small Gram
    matrix and triangular factor per alpha, a few times cheaper than Householder QR on these
    skinny blocks), Householder QR when a Gram matrix is too ill-conditioned for a Cholesky factor.
    Called twice, as the projections are, the first pass's loss of orthogonality is removed by the
    second. Returns (na, c, d), C order."""
    # rows of unit norm first (the same span): a converged column's correction is orders of
    # magnitude shorter than the others, which is no reason to fall back to Householder
    norms = np.sqrt(np.einsum("acd,acd->ac", T, T))
    if not (norms > 0).all():
        return _householder_rows(T)
    T = T / norms[:, :, None]
    try:
        L = np.linalg.cholesky(np.matmul(T, T.transpose(0, 2, 1)))
    except np.linalg.LinAlgError:
        return _householder_rows(T)
    # Cholesky QR loses orthogonality as cond(T)^2 eps: only for well-conditioned blocks
    if (np.diagonal(L, axis1=1, axis2=2) ** 2 < _CHOLQR_MIN_PIVOT).any():
        return _householder_rows(T)
    return np.linalg.inv(L) @ T


def _householder_rows(T):
    """Orthonormal rows spanning those of each T[i] (na, c, d) by Householder QR, (na, c, d), C order."""
    return np.ascontiguousarray(np.linalg.qr(T.transpose(0, 2, 1))[0].transpose(0, 2, 1))


def _unit_starts(diag_values: np.ndarray, b: int) -> np.ndarray:
    """Initial search spaces: the unit vectors of the b largest diagonal entries, (a, d, b)."""
    n_alpha, d = diag_values.shape
    top = np.argsort(-diag_values, axis=1, kind="stable")[:, :b]
    V0 = np.zeros((n_alpha, d, b))
    V0[np.arange(n_alpha)[:, None], top, np.arange(b)[None, :]] = 1.0
    return V0


# Cholesky QR in the Davidson's extension when every squared pivot of the rows scaled to unit
# norm is at least this (cond(T) <~ 1e4: its loss of orthogonality, ~cond^2 eps, then stays
# below 1e-8 and the second pass removes it); else Householder QR
_CHOLQR_MIN_PIVOT = 1e-8
_COARSE_SWEEPS = 8


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


def _unit_start_products(B, background, alphas, V0):
    """``(B - alpha C_Y) V0`` for unit-vector starts V0 (a, r, b): columns of B and of the
    background operator C_Y (:class:`_Background`), no product.

    B must be exactly symmetric (its rows are its columns). Returns (a, r, b).
    """
    top = np.argmax(V0, axis=1)                              # (a, b): the unit vectors' positions
    HV0 = B[top].transpose(0, 2, 1).copy()                   # B[:, top] as (a, r, b)
    a_idx, b_idx = np.arange(alphas.size)[:, None], np.arange(V0.shape[2])[None, :]
    HV0[a_idx, top, b_idx] -= alphas[:, None] * background.lam[top]
    if background.beta.size:
        HV0 -= alphas[:, None, None] * background.low_rank_columns(top).transpose(1, 0, 2)
    return HV0


def _ritz_space(B, background, Z_known):
    """The span S of eigenvectors already found at other alphas, for :func:`_ritz_starts`.

    Eigenvectors move smoothly with alpha, so S holds most of the wanted ones at the alphas
    in between. Returns ``(S, B S, C_Y S, S' B S, S' C_Y S)``, S (r, p) orthonormal
    (dependent directions dropped: column-pivoted QR; C_Y the :class:`_Background`).
    """
    Q, R, _ = sla.qr(Z_known.transpose(1, 0, 2).reshape(B.shape[0], -1), mode="economic", pivoting=True)
    diag = np.abs(np.diag(R))
    S = Q[:, diag > 1e-8 * diag.max(initial=0.0)] if diag.size else Q
    BS = B @ S
    LS = background.apply(S)
    SBS = S.T @ BS
    return S, BS, LS, (SBS + SBS.T) / 2, S.T @ LS


def _ritz_starts(space, alphas, b):
    """Starting spaces for ``B - alpha C_Y``: the leading Ritz vectors of a Rayleigh-Ritz
    step in the span S of :func:`_ritz_space` (small dense problems), and their products,
    combined from the shared ``B S`` (no product with B).

    Starts only: the iteration that follows enforces the tolerance.

    Returns V0 (a, r, b') with orthonormal columns and HV0 = ``(B - alpha C_Y) V0``,
    b' = min(b, dim S).
    """
    S, BS, LS, SBS, SLS = space
    _, E = np.linalg.eigh(SBS[None] - alphas[:, None, None] * SLS[None])
    E = E[:, :, ::-1][:, :, :min(b, S.shape[1])]
    return np.matmul(S[None], E), np.matmul(BS[None] - alphas[:, None, None] * LS[None], E)


def _diagonal_basis_solve(B, background, alphas, k, tol, max_iter, two_tasks=False, b_norm=None):
    """Top-k eigenvectors of ``B - alpha C_Y`` for every alpha (B r x r, exactly symmetric:
    every reduction here returns it so, which spares symmetrising a possibly large matrix;
    C_Y the :class:`_Background`, diagonal or diagonal plus low rank, or an array of its
    diagonal entries).

    A basis in which C_Y is diagonal (or nearly: plus a rank-one term) makes Davidson's
    diagonal preconditioner exact (nearly exact) for the background part. A coarse third of the grid is solved first, from unit
    vectors (whose products are columns of B); the rest start from a Rayleigh-Ritz step in
    the span of those solutions, which saves about a third of the sweeps (their products
    combine one shared product). With ``two_tasks`` each stage's alphas are split between
    two single-threaded tasks run side by side (per alpha the iteration is the same either way).

    ``b_norm``: an estimate of ||B|| if the caller has one (e.g. of a matrix B is similar to).

    Returns Z (a, r, k), theta (a, k), residual (a,), n_iter (a,), Z_all' B Z_all (a*k, a*k).
    """
    if not isinstance(background, _Background):
        background = _Background(background)
    r = B.shape[0]
    kk = min(k + 2, r)
    if b_norm is None:
        b_norm = _norm_estimate(lambda T: B @ T, r)
    scale = b_norm + alphas * background.norm
    Z = np.empty((alphas.size, r, k))
    theta = np.empty((alphas.size, k))
    if r <= max(_FULL_MAX_D, 8 * kk):
        for i, a in enumerate(alphas):
            w, E = sla.eigh(B - a * background.dense(), subset_by_index=[r - k, r - 1])
            Z[i], theta[i] = E[:, ::-1], w[::-1]
        res, its = np.zeros(alphas.size), np.ones(alphas.size, dtype=int)
        PZ = np.matmul(B[None], Z)
    else:
        res = np.empty(alphas.size)
        its = np.empty(alphas.size, dtype=int)
        PZ = np.empty((alphas.size, r, k))
        b_diag = np.diag(B).copy()
        q_diag = background.diagonal()
        space = None

        def run(part, budget):
            a = alphas[part]
            if space is None:
                V0 = _unit_starts(b_diag[None, :] - a[:, None] * q_diag[None, :], 2 * kk)
                HV0 = _unit_start_products(B, background, a, V0)
            else:
                V0, HV0 = _ritz_starts(space, a, 2 * kk)
            return _davidson(lambda T: T @ B, background.apply_rows, b_diag, q_diag, a, k,
                             V0, scale[part], tol, budget[part], 6 * kk, HV0=HV0, return_pz=True,
                             q_low_rank=(background.lam, background.Z, background.beta)
                             if background.beta.size else None)

        coarse, fine = _coarse_fine(alphas)
        # the coarse stage stops at _COARSE_SWEEPS: an alpha not converged by then (near a crossing
        # of eigenvalues) goes on in the fine stage, from the Ritz space, with what is left of
        # max_iter, instead of holding up the whole stage
        budget = np.full(alphas.size, int(max_iter))
        cap = min(int(max_iter), _COARSE_SWEEPS) if fine.size else int(max_iter)
        used = np.zeros(alphas.size, dtype=int)
        for stage, part in enumerate((coarse, fine)):
            if stage == 0:
                stage_budget = np.minimum(budget, cap)
            else:
                late = coarse[(res[coarse] > tol) & (used[coarse] < budget[coarse])]
                part = np.sort(np.concatenate([fine, late]))
                stage_budget = budget - used
                space = _ritz_space(B, background, Z[coarse])
                space = space if space[0].shape[1] >= kk else None
            if not part.size:
                continue
            if two_tasks and part.size >= 2:
                # interleaved halves: slow (mid-grid) and fast alphas in both
                halves = (part[0::2], part[1::2])
                outs = _side_by_side(partial(run, halves[0], stage_budget), partial(run, halves[1], stage_budget))
            else:
                halves, outs = (part,), (run(part, stage_budget),)
            for half, out in zip(halves, outs):
                Z[half], theta[half], res[half], n_it, PZ[half] = out
                used[half] += n_it
        its = used
    Zs = Z.transpose(1, 0, 2).reshape(r, -1)
    return Z, theta, res, its, Zs.T @ PZ.transpose(1, 0, 2).reshape(r, -1)
