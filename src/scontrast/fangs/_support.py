"""Reading an estimate against the samples and the data: per-chain support and loadings of its features."""

from __future__ import annotations

import numpy as np

from .._matching import feature_support  # noqa: F401  (public here too: scontrast.fangs.feature_support)
from ..core import ScontrastError, check_real
from ..feature_samples import _as_binary


def _check_loadings_params(sigma_x, sigma_a) -> tuple[float, float]:
    """The checked parameters of :func:`feature_loadings`, before any data check."""
    return (check_real(sigma_x, "sigma_x", 0.0, strict_min=True),
            check_real(sigma_a, "sigma_a", 0.0, strict_min=True))


def feature_loadings(X, estimate, sigma_x: float, sigma_a: float, intercept: bool = False) -> np.ndarray:
    """Posterior mean of the loadings given an allocation: (K, D).

    For the linear-Gaussian model X = Z A + E (E ~ N(0, sigma_x^2), A ~ N(0, sigma_a^2)),
    A | Z, X has mean (Z'Z + (sigma_x / sigma_a)^2 I)^-1 Z'X per column; here Z is the
    estimate (N, K) and X (N, D) the matrix the sampler explained, so row k is the
    change feature k makes to each column (gene), in X's units. With ``intercept`` the
    model has a baseline shared by all cells (a column of ones with the same prior, as in
    ``LinearGaussianIBP(intercept=True)``): row k is then the change from the baseline.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.fangs import feature_loadings
    >>> rng = np.random.default_rng(0)
    >>> Z = (rng.random((200, 1)) < 0.5).astype(np.uint8)
    >>> X = Z @ np.array([[2.0, 0.0, -1.0]]) + rng.normal(scale=0.1, size=(200, 3))   # the feature adds (2, 0, -1)
    >>> (np.round(feature_loadings(X, Z, sigma_x=0.1, sigma_a=1.0), 1) + 0.0).tolist()
    [[2.0, 0.0, -1.0]]
    """
    sigma_x, sigma_a = _check_loadings_params(sigma_x, sigma_a)
    E = _as_binary(estimate, "estimate").astype(np.float64)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] != E.shape[0]:
        raise ScontrastError(f"X: expected {E.shape[0]} rows (the estimate's), got shape {X.shape}")
    k = E.shape[1]
    if k == 0:
        return np.zeros((0, X.shape[1]))
    if intercept:
        E = np.hstack([np.ones((E.shape[0], 1)), E])
    P = E.T @ E + (sigma_x / sigma_a) ** 2 * np.eye(E.shape[1])
    return np.linalg.solve(P, E.T @ X)[E.shape[1] - k:]
