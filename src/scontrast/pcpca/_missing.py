"""The observed-data PCPCA objective for missing values, its gradients and its maximisation.

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
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import optimize

from ..core import blas_threads

_LOG_2PI = float(np.log(2.0 * np.pi))


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

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.stats import multivariate_normal
    >>> from scontrast.pcpca import observed_loglik
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.normal(size=(20, 3)), rng.normal(size=(15, 3))
    >>> W, sigma2 = rng.normal(size=(3, 1)), 0.5
    >>> value = observed_loglik(X, Y, W, sigma2, gamma=0.0)   # gamma = 0: the PPCA log-likelihood of X
    >>> bool(np.isclose(value, multivariate_normal(np.zeros(3), W @ W.T + sigma2 * np.eye(3)).logpdf(X).sum()))
    True
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
    # tiny BLAS calls stall on thread hand-offs when cores are shared (timings in docs/pcpca.md).
    with np.errstate(over="ignore", invalid="ignore"), blas_threads(1):
        res = optimize.minimize(
            fun, theta0, jac=True, method="L-BFGS-B", callback=callback,
            options={"maxiter": max_iter, "ftol": tol, "gtol": tol, "maxcor": 20},
        )
    W = res.x[:-1].reshape(D, k)
    return W, float(np.exp(res.x[-1])), res, np.asarray(trace)
