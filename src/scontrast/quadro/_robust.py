"""Robust location and scatter: Catoni's means, robust variances, Kendall's tau, the nearest PSD matrix.

What QUADRO's ``estimator='robust'`` moments are made of (Fan, Ke, Liu and Xia 2015,
section 4): means and variances that resist heavy tails, rank correlations
``sin(pi/2 tau)`` that need no moments, and the nearest positive semi-definite
matrix to the covariance they make.
"""

from __future__ import annotations

import math
import warnings

import numba
import numpy as np
from scipy.stats import rankdata

from ..core import ScontrastConvergenceWarning, ScontrastError, check_option, check_real
from ._utils import _matrix

# --------------------------------------------------------------------------- robust means and variances


def _catoni_h(y: np.ndarray) -> np.ndarray:
    """Catoni's influence function h(y) = sgn(y) log(1 + |y| + y^2/2)."""
    a = np.abs(y)
    return np.sign(y) * np.log1p(a + 0.5 * a * a)


def _catoni_h_prime(y: np.ndarray) -> np.ndarray:
    a = np.abs(y)
    return (1.0 + a) / (1.0 + a + 0.5 * a * a)


def _log_inv_delta(n: int, d: int, delta: float | None) -> float:
    """log(1/delta) with the paper's delta = 1/max(n, d)^2, kept below n/4.

    Catoni's width needs n > 2 log(1/delta); for very small n the cap keeps the
    estimator defined (it then behaves like a Huber-type M-estimator).
    """
    if delta is None:
        log_inv = 2.0 * math.log(max(n, d, 2))
    else:
        if not 0.0 < delta < 1.0:
            raise ScontrastError(f"delta: expected a number in (0, 1), got {delta!r}")
        log_inv = -math.log(delta)
    return min(log_inv, n / 4.0)


