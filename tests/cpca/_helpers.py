"""Helpers shared by the cPCA tests: principal angles, the reference's directions, equal fits."""

from __future__ import annotations

import numpy as np


def sin_max_angle(A, B):
    """Sine of the largest principal angle between span(A) and span(B) (columns)."""
    qa, qb = np.linalg.qr(A)[0], np.linalg.qr(B)[0]
    # the norm of the part of span(B) outside span(A): accurate for tiny angles, unlike sqrt(1 - cos^2)
    return float(np.linalg.norm(qb - qa @ (qa.T @ qb), 2))


def reference_directions(ref, alpha, d):
    """The reference package's top eigenvectors at alpha, shape (d, k): its projection of the identity."""
    return np.real(ref.cpca_alpha(np.eye(d), alpha))


def assert_same_fit(full, other):
    assert other.residuals_.max() <= 1e-10
    np.testing.assert_allclose(other.affinity_, full.affinity_, atol=1e-7)
    np.testing.assert_array_equal(other.alphas_, full.alphas_)
    for a, b in zip(full.components_, other.components_):
        assert sin_max_angle(a.T, b.T) < 1e-6
    np.testing.assert_allclose(other.grid_explained_contrast_, full.grid_explained_contrast_, rtol=1e-8,
                               atol=1e-9 * np.abs(full.grid_explained_contrast_).max())
