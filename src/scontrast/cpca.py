"""Contrastive PCA (Abid et al. 2018) with automatic alpha, and kernel cPCA.

For target cells X (n x d) and background cells Y (m x d), each centred on its own
mean, the contrastive components at contrast strength ``alpha`` are the top
eigenvectors of the symmetric matrix ``C_X - alpha * C_Y`` (sample covariances
with denominators n - 1 and m - 1, as the reference package ``contrastive``).

The automatic choice of alpha follows Algorithm 2 of the paper: the subspaces of a
grid of alphas (0 plus ``n_alphas`` values log-spaced in [0.1, 10**max_log_alpha])
are compared by the product of the cosines of their principal angles, the
resulting affinity matrix is split by spectral clustering, the cluster holding
alpha = 0 is dropped and each other cluster contributes its medoid (the alpha of
largest summed affinity to its cluster).

Four solvers give the same subspaces (to the tolerance ``tol``):

``'full'``
    the d x d covariances, then a partial symmetric eigensolver
    (``scipy.linalg.eigh(subset_by_index=...)``) per alpha; for small d.
``'covariance'``
    the covariances once and one eigendecomposition ``C_Y = Q diag(lam) Q'``
    shared by the whole grid: in that basis ``C_X - alpha C_Y`` is a fixed dense
    matrix minus ``alpha * diag(lam)``, so a block Davidson iteration with the
    diagonal as preconditioner converges in a few sweeps for every alpha, and all
    alphas advance together (one matrix product per sweep for the whole grid).
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
(starting spaces only; every alpha is iterated to ``tol``).

Threads: when the BLAS may use two or more threads (the default on a multi-core
machine), 'covariance' and 'gram' run pairs of single-threaded tasks side by side
instead of threading inside each BLAS call: the eigendecomposition of the background
alongside the target's covariance (or Gram blocks), the large products in halves,
and the alpha grid in two halves. Threading inside an eigendecomposition gains little
on two cores and collapses when the machine is shared; independent tasks do not.
Under ``threadpoolctl.threadpool_limits(1)`` everything runs in one thread.

Sparse input is never densified as a whole: covariances and Gram matrices are
accumulated over blocks of rows or genes, and the centring is exact.
"""

from __future__ import annotations

import numbers
import warnings
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.linalg import blas, lapack
from sklearn.base import BaseEstimator
from sklearn.cluster import SpectralClustering
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.utils.validation import check_is_fitted

from .core import (
    ScontrastError,
    ScontrastWarning,
    _controller,
    blas_threads,
    check_int,
    check_matrix,
    check_option,
    check_pair,
    check_random_state,
    check_real,
    dense,
    spawn_seed,
)

__all__ = [
    "CPCA",
    "KernelCPCA",
    "alpha_grid",
    "subspace_affinity",
    "select_alphas",
]

_SOLVERS = ("auto", "full", "covariance", "gram", "implicit")
_AFFINITIES = ("loadings", "projection")
_KERNELS = ("rbf", "poly", "linear")

# d up to which the per-alpha partial eigh is cheaper than any shared reduction.
_FULL_MAX_D = 128
# Largest dense side of the shared reductions: d x d covariances ('covariance') or
# cell x cell Gram matrices ('gram'); beyond it the operator is applied through the data.
_DENSE_MAX = 12000
# Rows densified at a time when a sparse matrix's covariance is formed.
_CHUNK_BYTES = 64 * 2**20

def _two_tasks() -> bool:
    """Whether the BLAS may use two or more threads right now (the caller's setting is respected).

    Where it may, the dense solver runs two single-threaded tasks side by side instead of
    threading inside each BLAS call: the tridiagonal reduction of an eigendecomposition
    synchronises its threads once per column, which gains little on two cores and collapses
    when the machine is busy, while independent tasks need no synchronisation at all.
    """
    libs = [lib for lib in _controller().lib_controllers if lib.user_api == "blas"]
    return bool(libs) and min(lib.num_threads for lib in libs) >= 2


