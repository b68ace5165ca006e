"""Probabilistic contrastive PCA (PCPCA; Li, Jones & Engelhardt).

Model: target cells x = W z + mu_x + e and background cells y = W z' + mu_y + e,
z, z' ~ N(0, I_k), e ~ N(0, sigma^2 I_D). PCPCA maximises the relative
likelihood p(X | W, sigma^2) / p(Y | W, sigma^2)^gamma. With both groups
centred and C = Xc'Xc - gamma Yc'Yc (eigenvalues l_1 >= ... >= l_D) the
maximiser is

    c = n - gamma m,  sigma^2 = sum_{j>k} l_j / ((D - k) c),
    W = U_k (L_k / c - sigma^2 I)^{1/2},

valid only when c > 0, sigma^2 > 0 and l_k / c > sigma^2. ``gamma' = gamma m / n``
is the sample-size-free scale (``C / n = S_x - gamma' S_y`` with the two
covariance matrices), and gamma' < 1 is the same as c > 0.

Admissible range (derivation used by :func:`max_gamma`). For a rank-k
orthogonal projector P write a(P) = tr((I - P) S_x) and b(P) = tr((I - P) S_y),
with S_x, S_y the two scatter matrices. Then

    R(gamma) := sum_{j>k} l_j(gamma) = min_P [a(P) - gamma b(P)],

a minimum of non-increasing affine functions of gamma: R is concave and
non-increasing, so {gamma >= 0 : R(gamma) > 0} is an interval [0, gamma_R)
(empty when R(0) <= 0, i.e. the centred target has rank <= k). Its end
gamma_R = min_P a(P) / b(P) is found exactly by Dinkelbach's iteration
(Newton's method from the right on the concave R; each step is one top-k
eigenproblem). The third condition, l_k > mean(l_{k+1}, ..., l_D), holds
whenever l_k > l_{k+1} and fails only where l_k = ... = l_D (ties, not a
range of gamma), so it is checked in ``fit`` rather than folded into the bound.
Hence the admissible set is [0, min(n / m, gamma_R)) and ``max_gamma`` returns
its (excluded) end. (The reference package's bound is a Weyl-type sufficient
bound that sums the target eigenvalues from index k instead of k + 1.)

Missing values (NaN, missing at random): the observed-data objective of the
paper's last section, sum over cells of w_i log N(x_i^o; 0, A_i) with
A_i = W_i W_i' + sigma^2 I (W_i = observed rows of W), w_i = 1 for target and
-gamma for background cells, is maximised by L-BFGS on (W, log sigma^2) with
analytic gradients. Woodbury and the matrix determinant lemma reduce each cell
to k x k algebra: with M_i = W_i'W_i + sigma^2 I_k,

    log|A_i| = (D_i - k) log sigma^2 + log|M_i|,
    A_i^{-1} x = (x - W_i M_i^{-1} W_i' x) / sigma^2,   A_i^{-1} W_i = W_i M_i^{-1},

so one objective-and-gradient evaluation costs O((n + m) D k^2) with no D x D
(or D_i x D_i) matrix and no (n + m) x D temporary. The group means are plug-in
estimates over the observed entries: they cannot be fitted jointly because the
objective is unbounded in the background mean (its weight is -gamma), and for
complete data the plug-in means are exactly the closed form's centring.

Contrast strength (one rule, in :class:`PCPCA`). ``gamma_prime`` defaults to 0.5;
``gamma`` (default None) given instead replaces it (gamma' = gamma m / n). Setting
both to values other than their defaults (``gamma`` not None and ``gamma_prime``
neither 0.5 nor None) is an error, as is setting both to None.

Inadmissible gamma. ``fit`` computes the admissible range's end once
(``max_gamma_``) from the scatter matrices it fits with. A requested gamma at or
above it raises (``on_inadmissible='error'``, the message states the bound) or is
replaced by ``clip_fraction * max_gamma_`` with a warning (``'clip'``).

Held-out comparison. :func:`heldout_loglik` refits a fitted model and probabilistic
PCA (gamma' = 0) on part of the target cells and scores the others under both.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy import linalg, optimize
from scipy.sparse.linalg import LinearOperator, eigsh
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from .core import (
    ScontrastError,
    blas_threads,
    check_int,
    check_matrix,
    check_option,
    check_pair,
    check_random_state,
    check_real,
    dense,
)

__all__ = ["PCPCA", "heldout_loglik", "max_gamma", "observed_loglik"]

_LOG_2PI = float(np.log(2.0 * np.pi))
# Up to this many features the contrastive scatter matrix is formed and fully
# diagonalised (exact trailing eigenvalue sum); above it a Lanczos top-k solve
# on an implicit operator is much faster (measured: 1000 HVGs x 180 cells,
# 0.09 s against 7 s for a full dense eigh) and never forms a D x D matrix.
_DENSE_MAX_FEATURES = 200
# Dense input up to this many genes: each group's D x D scatter matrix is formed once (32 MB at
# 2000 genes) and the Lanczos products use it.
_GRAM_MAX_FEATURES = 2000
# Dense eigh of C up to this many genes runs on one BLAS thread: a threaded one gains little there and
# its spinning threads stall on shared cores (measured on 2 busy cores, best / worst of 3, one thread
# against the default: D = 300 0.02-0.03 s vs 0.04-0.30 s; D = 1000 0.31-0.37 s vs 0.64-3.8 s).
_EIGH_ONE_THREAD_MAX = 1000
# The default contrast strength on the covariance scale (see "Contrast strength" above).
_GAMMA_PRIME_DEFAULT = 0.5
_SOLVERS = ("auto", "closed_form", "lbfgs")
_EIGEN_SOLVERS = ("auto", "dense", "arpack")
_ON_INADMISSIBLE = ("error", "clip")


# --------------------------------------------------------------------------- input checks


def _check_groups(X, Y, k):
    """Check a target/background pair for PCPCA.

    :func:`scontrast.core.check_pair` (NaN allowed: missing values), plus what PCPCA needs:
    no NaN in sparse input (a sparse zero cannot be told from a missing value), at least 2
    cells per group, and k below the number of genes.

    Returns
    -------
    X : (n, D), Y : (m, D), float64 (dense ndarray or CSR); has_nan : bool
    """
    X, Y = check_pair(X, Y, min_rows=2, allow_nan=True)
    has_nan = False
    for name, A in (("X", X), ("Y", Y)):
        if sp.issparse(A):
            if np.isnan(A.data).any():
                raise ScontrastError(f"{name}: sparse input contains NaN; pass a dense array to mark missing values")
        elif np.isnan(A).any():
            has_nan = True
    if k >= X.shape[1]:
        raise ScontrastError(f"n_components: must be below the number of genes {X.shape[1]}, got {k}")
    return X, Y, has_nan


def _column_means(A, name):
    """Per-gene mean of one group over its observed entries, shape (D,)."""
    if sp.issparse(A):
        return np.asarray(A.mean(axis=0)).ravel()
    observed = (~np.isnan(A)).sum(axis=0)
    if (observed == 0).any():
        j = int(np.flatnonzero(observed == 0)[0])
        raise ScontrastError(f"{name}: gene {j} has no observed value")
    return np.nansum(A, axis=0) / observed


# --------------------------------------------------------------------------- scatter matrices


class _Scatter:
    """Scatter matrix S = (A - 1 mu')'(A - 1 mu') of one group (D x D, never formed for sparse A).

    Parameters
    ----------
    A : (n, D) ndarray or CSR matrix without NaN
    mu : (D,) ndarray, the group mean used for centring
    """

    def __init__(self, A, mu):
        self.n = A.shape[0]
        self.mu = mu
        self.sparse = sp.issparse(A)
        # Dense data is centred explicitly (exact); sparse data implicitly, so it stays sparse.
        self.A = A if self.sparse else A - mu
        self._gram = None

    def _cached_gram(self):
        """The formed D x D matrix for dense data of moderate width, else None.

        A Lanczos solve needs ~100 products; with the matrix formed once (one BLAS syrk-like
        product) each costs D^2 instead of 2 n D and reads 8 D^2 bytes instead of 16 n D
        (measured: 4000 cells x 500 genes, 6 s of ARPACK products before, well under 1 s after).
        """
        if self.sparse or self.A.shape[1] > _GRAM_MAX_FEATURES:
            return None
        if self._gram is None:
            self._gram = self.A.T @ self.A
        return self._gram

    def trace(self):
        if self.sparse:
            return float(self.A.multiply(self.A).sum() - self.n * (self.mu @ self.mu))
        return float(np.einsum("ij,ij->", self.A, self.A))

    def dense(self):
        """The D x D scatter matrix (a new array)."""
        if self.sparse:
            G = (self.A.T @ self.A).toarray()
            return G - self.n * np.outer(self.mu, self.mu)
        G = self._cached_gram()
        return self.A.T @ self.A if G is None else G.copy()

    def matmat(self, V):
        """S @ V for V of shape (D, r)."""
        if self.sparse:
            return self.A.T @ (self.A @ V) - self.n * np.outer(self.mu, self.mu @ V)
        G = self._cached_gram()
        return self.A.T @ (self.A @ V) if G is None else G @ V

    def quad_trace(self, U):
        """tr(U' S U) for U of shape (D, r)."""
        G = self._cached_gram()
        if G is not None:
            return float(np.einsum("ij,ij->", U, G @ U))
        AU = self.A @ U
        if self.sparse:
            AU = AU - np.outer(np.ones(self.n), self.mu @ U)
        return float(np.einsum("ij,ij->", AU, AU))


def _resolve_eigen_solver(eigen_solver, D, k):
    """The eigensolver used for ``eigen_solver`` ('auto', 'dense', 'arpack') at D genes and k components."""
    if eigen_solver == "auto":
        return "dense" if D <= _DENSE_MAX_FEATURES else "arpack"
    if eigen_solver == "arpack" and k >= D - 1:
        return "dense"  # ARPACK needs k < D - 1
    return eigen_solver


def _top_eigenpairs(Sx, Sy, gamma, k, solver, rng, full=True, v0=None):
    """Top-k eigenpairs of C = Sx - gamma Sy (``v0``: optional ARPACK start vector, shape (D,)).

    Returns
    -------
    vals : (k,) descending eigenvalues
    U : (D, k) orthonormal eigenvectors
    rest : sum of the other D - k eigenvalues (only when ``full``; else None)
    """
    D = Sx.mu.shape[0]
    if solver == "dense":
        C = Sx.dense() - gamma * Sy.dense()
        with blas_threads(1 if D <= _EIGH_ONE_THREAD_MAX else None):
            if full:
                w, V = linalg.eigh(C, overwrite_a=True, check_finite=False)
                w, V = w[::-1], V[:, ::-1]
                return w[:k].copy(), np.ascontiguousarray(V[:, :k]), float(np.sum(w[k:]))
            w, V = linalg.eigh(C, subset_by_index=[D - k, D - 1], overwrite_a=True, check_finite=False)
        return w[::-1].copy(), np.ascontiguousarray(V[:, ::-1]), None

    op = LinearOperator(
        (D, D),
        matvec=lambda v: (Sx.matmat(v.reshape(-1, 1)) - gamma * Sy.matmat(v.reshape(-1, 1))).ravel(),
        matmat=lambda V: Sx.matmat(V) - gamma * Sy.matmat(V),
        dtype=np.float64,
    )
    # ARPACK's own start vector is unseeded; a seeded one makes results reproducible.
    if v0 is None:
        v0 = rng.uniform(-1.0, 1.0, size=D)
    ncv = min(D, max(2 * k + 1, 24))
    w, V = eigsh(op, k=k, which="LA", v0=v0, ncv=ncv, tol=0.0, maxiter=max(1000, 10 * D))
    order = np.argsort(w)[::-1]
    w, V = w[order], V[:, order]
    rest = Sx.trace() - gamma * Sy.trace() - float(w.sum()) if full else None
    return w, np.ascontiguousarray(V), rest


class _Spectrum:
    """The top-k eigenproblems of C(gamma) = Sx - gamma Sy for one pair of groups.

    Full solves (eigenpairs and trailing sum) are kept by gamma, so the search for the
    admissible range and the fit share the solves they both need (gamma = 0 for
    probabilistic PCA, gamma = n/m) instead of redoing them.

    Parameters
    ----------
    Sx, Sy : :class:`_Scatter` of the target (n cells) and background (m cells), D genes
    k : int, number of components
    solver : 'dense' or 'arpack' (resolved)
    rng : numpy Generator (ARPACK start vectors)
    """

    def __init__(self, Sx, Sy, k, solver, rng):
        self.Sx, self.Sy, self.k, self.solver, self.rng = Sx, Sy, k, solver, rng
        self._full = {}

    def top(self, gamma, full=True, v0=None):
        """:func:`_top_eigenpairs` at ``gamma``: ``(vals (k,), U (D, k), rest or None)``."""
        if not full or v0 is not None:
            return _top_eigenpairs(self.Sx, self.Sy, gamma, self.k, self.solver, self.rng, full=full, v0=v0)
        key = float(gamma)
        if key not in self._full:
            self._full[key] = _top_eigenpairs(self.Sx, self.Sy, key, self.k, self.solver, self.rng)
        return self._full[key]


def _gamma_R(spec, rtol=1e-12, max_iter=100):
    """End of the interval on which the trailing eigenvalue sum R(gamma) is positive.

    ``spec`` is a :class:`_Spectrum`. Returns ``inf`` when R stays positive on [0, n/m]
    (then c > 0 is the binding condition and the caller uses n/m). Raises
    ScontrastError when R(0) <= 0.
    """
    Sx, Sy, k = spec.Sx, spec.Sy, spec.k
    g_c = Sx.n / Sy.n
    _, _, r0 = spec.top(0.0)
    scale = max(Sx.trace(), np.finfo(float).tiny)
    if r0 <= 1e-12 * scale:
        raise ScontrastError(
            f"X: the centred target data has at most n_components={k} directions of variance; no gamma is admissible"
        )
    _, U, r = spec.top(g_c)
    if r > 0:
        return np.inf
    # Dinkelbach from the right: gamma_{t+1} = a(P_t) / b(P_t), P_t the top-k projector at gamma_t.
    # R(gamma_t) <= 0 and a(P_t) > 0 imply b(P_t) > 0, and the iterates decrease monotonically.
    g = g_c
    tx, ty = Sx.trace(), Sy.trace()
    for _ in range(max_iter):
        a = tx - Sx.quad_trace(U)
        b = ty - Sy.quad_trace(U)
        g_new = a / b
        if g - g_new <= rtol * g:
            return min(g_new, g)
        g = g_new
        # Warm start: the previous top-k space is close, so Lanczos converges in fewer products.
        _, U, _ = spec.top(g, full=False, v0=U.sum(axis=1))
    return g


def _admissible_end(spec):
    """The excluded upper end of the admissible gamma range: min(n/m, gamma_R)."""
    return float(min(spec.Sx.n / spec.Sy.n, _gamma_R(spec)))


def _closed_form(vals, U, rest, D, n, m, gamma):
    """Closed-form maximiser, or the reason it does not exist.

    Returns ``(W, sigma2, reason)``; ``reason`` is None when the solution is valid.
    """
    k = vals.shape[0]
    c = n - gamma * m
    if c <= 0:
        return None, None, f"n - gamma*m = {c:.4g} <= 0"
    sigma2 = rest / ((D - k) * c)
    if not sigma2 > 0:
        return None, None, f"sigma^2 = {sigma2:.4g} <= 0 (the trailing eigenvalues of C sum to {rest:.4g})"
    lam = vals / c - sigma2
    if not lam[-1] > 0:
        return None, None, f"l_k/(n - gamma*m) = {vals[-1] / c:.4g} does not exceed sigma^2 = {sigma2:.4g}"
    return U * np.sqrt(lam), float(sigma2), None


def _canonical(W):
    """A fixed representative of W R (R orthogonal): orthogonal columns by decreasing norm,
    each with its largest-magnitude entry positive. W is (D, k)."""
    U, s, _ = linalg.svd(W, full_matrices=False)
    W = U * s
    idx = np.argmax(np.abs(W), axis=0)
    signs = np.sign(W[idx, np.arange(W.shape[1])])
    signs[signs == 0] = 1.0
    return W * signs


# --------------------------------------------------------------------------- missing-data objective


class _Observed(NamedTuple):
    """Centred data of both groups prepared for the observed-data objective.

    X0 : (N, D) centred values, missing entries set to 0
    O : (N, D) float 0/1 mask of observed entries, or None when nothing is missing
    wts : (N,) 1 for target cells, -gamma for background cells
    xx : (N,) squared norms of the observed part of each cell
    d_obs : (N,) number of observed genes D_i
    """

    X0: np.ndarray
    O: np.ndarray | None
    wts: np.ndarray
    xx: np.ndarray
    d_obs: np.ndarray


def _observed(A, wts=None):
    """Build :class:`_Observed` from one (N, D) centred matrix with NaN for missing values."""
    nan = np.isnan(A)
    O = (~nan).astype(np.float64) if nan.any() else None
    X0 = np.where(nan, 0.0, A)
    d_obs = np.full(A.shape[0], float(A.shape[1])) if O is None else O.sum(axis=1)
    wts = np.ones(A.shape[0]) if wts is None else wts
    return _Observed(X0, O, wts, np.einsum("ij,ij->i", X0, X0), d_obs)


def _stack(Xc, Yc, gamma):
    """Stack the centred groups (NaN = missing) into :class:`_Observed` with weights 1 and -gamma."""
    wts = np.concatenate([np.ones(Xc.shape[0]), np.full(Yc.shape[0], -float(gamma))])
    return _observed(np.vstack([Xc, Yc]), wts)


def _cellwise(W, sigma2, data):
    """Per-cell Woodbury quantities for A_i = W_i W_i' + sigma2 I (W_i: observed rows of W).

    Parameters
    ----------
    W : (D, k)
    sigma2 : float
    data : :class:`_Observed` with N cells

    Returns
    -------
    G : (N, k, k) W_i'W_i
    Minv : (N, k, k) inverses of M_i = G_i + sigma2 I
    B : (N, k) W_i' x_i
    Z : (N, k) M_i^{-1} W_i' x_i (the posterior means of z)
    logdet : (N,) log|A_i|
    quad : (N,) x_i' A_i^{-1} x_i
    """
    N, D = data.X0.shape
    k = W.shape[1]
    if data.O is None:
        G = np.broadcast_to(W.T @ W, (N, k, k))
    else:
        G = (data.O @ (W[:, :, None] * W[:, None, :]).reshape(D, k * k)).reshape(N, k, k)
    M = G + sigma2 * np.eye(k)
    Lc = np.linalg.cholesky(M)
    logdet_M = 2.0 * np.log(np.diagonal(Lc, axis1=1, axis2=2)).sum(axis=1)
    Minv = np.linalg.inv(M)
    B = data.X0 @ W
    Z = np.einsum("nij,nj->ni", Minv, B)
    quad = (data.xx - np.einsum("ni,ni->n", B, Z)) / sigma2
    logdet = (data.d_obs - k) * np.log(sigma2) + logdet_M
    return G, Minv, B, Z, logdet, quad


def _loglik_and_grad(W, sigma2, data, grad=True):
    """Weighted observed-data objective l = sum_i w_i log N(x_i^o; 0, A_i) and its gradients.

    Parameters as in :func:`_cellwise`. Returns ``(l, dl/dW (D, k), dl/dsigma2)`` (gradients
    None if not ``grad``). Every N x D product is a skinny matrix product; no N x D temporary
    is formed, so one evaluation reads X0 twice and O twice.
    """
    G, Minv, B, Z, logdet, quad = _cellwise(W, sigma2, data)
    wts = data.wts
    ll = -0.5 * (data.d_obs * _LOG_2PI + logdet + quad)
    value = float(wts @ ll)
    if not grad:
        return value, None, None
    N, D = data.X0.shape
    k = W.shape[1]
    # dl/dW = -sum_i w_i L_i'(A_i^{-1} - r_i r_i')L_i W with r_i = A_i^{-1} x_i^o = (x_i - W_i z_i) / sigma2.
    # (1) sum_i w_i L_i' A_i^{-1} L_i W: row d is W_d sum_i w_i O_id M_i^{-1}  (A_i^{-1} W_i = W_i M_i^{-1}).
    # (2) sum_i w_i r_i (r_i' W_i) = R'v with v_i = w_i W_i'r_i = w_i (b_i - G_i z_i) / sigma2, and
    #     R'v = (X0'v - [sum_i O_id (W_d . z_i) v_i]_d) / sigma2.
    v = wts[:, None] * (B - np.einsum("nij,nj->ni", G, Z)) / sigma2
    wMinv = wts[:, None] * Minv.reshape(N, k * k)
    Zv = (Z[:, :, None] * v[:, None, :]).reshape(N, k * k)
    if data.O is None:
        T = np.broadcast_to(wMinv.sum(axis=0).reshape(k, k), (D, k, k))
        P = np.broadcast_to(Zv.sum(axis=0).reshape(k, k), (D, k, k))
    else:
        TP = data.O.T @ np.hstack([wMinv, Zv])
        T, P = TP[:, : k * k].reshape(D, k, k), TP[:, k * k:].reshape(D, k, k)
    term_det = np.einsum("da,dab->db", W, T)
    term_quad = (data.X0.T @ v - np.einsum("da,dab->db", W, P)) / sigma2
    gW = term_quad - term_det
    # dl/dsigma2 = -1/2 sum_i w_i (tr A_i^{-1} - |r_i|^2); |x_i - W_i z_i|^2 = xx_i - 2 z_i'b_i + z_i'G_i z_i.
    tr_Ainv = (data.d_obs - k) / sigma2 + np.trace(Minv, axis1=1, axis2=2)
    resid = data.xx - 2.0 * np.einsum("ni,ni->n", Z, B) + np.einsum("ni,nij,nj->n", Z, G, Z)
    gs2 = -0.5 * float(wts @ (tr_Ainv - resid / sigma2**2))
    return value, gW, gs2


def observed_loglik(X, Y, W, sigma2, gamma):
    """PCPCA objective of the observed data: log p(X^o | W, s2) - gamma log p(Y^o | W, s2).

    Parameters
    ----------
    X : (n, D) centred target data, NaN = missing
    Y : (m, D) centred background data, NaN = missing
    W : (D, k)
    sigma2 : float > 0
    gamma : float >= 0

    Returns
    -------
    float, the objective of the paper's last section (with its log(2 pi) terms).
    """
    data = _stack(np.asarray(X, float), np.asarray(Y, float), gamma)
    return _loglik_and_grad(np.asarray(W, float), float(sigma2), data, grad=False)[0]


def _maximise(W0, sigma2_0, data, max_iter, tol):
    """L-BFGS on theta = (vec W, log sigma2) for the observed-data objective.

    Returns ``(W, sigma2, result, trace)``; ``trace`` holds the objective at the start and
    after every accepted iteration.
    """
    D, k = W0.shape
    scale = float(np.sum(data.wts[data.wts > 0]))  # per-target-cell objective keeps gradients O(1)

    def fun(theta):
        W = theta[:-1].reshape(D, k)
        s2 = float(np.exp(theta[-1]))
        value, gW, gs2 = _loglik_and_grad(W, s2, data)
        g = np.concatenate([gW.ravel(), [gs2 * s2]])
        return -value / scale, -g / scale

    theta0 = np.concatenate([W0.ravel(), [np.log(sigma2_0)]])
    trace = [-fun(theta0)[0] * scale]

    def callback(intermediate_result):
        trace.append(-float(intermediate_result.fun) * scale)

    # One BLAS thread: the products are skinny (k columns) and memory-bound, and L-BFGS-B's own
    # tiny BLAS calls stall on thread hand-offs when cores are shared (measured on 2 busy cores:
    # 30 iterations at 4000 cells x 500 genes took 13-18 s with 2 threads, 2.7-3.6 s with 1).
    with np.errstate(over="ignore", invalid="ignore"), blas_threads(1):
        res = optimize.minimize(
            fun, theta0, jac=True, method="L-BFGS-B", callback=callback,
            options={"maxiter": max_iter, "ftol": tol, "gtol": tol, "maxcor": 20},
        )
    W = res.x[:-1].reshape(D, k)
    return W, float(np.exp(res.x[-1])), res, np.asarray(trace)


# --------------------------------------------------------------------------- estimator



def _check_groups(X, Y, k):
    """Check a target/background pair for PCPCA.

    :func:`scontrast.core.check_pair` (NaN allowed: missing values, at least 2 cells per
    group), plus what PCPCA needs: no NaN in sparse input (see :func:`_check_cells`) and
    k below the number of genes.

    Returns
    -------
    X : (n, D), Y : (m, D), float64 (dense ndarray or CSR); has_nan : bool
    """
    X, Y = check_pair(X, Y, min_rows=2, allow_nan=True)
    (X, xnan), (Y, ynan) = _check_cells(X, "X"), _check_cells(Y, "Y")
    if k >= X.shape[1]:
        raise ScontrastError(f"n_components: must be below the number of genes {X.shape[1]}, got {k}")
    return X, Y, xnan or ynan


def _check_cells(A, name):
    """Cells x genes for PCPCA: NaN marks a missing value in dense input only.

    A sparse zero cannot be told from a missing value, so sparse input must not hold NaN.

    Returns
    -------
    A : (N, D) float64 ndarray or CSR; has_nan : bool
    """
    A = check_matrix(A, name, allow_nan=True)
    if sp.issparse(A):
        if np.isnan(A.data).any():
            raise ScontrastError(f"{name}: sparse input contains NaN; pass a dense array to mark missing values")
        return A, False
    return A, bool(np.isnan(A).any())


def _scatters(X, Y):
    """Scatter matrices of both groups, missing entries imputed by the group mean."""
    mx, my = _column_means(X, "X"), _column_means(Y, "Y")
    if not sp.issparse(X):
        X = np.where(np.isnan(X), mx, X)
    if not sp.issparse(Y):
        Y = np.where(np.isnan(Y), my, Y)
    return _Scatter(X, mx), _Scatter(Y, my)


def max_gamma(X, Y, n_components=2, *, eigen_solver="auto", random_state=None):
    """The largest admissible gamma (excluded end of the admissible range).

    gamma is admissible when n - gamma m > 0 and sigma^2 > 0 (see the module docstring
    for the derivation); the range is [0, max_gamma). In gamma' units it is
    ``max_gamma * m / n``. Missing values are imputed by the group means for this bound.
    :meth:`PCPCA.fit` computes the same value (``max_gamma_``) from the matrices it fits with.

    Parameters
    ----------
    X : (n, D) target cells, dense or sparse
    Y : (m, D) background cells
    n_components : int, k
    eigen_solver, random_state : as in :class:`PCPCA`

    Returns
    -------
    float
    """
    k = check_int(n_components, "n_components", 1)
    check_option(eigen_solver, "eigen_solver", _EIGEN_SOLVERS)
    rng = check_random_state(random_state)
    X, Y, _ = _check_groups(X, Y, k)
    Sx, Sy = _scatters(X, Y)
    solver = _resolve_eigen_solver(eigen_solver, X.shape[1], k)
    return _admissible_end(_Spectrum(Sx, Sy, k, solver, rng))


def _check_gamma(gamma, gamma_prime):
    """The contrast-strength rule: ``(value, name)`` of the one that sets gamma.

    ``gamma_prime`` (default 0.5) sets it unless ``gamma`` is given; a given ``gamma``
    replaces ``gamma_prime`` only when that is at its default or None.
    """
    gamma = check_real(gamma, "gamma", 0.0, allow_none=True)
    gamma_prime = check_real(gamma_prime, "gamma_prime", 0.0, allow_none=True)
    if gamma is None:
        if gamma_prime is None:
            raise ScontrastError("gamma, gamma_prime: set one of the two; both are None")
        return gamma_prime, "gamma_prime"
    if gamma_prime is not None and gamma_prime != _GAMMA_PRIME_DEFAULT:
        raise ScontrastError(
            f"gamma, gamma_prime: set one of the two, not both (got gamma={gamma:g}, gamma_prime={gamma_prime:g}; "
            f"gamma replaces gamma_prime only at its default {_GAMMA_PRIME_DEFAULT} or None)"
        )
    return gamma, "gamma"


def _inadmissible(given, value, gamma, n, m, bound, reason, has_nan):
    """The one-line error for a gamma at or above ``bound`` (the message states the bound on both scales)."""
    where = " (missing values imputed by group means)" if has_nan else ""
    gp, bp = gamma * m / n, bound * m / n
    if given == "gamma":
        what = f"gamma={value:.6g} (gamma_prime={gp:.4g})"
        need = f"need gamma < {bound:.6g} (gamma_prime < {bp:.4g})"
    else:
        what = f"gamma_prime={value:.6g} (gamma={gamma:.6g})"
        need = f"need gamma_prime < {bp:.4g} (gamma < {bound:.6g})"
    return (f"{given}: {what} is not admissible for these {n} target and {m} background cells{where}: "
            f"{reason}; {need}; lower it or set on_inadmissible='clip'")


class PCPCA(BaseEstimator):
    """Probabilistic contrastive PCA.

    Parameters
    ----------
    n_components : int, default 2
        Latent dimension k (below the number of genes).
    gamma : float >= 0 or None, default None
        Exponent on the background likelihood (sum scale: C = Xc'Xc - gamma Yc'Yc). When
        given it replaces ``gamma_prime``, which must then be left at its default (or None).
    gamma_prime : float >= 0 or None, default 0.5
        Sample-size-free contrast strength gamma' = gamma m / n (covariance scale:
        C / n = S_x - gamma' S_y; 0 = probabilistic PCA of the target cells). Used
        unless ``gamma`` is given. gamma' < 1 is necessary; the admissible range
        depends on the data (``max_gamma_prime_``).
    solver : {'auto', 'closed_form', 'lbfgs'}, default 'auto'
        'auto' uses the closed form for complete data and L-BFGS on the observed-data
        objective when X or Y has NaN. 'lbfgs' needs dense input.
    eigen_solver : {'auto', 'dense', 'arpack'}, default 'auto'
        'dense' forms and diagonalises the D x D matrix C; 'arpack' finds the top k
        eigenpairs of an implicit (centred) operator. 'auto' picks 'dense' up to 200 genes.
    max_iter : int >= 1, default 1000
        L-BFGS iterations (missing data).
    tol : float > 0, default 1e-9
        L-BFGS tolerance on the relative objective change and the projected gradient.
    on_inadmissible : {'error', 'clip'}, default 'error'
        When the requested gamma is at or above ``max_gamma_``: 'error' raises a
        ``ScontrastError`` stating the bound; 'clip' fits at ``clip_fraction *
        max_gamma_`` instead and warns (``UserWarning``).
    clip_fraction : float in (0, 1), default 0.9
        See ``on_inadmissible``.
    random_state : None, int >= 0 or numpy Generator, default None
        Seeds the ARPACK start vectors.

    Attributes
    ----------
    W_ : (D, k) loadings, orthogonal columns by decreasing norm
    sigma2_ : float, noise variance
    mean_ : (D,) target mean (the model's mean; used by transform, sample, score)
    background_mean_ : (D,) background mean
    gamma_, gamma_prime_ : floats, the exponent used, on both scales (after any clipping)
    gamma_requested_ : float, the requested exponent (gamma scale)
    clipped_ : bool, whether the requested gamma was clipped
    max_gamma_, max_gamma_prime_ : floats, the excluded end of the admissible range on both
        scales (missing values imputed by the group means for it; see :func:`max_gamma`)
    eigenvalues_ : (k,) top eigenvalues of C (closed form / initialisation)
    objective_ : float, the fitted (observed-data) objective l(W, sigma^2)
    solver_ : str, the solver used
    n_iter_ : int, optimiser iterations (0 for the closed form)
    converged_ : bool
    optimizer_message_ : str
    objective_trace_ : (n_iter_ + 1,) objective at each L-BFGS iterate (missing data only)
    n_features_in_ : int, D
    """

    def __init__(self, n_components=2, gamma=None, gamma_prime=_GAMMA_PRIME_DEFAULT, *, solver="auto",
                 eigen_solver="auto", max_iter=1000, tol=1e-9, on_inadmissible="error", clip_fraction=0.9,
                 random_state=None):
        self.n_components = n_components
        self.gamma = gamma
        self.gamma_prime = gamma_prime
        self.solver = solver
        self.eigen_solver = eigen_solver
        self.max_iter = max_iter
        self.tol = tol
        self.on_inadmissible = on_inadmissible
        self.clip_fraction = clip_fraction
        self.random_state = random_state

    # ------------------------------------------------------------------ fitting

    def fit(self, X, Y):
        """Fit W, sigma^2 and the means.

        Parameters
        ----------
        X : (n, D) target cells (dense or sparse; NaN = missing in dense input)
        Y : (m, D) background cells

        Returns
        -------
        self
        """
        return self._fit(X, Y, admissible_range=True)

    def _fit(self, X, Y, admissible_range):
        """:meth:`fit`; with ``admissible_range=False`` the range's end is searched only to word an error.

        Then admissibility is the closed form's existence at the requested gamma (the same
        condition), ``on_inadmissible`` must be 'error', and ``max_gamma_`` /
        ``max_gamma_prime_`` are NaN: for the throw-away fits of :func:`heldout_loglik`,
        which would otherwise repeat the range search's eigenproblems for nothing.
        """
        k = check_int(self.n_components, "n_components", 1)
        value, given = _check_gamma(self.gamma, self.gamma_prime)
        check_option(self.solver, "solver", _SOLVERS)
        check_option(self.eigen_solver, "eigen_solver", _EIGEN_SOLVERS)
        max_iter = check_int(self.max_iter, "max_iter", 1)
        tol = check_real(self.tol, "tol", 0.0, strict_min=True)
        check_option(self.on_inadmissible, "on_inadmissible", _ON_INADMISSIBLE)
        clip_fraction = check_real(self.clip_fraction, "clip_fraction", 0.0, 1.0, strict_min=True, strict_max=True)
        rng = check_random_state(self.random_state)
        X, Y, has_nan = _check_groups(X, Y, k)
        n, D = X.shape
        m = Y.shape[0]
        requested = value if given == "gamma" else value * n / m
        solver = self.solver
        if solver == "auto":
            solver = "lbfgs" if has_nan else "closed_form"
        if solver == "closed_form" and has_nan:
            raise ScontrastError("solver: 'closed_form' cannot handle NaN; use 'lbfgs' or 'auto'")
        if solver == "lbfgs" and (sp.issparse(X) or sp.issparse(Y)):
            raise ScontrastError("solver: 'lbfgs' needs dense X and Y (sparse input has no missing values)")

        Sx, Sy = _scatters(X, Y)
        spec = _Spectrum(Sx, Sy, k, _resolve_eigen_solver(self.eigen_solver, D, k), rng)
        bound = _admissible_end(spec) if admissible_range else None
        gamma, clipped = requested, False
        if bound is not None and requested >= bound:
            if self.on_inadmissible == "error":
                reason = f"n - gamma*m = {n - requested * m:.4g} <= 0"
                if n - requested * m > 0:
                    reason = _closed_form(*spec.top(requested), D, n, m, requested)[2] or "gamma >= max_gamma"
                raise ScontrastError(_inadmissible(given, value, requested, n, m, bound, reason, has_nan))
            gamma, clipped = clip_fraction * bound, True
            warnings.warn(f"PCPCA: gamma_prime {requested * m / n:.4g} is not admissible (bound {bound * m / n:.4g}); "
                          f"clipped to {gamma * m / n:.4g}", UserWarning, stacklevel=3)
        vals, U, rest = spec.top(gamma)
        W, sigma2, reason = _closed_form(vals, U, rest, D, n, m, gamma)
        if reason is not None:  # below the bound but l_k = ... = l_D (ties), or not searched
            bound = _admissible_end(spec) if bound is None else bound
            shown = value if not clipped else gamma if given == "gamma" else gamma * m / n
            raise ScontrastError(_inadmissible(given, shown, gamma, n, m, bound, reason, has_nan))
        self.mean_, self.background_mean_ = Sx.mu, Sy.mu
        self.gamma_, self.gamma_prime_ = float(gamma), float(gamma * m / n)
        self.gamma_requested_, self.clipped_ = float(requested), clipped
        bound = np.nan if bound is None else bound
        self.max_gamma_, self.max_gamma_prime_ = float(bound), float(bound * m / n)
        self.eigenvalues_ = vals
        self.n_features_in_ = D
        self.solver_ = solver

        if solver == "closed_form":
            c = n - gamma * m
            self.W_ = _canonical(W)
            self.sigma2_ = sigma2
            # At the maximiser tr(A^{-1} C) = D c, so the objective has this closed form.
            logdet = float(np.sum(np.log(vals / c))) + (D - k) * np.log(sigma2)
            self.objective_ = -0.5 * c * (D * _LOG_2PI + logdet + D)
            self.n_iter_, self.converged_ = 0, True
            self.optimizer_message_ = "closed form"
            self.objective_trace_ = np.array([self.objective_])
            return self

        data = _stack(dense(X) - Sx.mu, dense(Y) - Sy.mu, gamma)
        W, sigma2, res, trace = _maximise(W, sigma2, data, max_iter, tol)
        value = _loglik_and_grad(W, sigma2, data, grad=False)[0]
        typical = (Sx.trace() / n) / D
        if not np.isfinite(value) or not np.all(np.isfinite(W)) or sigma2 < 1e-10 * typical:
            raise ScontrastError(
                f"gamma: the observed-data objective appears unbounded at gamma={gamma:.6g} "
                f"(gamma'={gamma * m / n:.6g}; sigma^2 -> {sigma2:.3g}); lower gamma"
            )
        self.W_ = _canonical(W)
        self.sigma2_ = sigma2
        self.objective_ = value
        self.n_iter_ = int(res.nit)
        self.converged_ = bool(res.success)
        self.optimizer_message_ = str(res.message)
        self.objective_trace_ = trace
        if not res.success:
            warnings.warn(f"PCPCA: L-BFGS stopped without converging: {res.message}", ConvergenceWarning,
                          stacklevel=3)
        return self

    def fit_transform(self, X, Y):
        """Fit, then return the posterior means of z for the target cells, shape (n, k)."""
        return self.fit(X, Y).transform(X)

    def max_gamma(self, X, Y):
        """The largest admissible gamma for this model's n_components (see :func:`max_gamma`)."""
        return max_gamma(X, Y, self.n_components, eigen_solver=self.eigen_solver,
                         random_state=self.random_state)

    # ------------------------------------------------------------------ using the fit

    def _check_new(self, X):
        """Check new cells against the fitted model; returns (X (N, D), has_nan)."""
        check_is_fitted(self)
        X, has_nan = _check_cells(X, "X")
        if X.shape[1] != self.n_features_in_:
            raise ScontrastError(f"X: has {X.shape[1]} genes, the model was fitted on {self.n_features_in_}")
        return X, has_nan

    def transform(self, X):
        """Posterior mean E[z | x] = (W'W + sigma^2 I)^{-1} W'(x - mean_).

        With NaN the posterior given the observed genes of each cell is used.

        Parameters
        ----------
        X : (N, D) cells, dense or sparse

        Returns
        -------
        (N, k) ndarray
        """
        X, has_nan = self._check_new(X)
        W, s2 = self.W_, self.sigma2_
        if has_nan:
            return _cellwise(W, s2, _observed(X - self.mean_))[3]
        Minv = np.linalg.inv(W.T @ W + s2 * np.eye(W.shape[1]))
        B = X @ W - self.mean_ @ W
        return np.asarray(B) @ Minv.T

    def score_samples(self, X):
        """Log-likelihood of each cell under N(mean_, W W' + sigma^2 I) (observed genes only with NaN).

        Parameters
        ----------
        X : (N, D) cells, dense or sparse

        Returns
        -------
        (N,) ndarray
        """
        X, has_nan = self._check_new(X)
        W, s2 = self.W_, self.sigma2_
        k = W.shape[1]
        if has_nan:
            data = _observed(X - self.mean_)
            _, _, _, _, logdet, quad = _cellwise(W, s2, data)
            return -0.5 * (data.d_obs * _LOG_2PI + logdet + quad)
        D = X.shape[1]
        M = W.T @ W + s2 * np.eye(k)
        Lc = linalg.cholesky(M, lower=True)
        logdet = (D - k) * np.log(s2) + 2.0 * np.sum(np.log(np.diag(Lc)))
        mu = self.mean_
        if sp.issparse(X):
            xx = np.asarray(X.multiply(X).sum(axis=1)).ravel() - 2.0 * (X @ mu) + mu @ mu
            B = np.asarray(X @ W) - mu @ W
        else:
            Xc = X - mu
            xx = np.einsum("ij,ij->i", Xc, Xc)
            B = Xc @ W
        Z = linalg.cho_solve((Lc, True), B.T).T
        quad = (xx - np.einsum("ij,ij->i", B, Z)) / s2
        return -0.5 * (D * _LOG_2PI + logdet + quad)

    def score(self, X):
        """Average log-likelihood of the cells of X (see :meth:`score_samples`)."""
        return float(np.mean(self.score_samples(X)))

    def sample(self, n_samples, random_state=None, noise=True):
        """Generate target-like cells x = W z + mean_ (+ e), z ~ N(0, I_k), e ~ N(0, sigma^2 I).

        Parameters
        ----------
        n_samples : int >= 1
        random_state : None, int >= 0 or numpy Generator
        noise : bool, add the isotropic noise e

        Returns
        -------
        (n_samples, D) ndarray
        """
        check_is_fitted(self)
        n_samples = check_int(n_samples, "n_samples", 1)
        rng = check_random_state(random_state)
        D, k = self.W_.shape
        Z = rng.standard_normal((n_samples, k))
        out = Z @ self.W_.T + self.mean_
        if noise:
            out += np.sqrt(self.sigma2_) * rng.standard_normal((n_samples, D))
        return out


# --------------------------------------------------------------------------- held-out comparison


def heldout_loglik(estimator, X, Y, holdout_fraction=0.2, random_state=None):
    """Held-out log-likelihood of target cells under PCPCA and under probabilistic PCA.

    ``round(holdout_fraction * n)`` target cells, drawn with ``random_state``, are held
    out. Two models are fitted on the other target cells and all background cells: a
    clone of ``estimator`` at its fitted ``gamma_prime_`` (the gamma' it used, after any
    clipping) and the same at gamma' = 0 (PPCA); both with ``on_inadmissible='error'``, so
    the comparison is made at that gamma' or not at all. Each scores the held-out cells
    (:meth:`PCPCA.score`, mean log-likelihood per cell).

    Parameters
    ----------
    estimator : fitted :class:`PCPCA`
    X : (n, D) target cells (those it was fitted on); dense (NaN = missing) or CSR
    Y : (m, D) background cells
    holdout_fraction : float in [0, 1); 0 skips the comparison
    random_state : None, int >= 0 or numpy Generator; draws the split

    Returns
    -------
    dict with ``n_heldout`` (int), ``heldout_loglik`` and ``heldout_loglik_ppca`` (floats,
    NaN when the split is too small or a fit on it fails) and ``heldout_note`` (str: why a
    value is NaN, '' when none is).
    """
    check_is_fitted(estimator)
    holdout_fraction = check_real(holdout_fraction, "holdout_fraction", 0.0, 1.0, strict_max=True)
    rng = check_random_state(random_state)
    X, _ = _check_cells(X, "X")
    out = {"n_heldout": 0, "heldout_loglik": float("nan"), "heldout_loglik_ppca": float("nan"),
           "heldout_note": ""}
    if holdout_fraction == 0:
        out["heldout_note"] = "holdout_fraction=0"
        return out
    n = X.shape[0]
    n_test = int(round(holdout_fraction * n))
    out["n_heldout"] = n_test
    if n_test < 1 or n - n_test < 2:
        out["heldout_note"] = f"split of {n} target cells too small for holdout_fraction={holdout_fraction}"
        return out
    perm = rng.permutation(n)
    test, train = np.sort(perm[:n_test]), np.sort(perm[n_test:])
    Xtr, Xte = X[train], X[test]
    notes = []
    for key, gp in (("heldout_loglik", estimator.gamma_prime_), ("heldout_loglik_ppca", 0.0)):
        model = clone(estimator).set_params(gamma=None, gamma_prime=gp, on_inadmissible="error")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # convergence of the split fit is reported by the main fit
                model._fit(Xtr, Y, admissible_range=False)  # only W, sigma^2 and the means are needed
        except ValueError as exc:
            notes.append(f"{key}: {exc}.")
            continue
        out[key] = model.score(Xte)
    out["heldout_note"] = " ".join(notes)
    return out
