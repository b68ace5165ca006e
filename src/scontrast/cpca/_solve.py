"""Contrastive components for every alpha of a grid: the four solvers.

For target cells X (n x d) and background cells Y (m x d), each centred on its own
mean, the contrastive components at contrast strength ``alpha`` are the top
eigenvectors of the symmetric matrix ``C_X - alpha * C_Y`` (sample covariances
with denominators n - 1 and m - 1, as the reference package ``contrastive``).
Four solvers give the same subspaces (to the tolerance ``tol``):

``'full'``
    the d x d covariances, then a partial symmetric eigensolver
    (``scipy.linalg.eigh(subset_by_index=...)``) per alpha; for small d.
``'covariance'``
    the covariances once and one basis Q shared by the whole grid in which C_Y is
    ``diag(lam)`` plus a term of small rank (the eigenvectors of the blocks of its torn
    tridiagonal form): there ``C_X - alpha C_Y`` is a fixed dense matrix minus alpha
    times that cheap operator, so a block Davidson iteration with the diagonal as
    preconditioner converges in a few sweeps for every alpha, and all alphas advance
    together (one matrix product per sweep for the whole grid).
``'gram'``
    when there are fewer cells than genes: the same iteration in exact coordinates
    of the span of the centred cells (at most n + m - 2 dimensions; every direction
    with non-zero variance lies in it, so nothing is truncated), built from the
    cell x cell Gram matrices over blocks of genes. C_Y is diagonal in them by
    construction: the eigendecomposition of the background's Gram matrix for the
    background span, a pivoted Cholesky factor for the target directions outside it.
``'implicit'``
    no dense matrix at all: ``v -> C_X v - alpha C_Y v`` is applied through the
    (sparse) data with implicit centring, in the batched Davidson iteration with the
    gene-wise diagonal as preconditioner. The fallback when both genes and cells are
    too many for a dense reduction; it can need many sweeps at large alpha when the
    background covariance is ill-conditioned (a warning reports the residuals).

In 'covariance' and 'gram' the grid is solved coarse to fine: every third alpha
first, then the others from a Rayleigh-Ritz step in the span of those solutions
(starting spaces only; every alpha is iterated to ``tol``). Threads: ``threads`` of them, used
as :mod:`scontrast.cpca._threads` describes.
"""

from __future__ import annotations

from concurrent.futures import Future
from functools import partial

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.linalg import lapack

from ..core import ScontrastError, blas_threads
from ._basis import (
    _back_transform,
    _blocks_times,
    _cholesky,
    _congruence,
    _gram_in_basis,
    _gram_two_tasks,
    _split_block,
    _tridiagonal_split_eigh,
)
from ._eigen import _davidson, _diagonal_basis_solve, _norm_estimate, _sign_flips, _unit_starts
from ._moments import _Moments
from ._threads import _side_by_side, _two_tasks

# Largest dense side of the shared reductions: d x d covariances ('covariance') or
# cell x cell Gram matrices ('gram'); beyond it the operator is applied through the data.
_DENSE_MAX = 12000


