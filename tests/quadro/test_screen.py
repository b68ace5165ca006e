"""The gene screen: one-gene Rayleigh quotients, co-expression changes, RayleighScreen."""

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from scontrast.quadro._moments import (
    rayleigh_quotient,
)
from scontrast.quadro._screen import RayleighScreen, coexpression_change, marginal_rayleigh


def test_marginal_rayleigh_is_the_one_gene_quadro_optimum():
    rng = np.random.default_rng(31)
    X1 = rng.standard_normal((300, 3)) * [1.0, 1.0, 1.0] + [0.0, 0.0, 2.0]
    X2 = rng.standard_normal((200, 3)) * [1.0, 2.0, 0.5] + [0.5, 1.0, 2.0]
    for gamma, pi in ((0.0, 0.5), (0.7, 0.6)):
        stat = marginal_rayleigh(X1, X2, gamma=gamma, pi=pi)
        for j in range(3):
            m1, m2 = X1[:, j].mean(), X2[:, j].mean()
            v1, v2 = X1[:, j].var(ddof=1), X2[:, j].var(ddof=1)

            args = (np.array([m1]), np.array([[v1]]), np.array([m2]), np.array([[v2]]), gamma, pi)
            # the quotient is scale free: maximise over the direction (cos t, sin t) of (w, b)
            grid = np.linspace(0, np.pi, 2001)
            vals = [rayleigh_quotient(np.array([[np.cos(t)]]), np.array([np.sin(t)]), *args) for t in grid]
            t0 = grid[int(np.argmax(vals))]
            fine = minimize_scalar(lambda t, a=args: -rayleigh_quotient(np.array([[np.cos(t)]]), np.array([np.sin(t)]), *a),
                                   bounds=(t0 - 2e-3, t0 + 2e-3), method="bounded", options={"xatol": 1e-12})
            best = -fine.fun
            assert stat[j] == pytest.approx(best, rel=1e-6), (gamma, j)
    # ranks a variance change and a mean shift above a gene that does not change
    rng = np.random.default_rng(32)
    A = rng.standard_normal((400, 3))
    B = rng.standard_normal((400, 3)) * [1.0, 1.8, 1.0] + [0.6, 0.0, 0.0]
    s = marginal_rayleigh(A, B)
    assert s[0] > 5 * s[2] and s[1] > 5 * s[2]


def test_screen_keeps_genes_that_differ_only_in_coexpression():
    rng = np.random.default_rng(37)
    n, d = 300, 40
    A = rng.standard_normal((n, d))
    B = rng.standard_normal((n, d))
    B[:, 1] = 0.8 * B[:, 0] + 0.6 * B[:, 1]  # same marginals, correlation 0 -> 0.8
    X, y = np.vstack([A, B]), np.r_[np.zeros(n, dtype=int), np.ones(n, dtype=int)]
    z = coexpression_change(A, B)
    # |r2 - r1| / sqrt((1 + (1 + r^2)) / n) for Gaussian genes: 0.8 / sqrt(2.64 / 300) = 8.5, sd about 1
    assert z[0, 1] == z[1, 0] and abs(z[0, 1] - 0.8 / np.sqrt(2.64 / n)) < 3
    off = z[np.triu_indices(d, 1)]
    off = off[off < 10]
    # no change elsewhere: |N(0, 1)| has mean sqrt(2/pi) = 0.80 (780 pairs: se about 0.02, pairs share genes)
    assert abs(off.mean() - np.sqrt(2 / np.pi)) < 0.1
    assert set(np.flatnonzero(RayleighScreen(k=2).fit(X, y).support_)) == {0, 1}
    # marginal changes alone cannot see them
    assert not {0, 1} <= set(np.flatnonzero(RayleighScreen(k=2, n_pair_genes=0).fit(X, y).support_))


def test_screen_scores_are_the_chi2_tail_and_pairs_pass_bonferroni():
    from scipy.stats import chi2

    rng = np.random.default_rng(42)
    n, d = 200, 30
    A = rng.standard_normal((n, d))
    B = rng.standard_normal((n, d)) * np.r_[1.5, np.ones(d - 1)] + np.r_[0, 0.4, np.zeros(d - 2)]
    B[:, 3] = 0.7 * B[:, 2] + np.sqrt(1 - 0.49) * B[:, 3]
    X, y = np.vstack([A, B]), np.r_[np.zeros(n, dtype=int), np.ones(n, dtype=int)]
    s = RayleighScreen(k=10, n_pair_genes=30).fit(X, y)
    stat = s.marginal_ / (0.25 * (2.0 / n))
    np.testing.assert_allclose(s.scores_, -chi2.logsf(stat, 2) / np.log(10), rtol=1e-12)
    z = coexpression_change(A, B)
    iu, ju = np.triu_indices(d, 1)
    sig = {(int(i), int(j)) for i, j in zip(iu, ju, strict=True)
           if chi2.logsf(z[i, j] ** 2, 1) + np.log(iu.size) < np.log(0.05)}
    assert (2, 3) in sig
    assert {(min(i, j), max(i, j)) for i, j, _ in s.pairs_} <= sig


def test_coexpression_change_ignores_two_rare_genes_that_coincide():
    """Two genes expressed in the same two cells of one class (r = 1 by coincidence) and in different cells
    of the other: Fisher's z calls it a perfect co-expression change; the data-based variance does not."""
    rng = np.random.default_rng(44)
    n, d = 200, 6
    A, B = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    A[:, 4:] = 0.0
    B[:, 4:] = 0.0
    A[[3, 9], 4] = 5.0
    A[[3, 9], 5] = 5.0
    B[[3, 9], 4] = 5.0
    B[[20, 40], 5] = 5.0
    B[:, 1] = 0.6 * B[:, 0] + 0.8 * B[:, 1]  # a real change, 0 -> 0.6
    z = coexpression_change(A, B)
    assert z[4, 5] < 2 < z[0, 1]
    # Fisher's z of the same data
    r1, r2 = np.corrcoef(A, rowvar=False)[4, 5], np.corrcoef(B, rowvar=False)[4, 5]
    fisher = abs(np.arctanh(np.clip(r1, -1 + 1e-9, 1 - 1e-9)) - np.arctanh(r2)) / np.sqrt(2 / (n - 3))
    assert fisher > 50


def test_screen_gives_coexpression_the_room_marginal_changes_leave():
    """No gene changes on its own, three pairs change co-expression: all six genes are kept with k = 10
    (a fifth of the places, 2, would keep one pair)."""
    rng = np.random.default_rng(45)
    n, d = 300, 40
    A, B = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    for i in (0, 2, 4):
        B[:, i + 1] = 0.8 * B[:, i] + 0.6 * B[:, i + 1]
    X, y = np.vstack([A, B]), np.r_[np.zeros(n, dtype=int), np.ones(n, dtype=int)]
    s = RayleighScreen(k=10).fit(X, y)
    assert {0, 1, 2, 3, 4, 5} <= set(np.flatnonzero(s.support_))
    assert {(min(i, j), max(i, j)) for i, j, _ in s.pairs_} >= {(0, 1), (2, 3), (4, 5)}
    assert s.support_.sum() == 10
