"""SPARDA: exact 1-D Wasserstein, gradients, relaxation pieces, recovery, test calibration."""

import warnings

import anndata as ad
import joblib
import numpy as np
import ot
import pandas as pd
import pytest
import scipy.sparse as sp
import scipy.stats

from scontrast.core import ScontrastError, ScontrastWarning
from scontrast.sparda import (
    SPARDA,
    _half_subsamples,
    _Labellings,
    _min_p_level,
    _optimal_plan,
    _permuted_w2,
    _project_relax,
    _quantile_grid,
    _relabelled_statistics,
    _set_pvalues,
    _simplex_eig,
    _tighten_rows,
    divergence_gradient,
    marginal_wasserstein2,
    projected_divergence,
    relax,
    relax_supergradient,
    stability_selection,
    tighten,
    wasserstein2_1d,
)
from scontrast.tl._sparda import sparda as tl_sparda
from scontrast.tl._sparda import summary_rows


# --------------------------------------------------------------------------- W2
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


# ------------------------------------------------------------------- gradients
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


@pytest.mark.parametrize("n,m", [(12, 12), (12, 9)])
def test_relax_supergradient_equals_brute_force(n, m):
    rng = np.random.default_rng(3)
    d = 4
    X, Y = rng.normal(size=(n, d)), rng.normal(size=(m, d)) + 0.3
    A = rng.normal(size=(d, d))
    B = A @ A.T
    B /= np.trace(B)
    F, G, _ = relax_supergradient(X, Y, B)
    Z = X[:, None, :] - Y[None, :, :]  # (n, m, d)
    cost = np.einsum("ijk,kl,ijl->ij", Z, B, Z)
    M = ot.emd(np.full(n, 1 / n), np.full(m, 1 / m), cost, numItermax=10**7)
    assert F == pytest.approx(np.sum(M * cost), rel=1e-9)
    W = np.einsum("ij,ijk,ijl->kl", M, Z, Z)
    assert np.trace(G @ B) == pytest.approx(F, rel=1e-9)
    # W_M itself may differ between optimal plans only on ties: none here
    np.testing.assert_allclose(G, W, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("n,m", [(30, 30), (200, 200), (30, 20)])
def test_optimal_plan_is_the_exact_optimum(n, m):
    # (30, 30): assignment solver; larger or unequal: warm-startable network simplex
    rng = np.random.default_rng(4)
    C = rng.normal(size=(n, m))
    rows, cols, mass, cost, _ = _optimal_plan(C)
    ref = ot.emd2(np.full(n, 1 / n), np.full(m, 1 / m), C, numItermax=10**8)
    assert cost == pytest.approx(ref, rel=1e-10)
    assert cost == pytest.approx(np.sum(mass * C[rows, cols]), rel=1e-12)
    np.testing.assert_allclose(np.bincount(rows, mass, n), 1 / n)
    np.testing.assert_allclose(np.bincount(cols, mass, m), 1 / m)


@pytest.mark.parametrize("scale", [0.01, 0.3, 5.0])
def test_partial_eigen_projection_is_exact(scale):
    rng = np.random.default_rng(5)
    A = rng.normal(size=(60, 60)) * scale
    A = (A + A.T) / 2
    lam, Q = np.linalg.eigh(A)
    w = ot.utils.proj_simplex(lam)
    ref = (Q * w) @ Q.T
    P, rank = _project_relax(A, 0.0, q=2)
    np.testing.assert_allclose(P, ref, atol=1e-12)
    assert rank == np.count_nonzero(w > 0) == _simplex_eig(A, 2)[0].size
    assert np.trace(P) == pytest.approx(1.0) and np.linalg.eigvalsh(P).min() > -1e-12


# ------------------------------------------------------------ RELAX / tighten
def _planted(n, m, d, genes, kind, rng, effect=1.0, rho=0.85):
    X = rng.normal(size=(n, d))
    Y = rng.normal(size=(m, d))
    g = np.asarray(genes)
    if kind == "mean":
        Y[:, g] += effect
    elif kind == "cor":
        C = np.full((g.size, g.size), rho)
        np.fill_diagonal(C, 1.0)
        Y[:, g] = rng.multivariate_normal(np.zeros(g.size), C, size=m)
    elif kind == "var":
        Y[:, g] *= effect
    return X, Y


def test_relax_bound_and_tightening_never_below_start():
    rng = np.random.default_rng(6)
    X, Y = _planted(120, 120, 8, [0, 1], "cor", rng)
    mu = np.vstack([X, Y]).mean(0)  # pooled: centring each group would erase mean differences
    X, Y = X - mu, Y - mu
    rel = relax(X, Y, 0.0, max_iter=80)
    # the relaxation's value bounds the PDA objective of every unit direction
    for beta in [rel["beta"], np.eye(8)[0], np.ones(8) / np.sqrt(8)]:
        assert projected_divergence(X, Y, beta) <= rel["bound"] + 1e-9
    assert np.all(np.diff(np.maximum.accumulate(rel["history"])) >= 0)
    t0 = tighten(X, Y, rel["beta"], 8, 0.0)
    assert t0["divergence"] >= projected_divergence(X, Y, rel["beta"]) - 1e-12
    assert np.linalg.norm(t0["beta"]) == pytest.approx(1.0)
    for lam in [0.02, 0.2]:
        t = tighten(X, Y, rel["beta"], None, lam)
        assert t["objective"] >= t["start_objective"] - 1e-12
        assert t["objective"] == pytest.approx(t["divergence"] - lam * np.abs(t["beta"]).sum() ** 2)


def test_tightening_respects_cardinality():
    rng = np.random.default_rng(7)
    X, Y = _planted(100, 90, 10, [2, 5, 7], "mean", rng)
    t = tighten(X, Y, np.ones(10) / np.sqrt(10), 3, 0.0)
    assert np.count_nonzero(t["beta"]) == 3
    assert set(np.flatnonzero(t["beta"])) == {2, 5, 7}


def test_recovers_planted_mean_shift_with_cv():
    rng = np.random.default_rng(8)
    genes = [3, 7, 11]
    X, Y = _planted(150, 150, 30, genes, "mean", rng, effect=0.8)
    model = SPARDA(n_lambdas=6, relax_max_iter=30, n_permutations=0, random_state=0).fit(X, Y)
    sel = set(model.selected_)
    assert set(genes) <= sel and len(sel - set(genes)) <= 2
    # the direction of a pure mean shift is the shift itself: (1,1,1)/sqrt(3) up to sign
    assert abs(model.beta_[genes].sum()) / np.sqrt(3) > 0.95
    assert model.lam_ in model.cv_results_["lam"]
    assert model.cv_results_["score"].shape == (6,)


def test_recovers_correlation_change_with_identical_marginals():
    # equicorrelation 0.6: along (1,1,1)/sqrt(3) the variance is 2.2 instead of 1
    # (W2^2 = 0.23), twice the divergence of any contrast direction (variance 0.4);
    # no gene's marginal distribution changes, so per-gene tests are blind
    genes = [1, 4, 6]
    sizes = []
    for seed in range(8):
        rng = np.random.default_rng(seed)
        X, Y = _planted(300, 300, 15, genes, "cor", rng, rho=0.6)
        model = SPARDA(n_lambdas=6, relax_max_cells=150, relax_max_iter=30, n_permutations=0, random_state=0).fit(X, Y)
        assert set(genes) <= set(model.selected_), seed
        assert abs(model.beta_[genes].sum()) / np.sqrt(3) > 0.9, seed
        sizes.append(len(model.selected_))
    # the held-out divergence of the CV is noisy near its maximum: on some draws (which
    # ones depends on the BLAS kernel's rounding of the RELAX steps) the rule takes a
    # smaller penalty and 8-11 genes; the planted 3 must still be the usual answer
    assert sum(s <= 5 for s in sizes) >= 6, sizes


def test_permutation_pvalue_small_for_difference():
    # correlation 0.85 between genes 0 and 1 in the background only: along (1,-1)/sqrt(2)
    # the variance drops from 1 to 0.15 (W2^2 = 0.37); W2 of ~70-cell groups has a heavy
    # null tail, so 150 cells per group are used for a sure rejection at P = 19
    rng = np.random.default_rng(10)
    X, Y = _planted(150, 140, 6, [0, 1], "cor", rng)
    with pytest.warns(ScontrastWarning, match="p-value at its floor"):
        model = SPARDA(lam=0.02, n_permutations=19, test="refit", relax_max_iter=20, random_state=0).fit(X, Y)
    assert model.pvalue_ == pytest.approx(0.05)  # the smallest attainable, 1/(P+1)
    assert model.null_divergences_.shape == (19,)
    assert np.all(model.null_divergences_ < model.divergence_)
    assert model.test_["method"] == "refit" and model.test_["n_at_least"] == 0 and model.test_["bound"]
    assert model.test_["statistic"] == pytest.approx(model.divergence_, rel=1e-12)


def test_permutation_pvalue_not_small_under_null():
    pvals = []
    for seed in range(12):
        rng = np.random.default_rng(100 + seed)
        X, Y = rng.normal(size=(40, 5)), rng.normal(size=(45, 5))
        model = SPARDA(lam=0.02, n_permutations=19, test="refit", relax_max_iter=10, tighten_max_iter=50,
                       random_state=seed)
        pvals.append(model.fit(X, Y).pvalue_)
    pvals = np.array(pvals)
    # under H0 the p-value is uniform on {1/20, ..., 1}: mean 0.525
    assert 0.3 < pvals.mean() < 0.75
    assert np.sum(pvals <= 0.05) <= 2


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


def test_split_test_resolves_a_strong_difference_at_its_defaults():
    # a mean shift of 1.5 sd in 3 of 12 genes, 150 cells per group: p must be resolved below
    # 0.001 by the default test, and reported as its floor (a bound) with a warning
    rng = np.random.default_rng(21)
    X, Y = _planted(150, 150, 12, [0, 1, 2], "mean", rng, effect=1.5)
    with pytest.warns(ScontrastWarning, match="p-value at its floor"):
        model = SPARDA(test="split", random_state=0).fit(X, Y)
    t = model.test_
    assert model.pvalue_ == pytest.approx(1e-4) and model.pvalue_ <= 0.001
    assert t["method"] == "split" and t["n_permutations"] == 9999 and t["n_at_least"] == 0 and t["bound"] is True
    assert t["n_learn"] == [75, 75] and t["n_test"] == [75, 75]
    assert model.null_divergences_.shape == (9999,) and np.all(model.null_divergences_ < t["statistic"])


def test_split_test_uniform_under_the_null():
    # no difference: the split p-value is exact, uniform on {1/200, ..., 1} up to the grid
    pvals = []
    for seed in range(40):
        rng = np.random.default_rng(500 + seed)
        X, Y = rng.normal(size=(60, 6)), rng.normal(size=(50, 6))
        model = SPARDA(lam=0.05, n_permutations=199, test="split", relax_max_iter=10, tighten_max_iter=50,
                       random_state=seed)
        pvals.append(model.fit(X, Y).pvalue_)
        assert model.test_["bound"] == (model.test_["n_at_least"] == 0)
    pvals = np.array(pvals)
    # 40 uniform draws: mean 0.5 with sd 0.046; at most 6 of 40 below 0.05 has probability > 0.99
    assert 0.36 < pvals.mean() < 0.64
    assert np.sum(pvals <= 0.05) <= 6
    assert scipy.stats.kstest(pvals, "uniform").pvalue > 0.001


def test_split_test_needs_enough_cells_for_its_cv():
    rng = np.random.default_rng(3)
    X, Y = rng.normal(size=(10, 4)), rng.normal(size=(30, 4))
    with pytest.raises(ScontrastError, match="^test: the split test"):
        SPARDA(n_permutations=9, test="split", cv_folds=3, random_state=0).fit(X, Y)
    # with a fixed penalty the halves need no cross-validation
    assert SPARDA(lam=0.05, n_permutations=9, test="split", random_state=0).fit(X, Y).pvalue_ is not None


# ------------------------------------------------------- re-optimised permutation test
@pytest.mark.parametrize("centre", [False, True])
def test_labellings_divergence_and_gradient_match_the_single_labelling_ones(centre):
    # every row of the batch is D and its gradient for one labelling, as divergence_gradient;
    # centre=True: the shape part, i.e. divergence_gradient on the two groups centred apart
    rng = np.random.default_rng(31)
    Z = rng.normal(size=(23, 5)) + np.arange(5)
    n = 10
    perms = np.vstack([np.arange(23)] + [rng.permutation(23) for _ in range(6)])
    B = rng.normal(size=(7, 5))
    D, G = _Labellings(Z, n, centre)(B, perms)
    full, _ = _Labellings(Z, n)(B, perms)
    for p in range(7):
        a, b = Z[perms[p, :n]], Z[perms[p, n:]]
        if centre:
            a, b = a - a.mean(axis=0), b - b.mean(axis=0)
            # W2^2 = squared mean difference + the shape part
            assert full[p] == pytest.approx(D[p] + ((a.mean(0) - b.mean(0)) @ B[p]) ** 2 +
                                            ((Z[perms[p, :n]].mean(0) - Z[perms[p, n:]].mean(0)) @ B[p]) ** 2,
                                            rel=1e-10)
        d1, g1 = divergence_gradient(a, b, B[p])
        assert D[p] == pytest.approx(d1, rel=1e-12)
        np.testing.assert_allclose(G[p], g1, rtol=1e-10, atol=1e-12 * np.abs(g1).max())
    if centre:
        # the shape part's gradient by finite differences (away from ties the matching is fixed)
        h = 1e-6
        for j in range(5):
            e = np.zeros(5)
            e[j] = h
            up, _ = _Labellings(Z, n, True)(B[:1] + e, perms[:1])
            dn, _ = _Labellings(Z, n, True)(B[:1] - e, perms[:1])
            assert (up[0] - dn[0]) / (2 * h) == pytest.approx(G[0, j], rel=1e-5, abs=1e-8)


def test_min_p_order_of_the_labellings():
    # rows: (full divergence, shape part); the order is by the smaller within-set p-value, a tie
    # going to the labelling whose full divergence attains it, then to the smaller larger p
    T = np.array([[10.0, 0.0],   # top of the full part only: p = (1/6, 6/6)
                  [0.5, 10.0],   # top of the shape part only: p = (5/6, 1/6)
                  [9.0, 9.0],    # second of both: p = (2/6, 2/6)
                  [1.0, 1.0],    # p = (4/6, 5/6)
                  [8.0, 8.0],    # third of both
                  [0.0, 2.0]])   # p = (6/6, 4/6)
    level = _min_p_level(T)
    assert list(np.argsort(-level, kind="stable")) == [0, 1, 2, 4, 3, 5]
    # the order depends on the within-set ranks only
    np.testing.assert_array_equal(_min_p_level(np.exp(T)), level)
    assert np.all((level > 0) & (level < 1))


def test_set_pvalues_are_each_members_permutation_pvalue():
    rng = np.random.default_rng(35)
    T = np.column_stack([rng.normal(size=50), rng.integers(0, 5, size=50).astype(float)])  # with ties
    P = _set_pvalues(T)
    for b in range(50):
        for j in range(2):
            assert P[b, j] == np.mean(T[:, j] >= T[b, j])


@pytest.mark.parametrize("lam,k", [(0.0, None), (0.03, None), (0.0, 2)])
def test_batched_tightening_is_the_single_tightening_row_by_row(lam, k):
    rng = np.random.default_rng(32)
    X, Y = _planted(40, 35, 6, [0, 1], "var", rng, effect=2.0)
    Z = np.vstack([X, Y])
    Z -= Z.mean(axis=0)
    n = 40
    perms = np.vstack([np.arange(75)] + [rng.permutation(75) for _ in range(4)])
    B0 = rng.normal(size=(5, 6))
    J = _tighten_rows(_Labellings(Z, n), perms, B0, lam, k, 300)
    for p in range(5):
        one = tighten(Z[perms[p, :n]], Z[perms[p, n:]], B0[p], 6 if k is None else k, lam, tol=1e-6)
        # the same ascent; rounding can only flip a step accepted by a hair
        assert J[p] == pytest.approx(one["objective"], rel=1e-3)
        assert J[p] >= one["start_objective"] - 1e-12


def test_permute_statistic_is_a_fixed_function_of_data_and_labels():
    rng = np.random.default_rng(33)
    X, Y = _planted(30, 25, 5, [0], "var", rng, effect=2.0)
    model = SPARDA(lam=0.05, test="permute", n_permutations=99, random_state=1).fit(X, Y)
    t = model.test_
    assert t["method"] == "permute" and t["n_permutations"] == 99 and model.null_divergences_.shape == (99,)
    # the observed statistic is the identity labelling's, wherever it sits in a batch
    Z = np.vstack([X, Y])
    Z -= Z.mean(axis=0)
    perms = np.vstack([rng.permutation(55) for _ in range(4)])
    perms[0] = perms[3] = np.arange(55)
    stats = _relabelled_statistics(Z, 30, perms, [t["test_lam"], t["shape_test_lam"]], t["tighten_max_iter"])
    for row in (0, 3):
        assert stats[row, 0] == pytest.approx(t["divergence_statistic"], rel=1e-9)
        assert stats[row, 1] == pytest.approx(t["shape_statistic"], rel=1e-9)
    # the combined statistic is min-p of the two parts within the set of labellings, and the
    # p-value its rank: at least as small as twice the smaller part's (Bonferroni), never below it
    lo, hi = sorted([t["divergence_pvalue"], t["shape_pvalue"]])
    flag = t["divergence_pvalue"] > lo
    assert t["statistic"] == pytest.approx(1 - ((2 * lo * 100 + flag) * 101 + hi * 100) / (2 * 100 * 101), rel=1e-12)
    assert lo - 1e-12 <= t["pvalue"] <= 2 * lo + 1e-12
    # and it does not depend on the order of the cells within each group (lam0 included)
    ox, oy = rng.permutation(30), rng.permutation(25)
    again = SPARDA(lam=0.05, test="permute", n_permutations=99, random_state=1).fit(X[ox], Y[oy]).test_
    assert again["lam0"] == pytest.approx(t["lam0"], rel=1e-12)
    assert again["shape_lam0"] == pytest.approx(t["shape_lam0"], rel=1e-12)
    assert again["divergence_statistic"] == pytest.approx(t["divergence_statistic"], rel=1e-6)
    assert again["shape_statistic"] == pytest.approx(t["shape_statistic"], rel=1e-6)


def test_permute_test_type_one_error_within_the_binomial_band():
    # 200 null problems: the test is exact, so P(p <= 0.05) = 5/100 on the grid of 99 permutations
    # (heavy-tailed genes of unequal spread; the test's own code, without the fit around it)
    model = SPARDA(test="permute")
    model.scale_ = None
    pvals = []
    for seed in range(200):
        rng = np.random.default_rng(7000 + seed)
        Z = rng.standard_t(5, size=(44, 4)) * np.array([1.0, 2.0, 0.5, 1.0])
        obs, null, _ = model._permute_test(Z[:20], Z[20:], 99, rng)
        pvals.append((1 + np.sum(null >= obs)) / 100)
    pvals = np.array(pvals)
    # Binomial(200, 0.05): mean 10, P(<= 2 or >= 21) < 0.002
    assert 2 < np.sum(pvals <= 0.05) < 21
    assert 0.44 < pvals.mean() < 0.58  # mean 0.505, sd 0.02
    assert scipy.stats.kstest(pvals, "uniform").pvalue > 0.001


@pytest.mark.parametrize("kind,n,d", [("var", 60, 10), ("cor", 100, 6)])
def test_permute_test_has_power_on_small_planted_changes(kind, n, d):
    # variance x1.8 in 2 of 10 genes (60 cells per group), or correlation 0.9 between 2 of 6
    # genes with unchanged marginals (100 cells per group): the default test (auto -> permute)
    # rejects at 0.05 (measured: p <= 0.035 in 8 of 8 seeds of each)
    rejected = 0
    for seed in range(6):
        rng = np.random.default_rng(800 + seed)
        X, Y = _planted(n, n, d, [0, 1], kind, rng, effect=1.8, rho=0.9)
        model = SPARDA(lam=0.05, n_permutations=199, relax_max_iter=10, random_state=seed).fit(X, Y)
        assert model.test_["method"] == "permute" and model.test_["requested"] == "auto"
        rejected += model.pvalue_ <= 0.05
    assert rejected >= 5


def test_permute_test_shape_part_detects_a_correlation_change():
    # the power benchmark's setting (d = 30, n = m = 100, equicorrelation 0.7 among 3 genes with
    # unchanged marginals), 12 seeds, 99 permutations: the shape part resolves what the full
    # divergence's mean-difference noise hides (measured: combined p <= 0.05 in 11 of 12 seeds,
    # shape part 11, full divergence alone 4, the previous statistic)
    model = SPARDA(test="permute")
    model.scale_ = None
    rejected = {"combined": 0, "divergence": 0, "shape": 0}
    for seed in range(12):
        rng = np.random.default_rng(900 + seed)
        X, Y = _planted(100, 100, 30, [0, 1, 2], "cor", rng, rho=0.7)
        obs, null, info = model._permute_test(X, Y, 99, rng)
        rejected["combined"] += (1 + np.sum(null >= obs)) / 100 <= 0.05
        rejected["divergence"] += info["divergence_pvalue"] <= 0.05
        rejected["shape"] += info["shape_pvalue"] <= 0.05
    assert rejected["combined"] >= 9, rejected
    assert rejected["shape"] > rejected["divergence"] + 3, rejected


def test_auto_test_rule_and_permutation_defaults():
    model = SPARDA()
    assert model.test == "auto" and model.n_permutations is None
    assert model._test_method(100, 100, 30) == "permute"
    assert model._test_method(100, 100, 2000) == "permute"  # the test's genes: the 100 of largest pooled variance
    assert model._test_method(150, 100, 2000) == "split"  # 250 cells x 100 genes: too large
    assert model._test_method(1000, 1000, 30) == "split"
    assert SPARDA(test="refit")._test_method(10, 10, 3) == "refit"
    rng = np.random.default_rng(34)
    X, Y = _planted(40, 40, 4, [0], "mean", rng, effect=3.0)
    with pytest.warns(ScontrastWarning, match="none of the 999 permutations"):
        t = SPARDA(lam=0.05, random_state=0).fit(X, Y).test_
    assert t["method"] == "permute" and t["n_permutations"] == 999 and t["bound"] and t["pvalue"] == 0.001
    t = SPARDA(lam=0.05, test="split", random_state=0).fit(X, Y).test_
    assert t["method"] == "split" and t["n_permutations"] == 9999
    # more genes than max_genes: the permute test runs on the max_genes of largest pooled variance
    Xw, Yw = np.hstack([X, 3.0 * rng.normal(size=X.shape)]), np.hstack([Y, 3.0 * rng.normal(size=Y.shape)])
    t = SPARDA(lam=0.05, max_genes=6, n_permutations=99, random_state=0).fit(Xw, Yw).test_
    assert t["method"] == "permute" and t["n_test_genes"] == 6


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_direction_oriented_to_the_target(seed):
    # genes 0, 1 higher in the target, 2 lower: a positive weight means target side
    rng = np.random.default_rng(seed)
    X, Y = rng.normal(size=(120, 8)), rng.normal(size=(130, 8))
    X[:, [0, 1]] += 1.0
    X[:, 2] -= 1.5
    for a, b in [(X, Y), (Y, X)]:
        model = SPARDA(lam=0.05, n_directions=2, n_permutations=0, random_state=0).fit(a, b)
        diff = a.mean(axis=0) - b.mean(axis=0)
        for j in range(model.n_directions_):
            w = model.components_[j]
            assert (a @ w).mean() > (b @ w).mean(), (seed, j)
        w = model.beta_[0]
        # the planted genes carry the first direction, each with the sign of its mean difference
        assert np.all(np.sign(w[[0, 1, 2]]) == np.sign(diff[[0, 1, 2]]))
        assert np.abs(w[np.sign(w) == np.sign(diff)]).sum() / np.abs(w).sum() > 0.95
    # the figure's convention: the same data with the roles swapped gives the opposite weights
    fw = SPARDA(lam=0.05, n_permutations=0, random_state=0).fit(X, Y).beta_
    bw = SPARDA(lam=0.05, n_permutations=0, random_state=0).fit(Y, X).beta_
    assert np.sign(fw[0]) == -np.sign(bw[0])


def test_orientation_of_a_pure_spread_change_is_the_largest_weight():
    from scontrast.sparda import orient_to_target

    beta = np.array([0.2, -0.9, 0.1])
    assert np.array_equal(orient_to_target(beta, np.zeros(3)), -beta)
    assert np.array_equal(orient_to_target(beta, np.array([0.0, -1.0, 0.0])), beta)
    assert np.array_equal(orient_to_target(beta, np.array([1.0, 0.0, 0.0])), beta)
    assert np.array_equal(orient_to_target(beta, np.array([-1.0, 0.0, 0.0])), -beta)


@pytest.mark.parametrize("lam", [0.0, 0.05, 0.3])
def test_eig_fraction_is_a_fraction(lam):
    rng = np.random.default_rng(4)
    X, Y = _planted(100, 100, 10, [0, 1, 2], "cor", rng)
    mu = np.vstack([X, Y]).mean(0)
    rel = relax(X - mu, Y - mu, lam, max_iter=30)
    ev = np.linalg.eigvalsh(rel["B"])
    assert 0 < rel["eig_fraction"] <= 1 + 1e-12
    assert rel["eig_fraction"] == pytest.approx(ev[-1] / np.abs(ev).sum(), rel=1e-12)
    if lam == 0:  # psd: the same as top eigenvalue over trace
        assert rel["eig_fraction"] == pytest.approx(ev[-1] / np.trace(rel["B"]), rel=1e-9)


def _many_small_shifts(seed, n=200, d=40, n_diff=30):
    """Like real contrasts: many genes differ, by decreasing amounts (0.05-1.2 sd)."""
    rng = np.random.default_rng(seed)
    X, Y = rng.normal(size=(n, d)), rng.normal(size=(n, d))
    X[:, :n_diff] += np.geomspace(1.2, 0.05, n_diff)
    return X, Y


@pytest.mark.parametrize("seed", [0, 1])
def test_fraction_rule_is_sparse_where_max_takes_every_gene(seed):
    X, Y = _many_small_shifts(seed)
    kw = dict(n_permutations=0, relax_max_iter=15, random_state=0)
    frac = SPARDA(**kw).fit(X, Y)
    cv = frac.cv_results_
    best = cv["best_index"]
    # the rule: the largest lambda reaching cv_fraction of the unpenalised held-out divergence
    assert frac.cv_fraction == 0.6
    assert cv["score"][best] >= 0.6 * cv["reference_score"]
    assert np.all(cv["score"][:best] < 0.6 * cv["reference_score"])
    assert frac.lam_ == cv["lam"][best]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScontrastWarning)
        mx = SPARDA(cv_rule="max", **kw).fit(X, Y)
    assert frac.k_ < mx.k_
    # the genes kept are the most shifted ones
    assert set(np.flatnonzero(frac.beta_)) <= set(range(30))
    assert frac.k_ <= 15


