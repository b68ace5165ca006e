"""QUADRO: sparse quadratic classification by Rayleigh-quotient optimisation.

Fan, Ke, Liu and Xia (2015), *QUADRO: a supervised dimension reduction method
via Rayleigh quotient optimization*, Annals of Statistics 43(4).

A quadratic score ``Q(x) = x' Omega x - 2 delta' x`` separates two classes
(class 1 = ``classes_[0]``, class 2 = ``classes_[1]``). Under elliptical laws
with a common kurtosis parameter ``gamma`` its class-wise mean and variance are

    M_k = tr(Omega S_k) + mu_k' Omega mu_k - 2 delta' mu_k
    L_k = 2 (1 + gamma) tr(Omega S_k Omega S_k) + gamma tr(Omega S_k)^2
          + 4 (Omega mu_k - delta)' S_k (Omega mu_k - delta)

so the Rayleigh quotient ``pi (1-pi) (M_1 - M_2)^2 / (pi L_1 + (1-pi) L_2)``
needs only means, covariances and ``gamma``. Being scale free, it is maximised
by the convex problem

    min  pi L_1 + (1-pi) L_2 + lambda1 |Omega|_1 + lambda2 |delta|_1
    s.t. M_2 - M_1 = 1,

solved here by an accelerated proximal gradient method whose proximal step
(soft-thresholding with one scalar shift) keeps every iterate exactly on the
constraint. Means, variances and correlations are estimated robustly
(Catoni's M-estimator, Kendall's tau) or by the sample moments.

For real data (scontrast issue 16): ``class_weight='balanced'`` gives both
classes the weight 1/2 (``pi``, the threshold and the calibration), so that a
small group is not traded away; :class:`RayleighScreen` keeps the genes whose
own distribution (:func:`marginal_rayleigh`) or co-expression
(:func:`coexpression_change`) changes most, fitted on the training samples of
every fold; lambda1's path starts where the optimality conditions make
``Omega = 0`` (``RayleighProblem.omega_zero_level``) and a choice at the path's
least penalised end is a :class:`scontrast.core.ScontrastWarning`. The proximal
gradient loop is compiled (numba) and :func:`cross_validated_scores` fits the outer
folds in ``n_jobs`` threads; ``shrinkage='auto'`` (the default) regularises the
covariance of a class with no more samples than features (Ledoit-Wolf), and
``cv_rule='1se_lambda1'`` orders the one-standard-error choice: Omega's penalty first.

The module is numpy/scipy in, numpy out; ``scontrast.tl.quadro`` is the
AnnData front end.
"""

from __future__ import annotations

import contextlib
import logging
import math
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numba
import numpy as np
from scipy.optimize import minimize_scalar
from scipy.sparse.linalg import LinearOperator, eigsh
from scipy.special import expit
from scipy.stats import norm, rankdata
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.covariance import ledoit_wolf_shrinkage
from sklearn.feature_selection import SelectorMixin
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.utils import _safe_indexing
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from .core import (
    CannotRun,
    ScontrastError,
    ScontrastWarning,
    blas_threads,
    check_int,
    check_matrix,
    check_option,
    check_random_state,
    check_real,
    dense,
    progress,
    spawn_seed,
)

__all__ = [
    "catoni_mean",
    "median_of_means_variance",
    "robust_variance",
    "kendall_tau_matrix",
    "kendall_correlation",
    "nearest_psd",
    "kurtosis_parameter",
    "quadratic_mean",
    "quadratic_variance",
    "rayleigh_quotient",
    "estimate_moments",
    "Moments",
    "RayleighProblem",
    "RayleighSolution",
    "solve_rayleigh",
    "error_threshold",
    "balanced_error",
    "marginal_rayleigh",
    "coexpression_change",
    "RayleighScreen",
    "QUADRO",
    "OutOfFold",
    "cross_validated_scores",
]

log = logging.getLogger(__name__)


def _matrix(X, name: str, min_rows: int = 1) -> np.ndarray:
    """``X`` checked by :func:`scontrast.core.check_matrix` and made dense (the moments need all entries)."""
    return dense(check_matrix(X, name, min_rows=min_rows))


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
    estimates it without moments. Not necessarily positive semi-definite.

    Parameters
    ----------
    X : (n, d) array

    Returns
    -------
    (d, d) symmetric array with unit diagonal.
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
                      f"relative duality gap of {(upper - lower) / upper:.1e}", RuntimeWarning, stacklevel=2)
    return best


# --------------------------------------------------------------------------- kurtosis


def kurtosis_parameter(X1, X2) -> float:
    """Common kurtosis parameter gamma of two elliptical classes.

    Each marginal of an elliptical law has kurtosis ``3 (1 + gamma)``, so gamma is
    estimated as the pooled (genes x classes, weighted by class size) marginal
    kurtosis / 3 - 1, bounded below by ``-2/(d+2)``, the smallest value an
    elliptical law allows and the one that keeps ``L_k`` convex. Constant
    columns are left out. Sample fourth moments are biased low under heavy
    tails: treat the value as a working parameter, not an accurate estimate.

    Parameters
    ----------
    X1 : (n1, d) array, X2 : (n2, d) array

    Returns
    -------
    float
    """
    X1 = _matrix(X1, "X1", min_rows=2)
    X2 = _matrix(X2, "X2", min_rows=2)
    if X1.shape[1] != X2.shape[1]:
        raise ScontrastError(f"X2: has {X2.shape[1]} columns, X1 has {X1.shape[1]}")
    d = X1.shape[1]
    total, weight = 0.0, 0.0
    for X in (X1, X2):
        C = X - X.mean(axis=0)
        m2 = (C**2).mean(axis=0)
        ok = m2 > 1e-12 * max(float(m2.max()), np.finfo(float).tiny)
        if not ok.any():
            continue
        kurt = (C[:, ok] ** 4).mean(axis=0) / m2[ok] ** 2
        total += X.shape[0] * kurt.mean()
        weight += X.shape[0]
    if weight == 0:
        return 0.0
    return float(max(total / weight / 3.0 - 1.0, -2.0 / (d + 2)))


# --------------------------------------------------------------------------- moments of Q


def _check_quad(Omega, delta, mu, Sigma):
    Omega = np.asarray(Omega, dtype=float)
    delta = np.asarray(delta, dtype=float)
    mu = np.asarray(mu, dtype=float)
    Sigma = np.asarray(Sigma, dtype=float)
    d = mu.shape[0]
    if Omega.shape != (d, d) or Sigma.shape != (d, d) or delta.shape != (d,):
        raise ScontrastError(
            f"Omega, delta, mu, Sigma: shapes disagree, {Omega.shape}, {delta.shape}, {mu.shape}, {Sigma.shape}"
        )
    return 0.5 * (Omega + Omega.T), delta, mu, Sigma


def quadratic_mean(Omega, delta, mu, Sigma) -> float:
    """M = E Q(Z) = tr(Omega Sigma) + mu' Omega mu - 2 delta' mu for E Z = mu, cov Z = Sigma.

    Parameters
    ----------
    Omega : (d, d) symmetric, delta : (d,), mu : (d,), Sigma : (d, d)
    """
    Omega, delta, mu, Sigma = _check_quad(Omega, delta, mu, Sigma)
    return float(np.sum(Omega * Sigma) + mu @ Omega @ mu - 2.0 * delta @ mu)


def quadratic_variance(Omega, delta, mu, Sigma, gamma: float = 0.0) -> float:
    """L = Var Q(Z) for Z elliptical with mean mu, covariance Sigma, kurtosis parameter gamma.

    ``L = 2(1+gamma) tr(Omega Sigma Omega Sigma) + gamma tr(Omega Sigma)^2
    + 4 (Omega mu - delta)' Sigma (Omega mu - delta)``; gamma = 0 for Gaussian,
    2/(nu - 4) for multivariate t with nu > 4 degrees of freedom.

    Parameters
    ----------
    Omega : (d, d) symmetric, delta : (d,), mu : (d,), Sigma : (d, d), gamma : float
    """
    Omega, delta, mu, Sigma = _check_quad(Omega, delta, mu, Sigma)
    OS = Omega @ Sigma
    u = Omega @ mu - delta
    return float(2.0 * (1.0 + gamma) * np.sum(OS * OS.T) + gamma * np.trace(OS) ** 2 + 4.0 * u @ Sigma @ u)


def rayleigh_quotient(Omega, delta, mu1, Sigma1, mu2, Sigma2, gamma: float = 0.0, pi: float = 0.5) -> float:
    """Rq = pi (1-pi) (M_1 - M_2)^2 / (pi L_1 + (1-pi) L_2); pi = P(class 1)."""
    M1 = quadratic_mean(Omega, delta, mu1, Sigma1)
    M2 = quadratic_mean(Omega, delta, mu2, Sigma2)
    L1 = quadratic_variance(Omega, delta, mu1, Sigma1, gamma)
    L2 = quadratic_variance(Omega, delta, mu2, Sigma2, gamma)
    den = pi * L1 + (1.0 - pi) * L2
    return float(pi * (1.0 - pi) * (M1 - M2) ** 2 / den) if den > 0 else float("inf")


# --------------------------------------------------------------------------- moment estimation


@dataclass
class Moments:
    """Plug-in moments of the two classes, in the coordinates z = (x - center) / scale."""

    mu1: np.ndarray
    Sigma1: np.ndarray
    mu2: np.ndarray
    Sigma2: np.ndarray
    gamma: float
    pi: float
    center: np.ndarray
    scale: np.ndarray