def median_of_means_variance(X: np.ndarray, n_blocks: int | None = None) -> np.ndarray:
    """Robust per-column variance scale: median over blocks of mean (x - median)^2.

    Parameters
    ----------
    X : (n, d) array
    n_blocks : number of blocks (rows ``i`` with ``i % n_blocks == b``); default
        ``ceil(4 log max(n, d))``, at most ``n // 2``.

    Returns
    -------
    (d,) array. Centring at the median over-states the variance by the squared
    mean-median gap, which is harmless for an upper bound; the median over
    blocks ignores blocks hit by a few gross outliers.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.quadro import median_of_means_variance
    >>> x = np.r_[np.random.default_rng(0).normal(size=99), 1000.0][:, None]   # one wild value
    >>> bool(median_of_means_variance(x)[0] < 5.0)
    True
    """
    X = np.asarray(X, dtype=float)
    n = X.shape[0]
    if n_blocks is None:
        n_blocks = math.ceil(4.0 * math.log(max(n, X.shape[1], 2)))
    n_blocks = int(max(1, min(n_blocks, n // 2)))
    dev2 = (X - np.median(X, axis=0)) ** 2
    block = np.arange(n) % n_blocks
    sums = np.zeros((n_blocks, X.shape[1]))
    np.add.at(sums, block, dev2)
    counts = np.bincount(block, minlength=n_blocks)[:, None]
    return np.median(sums / counts, axis=0)


def catoni_mean(X, v=None, delta: float | None = None, tol: float = 1e-12, max_iter: int = 100) -> np.ndarray:
    """Catoni's M-estimator of each column's mean.

    Solves ``sum_i h(alpha_j (x_ij - mu_j)) = 0`` with
    ``h(y) = sgn(y) log(1 + |y| + y^2/2)`` and Catoni's width
    ``alpha_j = sqrt(2 L / (n (v_j + 2 v_j L / (n - 2 L))))``, ``L = log(1/delta)``.

    Parameters
    ----------
    X : (n, d) or (n,) array
    v : None, float or (d,) array
        Upper bound(s) of the variances. None = 3 x a median-of-means variance
        of each column (the paper uses 3 x the largest sample variance, which a
        few gross outliers inflate until the estimator is the sample mean).
    delta : confidence level; None = 1 / max(n, d)^2 (the paper's choice).

    Returns
    -------
    (d,) array (a float for 1-D input).

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.quadro import catoni_mean
    >>> rng = np.random.default_rng(0)
    >>> x = np.r_[rng.normal(size=99), 1000.0][:, None]                # one wild value among 100
    >>> bool(abs(catoni_mean(x)[0]) < 1.0), bool(x.mean() > 10)        # the sample mean follows it
    (True, True)
    """
    one_d = np.ndim(X) == 1
    X = _matrix(np.reshape(X, (-1, 1)) if one_d else X, "X")
    n, d = X.shape
    if v is None:
        v = 3.0 * median_of_means_variance(X)
        zero = v <= 0
        if zero.any():  # mostly-constant columns: fall back to the sample variance
            v[zero] = 3.0 * X[:, zero].var(axis=0)
    else:
        v = np.broadcast_to(np.asarray(v, dtype=float), (d,)).copy()
        if (v < 0).any() or not np.isfinite(v).all():
            raise ScontrastError("v: expected finite non-negative variance bounds")
    L = _log_inv_delta(n, d, delta)
    const = v <= 0  # truly constant columns: every value is the mean
    alpha = np.zeros(d)
    alpha[~const] = np.sqrt(2.0 * L / (n * (v[~const] + 2.0 * v[~const] * L / (n - 2.0 * L))))

    # psi(mu) = sum h(alpha (x - mu)) decreases strictly in mu: safeguarded Newton
    # inside the bracket [min x, max x], all columns at once.
    lo, hi = X.min(axis=0), X.max(axis=0)
    mu = np.median(X, axis=0)
    span = np.maximum(hi - lo, np.finfo(float).tiny)
    active = ~const & (hi > lo)
    for _ in range(max_iter):
        if not active.any():
            break
        Y = alpha[active] * (X[:, active] - mu[active])
        psi = _catoni_h(Y).sum(axis=0)
        dpsi = -alpha[active] * _catoni_h_prime(Y).sum(axis=0)
        m = mu[active]
        lo_a, hi_a = lo[active], hi[active]
        lo_a = np.where(psi > 0, m, lo_a)
        hi_a = np.where(psi < 0, m, hi_a)
        step = -psi / dpsi
        new = m + step
        outside = ~((new > lo_a) & (new < hi_a))
        new = np.where(outside, 0.5 * (lo_a + hi_a), new)
        lo[active], hi[active] = lo_a, hi_a
        mu[active] = new
        done = (np.abs(new - m) <= tol * span[active]) | (psi == 0)
        idx = np.flatnonzero(active)
        active[idx[done]] = False
    mu[const] = X[0, const]
    return float(mu[0]) if one_d else mu


def robust_variance(X, delta: float | None = None, delta0: float | None = None) -> np.ndarray:
    """Per-column variance ``max(eta_j - mu_j^2, delta0)`` from Catoni means.

    ``mu_j`` is Catoni's mean of x_j and ``eta_j`` Catoni's mean of x_j^2, whose
    variance bound comes from the spread of x_j^2 (not of x_j). The columns are
    first centred at their medians, which leaves ``mu`` equivariant and makes
    ``eta - mu^2`` translation invariant and free of cancellation.

    Parameters
    ----------
    X : (n, d) array
    delta : Catoni's confidence level (see ``catoni_mean``).
    delta0 : floor of the variances; None = 1e-10 x the largest ``eta``.

    Returns
    -------
    (d,) array of positive variances.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.quadro import robust_variance
    >>> x = np.r_[np.random.default_rng(0).normal(size=99), 1000.0][:, None]   # one wild value
    >>> bool(robust_variance(x)[0] < 5.0), bool(x.var() > 9000)
    (True, True)
    """
    X = _matrix(X, "X", min_rows=2)
    Xc = X - np.median(X, axis=0)
    mu = catoni_mean(Xc, delta=delta)
    eta = catoni_mean(Xc**2, delta=delta)
    if delta0 is None:
        delta0 = 1e-10 * max(float(eta.max()), np.finfo(float).tiny)
    elif delta0 <= 0:
        raise ScontrastError(f"delta0: expected a positive number, got {delta0!r}")
    return np.maximum(eta - mu**2, delta0)


# --------------------------------------------------------------------------- Kendall's tau


@numba.njit(parallel=True, cache=True)
def _kendall_tau_b_pairs(ranks_t, order_t, n_ranks, ties, pj, pk):  # pragma: no cover - compiled
    """Kendall's tau-b of every column pair (pj[p], pk[p]) in O(n log n) each.

    ``ranks_t`` (d, n) holds 0-based dense ranks per column and ``order_t`` (d, n)
    each column's sorting permutation. The cells are walked in increasing order
    of column j, one tie group at a time, and a Fenwick tree over the ranks of
    column k counts the earlier cells that are below (concordant) or above
    (discordant); pairs tied in either column count as neither.
    """
    n = ranks_t.shape[1]
    n0 = n * (n - 1) / 2.0
    out = np.empty(pj.shape[0])
    for p in numba.prange(pj.shape[0]):
        j = pj[p]
        k = pk[p]
        size = n_ranks[k]
        tree = np.zeros(size + 1, dtype=np.int32)
        count = np.zeros(size, dtype=np.int32)
        seq = np.empty(n, dtype=np.int64)
        grp = np.empty(n, dtype=np.int64)
        for i in range(n):
            c = order_t[j, i]
            seq[i] = ranks_t[k, c]
            grp[i] = ranks_t[j, c]
        conc = 0
        disc = 0
        inserted = 0
        i = 0
        while i < n:
            end = i + 1
            while end < n and grp[end] == grp[i]:
                end += 1
            for q in range(i, end):
                r = seq[q]  # ranks 0..r-1 lie strictly below
                less = 0
                pos = r
                while pos > 0:
                    less += tree[pos]
                    pos -= pos & (-pos)
                leq = less + count[r]
                conc += less
                disc += inserted - leq
            for q in range(i, end):
                count[seq[q]] += 1
                pos = seq[q] + 1
                while pos <= size:
                    tree[pos] += 1
                    pos += pos & (-pos)
                inserted += 1
            i = end
        denom = math.sqrt((n0 - ties[j]) * (n0 - ties[k]))
        out[p] = (conc - disc) / denom if denom > 0 else np.nan
    return out


# the same kernel without numba's threading layer: for one thread (QUADRO's n_jobs=1 and its outer-fold workers)
_kendall_tau_b_pairs_serial = numba.njit(cache=True, nogil=True)(_kendall_tau_b_pairs.py_func)


def kendall_tau_matrix(X) -> np.ndarray:
    """Kendall's tau-b between every pair of columns.

    O(n log n) per pair (compiled, parallel over pairs); ties are handled as in
    ``scipy.stats.kendalltau`` (tau-b). A constant column has an undefined tau:
    its off-diagonal entries are 0.

    Parameters
    ----------
    X : (n, d) array

    Returns
    -------
    (d, d) symmetric array with unit diagonal.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.quadro import kendall_tau_matrix
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=30)
    >>> kendall_tau_matrix(np.column_stack([z, z ** 3, -z])).round(6).tolist()   # ranks only
    [[1.0, 1.0, -1.0], [1.0, 1.0, -1.0], [-1.0, -1.0, 1.0]]
    """
    X = _matrix(X, "X", min_rows=2)
    n, d = X.shape
    ranks = np.ascontiguousarray((rankdata(X, method="dense", axis=0).astype(np.int64) - 1).T)
    order = np.ascontiguousarray(np.argsort(X, axis=0, kind="stable").astype(np.int64).T)
    n_ranks = ranks.max(axis=1) + 1
    ties = np.empty(d)
    for j in range(d):
        t = np.bincount(ranks[j]).astype(float)
        ties[j] = float((t * (t - 1) / 2).sum())
    pj, pk = np.triu_indices(d, k=1)
    kernel = _kendall_tau_b_pairs if numba.get_num_threads() > 1 else _kendall_tau_b_pairs_serial
    tau = kernel(ranks, order, n_ranks, ties, pj.astype(np.int64), pk.astype(np.int64))
    out = np.eye(d)
    tau = np.nan_to_num(tau, nan=0.0)
    out[pj, pk] = tau
    out[pk, pj] = tau
    return out


def kendall_correlation(X) -> np.ndarray:
    """Rank-based correlation matrix ``sin(pi/2 tau)`` (Han and Liu 2012).

    For elliptical laws ``sin(pi/2 tau_jk)`` is the Pearson correlation, so this
    estimates it without moments. Not necessarily positive semi-definite. Takes and
    returns what :func:`kendall_tau_matrix` does: an (n, d) array, a (d, d) symmetric
    array with unit diagonal.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.quadro import kendall_correlation
    >>> z = np.random.default_rng(0).normal(size=40)
    >>> kendall_correlation(np.column_stack([z, z ** 3])).round(6).tolist()   # a monotone relation: 1
    [[1.0, 1.0], [1.0, 1.0]]
    """
    C = np.sin(0.5 * np.pi * kendall_tau_matrix(X))
    np.fill_diagonal(C, 1.0)
    return C


# --------------------------------------------------------------------------- nearest PSD matrix


def _project_l1_ball(w: np.ndarray, radius: float) -> np.ndarray:
    """Euclidean projection of the vector w onto {x: |x|_1 <= radius} (sort based)."""
    a = np.abs(w)
    if a.sum() <= radius:
        return w.copy()
    u = np.sort(a)[::-1]
    css = np.cumsum(u)
    k = np.arange(1, u.size + 1)
    rho = np.flatnonzero(u * k > css - radius)[-1]
    theta = (css[rho] - radius) / (rho + 1.0)
    return np.sign(w) * np.maximum(a - theta, 0.0)


def _psd_part(S: np.ndarray) -> np.ndarray:
    vals, vecs = np.linalg.eigh(S)
    P = (vecs * np.maximum(vals, 0.0)) @ vecs.T
    return 0.5 * (P + P.T)


def nearest_psd(S, norm: str = "max", tol: float = 1e-3, max_iter: int = 5000) -> np.ndarray:
    """Nearest positive semi-definite matrix to a symmetric ``S``.

    Parameters
    ----------
    S : (d, d) array (symmetrised first).
    norm : ``'fro'`` — the Frobenius projection (negative eigenvalues set to 0);
        ``'max'`` — minimise ``max_ij |P_ij - S_ij|`` over PSD ``P`` (the paper's
        choice: the answer is within twice the max-norm error of ``S``), by ADMM
        on ``min |Z - S|_max + I_psd(P)`` s.t. ``P = Z`` with residual balancing.
    tol : ``'max'`` stops when the duality gap is at most ``tol`` times the
        distance reached: the PSD answer is then within a factor ``1 + tol`` of
        the smallest max-norm distance.
    max_iter : ADMM iteration cap (a warning is issued when reached).

    Returns
    -------
    (d, d) symmetric PSD array.

    Notes
    -----
    The dual of ``min_{P psd} |P - S|_max`` is ``max -<Y, S>`` over PSD ``Y``
    with ``|Y|_1 <= 1``; the PSD part of the ADMM multiplier, normalised,
    gives such a ``Y`` and hence the lower bound used for stopping.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.quadro import nearest_psd
    >>> S = np.array([[1.0, 0.9, 0.9], [0.9, 1.0, -0.9], [0.9, -0.9, 1.0]])   # not a correlation matrix
    >>> round(float(np.linalg.eigvalsh(S).min()), 6)   # the last bits depend on the LAPACK kernel
    -0.8
    >>> bool(np.linalg.eigvalsh(nearest_psd(S, norm="fro")).min() >= -1e-10)
    True
    """
    S = np.asarray(S, dtype=float)
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ScontrastError(f"S: expected a square matrix, got shape {S.shape}")
    if not np.isfinite(S).all():
        raise ScontrastError("S: contains NaN or infinite values")
    check_option(norm, "norm", ["max", "fro"])
    check_real(tol, "tol", 0.0, strict_min=True)
    S = 0.5 * (S + S.T)
    if np.linalg.eigvalsh(S)[0] >= 0:
        return S.copy()
    P = _psd_part(S)
    if norm == "fro":
        return P

    best, upper, lower = P, float(np.abs(P - S).max()), 0.0
    scale = max(float(np.abs(S).max()), np.finfo(float).tiny)
    Z = S.copy()
    U = np.zeros_like(S)
    rho = 1.0 / scale
    for it in range(max_iter):
        P = _psd_part(Z - U)
        dist = float(np.abs(P - S).max())
        if dist < upper:
            best, upper = P, dist
        if it % 10 == 9:
            # U = (multiplier of P = Z) / rho: its PSD part, normalised, is dual feasible
            Y = _psd_part(U)
            y1 = float(np.abs(Y).sum())
            if y1 > 0:
                lower = max(lower, -float(np.sum(Y * S)) / y1)
            if upper - lower <= tol * upper:
                break
        W = P + U - S
        # prox of (1/rho) |.|_max is w minus its projection on the l1 ball of radius 1/rho
        Z_new = S + W - _project_l1_ball(W.ravel(), 1.0 / rho).reshape(W.shape)
        Z_new = 0.5 * (Z_new + Z_new.T)
        r = np.linalg.norm(P - Z_new)
        s = rho * np.linalg.norm(Z_new - Z)
        U += P - Z_new
        Z = Z_new
        # residual balancing keeps primal and dual progress comparable
        if r > 10 * s:
            rho *= 2.0
            U /= 2.0
        elif s > 10 * r:
            rho /= 2.0
            U *= 2.0
    else:
        warnings.warn(f"nearest_psd(norm='max') stopped after max_iter={max_iter} ADMM iterations with a "
                      f"relative duality gap of {(upper - lower) / upper:.1e}", ScontrastConvergenceWarning, stacklevel=2)
    return best
