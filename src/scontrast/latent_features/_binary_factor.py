"""One fixed-K binary factorisation X ~ 1 b' + Z A of weighted cells: the ensemble's member.

Least squares over binary Z (N, K) and real b (D,), A (K, D), by alternating exact steps:

* given Z, b and A are the weighted ridge regression of X on [1, Z] (the baseline unpenalised);
* given b and A, each cell's row of Z is the best of all 2^K patterns (enumerated, exact):
  ||x - b - z A||^2 = ||x - b||^2 - 2 z . A (x - b) + z' A A' z.

Neither step raises the weighted squared error, so the alternation stops at a fixed point.
The members differ by their weights (a Bayesian bootstrap of the cells) and their starts.
"""

from __future__ import annotations

import functools

import numpy as np

# Rows scored against all 2^K patterns at once: bounds the (rows x 2^K) score block to 8 MB at K = 10.
_ROW_CHUNK = 1024


@functools.cache
def patterns(k: int) -> np.ndarray:
    """Every binary pattern of ``k`` features: (2^k, k) float64, row p holding the bits of p (read-only, cached)."""
    p = np.arange(2 ** k, dtype=np.int64)
    out = ((p[:, None] >> np.arange(k)) & 1).astype(np.float64)
    out.flags.writeable = False
    return out


def assign(X: np.ndarray, b: np.ndarray, A: np.ndarray) -> np.ndarray:
    """Each cell's best pattern given the baseline and loadings: Z (N, K) uint8.

    X (N, D), b (D,), A (K, D). Exact: every one of the 2^K patterns is scored; ties go to the
    pattern of smallest index (bits read as a binary number, feature 0 lowest), so the result is deterministic.
    """
    k = A.shape[0]
    if k == 0:
        return np.zeros((X.shape[0], 0), dtype=np.uint8)
    P = patterns(k)
    quad = np.einsum("pk,kl,pl->p", P, A @ A.T, P)
    lin = -2.0 * P.T  # (k, 2^k)
    shift = -2.0 * (b @ A.T) @ P.T  # the baseline's share of the linear term, (2^k,)
    out = np.empty((X.shape[0], k), dtype=np.uint8)
    for lo in range(0, X.shape[0], _ROW_CHUNK):
        score = (X[lo:lo + _ROW_CHUNK] @ A.T) @ lin
        score += quad - shift
        out[lo:lo + _ROW_CHUNK] = P[np.argmin(score, axis=1)]
    return out


