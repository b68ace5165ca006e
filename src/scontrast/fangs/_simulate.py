"""Simulated posterior samples of a feature allocation around a known truth (tests and benchmarks)."""

from __future__ import annotations

import numpy as np


def posterior_like_samples(n, k, b, flip=0.05, rng=None):
    """B posterior-like feature allocations around a random truth.

    The truth is N x K with feature frequencies in [0.1, 0.5]; each sample
    flips each entry with probability ``flip``, drops each feature with
    probability 0.1, adds a spurious feature (frequency 0.05) with
    probability 0.3 and shuffles its columns, so K_b varies.
    Returns ``(truth, samples)``.
    """
    rng = np.random.default_rng(rng)
    truth = (rng.random((n, k)) < rng.uniform(0.1, 0.5, size=k)).astype(np.uint8)
    samples = []
    for _ in range(b):
        s = truth ^ (rng.random(truth.shape) < flip).astype(np.uint8)
        s = s[:, rng.random(k) > 0.1]
        if rng.random() < 0.3:
            s = np.hstack([s, (rng.random((n, 1)) < 0.05).astype(np.uint8)])
        samples.append(np.ascontiguousarray(s[:, rng.permutation(s.shape[1])]))
    return truth, samples