def _side_by_side(first, second):
    """``(first(), second())`` with ``first`` on a worker thread.

    Meant for use under ``core.blas_threads(1)``; the callables must spend their time in
    calls that release the GIL (numpy's matmul and linalg, scipy's dtrmm).
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        job = pool.submit(first)
        out2 = second()
        return job.result(), out2


# --------------------------------------------------------------------------- grid


def alpha_grid(n_alphas: int = 40, max_log_alpha: float = 3) -> np.ndarray:
    """Candidate contrast strengths: 0, then ``n_alphas`` values log-spaced in [0.1, 10**max_log_alpha].

    Returns
    -------
    alphas : ndarray, shape (n_alphas + 1,)
    """
    return np.concatenate(([0.0], np.logspace(-1, max_log_alpha, n_alphas)))


# ----------------------------------------------------------------- input checks


def _check_alpha(alpha):
    """'auto', or a float >= 0, or a non-empty list of floats >= 0 -> (mode, values)."""
    what = "'auto', a number >= 0 or a non-empty list of them"
    if isinstance(alpha, str):
        if alpha != "auto":
            raise ScontrastError(f"alpha: expected {what}, got {alpha!r}")
        return "auto", None
    if isinstance(alpha, numbers.Real) and not isinstance(alpha, bool):
        values = np.array([float(alpha)])
        mode = "float"
    else:
        try:
            values = np.asarray(alpha, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            raise ScontrastError(f"alpha: expected {what}, got {alpha!r}") from None
        if values.size == 0:
            raise ScontrastError(f"alpha: expected {what}, got an empty list")
        mode = "list"
    if not np.isfinite(values).all() or (values < 0).any():
        raise ScontrastError(f"alpha: expected {what} (finite), got {alpha!r}")
    return mode, values


def _check_bool(value, name: str) -> bool:
    """True or False (numpy's bool too; not 0/1)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ScontrastError(f"{name}: expected True or False, got {value!r}")
    return bool(value)


# -------------------------------------------------------------------- moments


def _column_moments(A, standardize: bool):
    """Column means (d,) and scale factors (d,): 1/sd (ddof 0; 0 for a constant gene) or ones."""
    if sp.issparse(A):
        mean = np.asarray(A.mean(axis=0)).ravel()
    else:
        mean = A.mean(axis=0)
    if not standardize:
        return mean, np.ones(A.shape[1])
    if sp.issparse(A):
        var = np.maximum(np.asarray(A.multiply(A).mean(axis=0)).ravel() - mean**2, 0.0)
    else:
        var = A.var(axis=0)
    sd = np.sqrt(var)
    # a constant gene carries no variance: weight 0, like the reference package's nan_to_num(0/0)
    tiny = 1e-12 * max(1.0, float(np.abs(mean).max(initial=0.0)))
    scale = np.divide(1.0, sd, out=np.zeros_like(sd), where=sd > tiny)
    return mean, scale


def _covariance(A, mean, scale, two_tasks: bool = False) -> np.ndarray:
    """Scaled covariance ``diag(s) (A - 1 mean')' (A - 1 mean') diag(s) / (n - 1)``, shape (d, d).

    Sparse input is densified a block of rows at a time, so the centring is exact
    and memory stays bounded. ``two_tasks`` (dense input): the two halves of the rows
    are summed side by side (see :func:`_side_by_side`).
    """
    n, d = A.shape
    if two_tasks and not sp.issparse(A) and n >= 4:
        def half(rows):
            Ac = A[rows] - mean
            return Ac.T @ Ac  # a symmetric rank-k update

        C1, C2 = _side_by_side(lambda: half(slice(0, n // 2)), lambda: half(slice(n // 2, n)))
        C = C1
        C += C2
    elif sp.issparse(A):
        C = np.zeros((d, d))
        rows = max(1, _CHUNK_BYTES // (8 * d))
        for start in range(0, n, rows):
            block = A[start:start + rows].toarray()
            block -= mean
            C += block.T @ block
    else:
        Ac = A - mean
        C = Ac.T @ Ac
    C /= n - 1
    if not np.all(scale == 1.0):
        C *= scale[:, None]
        C *= scale[None, :]
    return C  # exactly symmetric: numpy forms A'A with a symmetric rank-k update


class _Moments:
    """Centring/scaling of target and background and the covariance operators."""

    def __init__(self, X, Y, standardize: bool):
        self.X, self.Y = X, Y
        self.n, self.m = X.shape[0], Y.shape[0]
        self.mean_x, self.scale_x = _column_moments(X, standardize)
        self.mean_y, self.scale_y = _column_moments(Y, standardize)
        self.standardize = standardize
        self._xt = self._yt = self._csc = None

    def covariances(self):
        """(C_X, C_Y), each (d, d)."""
        return self.covariance_x(), self.covariance_y()

    def covariance_x(self, two_tasks: bool = False):
        """C_X, (d, d)."""
        return _covariance(self.X, self.mean_x, self.scale_x, two_tasks)

    def covariance_y(self, two_tasks: bool = False):
        """C_Y, (d, d)."""
        return _covariance(self.Y, self.mean_y, self.scale_y, two_tasks)

    def diagonals(self):
        """Diagonals of C_X and C_Y, each (d,)."""
        out = []
        for A, mean, scale, n in ((self.X, self.mean_x, self.scale_x, self.n),
                                  (self.Y, self.mean_y, self.scale_y, self.m)):
            if sp.issparse(A):
                sq = np.asarray(A.multiply(A).sum(axis=0)).ravel()
            else:
                sq = np.einsum("ij,ij->j", A, A)
            var = np.maximum(sq - n * mean**2, 0.0) / (n - 1)
            out.append(var * scale**2)
        return out

    def gene_major(self):
        """(X, Y) with sparse matrices in CSC form, for slicing blocks of genes (converted once)."""
        if self._csc is None:
            self._csc = tuple(A.tocsc() if sp.issparse(A) else A for A in (self.X, self.Y))
        return self._csc

    def gram_blocks(self, which=("yy", "xy", "xx")):
        """Cell-by-cell Gram matrices of the centred, scaled data Z_X = (X - 1 mean_x') diag(s_x) / sqrt(n-1)
        and Z_Y (likewise): K_YY (m, m), K_XY (n, m), K_XX (n, n), so that C_X = Z_X' Z_X and C_Y = Z_Y' Z_Y.
        ``which`` selects and orders the blocks returned.

        Built over blocks of genes, each densified and centred exactly; memory stays bounded.
        """
        X, Y = self.gene_major()
        n, m, d = self.n, self.m, X.shape[1]
        shapes = {"yy": (m, m), "xy": (n, m), "xx": (n, n)}
        out = {key: np.zeros(shapes[key]) for key in which}
        need_x = "xy" in out or "xx" in out
        step = max(1, _CHUNK_BYTES // (8 * (n + m)))
        fx, fy = self.scale_x / np.sqrt(n - 1), self.scale_y / np.sqrt(m - 1)
        for start in range(0, d, step):
            cols = slice(start, min(d, start + step))
            if need_x:
                xb = X[:, cols].toarray() if sp.issparse(X) else X[:, cols].copy()
                xb -= self.mean_x[cols]
                xb *= fx[cols]
            if "yy" in out or "xy" in out:
                yb = Y[:, cols].toarray() if sp.issparse(Y) else Y[:, cols].copy()
                yb -= self.mean_y[cols]
                yb *= fy[cols]
            if "yy" in out:
                out["yy"] += yb @ yb.T
            if "xy" in out:
                out["xy"] += xb @ yb.T
            if "xx" in out:
                out["xx"] += xb @ xb.T
        for key in ("yy", "xx"):
            if key in out:
                out[key] = (out[key] + out[key].T) / 2
        return tuple(out[key] for key in which)

    def rmatmat(self, G, H):
        """Z_X' G + Z_Y' H for G (n, c) and H (m, c): gene-space vectors from cell coefficients, (d, c)."""
        out = np.zeros((self.X.shape[1], G.shape[1]))
        for A, mean, scale, n, C in ((self.X, self.mean_x, self.scale_x, self.n, G),
                                     (self.Y, self.mean_y, self.scale_y, self.m, H)):
            part = np.asarray(A.T @ C) - np.outer(mean, C.sum(axis=0))
            out += part * (scale / np.sqrt(n - 1))[:, None]
        return out

    def _apply(self, A, At, mean, scale, n, T):
        S = T * scale[:, None] if self.standardize else T
        AS = A @ S - np.outer(np.ones(n), mean @ S)
        # (A - 1 mean')' AS = A' AS - mean (1' AS); 1' AS is 0 up to rounding
        out = At @ AS - np.outer(mean, AS.sum(axis=0))
        out /= n - 1
        if self.standardize:
            out *= scale[:, None]
        return np.asarray(out)

    def matmat_x(self, T):
        """C_X T, T of shape (d, c)."""
        if self._xt is None:
            self._xt = self.X.T.tocsr() if sp.issparse(self.X) else self.X.T
        return self._apply(self.X, self._xt, self.mean_x, self.scale_x, self.n, T)

    def matmat_y(self, T):
        """C_Y T, T of shape (d, c)."""
        if self._yt is None:
            self._yt = self.Y.T.tocsr() if sp.issparse(self.Y) else self.Y.T
        return self._apply(self.Y, self._yt, self.mean_y, self.scale_y, self.m, T)


# ------------------------------------------------------------------ eigensolvers


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

    def H(T, a):
        """(P - a Q) applied to the rows of T (na, c, d), all alphas in one product."""
        nb, c, _ = T.shape
        flat = T.reshape(nb * c, d).T
        out = (apply_p(flat).T.reshape(nb, c, d), apply_q(flat).T.reshape(nb, c, d))
        return out[0] - a[:, None, None] * out[1]

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
        diag = p_diag[None, :] - a[:, None] * q_diag[None, :]
        den = wt[:, :, None] - diag[:, None, :]
        floor = 1e-8 * scale[idx][:, None, None]
        den = np.where(np.abs(den) < floor, np.where(den >= 0, floor, -floor), den)
        T = R / den
        if m + kk > mb:
            # thick restart on the leading Ritz vectors; G becomes their Ritz values
            m2 = min(2 * kk, m)
            Sr = S[:, :, :m2].transpose(0, 2, 1)
            V[:, :m2] = np.matmul(Sr, V[:, :m])
            HV[:, :m2] = np.matmul(Sr, HV[:, :m])
            G[:, :m2, :m2] = 0.0
            G[:, np.arange(m2), np.arange(m2)] = w[:, :m2]
            m = m2
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
        m += kk
    return Z_out, theta_out, res_out, it_out


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


def _covariance_solve_two_tasks(moments: _Moments, alphas: np.ndarray, k: int, tol: float, max_iter: int):
    """The 'covariance' solver as pairs of single-threaded tasks side by side (see :func:`_two_tasks`).

    C_Y's eigendecomposition, the one long sequential step, runs alongside C_X and its
    Cholesky factor; the congruence and the grid are split in halves.

    Returns Q (d, d), then what :func:`_diagonal_basis_solve` returns.
    """
    CY = moments.covariance_y(two_tasks=True)

    def target_side():
        CX = moments.covariance_x()
        try:
            return CX, np.linalg.cholesky(CX)
        except np.linalg.LinAlgError:
            return CX, None

    (lam, Q), (CX, L) = _side_by_side(partial(np.linalg.eigh, CY), target_side)
    del CY  # d x d: free it before the congruence allocates
    B = _congruence_two_tasks(CX, Q, L)
    del CX, L
    return (Q,) + _diagonal_basis_solve(B, lam, alphas, k, tol, max_iter, two_tasks=True)


def _solve(moments: _Moments, alphas: np.ndarray, k: int, solver: str, tol: float, max_iter: int):
    """Contrastive components for every alpha.

    Returns
    -------
    U : (a, d, k) orthonormal columns; theta : (a, k); residual : (a,);
    n_iter : (a,); gram : (a*k, a*k) = U_all' C_X U_all (for the projection affinity)
    """
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
        if _two_tasks():
            with blas_threads(1):
                Q, Z, theta, res, its, gram = _covariance_solve_two_tasks(moments, alphas, k, tol, max_iter)
        else:
            CX, CY = moments.covariances()
            lam, Q = sla.eigh(CY, driver="evd", overwrite_a=True, check_finite=False)
            del CY
            B = _congruence(CX, Q)
            del CX
            Z, theta, res, its, gram = _diagonal_basis_solve(B, lam, alphas, k, tol, max_iter)
        U = (Q @ Z.transpose(1, 0, 2).reshape(d, -1)).reshape(d, alphas.size, k).transpose(1, 0, 2)
    elif solver == "gram":
        two = _two_tasks()
        with blas_threads(1 if two else None):
            B, lam, to_genes = _cell_space_reduction(moments, two)
            if lam.size < k:
                raise ScontrastError(f"n_components: {k} exceeds the rank of the centred data ({lam.size})")
            Z, theta, res, its, gram = _diagonal_basis_solve(B, lam, alphas, k, tol, max_iter, two)
            del B
            U = to_genes(Z)
    else:
        kk = min(k + 2, d)
        dx, dy = moments.diagonals()
        scale = _norm_estimate(moments.matmat_x, d) + alphas * _norm_estimate(moments.matmat_y, d)
        V0 = _unit_starts(dx[None, :] - alphas[:, None] * dy[None, :], 2 * kk)
        U, theta, res, its = _davidson(moments.matmat_x, moments.matmat_y, dx, dy,
                                       alphas, k, V0, scale, tol, max_iter, 4 * kk)
        flat = U.transpose(1, 0, 2).reshape(d, -1)
        gram = flat.T @ moments.matmat_x(flat)
    flips = _sign_flips(U)
    U = U * flips[:, None, :]
    f = flips.reshape(-1)
    gram = gram * f[:, None] * f[None, :]
    return U, theta, res, its, gram


# ------------------------------------------------------------------- alpha choice


def subspace_affinity(U: np.ndarray, gram: np.ndarray | None = None) -> np.ndarray:
    """Product of the cosines of the principal angles between the subspaces of each pair.

    Parameters
    ----------
    U : ndarray, shape (a, d, k)
        Orthonormal bases (the loadings) of the a subspaces.
    gram : ndarray, shape (a*k, a*k), optional
        Inner products of the columns under another metric, e.g. ``U' C_X U`` to
        compare the spans of the projected target data ``X_c U`` (the measure of
        the ``contrastive`` package) instead of the loadings.

    Returns
    -------
    affinity : ndarray, shape (a, a), symmetric, ones on the diagonal where defined.

    Notes
    -----
    The product of the cosines equals ``|det(Qa' Qb)|`` for orthonormal bases,
    i.e. ``|det G_ab| / sqrt(det G_aa det G_bb)`` for any bases with Gram blocks G.
    Pairs involving a subspace along which the metric vanishes get 0.
    """
    n_alpha, _, k = U.shape
    if gram is None:
        flat = U.transpose(1, 0, 2).reshape(U.shape[1], -1)
        gram = flat.T @ flat
    blocks = gram.reshape(n_alpha, k, n_alpha, k).transpose(0, 2, 1, 3)
    sign, logdet = np.linalg.slogdet(blocks)
    own = np.diagonal(logdet).copy()
    own_ok = np.diagonal(sign) > 0
    with np.errstate(invalid="ignore", over="ignore"):
        aff = np.exp(logdet - 0.5 * (own[:, None] + own[None, :]))
    aff[(sign == 0) | ~own_ok[:, None] | ~own_ok[None, :]] = 0.0
    aff = np.nan_to_num(np.minimum(aff, 1.0))
    aff = (aff + aff.T) / 2
    np.fill_diagonal(aff, np.where(own_ok, 1.0, 0.0))
    return aff


def select_alphas(affinity: np.ndarray, n_clusters: int, random_state=None):
    """Spectral clustering of the alpha grid; one medoid per cluster not holding alpha = 0 (index 0).

    Parameters
    ----------
    affinity : ndarray (a, a), from :func:`subspace_affinity`
    n_clusters : int
    random_state : None, int >= 0 or numpy Generator
        The k-means step of the clustering gets an int seed drawn from it.

    Returns
    -------
    chosen : ndarray of grid indices (ascending); labels : (a,) cluster labels
    """
    seed = spawn_seed(check_random_state(random_state))
    spectral = SpectralClustering(n_clusters=n_clusters, affinity="precomputed", random_state=seed)
    with warnings.catch_warnings(), _controller().limit(limits=1, user_api="openmp"):
        # a disconnected affinity graph is legitimate here (far-apart subspaces); threads only
        # cost time on a grid of ~41 points
        warnings.filterwarnings("ignore", message="Graph is not fully connected")
        labels = spectral.fit(affinity).labels_
    chosen = []
    for c in range(n_clusters):
        members = np.flatnonzero(labels == c)
        if members.size == 0 or 0 in members:
            continue
        sums = affinity[np.ix_(members, members)].sum(axis=0)
        chosen.append(members[np.argmax(sums)])
    return np.sort(np.asarray(chosen, dtype=int)), labels


def _merge_alike(chosen: np.ndarray, affinity: np.ndarray, grid: np.ndarray, threshold: float) -> np.ndarray:
    """The chosen grid indices (ascending) without those whose subspace repeats a smaller chosen alpha's.

    An alpha whose affinity with an already kept one is ``>= threshold`` gives the same
    answer: it is dropped with a ``ScontrastWarning`` (on data where every alpha's subspace
    is alike, the clustering still returns its requested number of clusters).
    """
    kept: list[int] = []
    for idx in np.sort(chosen):
        twin = next((k for k in kept if affinity[idx, k] >= threshold), None)
        if twin is None:
            kept.append(int(idx))
            continue
        warnings.warn(
            f"alpha {grid[idx]:.4g} gives the same subspace as alpha {grid[twin]:.4g} (affinity "
            f"{affinity[idx, twin]:.4f} >= merge_affinity {threshold:g}): reported once, as {grid[twin]:.4g}",
            ScontrastWarning, stacklevel=3)
    for idx in kept:
        if affinity[idx, 0] >= threshold:
            warnings.warn(
                f"alpha {grid[idx]:.4g} gives the same subspace as plain PCA of the target (alpha = 0; affinity "
                f"{affinity[idx, 0]:.4f}): the background changes nothing here", ScontrastWarning, stacklevel=3)
    return np.asarray(kept, dtype=int)


def _total_variance(A, scale: np.ndarray) -> float:
    """Trace of the (scaled) covariance of ``A`` (n, d): the target's variance, sparse-safe."""
    if sp.issparse(A):
        mean = np.asarray(A.mean(axis=0)).ravel()
        var = np.asarray(A.multiply(A).mean(axis=0)).ravel() - mean**2
    else:
        var = A.var(axis=0)
    return float(np.sum(np.maximum(var, 0.0) * scale**2) * A.shape[0] / max(A.shape[0] - 1, 1))


def _warn_if_no_contrast(contrast: np.ndarray, target_variance: float, alpha: float) -> None:
    """Warn when the default alpha's components carry no target variance beyond the background's.

    ``contrast`` (k,) are the eigenvalues of ``C_X - alpha C_Y`` at the default alpha;
    ``target_variance`` (the trace of ``C_X``) is the scale they are compared with.
    """
    scale = target_variance
    if scale == 0.0:
        warnings.warn("the target cells have no variance in these genes: cPCA has nothing to contrast",
                      ScontrastWarning, stacklevel=3)
    elif float(np.max(contrast, initial=0.0)) <= 1e-9 * scale:
        warnings.warn(f"no contrast at alpha {alpha:.4g}: no direction has more target variance than alpha times "
                      "the background's (the groups vary alike, e.g. the same cells)", ScontrastWarning, stacklevel=3)


# ------------------------------------------------------------------------- CPCA


class CPCA(BaseEstimator):
    """Contrastive PCA of target X against background Y (a scikit-learn estimator; ``fit(X, Y)``).

    Parameters
    ----------
    n_components : int, default 2
        Contrastive components per alpha.
    alpha : 'auto', float >= 0 or list of floats >= 0, default 'auto'
        'auto' chooses alphas from a grid as in the paper (alpha = 0, plain PCA
        of the target, is always reported first); a number or list fits those.
    n_alphas : int, default 40
        Non-zero grid values, log-spaced in [0.1, 10**max_log_alpha] ('auto' only).
    max_log_alpha : float, default 3
    n_alpha_clusters : int, default 4
        Spectral clusters of the grid; the one holding alpha = 0 is dropped, so at
        most ``n_alpha_clusters - 1`` non-zero alphas are returned.
    affinity : {'loadings', 'projection'}, default 'loadings'
        Principal angles between the loadings (the paper) or between the projected
        target data (what the ``contrastive`` package computes).
    standardize : bool, default False
        Scale each gene to unit variance within its own set (target, background).
    random_state : None, int >= 0 or numpy Generator, default None
        Seeds the k-means step of the spectral clustering ('auto' only).
    solver : {'auto', 'full', 'covariance', 'gram', 'implicit'}, default 'auto'
        See the module docstring; 'auto' picks 'full' for d <= 128, else
        'covariance' when d <= n + m, 'gram' when there are fewer cells than genes
        (each up to 12,000), and 'implicit' beyond.
    tol : float, default 1e-10
        Relative residual norm ``||A u - theta u|| / ||A||`` at which an
        iterative solver stops.
    max_iter : int, default 500
        Davidson sweeps at most; alphas not converged by then raise a warning.
    merge_affinity : float in (0, 1], default 0.99
        'auto' only: two chosen alphas whose subspaces have at least this affinity
        (product of the cosines of their principal angles) are one answer, not two: the
        larger alpha is dropped, with a ``ScontrastWarning`` naming both (1 keeps every
        alpha the clustering chose, however alike).

    Attributes
    ----------
    alphas_ : ndarray (n_fitted,)
        Fitted alphas: for 'auto' 0 followed by the chosen values (ascending).
    default_alpha_ : float
        The first non-zero fitted alpha (the chosen one for 'auto', the given
        one otherwise); ``transform`` uses it when no alpha is passed.
    default_index_ : int
        Its position in ``alphas_``.
    components_ : ndarray (n_fitted, n_components, n_features)
        Orthonormal contrastive directions per fitted alpha.
    explained_contrast_ : ndarray (n_fitted, n_components)
        Their eigenvalues of ``C_X - alpha C_Y`` (target minus alpha times
        background variance), descending.
    alpha_grid_ : ndarray (n_grid,)
        Alphas compared by the affinity ('auto': the grid; else ``alphas_``).
    affinity_ : ndarray (n_grid, n_grid)
    alpha_labels_ : ndarray (n_grid,) of int
        Spectral cluster of each grid alpha ('auto'); -1 otherwise.
    grid_explained_contrast_ : ndarray (n_grid, n_components)
    residuals_ : ndarray (n_grid,)
        Relative residual norm reached per grid alpha (0 for the 'full' solver).
    n_iter_ : ndarray (n_grid,) of int
        Davidson sweeps per grid alpha (1 for the 'full' solver).
    solver_ : str
    mean_, scale_ : ndarray (n_features,)
        Target centring and scaling (scale is ones unless standardize).
    background_mean_, background_scale_ : ndarray (n_features,)
    n_features_in_ : int
    """

    def __init__(self, n_components=2, alpha="auto", n_alphas=40, max_log_alpha=3, n_alpha_clusters=4,
                 affinity="loadings", standardize=False, random_state=None, solver="auto", tol=1e-10,
                 max_iter=500, merge_affinity=0.99):
        self.n_components = n_components
        self.alpha = alpha
        self.n_alphas = n_alphas
        self.max_log_alpha = max_log_alpha
        self.n_alpha_clusters = n_alpha_clusters
        self.affinity = affinity
        self.standardize = standardize
        self.random_state = random_state
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.merge_affinity = merge_affinity

    # -- parameter checks
    def _validate(self):
        """The hyper-parameters, checked: (n_components, alpha mode, alpha values or None)."""
        k = check_int(self.n_components, "n_components", 1)
        mode, values = _check_alpha(self.alpha)
        n_alphas = check_int(self.n_alphas, "n_alphas", 1)
        check_real(self.max_log_alpha, "max_log_alpha", -1, strict_min=True)
        p = check_int(self.n_alpha_clusters, "n_alpha_clusters", 2)
        if mode == "auto" and p > n_alphas + 1:
            raise ScontrastError(f"n_alpha_clusters: expected at most n_alphas + 1 = {n_alphas + 1} "
                                 f"(the grid's size), got {p}")
        check_option(self.affinity, "affinity", _AFFINITIES)
        check_option(self.solver, "solver", _SOLVERS)
        check_real(self.tol, "tol", 0, 1, strict_min=True, strict_max=True)
        check_int(self.max_iter, "max_iter", 1)
        _check_bool(self.standardize, "standardize")
        check_real(self.merge_affinity, "merge_affinity", 0, 1, strict_min=True)
        return k, mode, values

    def _pick_solver(self, d: int, k: int, n_cells: int) -> str:
        if self.solver != "auto":
            return self.solver
        if d <= max(_FULL_MAX_D, 8 * (k + 2)):
            return "full"
        if d <= n_cells and d <= _DENSE_MAX:
            return "covariance"
        if n_cells < d and n_cells <= _DENSE_MAX:
            return "gram"
        return "implicit"

    def fit(self, X, Y):
        """Fit on target X (n x d) and background Y (m x d); dense arrays or scipy.sparse.

        Returns
        -------
        self
        """
        k, mode, values = self._validate()
        rng = check_random_state(self.random_state)
        X, Y = check_pair(X, Y, min_rows=2)
        d = X.shape[1]
        if k > d:
            # one line naming both numbers, also what tl.cpca reports for a too small gene set
            raise ScontrastError(f"n_components: the gene set selects {d} gene(s), fewer than n_components={k}")
        grid = alpha_grid(self.n_alphas, self.max_log_alpha) if mode == "auto" else values
        solver = self._pick_solver(d, k, X.shape[0] + Y.shape[0])
        moments = _Moments(X, Y, bool(self.standardize))
        U, theta, res, its, gram = _solve(moments, grid, k, solver, float(self.tol), int(self.max_iter))
        bad = res > self.tol
        if bad.any():
            warnings.warn(f"cPCA did not converge to tol={self.tol:g} for {int(bad.sum())} alpha(s) within "
                          f"max_iter={self.max_iter} (largest relative residual {res.max():.2e})", stacklevel=2)
        affinity = subspace_affinity(U, gram if self.affinity == "projection" else None)
        if mode == "auto":
            chosen, labels = select_alphas(affinity, int(self.n_alpha_clusters), rng)
            chosen = _merge_alike(chosen, affinity, grid, float(self.merge_affinity))
            keep = np.concatenate(([0], chosen))
        else:
            labels = np.full(grid.size, -1)
            keep = np.arange(grid.size)

        self.solver_ = solver
        self.n_features_in_ = d
        self.mean_, self.scale_ = moments.mean_x, moments.scale_x
        self.background_mean_, self.background_scale_ = moments.mean_y, moments.scale_y
        self.alpha_grid_ = grid
        self.affinity_ = affinity
        self.alpha_labels_ = labels
        self.grid_explained_contrast_ = theta
        self.residuals_ = res
        self.n_iter_ = its
        self.alphas_ = grid[keep]
        self.components_ = U[keep].transpose(0, 2, 1).copy()
        self.explained_contrast_ = theta[keep]
        nonzero = np.flatnonzero(self.alphas_ > 0)
        self.default_index_ = int(nonzero[0]) if nonzero.size else 0
        self.default_alpha_ = float(self.alphas_[self.default_index_])
        _warn_if_no_contrast(self.explained_contrast_[self.default_index_], _total_variance(X, moments.scale_x),
                             self.default_alpha_)
        return self

    def _alpha_index(self, alpha) -> int:
        """Position in ``alphas_`` of a fitted alpha (None: the default one)."""
        check_is_fitted(self)
        if alpha is None:
            return self.default_index_
        hits = np.flatnonzero(np.isclose(self.alphas_, float(alpha), rtol=1e-9, atol=0.0))
        if hits.size == 0:
            raise ScontrastError(f"alpha: {alpha!r} was not fitted; the fitted alphas are "
                                 f"{np.round(self.alphas_, 6).tolist()}")
        return int(hits[0])

    def transform(self, X, alpha=None) -> np.ndarray:
        """Project cells onto the contrastive components of one fitted alpha.

        Cells are centred (and scaled) with the target's mean (and scale), so
        target and background cells passed here share one embedding.

        Parameters
        ----------
        X : (n, d) dense or sparse
        alpha : float or None
            A fitted alpha (one of ``alphas_``); None = ``default_alpha_``.

        Returns
        -------
        embedding : ndarray (n, n_components)
        """
        check_is_fitted(self)
        i = self._alpha_index(alpha)
        X = check_matrix(X, "X")
        if X.shape[1] != self.n_features_in_:
            raise ScontrastError(f"X: has {X.shape[1]} genes, the model was fitted on {self.n_features_in_}")
        W = (self.components_[i] * self.scale_[None, :]).T  # (d, k)
        return np.asarray(X @ W) - self.mean_ @ W

    def fit_transform(self, X, Y) -> np.ndarray:
        """``fit(X, Y).transform(X)`` at the default alpha, shape (n, n_components)."""
        return self.fit(X, Y).transform(X)


# ------------------------------------------------------------------ kernel cPCA


class KernelCPCA(BaseEstimator):
    """Kernel contrastive PCA (Abid et al. 2018, Appendix E); a scikit-learn estimator, ``fit(X, Y)``.

    Target and background are mapped by a kernel; in feature space each set is
    centred on its own mean and cPCA is solved there. With the centred kernel
    ``K = L L'`` (``L = U_r diag(s_r)^{1/2}`` from its eigendecomposition, rank r)
    the rows of L are isometric coordinates of the centred feature vectors, so
    the dual eigenproblem of the block-row-scaled kernel becomes the symmetric
    r x r problem ``L_X' L_X / (n-1) - alpha L_Y' L_Y / (m-1)`` solved by
    :class:`CPCA` (automatic alpha included). The dual coefficients ``a``
    (minimum-norm representers) satisfy ``a' K a = 1`` and the embedding of the
    training cells is ``K a``. With a linear kernel the embedding spans the same
    space as cPCA's.

    The sets are scaled by 1/(n-1) and alpha/(m-1) (the paper writes 1/n and alpha/m)
    so that an alpha means the same contrast here as in :class:`CPCA` and the
    ``contrastive`` package; with n = m the two coincide. The eigenvalues of the
    block-row-scaled kernel are those of the symmetric problem above, so no
    non-symmetric eigensolver is needed.

    Parameters
    ----------
    kernel : {'rbf', 'poly', 'linear'}, default 'rbf'
    alpha : 'auto', float >= 0 or list, default 'auto'
    n_components : int, default 2
    gamma : float or None
        rbf/poly coefficient; None = 1 / n_features (scikit-learn's convention).
    degree : int, default 3; coef0 : float, default 1 (poly kernel)
    n_alphas, max_log_alpha, n_alpha_clusters, affinity, tol :
        as :class:`CPCA`.
    random_state : None, int >= 0 or numpy Generator, default None
        As :class:`CPCA` (the automatic alpha's spectral clustering).
    standardize : bool, default False
        Scale each input gene to unit variance within its own set before the kernel.
    rank_tol : float, default 1e-10
        Kernel eigenvalues below ``rank_tol * largest`` are dropped.
    merge_affinity : float, default 0.99
        As :class:`CPCA` (near-identical chosen alphas are reported once).

    Attributes
    ----------
    alphas_, default_alpha_, explained_contrast_, alpha_grid_, affinity_,
    alpha_labels_ : as :class:`CPCA`.
    dual_coef_ : ndarray (n_fitted, n + m, n_components)
        Coefficients ``a`` of each component over the training cells (target rows first).
    rank_ : int
        Numerical rank of the centred kernel.
    """

    def __init__(self, kernel="rbf", alpha="auto", n_components=2, gamma=None, degree=3, coef0=1.0,
                 n_alphas=40, max_log_alpha=3, n_alpha_clusters=4, affinity="loadings", standardize=False,
                 random_state=None, tol=1e-10, rank_tol=1e-10, merge_affinity=0.99):
        self.kernel = kernel
        self.alpha = alpha
        self.n_components = n_components
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.n_alphas = n_alphas
        self.max_log_alpha = max_log_alpha
        self.n_alpha_clusters = n_alpha_clusters
        self.affinity = affinity
        self.standardize = standardize
        self.random_state = random_state
        self.tol = tol
        self.rank_tol = rank_tol
        self.merge_affinity = merge_affinity

    def _kernel(self, A, B):
        params = {}
        if self.kernel in ("rbf", "poly"):
            params["gamma"] = self._gamma
        if self.kernel == "poly":
            params.update(degree=self.degree, coef0=self.coef0)
        return pairwise_kernels(A, B, metric="polynomial" if self.kernel == "poly" else self.kernel, **params)

    def _scale_like_target(self, A):
        """New cells (n_new, d), checked and densified, centred and scaled as the target was in fit."""
        A = dense(check_matrix(A, "X"))
        if A.shape[1] != self._Z.shape[1]:
            raise ScontrastError(f"X: has {A.shape[1]} genes, the model was fitted on {self._Z.shape[1]}")
        return (A - self._in_mean) * self._in_scale

    def fit(self, X, Y):
        """Fit on target X (n x d) and background Y (m x d). Returns self."""
        check_option(self.kernel, "kernel", _KERNELS)
        check_real(self.gamma, "gamma", 0, strict_min=True, allow_none=True)
        check_int(self.degree, "degree", 1)
        check_real(self.coef0, "coef0")
        check_real(self.rank_tol, "rank_tol", 0, 1, strict_max=True)
        _check_bool(self.standardize, "standardize")
        rng = check_random_state(self.random_state)
        # cPCA in the kernel's coordinates: its parameters are checked before the kernel is built
        inner = CPCA(n_components=self.n_components, alpha=self.alpha, n_alphas=self.n_alphas,
                     max_log_alpha=self.max_log_alpha, n_alpha_clusters=self.n_alpha_clusters,
                     affinity=self.affinity, standardize=False, random_state=rng, tol=self.tol,
                     merge_affinity=self.merge_affinity)
        k = inner._validate()[0]
        X, Y = check_pair(X, Y, min_rows=2)
        X, Y = dense(X), dense(Y)
        n, m = X.shape[0], Y.shape[0]
        self._gamma = 1.0 / X.shape[1] if self.gamma is None else float(self.gamma)
        if self.standardize:
            mx, sx = _column_moments(X, True)
            my, sy = _column_moments(Y, True)
            Xs, Ys = (X - mx) * sx, (Y - my) * sy
            # new data is mapped like the target
            self._in_mean, self._in_scale = mx, sx
        else:
            Xs, Ys = X, Y
            self._in_mean, self._in_scale = np.zeros(X.shape[1]), np.ones(X.shape[1])
        Z = np.vstack([Xs, Ys])
        K = self._kernel(Z, Z)
        groups = [slice(0, n), slice(n, n + m)]
        # feature-space centring, each set on its own mean
        col_mean = np.vstack([K[g].mean(axis=0) for g in groups])          # (2, N): mean over each set's rows
        block_mean = np.array([[K[g, h].mean() for h in groups] for g in groups])
        group_of = np.repeat([0, 1], [n, m])
        Kc = K - col_mean[group_of] - col_mean[group_of].T + block_mean[group_of][:, group_of]
        Kc = (Kc + Kc.T) / 2
        s, V = sla.eigh(Kc, driver="evd")
        keep = s > self.rank_tol * max(s.max(), 0.0)
        if not keep.any():
            raise ScontrastError("kernel: the centred kernel matrix is zero (no variance to contrast)")
        s, V = s[keep][::-1], V[:, keep][:, ::-1]
        L = V * np.sqrt(s)
        if k > L.shape[1]:
            raise ScontrastError(f"n_components: {k} exceeds the rank of the centred kernel ({L.shape[1]})")
        inner.fit(L[:n], L[n:])
        self.cpca_ = inner
        self.rank_ = int(L.shape[1])
        for name in ("alphas_", "default_alpha_", "default_index_", "explained_contrast_", "alpha_grid_", "affinity_",
                     "alpha_labels_", "residuals_"):
            setattr(self, name, getattr(inner, name))
        # minimum-norm dual coefficients: K a = L b and a' K a = b'b = 1
        self.dual_coef_ = np.einsum("nr,r,ark->ank", V, 1.0 / np.sqrt(s), inner.components_.transpose(0, 2, 1))
        self._Z = Z
        self._n = n
        self._col_mean_target = col_mean[0]
        self._row_target_mean = np.array([block_mean[0, 0], block_mean[0, 1]])[group_of]
        self._group_of = group_of
        self._groups = groups
        self._target_embedding = {i: L[:n] @ inner.components_[i].T for i in range(len(self.alphas_))}
        return self

    def transform(self, X, alpha=None) -> np.ndarray:
        """Embed cells (centred in feature space on the target mean), shape (n_cells, n_components)."""
        check_is_fitted(self)
        i = self.cpca_._alpha_index(alpha)
        A = self._scale_like_target(X)
        Kn = self._kernel(A, self._Z)
        own = np.column_stack([Kn[:, g].mean(axis=1) for g in self._groups])  # (n_new, 2)
        Kc = Kn - own[:, self._group_of] - self._col_mean_target[None, :] + self._row_target_mean[None, :]
        return Kc @ self.dual_coef_[i]

    def fit_transform(self, X, Y) -> np.ndarray:
        """Fit, then the target cells' embedding at the default alpha, shape (n, n_components)."""
        self.fit(X, Y)
        return self._target_embedding[self.default_index_].copy()
