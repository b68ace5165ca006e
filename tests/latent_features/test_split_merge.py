"""Split-merge (and restricted-Gibbs birth) moves reach better representations.

Their detailed balance against the exact posterior is in ``test_moves`` (one harness for every move kernel).
"""

from __future__ import annotations

import numpy as np

from scontrast.latent_features._likelihood import collapsed_log_likelihood, ibp_log_prob
from scontrast.latent_features._moves import _restricted_gibbs_birth_death
from scontrast.latent_features._row_sweep import _seed_numba
from scontrast.latent_features._split_merge import _split_merge


def test_split_merge_and_birth_moves_find_better_representations():
    """Two disjoint programmes (30% and 28% of 300 cells, their own loadings). Held as one feature
    (their union), the split-merge moves split it; with one of them missing, a birth adds a feature.
    Both raise the collapsed log posterior (fixed hyperparameters) by far more than its noise."""
    rng = np.random.default_rng(0)
    n, d = 300, 10
    z1 = rng.random(n) < 0.3
    z2 = (rng.random(n) < 0.4) & ~z1
    X = 0.5 * rng.standard_normal((n, d)) + np.outer(z1, rng.normal(0, 1.5, d)) + np.outer(z2, rng.normal(0, 1.5, d))
    X = X - X.mean(axis=0)

    def log_post(Z, K):
        return collapsed_log_likelihood(X, Z[:, :K].astype(float), 0.5, 1.0) + ibp_log_prob(Z[:, 1:K], 1.0)

    for seed in range(3):
        for kernel, start in ((_split_merge, z1 | z2), (_restricted_gibbs_birth_death, z1)):
            Z = np.zeros((n, 6), np.uint8)
            Z[:, 0] = 1
            Z[:, 1] = start
            m = Z.sum(axis=0).astype(np.int64)
            before = log_post(Z, 2)
            _seed_numba(seed)
            K, acc = kernel(X, Z, m, 2, np.ones(n), 0.25, 1.0, 1.0, 1, 5, 100, 3)
            assert K >= 3 and acc >= 1 and np.array_equal(m[:K], Z[:, :K].sum(axis=0))
            assert log_post(Z, K) > before + 100, (kernel, seed, log_post(Z, K) - before)