def test_choice_at_the_end_of_the_path_is_warned():
    # one gene carries the whole difference: the rule takes the sparse end, and says so
    rng = np.random.default_rng(9)
    X, Y = _planted(150, 150, 10, [4], "mean", rng, effect=2.0)
    with pytest.warns(ScontrastWarning, match="largest lambda of the path"):
        model = SPARDA(n_permutations=0, random_state=0).fit(X, Y)
    assert model.cv_results_["best_index"] == 0 and list(model.selected_) == [4]
    # the dense end: 'max' on many small shifts takes the smallest lambda
    X, Y = _many_small_shifts(0, d=30, n_diff=30)
    with pytest.warns(ScontrastWarning, match="smallest lambda of the path"):
        SPARDA(cv_rule="max", n_lambdas=4, lam_min_ratio=0.2, n_permutations=0, relax_max_iter=10,
               random_state=0).fit(X, Y)


def test_reproducible_with_random_state():
    rng = np.random.default_rng(11)
    X, Y = _planted(160, 140, 8, [0, 2], "mean", rng, effect=0.5)
    kw = dict(n_lambdas=3, n_permutations=4, relax_max_cells=60, relax_max_iter=20)
    a = SPARDA(random_state=3, **kw).fit(X, Y)
    b = SPARDA(random_state=3, **kw).fit(X, Y)
    np.testing.assert_array_equal(a.beta_, b.beta_)
    np.testing.assert_array_equal(a.null_divergences_, b.null_divergences_)
    assert a.lam_ == b.lam_ and a.pvalue_ == b.pvalue_
    c = SPARDA(random_state=4, **kw).fit(X, Y)
    assert not np.array_equal(a.null_divergences_, c.null_divergences_)