def estimate_moments(X1, X2, estimator: str = "robust", gamma: float | None = None, psd_norm: str = "max",
                     standardize: bool = True, pi: float | None = None, shrinkage: str | None = None) -> Moments:
    """Means and covariances of both classes (robust or sample) and gamma.

    ``'robust'``: Catoni means, ``robust_variance`` variances, Kendall
    correlations ``sin(pi/2 tau)``, then ``nearest_psd(D C D, psd_norm)``.
    ``'sample'``: sample means and covariances (ddof 1).
    With ``standardize`` the moments are those of ``z = (x - center) / scale``
    with ``center`` the prior-weighted class means and ``scale`` the pooled
    within-class standard deviations, so that the L1 penalties treat features
    alike whatever their units.

    Parameters
    ----------
    X1 : (n1, d) array of class 1, X2 : (n2, d) array of class 2.
    gamma : None = ``kurtosis_parameter(X1, X2)``.
    pi : weight of class 1 in the objective and the centring; None = its share
        ``n1 / (n1 + n2)`` of the samples, 0.5 = both classes alike (balanced).
    shrinkage : None, ``'ledoit_wolf'`` or ``'auto'``: each class's (standardised) covariance
        becomes ``(1 - rho) S + rho tr(S)/d I`` with Ledoit and Wolf's ``rho`` of that
        class's standardised samples (about 0 when n >> d; needed when d approaches n, where
        ``S`` is singular and the quotient's variance vanishes along its null space).
        ``'auto'`` shrinks only the classes with at most ``d`` samples (singular ``S``).
    """
    check_option(estimator, "estimator", ["robust", "sample"])
    check_option(shrinkage, "shrinkage", [None, "ledoit_wolf", "auto"])
    X1 = _matrix(X1, "X1", min_rows=2)
    X2 = _matrix(X2, "X2", min_rows=2)
    d = X1.shape[1]
    if X2.shape[1] != d:
        raise ScontrastError(f"X2: has {X2.shape[1]} columns, X1 has {d}")
    out = []
    for X in (X1, X2):
        if estimator == "sample":
            mu = X.mean(axis=0)
            S = np.atleast_2d(np.cov(X, rowvar=False))
        else:
            mu = catoni_mean(X)
            sd = np.sqrt(robust_variance(X))
            S = nearest_psd(sd[:, None] * kendall_correlation(X) * sd[None, :], norm=psd_norm)
        out.append((mu, S))
    (mu1, S1), (mu2, S2) = out
    if pi is None:
        pi = X1.shape[0] / (X1.shape[0] + X2.shape[0])
    elif not 0.0 < pi < 1.0:
        raise ScontrastError(f"pi: expected a number in (0, 1), got {pi!r}")
    if gamma is None:
        gamma = kurtosis_parameter(X1, X2)
    elif gamma < -2.0 / (d + 2):
        raise ScontrastError(f"gamma: expected at least -2/(d+2) = {-2.0 / (d + 2):.4g} (d = {d}), got {gamma!r}")
    if standardize:
        center = pi * mu1 + (1 - pi) * mu2
        sd = np.sqrt(pi * np.diag(S1) + (1 - pi) * np.diag(S2))
        scale = np.where(sd > 1e-12 * max(float(sd.max()), np.finfo(float).tiny), sd, 1.0)
    else:
        center, scale = np.zeros(d), np.ones(d)
    inv = 1.0 / scale
    Sigma1, Sigma2 = S1 * inv[:, None] * inv[None, :], S2 * inv[:, None] * inv[None, :]
    if shrinkage is not None:
        # Ledoit and Wolf's amount for the standardised genes, whose covariance is the one shrunk
        Sigma1, Sigma2 = (_shrunk(S, ledoit_wolf_shrinkage(X * inv))
                          if shrinkage == "ledoit_wolf" or X.shape[0] <= d else S
                          for S, X in ((Sigma1, X1), (Sigma2, X2)))
    return Moments(
        mu1=(mu1 - center) * inv, Sigma1=Sigma1, mu2=(mu2 - center) * inv, Sigma2=Sigma2,
        gamma=float(gamma), pi=float(pi), center=center, scale=scale,
    )


def _shrunk(S: np.ndarray, rho: float) -> np.ndarray:
    """``(1 - rho) S + rho tr(S)/d I`` for a (d, d) ``S``."""
    d = S.shape[0]
    return (1.0 - rho) * S + rho * float(np.trace(S)) / d * np.eye(d)


# --------------------------------------------------------------------------- the convex problem


class RayleighProblem:
    """The smooth part and the constraint of QUADRO's convex problem.

    Variables ``x = (Omega, delta)`` are packed as ``[Omega.ravel(), delta]``
    (length d^2 + d) with Omega symmetric; inner products are Frobenius, so the
    L1 norm of the packed vector counts each off-diagonal entry twice, as
    ``|Omega|_1`` does. ``f(x) = pi L_1 + (1-pi) L_2`` is a homogeneous
    quadratic, ``f(x) = x' H x``, and the constraint ``M_2 - M_1 = 1`` is
    ``<a, x> = 1`` with ``a = [S2 - S1 + mu2 mu2' - mu1 mu1', -2 (mu2 - mu1)]``.
    """

    def __init__(self, moments: Moments):
        m = moments
        self.d = d = m.mu1.shape[0]
        self.gamma = m.gamma
        self.classes = ((m.pi, m.mu1, m.Sigma1), (1.0 - m.pi, m.mu2, m.Sigma2))
        # both classes stacked, so that one gradient is a handful of batched BLAS calls
        self._w = np.array([m.pi, 1.0 - m.pi])
        self._S = np.stack([m.Sigma1, m.Sigma2])
        self._mu = np.stack([m.mu1, m.mu2])
        A = m.Sigma2 - m.Sigma1 + np.outer(m.mu2, m.mu2) - np.outer(m.mu1, m.mu1)
        self.a = np.concatenate([(0.5 * (A + A.T)).ravel(), -2.0 * (m.mu2 - m.mu1)])
        if not np.any(self.a):
            # not an input to fix: the workflow records it and keeps the other methods' results
            raise CannotRun("moments: the two classes have identical estimated means and covariances, "
                            "nothing to separate")
        self.size = d * d + d
        self._lipschitz = None

    def unpack(self, x: np.ndarray):
        d = self.d
        return x[: d * d].reshape(d, d), x[d * d:]

    def gradient(self, x: np.ndarray) -> np.ndarray:
        """Gradient of f at x (packed, length d^2 + d); equals 2 H x.

        Per class: ``grad_Omega L = 4(1+g) S Omega S + 2 g tr(Omega S) S
        + 4 (r mu' + mu r')`` and ``grad_delta L = -8 r`` with
        ``r = S (Omega mu - delta)`` (Omega symmetric, so the Omega gradient is
        the symmetric one).
        """
        d, g = self.d, self.gamma
        Om = x[: d * d].reshape(d, d)
        de = x[d * d:]
        S, w, mu = self._S, self._w, self._mu
        SOS = (S @ Om) @ S
        tr = np.einsum("kij,ij->k", S, Om)
        r = np.einsum("kij,kj->ki", S, mu @ Om - de)
        wr = w[:, None] * r
        G = np.einsum("k,kij->ij", 4.0 * (1.0 + g) * w, SOS) + np.einsum("k,kij->ij", 2.0 * g * w * tr, S)
        outer = 4.0 * (wr.T @ mu)
        G += outer + outer.T
        G = 0.5 * (G + G.T)
        return np.concatenate([G.ravel(), -8.0 * wr.sum(axis=0)])

    def value(self, x: np.ndarray, grad: np.ndarray | None = None) -> float:
        """f(x) = pi L_1 + (1-pi) L_2 (from the gradient: f is homogeneous of degree 2)."""
        if grad is None:
            grad = self.gradient(x)
        return float(0.5 * grad @ x)

    def lipschitz(self) -> float:
        """Largest eigenvalue of the Hessian 2H (Lanczos, deterministic start)."""
        if self._lipschitz is None:
            op = LinearOperator((self.size, self.size), matvec=self.gradient, dtype=float)
            v0 = np.ones(self.size) / math.sqrt(self.size)
            if self.size <= 3:
                H2 = np.column_stack([self.gradient(e) for e in np.eye(self.size)])
                lam = float(np.linalg.eigvalsh(0.5 * (H2 + H2.T))[-1])
            else:
                lam = float(eigsh(op, k=1, which="LA", v0=v0, tol=1e-8, return_eigenvectors=False)[0])
            self._lipschitz = max(lam, np.finfo(float).tiny)
        return self._lipschitz

    def omega_zero_level(self) -> float | None:
        """The smallest lambda1 at which ``Omega = 0`` solves the problem with ``lambda2 = 0``.

        With ``Omega = 0`` the problem is ``min 4 delta' S delta`` s.t.
        ``-2 (mu2 - mu1)' delta = 1`` (``S`` the prior-weighted covariance), solved by
        ``delta = S^-1 b / (b' S^-1 b)`` with multiplier ``nu = -8 / (b' S^-1 b)``;
        the optimality conditions keep ``Omega`` at zero exactly while
        ``lambda1 >= max_ij |grad_Omega f + nu a_Omega|_ij``. None when no linear
        rule is feasible (equal means).
        """
        d, d2 = self.d, self.d * self.d
        b = self.a[d2:]
        if not np.any(b):
            return None
        S = np.einsum("k,kij->ij", self._w, self._S)
        ridge = 1e-10 * max(float(np.trace(S)) / d, np.finfo(float).tiny)
        u = np.linalg.lstsq(S + ridge * np.eye(d), b, rcond=None)[0]
        den = float(b @ u)
        if not den > 0:
            return None
        x = np.zeros(self.size)
        x[d2:] = u / den
        g = self.gradient(x)
        nu = -float(g[d2:] @ b) / float(b @ b)
        level = float(np.abs(g[:d2] + nu * self.a[:d2]).max())
        return level if level > 0 else None

    def reference_scale(self) -> tuple[float, float]:
        """Scale of the penalties, the analogue of the lasso's ``lambda_max``.

        lambda1: ``omega_zero_level`` (the path of lambda1 multiples starts at 1,
        where the rule is linear, ``Omega = 0``), or the sparsest-point scale below
        when that is larger (then Omega is zero at 1 too). lambda2: at the sparsest feasible point ``x_s`` (the minimum-L1 point of
        ``<a, x> = 1``: one symmetric pair of Omega or one entry of delta, where
        ``|a|`` is largest) the penalties must exceed the constraint-corrected
        smooth gradient ``|grad f(x_s) + nu a|`` to keep the answer that sparse.
        Returns, per block (Omega, delta), the largest entry of that gradient
        with ``nu`` minimising its overall maximum (for lambda1 only when
        ``omega_zero_level`` is None). lambda1 and lambda2 are multiples of
        these: 1 gives ``Omega = 0`` (lambda1) and (nearly) the sparsest delta
        (lambda2); small multiples approach the unpenalised answer.
        """
        d2 = self.d * self.d
        i = int(np.argmax(np.abs(self.a)))
        x = np.zeros(self.size)
        if i < d2:
            r, c = divmod(i, self.d)
            x[[r * self.d + c, c * self.d + r]] = 1.0
        else:
            x[i] = 1.0
        x /= float(self.a @ x)
        g = self.gradient(x)
        a = self.a
        bound = 2.0 * float(np.abs(g).max()) / float(np.abs(a).max()) + 1e-300
        res = minimize_scalar(lambda nu: float(np.abs(g + nu * a).max()), bounds=(-bound, bound),
                              method="bounded", options={"xatol": 1e-10 * bound})
        h = np.abs(g + res.x * a)
        ref1, ref2 = float(h[:d2].max()), float(h[d2:].max())
        zero = self.omega_zero_level()
        if zero is not None:
            # at least the zero level; where the linear problem is degenerate (d > n: a singular
            # covariance separates the classes with f ~ 0) the zero level is ~0 and the
            # sparsest-point scale keeps the path meaningful
            ref1 = max(zero, ref1)
        top = max(ref1, ref2, np.finfo(float).tiny)
        return (ref1 if ref1 > 0 else top, ref2 if ref2 > 0 else top)


