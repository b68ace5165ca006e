"""SPARDA's exact 1-D Wasserstein distances, the divergence's gradient and the permuted W2."""


import numpy as np
import ot
import pytest
import scipy.sparse as sp
import scipy.stats

from scontrast.core import ScontrastError
from scontrast.sparda._wasserstein import (
    _permutation_rows,
    _permuted_w2,
    _quantile_grid,
    _sorted_columns,
    divergence_gradient,
    marginal_wasserstein2,
    projected_divergence,
    wasserstein2_1d,
)


@pytest.mark.parametrize("n", [1, 7, 50, 301])
def test_w2_equal_sizes_matches_sorted_pairs_and_pot(n):
    rng = np.random.default_rng(n)
    a, b = rng.normal(size=n), rng.gamma(2.0, size=n)
    ref = np.mean((np.sort(a) - np.sort(b)) ** 2)
    assert wasserstein2_1d(a, b) == pytest.approx(ref, rel=1e-12, abs=1e-15)
    assert wasserstein2_1d(a, b) == pytest.approx(ot.wasserstein_1d(a, b, p=2), rel=1e-10)


@pytest.mark.parametrize("n,m", [(7, 5), (3, 10), (100, 37), (64, 48)])
def test_w2_unequal_sizes_matches_exact_lp_and_pot(n, m):
    rng = np.random.default_rng(n * m)
    a, b = rng.normal(size=n), 1.0 + 2.0 * rng.normal(size=m)
    cost = (a[:, None] - b[None, :]) ** 2
    lp = ot.emd2(np.full(n, 1 / n), np.full(m, 1 / m), cost, numItermax=10**7)
    assert wasserstein2_1d(a, b) == pytest.approx(lp, rel=1e-9)
    assert wasserstein2_1d(a, b) == pytest.approx(ot.wasserstein_1d(a, b, p=2), rel=1e-9)


@pytest.mark.parametrize("n,m", [(7, 5), (100, 37), (10, 10)])
def test_quantile_grid_reproduces_scipy_w1(n, m):
    # the same merged breakpoints with |difference| must give scipy's W1 exactly
    rng = np.random.default_rng(1)
    a, b = rng.exponential(size=n), rng.normal(size=m)
    ia, ib, w = _quantile_grid(n, m)
    assert ia.size <= n + m - 1 and w.sum() == pytest.approx(1.0)
    w1 = w @ np.abs(np.sort(a)[ia] - np.sort(b)[ib])
    assert w1 == pytest.approx(scipy.stats.wasserstein_distance(a, b), rel=1e-12)


def test_w2_hand_case_unequal_sizes():
    # F^-1: 0 on [0,1/2), 1 on [1/2,1); G^-1: 0, 1, 2 on thirds.
    # pieces: [0,1/3) 0 vs 0; [1/3,1/2) 0 vs 1 -> 1/6; [1/2,2/3) 1 vs 1; [2/3,1) 1 vs 2 -> 1/3
    assert wasserstein2_1d([0.0, 1.0], [0.0, 1.0, 2.0]) == pytest.approx(0.5, abs=1e-15)
    assert wasserstein2_1d([1.0, 0.0], [2.0, 0.0, 1.0]) == pytest.approx(0.5, abs=1e-15)
    # a point mass against two points: (0-(-1))^2/2 + (0-1)^2/2 = 1
    assert wasserstein2_1d([0.0], [-1.0, 1.0]) == pytest.approx(1.0)


def test_w2_batched_equals_columnwise_and_marginal():
    rng = np.random.default_rng(2)
    A, B = rng.normal(size=(40, 6)), rng.normal(size=(25, 6)) * 1.5
    batched = wasserstein2_1d(A, B)
    assert batched.shape == (6,)
    np.testing.assert_allclose(batched, [wasserstein2_1d(A[:, j], B[:, j]) for j in range(6)], rtol=1e-12)
    np.testing.assert_allclose(marginal_wasserstein2(A, B), batched, rtol=1e-12)
    np.testing.assert_allclose(marginal_wasserstein2(sp.csr_matrix(A), sp.csr_matrix(B)), batched, rtol=1e-12)
    betas = rng.normal(size=(6, 3))
    np.testing.assert_allclose(projected_divergence(A, B, betas), wasserstein2_1d(A @ betas, B @ betas))


def test_w2_bad_input():
    with pytest.raises(ScontrastError, match="^a, b: empty"):
        wasserstein2_1d([], [1.0])
    with pytest.raises(ScontrastError, match="NaN"):
        wasserstein2_1d([np.nan, 1.0], [1.0])
    with pytest.raises(ScontrastError, match="columns"):
        wasserstein2_1d(np.ones((3, 2)), np.ones((3, 3)))
    with pytest.raises(ScontrastError, match="1-D"):
        wasserstein2_1d(np.ones((3, 2)), np.ones(3))


@pytest.mark.parametrize("n,m", [(30, 30), (41, 23)])
def test_tightening_gradient_matches_finite_differences(n, m):
    rng = np.random.default_rng(n + m)
    X = rng.normal(size=(n, 5))
    Y = rng.normal(size=(m, 5)) @ rng.normal(size=(5, 5)) * 0.7
    beta = rng.normal(size=5)
    D, g = divergence_gradient(X, Y, beta)
    assert D == pytest.approx(projected_divergence(X, Y, beta), rel=1e-12)
    # continuous data: no ties, so the sorted matching is locally constant and
    # central differences are exact up to rounding
    h = 1e-6
    fd = np.array([(projected_divergence(X, Y, beta + h * e) - projected_divergence(X, Y, beta - h * e)) / (2 * h)
                   for e in np.eye(5)])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    # the gradient is 2 W_M beta for the sorted plan M: Euler's identity for a quadratic form
    assert beta @ g == pytest.approx(2 * D, rel=1e-10)