def test_sparse_input_equals_dense():
    rng = np.random.default_rng(12)
    X = rng.poisson(0.7, size=(90, 40)).astype(float)
    Y = rng.poisson(0.7, size=(80, 40)).astype(float)
    Y[:, [5, 9]] += rng.poisson(1.5, size=(80, 2))
    kw = dict(n_lambdas=3, n_permutations=3, max_genes=15, random_state=0)
    dense = SPARDA(**kw).fit(X, Y)
    sparse = SPARDA(**kw).fit(sp.csr_matrix(X), sp.csc_matrix(Y))
    # The two paths round differently (BLAS kernels, sparse sums), and the tightening
    # stops once a step gains less than tol = 1e-9 of J: the two runs may stop a step
    # apart, so J and D agree to ~tol relative and the unit direction to ~sqrt(tol).
    tol = 1e-9
    np.testing.assert_allclose(sparse.beta_, dense.beta_, rtol=0, atol=10 * np.sqrt(tol))
    np.testing.assert_array_equal(sparse.selected_, dense.selected_)
    np.testing.assert_array_equal(sparse.screened_, dense.screened_)
    assert sparse.lam_ == pytest.approx(dense.lam_, rel=1e-12) and sparse.pvalue_ == dense.pvalue_
    assert sparse.divergence_ == pytest.approx(dense.divergence_, rel=10 * tol)
    proj_d, proj_s = dense.transform(X), sparse.transform(sp.csr_matrix(X))
    np.testing.assert_allclose(proj_s, proj_d, rtol=0, atol=10 * np.sqrt(tol) * np.abs(proj_d).max())


