"""FARO loss (_loss.py): brute force, metric properties, the expected loss."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from scontrast.fangs._loss import expected_loss, faro_cost_matrix, faro_loss

from ._helpers import rand_fa


def hamming_literal(E, S, a):
    """Generalised Hamming distance counted entry by entry (no matrix algebra)."""
    cost = 0.0
    for i in range(E.shape[0]):
        for j in range(E.shape[1]):
            if E[i, j] == 1 and S[i, j] == 0:
                cost += a
            elif E[i, j] == 0 and S[i, j] == 1:
                cost += 2 - a
    return cost


def brute_force(E, S, a):
    """Pad with zero columns, then the minimum over every column permutation of the sample."""
    k = max(E.shape[1], S.shape[1])
    E = np.pad(E, ((0, 0), (0, k - E.shape[1])))
    S = np.pad(S, ((0, 0), (0, k - S.shape[1])))
    if k <= 4:  # literal: permute the matrix and count
        return min(hamming_literal(E, S[:, list(p)], a) for p in itertools.permutations(range(k)))
    # cost matrix by explicit loops, then all K! alignments vectorised
    C = np.array([[hamming_literal(E[:, [j]], S[:, [l]], a) for l in range(k)] for j in range(k)])
    perms = np.array(list(itertools.permutations(range(k))))
    return float(C[np.arange(k), perms].sum(axis=1).min())


@pytest.mark.parametrize("a", [0.5, 1.0, 1.5])
def test_faro_loss_equals_brute_force(a):
    rng = np.random.default_rng(int(a * 10))
    for trial in range(60):
        n = int(rng.integers(1, 15))
        k1, k2 = (int(x) for x in rng.integers(0, 8, size=2))
        if trial < 6:  # make sure the largest case K = 7 is covered on both sides
            k1, k2 = 7, int(rng.integers(0, 8))
        E, S = rand_fa(rng, n, k1, rng.uniform(0.1, 0.7)), rand_fa(rng, n, k2, rng.uniform(0.1, 0.7))
        assert faro_loss(E, S, a) == pytest.approx(brute_force(E, S, a)), (trial, E, S)


def test_faro_loss_known_answer():
    E = np.array([[1, 0], [1, 1], [0, 1]])
    S = np.array([[0, 1], [1, 1], [1, 0]])  # S's columns swapped and row 3 of feature 1 off
    # aligned: E col 0 <-> S col 1 (equal), E col 1 <-> S col 0: E (0,1,1) vs S (0,1,1)? S col 0 = (0,1,1)
    assert faro_loss(E, S) == 0.0
    S2 = np.array([[0, 1], [1, 1], [0, 0]])
    # best alignment leaves one entry estimate 1 / sample 0: cost a
    assert faro_loss(E, S2, a=0.5) == pytest.approx(0.5)
    assert faro_loss(S2, E, a=0.5) == pytest.approx(1.5)
    C = faro_cost_matrix(E, S2, a=1.0)
    assert C.shape == (2, 2)
    assert C[1, 0] == pytest.approx(1.0) and C[0, 1] == pytest.approx(0.0)


def test_padding_and_column_order_do_not_matter():
    rng = np.random.default_rng(1)
    Z = rand_fa(rng, 30, 5)
    assert faro_loss(Z, Z[:, rng.permutation(5)]) == 0.0
    assert faro_loss(Z, np.hstack([Z, np.zeros((30, 3), np.uint8)])) == 0.0
    assert faro_loss(np.zeros((30, 0)), Z, a=1.0) == pytest.approx(Z.sum())
    assert faro_loss(Z, np.zeros((30, 0)), a=0.5) == pytest.approx(0.5 * Z.sum())


def test_metric_at_a_equal_one():
    rng = np.random.default_rng(2)
    fas = [rand_fa(rng, 12, int(rng.integers(0, 6)), rng.uniform(0.2, 0.6)) for _ in range(25)]
    for A, B in itertools.combinations(fas, 2):
        assert faro_loss(A, B) == pytest.approx(faro_loss(B, A))
    n_triples = 0
    for A, B, C in itertools.permutations(fas[:14], 3):
        assert faro_loss(A, B) + faro_loss(B, C) >= faro_loss(A, C) - 1e-9
        n_triples += 1
    assert n_triples == 14 * 13 * 12
    # identity of indiscernibles: positive unless equal up to columns
    for A, B in itertools.combinations(fas[:10], 2):
        same = sorted(map(bytes, A[:, A.any(0)].T)) == sorted(map(bytes, B[:, B.any(0)].T))
        assert (faro_loss(A, B) == 0) == same


@pytest.mark.parametrize("a", [0.5, 1.5])
def test_not_symmetric_when_a_differs_from_one(a):
    rng = np.random.default_rng(3)
    fas = [rand_fa(rng, 10, int(rng.integers(1, 5)), rng.uniform(0.1, 0.7)) for _ in range(15)]
    asymmetric = 0
    for A, B in itertools.combinations(fas, 2):
        # the optimal alignment does not depend on a, so L(A,B) - L(B,A) = (a - b)(|A| - |B|)
        diff = faro_loss(A, B, a) - faro_loss(B, A, a)
        assert diff == pytest.approx((a - (2 - a)) * (int(A.sum()) - int(B.sum())))
        asymmetric += abs(diff) > 1e-9
    assert asymmetric > 50
    for A, B, C in itertools.permutations(fas[:8], 3):  # still a quasi-metric
        assert faro_loss(A, B, a) + faro_loss(B, C, a) >= faro_loss(A, C, a) - 1e-9


def test_expected_loss_is_the_mean_loss():
    rng = np.random.default_rng(5)
    samples = [rand_fa(rng, 20, int(rng.integers(0, 6))) for _ in range(15)]
    est = rand_fa(rng, 20, 3)
    for a in (0.5, 1.0, 1.5):
        assert expected_loss(samples, est, a) == pytest.approx(np.mean([faro_loss(est, s, a) for s in samples]))