def refit(X: np.ndarray, Z: np.ndarray, w: np.ndarray, ridge: float, Xw: np.ndarray | None = None,
          totals: tuple[float, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Weighted ridge fit of the baseline and loadings given Z: ``(b (D,), A (K, D))``.

    Minimises sum_i w_i ||x_i - b - z_i A||^2 + ridge ||A||^2 (b unpenalised); X (N, D), Z (N, K),
    w (N,). ``Xw`` = X * w[:, None] and ``totals`` = (w.sum(), Xw.sum(axis=0)) when the caller holds
    them (they do not change between alternations).
    """
    k = Z.shape[1]
    Xw = X * w[:, None] if Xw is None else Xw
    w_sum, xw_sum = (float(w.sum()), Xw.sum(axis=0)) if totals is None else totals
    Zf = Z.astype(np.float64)
    zw = Zf.T @ w
    G = np.empty((k + 1, k + 1))
    G[0, 0] = w_sum + 1e-12 * max(w_sum, 1.0)  # keeps the solve defined if every weight is zero
    G[0, 1:] = G[1:, 0] = zw
    G[1:, 1:] = Zf.T @ (Zf * w[:, None])
    G[np.arange(1, k + 1), np.arange(1, k + 1)] += ridge
    rhs = np.vstack([xw_sum, Zf.T @ Xw])
    B = np.linalg.solve(G, rhs)
    return B[0], B[1:]


def weighted_loss(X: np.ndarray, Z: np.ndarray, b: np.ndarray, A: np.ndarray, w: np.ndarray) -> float:
    """sum_i w_i ||x_i - b - z_i A||^2."""
    R = X - b - Z.astype(np.float64) @ A
    return float(np.einsum("i,ij,ij->", w, R, R))


def _wmean(s: np.ndarray, w: np.ndarray) -> float:
    """``np.average(s, weights=w)`` for 1-D arrays, the same arithmetic without its checks (it is called often)."""
    return (s * w).sum() / w.sum()


def _two_means_cut(s: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Cells above the weighted two-means threshold of the scores ``s`` (N,): bool (N,)."""
    t = float(_wmean(s, w))
    for _ in range(50):
        hi = s > t
        if hi.all() or not hi.any():
            break
        new = 0.5 * (_wmean(s[hi], w[hi]) + _wmean(s[~hi], w[~hi]))
        if new == t:
            break
        t = new
    return s > t


def _top_direction(R: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The leading eigenvector of the weighted second moment of the rows of R (N, D): (D,)."""
    M = R.T @ (R * w[:, None])
    return np.linalg.eigh(M)[1][:, -1]


def initial_allocation(X: np.ndarray, w: np.ndarray, k: int, rng: np.random.Generator | None,
                       ridge: float) -> np.ndarray:
    """A start for ``k`` features: Z (N, k) uint8, grown one feature at a time from the residual.

    Each feature is the two-means cut of the residual's scores along a direction: the leading
    principal axis of the weighted residual (``rng`` None: deterministic), or a random direction
    drawn from ``rng`` within the span of the residual's leading axes (restarts).
    """
    n, d = X.shape
    Z = np.zeros((n, 0), dtype=np.uint8)
    R = X - np.average(X, axis=0, weights=w)
    for _ in range(k):
        if rng is None:
            v = _top_direction(R, w)
        else:
            vals, vecs = np.linalg.eigh(R.T @ (R * w[:, None]))
            top = vecs[:, -min(d, 5):] * np.sqrt(np.maximum(vals[-min(d, 5):], 0.0))
            v = top @ rng.standard_normal(top.shape[1])
        z = _two_means_cut(R @ v, w).astype(np.uint8)
        Z = np.hstack([Z, z[:, None]])
        b, A = refit(X, Z, w, ridge)
        R = X - b - Z.astype(np.float64) @ A
    return Z


def _revive(X: np.ndarray, Z: np.ndarray, b: np.ndarray, A: np.ndarray, w: np.ndarray, dead: np.ndarray) -> None:
    """Restart the features in ``dead`` (empty or held by every cell) in place, each as the
    two-means cut of the residual's leading principal axis (a feature spent on nothing returns
    to the largest structure left unexplained)."""
    for j in dead:
        keep = np.ones(Z.shape[1], dtype=bool)
        keep[j] = False
        R = X - b - Z[:, keep].astype(np.float64) @ A[keep]
        Z[:, j] = _two_means_cut(R @ _top_direction(R, w), w)


def fit_member(X: np.ndarray, w: np.ndarray, k: int, *, starts: int, max_iter: int, ridge: float, min_cells: int,
               rng: np.random.Generator, tol: float = 1e-3) -> dict:
    """The best of ``starts`` alternations from :func:`initial_allocation` (the first deterministic).

    X (N, D), w (N,) non-negative weights. Returns ``{'Z' (N, k) uint8, 'b' (D,), 'A' (k, D),
    'loss', 'iterations', 'converged'}`` of the start with the smallest weighted loss. Features
    held by fewer than ``min_cells`` cells (or all but as few) are restarted during the first
    half of the iterations; a start that still has one at the end keeps it (the caller drops it).
    A start has converged when at most ``tol`` x N cells change their pattern in an alternation
    (the last few cells of a slow tail move the loss by a negligible amount; 0 = an exact fixed point).
    """
    best = None
    Xw = X * w[:, None]
    totals = (float(w.sum()), Xw.sum(axis=0))
    for s in range(starts):
        Z = initial_allocation(X, w, k, None if s == 0 else rng, ridge)
        converged = False
        for it in range(1, max_iter + 1):
            b, A = refit(X, Z, w, ridge, Xw, totals)
            new = assign(X, b, A)
            counts = new.sum(axis=0)
            dead = np.flatnonzero((counts < min_cells) | (counts > X.shape[0] - min_cells))
            if dead.size and it <= max_iter // 2:
                _revive(X, new, b, A, w, dead)
            elif np.count_nonzero((new != Z).any(axis=1)) <= tol * X.shape[0]:
                converged = True
                Z = new
                break
            Z = new
        b, A = refit(X, Z, w, ridge, Xw, totals)
        loss = weighted_loss(X, Z, b, A, w) + ridge * float((A * A).sum())
        if best is None or loss < best["loss"]:
            best = {"Z": Z, "b": b, "A": A, "loss": loss, "iterations": it, "converged": converged}
    return best


def oriented(Z: np.ndarray, b: np.ndarray, A: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The same fit with every feature held by at most half of the cells.

    With a baseline, z_k and 1 - z_k explain the data alike (b + A_k, -A_k); the minority side
    is the feature, so that resamples are compared in one orientation.
    """
    flip = Z.mean(axis=0) > 0.5
    if not flip.any():
        return Z, b, A
    Z = Z.copy()
    Z[:, flip] = 1 - Z[:, flip]
    b = b + A[flip].sum(axis=0)
    A = A.copy()
    A[flip] = -A[flip]
    return Z, b, A