def test_screening_keeps_top_marginal_genes():
    rng = np.random.default_rng(13)
    X, Y = _planted(100, 100, 60, [10, 20], "mean", rng, effect=1.0)
    model = SPARDA(lam=0.05, max_genes=10, n_permutations=0, random_state=0).fit(X, Y)
    assert model.screened_.size == 10
    top = np.argsort(-marginal_wasserstein2(X, Y))[:10]
    assert set(model.screened_) == set(top)
    assert {10, 20} <= set(model.selected_) <= set(model.screened_)
    assert np.all(model.beta_[np.setdiff1d(np.arange(60), model.screened_)] == 0)


def test_deflation_finds_a_second_difference():
    rng = np.random.default_rng(14)
    X, Y = _planted(200, 200, 10, [0, 1], "mean", rng, effect=1.5)
    Y[:, 6] *= 2.5  # a variance change elsewhere
    model = SPARDA(lam=0.3, n_directions=2, relax_max_cells=100, relax_max_iter=30, n_permutations=0,
                   random_state=0).fit(X, Y)
    assert model.components_.shape == (2, 10) and model.beta_.shape == (2, 10)
    assert set(np.flatnonzero(np.abs(model.components_[0]) > 0.2)) == {0, 1}
    assert set(np.flatnonzero(np.abs(model.components_[1]) > 0.2)) == {6}
    assert abs(model.components_[0] @ model.components_[1]) < 1e-8
    np.testing.assert_allclose(np.linalg.norm(model.components_, axis=1), 1.0)
    assert model.divergences_[0] >= model.divergences_[1] > 0
    assert set(model.selected_) >= {0, 1, 6}
    assert model.n_directions_ == 2


