"""RELAX: projected supergradient ascent on the semidefinite relaxation of SPARDA.

``max_{B psd, tr B = 1} min_M tr(W_M B) - lam ||B||_1``: the supergradient ``W_M`` comes from the
exact optimal transport plan ``M`` for the cost ``z_ij' B z_ij`` (assignment solver or warm-started
network simplex), the step is followed by the eigenvalue projection onto the simplex (top eigenpairs
only) and soft-thresholding; the answer's leading eigenvector starts the tightening.
"""

from __future__ import annotations

import math

import numpy as np
import ot
import scipy.linalg
from scipy.optimize import linear_sum_assignment

from ._utils import _orient

# Network-simplex iteration cap: far above what n, m <= a few thousand need, so the
# plan returned is the exact optimum rather than a truncated one.
_EMD_MAX_ITER = 10**8


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

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.sparda import relax_supergradient, projected_divergence
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.normal(size=(30, 3)), rng.normal(size=(25, 3)) + [1.0, 0.0, 0.0]
    >>> beta = np.array([1.0, 0.0, 0.0])
    >>> F, G, _ = relax_supergradient(X, Y, np.outer(beta, beta))
    >>> G.shape, bool(np.isclose(F, projected_divergence(X, Y, beta)))   # at B = beta beta', F is D(beta)
    ((3, 3), True)
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

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.sparda import relax
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.normal(size=(40, 4)), rng.normal(size=(40, 4))
    >>> X[:, 2] *= 3.0                                        # the groups differ along gene 2
    >>> out = relax(X, Y, lam=0.0, max_iter=50)
    >>> out["B"].shape, int(np.argmax(np.abs(out["beta"])))
    ((4, 4), 2)
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

