"""Data shared by the QUADRO tests."""

import numpy as np


def _random_quadratic(d, rng):
    B = rng.standard_normal((d, d))
    Omega = 0.5 * (B + B.T)
    delta = rng.standard_normal(d)
    mu = rng.standard_normal(d)
    A = rng.standard_normal((d, d))
    Sigma = A @ A.T / d + 0.5 * np.eye(d)
    return Omega, delta, mu, Sigma


def _quadratic_problem(n, rng, d=4):
    """Equal means; class 'b' has variances (3, 3, 1, 1), class 'a' the identity."""
    s2 = np.r_[3.0, 3.0, np.ones(d - 2)]
    X = np.vstack([rng.standard_normal((n, d)), rng.standard_normal((n, d)) * np.sqrt(s2)])
    y = np.repeat(np.array(["a", "b"]), n)
    return X, y, s2


def _imbalanced(n1, n2, d, rng):
    """Class 1 N(0, I); class 2 (rare) with variances 4 on genes 0-1 and mean 1 on gene 2."""
    X1 = rng.standard_normal((n1, d))
    X2 = rng.standard_normal((n2, d))
    X2[:, :2] *= 2.0
    X2[:, 2] += 1.0
    return np.vstack([X1, X2]), np.r_[np.zeros(n1, dtype=int), np.ones(n2, dtype=int)]
