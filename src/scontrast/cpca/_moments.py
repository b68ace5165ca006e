"""Centring, scaling and the covariance operators of target and background.

Sparse input is never densified as a whole: covariances and Gram matrices are
accumulated over blocks of rows or genes, and the centring is exact.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import scipy.sparse as sp

from ._threads import _side_by_side

# Rows densified at a time when a sparse matrix's covariance is formed.
_CHUNK_BYTES = 64 * 2**20


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


def _centred_gram(A, mean, rows: slice) -> np.ndarray:
    """``(A[rows] - 1 mean')' (A[rows] - 1 mean')`` for a dense A (n, d): one part of a covariance's
    sum over cells, (d, d), exactly symmetric (a symmetric rank-k update)."""
    Ac = A[rows] - mean
    return Ac.T @ Ac


def _finish_covariance(C, n: int, scale) -> np.ndarray:
    """The covariance from the sum over all n cells C (d, d), in place: ``diag(s) C diag(s) / (n - 1)``."""
    C /= n - 1
    if not np.all(scale == 1.0):
        C *= scale[:, None]
        C *= scale[None, :]
    return C


def _covariance(A, mean, scale, two_tasks: bool = False) -> np.ndarray:
    """Scaled covariance ``diag(s) (A - 1 mean')' (A - 1 mean') diag(s) / (n - 1)``, shape (d, d).

    Sparse input is densified a block of rows at a time, so the centring is exact
    and memory stays bounded. ``two_tasks`` (dense input): the two halves of the rows
    are summed side by side (see :func:`_side_by_side`).
    """
    n, d = A.shape
    if two_tasks and not sp.issparse(A) and n >= 4:
        C1, C2 = _side_by_side(lambda: _centred_gram(A, mean, slice(0, n // 2)),
                               lambda: _centred_gram(A, mean, slice(n // 2, n)))
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
    return _finish_covariance(C, n, scale)  # exactly symmetric: numpy forms A'A with a symmetric rank-k update


class _Moments:
    """Centring/scaling of target and background and the covariance operators."""

    def __init__(self, X, Y, standardize: bool):
        self.X, self.Y = X, Y
        self.n, self.m = X.shape[0], Y.shape[0]
        self.mean_x, self.scale_x = _column_moments(X, standardize)
        self.mean_y, self.scale_y = _column_moments(Y, standardize)
        self.standardize = standardize
        self._xt = self._yt = self._csc = None
        # the target's total (scaled) variance, trace(C_X), once a solver has formed C_X or K_XX
        self.trace_x = None

    def covariances(self):
        """(C_X, C_Y), each (d, d)."""
        return self.covariance_x(), self.covariance_y()

    def covariance_x(self, two_tasks: bool = False):
        """C_X, (d, d); sets ``trace_x``."""
        C = _covariance(self.X, self.mean_x, self.scale_x, two_tasks)
        self.trace_x = float(np.trace(C))
        return C

    def covariance_y(self, two_tasks: bool = False):
        """C_Y, (d, d)."""
        return _covariance(self.Y, self.mean_y, self.scale_y, two_tasks)

    def background_parts(self, share: float):
        """C_Y as two tasks that need not end together: ``(first, second, finish)``, callables where
        ``first()`` and ``second()`` give the sums over the first ``share`` of the background's cells
        and over the rest, and ``finish(sum)`` turns their sum into C_Y in place. Dense input only."""
        rows = min(max(int(round(share * self.m)), 1), self.m - 1)
        return (partial(_centred_gram, self.Y, self.mean_y, slice(0, rows)),
                partial(_centred_gram, self.Y, self.mean_y, slice(rows, self.m)),
                partial(_finish_covariance, n=self.m, scale=self.scale_y))

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
        ``which`` selects and orders the blocks returned; with K_XX, sets ``trace_x``.

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
        if "xx" in out:
            self.trace_x = float(np.trace(out["xx"]))  # = trace(C_X)
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
