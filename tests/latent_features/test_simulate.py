"""Draws from the Indian buffet process."""

from __future__ import annotations

import numpy as np
import pytest

from scontrast.latent_features._simulate import sample_ibp


def test_sample_ibp_matches_the_prior():
    alpha, n = 2.0, 6
    ks = [sample_ibp(n, alpha, random_state=s).shape[1] for s in range(3000)]
    assert np.mean(ks) == pytest.approx(alpha * sum(1 / i for i in range(1, n + 1)), rel=0.05)  # K ~ Poisson(a H_N)
    rows = np.concatenate([sample_ibp(n, alpha, random_state=s).sum(axis=1) for s in range(1000)])
    assert rows.mean() == pytest.approx(alpha, rel=0.06)  # each customer takes Poisson(alpha) dishes
