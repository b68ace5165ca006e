"""The batched Davidson iteration of cPCA against scipy's eigh."""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from scontrast.cpca._alpha import alpha_grid
from scontrast.cpca._eigen import _diagonal_basis_solve

from ._helpers import sin_max_angle


def test_davidson_continuation_matches_eigh_on_random_problems():
    """The batched Davidson with coarse-to-fine starts (shared Rayleigh-Ritz) against
    scipy.linalg.eigh on random symmetric B - alpha diag(lam), including clustered lam."""
    rng = np.random.default_rng(3)
    r = 160
    for trial in range(3):
        F = rng.normal(size=(r, r // 2))
        B = F @ F.T / r + np.diag(rng.uniform(0, 2, r))
        lam = np.sort(rng.gamma(0.5 if trial else 2.0, 1.0, r))
        if trial == 2:
            lam[:20] = lam[0]  # a cluster at the bottom of the background spectrum
        alphas = alpha_grid(20, 2)
        Z, theta, res, its, gram = _diagonal_basis_solve(B.copy(), lam, alphas, 2, 1e-10, 500)
        assert res.max() <= 1e-10
        for i, a in enumerate(alphas):
            w, E = sla.eigh(B - a * np.diag(lam), subset_by_index=[r - 2, r - 1])
            assert sin_max_angle(E, Z[i]) < 1e-7, (trial, a)
            np.testing.assert_allclose(theta[i], w[::-1], rtol=1e-9, atol=1e-9 * np.abs(w).max())
        np.testing.assert_allclose(gram, Z.transpose(1, 0, 2).reshape(r, -1).T @ B @ Z.transpose(1, 0, 2).reshape(r, -1),
                                   atol=1e-9)