def test_deflation_stops_when_no_direction_pays_for_its_genes():
    # one mean shift in genes 0 and 1 (D = 2 along (1,1)/sqrt(2)), pure noise elsewhere:
    # after deflating it, the best remaining direction gains far less than lam, so the
    # penalised maximiser over the ball is 0 and no noise gene may be added
    rng = np.random.default_rng(17)
    X, Y = _planted(200, 200, 12, [0, 1], "mean", rng, effect=1.0)
    lam = 0.3
    model = SPARDA(lam=lam, n_directions=3, relax_max_cells=100, relax_max_iter=30, n_permutations=0,
                   random_state=0).fit(X, Y)
    assert model.n_directions_ == 1
    assert set(model.selected_) == {0, 1}
    assert model.components_.shape == (3, 12)
    assert np.all(model.components_[1:] == 0) and np.all(model.divergences_[1:] == 0)
    # the rejected second direction was searched and had no positive objective
    assert len(model.tighten_info_) == 2 and model.tighten_info_[1]["objective"] <= 0
    # every noise gene's own divergence is far below lam: the stop is not a close call
    assert marginal_wasserstein2(X, Y)[2:].max() < lam / 3
    np.testing.assert_array_equal(model.transform(X)[:, 1:], 0.0)


def test_plain_pda_and_fixed_k():
    rng = np.random.default_rng(15)
    X, Y = _planted(120, 120, 8, [0, 3], "mean", rng)
    pda = SPARDA(lam=0.0, n_permutations=0, random_state=0).fit(X, Y)
    assert pda.cv_results_ is None and pda.lam_ == 0.0
    # the PDA direction beats every single gene and the k-sparse answer
    assert pda.divergence_ >= marginal_wasserstein2(X, Y).max() - 1e-9
    k2 = SPARDA(k=2, n_permutations=0, random_state=0).fit(X, Y)
    assert k2.k_ == 2 and set(k2.selected_) == {0, 3}
    assert k2.divergence_ <= pda.divergence_ + 1e-9


