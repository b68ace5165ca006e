"""Principal differences analysis (PDA) and its sparse variant SPARDA.

Mueller & Jaakkola (NIPS 2015): find the unit direction ``beta`` along which the
projected target cells ``X @ beta`` and background cells ``Y @ beta`` differ most
in squared 2-Wasserstein distance; an L1 penalty (``lam``) or a cardinality bound
(``k``) makes ``beta`` sparse, so that its support names the genes carrying the
difference, whatever its kind (mean, variance, correlation).

The fit follows the paper's "tighten after relax" scheme:

1. optional screening of the genes by their marginal W2 when ``d`` is large
   (the d x d semidefinite relaxation cannot run on thousands of genes);
2. RELAX: projected supergradient ascent on the semidefinite relaxation
   ``max_{B psd, tr B = 1} min_M tr(W_M B) - lam ||B||_1`` on (a subsample of) the
   cells, the supergradient ``W_M`` built from the exact optimal transport plan
   ``M`` for the cost ``z_ij' B z_ij``;
3. tightening: projected gradient ascent on ``D(beta) = W2^2(X beta, Y beta)``
   from the RELAX direction, on all cells, with the sorted (quantile) matching
   giving the gradient ``2 W_M(beta) beta`` in O(n d + n log n).

Significance is a permutation test of a divergence (and of its shape part, combined
by min-p) re-optimised, with label-free tuning, for every labelling (small problems), a
sample-splitting permutation test
(direction learnt on half of the cells, the held-out projections' W2 permuted; large
problems) or a permutation test of the whole refit; ``lam`` is chosen by a rule on the
cross-validated held-out divergence; several directions are found by deflation.
Directions are oriented so that the target cells project higher.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import ot
import scipy.linalg
import scipy.sparse as sp
from joblib import Parallel, delayed
from scipy.optimize import linear_sum_assignment
from sklearn.base import BaseEstimator
from sklearn.model_selection import KFold
from sklearn.utils.validation import check_is_fitted

from .core import (
    ScontrastError,
    ScontrastWarning,
    blas_threads,
    check_int,
    check_matrix,
    check_option,
    check_pair,
    check_random_state,
    check_real,
    dense,
    one_blas_thread,
    progress,
    spawn_seed,
)

__all__ = [
    "wasserstein2_1d",
    "projected_divergence",
    "divergence_gradient",
    "marginal_wasserstein2",
    "relax_supergradient",
    "relax",
    "tighten",
    "orient_to_target",
    "SPARDA",
    "stability_selection",
]

# Column chunk used whenever sparse genes must be densified (memory bound: n x 256).
_CHUNK = 256
# Network-simplex iteration cap: far above what n, m <= a few thousand need, so the
# plan returned is the exact optimum rather than a truncated one.
_EMD_MAX_ITER = 10**8


# --------------------------------------------------------------------------- #
# 1-D Wasserstein distance
# --------------------------------------------------------------------------- #
@functools.lru_cache(maxsize=128)
def _quantile_grid(n: int, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge the breakpoints of two uniform empirical quantile functions.

    The quantile function of ``n`` sorted values is a step function with jumps at
    ``i/n``; that of ``m`` values jumps at ``j/m``.  On the common denominator
    ``n*m`` the jumps are the integers ``i*m`` and ``j*n``, so the merge is exact
    (no floating-point comparison of ``i/n`` against ``j/m``).

    Parameters
    ----------
    n, m : int
        Sample sizes (>= 1).

    Returns
    -------
    ia : ndarray of int, shape (K,)
        Order statistic of the first sample on each piece, ``K <= n + m - 1``.
    ib : ndarray of int, shape (K,)
        Order statistic of the second sample on each piece.
    w : ndarray of float, shape (K,)
        Length of each piece of [0, 1] (sums to 1).
    """
    nm = n * m
    t = np.union1d(np.arange(n, dtype=np.int64) * m, np.arange(m, dtype=np.int64) * n)
    w = np.diff(np.append(t, nm)) / nm
    ia, ib = t // m, t // n
    for arr in (ia, ib, w):
        arr.setflags(write=False)
    return ia, ib, w


def wasserstein2_1d(a, b) -> float | np.ndarray:
    """Exact squared 2-Wasserstein distance between 1-D empirical distributions.

    ``W2^2 = int_0^1 (F^-1(t) - G^-1(t))^2 dt`` with both quantile functions step
    functions; the integral is summed exactly over the merged breakpoints, so
    samples of different sizes need no resampling or interpolation.

    Parameters
    ----------
    a : array_like, shape (n,) or (n, p)
        First sample; with two dimensions, ``p`` samples side by side (columns).
    b : array_like, shape (m,) or (m, p)
        Second sample, same number of dimensions (and columns) as ``a``.

    Returns
    -------
    float or ndarray of shape (p,)
        Squared W2 distance(s), column by column for 2-D input.
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.ndim not in (1, 2) or a.ndim != b.ndim:
        raise ScontrastError(f"a, b: expected two 1-D or two 2-D arrays, got shapes {a.shape} and {b.shape}")
    if a.shape[0] == 0 or b.shape[0] == 0:
        raise ScontrastError("a, b: empty sample")
    if a.ndim == 2 and a.shape[1] != b.shape[1]:
        raise ScontrastError(f"a, b: different numbers of columns ({a.shape[1]} and {b.shape[1]})")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ScontrastError("a, b: contain NaN or infinite values")
    ia, ib, w = _quantile_grid(a.shape[0], b.shape[0])
    diff = np.sort(a, axis=0)[ia] - np.sort(b, axis=0)[ib]
    out = w @ (diff * diff)
    return float(out) if a.ndim == 1 else out


def _sorted_matching(pa: np.ndarray, pb: np.ndarray):
    """The 1-D optimal coupling of two projections as (row, column, mass) triples.

    Parameters
    ----------
    pa : ndarray, shape (n,)
    pb : ndarray, shape (m,)

    Returns
    -------
    i : ndarray of int, shape (K,)
        Index into ``pa`` of each matched pair.
    j : ndarray of int, shape (K,)
        Index into ``pb``.
    w : ndarray, shape (K,)
        Mass of each pair (the nonzero entries of the plan ``M``).
    """
    ia, ib, w = _quantile_grid(pa.shape[0], pb.shape[0])
    # a stable sort makes the (sub)gradient at ties deterministic; the objective
    # itself does not depend on how ties are broken
    return np.argsort(pa, kind="stable")[ia], np.argsort(pb, kind="stable")[ib], w


def projected_divergence(X, Y, beta) -> float | np.ndarray:
    """``D(beta) = W2^2(X beta, Y beta)`` for one or many directions.

    Parameters
    ----------
    X : ndarray or sparse matrix, shape (n, d)
    Y : ndarray or sparse matrix, shape (m, d)
    beta : ndarray, shape (d,) or (d, q)
        Direction(s); not normalised here.

    Returns
    -------
    float or ndarray of shape (q,)
    """
    return wasserstein2_1d(np.asarray(X @ beta), np.asarray(Y @ beta))


def divergence_gradient(X, Y, beta) -> tuple[float, np.ndarray]:
    """``D(beta)`` and its gradient ``2 W_M(beta) beta`` with ``M`` the sorted matching.

    ``D(beta) = sum_k w_k (beta'x_{i_k} - beta'y_{j_k})^2`` over the matched pairs of
    the 1-D optimal plan, which is locally constant in ``beta`` away from ties, so
    the gradient is ``2 sum_k w_k r_k (x_{i_k} - y_{j_k})`` with ``r_k`` the projected
    difference; it is accumulated per cell, never forming the pairs' vectors.

    Parameters
    ----------
    X : ndarray or sparse matrix, shape (n, d)
    Y : ndarray or sparse matrix, shape (m, d)
    beta : ndarray, shape (d,)

    Returns
    -------
    D : float
    grad : ndarray, shape (d,)
    """
    px = np.asarray(X @ beta).ravel()
    py = np.asarray(Y @ beta).ravel()
    i, j, w = _sorted_matching(px, py)
    r = px[i] - py[j]
    wr = w * r
    gx = np.bincount(i, weights=wr, minlength=px.shape[0])
    gy = np.bincount(j, weights=wr, minlength=py.shape[0])
    grad = 2.0 * (np.asarray(X.T @ gx).ravel() - np.asarray(Y.T @ gy).ravel())
    return float(wr @ r), grad


def marginal_wasserstein2(X, Y) -> np.ndarray:
    """Squared W2 distance of every gene's marginal between the two groups.

    Sparse input is densified ``256`` columns at a time, never as a whole.

    Parameters
    ----------
    X : ndarray or sparse matrix, shape (n, d)
    Y : ndarray or sparse matrix, shape (m, d)

    Returns
    -------
    ndarray, shape (d,)
    """
    if sp.issparse(X):
        X = X.tocsc()
    if sp.issparse(Y):
        Y = Y.tocsc()
    d = X.shape[1]
    out = np.empty(d)
    for s in range(0, d, _CHUNK):
        e = min(s + _CHUNK, d)
        out[s:e] = wasserstein2_1d(dense(X[:, s:e]), dense(Y[:, s:e]))
    return out


def _permuted_w2(z: np.ndarray, n: int, n_permutations: int, rng: np.random.Generator,
                 batch: int = 256) -> np.ndarray:
    """``W2^2`` between the first ``n`` and the other values of random permutations of ``z``.

    Parameters
    ----------
    z : ndarray, shape (N,)
        Pooled 1-D sample.
    n : int
        Size of the first group (``1 <= n < N``).
    n_permutations : int
    rng : numpy Generator
    batch : int
        Permutations sorted at once (memory ``batch * N`` floats).

    Returns
    -------
    ndarray, shape (n_permutations,)
    """
    N = z.shape[0]
    ia, ib, w = _quantile_grid(n, N - n)
    out = np.empty(n_permutations)
    for s in range(0, n_permutations, batch):
        e = min(s + batch, n_permutations)
        perm = rng.permuted(np.broadcast_to(np.arange(N), (e - s, N)), axis=1)
        zp = z[perm]
        diff = np.sort(zp[:, :n], axis=1)[:, ia] - np.sort(zp[:, n:], axis=1)[:, ib]
        out[s:e] = (diff * diff) @ w
    return out


# --------------------------------------------------------------------------- #
# RELAX: projected supergradient on the semidefinite relaxation
# --------------------------------------------------------------------------- #
def _simplex_eig(B: np.ndarray, q: int) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalue projection of ``B`` onto the simplex, from its top eigenpairs only.

    The projection keeps ``max(lambda_i - theta, 0)``; eigenpairs below ``theta``
    are irrelevant, so only the top ``q`` are computed (LAPACK MRRR on a subset,
    about half the cost of a full decomposition) and ``q`` is doubled until the
    smallest computed eigenvalue is at or below ``theta`` (then every omitted one
    is too, and the result is exact).

    Parameters
    ----------
    B : ndarray, shape (d, d), symmetric
    q : int
        Number of top eigenpairs to try first.

    Returns
    -------
    w : ndarray, shape (r,)
        Positive projected eigenvalues (sum 1).
    Q : ndarray, shape (d, r)
        Their eigenvectors.
    """
    d = B.shape[0]
    while True:
        # a subset decomposition only pays for a small part of the spectrum
        q = d if 3 * q >= d else q
        if q == d:
            lam, Q = np.linalg.eigh(B)
        else:
            lam, Q = scipy.linalg.eigh(B, subset_by_index=[d - q, d - 1], driver="evr")
        w = ot.utils.proj_simplex(lam)
        keep = w > 0
        theta = lam[keep][0] - w[keep][0]
        if q == d or lam[0] <= theta:
            return w[keep], Q[:, keep]
        q *= 2