def _cell_space_reduction(moments: _Moments, two_tasks: bool = False):
    """Exact coordinates of the centred data in the (at most n + m - 2)-dimensional span of the cells.

    With Z_Y = W diag(sig) V' from the eigendecomposition of K_YY, the first
    coordinates are those of the background span (where C_Y = diag(sig)); the rest
    come from a pivoted Cholesky factor of the target's Gram matrix outside that span
    (where C_Y = 0). Every direction with non-zero variance in either group lies in
    this span, so nothing is truncated: no PCA.

    Returns
    -------
    B : (r, r) C_X in these coordinates; lam : (r,) C_Y's diagonal in them;
    to_genes : callable (a, r, k) -> (a, d, k), coordinates to gene loadings

    ``two_tasks``: the background's Gram matrix and its eigendecomposition alongside
    the target's Gram blocks, and the large products in halves (see :func:`_two_tasks`).
    """
    if two_tasks:
        moments.gene_major()  # once, before both tasks slice it
        (sig, W), (kxy, kxx) = _side_by_side(lambda: np.linalg.eigh(moments.gram_blocks(("yy",))[0]),
                                             lambda: moments.gram_blocks(("xy", "xx")))
    else:
        kyy, kxy, kxx = moments.gram_blocks()
        sig, W = sla.eigh(kyy, driver="evd")
        del kyy
    keep = sig > 1e-12 * max(sig.max(initial=0.0), 0.0)
    sig, W = sig[keep][::-1], np.ascontiguousarray(W[:, keep][:, ::-1])
    if two_tasks:
        h = sig.size // 2
        P1 = np.hstack(_side_by_side(lambda: kxy @ W[:, :h], lambda: kxy @ W[:, h:])) / np.sqrt(sig)
        R = kxx - _gram_two_tasks(P1.T)
    else:
        P1 = (kxy @ W) / np.sqrt(sig)
        R = kxx - P1 @ P1.T
        R = (R + R.T) / 2
    n = R.shape[0]
    factor, piv, rank, _ = lapack.dpstrf(R, tol=-1.0, lower=0)
    rank = int(rank) if np.diag(R).max(initial=0.0) > 1e-12 * max(np.diag(kxx).max(initial=0.0), 1e-300) else 0
    upper = np.triu(factor[:rank, :])               # R[p][:, p] = upper' upper, p = piv - 1
    P2 = np.zeros((n, rank))
    P2[piv - 1, :] = upper.T
    Lx = np.hstack([P1, P2])
    lam = np.concatenate([sig, np.zeros(rank)])
    ry = sig.size

    def to_genes(Z):
        a, r, k = Z.shape
        C = Z.transpose(1, 0, 2).reshape(r, a * k)
        # target-cell coefficients G with P2' G = C_perp: every solution gives the same gene
        # vector Z_X' G (restricted to outside the background span); take the one supported
        # on the pivot cells, a triangular solve
        G = np.zeros((n, a * k))
        if rank:
            G[piv[:rank] - 1] = sla.solve_triangular(upper[:, :rank], C[ry:], lower=False)
        H = W @ ((C[:ry] - P1.T @ G) / np.sqrt(sig)[:, None])   # background-cell coefficients (m, a*k)
        U = moments.rmatmat(G, H)
        return U.reshape(-1, a, k).transpose(1, 0, 2)

    return (_gram_two_tasks(Lx) if two_tasks else Lx.T @ Lx), lam, to_genes


def _basis_half(reflectors, blocks, first, CX):
    """One column half of the solver's basis, ``Q = H diag(S_1, ..., S_p)`` (:func:`_tridiagonal_split_eigh`),
    and ``C_X Q`` (when C_X has no Cholesky factor)."""
    Q = _back_transform(reflectors, _split_block(blocks, first))
    return Q, CX @ Q


def _to_genes(reflectors, blocks, Z):
    """Gene loadings ``Q Z = H (diag(S_1, ..., S_p) Z)`` for coordinates Z (a, d, k) in the basis:
    block products, then the reflectors. One task: reading the reflectors bounds it, so column
    halves side by side gain nothing (docs/cpca.md). Returns (a, d, k)."""
    a, d, kz = Z.shape
    flat = _back_transform(reflectors, _blocks_times(blocks, Z.transpose(1, 0, 2).reshape(d, a * kz)), overwrite=True)
    return flat.reshape(d, a, kz).transpose(1, 0, 2)


def _background_share(n: int, m: int, d: int) -> float:
    """The share of the background's cells whose part of C_Y's sum the background's task forms
    (the target's task forms the rest before C_X), so that both tasks end together: the background's
    task then reduces C_Y to tridiagonal form (about 8 d^3 / 3 flops at the speed of a rank-k
    update: half of its flops are matrix-vector products), the target's task forms C_X (n d^2) and
    its Cholesky factor (d^3 / 3). Measured at n = m = 3,000, d = 1,000: 0.61, both tasks ~75 ms
    after C_Y's sum, against 0.067 / 0.092 s with halves (docs/cpca.md)."""
    target = n * d * d + d**3 / 3
    return float(np.clip((m * d * d + target - 8 * d**3 / 3) / (2 * m * d * d), 0.5, 0.95))