def test_standardize_weights_refer_to_scaled_genes():
    rng = np.random.default_rng(16)
    X, Y = _planted(150, 150, 6, [2], "var", rng, effect=2.0)
    X[:, 4] *= 100.0  # a huge but unchanged gene dominates the raw scale
    Y[:, 4] *= 100.0
    model = SPARDA(lam=0.05, standardize=True, n_permutations=0, random_state=0).fit(X, Y)
    assert np.argmax(np.abs(model.beta_)) == 2
    proj = model.transform(X)[:, 0]
    np.testing.assert_allclose(proj, (X / model.scale_) @ model.beta_)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(lam=-1.0), "lam: expected"),
        (dict(lam="auto"), "lam: expected"),
        (dict(k=0), "k: expected"),
        (dict(k=2.5), "k: expected"),
        (dict(n_directions=0), "n_directions: expected"),
        (dict(n_permutations=-1), "n_permutations: expected"),
        (dict(cv_folds=1), "cv_folds: expected"),
        (dict(n_lambdas=0), "n_lambdas: expected"),
        (dict(cv_rule="best"), "cv_rule: expected one of"),
        (dict(lam_min_ratio=2.0), "lam_min_ratio: expected"),
        (dict(lam_min_ratio=0.0), "lam_min_ratio: expected"),
        (dict(max_genes=0), "max_genes: expected"),
        (dict(relax_max_cells=1), "relax_max_cells: expected"),
        (dict(relax_max_iter=0), "relax_max_iter: expected"),
        (dict(relax_patience=0), "relax_patience: expected"),
        (dict(relax_step=0.0), "relax_step: expected"),
        (dict(tighten_max_iter=-1), "tighten_max_iter: expected"),
        (dict(standardize="yes"), "standardize: expected"),
        (dict(n_jobs=0), "n_jobs: expected"),
        (dict(random_state="x"), "random_state: expected"),
    ],
)
def test_bad_parameters(kwargs, match):
    X = np.random.default_rng(0).normal(size=(20, 3))
    model = SPARDA(**kwargs)  # stored as given: refused by fit, not by __init__
    assert all(model.get_params()[k] is v for k, v in kwargs.items())
    with pytest.raises(ScontrastError, match="^" + match):
        model.fit(X, X + 1)


