"""The collapsed likelihood (loadings integrated out) and the prior terms of the sampler.

log p(Y | Z) with A ~ N(0, s2a) integrated out, from the Gram matrices G = Z'WZ and H = Z'WY by a
Cholesky factor of G + (v_x / s2a) I (``_cholesky_terms``): ``collapsed_log_likelihood`` and the
moves (death / random birth, complement) use it.

The row sweep's predictive ratio (``_row_sweep``) is the same likelihood seen one cell at a
time (Sherman-Morrison), not a third copy.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
from scipy.special import gammaln


def _cholesky_terms(G, H, ridge: float) -> tuple[float, float]:
    """(sum log diag L, |L^-1 H|^2) with L L' = G + ridge I: the log-determinant and quadratic parts.

    log p(Y | Z) = const - D sum log diag L + |L^-1 H|^2 / (2 v_x) for G = Z'WZ, H = Z'WY,
    ridge = v_x / s2a (the constant holds the K D / 2 log ridge term).
    """
    L = np.linalg.cholesky(G + ridge * np.eye(G.shape[0]))
    half = np.linalg.solve(L, H)  # L^-1 H, so that |half|^2 = tr(H' (G + ridge I)^-1 H)
    return float(np.sum(np.log(np.diag(L)))), float(np.sum(half * half))


def collapsed_log_likelihood(X, Z, sigma_x: float, sigma_a: float) -> float:
    """log p(X | Z, sigma_x, sigma_a) with the loadings A integrated out.

    Griffiths and Ghahramani 2011, eq. 26: with W = Z'Z + (sigma_x / sigma_a)^2 I,
    ``-ND/2 log 2pi - (N-K) D log sigma_x - K D log sigma_a - D/2 log|W|
    - tr(X'X - X'Z W^-1 Z'X) / (2 sigma_x^2)``; equivalently each column of
    X is N(0, sigma_a^2 Z Z' + sigma_x^2 I).

    X (N, D) float, Z (N, K) binary.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.stats import multivariate_normal
    >>> from scontrast.latent_features import collapsed_log_likelihood
    >>> rng = np.random.default_rng(0)
    >>> Z = (rng.random((8, 2)) < 0.5).astype(float)
    >>> X = rng.normal(size=(8, 3))
    >>> value = collapsed_log_likelihood(X, Z, sigma_x=0.5, sigma_a=1.0)
    >>> cov = Z @ Z.T + 0.25 * np.eye(8)                      # each column of X is N(0, sigma_a^2 ZZ' + sigma_x^2 I)
    >>> bool(np.isclose(value, multivariate_normal(np.zeros(8), cov).logpdf(X.T).sum()))
    True
    """
    X = np.asarray(X, dtype=np.float64)
    Z = np.asarray(Z, dtype=np.float64)
    n, d = X.shape
    k = Z.shape[1]
    out = -0.5 * n * d * math.log(2 * math.pi) - (n - k) * d * math.log(sigma_x) - k * d * math.log(sigma_a)
    quad = float(np.sum(X * X))
    if k:
        log_diag, explained = _cholesky_terms(Z.T @ Z, Z.T @ X, (sigma_x / sigma_a) ** 2)
        out -= d * log_diag
        quad -= explained
    return out - quad / (2 * sigma_x**2)


# --------------------------------------------------------------------------- prior terms


def _history_counts(Z) -> np.ndarray:
    """K_h: how many columns of Z share each history (column pattern)."""
    return np.array(list(Counter(col.tobytes() for col in np.ascontiguousarray(Z.T)).values()))


def ibp_log_prob(Z, alpha: float) -> float:
    """log P([Z] | alpha): IBP probability of the left-ordered class of Z.

    Parameters
    ----------
    Z : array-like (N, K), binary; empty columns are ignored
    alpha : float > 0

    Returns
    -------
    float
        ``K log a - sum_h log K_h! - a H_N + sum_k [log (N - m_k)! + log (m_k - 1)! - log N!]``
        (Griffiths and Ghahramani 2011, eq. 14), K_h the number of columns
        with history h.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.latent_features import ibp_log_prob
    >>> # one customer: the number of dishes is Poisson(alpha), so P(no dish) = exp(-alpha), P(one dish) = alpha exp(-alpha)
    >>> round(ibp_log_prob(np.zeros((1, 0)), alpha=2.0), 6), round(ibp_log_prob(np.ones((1, 1)), alpha=2.0), 6)
    (-2.0, -1.306853)
    """
    Z = np.asarray(Z, dtype=np.uint8)
    n = Z.shape[0]
    Z = Z[:, Z.any(axis=0)]
    k = Z.shape[1]
    harmonic = float(np.sum(1.0 / np.arange(1, n + 1)))
    out = k * math.log(alpha) - alpha * harmonic
    if k:
        out -= float(gammaln(_history_counts(Z) + 1.0).sum())
        mk = Z.sum(axis=0).astype(np.float64)
        out += float(np.sum(gammaln(n - mk + 1.0) + gammaln(mk) - gammaln(n + 1.0)))
    return out


def _ordered_log_prob(Z, alpha: float) -> float:
    """log P(Z | alpha) of one ordered matrix (the sampler's state): log P([Z]) + sum_h log K_h!.

    A class [Z] holds K! / prod_h K_h! orderings of its columns, equally likely, so a Metropolis
    move between ordered matrices with the same K needs this ratio, not that of P([Z]): with
    identical columns (K_h > 1) the two differ (e.g. two singletons of the same cell, whose
    complement move makes two distinct columns).
    """
    Z = np.asarray(Z, dtype=np.uint8)
    Z = Z[:, Z.any(axis=0)]
    out = ibp_log_prob(Z, alpha)
    if Z.shape[1]:
        out += float(gammaln(_history_counts(Z) + 1.0).sum())
    return out


def _log_inv_gamma(x, shape, rate):
    return shape * math.log(rate) - math.lgamma(shape) - (shape + 1.0) * math.log(x) - rate / x


def _log_gamma_pdf(x, shape, rate):
    return shape * math.log(rate) - math.lgamma(shape) + (shape - 1.0) * math.log(x) - rate * x


def _gram_log_likelihood(G, H, c_ratio: float, v_x: float, k_term: bool = True) -> float:
    """log p(Y | Z) up to a term free of Z, from G = Z'WZ (K, K) and H = Z'WY (K, D).

    ``K D / 2 log c_ratio - D sum log diag L + |L^-1 H|^2 / (2 v_x)``, c_ratio = v_x / s2a;
    ``k_term=False`` leaves out the first term, for the moves that keep K (complement).
    """
    k, d = H.shape
    if k == 0:
        return 0.0
    log_diag, explained = _cholesky_terms(G, H, c_ratio)
    if k_term:
        return 0.5 * d * k * math.log(c_ratio) - d * log_diag + explained / (2.0 * v_x)
    return -d * log_diag + explained / (2.0 * v_x)
