"""The collapsed likelihood and the IBP prior against their definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import multivariate_normal

from scontrast.latent_features._likelihood import collapsed_log_likelihood, ibp_log_prob


def test_ibp_log_prob_known_value_and_invariances():
    Z = np.array([[1, 0, 1], [1, 1, 0], [0, 0, 1]])
    alpha, n = 1.3, 3
    h = 1 + 1 / 2 + 1 / 3
    m = Z.sum(axis=0)
    # Griffiths & Ghahramani eq. 14 by hand: all three histories distinct (K_h! = 1)
    expected = (3 * math.log(alpha) - alpha * h
                + sum(math.lgamma(n - mk + 1) + math.lgamma(mk) - math.lgamma(n + 1) for mk in m))
    assert ibp_log_prob(Z, alpha) == pytest.approx(expected)
    assert ibp_log_prob(Z[:, [2, 0, 1]], alpha) == pytest.approx(expected)
    assert ibp_log_prob(np.hstack([Z, np.zeros((3, 2))]), alpha) == pytest.approx(expected)
    twice = np.hstack([Z, Z[:, [0]]])  # a repeated history: divide by K_h! = 2
    m2 = twice.sum(axis=0)
    expected2 = (4 * math.log(alpha) - alpha * h - math.log(2)
                 + sum(math.lgamma(n - mk + 1) + math.lgamma(mk) - math.lgamma(n + 1) for mk in m2))
    assert ibp_log_prob(twice, alpha) == pytest.approx(expected2)
    assert ibp_log_prob(np.zeros((3, 0)), alpha) == pytest.approx(-alpha * h)


def test_collapsed_log_likelihood_is_the_gaussian_marginal():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 3))
    Z = (rng.random((6, 4)) < 0.5).astype(np.uint8)
    cov = 0.7**2 * (Z @ Z.T) + 0.4**2 * np.eye(6)
    ref = sum(multivariate_normal(np.zeros(6), cov).logpdf(X[:, d]) for d in range(3))
    assert collapsed_log_likelihood(X, Z, 0.4, 0.7) == pytest.approx(ref)
    assert collapsed_log_likelihood(X, Z[:, :0], 0.4, 0.7) == pytest.approx(
        sum(multivariate_normal(np.zeros(6), 0.16 * np.eye(6)).logpdf(X[:, d]) for d in range(3)))