def test_bad_data():
    X = np.zeros((10, 3))
    with pytest.raises(ScontrastError, match="^Y: has 4 genes"):
        SPARDA(lam=0.1).fit(X, np.zeros((10, 4)))
    with pytest.raises(ScontrastError, match="^X: contains 30 NaN"):
        SPARDA(lam=0.1).fit(np.full((10, 3), np.nan), X)
    with pytest.raises(ScontrastError, match="^X: needs at least 2 cells"):
        SPARDA(lam=0.1).fit(X[:1], X)
    Z = np.random.default_rng(0).normal(size=(10, 3))
    with pytest.raises(ScontrastError, match="^cv_folds: 5 folds"):
        SPARDA(cv_folds=5).fit(Z[:6], Z)
    model = SPARDA(lam=0.1, n_permutations=0).fit(Z, Z + 1)
    with pytest.raises(ScontrastError, match="^X: has 2 genes"):
        model.transform(Z[:, :2])


# --------------------------------------------------------------- stability selection
def test_half_subsamples_are_complementary_pairs():
    rng = np.random.default_rng(0)
    halves = _half_subsamples(11, 5, rng)
    assert len(halves) == 5 and all(h.size == 5 for h in halves)
    for a, b in (halves[0:2], halves[2:4]):
        assert np.intersect1d(a, b).size == 0  # a pair splits one permutation
    assert not np.array_equal(halves[0], halves[2])