def _covariance_solve_two_tasks(moments: _Moments, alphas: np.ndarray, k: int, tol: float, max_iter: int):
    """The 'covariance' solver as pairs of single-threaded tasks side by side (see :func:`_two_tasks`).

    The basis: C_Y's tridiagonal form and the eigenvectors of its blocks
    (:func:`_tridiagonal_split_eigh`, where C_Y is diagonal plus low rank) run alongside C_X, its
    Cholesky factor R and its norm, and C_Y's sum over cells is shared between the two tasks
    so that they end together (:func:`_background_share`). Then ``Q' C_X Q = W' W`` with ``W = R H diag(S_1, ..., S_p)``,
    the two row halves of W and their grams side by side (:func:`_gram_in_basis`). Without a
    Cholesky factor (C_X singular) Q is formed in column halves and B = Q' (C_X Q). The grid is
    split in halves.

    Returns to_genes (callable (a, d, k) -> (a, d, k), ``Q Z``), then what
    :func:`_diagonal_basis_solve` returns.
    """
    d = moments.X.shape[1]

    def target_side(hand_over=None):
        if hand_over is not None:
            hand_over()
        CX = moments.covariance_x()
        return CX, _cholesky(CX), _norm_estimate(lambda T: CX @ T, d)

    if sp.issparse(moments.X) or sp.issparse(moments.Y):
        CY = moments.covariance_y(two_tasks=True)
        background_side, target_task = partial(_tridiagonal_split_eigh, CY), target_side
        del CY
    else:
        first, second, finish = moments.background_parts(_background_share(moments.n, moments.m, d))
        handed = Future()  # the second part of C_Y's sum, from the target's task to the background's

        def hand_over():
            try:
                handed.set_result(second())
            except BaseException as exc:  # the background's task must not wait for ever
                handed.set_exception(exc)
                raise

        def background_side():
            C = first()
            C += handed.result()
            return _tridiagonal_split_eigh(finish(C))

        target_task = partial(target_side, hand_over)
    (background, blocks, reflectors), (CX, R, norm) = _side_by_side(background_side, target_task)
    if R is not None:
        del CX  # d x d matrices are freed as soon as they are used up (d reaches 12,000 here)
        h = d // 2
        B, B2 = _side_by_side(partial(_gram_in_basis, R[:h], reflectors, blocks),
                              partial(_gram_in_basis, R[h:], reflectors, blocks))
        del R
        B += B2
        del B2
    else:  # C_X singular: Q' (C_X Q), symmetrised
        (Q1, W1), (Q2, W2) = _side_by_side(partial(_basis_half, reflectors, blocks, True, CX),
                                           partial(_basis_half, reflectors, blocks, False, CX))
        del CX
        B = np.block([[Q1.T @ W1, Q1.T @ W2], [Q2.T @ W1, Q2.T @ W2]])
        B = (B + B.T) / 2
        del Q1, Q2, W1, W2
    return (partial(_to_genes, reflectors, blocks),) + \
        _diagonal_basis_solve(B, background, alphas, k, tol, max_iter, two_tasks=True, b_norm=norm)


def _solve(moments: _Moments, alphas: np.ndarray, k: int, solver: str, tol: float, max_iter: int, threads: int = 1):
    """Contrastive components for every alpha, on ``threads`` threads (see :mod:`._threads`).

    Returns
    -------
    U : (a, d, k) orthonormal columns; theta : (a, k); residual : (a,);
    n_iter : (a,); gram : (a*k, a*k) = U_all' C_X U_all (for the projection affinity)
    """
    two = _two_tasks(threads) and solver in ("covariance", "gram") and (solver == "gram" or moments.X.shape[1] >= 4)
    with blas_threads(1 if two else threads):
        return _solve_grid(moments, alphas, k, solver, tol, max_iter, two, grid_tasks=threads >= 3)


