"""Cells outside the chains' subsample: their features drawn given each kept sample (``max_cells``).

When a contrast has more cells than ``LinearGaussianIBP.max_cells``, the chains run on a stratified
subsample of that many cells. Every kept sample of a chain holds the loadings A, the baseline, the
noise and the features' counts m_k; a cell outside the subsample then gets its row of Z from the
model's conditional given them: z_k ~ Bernoulli with the IBP's prior odds for one more cell,
m_k / (S + 1 - m_k), times the Gaussian likelihood ratio of its row, in ``scans`` single-site Gibbs
scans, each followed by Metropolis flips of two features at once (as the row sweep's block moves)
and by its Student-t weight w ~ Gamma((nu + D) / 2, (nu + r / v) / 2). Each cell keeps its state
from one kept sample to the next, so its draws form a chain beside the subsample's, as the
subsample's own rows do. The chains and their diagnostics are those of the subsample; these cells
never move A.
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _extend_rows(Y, A, K, n_fixed, log_odds, v, nu, scans, block_moves, Z, w):  # pragma: no cover - compiled
    """Gibbs scans of the features of the rows of Y (n, D) given the loadings ``A[:K]`` (rows < n_fixed: baseline).

    ``Z`` (n, >= K) uint8 and ``w`` (n,) hold each row's state (its features in columns
    n_fixed..K-1, its Student-t weight) and are updated in place: a row starts where the last
    draw left it. ``log_odds`` (K,) the prior log odds of each feature for one more cell, ``v``
    the noise variance (in Y's units), ``nu`` Student-t degrees of freedom (<= 0: Gaussian);
    after each single-site scan, ``block_moves`` Metropolis
    proposals flipping two features at once (exact: symmetric proposal), which move a row
    between representations single flips cannot connect. numba's per-thread generator draws.
    """
    n, d = Y.shape
    norms = np.zeros(K)
    for k in range(K):
        acc = 0.0
        for j in range(d):
            acc += A[k, j] * A[k, j]
        norms[k] = acc
    r = np.empty(d)
    free = K - n_fixed
    for i in range(n):
        for j in range(d):
            acc = Y[i, j]
            for k in range(K):
                if k < n_fixed or Z[i, k]:
                    acc -= A[k, j]
            r[j] = acc
        for _ in range(scans):
            prec = w[i] / v
            for k in range(n_fixed, K):
                dot = 0.0
                for j in range(d):
                    dot += (r[j] + Z[i, k] * A[k, j]) * A[k, j]  # r with z_k = 0, against A_k
                lo = log_odds[k] + prec * (dot - 0.5 * norms[k])
                new = 1 if np.random.random() < 1.0 / (1.0 + math.exp(-lo)) else 0  # noqa: NPY002
                if new != Z[i, k]:
                    sign = 1.0 if new else -1.0
                    for j in range(d):
                        r[j] -= sign * A[k, j]
                    Z[i, k] = new
            for _ in range(block_moves if free >= 2 else 0):
                a = n_fixed + int(np.random.random() * free)  # noqa: NPY002
                b = n_fixed + int(np.random.random() * (free - 1))  # noqa: NPY002
                if b >= a:
                    b += 1
                sa = 1.0 - 2.0 * Z[i, a]  # +1 adds the feature, -1 removes it
                sb = 1.0 - 2.0 * Z[i, b]
                # change of -|r|^2 / 2 when r -> r - sa A_a - sb A_b, and of the prior
                cross = 0.0
                for j in range(d):
                    step = sa * A[a, j] + sb * A[b, j]
                    cross += step * (r[j] - 0.5 * step)
                delta = prec * cross + sa * log_odds[a] + sb * log_odds[b]
                if delta >= 0.0 or np.random.random() < math.exp(delta):  # noqa: NPY002
                    for j in range(d):
                        r[j] -= sa * A[a, j] + sb * A[b, j]
                    Z[i, a] = 1 - Z[i, a]
                    Z[i, b] = 1 - Z[i, b]
            if nu > 0.0:
                rss = 0.0
                for j in range(d):
                    rss += r[j] * r[j]
                w[i] = np.random.gamma(0.5 * (nu + d), 1.0 / (0.5 * (nu + rss / v)))  # noqa: NPY002


def extend(Y: np.ndarray, A: np.ndarray, K: int, n_fixed: int, m: np.ndarray, n_fitted: int, v: float,
           nu: float | None, scans: int, state: tuple[np.ndarray, np.ndarray], block_moves: int = 4
           ) -> np.ndarray:
    """The features (n, K - n_fixed) uint8 of the rows of Y given one state of a chain on ``n_fitted`` cells.

    ``m`` holds each feature's count among those cells; the prior probability of feature k for
    one more cell is m_k / (n_fitted + 1) (the IBP's predictive). ``state`` = (Z (n, >= K) uint8,
    w (n,)): where each row's last draw left it, updated in place (columns from K on are cleared:
    features the chain no longer has).
    """
    Z, w = state
    Z[:, K:] = 0
    pi = m[:K].astype(np.float64) / (n_fitted + 1.0)
    log_odds = np.log(pi) - np.log1p(-pi)
    _extend_rows(Y, np.ascontiguousarray(A[:K]), K, n_fixed, log_odds, float(v), -1.0 if nu is None else float(nu),
                 int(scans), int(block_moves), Z, w)
    return Z[:, n_fixed:K].copy()
