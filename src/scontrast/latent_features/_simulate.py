"""Simulated data: draws from the Indian buffet process and from the linear-Gaussian model."""

from __future__ import annotations

import numpy as np

from ..core import check_random_state


def sample_ibp(n: int, alpha: float, random_state=None, max_features: int | None = None) -> np.ndarray:
    """Draw Z (n, K) uint8 from the Indian buffet process (the restaurant construction).

    Customer i takes each previous dish k with probability m_k / i and
    Poisson(alpha / i) new dishes; ``max_features`` truncates K.

    Examples
    --------
    >>> from scontrast.latent_features import sample_ibp
    >>> Z = sample_ibp(20, alpha=2.0, random_state=0)
    >>> Z.shape[0], Z.dtype.name                            # one row per cell, as many features as drawn
    (20, 'uint8')
    """
    rng = check_random_state(random_state)
    cols: list[list[int]] = []
    counts: list[int] = []
    for i in range(1, n + 1):
        for k in range(len(cols)):
            if rng.random() < counts[k] / i:
                cols[k].append(i - 1)
                counts[k] += 1
        for _ in range(rng.poisson(alpha / i)):
            if max_features is not None and len(cols) >= max_features:
                break
            cols.append([i - 1])
            counts.append(1)
    Z = np.zeros((n, len(cols)), dtype=np.uint8)
    for k, rows in enumerate(cols):
        Z[rows, k] = 1
    return Z


def simulate_linear_gaussian(Z, n_dims: int, sigma_x: float = 0.5, sigma_a: float = 1.0,
                             random_state=None) -> tuple[np.ndarray, np.ndarray]:
    """Data from the linear-Gaussian model: X = Z A + noise.

    Returns ``(X (N, n_dims), A (K, n_dims))``.

    Examples
    --------
    >>> from scontrast.latent_features import sample_ibp, simulate_linear_gaussian
    >>> Z = sample_ibp(30, alpha=2.0, random_state=0)
    >>> X, A = simulate_linear_gaussian(Z, n_dims=5, random_state=0)   # X = Z A + noise
    >>> X.shape, A.shape == (Z.shape[1], 5)
    ((30, 5), True)
    """
    rng = check_random_state(random_state)
    Z = np.asarray(Z, dtype=np.float64)
    A = rng.normal(0.0, sigma_a, size=(Z.shape[1], n_dims))
    X = Z @ A + rng.normal(0.0, sigma_x, size=(Z.shape[0], n_dims))
    return X, A