def _prox_l1_affine(v: np.ndarray, a: np.ndarray, tau: np.ndarray, theta0: float = 0.0):
    """argmin_z 1/2 |z - v|^2 + sum tau_i |z_i|  s.t.  <a, z> = 1.

    The solution is ``z(theta) = soft(v - theta a, tau)`` where theta solves the
    monotone (non-increasing) piecewise-linear equation ``<a, z(theta)> = 1``.
    Solved by Newton steps on the current linear piece, safeguarded by the
    bracket and by the conservative slope ``-|a|^2`` (which never overshoots);
    on the piece holding the root, Newton lands on it exactly.  Coordinates with
    ``a_i = 0`` are soft-thresholded alone.  (Compiled: :func:`_prox_nb`.)

    Parameters
    ----------
    v, a, tau : ndarray, shape (n,)
    theta0 : float
        Starting multiplier (the previous step's, in FISTA).

    Returns
    -------
    z : ndarray, shape (n,)
    theta : float
    """
    f = np.ascontiguousarray
    return _prox_nb(f(v, dtype=float), f(a, dtype=float), f(tau, dtype=float), float(theta0))


@dataclass
class RayleighSolution:
    """Result of ``solve_rayleigh``."""

    Omega: np.ndarray
    delta: np.ndarray
    x: np.ndarray
    objective: float
    smooth: float
    multiplier: float
    n_iter: int
    converged: bool
    residual: float


@numba.njit(cache=True, nogil=True)
def _gradient_nb(x, S, mu, w, g, d):  # pragma: no cover - compiled
    """``RayleighProblem.gradient`` compiled (same formulas; S (2, d, d), mu (2, d), w (2,))."""
    d2 = d * d
    Om = np.ascontiguousarray(x[:d2]).reshape(d, d)
    de = x[d2:]
    G = np.zeros((d, d))
    gd = np.zeros(d)
    # Omega is sparse along the lambda path (zero at its start): S Omega S only over the rows/columns
    # where Omega has an entry
    J = np.empty(d, dtype=np.int64)
    m = 0
    for i in range(d):
        for j in range(d):
            if Om[i, j] != 0.0 or Om[j, i] != 0.0:
                J[m] = i
                m += 1
                break
    J = J[:m]
    OmJ = np.empty((m, m))
    for p in range(m):
        for q in range(m):
            OmJ[p, q] = Om[J[p], J[q]]
    for k in range(2):
        Sk = S[k]
        if m == 0:
            SOS = np.zeros((d, d))
        elif 2 * m < d:
            SJ = np.ascontiguousarray(Sk[:, J])
            SOS = (SJ @ OmJ) @ np.ascontiguousarray(SJ.T)
        else:
            SOS = (Sk @ Om) @ Sk
        tr = 0.0
        for i in range(d):
            for j in range(d):
                tr += Sk[i, j] * Om[i, j]
        u = mu[k] @ Om - de
        wr = w[k] * (Sk @ u)
        c1 = 4.0 * (1.0 + g) * w[k]
        c2 = 2.0 * g * w[k] * tr
        for i in range(d):
            gd[i] -= 8.0 * wr[i]
            for j in range(d):
                G[i, j] += c1 * SOS[i, j] + c2 * Sk[i, j] + 4.0 * (wr[i] * mu[k, j] + wr[j] * mu[k, i])
    out = np.empty(d2 + d)
    for i in range(d):
        for j in range(d):
            out[i * d + j] = 0.5 * (G[i, j] + G[j, i])
        out[d2 + i] = gd[i]
    return out


@numba.njit(cache=True, nogil=True)
def _prox_nb(v, a, tau, theta0):  # pragma: no cover - compiled
    """The iteration of :func:`_prox_l1_affine` (its docstring), compiled; returns (z, theta)."""
    n = v.size
    full_slope = 0.0
    amax = 0.0
    vmax = 0.0
    tmax = 0.0
    for i in range(n):
        if a[i] != 0.0:
            full_slope -= a[i] * a[i]
            amax = max(amax, abs(a[i]))
            vmax = max(vmax, abs(v[i]))
            tmax = max(tmax, tau[i])
    scale = 1.0 + amax * (vmax + tmax)
    lo = -np.inf
    hi = np.inf
    theta = theta0
    for _ in range(200):
        val = -1.0
        slope = 0.0
        for i in range(n):
            ai = a[i]
            if ai != 0.0:
                u = v[i] - theta * ai
                au = abs(u) - tau[i]
                if au > 0:
                    val += ai * (au if u >= 0 else -au)
                    slope -= ai * ai
        if abs(val) <= 1e-14 * scale:
            break
        if val > 0:
            lo = theta
        else:
            hi = theta
        new = theta - val / slope if slope < 0 else np.nan
        if not (lo < new < hi):
            safe = theta - val / full_slope
            new = safe if (lo < safe < hi) else 0.5 * (lo + hi)
        if new == theta:
            break
        theta = new
    z = np.empty(n)
    for i in range(n):
        u = v[i] - theta * a[i]
        au = abs(u) - tau[i]
        z[i] = 0.0 if au <= 0 else (au if u >= 0 else -au)
    return z, theta


@numba.njit(cache=True, nogil=True)
def _fista_nb(S, mu, w, g, d, a, lam, step, start, theta, tol, max_iter):  # pragma: no cover - compiled
    """The FISTA loop of ``solve_rayleigh``; returns (x, theta, n_iter, converged, residual)."""
    tau = step * lam
    x, theta = _prox_nb(start, a, tau, theta)
    y = x.copy()
    t = 1.0
    converged = False
    residual = np.inf
    n_iter = 0
    tiny = np.finfo(np.float64).tiny
    while n_iter < max_iter:
        n_iter += 1
        grad = _gradient_nb(y, S, mu, w, g, d)
        x_new, theta = _prox_nb(y - step * grad, a, tau, theta)
        residual = np.linalg.norm(x_new - y) / max(np.linalg.norm(x_new), tiny)
        if residual <= tol:
            x = x_new
            converged = True
            break
        if np.dot(y - x_new, x_new - x) > 0:  # momentum points uphill: restart
            t = 1.0
            y = x_new.copy()
        else:
            t_new = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
            y = x_new + ((t - 1.0) / t_new) * (x_new - x)
            t = t_new
        x = x_new
    return x, theta, n_iter, converged, residual


def solve_rayleigh(problem: RayleighProblem, lambda1: float, lambda2: float, x0: np.ndarray | None = None,
                   tol: float = 1e-7, max_iter: int = 10000, nu0: float = 0.0) -> RayleighSolution:
    """Solve ``min f(x) + lambda1 |Omega|_1 + lambda2 |delta|_1 s.t. M_2 - M_1 = 1``.

    Accelerated proximal gradient (FISTA) with gradient-based adaptive restart;
    the proximal step is ``_prox_l1_affine``, so every iterate satisfies the
    equality constraint up to rounding. ``lambda1``/``lambda2`` are absolute.
    The iteration is compiled (numba: ``_fista_nb``, the gradient and the
    proximal step with the same formulas as ``RayleighProblem.gradient`` and
    ``_prox_l1_affine``).

    Parameters
    ----------
    problem : RayleighProblem
    lambda1, lambda2 : non-negative penalties on Omega and delta.
    x0 : warm start (packed), projected onto the constraint first.
    tol : stop when ``|x_next - y| <= tol |x_next|`` (the scaled gradient mapping).
    max_iter : iteration cap; ``converged`` is False when it is reached.
    nu0 : starting guess of the multiplier (warm start).

    Returns
    -------
    RayleighSolution with ``multiplier`` nu such that
    ``grad f(x) + nu a + lambda * subgradient |x|_1 = 0`` at the optimum.
    """
    if lambda1 < 0 or lambda2 < 0:
        raise ScontrastError(f"lambda1, lambda2: expected non-negative penalties, got {lambda1!r} and {lambda2!r}")
    d = problem.d
    lam = np.concatenate([np.full(d * d, float(lambda1)), np.full(d, float(lambda2))])
    step = 1.0 / (1.01 * problem.lipschitz())
    start = np.zeros(problem.size) if x0 is None else np.ascontiguousarray(x0, dtype=float)
    x, theta, n_iter, converged, residual = _fista_nb(
        np.ascontiguousarray(problem._S), np.ascontiguousarray(problem._mu), problem._w, float(problem.gamma), d,
        problem.a, lam, step, start, float(nu0 * step), float(tol), int(max_iter))
    g = problem.gradient(x)
    smooth = problem.value(x, g)
    Om, de = problem.unpack(x)
    Om = 0.5 * (Om + Om.T)
    return RayleighSolution(
        Omega=Om, delta=de.copy(), x=x, smooth=smooth,
        objective=smooth + lambda1 * float(np.abs(Om).sum()) + lambda2 * float(np.abs(de).sum()),
        multiplier=theta / step, n_iter=int(n_iter), converged=bool(converged), residual=float(residual),
    )