def _grid_solve(B, background, alphas, k, tol, max_iter, tasks: bool):
    """:func:`_diagonal_basis_solve`; ``tasks``: its grid in two single-threaded tasks side by side.

    With three or more threads the reductions run on a threaded BLAS, but the Davidson's
    products are small (d x d times a few vectors): a threaded BLAS gains little on them and its
    spinning threads collapse when the cores are shared (docs/cpca.md), so the grid's two halves
    run as single-threaded tasks instead.
    """
    if not tasks:
        return _diagonal_basis_solve(B, background, alphas, k, tol, max_iter)
    with blas_threads(1):
        return _diagonal_basis_solve(B, background, alphas, k, tol, max_iter, two_tasks=True)


def _solve_grid(moments: _Moments, alphas: np.ndarray, k: int, solver: str, tol: float, max_iter: int, two: bool,
                grid_tasks: bool = False):
    """:func:`_solve` under the BLAS setting it chose; ``two``: pairs of single-threaded tasks throughout;
    ``grid_tasks``: the reductions on the threaded BLAS, the grid in two single-threaded tasks."""
    d = moments.X.shape[1]
    n_alpha = alphas.size
    if solver == "full":
        CX, CY = moments.covariances()
        U = np.empty((n_alpha, d, k))
        theta = np.empty((n_alpha, k))
        for i, a in enumerate(alphas):
            w, E = sla.eigh(CX - a * CY, subset_by_index=[d - k, d - 1])
            U[i], theta[i] = E[:, ::-1], w[::-1]
        U *= _sign_flips(U)[:, None, :]
        flat = U.transpose(1, 0, 2).reshape(d, -1)
        return U, theta, np.zeros(n_alpha), np.ones(n_alpha, dtype=int), flat.T @ (CX @ flat)

    if solver == "covariance":
        if two:
            to_genes, Z, theta, res, its, gram = _covariance_solve_two_tasks(moments, alphas, k, tol, max_iter)
            U = to_genes(Z)
        else:
            CX, CY = moments.covariances()
            background, blocks, reflectors = _tridiagonal_split_eigh(CY)
            del CY  # its storage holds the reflectors now
            R = _cholesky(CX)
            if R is not None:
                del CX
                B = _gram_in_basis(R, reflectors, blocks)
            else:
                Q = np.hstack([_back_transform(reflectors, _split_block(blocks, first)) for first in (True, False)])
                B = _congruence(CX, Q, None)  # C_X has no Cholesky factor (R is None)
                del CX, Q
            Z, theta, res, its, gram = _grid_solve(B, background, alphas, k, tol, max_iter, grid_tasks)
            U = _to_genes(reflectors, blocks, Z)
    elif solver == "gram":
        B, lam, to_genes = _cell_space_reduction(moments, two)
        if lam.size < k:
            raise ScontrastError(f"n_components: {k} exceeds the rank of the centred data ({lam.size})")
        if two:
            Z, theta, res, its, gram = _diagonal_basis_solve(B, lam, alphas, k, tol, max_iter, True)
        else:
            Z, theta, res, its, gram = _grid_solve(B, lam, alphas, k, tol, max_iter, grid_tasks)
        del B
        U = to_genes(Z)
    else:
        kk = min(k + 2, d)
        dx, dy = moments.diagonals()
        scale = _norm_estimate(moments.matmat_x, d) + alphas * _norm_estimate(moments.matmat_y, d)
        V0 = _unit_starts(dx[None, :] - alphas[:, None] * dy[None, :], 2 * kk)
        U, theta, res, its = _davidson(lambda T: moments.matmat_x(T.T).T, lambda T: moments.matmat_y(T.T).T, dx, dy,
                                       alphas, k, V0, scale, tol, max_iter, 4 * kk)
        flat = U.transpose(1, 0, 2).reshape(d, -1)
        gram = flat.T @ moments.matmat_x(flat)
    flips = _sign_flips(U)
    U = U * flips[:, None, :]
    f = flips.reshape(-1)
    gram = gram * f[:, None] * f[None, :]
    return U, theta, res, its, gram