def _project_relax(B: np.ndarray, threshold: float, q: int = 8) -> tuple[np.ndarray, int]:
    """Project onto {psd, trace 1} through the eigenvalues, then soft-threshold.

    Parameters
    ----------
    B : ndarray, shape (d, d), symmetric
    threshold : float
        Soft-threshold applied to every entry (``lam`` times the actual step).
    q : int
        Top eigenpairs computed first (see ``_simplex_eig``).

    Returns
    -------
    ndarray, shape (d, d)
        Never all zero: if the threshold removes every entry, the 1-sparse matrix
        on the largest diagonal entry of the projection is returned instead (the
        sparsest feasible point, so the iterate stays meaningful).
    int
        Rank of the projection before thresholding (a good ``q`` for the next call).
    """
    w, Q = _simplex_eig(B, q)
    P = (Q * w) @ Q.T
    if threshold <= 0:
        return P, w.size
    out = np.sign(P) * np.maximum(np.abs(P) - threshold, 0.0)
    if not out.any() or np.trace(out) <= 0:
        out = np.zeros_like(P)
        r = int(np.argmax(np.diag(P)))
        out[r, r] = 1.0
    return out, w.size


def _leading_direction(B: np.ndarray) -> np.ndarray:
    """Unit leading eigenvector of ``B``, exactly zero on the all-zero rows of ``B``."""
    support = np.flatnonzero(np.abs(B).sum(axis=1) > 0)
    beta = np.zeros(B.shape[0])
    if support.size == 0:
        return beta
    sub = B[np.ix_(support, support)]
    _, V = np.linalg.eigh(sub)
    beta[support] = V[:, -1]
    return _orient(beta)


def _orient(beta: np.ndarray) -> np.ndarray:
    """A deterministic sign for an intermediate direction: the largest-magnitude weight is positive.

    ``D(beta) = D(-beta)``; the fitted directions are then oriented on the data by
    :func:`orient_to_target`, this only keeps the intermediate results reproducible.
    """
    r = int(np.argmax(np.abs(beta)))
    return -beta if beta[r] < 0 else beta


def orient_to_target(beta: np.ndarray, mean_difference: np.ndarray) -> np.ndarray:
    """Sign of a direction such that the target cells project higher on average.

    ``D(beta) = D(-beta)``, so the sign is a convention; this one makes a positive
    weight mean "contributes to the target side": ``(mean(X) - mean(Y)) @ beta >= 0``
    with ``X`` the target cells.  When the mean projections are equal (to rounding;
    a pure change of spread or correlation), the largest-magnitude weight is made
    positive instead.

    Parameters
    ----------
    beta : ndarray, shape (d,)
    mean_difference : ndarray, shape (d,)
        Target mean minus background mean of every gene (in the coordinates of ``beta``).

    Returns
    -------
    ndarray, shape (d,)
    """
    shift = float(mean_difference @ beta)
    scale = float(np.abs(mean_difference) @ np.abs(beta))
    if abs(shift) <= 1e-9 * scale or scale == 0.0:
        return _orient(beta)
    return -beta if shift < 0 else beta


# Below this many cells per group the Jonker-Volgenant assignment solver beats the
# warm-started network simplex on RELAX's costs; above it the warm start wins (the
# costs of consecutive steps are close, and near-rank-one B makes them nearly tied,
# which slows the assignment solver).  Measured on Gaussian and count-like data.
_ASSIGNMENT_MAX = 150


def _optimal_plan(C: np.ndarray, potentials=None):
    """Exact optimal transport plan between uniform weights for the cost ``C``.

    Equal sizes up to ``_ASSIGNMENT_MAX``: the optimal plan is a permutation
    (Birkhoff), found by the Jonker-Volgenant assignment solver; otherwise POT's
    network simplex, warm-started from the previous step's duals.

    Parameters
    ----------
    C : ndarray, shape (n, m)
    potentials : tuple of ndarray, optional
        Dual potentials of a previous solve (network simplex only).

    Returns
    -------
    rows, cols : ndarray of int, shape (K,)
        The plan's nonzero entries (``K <= n + m - 1``).
    mass : ndarray, shape (K,)
    cost : float
        ``sum_ij M_ij C_ij``.
    potentials : tuple of ndarray or None
    """
    n, m = C.shape
    if n == m and n <= _ASSIGNMENT_MAX:
        rows, cols = linear_sum_assignment(C)
        return rows, cols, np.full(n, 1.0 / n), float(C[rows, cols].sum() / n), None
    a = np.full(n, 1.0 / n)
    b = np.full(m, 1.0 / m)
    M, log = ot.emd(a, b, C, numItermax=_EMD_MAX_ITER, log=True, potentials_init=potentials)
    rows, cols = np.nonzero(M)
    return rows, cols, M[rows, cols], float(log["cost"]), (log["u"], log["v"])


def relax_supergradient(X: np.ndarray, Y: np.ndarray, B: np.ndarray, S: np.ndarray | None = None,
                        potentials=None):
    """``min_M tr(W_M B)`` and its supergradient ``W_M(B)`` in ``B``.

    ``M(B)`` is the exact optimal plan for the cost ``z_ij' B z_ij``, computed as
    ``x'Bx + y'By - 2x'By`` (valid for the indefinite ``B`` thresholding can leave);
    ``W_M = X'diag(M 1)X + Y'diag(M'1)Y - X'MY - Y'M'X = X'X/n + Y'Y/m - X'MY - Y'M'X``,
    never forming the ``n*m`` pair vectors.

    Parameters
    ----------
    X : ndarray, shape (n, d)
    Y : ndarray, shape (m, d)
    B : ndarray, shape (d, d), symmetric
    S : ndarray, shape (d, d), optional
        ``X'X/n + Y'Y/m`` if already computed.
    potentials : tuple, optional
        Warm start of the network simplex (unequal sizes).

    Returns
    -------
    F : float
        ``min_M tr(W_M B)``.
    G : ndarray, shape (d, d)
        ``W_M(B)``.
    potentials : tuple or None
    """
    if S is None:
        S = X.T @ X / X.shape[0] + Y.T @ Y / Y.shape[0]
    XB = X @ B
    YB = Y @ B
    C = np.einsum("ij,ij->i", XB, X)[:, None] + np.einsum("ij,ij->i", YB, Y)[None, :]
    C -= 2.0 * (XB @ Y.T)
    rows, cols, mass, F, potentials = _optimal_plan(C, potentials)
    XMY = (X[rows] * mass[:, None]).T @ Y[cols]
    return F, S - XMY - XMY.T, potentials


def relax(
    X: np.ndarray,
    Y: np.ndarray,
    lam: float = 0.0,
    *,
    step: float = 0.5,
    max_iter: int = 200,
    patience: int = 15,
    tol: float = 1e-3,
    B0: np.ndarray | None = None,
    t0: int = 1,
) -> dict:
    """RELAX algorithm: projected supergradient ascent on the SPARDA relaxation.

    Maximises ``f(B) = min_M tr(W_M B) - lam ||B||_1`` over psd ``B`` with unit trace,
    where ``M`` runs over transport plans between the cells (row sums ``1/n``, column
    sums ``1/m``) and ``W_M = sum_ij M_ij z_ij z_ij'``, ``z_ij = x_i - y_j``.  The
    supergradient at ``B`` is ``W_M(B)`` for the exact optimal plan of the cost
    ``z_ij' B z_ij`` (network simplex, warm-started from the previous duals), built as
    ``X'X/n + Y'Y/m - X'MY - Y'M'X`` without the ``n*m`` pair vectors.  Steps are
    ``B + tau_t G / ||G||_F`` with ``tau_t = step / sqrt(t)``, then the eigenvalue
    simplex projection and soft-thresholding by ``lam * tau_t / ||G||_F``.
    Iterates are compared by ``f(B) / tr(B)`` (the objective at the feasible
    ``B / tr(B)``, since thresholding lowers the trace) and the best one is kept.

    Parameters
    ----------
    X : ndarray, shape (n, d)
        Target cells (dense; centre them for numerical accuracy of the costs).
    Y : ndarray, shape (m, d)
        Background cells.
    lam : float
        L1 penalty on ``B`` (0 = PDA).
    step : float
        Initial step ``tau_1``.
    max_iter : int
        Maximum number of supergradient steps.
    patience : int
        Stop after this many steps without improving the best objective by more
        than ``tol`` (relative); the best iterate is kept whatever the gain.
    tol : float
        Relative improvement that resets the patience counter.
    B0 : ndarray, shape (d, d), optional
        Starting point (warm start along a lambda path); default the paper's
        ``beta0 beta0'`` with ``beta0 = 1/sqrt(d)``.
    t0 : int
        Index of the first step in the ``step / sqrt(t)`` schedule (a warm start
        begins with a smaller step so as not to leave the neighbourhood it starts in).

    Returns
    -------
    dict
        ``B`` (d, d) best iterate, ``beta`` (d,) its leading eigenvector,
        ``objective`` (best ``f(B)/tr(B)``), ``bound`` (``min_M tr(W_M B)/tr(B)``
        at the best iterate: an upper bound on the PDA objective when ``lam = 0``),
        ``n_iter``, ``eig_fraction`` (top eigenvalue over the sum of the absolute
        eigenvalues of the best ``B``, in (0, 1]: 1 means rank one, the relaxation is
        tight; the same as top eigenvalue over trace when ``B`` is psd),
        ``history`` (objective per step).
    """
    n, d = X.shape
    m = Y.shape[0]
    S = X.T @ X / n + Y.T @ Y / m
    B = np.full((d, d), 1.0 / d) if B0 is None else np.array(B0, dtype=float)
    potentials = None
    rank = 1
    best, best_B, best_bound, t_best = -np.inf, B, np.nan, 0
    history = []
    t = 0
    for t in range(1, max_iter + 1):
        F, G, potentials = relax_supergradient(X, Y, B, S, potentials)
        tr = float(np.trace(B))
        score = (F - lam * np.abs(B).sum()) / tr
        history.append(score)
        if score > best:
            if score > best + tol * abs(best) or not np.isfinite(best):
                t_best = t
            best, best_B, best_bound = score, B, F / tr
        if t - t_best >= patience:
            break
        g = np.linalg.norm(G)
        if g == 0.0:
            break
        tau = step / math.sqrt(t + t0 - 1)
        B, rank = _project_relax(B + (tau / g) * G, lam * tau / g, q=max(8, 2 * rank))
    evals = np.linalg.eigvalsh(best_B)
    return {
        "B": best_B,
        "beta": _leading_direction(best_B),
        "objective": best,
        "bound": best_bound,
        "n_iter": t,
        # the nuclear norm, not the trace: thresholding can leave B indefinite, and the top
        # eigenvalue over the trace then exceeds 1; over sum |eigenvalues| it is in (0, 1]
        # and equals top / trace for a psd B
        "eig_fraction": float(evals[-1] / np.abs(evals).sum()),
        "history": np.asarray(history),
    }


