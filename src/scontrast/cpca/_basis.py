"""The basis the dense solvers iterate in, and the dense reductions that build it.

C_Y's torn tridiagonal form (:func:`_tridiagonal_split_eigh`: the reflectors H and the
eigenvectors S_i of its blocks), C_Y in the basis Q = H diag(S_1, ..., S_p) as a diagonal plus a
term of small rank (:class:`_Background`), C_X in that basis (:func:`_gram_in_basis`,
:func:`_congruence`), loadings back in genes (:func:`_back_transform`), and Gram matrices as two
tasks side by side (:func:`_gram_two_tasks`). The iteration itself is in :mod:`._eigen`.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla
from scipy.linalg import blas, lapack

from . import _lapack
from ._threads import _side_by_side


class _Background:
    """C_Y in the solver's basis: ``diag(lam) + Z diag(beta) Z'`` (r, r), a diagonal plus a term of
    small rank q (Z (r, q), beta (q,); q = 0: diagonal).

    In an eigenbasis of C_Y, q = 0. The 'covariance' solver's basis is instead the eigenbasis of
    the blocks of C_Y's torn tridiagonal form (:func:`_tridiagonal_split_eigh`), where the
    couplings between the blocks come back as the low-rank term: applying it costs about as much
    as the diagonal, and Davidson's preconditioner stays close to exact for the background part.

    lam (r,); norm : ||C_Y|| (its largest |eigenvalue|).
    """

    def __init__(self, lam, beta=(), Z=None, norm=None):
        self.lam = np.asarray(lam, dtype=float)
        self.beta = np.asarray(beta, dtype=float).reshape(-1)
        self.Z = np.zeros((self.lam.size, 0)) if Z is None else np.asarray(Z, dtype=float).reshape(self.lam.size, -1)
        self.norm = float(np.abs(self.lam).max(initial=0.0)) if norm is None else float(norm)

    def diagonal(self):
        """(r,)."""
        return self.lam + self.Z**2 @ self.beta

    def apply(self, T):
        """C_Y T for T (r, c), (r, c)."""
        out = self.lam[:, None] * T
        if self.beta.size:
            out += self.Z @ (self.beta[:, None] * (self.Z.T @ T))
        return out

    def apply_rows(self, T):
        """``T C_Y`` for T (c, r): C_Y applied to the rows of T, (c, r)."""
        out = T * self.lam
        if self.beta.size:
            out += ((T @ self.Z) * self.beta) @ self.Z.T
        return out

    def dense(self):
        """(r, r)."""
        return np.diag(self.lam) + (self.Z * self.beta) @ self.Z.T

    def low_rank_columns(self, idx):
        """The low-rank term's columns ``Z diag(beta) Z[idx]'`` for an integer array idx of any shape:
        (r, *idx.shape)."""
        return np.einsum("rq,...q->r...", self.Z * self.beta, self.Z[idx])


def _cholesky(C):
    """Upper Cholesky factor R (C = R'R) of a symmetric C (d, d), or None if C is not positive definite."""
    R, info = lapack.dpotrf(C, lower=0, clean=1)
    return R if info == 0 else None


# Rows per block of the torn tridiagonal form, and most blocks: small blocks make the tridiagonal
# eigensolver cheap (divide and conquer's work grows as the cube of the size); each block
# boundary adds one to the rank of the background's low-rank term, which the Davidson's
# preconditioner inverts exactly (Woodbury: 219-225 alpha-sweeps at d = 1,000 for 2 to 8
# blocks, as many as with C_Y's own eigenvectors), at a cost growing as the square of the rank
# (at d = 1,000 the Davidson takes 81 ms with one block, 88 with four, 96 with eight: docs/cpca.md).
_BLOCK_ROWS = 250
_MAX_BLOCKS = 16


def _block_bounds(d: int, rows: int = _BLOCK_ROWS) -> np.ndarray:
    """Boundaries 0 = b_0 < b_1 < ... < b_p = d of p = round(d / rows) near-equal blocks, 1 <= p <= 16
    (p even when it exceeds 1, so that the two column halves of the basis hold whole blocks)."""
    p = min(max(1, int(round(d / rows))), _MAX_BLOCKS)
    if p > 1 and p % 2:
        p += 1
    p = min(p, d)
    return np.linspace(0, d, p + 1).round().astype(int)


def _tridiagonal_split_eigh(C, rows: int = _BLOCK_ROWS):
    """C's tridiagonal form and the eigendecompositions of its blocks:
    ``C = H S (diag(lam) + Z diag(beta) Z') S' H'`` with S = diag(S_1, ..., S_p).

    LAPACK's dsytrd gives ``C = H T H'``. Tearing T at each block boundary b (as divide and
    conquer does) writes it as ``diag(T_1, ..., T_p) + sum_b beta_b v_b v_b'`` (v_b = e_{b-1} + e_b,
    beta_b = T[b-1, b], the blocks' corner entries less beta_b), and dstevd on each block gives
    its eigenvectors S_i (divide and conquer's work grows as the cube of the size: four blocks of
    250 rows take a fifth of the time of 1,000 rows, eight of 125 less still). In the basis H S, C is ``diag(lam)`` plus the
    low-rank term with columns z_b = S' v_b: the merges that divide and conquer would do next are
    left to the Davidson iteration, which applies that term about as cheaply as the diagonal.
    Called without the GIL (:mod:`._lapack`), so a task beside it runs.

    C (d, d), exactly symmetric, is overwritten. Returns the background operator
    (:class:`_Background`, its norm exact), the blocks [S_1, ..., S_p] and the reflectors
    ``(V, tau)`` of H.
    """
    # C is symmetric, so its transpose (Fortran order when C is in C order) is C: no copy
    packed = C.T
    d = packed.shape[0]
    bounds = _block_bounds(d, rows)
    try:
        diag, off, tau = _lapack.dsytrd_lower(packed)
        if d > 1:
            ends = [float(sla.eigvalsh_tridiagonal(diag, off, select="i", select_range=(i, i))[0]) for i in (0, d - 1)]
        else:
            ends = [float(diag[0])]
        cuts = bounds[1:-1]
        beta = off[cuts - 1].copy()
        torn = diag.copy()
        torn[cuts - 1] -= beta
        torn[cuts] -= beta
        parts = [_lapack.dstevd(torn[lo:hi], off[lo:hi - 1]) for lo, hi in zip(bounds[:-1], bounds[1:])]
    except np.linalg.LinAlgError:
        raise np.linalg.LinAlgError("the eigendecomposition of the background covariance did not converge") from None
    blocks = [S for _, S in parts]
    Z = np.zeros((d, cuts.size))
    for j in range(cuts.size):  # cut j ends block j: v's coordinates are S_j's last row and S_{j+1}'s first
        Z[bounds[j]:bounds[j + 1], j] = blocks[j][-1]
        Z[bounds[j + 1]:bounds[j + 2], j] = blocks[j + 1][0]
    background = _Background(np.concatenate([lam for lam, _ in parts]), beta, Z, norm=max(map(abs, ends)))
    return background, blocks, (packed[1:, :-1], tau)


def _split_block(blocks, first: bool):
    """The first (or second) column half of ``diag(S_1, ..., S_p)``, (d, c), F order: the
    basis's two halves, one per task; the first half of the blocks, or of a single block's columns."""
    sizes = [S.shape[0] for S in blocks]
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    d = int(starts[-1])
    if len(blocks) == 1:
        h = d // 2
        cols = slice(0, h) if first else slice(h, d)
        return np.asfortranarray(blocks[0][:, cols])
    half = len(blocks) // 2
    chosen = range(half) if first else range(half, len(blocks))
    lo = starts[chosen.start]
    out = np.zeros((d, starts[chosen.stop] - lo), order="F")
    for i in chosen:
        out[starts[i]:starts[i + 1], starts[i] - lo:starts[i + 1] - lo] = blocks[i]
    return out


def _back_transform(reflectors, S, overwrite=False):
    """``H S`` for S (d, c), e.g. columns of the tridiagonal blocks' eigenvectors (the basis Q).

    H = diag(1, H1) with H1 the product of the d - 1 reflectors (lower storage, LAPACK's dormtr
    done as the dormqr it calls, without the GIL). ``overwrite``: in place in S (column-major,
    e.g. a column block of an F-ordered array). Returns (d, c).
    """
    V, tau = reflectors
    if overwrite:
        out = S
    else:
        out = np.empty(S.shape, order="F")
        out[:] = S
    if out.shape[0] > 1:
        _lapack.dormqr(V, tau, out[1:])
    return out


def _apply_h_right(reflectors, M):
    """``M H`` in place for M (r, d), column-major (a view of rows of an F-ordered matrix will do):
    H = diag(1, H1) as in :func:`_back_transform`, applied from the right. Returns M."""
    V, tau = reflectors
    if M.shape[1] > 1:
        _lapack.dormqr(V, tau, M[:, 1:], side="R")
    return M


def _times_blocks(M, blocks):
    """``M diag(S_1, ..., S_p)`` for M (r, d): one small product per block. Returns (r, d)."""
    out = np.empty(M.shape)
    lo = 0
    for S in blocks:
        hi = lo + S.shape[0]
        out[:, lo:hi] = M[:, lo:hi] @ S
        lo = hi
    return out


def _blocks_times(blocks, Z):
    """``diag(S_1, ..., S_p) Z`` for Z (d, c), F order (ready for :func:`_back_transform`'s dormqr)."""
    out = np.empty(Z.shape, order="F")
    lo = 0
    for S in blocks:
        hi = lo + S.shape[0]
        out[lo:hi] = S @ Z[lo:hi]
        lo = hi
    return out


def _gram_in_basis(R_rows, reflectors, blocks):
    """``W' W`` for W = R_rows H diag(S_1, ..., S_p), R_rows (r, d) rows of C_X's Cholesky factor
    (overwritten): with all of R's rows, ``Q' C_X Q`` in the basis Q = H diag(S_1, ..., S_p), and
    the sum of the grams of two row halves is the same. Reflectors applied from the right to R
    (dense) and the blocks to the result (small products) cost less than forming Q and then R Q.
    Returns (d, d), exactly symmetric."""
    W = _times_blocks(_apply_h_right(reflectors, R_rows), blocks)
    return W.T @ W  # a symmetric rank-k update


def _congruence(C, Q, R):
    """Q' C Q for a symmetric C (d, d): through C = R'R when C is positive definite (half the
    flops of two products: a triangular product and a symmetric rank-d update), else directly.
    R: C's upper Cholesky factor (:func:`_cholesky`), None when C has none."""
    if R is not None:
        RQ = blas.dtrmm(1.0, R, Q)
        return RQ.T @ RQ
    B = Q.T @ (C @ Q)
    return (B + B.T) / 2


def _gram_two_tasks(A):
    """A' A (c, c) for A (r, c), exactly symmetric, as two balanced tasks side by side
    (see :func:`_gram_of_halves`)."""
    h = A.shape[1] // 2
    if h == 0:
        return A.T @ A
    return _gram_of_halves(A[:, :h], A[:, h:])


def _gram_of_halves(a, b):
    """[a b]' [a b] for a (r, h), b (r, c - h), exactly symmetric, as two balanced tasks side by
    side: the two diagonal blocks (symmetric rank-k updates) alongside the off-diagonal block."""
    h, c = a.shape[1], a.shape[1] + b.shape[1]
    out = np.empty((c, c))

    def diagonal_blocks():
        out[:h, :h] = a.T @ a
        out[h:, h:] = b.T @ b

    def off_diagonal_block():
        out[:h, h:] = a.T @ b

    _side_by_side(diagonal_blocks, off_diagonal_block)
    out[h:, :h] = out[:h, h:].T
    return out