def test_stability_selection_frequencies_on_known_support():
    rng = np.random.default_rng(3)
    genes = [2, 5, 9]
    X, Y = _planted(200, 180, 20, genes, "mean", rng, effect=1.0)
    freq, weight = stability_selection(X, Y, lam=0.5, n_subsamples=10, relax_max_iter=20, random_state=0,
                                       return_weights=True)
    assert freq.shape == weight.shape == (20,)
    np.testing.assert_allclose(freq * 10, np.round(freq * 10))  # fractions of the 10 fits
    np.testing.assert_array_equal(freq[genes], 1.0)
    noise = np.delete(np.arange(20), genes)
    assert freq[noise].max() <= 0.2 and freq[noise].mean() <= 0.05
    # the weights of a pure mean shift are the shift direction's, 1/sqrt(3) each up to sampling
    assert weight[genes].min() > 0.35 and weight[noise].max() < 0.05
    # a fixed cardinality gives exactly k genes per fit
    fk = stability_selection(X, Y, k=3, n_subsamples=4, relax_max_iter=20, random_state=1)
    assert fk.sum() == pytest.approx(3.0) and set(np.flatnonzero(fk == 1)) == set(genes)


def test_stability_selection_reproducible_parallel_and_sparse():
    rng = np.random.default_rng(4)
    X, Y = _planted(60, 60, 10, [0, 1], "mean", rng, effect=0.5)
    kw = dict(lam=0.1, n_subsamples=6, relax_max_iter=10, random_state=7)
    f1 = stability_selection(X, Y, **kw)
    # threads rather than worker processes: the same scheduling question without the
    # start-up cost of a process pool
    with joblib.parallel_config(backend="threading"):
        np.testing.assert_array_equal(f1, stability_selection(X, Y, **kw, n_jobs=2))
    np.testing.assert_array_equal(f1, stability_selection(sp.csr_matrix(X), sp.csr_matrix(Y), **kw))
    # a Generator seeded like the int gives the same subsamples and fits
    np.testing.assert_array_equal(f1, stability_selection(X, Y, **dict(kw, random_state=np.random.default_rng(7))))
    # 30 cells per group and a noise-level penalty: the support changes with the subsample
    assert np.any((f1 > 0) & (f1 < 1))
    assert not np.array_equal(f1, stability_selection(X, Y, **dict(kw, random_state=8)))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(), "lam, k"),
        (dict(lam=0.1, n_subsamples=0), "n_subsamples"),
        (dict(lam=0.1, n_jobs=0), "n_jobs"),
        (dict(lam=0.1, n_permutations=9), "n_permutations"),
        (dict(lam=-1.0), "lam: expected"),
        (dict(lam=0.1, max_gene=5), "max_gene: not a parameter"),
        (dict(lam=0.1, random_state="x"), "random_state: expected"),
    ],
)
def test_stability_selection_bad_parameters(kwargs, match):
    X = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(ScontrastError, match="^" + match):
        stability_selection(X, X + 1, **kwargs)
    with pytest.raises(ScontrastError, match="^X: needs at least 4 cells"):
        stability_selection(X[:3], X, lam=0.1)


def test_identical_groups_select_no_gene():
    """A background that copies the target: divergence 0 along every direction, so no gene is selected
    (and the user is told), whatever the search ended on."""
    from scontrast.core import ScontrastWarning

    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 8))
    with pytest.warns(ScontrastWarning, match="no difference between the groups"):
        model = SPARDA(lam=0.05, n_permutations=19, test="refit", relax_max_iter=5, random_state=0).fit(X, X.copy())
    assert model.selected_.size == 0 and model.divergence_ == 0.0 and np.all(model.components_ == 0)
    assert model.pvalue_ == 1.0
    with pytest.raises(ValueError, match="^X: needs at least 1 genes"):
        SPARDA().fit(np.ones((5, 0)), np.ones((5, 0)))


def test_front_end_summary_shows_the_permute_tests_parts():
    # the summary table lists the p-values of the two parts combined by the permute test
    rng = np.random.default_rng(36)
    X, Y = _planted(40, 40, 6, [0, 1], "var", rng, effect=2.5)
    obs = pd.DataFrame({"scontrast_target": np.r_[np.ones(40, bool), np.zeros(40, bool)]},
                       index=[f"c{i}" for i in range(80)])
    adata = ad.AnnData(X=np.vstack([X, Y]), obs=obs, var=pd.DataFrame(index=[f"g{i}" for i in range(6)]))
    adata.var["highly_variable"] = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScontrastWarning)
        tl_sparda(adata, lam=0.05, n_permutations=99, test="permute", random_state=0)
    t = adata.uns["sparda"]["test"]
    assert t["method"] == "permute" and t["shape_pvalue"] <= 0.05
    rows = dict(summary_rows(adata))
    parts = rows["p-values of the parts (divergence, its shape part)"]
    assert parts == f"{t['divergence_pvalue']:.4g}, {t['shape_pvalue']:.4g}"