# --------------------------------------------------------------------------- #
# Tightening: projected gradient ascent on D(beta)
# --------------------------------------------------------------------------- #
def _project_sparse_sphere(beta: np.ndarray, k: int) -> np.ndarray:
    """Keep the ``k`` largest-magnitude entries, rescale to unit norm."""
    if k < beta.shape[0]:
        out = np.zeros_like(beta)
        idx = np.argpartition(np.abs(beta), -k)[-k:]
        out[idx] = beta[idx]
        beta = out
    nrm = np.linalg.norm(beta)
    return beta / nrm if nrm > 0 else beta


def tighten(
    X,
    Y,
    beta0: np.ndarray,
    k: int | None = None,
    lam: float = 0.0,
    *,
    step: float = 0.5,
    max_iter: int = 300,
    min_step: float = 1e-3,
    tol: float = 1e-9,
) -> dict:
    """Tightening: projected gradient ascent on ``J(beta) = D(beta) - lam ||beta||_1^2``
    over the unit sphere and ``||beta||_0 <= k``.

    ``lam ||beta||_1^2`` is the relaxation's penalty ``lam ||B||_1`` at ``B = beta beta'``,
    so ``J`` is the objective the relaxation relaxes (``lam = 0``: the paper's
    tightening of ``D`` alone).  Each step moves along the gradient
    ``2 W_M(beta) beta`` (sorted matching) with its radial part removed (``D`` is
    2-homogeneous: only the angular part matters), scaled to length ``step``;
    then the L1 proximal step (soft-threshold by ``2 lam ||beta||_1`` times the step,
    the penalty linearised at ``beta``), truncation to the ``k`` largest entries
    and rescaling to unit norm (the maximiser over the ball lies on the sphere).
    A step that does not increase ``J`` is retried from the current point with half
    the step (backtracking), so the iterates are monotone and the answer never
    ends below ``J(beta0)``.

    Parameters
    ----------
    X : ndarray or sparse matrix, shape (n, d)
    Y : ndarray or sparse matrix, shape (m, d)
    beta0 : ndarray, shape (d,)
        Start (the RELAX direction).
    k : int, optional
        Cardinality bound; default the number of nonzeros of ``beta0``.
    lam : float
        Penalty weight (0: plain divergence).
    step : float
        Initial angular step (radians, roughly).
    max_iter : int
        Maximum number of gradient evaluations.
    min_step : float
        Stop once backtracking shrinks the step below this.
    tol : float
        Stop when an accepted step improves ``J`` by less than ``tol * |J|``.

    Returns
    -------
    dict
        ``beta`` (d,), ``divergence`` ``D(beta)``, ``objective`` ``J(beta)``,
        ``start_divergence`` / ``start_objective`` at the (truncated) start,
        ``n_iter`` (gradient evaluations).
    """
    beta0 = np.asarray(beta0, dtype=float)
    if k is None:
        k = int(np.count_nonzero(beta0))
    k = max(1, min(int(k), beta0.shape[0]))
    beta = _project_sparse_sphere(beta0, k)
    D, g = divergence_gradient(X, Y, beta)
    J = D - lam * np.abs(beta).sum() ** 2
    D0, J0 = D, J
    eta = step
    t = 0
    for t in range(1, max_iter + 1):  # noqa: B007 (t, the iterations done, is returned)
        gt = g - (g @ beta) * beta
        gn = np.linalg.norm(gt)
        if gn == 0.0 or eta < min_step:
            break
        s = eta / gn
        cand = beta + s * gt
        if lam > 0:
            thr = 2.0 * s * lam * np.abs(beta).sum()
            shrunk = np.sign(cand) * np.maximum(np.abs(cand) - thr, 0.0)
            if shrunk.any():
                cand = shrunk
            else:
                # the sparsest point on the sphere rather than no direction at all
                cand = np.where(np.arange(cand.size) == np.argmax(np.abs(cand)), cand, 0.0)
        cand = _project_sparse_sphere(cand, k)
        Dc, gc = divergence_gradient(X, Y, cand)
        Jc = Dc - lam * np.abs(cand).sum() ** 2
        if Jc > J:
            small = Jc - J <= tol * abs(J)
            beta, D, J, g = cand, Dc, Jc, gc
            if small:
                break
            # a successful step earns a slightly longer next one
            eta = min(step, eta * 1.5)
        else:
            eta *= 0.5
    return {
        "beta": _orient(beta),
        "divergence": D,
        "objective": J,
        "start_divergence": D0,
        "start_objective": J0,
        "n_iter": t,
    }


# --------------------------------------------------------------------------- #
# The re-optimised statistic for many labellings at once (test='permute')
# --------------------------------------------------------------------------- #
# Labellings processed together (memory: a few arrays of _PERM_BATCH x cells and
# _PERM_BATCH x genes^2 floats).
_PERM_BATCH = 128


def _top_k_rows(B: np.ndarray, k: int | None) -> np.ndarray:
    """Keep the ``k`` largest-magnitude entries of every row of ``B`` (all when ``k`` is None)."""
    if k is None or k >= B.shape[1]:
        return B
    idx = np.argpartition(np.abs(B), -k, axis=1)[:, -k:]
    out = np.zeros_like(B)
    np.put_along_axis(out, idx, np.take_along_axis(B, idx, axis=1), axis=1)
    return out


def _unit_rows(B: np.ndarray) -> np.ndarray:
    nrm = np.linalg.norm(B, axis=1, keepdims=True)
    return np.divide(B, nrm, out=np.zeros_like(B), where=nrm > 0)


