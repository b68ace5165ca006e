"""Simulated target and background data with a known contrast (tests and benchmarks)."""

from __future__ import annotations

import numpy as np


def readme_data(seed=0, n=400, d=30):
    """The contrastive README example: background sd 10/3/1 on dims 0-9/10-19/20-29; four
    target groups of n/4 with means (0,0), (0,3), (6,0), (6,3) on dims 10-19 and 20-29.

    Returns X (n, d) target, Y (n, d) background, labels (n,).
    """
    rng = np.random.default_rng(seed)
    Y = np.zeros((n, d))
    Y[:, 0:10] = rng.normal(0, 10, (n, 10))
    Y[:, 10:20] = rng.normal(0, 3, (n, 10))
    Y[:, 20:30] = rng.normal(0, 1, (n, 10))
    X = np.zeros((n, d))
    X[:, 0:10] = rng.normal(0, 10, (n, 10))
    q = n // 4
    labels = np.repeat(np.arange(4), q)
    for g, (a, b) in enumerate([(0, 0), (0, 3), (6, 0), (6, 3)]):
        X[g * q:(g + 1) * q, 10:20] = rng.normal(a, 1, (q, 10))
        X[g * q:(g + 1) * q, 20:30] = rng.normal(b, 1, (q, 10))
    return X, Y, labels


def synthetic(n, m, d, seed=0):
    """Gene-expression-like dense data: heteroscedastic genes (sd log-normal), ten shared
    factors of decreasing strength in both groups, and in the target four groups with README-style
    mean shifts (6 and 3 noise sd) on two blocks of ten random genes.

    Returns X (n, d), Y (m, d), labels (n,).
    """
    rng = np.random.default_rng(seed)
    sd = np.exp(rng.normal(0, 0.5, d))
    load = rng.normal(size=(10, d)) * np.linspace(1.5, 0.3, 10)[:, None]
    Y = rng.normal(size=(m, 10)) @ load + rng.normal(size=(m, d)) * sd
    X = rng.normal(size=(n, 10)) @ load + rng.normal(size=(n, d)) * sd
    labels = rng.integers(0, 4, n)
    genes = rng.choice(d, 20, replace=False)
    X[:, genes[:10]] += 6 * (labels >= 2)[:, None] * sd[genes[:10]]
    X[:, genes[10:]] += 3 * (labels % 2)[:, None] * sd[genes[10:]]
    return X, Y, labels
