"""The tests of target = background: refit, split and the re-optimised permutation test (min-p, calibration, power)."""

import warnings

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.stats

from scontrast.core import ScontrastError, ScontrastWarning
from scontrast.sparda._estimator import SPARDA
from scontrast.sparda._test import _Labellings, _min_p_level, _relabelled_statistics, _set_pvalues
from scontrast.sparda._wasserstein import divergence_gradient
from scontrast.tl._sparda import sparda as tl_sparda
from scontrast.tl._sparda import summary_rows

from ._helpers import _planted


def test_permutation_pvalue_small_for_difference():
    # correlation 0.85 between genes 0 and 1 in the background only: along (1,-1)/sqrt(2)
    # the variance drops from 1 to 0.15 (W2^2 = 0.37); W2 of ~70-cell groups has a heavy
    # null tail, so 150 cells per group are used for a sure rejection at P = 19
    rng = np.random.default_rng(10)
    X, Y = _planted(150, 140, 6, [0, 1], "cor", rng)
    with warnings.catch_warnings():  # p at its floor below 0.05 is a finding (test_['bound']), not a warning
        warnings.simplefilter("error", ScontrastWarning)
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


def test_split_test_resolves_a_strong_difference_at_its_defaults():
    # a mean shift of 1.5 sd in 3 of 12 genes, 150 cells per group: p must be resolved below
    # 0.001 by the default test, and reported as its floor (a bound)
    rng = np.random.default_rng(21)
    X, Y = _planted(150, 150, 12, [0, 1, 2], "mean", rng, effect=1.5)
    with warnings.catch_warnings():  # a finding, stated by test_['bound'] and the summary, not a warning
        warnings.simplefilter("error", ScontrastWarning)
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
    with warnings.catch_warnings():  # p = 0.001 at its floor: a finding, recorded as a bound, not a warning
        warnings.simplefilter("error", ScontrastWarning)
        t = SPARDA(lam=0.05, random_state=0).fit(X, Y).test_
    assert t["method"] == "permute" and t["n_permutations"] == 999 and t["bound"] and t["pvalue"] == 0.001
    t = SPARDA(lam=0.05, test="split", random_state=0).fit(X, Y).test_
    assert t["method"] == "split" and t["n_permutations"] == 9999
    # more genes than max_genes: the permute test runs on the max_genes of largest pooled variance
    Xw, Yw = np.hstack([X, 3.0 * rng.normal(size=X.shape)]), np.hstack([Y, 3.0 * rng.normal(size=Y.shape)])
    t = SPARDA(lam=0.05, max_genes=6, n_permutations=99, random_state=0).fit(Xw, Yw).test_
    assert t["method"] == "permute" and t["n_test_genes"] == 6


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