class _Labellings:
    """``D`` and its gradient for many labellings of one pooled sample at once.

    Row ``p`` of ``perms`` lists the pooled cells, the first ``n`` of them the target
    group; ``D_p(beta_p) = W2^2`` between the target and background projections on
    ``beta_p`` and its gradient ``2 W_M beta_p`` (sorted matching), exactly as
    :func:`divergence_gradient` computes it for one labelling.

    With ``centre=True`` each group's projections are centred first: ``D`` is then the
    shape part of the divergence, ``W2^2 = (mean difference)^2 + W2^2(centred)``
    (the two parts of the squared W2 distance between 1-D laws), i.e.
    :func:`divergence_gradient` on the two groups centred separately.  The gradient
    keeps the same formula: the centring terms are multiplied by the sum of the
    matched residuals, which is the difference of the centred means, zero.
    """

    def __init__(self, Z: np.ndarray, n: int, centre: bool = False):
        self.Z, self.n, self.centre = Z, n, centre
        m = Z.shape[0] - n
        ia, ib, w = _quantile_grid(n, m)
        cols = np.arange(w.size)
        self.ia, self.ib, self.w = ia, ib, w
        # scatter of the matched pairs' residuals onto the sorted cells, weighted by their mass
        self.Sx = sp.csr_matrix((w, (ia, cols)), shape=(n, w.size))
        self.Sy = sp.csr_matrix((w, (ib, cols)), shape=(m, w.size))

    def __call__(self, B: np.ndarray, perms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = self.n
        proj = np.take_along_axis(B @ self.Z.T, perms, axis=1)
        px, py = proj[:, :n], proj[:, n:]
        if self.centre:
            px = px - px.mean(axis=1, keepdims=True)
            py = py - py.mean(axis=1, keepdims=True)
        ox = np.argsort(px, axis=1)
        oy = np.argsort(py, axis=1)
        R = np.take_along_axis(px, ox, axis=1)[:, self.ia] - np.take_along_axis(py, oy, axis=1)[:, self.ib]
        D = (R * R) @ self.w
        G = np.empty_like(proj)
        np.put_along_axis(G[:, :n], ox, (self.Sx @ R.T).T, axis=1)
        np.put_along_axis(G[:, n:], oy, -(self.Sy @ R.T).T, axis=1)
        cells = np.empty_like(G)
        np.put_along_axis(cells, perms, G, axis=1)
        return D, 2.0 * (cells @ self.Z)


def _tighten_rows(f: _Labellings, perms: np.ndarray, B0: np.ndarray, lam: float, k: int | None,
                  max_iter: int, step: float = 0.5, min_step: float = 1e-3, tol: float = 1e-6,
                  power: int = 2) -> np.ndarray:
    """:func:`tighten` run on every labelling (row) at once; the final objectives ``J``, shape (P,).

    The same steps as :func:`tighten` (angular gradient step, L1 proximal step, truncation to
    ``k``, rescaling, backtracking), row by row: a row's result does not depend on the others.
    ``power=1`` penalises ``lam ||beta||_1`` instead of its square (a variant the benchmark
    measured and rejected, see ``_PERMUTE_LAM``).
    """
    def objective(b, D):
        return D - lam * np.abs(b).sum(axis=1) ** power

    beta = _unit_rows(_top_k_rows(np.array(B0, dtype=float), k))
    D, g = f(beta, perms)
    J = objective(beta, D)
    eta = np.full(beta.shape[0], step)
    done = np.zeros(beta.shape[0], dtype=bool)
    for _ in range(max_iter):
        gt = g - np.einsum("pd,pd->p", g, beta)[:, None] * beta
        gn = np.linalg.norm(gt, axis=1)
        done |= (gn == 0.0) | (eta < min_step)
        act = np.flatnonzero(~done)
        if act.size == 0:
            break
        s = eta[act] / gn[act]
        b = beta[act]
        cand = b + s[:, None] * gt[act]
        if lam > 0:
            thr = 2.0 * s * lam * np.abs(b).sum(axis=1) if power == 2 else s * lam
            shrunk = np.sign(cand) * np.maximum(np.abs(cand) - thr[:, None], 0.0)
            empty = np.flatnonzero(~shrunk.any(axis=1))
            if empty.size:
                # the sparsest point on the sphere rather than no direction at all
                r = np.argmax(np.abs(cand[empty]), axis=1)
                shrunk[empty, r] = cand[empty, r]
            cand = shrunk
        cand = _unit_rows(_top_k_rows(cand, k))
        Dc, gc = f(cand, perms[act])
        Jc = objective(cand, Dc)
        Ja = J[act]
        acc = Jc > Ja
        done[act[acc & (Jc - Ja <= tol * np.abs(Ja))]] = True
        up = act[acc]
        beta[up], J[up], g[up] = cand[acc], Jc[acc], gc[acc]
        eta[act] = np.where(acc, np.minimum(step, eta[act] * 1.5), eta[act] * 0.5)
    return J


def _label_starts(Z: np.ndarray, n: int, perms: np.ndarray) -> list[np.ndarray]:
    """Every labelling's tightening starts: mean difference and extreme eigenvectors of the
    difference of the group covariances (as in :meth:`SPARDA._direction`), each (P, d)."""
    N, d = Z.shape
    m = N - n
    lab = np.zeros(perms.shape, dtype=bool)
    np.put_along_axis(lab, perms[:, :n], True, axis=1)
    sx = lab @ Z
    mx, my = sx / n, (Z.sum(axis=0) - sx) / m
    starts = [my - mx]
    if d > 1:
        Xg = Z[perms[:, :n]]
        Sxx = np.matmul(Xg.transpose(0, 2, 1), Xg)
        Syy = (Z.T @ Z)[None] - Sxx
        dC = (Syy - m * np.einsum("pi,pj->pij", my, my)) / (m - 1) - \
             (Sxx - n * np.einsum("pi,pj->pij", mx, mx)) / (n - 1)
        _, V = np.linalg.eigh(dC)
        starts += [V[:, :, -1], V[:, :, 0]]
    return starts


def _relabelled_statistics(Z: np.ndarray, n: int, perms: np.ndarray, lams, max_iter: int) -> np.ndarray:
    """The two test statistics of every labelling (row of ``perms``), shape (P, 2).

    Column 0: the largest tightened ``J = D - lam ||beta||_1^2`` over the starts, at
    ``lams[0]``; column 1: the same for the shape part of the divergence (each group's
    projections centred, see :class:`_Labellings`) at ``lams[1]``.  Both start from the
    same directions of the labelling (:func:`_label_starts`).
    """
    starts = _label_starts(Z, n, perms)
    out = np.empty((perms.shape[0], 2))
    for c, (centre, lam) in enumerate(zip((False, True), lams)):
        f = _Labellings(Z, n, centre)
        out[:, c] = np.max([_tighten_rows(f, perms, B0, lam, None, max_iter) for B0 in starts], axis=0)
    return out


def _min_p_level(T: np.ndarray) -> np.ndarray:
    """Min-p combination of the two statistics of every labelling, larger = more extreme; shape (B + 1,).

    The labellings (rows of ``T``, shape (B + 1, 2): the full divergence, then its shape
    part) are ordered by their smaller within-set p-value (:func:`_set_pvalues`); ties
    (e.g. one labelling extreme in one part, another in the other part) are broken first
    in favour of the full divergence (SPARDA's own statistic keeps its resolution: a
    labelling at its top is never outranked), then by the larger p-value.  On the
    integer counts ``c = p * (B + 1)`` the key is ``(2 c_min + [c_full > c_min]) (B + 2)
    + c_max`` and the level ``1 - key / (2 (B + 1) (B + 2))``; one symmetric rule for
    every labelling, so the set stays exchangeable under the null.
    """
    B1 = T.shape[0]
    c = np.rint(_set_pvalues(T) * B1).astype(np.int64)
    cmin, cmax = c.min(axis=1), c.max(axis=1)
    key = (2 * cmin + (c[:, 0] > cmin)) * (B1 + 1) + cmax
    return 1.0 - key / (2.0 * B1 * (B1 + 1))


def _set_pvalues(T: np.ndarray) -> np.ndarray:
    """Permutation p-value of every member of a set of statistics within the set.

    ``p_b = #{c : T_c >= T_b} / len(T)`` for every column of ``T`` (shape (B + 1, q)):
    the p-value each labelling would get if it were the observed one.  Applying one
    symmetric rule to every member keeps the set exchangeable under the null, so a
    combination of these (min-p) is again an exact permutation statistic.
    """
    srt = np.sort(T, axis=0)
    return np.column_stack([T.shape[0] - np.searchsorted(srt[:, j], T[:, j], side="left")
                            for j in range(T.shape[1])]) / T.shape[0]


# --------------------------------------------------------------------------- #
# The estimator
# --------------------------------------------------------------------------- #
# test='auto' runs 'permute' when (n + m) * min(d, max_genes), the cost of one
# tightening step of one labelling, is at most this (999 labellings of both statistics
# then take about 3 CPU s), 'split' otherwise.  See the SPARDA docstring.
_PERMUTE_MAX_SIZE = 20_000
# Permutations when n_permutations=None, by test.
_DEFAULT_PERMUTATIONS = {"split": 9999, "permute": 999, "refit": 99}
# The 'permute' statistic: lam = _PERMUTE_LAM * lam0 (lam0: the best single gene's
# noise level, the mean of _LAM0_RELABELLINGS random relabellings), tightening capped
# at _PERMUTE_TIGHTEN_ITER steps.  Measured at d = 30, n = m = 100, 100 replicates, 199
# permutations: rejections of sd x1.6 in 3 genes / equicorrelation 0.7 in 3 genes / no
# change = 98 / 38 / 3 at 0.5 lam0, 97 / 33 / 4 at 0.25 lam0 (and 39 / 16 / 1 of 40 at
# 0.125 lam0; lam = 0: 33 / 9 / 1 of 40); a hard cardinality k = 3 instead reached
# 96 / 43 / 4 but is the planted size, and min-p combinations of several lambdas or k
# gained nothing.  The tightening reaches, from these starts, the optimum it reaches from
# the true direction in all but a few replicates: the power is limited by the null spread
# of the maximised divergence, not by the search.  Cap 50 vs 300 steps: same rejections.
# That spread is mostly the mean difference of 30 noise genes (each (2/n) chi2_1, against
# (1/n) chi2_1 for the spread), so the statistic now adds the shape part of the divergence
# (each group's projections centred; its own lam0 from the centred marginal W2), min-p
# combined.  Screen (bench_sparda_real.py --variants: genes scaled, 199 permutations,
# 100 / 100 / 200 replicates; rejections of variance / correlation / null): full divergence
# 73 / 36 / 7, shape part alone at 0.5 lam0 94 / 84 / 10 (at 0.25 lam0 93 / 83 / 11), L1
# penalty lam ||beta||_1 instead of its square: full at lam0 29 / 24 / 7, shape at lam0
# 77 / 74 / 15, at 0.5 lam0 70 / 67 / 13; min-p of the full divergence and the shape part
# (adopted) 94 / 78 / 8.  The shape part alone would lose location changes.
_PERMUTE_LAM = 0.5
_LAM0_RELABELLINGS = 20
_PERMUTE_TIGHTEN_ITER = 50
# --------------------------------------------------------------------------- #
def _column_moments(X, Y) -> tuple[np.ndarray, np.ndarray]:
    """Pooled mean and standard deviation of every gene (sparse-safe), shape (d,) each."""
    N = X.shape[0] + Y.shape[0]
    s1 = np.asarray(X.sum(axis=0)).ravel() + np.asarray(Y.sum(axis=0)).ravel()
    sq = (X.multiply(X) if sp.issparse(X) else X * X).sum(axis=0)
    sq2 = (Y.multiply(Y) if sp.issparse(Y) else Y * Y).sum(axis=0)
    s2 = np.asarray(sq).ravel() + np.asarray(sq2).ravel()
    mean = s1 / N
    var = np.maximum(s2 / N - mean * mean, 0.0)
    return mean, np.sqrt(var)


def _scale_columns(A, s: np.ndarray):
    """``A * s`` column-wise, keeping sparse input sparse (CSR)."""
    return sp.csr_matrix(A.multiply(s[None, :])) if sp.issparse(A) else A * s


class SPARDA(BaseEstimator):
    """Sparse principal differences analysis (PDA when ``lam=0``).

    Parameters
    ----------
    lam : float, optional
        L1 penalty: ``lam ||B||_1`` in the relaxation and ``lam ||beta||_1^2`` (the same
        at ``B = beta beta'``) in the tightening, so the answer maximises
        ``D(beta) - lam ||beta||_1^2``; roughly, a gene joins when it adds more than
        ``lam`` to the divergence.  ``None`` with ``k=None``: chosen by the
        cross-validation rule ``cv_rule`` over ``n_lambdas`` values from the best
        gene's marginal W2 or ``D / ||beta||_1^2`` of the unpenalised direction,
        whichever is larger (the sparse end: one or a few genes) down to
        ``lam_min_ratio`` times it.  ``0``: PDA.
    k : int, optional
        Cardinality bound enforced in the tightening (truncation to the ``k``
        largest weights).  With ``lam=None`` the relaxation is run with ``lam=0``.
    n_directions : int
        Maximum number of directions, found in succession by deflating the data along
        the previous ones.  With ``lam > 0`` the search stops at the first later
        direction whose penalised objective ``D - lam ||beta||_1^2`` is not positive:
        the maximiser over the unit ball is then ``beta = 0`` (no direction gains more
        divergence than its genes cost), and the remaining rows of ``components_``
        are zero.  The first direction is always returned.
    n_permutations : int, optional
        Permutations of the group labels for the p-value of ``target = background``
        (0: no test; ``None``: 999 for ``'permute'``, 9999 for ``'split'``, 99 for
        ``'refit'``).  ``p = (1 + b) / (1 + n_permutations)`` with ``b`` the permuted
        statistics at least as large as the observed one; when ``b = 0`` the p-value
        is its floor, an upper bound (a ``ScontrastWarning`` says so; ``test_``
        records ``b``).
    test : {'auto', 'permute', 'split', 'refit'}, default 'auto'
        ``'permute'``: permutation test on all cells of a statistic re-optimised for
        every labelling, with label-free tuning: the largest penalised divergence
        ``D(beta) - lam ||beta||_1^2`` that the tightening (50 steps at most) reaches from
        the group mean difference and the extreme eigenvectors of the group covariance
        difference, at ``lam`` = 0.5 x the noise level of the best single gene (the mean,
        over 20 random relabellings of the pooled cells, of the largest marginal ``W2^2``),
        on all genes (or the ``max_genes`` of largest pooled variance); and the same for
        the shape part of ``D`` (``W2^2`` with each group's projections centred, i.e.
        ``D`` minus the squared mean difference, with its own noise level).  The two are
        combined by min-p within the set of labellings (ties go to the full divergence);
        ``test_`` records both parts' own p-values.  The shape part is there because the
        mean differences of many unchanged genes are most of the full divergence's null
        spread, which hides changes of spread and correlation.  Nothing is chosen on the
        observed labels, so the test is exact; the labellings are optimised together
        (vectorised), about 1.6 ms each at 200 cells x 30 genes (3 ms at 100 genes).
        ``'split'``: sample splitting; the whole procedure (screening, lambda rule,
        RELAX, tightening) runs on a random half of each group, the other cells are
        projected on its first direction and their ``W2^2`` is compared with label
        permutations of those cells only (exact, and each permutation is a sort, so
        thousands are cheap, whatever the number of cells and genes; but only half of
        the cells learn and half test, which costs power on small groups).
        ``'refit'``: the statistic is the fitted divergence itself, the whole fit at
        the chosen ``lam``/``k`` repeated on every permutation (each permutation costs
        a fit; exact only for a fixed ``lam`` or ``k``: with the CV rule, the observed
        data's lambda is reused in the permutations).
        ``'auto'``: ``'permute'`` when ``(n + m) * min(d, max_genes) <= 20000`` (e.g.
        200 cells x 100 genes: about 3 CPU s for 999 labellings; small groups, where
        splitting wastes half of the few cells), else ``'split'`` (large groups: each
        permutation is then a sort, and half of the cells is plenty).  The reported
        direction is always the fit on all cells; the test only supplies the p-value.
        Measured at d = 30, n = m = 100, 100 replicates (benchmarks/bench_sparda_real.py
        --power, results/bench_sparda_power.txt): 'permute' rejects sd x1.6 in 3 genes in
        100%, equicorrelation 0.7 in 3 genes (marginals unchanged) in 72% (35% without the
        shape part), no change in 14 of 300, at about 2 CPU s per default fit and test;
        'split' 70%, 17% and 7% (30 replicates); pertpy's E-distance test 16%, 3% and 4%.
        On real contrasts of 50-100
        cells per group (1,000-2,000 genes) 'permute' resolves what 'split' misses
        (tumour vs normal T cells: p <= 0.001 against 0.21).
    cv_folds : int
        Folds (within each group) for choosing ``lam``: the divergence of the held-out
        cells along the direction fitted on the rest, averaged over folds.
    n_lambdas : int, default 12
        Length of the automatic lambda path (a step of 0.7 between lambdas with the
        default ``lam_min_ratio``: the 'fraction' rule needs a fine path).
    lam_min_ratio : float, default 0.02
        Smallest lambda of the path relative to the largest.
    cv_rule : {'fraction', '1se', 'max'}, default 'fraction'
        ``'fraction'``: the largest lambda (fewest genes) whose mean held-out divergence
        reaches ``cv_fraction`` of that of the unpenalised fit on all screened genes
        (also cross-validated), the analogue of an explained-variance threshold: on
        real contrasts the held-out divergence keeps growing as genes are added (many
        genes differ a little), so ``'max'`` and ``'1se'`` choose (nearly) every gene.
        ``'max'``: the lambda of the largest mean held-out divergence (the paper);
        ``'1se'``: the largest lambda whose mean is within one standard error of
        that maximum.  A choice at either end of the path raises a ``ScontrastWarning``.
    cv_fraction : float, default 0.6
        Share of the unpenalised held-out divergence the ``'fraction'`` rule requires
        (0.6: 15-45 genes on distinct and close cell types of real data, all of them
        among the 100 top Wilcoxon genes; benchmarks/bench_sparda_real.py).
    max_genes : int, default 100
        Genes kept by marginal-W2 screening before RELAX when there are more
        (the relaxation needs a d x d eigendecomposition per step).
    relax_max_cells : int, default 100
        Cells per group used by RELAX: both groups are subsampled at random to
        ``min(n, m, relax_max_cells)`` cells (each step solves an exact transport
        problem between them, O(cells^3); the relaxation only provides starts of the
        tightening, and 100 cells give the genes of 200 on real contrasts).  The tightening, the reported divergence
        and the permutation statistic always use every cell.
    relax_max_iter, relax_patience, relax_step : int, int, float, default 20, 15, 0.5
        RELAX iteration cap, patience and initial step (the multi-start tightening
        that follows makes the answer insensitive to the cap above about 20).
    tighten_max_iter : int
        Cap on tightening gradient evaluations.
    standardize : bool
        Scale every gene to unit pooled standard deviation first (searches for
        differences in shape and dependence rather than in scale); weights then
        refer to standardised genes.
    n_jobs : int
        Parallel workers (joblib) for permutations and cross-validation.
    random_state : None, int or numpy Generator
        Seeds subsampling, folds and permutations.

    Notes
    -----
    Each direction is tightened from several starts and the best objective wins:
    the paper's RELAX direction (with its support size as cardinality bound), the
    unpenalised relaxation's direction, the difference of the group means and the
    extreme eigenvectors of the difference of the group covariances.  The relaxation
    is loose when the difference is a covariance change (its optimum is then nearly
    diagonal), and the extra starts keep the answer from collapsing onto noise genes.
    Genes are screened by marginal W2 when there are more than ``max_genes``:
    differences carried only by genes whose own distribution does not change
    (correlation changes) are then invisible unless those genes pass the screen.

    Attributes
    ----------
    beta_ : ndarray, shape (d,) or (n_directions, d)
        Unit direction(s); zero outside the selected genes.  Oriented so that the
        target cells (``X``) project higher on average: a positive weight contributes
        to the target side (see :func:`orient_to_target`).
    components_ : ndarray, shape (n_directions, d)
        Same as ``beta_``, always two-dimensional; rows after ``n_directions_`` are zero.
    n_directions_ : int
        Directions found (at most ``n_directions``; fewer when the deflation stopped
        because no further direction had a positive penalised objective).
    divergence_ : float
        ``W2^2`` between the projected groups along the first direction (all cells).
    divergences_ : ndarray, shape (n_directions,)
        Divergence along each direction (0 for the directions not found).
    selected_ : ndarray of int
        Genes with a nonzero weight in any direction.
    pvalue_ : float or None
        Permutation p-value ``(1 + #{T_perm >= T_obs}) / (1 + P)``.
    test_ : dict or None
        The test's resolution: ``method``, ``statistic``, ``n_permutations``,
        ``n_at_least`` (permuted statistics >= the observed), ``bound`` (True when none
        was: p is its floor, an upper bound), ``pvalue``, ``requested`` (the ``test``
        parameter, e.g. ``'auto'``); for ``'split'`` also the cells of the learning and
        test halves, and the learning half's lambda and number of genes; for
        ``'permute'`` the number of test genes, ``lam0``, the test's lambda, the same two
        for the shape part (``shape_lam0``, ``shape_test_lam``), the observed value and own
        permutation p-value of each part (``divergence_statistic``, ``shape_statistic``,
        ``divergence_pvalue``, ``shape_pvalue``; ``statistic`` is then the observed
        labelling's min-p level) and the tightening cap.
    null_divergences_ : ndarray, shape (n_permutations,) or None
        The permuted statistics (for ``'permute'``: their min-p levels, see ``test_``).
    lam_ : float
        Penalty used (chosen by CV when ``lam=None`` and ``k=None``).
    k_ : int
        Number of nonzero weights of the first direction.
    cv_results_ : dict or None
        ``lam`` (path), ``score`` (mean held-out divergence), ``score_se``,
        ``n_selected`` (mean nonzeros over folds), ``best_index`` (the rule's choice),
        ``reference_score`` / ``reference_n_selected`` (the unpenalised fit's).
    screened_ : ndarray of int
        Genes that entered RELAX (all genes when ``d <= max_genes``).
    marginal_w2_ : ndarray, shape (d,)
        Marginal squared W2 of every gene (the screening score).
    relax_info_, tighten_info_ : list of dict
        Per direction searched (``n_directions_`` of them, plus the rejected one
        that stopped the deflation, if any): iterations, objectives, relaxation tightness
        (``eig_fraction``: top eigenvalue over the sum of absolute eigenvalues of the
        relaxed ``B``, in (0, 1]; 1 = rank one, tight), the winning
        tightening start.
    pda_divergence_ : float or None
        Divergence of the unpenalised fit that scales the lambda path (CV only).
    n_relax_cells_ : int
        Cells per group used by RELAX.
    """

    def __init__(
        self,
        lam=None,
        k=None,
        n_directions=1,
        n_permutations=None,
        test="auto",
        cv_folds=3,
        n_lambdas=12,
        lam_min_ratio=0.02,
        cv_rule="fraction",
        cv_fraction=0.6,
        max_genes=100,
        relax_max_cells=100,
        relax_max_iter=20,
        relax_patience=15,
        relax_step=0.5,
        tighten_max_iter=300,
        standardize=False,
        n_jobs=1,
        random_state=None,
    ):
        self.lam = lam
        self.k = k
        self.n_directions = n_directions
        self.n_permutations = n_permutations
        self.test = test
        self.cv_folds = cv_folds
        self.n_lambdas = n_lambdas
        self.lam_min_ratio = lam_min_ratio
        self.cv_rule = cv_rule
        self.cv_fraction = cv_fraction
        self.max_genes = max_genes
        self.relax_max_cells = relax_max_cells
        self.relax_max_iter = relax_max_iter
        self.relax_patience = relax_patience
        self.relax_step = relax_step
        self.tighten_max_iter = tighten_max_iter
        self.standardize = standardize
        self.n_jobs = n_jobs
        self.random_state = random_state

    # ------------------------------------------------------------------ checks
    def _check_params(self):
        """Refuse a bad hyper-parameter with one line ``"<name>: <problem>"`` (``ScontrastError``)."""
        check_real(self.lam, "lam", 0, allow_none=True)
        check_int(self.k, "k", 1, allow_none=True)
        check_int(self.n_directions, "n_directions", 1)
        check_int(self.n_permutations, "n_permutations", 0, allow_none=True)
        check_option(self.test, "test", ("auto", "permute", "split", "refit"))
        check_int(self.cv_folds, "cv_folds", 2)
        check_int(self.n_lambdas, "n_lambdas", 1)
        check_real(self.lam_min_ratio, "lam_min_ratio", 0, 1, strict_min=True)
        check_option(self.cv_rule, "cv_rule", ("fraction", "1se", "max"))
        check_real(self.cv_fraction, "cv_fraction", 0, 1, strict_min=True)
        check_int(self.max_genes, "max_genes", 1)
        check_int(self.relax_max_cells, "relax_max_cells", 2)
        check_int(self.relax_max_iter, "relax_max_iter", 1)
        check_int(self.relax_patience, "relax_patience", 1)
        check_real(self.relax_step, "relax_step", 0, strict_min=True)
        check_int(self.tighten_max_iter, "tighten_max_iter", 0)
        if not isinstance(self.standardize, (bool, np.bool_)):
            raise ScontrastError(f"standardize: expected True or False, got {self.standardize!r}")
        if check_int(self.n_jobs, "n_jobs") == 0:
            raise ScontrastError("n_jobs: expected a nonzero integer (-1 = all cores), got 0")

    # ------------------------------------------------------------- core pieces
    def _scale_screen_centre(self, X, Y):
        """Scale (``standardize``), screen by marginal W2 (``max_genes``), densify and centre.

        Parameters
        ----------
        X : ndarray or CSR matrix, shape (n, d)
        Y : ndarray or CSR matrix, shape (m, d)

        Returns
        -------
        Xd : ndarray, shape (n, s)
        Yd : ndarray, shape (m, s)
            The screened genes' columns, dense, centred on the pooled mean (W2 between
            projections is translation invariant; centring keeps the RELAX costs
            x'Bx + y'By - 2x'By free of cancellation).
        screened : ndarray of int, shape (s,)
            Sorted indices of the genes kept, ``s = min(d, max_genes)``.
        marginal_w2 : ndarray, shape (d,)
            Marginal squared W2 of every gene (after scaling), the screening score.
        """
        if self.standardize:
            X = _scale_columns(X, 1.0 / self.scale_)
            Y = _scale_columns(Y, 1.0 / self.scale_)
        w2 = marginal_wasserstein2(X, Y)
        d = X.shape[1]
        if d > self.max_genes:
            # stable ordering so ties resolve identically for dense and sparse input
            screened = np.sort(np.argsort(-w2, kind="stable")[: self.max_genes])
        else:
            screened = np.arange(d)
        Xd = dense(X[:, screened])
        Yd = dense(Y[:, screened])
        mu = (Xd.sum(axis=0) + Yd.sum(axis=0)) / (Xd.shape[0] + Yd.shape[0])
        return Xd - mu, Yd - mu, screened, w2

    def _relax(self, Xd, Yd, lam, rng) -> dict:
        """RELAX on equal-size random subsamples of the two groups."""
        n, m = Xd.shape[0], Yd.shape[0]
        # equal group sizes make the optimal plan a permutation: small RELAX steps are
        # assignment problems, and the cost of a step does not grow with the larger group
        ns = min(n, m, self.relax_max_cells)
        ix = np.sort(rng.choice(n, ns, replace=False)) if n > ns else slice(None)
        iy = np.sort(rng.choice(m, ns, replace=False)) if m > ns else slice(None)
        rel = relax(Xd[ix], Yd[iy], lam, step=self.relax_step, max_iter=self.relax_max_iter,
                    patience=self.relax_patience)
        rel["divergence"] = wasserstein2_1d(Xd @ rel["beta"], Yd @ rel["beta"])
        return rel

    def _direction(self, Xd, Yd, lam, k, rng, rel0=None):
        """One direction: RELAX, then tightening on all cells from several starts.

        Every start is tightened and the largest ``J = D - lam ||beta||_1^2`` wins
        (all starts optimise the same objective, so the permutation test, which
        repeats this procedure, stays exact):

        - 'relax': the paper's, the leading eigenvector of the penalised relaxation
          with its number of nonzeros as the cardinality bound;
        - 'pda_relax' (``lam > 0``): the leading eigenvector of the unpenalised (PDA)
          relaxation ``rel0``, the L1 penalty alone deciding the support.  It guards
          against the penalised relaxation collapsing onto one gene when the
          relaxation is loose (covariance changes: the relaxed optimum is then
          near-diagonal and thresholding erases the off-diagonal links);
        - 'mean_diff', 'cov_up', 'cov_down': the difference of the group means and the
          extreme eigenvectors of the difference of the group covariances, the
          directions of largest divergence when the groups are Gaussian and differ
          in one moment only; the relaxation's eigenvector misses them when it is
          loose (few cells, pure covariance changes).

        Returns
        -------
        beta : ndarray, shape (d,)
        rel : dict
            The penalised relaxation's result (``divergence`` = D of its direction).
        tig : dict
            The winning tightening, with ``start`` naming its start.
        rel0 : dict
            The unpenalised relaxation (reusable on the same data).
        """
        d = Xd.shape[1]
        if rel0 is None:
            rel0 = self._relax(Xd, Yd, 0.0, rng)
        rel = rel0 if lam == 0 else self._relax(Xd, Yd, lam, rng)
        starts = [("relax", rel["beta"], int(np.count_nonzero(rel["beta"])) if k is None else k)]
        free = d if k is None else k
        if lam > 0:
            starts.append(("pda_relax", rel0["beta"], free))
        mx, my = Xd.mean(axis=0), Yd.mean(axis=0)
        starts.append(("mean_diff", my - mx, free))
        if d > 1:
            dC = np.cov(Yd, rowvar=False) - np.cov(Xd, rowvar=False)
            _, V = np.linalg.eigh(np.atleast_2d(dC))
            starts += [("cov_up", V[:, -1], free), ("cov_down", V[:, 0], free)]
        tig = None
        for name, beta0, kk in starts:
            if not np.any(beta0):
                continue
            cand = tighten(Xd, Yd, beta0, kk, lam, max_iter=self.tighten_max_iter)
            cand["start"] = name
            if tig is None or cand["objective"] > tig["objective"]:
                tig = cand
        return tig["beta"], rel, tig, rel0

    def _fit_first(self, X, Y, lam, k, rng) -> float:
        """Statistic of the permutation test: the first direction's divergence."""
        Xd, Yd, _, _ = self._scale_screen_centre(X, Y)
        return self._direction(Xd, Yd, lam, k, rng)[2]["divergence"]

    def _lambda_path(self, top: float) -> np.ndarray:
        if top <= 0:
            return np.zeros(1)
        return top * np.geomspace(1.0, self.lam_min_ratio, self.n_lambdas)

    def _choose_lambda(self, X, Y, Xd, Yd, w2, screened, rng):
        """The penalty of a fit: ``lam``, 0 with ``k``, else the CV rule on the path.

        Returns
        -------
        lam : float
        rel0 : dict or None
            The unpenalised relaxation on ``Xd, Yd`` (reusable), when computed.
        cv : dict or None
            ``cv_results_`` (path, scores, rule's choice), when cross-validated.
        pda_divergence : float or None
        """
        if self.lam is not None:
            return float(self.lam), None, None, None
        if self.k is not None:
            return 0.0, None, None, None
        # The path's top is the larger of the best single gene's marginal W2 (where that gene's
        # J = D - lam ||beta||_1^2 is 0) and D / ||beta||_1^2 of the unpenalised direction (where
        # its J is 0): above both, neither the best gene alone nor the dense direction pays, so
        # the top is the sparse end (one or a few genes).  (The unpenalised divergence itself,
        # a bound above which no direction pays, lies far above on real data, where it wastes
        # most of the path on one-gene fits.)  It runs down to lam_min_ratio times the top.
        _, _, tig0, rel0 = self._direction(Xd, Yd, 0.0, None, rng)
        pda = tig0["divergence"]
        top = max(float(w2[screened].max()), pda / float(np.abs(tig0["beta"]).sum()) ** 2)
        lams = self._lambda_path(top)
        if lams.size == 1:
            return float(lams[0]), rel0, None, pda
        cv = self._cross_validate(X, Y, lams, rng)
        return float(lams[cv["best_index"]]), rel0, cv, pda

    @one_blas_thread
    def _cv_fold(self, X, Y, train_x, test_x, train_y, test_y, lams, seed):
        rng = np.random.default_rng(seed)
        Xtr, Ytr = X[train_x], Y[train_y]
        Xd, Yd, screened, _ = self._scale_screen_centre(Xtr, Ytr)
        Xte = dense(X[test_x][:, screened])
        Yte = dense(Y[test_y][:, screened])
        if self.standardize:
            Xte, Yte = Xte / self.scale_[screened], Yte / self.scale_[screened]
        scores, nnz = np.empty(len(lams) + 1), np.empty(len(lams) + 1)
        rel0 = None
        # the path, then lam = 0 (all screened genes: the reference of cv_rule='fraction')
        for i, lam in enumerate([*lams, 0.0]):
            beta, _, _, rel0 = self._direction(Xd, Yd, lam, None, rng, rel0)
            scores[i] = wasserstein2_1d(Xte @ beta, Yte @ beta)
            nnz[i] = np.count_nonzero(beta)
        return scores, nnz

    # --------------------------------------------------------------------- fit
    def fit(self, X, Y):
        """Fit on target cells ``X`` (n x d) and background cells ``Y`` (m x d).

        Parameters
        ----------
        X : ndarray or scipy.sparse matrix, shape (n, d)
        Y : ndarray or scipy.sparse matrix, shape (m, d)

        Returns
        -------
        self
        """
        # The matrices are at most a few hundred genes wide: multithreaded BLAS gains
        # little on them, and its spinning threads fight the permutation / CV workers
        # (and other jobs) for the cores.
        with blas_threads(1):
            return self._fit(X, Y)

    def _fit(self, X, Y):
        self._check_params()
        X, Y = check_pair(X, Y, min_rows=2)
        rng = check_random_state(self.random_state)
        n, d = X.shape
        m = Y.shape[0]
        if self.standardize:
            _, sd = _column_moments(X, Y)
            # constant genes carry no difference; scale 1 leaves them at zero spread
            self.scale_ = np.where(sd > 0, sd, 1.0)
        else:
            self.scale_ = None

        Xd, Yd, screened, w2 = self._scale_screen_centre(X, Y)
        self.screened_ = screened
        self.marginal_w2_ = w2
        self.n_relax_cells_ = min(n, m, self.relax_max_cells)

        # ---- choose lam
        lam, rel0, self.cv_results_, self.pda_divergence_ = self._choose_lambda(X, Y, Xd, Yd, w2, screened, rng)
        if self.cv_results_ is not None:
            self._warn_path_edge(self.cv_results_)
        self.lam_ = lam

        # ---- directions by deflation
        comps = np.zeros((self.n_directions, d))
        divs = np.zeros(self.n_directions)
        self.relax_info_, self.tighten_info_ = [], []
        Xj, Yj = Xd, Yd
        P = np.eye(len(screened))
        mean_difference = Xd.mean(axis=0) - Yd.mean(axis=0)
        self.n_directions_ = 0
        for j in range(self.n_directions):
            beta, rel, tig, _ = self._direction(Xj, Yj, lam, self.k, rng, rel0 if j == 0 else None)
            self.relax_info_.append(
                {
                    "n_iter": rel["n_iter"],
                    "objective": rel["objective"],
                    "bound": rel["bound"],
                    "eig_fraction": rel["eig_fraction"],
                    "divergence": rel["divergence"],
                }
            )
            self.tighten_info_.append(
                {"n_iter": tig["n_iter"], "divergence": tig["divergence"], "objective": tig["objective"],
                 "start": tig["start"]}
            )
            if j > 0 and lam > 0 and tig["objective"] <= 0:
                # D and lam ||beta||_1^2 are both 2-homogeneous, so when no unit direction
                # has J = D - lam ||beta||_1^2 > 0 the penalised problem's maximiser over the
                # ball ||beta||_2 <= 1 is beta = 0: no further direction is worth its genes.
                # (Forcing a unit direction here returns the single gene of largest
                # residual divergence, noise included.)  The first direction is always
                # returned, so that a fit never comes back empty.
                break
            self.n_directions_ += 1
            # the direction acting on the original (screened) genes: P beta, where P
            # accumulates the deflations; it is orthogonal to the earlier directions
            u = P @ beta
            nu = np.linalg.norm(u)
            u[np.abs(u) < 1e-12 * max(nu, 1e-300)] = 0.0
            if nu > 0:
                u = orient_to_target(u / nu, mean_difference)
            comps[j, screened] = u
            divs[j] = wasserstein2_1d(Xd @ u, Yd @ u)
            if j + 1 < self.n_directions:
                Xj = Xj - np.outer(Xj @ beta, beta)
                Yj = Yj - np.outer(Yj @ beta, beta)
                P = P - np.outer(P @ beta, beta)
        spread = float(np.var(np.vstack([Xd, Yd]), axis=0).sum())
        if not divs[0] > 1e-12 * spread:
            # identical groups (e.g. a background that copies the target): every direction has
            # divergence 0, so whichever genes the search ended on carry nothing
            comps[:] = 0.0
            divs[:] = 0.0
            warnings.warn("no difference between the groups along any direction (divergence 0, e.g. a background "
                          "identical to the target): no gene is selected", ScontrastWarning, stacklevel=3)
        self.components_ = comps
        self.beta_ = comps[0] if self.n_directions == 1 else comps
        self.divergences_ = divs
        self.divergence_ = float(divs[0])
        self.selected_ = np.flatnonzero(np.any(comps != 0, axis=0))
        self.k_ = int(np.count_nonzero(comps[0]))

        # ---- test of target = background
        self.pvalue_ = None
        self.null_divergences_ = None
        self.test_ = None
        method = self._test_method(n, m, d)
        n_perm = _DEFAULT_PERMUTATIONS[method] if self.n_permutations is None else int(self.n_permutations)
        if n_perm > 0:
            if method == "split":
                obs, null, info = self._split_test(X, Y, n_perm, rng)
            elif method == "permute":
                obs, null, info = self._permute_test(X, Y, n_perm, rng)
            else:
                null = self._permutation_null(X, Y, lam, n_perm, rng)
                # the observed statistic is the first direction's tightened divergence,
                # computed by the same procedure (_direction with the same lam and k) as
                # every null value
                obs, info = self.tighten_info_[0]["divergence"], {}
            at_least = int(np.sum(null >= obs))
            self.null_divergences_ = null
            self.pvalue_ = float((1 + at_least) / (1 + n_perm))
            self.test_ = {
                "method": method,
                "requested": self.test,
                "statistic": float(obs),
                "n_permutations": n_perm,
                "n_at_least": at_least,
                # no permuted statistic reached the observed one: the p-value is the floor
                # 1 / (n_permutations + 1), an upper bound of what more permutations would give
                "bound": at_least == 0,
                "pvalue": self.pvalue_,
                **info,
            }
            if at_least == 0:
                warnings.warn(
                    f"p-value at its floor: none of the {n_perm} permutations reached the "
                    f"observed statistic, so p <= {self.pvalue_:.2g} is a bound (raise n_permutations to resolve it)",
                    ScontrastWarning, stacklevel=3)
        return self

    def _test_method(self, n: int, m: int, d: int) -> str:
        """The test run: ``self.test``, or for ``'auto'`` the rule in the class docstring."""
        if self.test != "auto":
            return self.test
        return "permute" if (n + m) * min(d, self.max_genes) <= _PERMUTE_MAX_SIZE else "split"

    def _permute_test(self, X, Y, n_permutations, rng):
        """Permutation test of a re-optimised, label-free-tuned divergence on all cells.

        Two statistics are computed for every labelling: ``T_1``, the largest
        ``J = D(beta) - lam ||beta||_1^2`` reached by the tightening (at most
        ``_PERMUTE_TIGHTEN_ITER`` steps) from the mean difference and the two extreme
        eigenvectors of the covariance difference of the labelled groups, on the test
        genes, at ``lam = _PERMUTE_LAM * lam0``; and ``T_2``, the same for the shape part
        of ``D`` (``W2^2`` of the projections with each group centred: ``D`` minus the
        squared mean difference) at ``_PERMUTE_LAM`` times its own ``lam0``.  The mean
        difference of 30 noise genes is the largest part of ``T_1``'s null spread, so a
        change of spread or correlation alone stands out far more in ``T_2``; ``T_1``
        keeps location changes.  They are combined by min-p: each labelling's p-value of
        ``T_1`` and of ``T_2`` within the set of all labellings (observed included), the
        statistic being ``1 - min`` of the two.  Every piece is one fixed function of
        (pooled cells, labels), computed identically for the observed labelling (the
        identity, row 0 of the batch) and for every permuted one:

        - the test genes: all genes, or the ``max_genes`` of largest pooled variance (label
          free) when there are more; ``scale_`` (``standardize``) is label-free;
        - ``lam0``: the mean over ``_LAM0_RELABELLINGS`` random relabellings of the pooled
          cells (rows put in a canonical order first, so it depends on the pooled multiset
          only) of the largest marginal ``W2^2`` (and of the largest centred one for
          ``T_2``): the noise level of the best single gene;
        - the starts and the tightening are recomputed for every labelling; the min-p rule
          is applied to every member of the set alike.

        Under ``target = background`` the observed and permuted labellings are exchangeable,
        and so are their combined statistics, so
        ``p = (1 + #{T_perm >= T_obs}) / (1 + n_permutations)`` is exact.  No lambda chosen
        on the observed labels enters (that would make the observed statistic special).

        Returns
        -------
        statistic : float
            The observed labelling's ``1 - min(p_1, p_2)``.
        null : ndarray, shape (n_permutations,)
            The permuted labellings' ``1 - min(p_1, p_2)``.
        info : dict
            Test genes, both ``lam0`` and ``lam``, the two observed statistics and their
            own permutation p-values, and the tightening cap.
        """
        n, m = X.shape[0], Y.shape[0]
        Z = sp.vstack([X, Y], format="csr") if sp.issparse(X) or sp.issparse(Y) else np.vstack([X, Y])
        if self.standardize:
            Z = _scale_columns(Z, 1.0 / self.scale_)
        d = Z.shape[1]
        if d > self.max_genes:
            _, sd = _column_moments(Z[:n], Z[n:])
            genes = np.sort(np.argsort(-sd, kind="stable")[: self.max_genes])
        else:
            genes = np.arange(d)
        Z = dense(Z[:, genes])
        Z = Z - Z.mean(axis=0)
        N = n + m
        canon = Z[np.lexsort(Z.T[::-1])]
        lam0 = np.zeros(2)
        for p in (rng.permutation(N) for _ in range(_LAM0_RELABELLINGS)):
            a, b = canon[p[:n]], canon[p[n:]]
            lam0 += [marginal_wasserstein2(a, b).max(),
                     marginal_wasserstein2(a - a.mean(axis=0), b - b.mean(axis=0)).max()]
        lam0 /= _LAM0_RELABELLINGS
        lams = _PERMUTE_LAM * lam0
        stats = np.empty((n_permutations + 1, 2))
        for s in range(0, n_permutations + 1, _PERM_BATCH):
            e = min(s + _PERM_BATCH, n_permutations + 1)
            perms = rng.permuted(np.broadcast_to(np.arange(N), (e - s, N)), axis=1)
            if s == 0:
                perms[0] = np.arange(N)  # the observed labelling
            stats[s:e] = _relabelled_statistics(Z, n, perms, lams, _PERMUTE_TIGHTEN_ITER)
        level = _min_p_level(stats)
        comp = (1 + np.sum(stats[1:] >= stats[0], axis=0)) / (n_permutations + 1)
        info = {"n_test_genes": int(genes.size), "lam0": float(lam0[0]), "test_lam": float(lams[0]),
                "shape_lam0": float(lam0[1]), "shape_test_lam": float(lams[1]),
                "divergence_statistic": float(stats[0, 0]), "shape_statistic": float(stats[0, 1]),
                "divergence_pvalue": float(comp[0]), "shape_pvalue": float(comp[1]),
                "tighten_max_iter": _PERMUTE_TIGHTEN_ITER}
        return float(level[0]), level[1:], info

    def _split_test(self, X, Y, n_permutations, rng):
        """Sample-splitting test: direction learnt on half of the cells, tested on the others.

        Each group is split at random into a learning half (``n // 2`` and ``m // 2``
        cells) and a test half.  The whole procedure (screening, the lambda rule, RELAX,
        tightening; ``scale_`` is label-free) is run on the learning half; the test cells
        are projected on its first direction and the statistic is ``W2^2`` between the
        projected test target and background cells, compared with ``n_permutations``
        permutations of the test cells' labels.  The direction does not depend on the
        test cells, so under ``target = background`` their labels are exchangeable given
        it and the p-value is exact (uniform up to the permutation grid) whatever the
        selection; each permutation costs a sort of ``n + m`` numbers, not a fit.

        Returns
        -------
        statistic : float
        null : ndarray, shape (n_permutations,)
        info : dict
            Cells of each half and the learning half's lambda and genes.
        """
        n, m = X.shape[0], Y.shape[0]
        px, py = rng.permutation(n), rng.permutation(m)
        lx, tx = np.sort(px[: n // 2]), np.sort(px[n // 2:])
        ly, ty = np.sort(py[: m // 2]), np.sort(py[m // 2:])
        XL, YL = X[lx], Y[ly]
        if self.lam is None and self.k is None and min(lx.size, ly.size) < 2 * self.cv_folds:
            raise ScontrastError(
                f"test: the split test chooses lambda by {self.cv_folds}-fold CV on half of each group, which needs "
                f"at least {4 * self.cv_folds} cells per group, got {n} and {m}; set lam or k, or test='refit'")
        Xd, Yd, screened, w2 = self._scale_screen_centre(XL, YL)
        lam, rel0, _, _ = self._choose_lambda(XL, YL, Xd, Yd, w2, screened, rng)
        beta = self._direction(Xd, Yd, lam, self.k, rng, rel0)[0]
        w = beta / self.scale_[screened] if self.standardize else beta
        keep = w != 0
        cols = screened[keep]
        a = np.asarray(dense(X[tx][:, cols]) @ w[keep]).ravel()
        b = np.asarray(dense(Y[ty][:, cols]) @ w[keep]).ravel()
        null = _permuted_w2(np.concatenate([a, b]), a.size, n_permutations, rng)
        info = {"n_learn": [int(lx.size), int(ly.size)], "n_test": [int(tx.size), int(ty.size)],
                "learn_lam": float(lam), "learn_n_genes": int(cols.size)}
        return float(wasserstein2_1d(a, b)), null, info

    def _cross_validate(self, X, Y, lams, rng) -> dict:
        """Held-out divergence along the path and the rule's choice (the ``cv_results_`` dict)."""
        n, m = X.shape[0], Y.shape[0]
        folds = self.cv_folds
        if min(n, m) < 2 * folds:
            raise ScontrastError(
                f"cv_folds: {folds} folds need at least {2 * folds} cells per group, got {n} and {m}; "
                "lower cv_folds or set lam"
            )
        kx = KFold(folds, shuffle=True, random_state=spawn_seed(rng)).split(np.arange(n))
        ky = KFold(folds, shuffle=True, random_state=spawn_seed(rng)).split(np.arange(m))
        seeds = rng.integers(0, 2**63 - 1, size=folds)
        jobs = [
            delayed(self._cv_fold)(X, Y, trx, tex, try_, tey, lams, seeds[f])
            for f, ((trx, tex), (try_, tey)) in enumerate(zip(kx, ky))
        ]
        res = list(progress(Parallel(n_jobs=self.n_jobs, return_as="generator")(jobs), total=folds,
                            desc="sparda: cross-validation folds", logger="scontrast.sparda"))
        scores = np.array([r[0] for r in res])
        nnz = np.array([r[1] for r in res])
        full_mean = scores.mean(axis=0)
        full_se = scores.std(axis=0, ddof=1) / np.sqrt(folds)
        mean, se, reference = full_mean[:-1], full_se[:-1], float(full_mean[-1])
        best = int(np.argmax(mean))
        if self.cv_rule == "1se":
            # the path is decreasing, so the first index within one SE is the largest lambda
            best = int(np.flatnonzero(mean >= mean[best] - se[best])[0])
        elif self.cv_rule == "fraction":
            reached = np.flatnonzero(mean >= self.cv_fraction * reference)
            best = int(reached[0]) if reached.size else len(lams) - 1
        return {
            "lam": lams,
            "score": mean,
            "score_se": se,
            "n_selected": nnz[:, :-1].mean(axis=0),
            "best_index": best,
            "reference_score": reference,
            "reference_n_selected": float(nnz[:, -1].mean()),
        }

    def _warn_path_edge(self, cv: dict) -> None:
        """``ScontrastWarning`` when the rule's choice is an end of the lambda path."""
        lams, best = cv["lam"], cv["best_index"]
        if lams.size < 2:
            return
        size = cv["n_selected"][best]
        if best == lams.size - 1:
            warnings.warn(
                f"cv_rule={self.cv_rule!r} chose the smallest lambda of the path ({lams[best]:.3g}, "
                f"{size:.0f} genes), its dense end; lower lam_min_ratio or raise n_lambdas to see whether a "
                "smaller one is better", ScontrastWarning, stacklevel=4)
        elif best == 0:
            warnings.warn(
                f"cv_rule={self.cv_rule!r} chose the largest lambda of the path ({lams[best]:.3g}, "
                f"{size:.0f} gene(s)), its sparse end: the best single genes carry the difference",
                ScontrastWarning, stacklevel=4)

    def _permutation_null(self, X, Y, lam, n_permutations, rng) -> np.ndarray:
        n = X.shape[0]
        Z = sp.vstack([X, Y], format="csr") if sp.issparse(X) or sp.issparse(Y) else np.vstack([X, Y])
        seeds = rng.integers(0, 2**63 - 1, size=n_permutations)

        @one_blas_thread
        def one(seed):
            r = np.random.default_rng(seed)
            perm = r.permutation(Z.shape[0])
            return self._fit_first(Z[perm[:n]], Z[perm[n:]], lam, self.k, r)

        fits = Parallel(n_jobs=self.n_jobs, return_as="generator")(delayed(one)(s) for s in seeds)
        return np.asarray(list(progress(fits, total=len(seeds), desc="sparda: permutation refits",
                                        logger="scontrast.sparda")))

    # -------------------------------------------------------------- transform
    def transform(self, X) -> np.ndarray:
        """Project cells on the fitted directions.

        Parameters
        ----------
        X : ndarray or sparse matrix, shape (n, d)

        Returns
        -------
        ndarray, shape (n, n_directions)
        """
        check_is_fitted(self)
        X = check_matrix(X, "X")
        if X.shape[1] != self.components_.shape[1]:
            raise ScontrastError(f"X: has {X.shape[1]} genes, the model was fitted on {self.components_.shape[1]}")
        W = self.components_.T
        if self.scale_ is not None:
            W = W / self.scale_[:, None]
        return np.asarray(X @ W)


# --------------------------------------------------------------------------- #
# Stability selection
# --------------------------------------------------------------------------- #
def _half_subsamples(n: int, n_subsamples: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Complementary pairs of disjoint half-subsamples of ``range(n)``.

    Each random permutation gives two disjoint halves of ``n // 2`` cells (Shah and
    Samworth's complementary pairs, which tighten the error bound of stability selection
    and make every cell appear equally often); an odd ``n_subsamples`` drops the last one.

    Returns
    -------
    list of ndarray of int, each of shape (n // 2,), sorted
    """
    h = n // 2
    out = []
    while len(out) < n_subsamples:
        p = rng.permutation(n)
        out += [np.sort(p[:h]), np.sort(p[h:2 * h])]
    return out[:n_subsamples]


def _fit_subsample(X, Y, params: dict, seed: int) -> np.ndarray:
    """|weight| of every gene (largest over directions) of one SPARDA fit, shape (d,)."""
    model = SPARDA(**params, random_state=np.random.default_rng(seed)).fit(X, Y)
    return np.abs(model.components_).max(axis=0)


def stability_selection(X, Y, *, lam=None, k=None, n_subsamples=50, n_jobs=1, random_state=None,
                        return_weights=False, **sparda_params):
    """Selection frequency of every gene by SPARDA over random half-subsamples of the cells.

    Stability selection (Meinshausen and Buehlmann 2010): SPARDA at a fixed ``lam`` (or
    ``k``) is fitted on ``n_subsamples`` subsamples made of half of the target cells and
    half of the background cells, drawn independently in each group as complementary
    pairs (Shah and Samworth 2013); a gene's frequency is the fraction of fits in which
    its weight is nonzero.  Keeping the genes of frequency ``>= pi`` (0.6-0.9) trades the
    single fit's support, whose last genes depend on the sample, for the genes selected
    whatever the half of the data.  The subsamples depend only on ``random_state`` and
    the group sizes, so calls with different ``lam`` share them.

    Parameters
    ----------
    X : ndarray or sparse matrix, shape (n, d)
        Target cells (n >= 4).
    Y : ndarray or sparse matrix, shape (m, d)
        Background cells (m >= 4).
    lam : float, optional
        Penalty of every fit (see :class:`SPARDA`).
    k : int, optional
        Cardinality bound of every fit instead of (or with) ``lam``; one of the two
        is required (choosing ``lam`` by cross-validation inside every subsample
        would multiply the cost by the path length and change it per subsample).
    n_subsamples : int
        Number of half-subsample fits (B).
    n_jobs : int
        Parallel workers (joblib) over the subsample fits.
    random_state : None, int or numpy Generator
        Seeds the subsamples and every fit.
    return_weights : bool
        Also return the mean absolute weight of every gene over the fits.
    **sparda_params
        Other :class:`SPARDA` parameters (``n_directions``, ``max_genes``,
        ``relax_max_cells``, ``standardize``...); not ``n_permutations``, ``n_jobs``,
        ``random_state``.

    Returns
    -------
    frequency : ndarray, shape (d,)
        Fraction of the fits in which the gene has a nonzero weight (in any direction).
    mean_weight : ndarray, shape (d,)
        Mean over the fits of the gene's absolute weight (largest over directions; 0 when
        not selected); only with ``return_weights=True``.
    """
    X, Y = check_pair(X, Y, min_rows=4)
    if lam is None and k is None:
        raise ScontrastError("lam, k: stability selection needs a fixed lam or k (no cross-validation per subsample)")
    check_int(n_subsamples, "n_subsamples", 1)
    if check_int(n_jobs, "n_jobs") == 0:
        raise ScontrastError("n_jobs: expected a nonzero integer (-1 = all cores), got 0")
    bad = sorted({"n_permutations", "n_jobs", "random_state"} & set(sparda_params))
    if bad:
        raise ScontrastError(f"{bad[0]}: not a parameter of the subsample fits")
    unknown = sorted(set(sparda_params) - set(SPARDA._get_param_names()))
    if unknown:
        raise ScontrastError(f"{unknown[0]}: not a parameter of SPARDA")
    params = dict(sparda_params, lam=lam, k=k, n_permutations=0, n_jobs=1)
    # an invalid SPARDA parameter fails here, once, rather than in every worker
    SPARDA(**params)._check_params()
    rng = check_random_state(random_state)
    sx = _half_subsamples(X.shape[0], n_subsamples, rng)
    sy = _half_subsamples(Y.shape[0], n_subsamples, rng)
    seeds = rng.integers(0, 2**63 - 1, size=n_subsamples)
    W = np.asarray(Parallel(n_jobs=n_jobs)(
        delayed(_fit_subsample)(X[ix], Y[iy], params, s) for ix, iy, s in zip(sx, sy, seeds)
    ))
    freq = (W > 0).mean(axis=0)
    return (freq, W.mean(axis=0)) if return_weights else freq
