"""Automatic alpha: subspace affinities and the spectral choice of alphas."""

from __future__ import annotations

import numpy as np

from scontrast.cpca._alpha import select_alphas, subspace_affinity


def test_affinity_and_selection_helpers():
    rng = np.random.default_rng(0)
    q = np.linalg.qr(rng.standard_normal((10, 4)))[0]
    U = np.stack([q[:, :2], q[:, [0, 2]], q[:, 2:]])
    aff = subspace_affinity(U)
    np.testing.assert_allclose(aff, [[1, 0, 0], [0, 1, 0], [0, 0, 1]], atol=1e-12)
    c, s = np.cos(0.3), np.sin(0.3)
    V = np.stack([q[:, :2], np.column_stack([q[:, 0], c * q[:, 1] + s * q[:, 2]])])
    np.testing.assert_allclose(subspace_affinity(V)[0, 1], c, atol=1e-12)
    block = np.kron(np.eye(3), np.ones((4, 4))) * 0.9 + np.eye(12) * 0.1 + 0.01
    chosen, labels = select_alphas(block, 3, random_state=0)
    assert len(chosen) == 2 and 0 not in chosen and len(set(labels[[0, 4, 8]])) == 3