def test_permuted_w2_values_are_w2_of_splits_of_the_pool():
    # every permuted statistic is W2^2 between some n of the pooled values and the others
    z = np.array([0.3, -1.2, 2.5, 0.9, 4.0, -0.1])
    import itertools

    possible = {round(wasserstein2_1d(z[list(c)], np.delete(z, list(c))), 12)
                for c in itertools.combinations(range(6), 2)}
    null = _permuted_w2(z, 2, 500, np.random.default_rng(0), batch=64)
    assert null.shape == (500,)
    assert {round(v, 12) for v in null} <= possible
    # a uniform permutation hits each of the 15 splits with probability 1/15: all appear
    assert len({round(v, 12) for v in null}) == len(possible)


def _csr_with_duplicates(A: np.ndarray, dtype) -> sp.csr_matrix:
    """``A`` as CSR whose rows store their values in reverse column order, plus an explicit zero and a
    duplicate entry (0.5 and -0.25 at row 1, column 4; densifying sums them), as some readers leave it."""
    data, indices, indptr = [], [], [0]
    for i, row in enumerate(A):
        cols = np.flatnonzero(row)[::-1]
        data += list(row[cols]) + ([0.0, 0.5, -0.25] if i == 1 else [])
        indices += list(cols) + ([3, 4, 4] if i == 1 else [])
        indptr.append(len(data))
    return sp.csr_matrix((np.array(data, dtype=dtype), np.array(indices), np.array(indptr)), shape=A.shape)


@pytest.mark.parametrize("n,m,dtype", [(57, 40, np.float64), (48, 48, np.float32), (300, 7, np.float64)])
def test_marginal_w2_of_sparse_groups_is_that_of_the_dense_ones_bit_for_bit(n, m, dtype):
    # the sparse path sorts only the stored values: it must give exactly what densifying gives
    # (the screening ranks genes with ties: every bit counts), over two chunks of 256 genes
    rng = np.random.default_rng(n * m)
    d = 300
    A, B = (np.round(rng.normal(size=(r, d)), 1) * (rng.random((r, d)) < 0.4) for r in (n, m))
    A[:, 0] = 0.0  # a gene without a value in one group
    Xs, Ys = _csr_with_duplicates(A, dtype), _csr_with_duplicates(B, dtype)
    before = Xs.copy()
    dense = np.concatenate([wasserstein2_1d(Xs[:, s:s + 256].toarray(), Ys[:, s:s + 256].toarray())
                            for s in range(0, d, 256)])
    assert np.array_equal(marginal_wasserstein2(Xs, Ys), dense)
    # the input is left as it was (duplicates are summed on a copy)
    assert Xs.data.size == before.data.size and np.array_equal(Xs.data, before.data)
    # a sparse group against a dense one takes the dense path: the same numbers
    assert np.array_equal(marginal_wasserstein2(Xs, Ys.toarray()), dense)


def test_sorted_columns_are_the_sorted_dense_columns():
    rng = np.random.default_rng(4)
    A = np.round(rng.normal(size=(30, 9)), 1) * (rng.random((30, 9)) < 0.5)
    A[:, 2] = 0.0
    A[:, 3] = np.abs(A[:, 3]) + 1.0  # no zero at all
    A[:, 4] = -np.abs(A[:, 4])  # no positive value
    np.testing.assert_array_equal(_sorted_columns(sp.csc_matrix(A), 1, 8), np.sort(A[:, 1:8], axis=0))


def test_sparse_marginal_w2_refuses_nan():
    X = sp.csr_matrix(np.array([[np.nan, 1.0], [0.0, 2.0]]))
    with pytest.raises(ScontrastError, match="NaN"):
        marginal_wasserstein2(X, sp.csr_matrix(np.ones((3, 2))))


def test_permutation_rows_are_numpys_permuted_rows_and_draw_the_same():
    for N in (2, 7, 1000):
        a, b = np.random.default_rng(N), np.random.default_rng(N)
        old = a.permuted(np.broadcast_to(np.arange(N), (5, N)), axis=1)
        assert np.array_equal(_permutation_rows(b, 5, N), old)
        assert a.random() == b.random()  # the generators are left in the same state


def _permuted_w2_reference(z, n, n_permutations, rng, batch):
    """The split test's null computed directly: whole permutations by numpy's ``permuted``, then sorts."""
    N = z.shape[0]
    ia, ib, w = _quantile_grid(n, N - n)
    out = np.empty(n_permutations)
    for s in range(0, n_permutations, batch):
        e = min(s + batch, n_permutations)
        zp = z[rng.permuted(np.broadcast_to(np.arange(N), (e - s, N)), axis=1)]
        diff = np.sort(zp[:, :n], axis=1)[:, ia] - np.sort(zp[:, n:], axis=1)[:, ib]
        out[s:e] = (diff * diff) @ w
    return out


@pytest.mark.parametrize("n,N", [(40, 95), (50, 100)])
def test_permuted_w2_equals_the_direct_computation_bit_for_bit(n, N):
    z = np.round(np.random.default_rng(n).normal(size=N), 1)  # ties
    got = _permuted_w2(z, n, 300, np.random.default_rng(9), batch=64)
    assert np.array_equal(got, _permuted_w2_reference(z, n, 300, np.random.default_rng(9), batch=64))