# --------------------------------------------------------------------------- the classifier


def _quad_scores(X: np.ndarray, Omega: np.ndarray, delta: np.ndarray, center: np.ndarray,
                 scale: np.ndarray) -> np.ndarray:
    """Q(z) = z' Omega z - 2 delta' z for every row, z = (x - center) / scale; (n,) array."""
    Z = (X - center) / scale
    return np.einsum("ij,ij->i", Z @ Omega, Z) - 2.0 * (Z @ delta)


def error_threshold(scores: np.ndarray, is_two: np.ndarray, balanced: bool = False,
                    class_weights: tuple[float, float] | None = None) -> float:
    """Threshold t minimising the errors of "class 2 iff score > t".

    Candidates are the midpoints between consecutive distinct scores and +-inf;
    among equally good ones the middle one is taken.

    Parameters
    ----------
    scores : (n,) array, is_two : (n,) bool array (True = class 2).
    balanced : minimise the balanced error (the mean of the two classes' error
        rates: each sample weighs ``1 / n_class``) instead of the error count.
    class_weights : (weight of a class-1 sample, of a class-2 sample) for a
        weighted error count (overrides ``balanced``).
    """
    order = np.argsort(scores, kind="stable")
    s = scores[order]
    two = is_two[order].astype(float)
    one = 1.0 - two
    if class_weights is not None:
        one, two = one * float(class_weights[0]), two * float(class_weights[1])
    elif balanced:
        two = two / max(two.sum(), 1.0)
        one = one / max(one.sum(), 1.0)
    # cutting after position i (0..n): class 2 at or below the cut + class 1 above it
    below_two = np.concatenate([[0.0], np.cumsum(two)])
    above_one = np.concatenate([[0.0], np.cumsum(one[::-1])])[::-1]
    errors = below_two + above_one
    errors = np.where(errors <= errors.min() + 1e-12 * max(errors.max(), 1.0), errors.min(), errors)
    distinct = np.concatenate([[True], s[1:] > s[:-1], [True]])  # cuts between equal scores are not cuts
    errors = np.where(distinct, errors, np.inf)
    best = np.flatnonzero(errors == errors.min())
    i = int(best[len(best) // 2])
    if i == 0:
        return -np.inf
    if i == len(s):
        return np.inf
    return 0.5 * (s[i - 1] + s[i])


def balanced_error(is_two: np.ndarray, predicted_two: np.ndarray) -> float:
    """Mean of the two classes' error rates (1 - balanced accuracy); (n,) bool arrays."""
    is_two = np.asarray(is_two, dtype=bool)
    predicted_two = np.asarray(predicted_two, dtype=bool)
    rates = [float(np.mean(predicted_two[m] != is_two[m])) for m in (~is_two, is_two) if m.any()]
    return float(np.mean(rates))


def marginal_rayleigh(X1, X2, gamma: float | None = None, pi: float | None = None) -> np.ndarray:
    """QUADRO's Rayleigh quotient of each gene alone: the screening statistic.

    For one column the best quadratic ``Q(x) = w x^2 - 2 b x`` has Rayleigh quotient
    ``pi (1-pi) a' H^-1 a`` with ``a = (v2 + m2^2 - v1 - m1^2, -2 (m2 - m1))`` and
    ``H = sum_k pi_k [[(2 + 3 g) v_k^2 + 4 v_k m_k^2, -4 v_k m_k], [-4 v_k m_k, 4 v_k]]``
    (means ``m_k``, variances ``v_k``, kurtosis parameter ``g``), so it grows with
    a mean shift (LDA's ``Delta^2 / v`` when the variances agree) and with a
    variance change alike, discounted for heavy tails through ``g``. It is what
    QUADRO maximises restricted to one gene (the analogue of sure independence
    screening for the lasso); a gene that matters only through its co-expression
    with others is invisible to it, as to every marginal statistic.

    Parameters
    ----------
    X1 : (n1, d) array of class 1, X2 : (n2, d) array of class 2 (sample moments).
    gamma : None = each gene's pooled marginal kurtosis / 3 - 1 (at least -2/3, the
        one-dimensional elliptical bound); else this value for every gene.
    pi : weight of class 1; None = its share of the samples.

    Returns
    -------
    (d,) array >= 0 (0 for a gene constant in both classes).
    """
    X1 = _matrix(X1, "X1", min_rows=2)
    X2 = _matrix(X2, "X2", min_rows=2)
    if X1.shape[1] != X2.shape[1]:
        raise ScontrastError(f"X2: has {X2.shape[1]} columns, X1 has {X1.shape[1]}")
    n1, n2 = X1.shape[0], X2.shape[0]
    pi = n1 / (n1 + n2) if pi is None else float(pi)
    w = np.array([pi, 1.0 - pi])
    # per class: mean, second and fourth central moments in one centred copy (squared in place)
    m, m2, m4 = [], [], []
    for X in (X1, X2):
        mean = X.mean(axis=0)
        C = X - mean
        np.multiply(C, C, out=C)
        m2.append(C.mean(axis=0))
        np.multiply(C, C, out=C)
        m4.append(C.mean(axis=0))
        m.append(mean)
    m = np.stack(m)
    v = np.stack([m2[0] * n1 / (n1 - 1), m2[1] * n2 / (n2 - 1)])
    center = w @ m
    pooled = w @ v
    ok = pooled > 1e-12 * max(float(pooled.max()), np.finfo(float).tiny)
    sc = np.sqrt(np.where(ok, pooled, 1.0))
    m = (m - center) / sc
    v = v / sc**2
    if gamma is None:
        k4 = np.zeros(X1.shape[1])
        for n, c2, c4 in ((n1, m2[0], m4[0]), (n2, m2[1], m4[1])):
            c2 = c2 / sc**2  # the kurtosis c4 / c2^2 is scale free; the test of c2 > 0 is on the scaled value
            c4 = c4 / sc**4
            k4 += n * np.where(c2 > 0, c4 / np.where(c2 > 0, c2, 1.0) ** 2, 3.0)
        g = np.maximum(k4 / (n1 + n2) / 3.0 - 1.0, -2.0 / 3.0)
    else:
        g = np.full(X1.shape[1], float(gamma))
    h11 = np.einsum("k,kj->j", w, (2.0 + 3.0 * g) * v**2 + 4.0 * v * m**2)
    h12 = np.einsum("k,kj->j", w, -4.0 * v * m)
    h22 = np.einsum("k,kj->j", w, 4.0 * v)
    ridge = 1e-9 * (h11 + h22)
    h11, h22 = h11 + ridge, h22 + ridge
    a1 = v[1] + m[1] ** 2 - v[0] - m[0] ** 2
    a2 = -2.0 * (m[1] - m[0])
    det = h11 * h22 - h12**2
    quad = (h22 * a1**2 - 2.0 * h12 * a1 * a2 + h11 * a2**2) / np.where(det > 0, det, 1.0)
    return np.where(ok & (det > 0), pi * (1.0 - pi) * np.maximum(quad, 0.0), 0.0)


def coexpression_change(X1, X2) -> np.ndarray:
    """Standardised change of every pairwise correlation between the classes; (d, d) array.

    ``|r2_ij - r1_ij| / sqrt(v1_ij + v2_ij)`` with Pearson correlations ``r_k`` and
    ``v_k = (mean(z_i^2 z_j^2) - r_k^2) / n_k`` the sampling variance of the mean
    cross-product of the standardised genes ``z`` in class k (about |N(0, 1)| when the
    correlations are equal and the genes uncorrelated; ``(1 + r^2) / n`` for Gaussian
    genes). The variance is estimated from the data, so two genes expressed in the same
    one or two cells (a correlation near 1 by coincidence, which Fisher's z would call a
    perfect co-expression) get a large variance and a small score. 0 on the diagonal and
    for a gene constant in a class.

    Parameters
    ----------
    X1 : (n1, d) array of class 1, X2 : (n2, d) array of class 2 (n1, n2 >= 4).
    """
    r, v = [], []
    for X in (X1, X2):
        n = X.shape[0]
        C = X - X.mean(axis=0)
        sd = np.sqrt((C * C).mean(axis=0))
        ok = sd > 1e-12 * max(float(sd.max()), np.finfo(float).tiny)
        C = C / np.where(ok, sd, 1.0)
        C[:, ~ok] = 0.0
        R = C.T @ C / n
        C *= C
        Q = C.T @ C / n  # mean of z_i^2 z_j^2
        r.append(R)
        v.append(np.maximum(Q - R * R, 0.0) / n)
    den = np.sqrt(v[0] + v[1])
    out = np.where(den > 0, np.abs(r[1] - r[0]) / np.where(den > 0, den, 1.0), 0.0)
    np.fill_diagonal(out, 0.0)
    return out


class RayleighScreen(SelectorMixin, BaseEstimator):
    """Keep the ``k`` features whose distribution or co-expression changes most (a scikit-learn selector).

    Features are ranked by their own change (mean and spread): :func:`marginal_rayleigh`
    scaled as a test statistic (``RQ / (pi (1-pi) (1/n1 + 1/n2))``, Student's t^2 for a
    pure mean shift) and referred to chi^2 with 2 degrees of freedom. Up to
    ``max(2, k // 5, k - m)`` of the ``k`` places (``m`` = the marginally significant
    features, Bonferroni over all at 5 %: when few genes change on their own, co-expression
    gets the room) go first to the genes of the pairs whose correlation changes most
    (:func:`coexpression_change` among the ``n_pair_genes`` marginally strongest features,
    significant after Bonferroni over all their pairs at 5 %), so that genes differing only
    in co-expression (what Omega's off-diagonal captures) are kept too; places no such pair
    takes go back to the marginal ranking.
    Fitted on training samples only (QUADRO fits one per training fold), so the choice
    never sees held-out labels.

    Parameters
    ----------
    k : int >= 1 or None; None = every feature.
    gamma : kurtosis parameter of :func:`marginal_rayleigh` (None = per gene).
    class_weight : ``'balanced'`` (both classes weigh 1/2) or None (their shares).
    n_pair_genes : int >= 0, the features (marginally strongest first) whose pairwise
        correlation changes are scored; 0 = marginal changes only.

    Attributes
    ----------
    scores_ : (d,) ``-log10`` of each feature's marginal p-value (larger = kept first);
    marginal_ : (d,) :func:`marginal_rayleigh`; pairs_ : list of ``(i, j, z)``, the
    co-expression pairs kept; support_ : (d,) bool, the kept ones (ties broken by
    column order).
    """

    def __init__(self, k=50, gamma=None, class_weight="balanced", n_pair_genes=500):
        self.k = k
        self.gamma = gamma
        self.class_weight = class_weight
        self.n_pair_genes = n_pair_genes

    def fit(self, X, y, pi=None):
        """Rank the columns of X (n, d) for the binary labels y (n,); returns self.

        ``pi`` (weight of the first class) overrides ``class_weight``.
        """
        k = check_int(self.k, "k", 1, allow_none=True)
        n_pair = check_int(self.n_pair_genes, "n_pair_genes", 0)
        check_option(self.class_weight, "class_weight", ["balanced", None])
        check_real(self.gamma, "gamma", -2.0 / 3.0, allow_none=True)
        X, y = validate_data(self, X, y, dtype=np.float64)
        classes = np.unique(y)
        if classes.size != 2:
            raise ScontrastError(f"y: expected two classes, got {classes.size}")
        two = y == classes[1]
        n1, n2 = int((~two).sum()), int(two.sum())
        if pi is None:
            pi = 0.5 if self.class_weight == "balanced" else n1 / (n1 + n2)
        self.marginal_ = marginal_rayleigh(X[~two], X[two], gamma=self.gamma, pi=pi)
        stat = self.marginal_ / (pi * (1.0 - pi) * (1.0 / n1 + 1.0 / n2))
        self.scores_ = 0.5 * stat / math.log(10.0)  # -log10 of chi^2_2's survival function exp(-stat / 2)
        d = X.shape[1]
        keep = d if k is None else min(k, d)
        order = np.argsort(-self.scores_, kind="stable")
        self.support_ = np.zeros(d, dtype=bool)
        self.pairs_ = []
        m = min(n_pair, d)
        # a fifth of the places, or every place the marginally significant genes (Bonferroni 5 %) leave free
        n_marginal = int(np.sum(self.scores_ > -math.log10(0.05 / d)))
        slots = max(2, keep // 5, keep - n_marginal) if keep < d else 0
        if slots and m >= 2 and min(n1, n2) >= 4:
            top = order[:m]
            z = coexpression_change(X[np.ix_(~two, top)], X[np.ix_(two, top)])
            iu, ju = np.triu_indices(m, 1)
            zz = z[iu, ju]
            # pairs whose correlation change survives Bonferroni over all m (m - 1) / 2 pairs at 5 %
            # (two-sided normal test: |z| beyond the 1 - 0.025 / n_pairs quantile)
            sig = np.flatnonzero(zz > norm.isf(0.025 / iu.size))
            chosen = []
            for p in sig[np.argsort(-zz[sig], kind="stable")]:
                new = [g for g in (top[iu[p]], top[ju[p]]) if g not in chosen]
                if len(chosen) + len(new) > slots:
                    break
                chosen += new
                self.pairs_.append((int(top[iu[p]]), int(top[ju[p]]), float(zz[p])))
            self.support_[chosen] = True
        rest = [g for g in order if not self.support_[g]][: keep - int(self.support_.sum())]
        self.support_[rest] = True
        return self

    def _get_support_mask(self):
        check_is_fitted(self)
        return self.support_


def _finite_cut(t: float, scores: np.ndarray) -> float:
    """``t``, or for an infinite ``t`` (every score best called one class) a cut outside the scores.

    The cut lies one spread of the scores below (``-inf``) or above (``+inf``) them, so
    that ``Q - threshold`` stays finite and keeps the ranking of the scores.
    """
    if np.isfinite(t):
        return float(t)
    lo, hi = float(np.min(scores)), float(np.max(scores))
    margin = max(hi - lo, abs(lo), abs(hi)) or 1.0
    return lo - margin if t < 0 else hi + margin


@contextlib.contextmanager
def _numba_threads(n: int | None):
    """Run the block with numba's threads (Kendall's tau) capped at ``n`` in this thread; None = as they are."""
    if n is None:
        yield
        return
    old = numba.get_num_threads()
    numba.set_num_threads(max(1, min(int(n), numba.config.NUMBA_NUM_THREADS)))
    try:
        yield
    finally:
        numba.set_num_threads(old)


class QUADRO(ClassifierMixin, BaseEstimator):
    """QUADRO: sparse quadratic classifier by Rayleigh-quotient optimisation.

    Fits ``Q(z) = z' Omega z - 2 delta' z`` (``z = (x - center_) / scale_``; the
    raw ``x`` when ``standardize=False``) by solving

        min  pi L_1 + (1-pi) L_2 + lambda1 |Omega|_1 + lambda2 |delta|_1
        s.t. M_2 - M_1 = 1

    with plug-in (robust or sample) moments; class 2 = ``classes_[1]`` scores
    higher. ``quadratic_score`` is Q itself; ``decision_function`` is
    ``Q - threshold_`` (scikit-learn's convention: positive means
    ``classes_[1]``, which ``predict`` returns there).

    Parameters
    ----------
    lambda1, lambda2 : float >= 0 or None
        Penalties on ``|Omega|_1`` and ``|delta|_1`` as multiples of a reference
        scale (``RayleighProblem.reference_scale``: the largest smooth gradient
        of each block at the sparsest feasible point, the lasso's ``lambda_max``
        analogue), so that one value means the same for any data scale. None =
        chosen by cross-validation over ``lambda_grid``.
    estimator : ``'robust'`` (Catoni means and variances, Kendall's tau
        correlations, nearest PSD) or ``'sample'`` (sample moments).
    gamma : float or None
        Kurtosis parameter (at least ``-2/(d+2)``); None = ``kurtosis_parameter``
        of the training data (0 assumes Gaussian classes).
    cv : int >= 1 or None
        Stratified folds for choosing lambdas and for the out-of-fold scores
        that set the threshold and the probability calibration; each class
        needs ``2 cv`` samples. None or 1 = no cross-validation (both lambdas
        must then be given; threshold and calibration use the training scores).
    random_state : None, int >= 0 or numpy Generator; seeds the folds.
    lambda_grid : sequence of floats >= 0 or None
        Candidate multiples for each lambda left None, walked from the largest
        down (default ``geomspace(3, 1e-3, 6)``, a factor ~5 apart: lambda1's
        reference 1 is where the optimality conditions make ``Omega = 0`` at
        ``lambda2 = 0``, so the path starts beyond it, at a linear rule even for
        ``lambda2 > 0``; 3 also keeps the sparsest answers that d > n needs; when a
        class has fewer samples than features and no shrinkage, a linear rule of zero
        training variance exists, that level is ~0 and the reference is the sparsest-point
        scale, at 3 times which Omega may still hold a few pairs);
        with both None the 36-point product grid is searched. A lambda
        chosen at the least penalised end of its path raises a
        :class:`scontrast.core.ScontrastWarning` (the path may be too short).
    cv_scoring : ``'auc'`` (rank based, threshold free) or ``'error'``
        (held-out error at a threshold chosen on the training fold).
    cv_rule : ``'1se_lambda1'`` — among the points whose mean CV score is within one
        standard error of the best, the largest lambda1 (the sparsest Omega), then at that
        lambda1 the largest lambda2; ``'1se'`` — the most penalised lambdas (largest
        ``lambda1 * lambda2``) within one standard error of the best; ``'best'`` — the best
        mean. Held-out scores of a few dozen samples are noisy, hence one standard error.
        The product of ``'1se'`` trades one penalty against the other and lands in corners
        of the grid (small lambda1 with a huge lambda2: many gene pairs and no linear part)
        that are poor rules when d > n; ordering the penalties (Omega first, the paper's
        interest being whether pairs are needed at all) avoids them.
    patience : int >= 1 or None
        The grid is walked from the largest lambda1 down; the walk stops after
        ``patience`` successive lambda1 values whose best mean CV score lies
        more than one standard error below the best so far (their points are
        NaN in ``cv_results_``). None = the whole grid.
    psd_norm : ``'fro'`` (one eigendecomposition) or ``'max'`` (the paper;
        iterative): how the robust covariance is made positive semi-definite.
    standardize : bool
        Solve in coordinates centred at the prior-weighted class means and
        scaled by the pooled within-class standard deviations (the estimated
        moments are transformed; data are not copied).
    threshold : ``'error'`` (minimise the error of the calibration scores) or
        ``'logistic'`` (where the logistic calibration of Q crosses 1/2). When
        every calibration score is best called one class, the cut is placed
        one spread of the scores beyond them (``threshold_`` is always finite).
    tol, max_iter : solver tolerance (relative step of the proximal gradient
        mapping) of the final fit and iteration cap.
    cv_tol : the (looser) solver tolerance inside cross-validation, where
        only the ranking of held-out scores matters.
    n_jobs : int >= 1 or None
        Threads of the Kendall's tau computation (numba) and of the BLAS during
        ``fit``; None = leave both as they are. :func:`cross_validated_scores` runs
        the final model and the outer folds in ``n_jobs`` threads instead (each fit
        on one thread; the same models).
    n_features : int >= 1 or None
        Keep the ``n_features`` columns of largest :func:`marginal_rayleigh` (each
        gene's own Rayleigh quotient: mean and spread differences), chosen on the
        training samples of every fold and of the final fit, so that held-out
        scores never see the labels that chose the genes. None = every column.
    shrinkage : ``'auto'``, ``'ledoit_wolf'`` or None
        ``'ledoit_wolf'``: shrink each class's covariance towards a multiple of the
        identity by Ledoit and Wolf's amount (:func:`estimate_moments`); ``'auto'``: only
        the classes with at most as many samples as kept features (in every fit: inner
        folds, outer folds, final), whose plug-in covariance is singular, so that a linear
        combination with no variance in the training samples cannot pose as a perfect
        separator; None: plug-in covariances (the paper). On the paper's d > n setting (c)
        (d = 80, 30 cells per class, 20 draws) shrinking brings the sample QUADRO's test
        error from 0.411 to 0.392 with ``cv_rule='1se'`` and to 0.390 with the default
        ``'1se_lambda1'`` (shrunk LDA 0.392, QDA 0.409); with n >> d (settings (a), (b))
        ``'auto'`` changes nothing.
    class_weight : ``'balanced'``, None or a dict ``{label: weight > 0}``
        ``'balanced'``: both classes weigh 1/2 whatever their sizes: ``pi = 1/2``
        in the objective and the centring, the threshold minimises the balanced
        error (mean of the two classes' error rates), ``cv_scoring='error'`` is
        the balanced error and the calibration is class-weighted (probabilities
        for equal priors). None: the classes weigh their shares of the samples
        (the paper's ``pi``; the threshold minimises the raw error, which on
        imbalanced groups may call every sample the larger class). A dict
        weighs each sample of a class by its value (missing labels weigh 1).

    Attributes
    ----------
    classes_ : (2,) labels; features_ : (k,) indices of the kept columns (ascending);
    screen_scores_ : (d,) their :func:`marginal_rayleigh` (None when all are kept)
    Omega_ : (k, k); delta_ : (k,); center_, scale_ : (k,) (of the kept columns)
    n_features_in_ : d (and ``feature_names_in_`` for a DataFrame)
    threshold_ : float (cut on Q); gamma_ : float; pi_ : float (weight of ``classes_[0]``)
    rayleigh_quotient_ : plug-in Rayleigh quotient of the fitted Q (training moments)
    lambda1_, lambda2_ : chosen multiples; penalties_ : (2,) absolute penalties
    lambda_reference_ : (2,) reference scales; multiplier_ : constraint multiplier
    n_iter_, converged_ : solver iterations and convergence of the final fit
    constraint_residual_ : ``M_2 - M_1 - 1`` at the answer
    cv_results_ : dict of arrays ``lambda1``, ``lambda2``, ``mean_score``, ``std_score``
    oof_decision_ : (n,) out-of-fold decision scores ``Q - threshold_`` at the
        chosen lambdas (None without CV)
    calibration_ : (2,) slope ``b`` and intercept ``-b threshold_`` of
        ``P(classes_[1] | x) = sigmoid(b Q + intercept)``
    """

    def __init__(self, lambda1=None, lambda2=None, estimator="robust", gamma=None, cv=5, random_state=None,
                 lambda_grid=None, cv_scoring="auc", cv_rule="1se_lambda1", patience=2, psd_norm="fro",
                 standardize=True, threshold="error", tol=1e-6, cv_tol=1e-4, max_iter=5000, n_jobs=None,
                 n_features=50, class_weight="balanced", shrinkage="auto"):
        self.shrinkage = shrinkage
        self.n_features = n_features
        self.class_weight = class_weight
        self.lambda1 = lambda1
        self.lambda2 = lambda2
        self.estimator = estimator
        self.gamma = gamma
        self.cv = cv
        self.random_state = random_state
        self.lambda_grid = lambda_grid
        self.cv_scoring = cv_scoring
        self.cv_rule = cv_rule
        self.patience = patience
        self.psd_norm = psd_norm
        self.standardize = standardize
        self.threshold = threshold
        self.tol = tol
        self.cv_tol = cv_tol
        self.max_iter = max_iter
        self.n_jobs = n_jobs

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    # ----------------------------------------------------------------- helpers

    def _lambda_path(self) -> list[tuple[float, float]]:
        """Check every hyper-parameter; the (lambda1, lambda2) multiples to walk, in warm-start order."""
        lambda1 = check_real(self.lambda1, "lambda1", 0.0, allow_none=True)
        lambda2 = check_real(self.lambda2, "lambda2", 0.0, allow_none=True)
        check_option(self.estimator, "estimator", ["robust", "sample"])
        check_real(self.gamma, "gamma", allow_none=True)
        check_int(self.cv, "cv", 1, allow_none=True)
        check_option(self.cv_scoring, "cv_scoring", ["auc", "error"])
        check_option(self.cv_rule, "cv_rule", ["1se_lambda1", "1se", "best"])
        check_int(self.patience, "patience", 1, allow_none=True)
        check_option(self.psd_norm, "psd_norm", ["fro", "max"])
        check_option(self.standardize, "standardize", [True, False])
        check_option(self.threshold, "threshold", ["error", "logistic"])
        check_real(self.tol, "tol", 0.0, strict_min=True)
        check_real(self.cv_tol, "cv_tol", 0.0, strict_min=True)
        check_int(self.max_iter, "max_iter", 1)
        check_int(self.n_jobs, "n_jobs", 1, allow_none=True)
        check_int(self.n_features, "n_features", 1, allow_none=True)
        check_option(self.shrinkage, "shrinkage", [None, "ledoit_wolf", "auto"])
        if isinstance(self.class_weight, dict):
            for v in self.class_weight.values():
                check_real(v, "class_weight", 0.0, strict_min=True)
        else:
            check_option(self.class_weight, "class_weight", ["balanced", None])
        if self.lambda_grid is None:
            grid = np.geomspace(3.0, 1e-3, 6)
        else:
            try:
                grid = np.asarray(self.lambda_grid, dtype=float)
            except (TypeError, ValueError):
                grid = np.array([np.nan])
            if grid.ndim != 1 or grid.size == 0 or not np.isfinite(grid).all() or (grid < 0).any():
                raise ScontrastError(
                    f"lambda_grid: expected None or a non-empty list of finite numbers >= 0, got {self.lambda_grid!r}")
        grid = np.sort(np.unique(grid))[::-1]
        g1 = grid if lambda1 is None else np.array([lambda1])
        g2 = grid if lambda2 is None else np.array([lambda2])
        path = []  # snake order: each point's neighbour warm-starts it
        for i, c1 in enumerate(g1):
            for c2 in (g2 if i % 2 == 0 else g2[::-1]):
                path.append((float(c1), float(c2)))
        return path

    def _validated(self, X, y="no_validation", reset: bool = True):
        """scikit-learn's ``validate_data`` (feature count and names), its errors as one-line ScontrastError."""
        try:
            if isinstance(y, str) and y == "no_validation":
                return validate_data(self, X, dtype=np.float64, reset=reset)
            return validate_data(self, X, y, dtype=np.float64, y_numeric=False)
        except ScontrastError:
            raise
        except ValueError as exc:
            text = " ".join(str(exc).split())
            raise ScontrastError(f"{'X' if isinstance(y, str) and y == 'no_validation' else 'X, y'}: {text}") from exc

    def _class_weights(self, is_two) -> tuple[float, float] | None:
        """Weight of a ``classes_[0]`` and of a ``classes_[1]`` sample among these ones; None = unweighted."""
        cw = self.class_weight
        if cw is None:
            return None
        if isinstance(cw, str):  # 'balanced': both classes total n / 2
            n, n2 = is_two.size, int(is_two.sum())
            return n / (2.0 * max(n - n2, 1)), n / (2.0 * max(n2, 1))
        return float(cw.get(self.classes_[0], 1.0)), float(cw.get(self.classes_[1], 1.0))

    def _sample_weight(self, is_two) -> np.ndarray | None:
        w = self._class_weights(is_two)
        return None if w is None else np.where(is_two, w[1], w[0])

    def _pi(self, is_two) -> float | None:
        """Weight of class 1 in the objective: its share of the (weighted) samples."""
        w = self._class_weights(is_two)
        if w is None:
            return None
        n2 = int(is_two.sum())
        return w[0] * (is_two.size - n2) / (w[0] * (is_two.size - n2) + w[1] * n2)

    def _moments(self, X, is_two):
        return estimate_moments(X[~is_two], X[is_two], estimator=self.estimator, gamma=self.gamma,
                                psd_norm=self.psd_norm, standardize=self.standardize, pi=self._pi(is_two),
                                shrinkage=self.shrinkage)

    def _screen(self, X, is_two) -> RayleighScreen | None:
        """The feature screen fitted on these (training) samples; None when every column is kept."""
        if self.n_features is None or self.n_features >= X.shape[1]:
            return None
        gamma = None if self.gamma is None else max(float(self.gamma), -2.0 / 3.0)
        screen = RayleighScreen(k=int(self.n_features), gamma=gamma, class_weight=None)
        return screen.fit(X, is_two, pi=self._pi(is_two))

    def _features(self, X, is_two) -> np.ndarray:
        """Indices (ascending) of the columns kept for these (training) samples."""
        screen = self._screen(X, is_two)
        return np.arange(X.shape[1]) if screen is None else np.flatnonzero(screen.support_)

    def _solve_path(self, moments, path, stop):
        """Solve along ``path[:stop + 1]`` with warm starts; only the last point at full accuracy."""
        problem = RayleighProblem(moments)
        ref = problem.reference_scale()
        x0, nu = None, 0.0
        for i, (c1, c2) in enumerate(path[: stop + 1]):
            sol = solve_rayleigh(problem, c1 * ref[0], c2 * ref[1], x0=x0, nu0=nu,
                                 tol=self.tol if i == stop else max(self.tol, self.cv_tol),
                                 max_iter=int(self.max_iter))
            x0, nu = sol.x, sol.multiplier
        return problem, ref, sol

    def _threshold_of(self, scores, is_two) -> float:
        """The cut on Q of the calibration ``scores`` (n,), finite."""
        if self.threshold == "error":
            t = error_threshold(scores, is_two, class_weights=self._class_weights(is_two))
        else:
            slope, intercept = _logistic_1d(scores, is_two, self._sample_weight(is_two))
            pi = self._pi(is_two)
            prior = is_two.mean() if pi is None else 1.0 - pi
            t = -intercept / slope if slope > 0 else (np.inf if prior < 0.5 else -np.inf)
        return _finite_cut(t, scores)

    def _cross_validate_path(self, X, is_two, path, cv: int, seed: int):
        """Held-out scores along the lambda path.

        Returns
        -------
        scores : (n_points, cv) held-out AUC (or minus the error) of every fold, NaN
            for the points after the walk stopped; oof : (n, n_points) out-of-fold Q.
        """
        scores = np.full((len(path), cv), np.nan)
        folds = []
        for tr, va in StratifiedKFold(n_splits=cv, shuffle=True, random_state=seed).split(X, is_two):
            feat = self._features(X[tr], is_two[tr])  # chosen on the training part of the fold only
            mom = self._moments(X[np.ix_(tr, feat)], is_two[tr])
            problem = RayleighProblem(mom)
            folds.append({"tr": tr, "va": va, "feat": feat, "mom": mom, "problem": problem,
                          "ref": problem.reference_scale(), "x": None, "nu": 0.0})
        oof = np.full((X.shape[0], len(path)), np.nan)
        worse_rows = 0
        for g, (c1, c2) in enumerate(path):
            for f, st in enumerate(folds):
                sol = solve_rayleigh(st["problem"], c1 * st["ref"][0], c2 * st["ref"][1], x0=st["x"],
                                     nu0=st["nu"], tol=max(self.tol, self.cv_tol), max_iter=int(self.max_iter))
                st["x"], st["nu"] = sol.x, sol.multiplier  # warm start of the next grid point
                mom, va, feat = st["mom"], st["va"], st["feat"]
                s_va = _quad_scores(X[np.ix_(va, feat)], sol.Omega, sol.delta, mom.center, mom.scale)
                oof[va, g] = s_va
                if self.cv_scoring == "auc":
                    scores[g, f] = _auc(is_two[va], s_va)
                else:
                    tr = st["tr"]
                    t = self._threshold_of(_quad_scores(X[np.ix_(tr, feat)], sol.Omega, sol.delta, mom.center,
                                                        mom.scale), is_two[tr])
                    wrong = (s_va > t) != is_two[va]
                    scores[g, f] = -float(np.average(wrong, weights=self._sample_weight(is_two[va])))
            if self.patience is None or (g + 1 < len(path) and path[g + 1][0] == c1):
                continue
            # end of a lambda1 row: stop descending once rows keep falling clearly behind
            done = scores[: g + 1]
            mean = done.mean(axis=1)
            top = int(np.argmax(mean))
            cut = mean[top] - done[top].std(ddof=1) / math.sqrt(cv)
            row = [i for i in range(g + 1) if path[i][0] == c1]
            worse_rows = worse_rows + 1 if mean[row].max() < cut else 0
            if worse_rows >= self.patience:
                break
        return scores, oof

    # ----------------------------------------------------------------- API

    def fit(self, X, y):
        """Fit on X (n, d) and binary labels y (n,); returns self."""
        path = self._lambda_path()
        rng = check_random_state(self.random_state)
        X, y = self._validated(X, y)
        try:
            check_classification_targets(y)
        except ValueError as exc:
            raise ScontrastError(f"y: {' '.join(str(exc).split())}") from exc
        classes = np.unique(y)
        if classes.size > 2:
            raise ScontrastError(f"y: Only binary classification is supported. The type of the target is "
                                 f"{type_of_target(y)} ({classes.size} classes)")
        if classes.size < 2:
            raise ScontrastError(f"y: has 1 class ({classes[0]!r}); QUADRO separates two")
        is_two = y == classes[1]
        n_min = int(min(is_two.sum(), (~is_two).sum()))
        cv = None if self.cv is None or self.cv == 1 else int(self.cv)
        if len(path) > 1 and cv is None:
            raise ScontrastError(f"cv: expected at least 2 folds when lambda1 or lambda2 is None (they are chosen "
                                 f"by cross-validation), got {self.cv!r}")
        if n_min < 2:
            raise ScontrastError(f"y: each class needs at least 2 samples, the smaller has {n_min}")
        if cv is not None and n_min < 2 * cv:
            raise ScontrastError(f"cv: {cv} folds need at least {2 * cv} samples per class, the smaller has {n_min}")
        n_jobs = self.n_jobs
        with _numba_threads(n_jobs), blas_threads(n_jobs):
            self._fit(X, is_two, classes, path, cv, rng)
        return self

    def _fit(self, X, is_two, classes, path, cv, rng):
        self.classes_ = classes
        if cv is None:
            scores, oof = np.zeros((len(path), 1)), None
        else:
            scores, oof = self._cross_validate_path(X, is_two, path, cv, spawn_seed(rng))
        explored = np.flatnonzero(~np.isnan(scores[:, 0]))
        best = int(explored[_select([path[i] for i in explored], scores[explored], self.cv_rule)])
        self.cv_results_ = {
            "lambda1": np.array([p[0] for p in path]), "lambda2": np.array([p[1] for p in path]),
            "mean_score": scores.mean(axis=1), "std_score": scores.std(axis=1), "scoring": self.cv_scoring,
        }
        self.lambda1_, self.lambda2_ = path[best]
        self._warn_at_path_end(path)

        screen = self._screen(X, is_two)
        self.features_ = np.arange(X.shape[1]) if screen is None else np.flatnonzero(screen.support_)
        self.screen_scores_ = None if screen is None else screen.scores_
        X = X[:, self.features_]
        mom = self._moments(X, is_two)
        problem, ref, sol = self._solve_path(mom, path, stop=best)
        self.Omega_, self.delta_ = sol.Omega, sol.delta
        self.center_, self.scale_ = mom.center, mom.scale
        self.gamma_, self.pi_ = mom.gamma, mom.pi
        self.lambda_reference_ = np.array(ref)
        self.penalties_ = np.array([self.lambda1_ * ref[0], self.lambda2_ * ref[1]])
        self.multiplier_ = sol.multiplier
        self.n_iter_, self.converged_ = sol.n_iter, sol.converged
        if not sol.converged:
            warnings.warn(f"QUADRO solver did not converge in max_iter={self.max_iter} iterations "
                          f"(relative residual {sol.residual:.2e})", RuntimeWarning, stacklevel=3)
        self.constraint_residual_ = float(problem.a @ sol.x - 1.0)
        self.objective_ = sol.objective
        self.rayleigh_quotient_ = rayleigh_quotient(sol.Omega, sol.delta, mom.mu1, mom.Sigma1, mom.mu2,
                                                    mom.Sigma2, mom.gamma, mom.pi)
        # threshold and calibration from scores of models that did not see the sample (training scores without CV)
        cal = oof[:, best] if oof is not None else _quad_scores(X, sol.Omega, sol.delta, mom.center, mom.scale)
        self.threshold_ = self._threshold_of(cal, is_two)
        slope = _logistic_slope(cal - self.threshold_, is_two, self._sample_weight(is_two))
        self.calibration_ = np.array([slope, -slope * self.threshold_])
        self.oof_decision_ = None if oof is None else cal - self.threshold_

    def quadratic_score(self, X) -> np.ndarray:
        """Q at each row of X (n, d): the quadratic score itself; larger means ``classes_[1]``."""
        check_is_fitted(self)
        X = self._validated(X, reset=False)
        return _quad_scores(X[:, self.features_], self.Omega_, self.delta_, self.center_, self.scale_)

    def _warn_at_path_end(self, path):
        """ScontrastWarning when a cross-validated lambda is the least penalised of its path."""
        for name, j in (("lambda1", 0), ("lambda2", 1)):
            values = sorted({p[j] for p in path})
            if len(values) < 2 or getattr(self, f"{name}_") != values[0]:
                continue
            warnings.warn(f"QUADRO: {name} chosen at the least penalised end of its path ({values[0]:.3g} x the "
                          f"reference); extend lambda_grid below it", ScontrastWarning, stacklevel=4)

    def decision_function(self, X) -> np.ndarray:
        """``Q - threshold_`` at each row of X (n, d): positive means ``classes_[1]``."""
        check_is_fitted(self)
        return self.quadratic_score(X) - self.threshold_

    def predict(self, X) -> np.ndarray:
        """``classes_[1]`` where ``Q > threshold_``, else ``classes_[0]``."""
        check_is_fitted(self)
        above = self.decision_function(X) > 0
        return self.classes_[above.astype(int)]

    def predict_proba(self, X) -> np.ndarray:
        """(n, 2) probabilities ``sigmoid(b (Q - threshold_))`` (``b = calibration_[0] > 0``).

        ``b`` is the logistic fit of the calibration scores (out of fold with CV) with
        the offset fixed at the threshold, so the probability of ``classes_[1]``
        exceeds 1/2 exactly where ``predict`` returns it.
        """
        check_is_fitted(self)
        p = expit(self.calibration_[0] * self.decision_function(X))
        return np.column_stack([1.0 - p, p])

    def interactions(self, feature_names=None, tol: float = 0.0):
        """Non-zero entries of Omega_ (i <= j) and delta_, largest first.

        Returns a list of ``(name_i, name_j, weight)`` for Omega_ (``name_j`` is
        the same as ``name_i`` on the diagonal) and one of ``(name, weight)`` for
        delta_.
        """
        check_is_fitted(self)
        d = self.Omega_.shape[0]
        names = (np.arange(self.n_features_in_).astype(str) if feature_names is None
                 else np.asarray(feature_names).astype(str))[self.features_]
        iu, ju = np.triu_indices(d)
        w = self.Omega_[iu, ju]
        keep = np.abs(w) > tol
        order = np.argsort(-np.abs(w[keep]), kind="stable")
        pairs = [(names[i], names[j], float(v)) for i, j, v in
                 zip(iu[keep][order], ju[keep][order], w[keep][order], strict=True)]
        dk = np.flatnonzero(np.abs(self.delta_) > tol)
        dk = dk[np.argsort(-np.abs(self.delta_[dk]), kind="stable")]
        return pairs, [(names[i], float(self.delta_[i])) for i in dk]


def _auc(is_two: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve of ``scores`` for ``is_two`` (Mann-Whitney, ties count 1/2); (n,) arrays."""
    n2 = int(is_two.sum())
    n1 = is_two.size - n2
    r = rankdata(scores)
    return float((r[is_two].sum() - n2 * (n2 + 1) / 2.0) / (n1 * n2))


def _select(path, scores, rule: str) -> int:
    """Index of the chosen grid point from the (n_points, n_folds) CV scores (larger = better)."""
    mean = scores.mean(axis=1)
    top = int(np.argmax(mean))
    if rule == "best" or scores.shape[1] < 2:
        cut = mean[top] - 1e-12
    else:
        cut = mean[top] - scores[top].std(ddof=1) / math.sqrt(scores.shape[1])
    ok = np.flatnonzero(mean >= cut)
    if rule == "1se_lambda1":
        # the largest lambda1 with a point within one standard error, then its largest lambda2 within it
        c1 = max(path[i][0] for i in ok)
        return int(max((i for i in ok if path[i][0] == c1), key=lambda i: (path[i][1], mean[i])))
    strength = np.array([math.log(max(c1, 1e-300)) + math.log(max(c2, 1e-300)) for c1, c2 in path])
    # most penalised first; ties broken by the larger lambda1, then by the better score
    key = [(-strength[i], -path[i][0], -mean[i]) for i in ok]
    return int(ok[min(range(len(ok)), key=key.__getitem__)])


def _logistic_1d(scores: np.ndarray, is_two: np.ndarray, sample_weight=None) -> tuple[float, float]:
    """Slope and intercept of P(class 2 | Q) = sigmoid(slope Q + intercept).

    Fitted on standardised scores with a weak ridge (C = 100), which keeps the
    fit finite when the scores separate the classes; a non-positive slope means
    the scores carry no usable signal and the prior is returned (slope 0).
    """
    m, s = float(np.mean(scores)), float(np.std(scores))
    s = s if s > 0 else 1.0
    lr = LogisticRegression(C=100.0, max_iter=1000).fit(((scores - m) / s)[:, None], is_two,
                                                         sample_weight=sample_weight)
    b = float(lr.coef_[0, 0]) / s
    c = float(lr.intercept_[0]) - b * m
    if b <= 0:
        p = float(np.clip(np.average(is_two, weights=sample_weight), 1e-12, 1 - 1e-12))
        return 0.0, math.log(p / (1 - p))
    return b, c


def _logistic_slope(margin: np.ndarray, is_two: np.ndarray, sample_weight=None) -> float:
    """Slope b > 0 of P(class 2 | Q) = sigmoid(b margin), ``margin = Q - threshold`` (offset fixed).

    Fitted on RMS-scaled margins with the weak ridge of :func:`_logistic_1d`. Scores
    without usable signal (b <= 0) get the floor ``1e-3 / RMS``: probabilities of
    nearly 1/2 that still cross it where the prediction changes class.
    """
    rms = float(np.sqrt(np.mean(margin**2)))
    rms = rms if rms > 0 else 1.0
    lr = LogisticRegression(C=100.0, fit_intercept=False, max_iter=1000).fit(
        (margin / rms)[:, None], is_two, sample_weight=sample_weight)
    return max(float(lr.coef_[0, 0]), 1e-3) / rms


# --------------------------------------------------------------------------- outer cross-validation


@dataclass
class OutOfFold:
    """What :func:`cross_validated_scores` returns (n samples, k outer folds).

    decision : (n,) decision score ``Q - threshold`` of each sample by a model that
        did not see it (positive = ``final.classes_[1]``).
    predicted : (n,) the label that model predicts.
    fold_lambdas : (k, 2) the ``(lambda1_, lambda2_)`` of each outer model; (0, 2)
        when not nested.
    fold_features : list of k arrays, the columns each outer model kept (empty when not nested).
    final : the estimator fitted on all samples (lambdas, Omega_, delta_, threshold_...).
    """

    decision: np.ndarray
    predicted: np.ndarray
    fold_lambdas: np.ndarray
    final: QUADRO
    fold_features: list


def cross_validated_scores(estimator: QUADRO, X, y, cv: int = 5, *, nested: bool = True,
                           random_state=None) -> OutOfFold:
    """Score every sample by a QUADRO model that was not trained on it.

    ``nested=True``: ``cv`` stratified outer folds (shuffled with a seed drawn from
    ``random_state``); on each, a clone of ``estimator`` fitted on the other folds
    chooses its own lambdas and threshold by its own inner ``estimator.cv`` folds
    and scores the held-out fold, so the error of ``predicted`` is an honest
    estimate (``cv`` + 1 fits; with ``estimator.n_jobs`` > 1 they run in that many
    threads, each on one thread, with the same results). ``nested=False``: the lambdas are chosen once on
    all samples and the scores are the final model's inner out-of-fold scores
    (``oof_decision_``; a little optimistic, one fit; ``cv`` is not used).

    Parameters
    ----------
    estimator : an unfitted :class:`QUADRO` (cloned, never modified).
    X : (n, d) array; y : (n,) binary labels.
    cv : int >= 2, outer folds; each class needs ``2 cv`` samples.
    nested : see above.
    random_state : None, int >= 0 or numpy Generator; seeds the outer folds.

    Returns
    -------
    OutOfFold
    """
    cv = check_int(cv, "cv", 2)
    check_option(nested, "nested", [True, False])
    rng = check_random_state(random_state)
    workers = 1 if estimator.n_jobs is None else min(check_int(estimator.n_jobs, "n_jobs", 1), cv + 1)
    if not nested or workers == 1:
        final = clone(estimator).fit(X, y)
    if not nested:
        if final.oof_decision_ is None:
            raise ScontrastError("nested: False reports the estimator's own out-of-fold scores, but its cv is None")
        decision = final.oof_decision_.copy()
        return OutOfFold(decision, final.classes_[(decision > 0).astype(int)], np.empty((0, 2)), final, [])
    labels = np.asarray(y)
    counts = np.unique(labels, return_counts=True)[1]
    if counts.min() < 2 * cv:
        if workers > 1:
            clone(estimator).fit(X, y)  # the model's own checks of y come first, as when fitted one at a time
        raise ScontrastError(f"cv: {cv} outer folds need at least {2 * cv} samples per class, "
                             f"the smaller has {counts.min()}")
    folds = StratifiedKFold(n_splits=cv, shuffle=True, random_state=spawn_seed(rng))
    splits = list(folds.split(X, labels))
    # each outer model is a clone fitted on its training folds (what cross_validate does); the log
    # shows the progress of this long step fold by fold
    if workers == 1:
        fitted = [(clone(estimator).fit(_safe_indexing(X, train), labels[train]), test)
                  for train, test in progress(splits, desc="quadro: outer folds", logger="scontrast.quadro")]
    else:
        # the final model and the outer folds in n_jobs threads, each fit on one thread (the solver,
        # Kendall's tau and most numpy steps release the GIL): the same models as one at a time
        one = clone(estimator).set_params(n_jobs=1)
        with blas_threads(1), ThreadPoolExecutor(workers) as pool:
            last = pool.submit(clone(one).fit, X, y)
            jobs = [pool.submit(clone(one).fit, _safe_indexing(X, train), labels[train]) for train, _ in splits]
            fitted = [(job.result(), test) for job, (_, test) in
                      progress(list(zip(jobs, splits, strict=True)), desc="quadro: outer folds",
                               logger="scontrast.quadro")]
            final = last.result()
    decision = np.empty(labels.shape[0])
    predicted = np.empty(labels.shape[0], dtype=final.classes_.dtype)
    fold_lambdas = np.empty((cv, 2))
    fold_features = []
    for k, (model, test) in enumerate(fitted):
        decision[test] = model.decision_function(_safe_indexing(X, test))
        predicted[test] = model.classes_[(decision[test] > 0).astype(int)]
        fold_lambdas[k] = model.lambda1_, model.lambda2_
        fold_features.append(model.features_)
        log.info("outer fold %d/%d: lambda1=%.3g lambda2=%.3g", k + 1, cv, model.lambda1_, model.lambda2_)
    return OutOfFold(decision, predicted, fold_lambdas, final, fold_features)
