"""The location test of replicate means (scontrast.donor_test): limma's moderated t, min-p, exactness."""

import bisect
import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.interpolate import CubicSpline
from scipy.special import polygamma

from scontrast._limma import _trigamma_inverse
from scontrast.core import ScontrastError
from scontrast.design import replicate_labellings
from scontrast.donor_coexpression import module_coexpression, pooled_variance, replicate_coexpression
from scontrast.donor_spread import (
    CAP_QUANTILE,
    _natural_spline_basis,
    cell_scale,
    column_quantile,
    dispersion,
    residual_spread,
    unit_dispersion,
)
from scontrast.donor_test import (
    donor_test,
    family_t,
    location_statistics,
    location_test,
    min_p_combination,
    moderated_t,
    replicate_features,
    replicate_means,
    set_pvalues,
    squeeze_var,
)


def _reference_squeeze(s2, df, covariate=None):
    """limma's fitFDist + squeezeVar for one set of variances, written line by line from limma 3.x (R), scalar loops.

    The trend: least squares on the natural-spline basis (:func:`_natural_spline_basis`, checked
    separately); the trigamma inverse: bisection on trigamma (no Newton).
    """
    from scipy.optimize import brentq
    from scipy.special import digamma

    s2 = np.asarray(s2, float)
    G = s2.size
    m = np.median(s2)
    m = 1.0 if m == 0 else m
    x = np.maximum(s2, 1e-5 * m)
    e = np.log(x) - digamma(df / 2) + math.log(df / 2)
    if covariate is None:
        design = np.ones((G, 1))
    else:
        k = 1 + (G >= 3) + (G >= 6) + (G >= 30)
        design = _natural_spline_basis(covariate, k)
    coef, *_ = np.linalg.lstsq(design, e, rcond=None)
    emean = design @ coef
    rank = np.linalg.matrix_rank(design)
    evar = np.sum((e - emean) ** 2) / (G - rank) - float(polygamma(1, df / 2))
    if evar <= 0:
        return np.exp(emean), math.inf
    d0 = 2 * brentq(lambda y: float(polygamma(1, y)) - evar, 1e-8, 1e8, xtol=1e-14, rtol=1e-14)
    s0 = np.exp(emean + digamma(d0 / 2) - math.log(d0 / 2))
    return (d0 * s0 + df * s2) / (d0 + df), d0


def test_trigamma_inverse_inverts_trigamma():
    x = np.array([1e-7, 1e-3, 0.1, 1.0, 10.0, 1e3, 1e8])
    y = _trigamma_inverse(x)
    mid = (x > 1e-6) & (x < 1e7)
    np.testing.assert_allclose(polygamma(1, y[mid]), x[mid], rtol=1e-7)
    assert _trigamma_inverse(np.array([])).size == 0


def test_natural_spline_basis_spans_natural_cubic_splines():
    """Linear functions and a natural cubic spline with the same knots are fitted exactly; a cubic is not
    (natural splines are linear beyond the end knots only, so a global cubic leaves a residual)."""
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 5, 200))
    B = _natural_spline_basis(x, 4)
    assert B.shape == (200, 4)

    def residual(y):
        coef, *_ = np.linalg.lstsq(B, y, rcond=None)
        return np.abs(B @ coef - y).max()

    assert residual(2.0 - 0.7 * x) < 1e-10
    # scipy's natural cubic interpolating spline through values at the same knots (ends and tertiles of x)
    knots = np.quantile(x, np.linspace(0, 1, 4))
    spline = CubicSpline(knots, [1.0, -2.0, 0.5, 3.0], bc_type="natural")(x)
    assert residual(spline) < 1e-9
    assert residual(np.sin(3 * x)) > 1e-2


@pytest.mark.parametrize("trend", [False, True])
def test_squeeze_var_matches_limmas_formulas(trend):
    rng = np.random.default_rng(1)
    G, df = 400, 6
    cov = rng.uniform(0, 4, G)
    sigma2 = np.exp(-0.5 * cov) * 3.0 / rng.chisquare(3.0, G) if trend else 2.0 * 5.0 / rng.chisquare(5.0, G)
    S = np.vstack([sigma2 * rng.chisquare(df, G) / df for _ in range(3)])
    S[1, :5] = 0.0  # zero variances are offset from zero as limma does
    post, d0, s0 = squeeze_var(S, df, cov if trend else None)
    for i in range(3):
        ref_post, ref_d0 = _reference_squeeze(S[i], df, cov if trend else None)
        np.testing.assert_allclose(post[i], ref_post, rtol=1e-8)
        assert d0[i] == pytest.approx(ref_d0, rel=1e-7)


def test_squeeze_var_recovers_a_known_prior():
    """Variances drawn from limma's model (sigma^2 ~ s0^2 d0 / chi^2_d0, s^2 ~ sigma^2 chi^2_d / d): the estimated
    prior degrees of freedom and scale are within a few standard errors of the truth over 20,000 genes."""
    rng = np.random.default_rng(2)
    G, d, d0, s0 = 20_000, 4, 8.0, 0.5
    sigma2 = s0 * d0 / rng.chisquare(d0, G)
    s2 = sigma2 * rng.chisquare(d, G) / d
    post, est_d0, est_s0 = squeeze_var(s2[None, :], d)
    # limma's moment estimator of d0 has a relative sd of about 10% here (a 4 / 8 df mixture)
    assert est_d0[0] == pytest.approx(d0, rel=0.25)
    assert est_s0[0, 0] == pytest.approx(s0, rel=0.08)
    # the posterior is closer to the true variances than the raw ones
    assert np.mean((np.log(post[0]) - np.log(sigma2)) ** 2) < 0.6 * np.mean((np.log(s2) - np.log(sigma2)) ** 2)


def _ols_t(y, X):
    """statsmodels OLS: (coefficient of the last column, its residual variance, its t, residual df)."""
    import statsmodels.api as sm

    fit = sm.OLS(y, X).fit()
    return fit.params[-1], fit.scale, fit.tvalues[-1], fit.df_resid


def test_moderated_t_is_the_ols_t_with_the_squeezed_variance_unpaired():
    """Two groups of replicate means: ``t_mod = t_ols * sqrt(s2_ols / s2_post)`` on every gene, with statsmodels' OLS
    of ``~ group`` and limma's posterior from the OLS residual variances; every labelling."""
    rng = np.random.default_rng(3)
    R, G = 7, 60
    M = rng.normal(size=(R, G)) * rng.uniform(0.2, 2.0, G) + rng.uniform(0, 5, G)
    lab, _ = replicate_labellings(np.arange(R) < 3, paired=False)
    t, df = moderated_t(M, lab, paired=False)
    for row in (0, 5, 17):
        g = lab[row].astype(float)
        X = np.column_stack([np.ones(R), g])
        fits = [_ols_t(M[:, j], X) for j in range(G)]
        s2 = np.array([f[1] for f in fits])
        assert all(f[3] == R - 2 for f in fits)
        post, d0, _ = squeeze_var(s2[None, :], R - 2, M.mean(axis=0))
        expected = np.array([f[2] for f in fits]) * np.sqrt(s2 / post[0])
        np.testing.assert_allclose(t[row], expected, rtol=1e-9)
        assert df[row] == pytest.approx(d0[0] + R - 2)


def test_moderated_t_paired_is_the_ols_t_of_group_with_replicate_effects():
    """Paired: ``~ replicate + group`` by statsmodels on the 2R means; its residual variance is half that of the
    within-replicate differences, and the t (with that variance squeezed) equals the moderated t."""
    rng = np.random.default_rng(4)
    R, G = 6, 50
    M = rng.normal(size=(R, 2, G)) + rng.normal(0, 2, size=(R, 1, G)) + rng.uniform(0, 5, G)
    lab, _ = replicate_labellings(np.ones(R, bool), paired=True)
    t, _ = moderated_t(M, lab, paired=True)
    for row in (0, 9, 40):
        y = M.copy()
        y[lab[row]] = y[lab[row]][:, ::-1]  # a swap exchanges the replicate's two samples
        Y = y.reshape(2 * R, G)
        X = np.column_stack([np.kron(np.eye(R), np.ones((2, 1))), np.tile([1.0, 0.0], R)])
        fits = [_ols_t(Y[:, j], X) for j in range(G)]
        s2_diff = 2 * np.array([f[1] for f in fits])
        post, _, _ = squeeze_var(s2_diff[None, :], R - 1, M.mean(axis=(0, 1)))
        expected = np.array([f[2] for f in fits]) * np.sqrt(s2_diff / post[0])
        np.testing.assert_allclose(t[row], expected, rtol=1e-9)


def test_a_labelling_and_its_mirror_give_opposite_t():
    rng = np.random.default_rng(5)
    M = rng.normal(size=(6, 30))
    lab, _ = replicate_labellings(np.arange(6) < 3, paired=False)
    t, _ = moderated_t(M, lab, paired=False)
    for i, row in enumerate(lab):
        j = int(np.flatnonzero((lab == ~row).all(axis=1))[0])
        np.testing.assert_allclose(t[j], -t[i], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("rows", [8192, 7])
def test_replicate_means_sparse_equals_dense_and_blocks(rows, monkeypatch):
    import scontrast.donor_test

    monkeypatch.setattr(scontrast.donor_test, "_ROWS", rows)  # 7: many blocks of cells, none aligned to a replicate
    rng = np.random.default_rng(6)
    X = sp.random(90, 12, density=0.3, random_state=7, format="csr")
    rep = rng.integers(0, 4, 90)
    rep[:4] = np.arange(4)
    tgt = rng.random(90) < 0.5
    tgt[:4], tgt[4:8] = True, False
    rep[4:8] = np.arange(4)
    dense = X.toarray()
    M = replicate_means(X, rep, tgt, 4, paired=True)
    for r in range(4):
        np.testing.assert_allclose(M[r, 0], dense[(rep == r) & tgt].mean(axis=0))
        np.testing.assert_allclose(M[r, 1], dense[(rep == r) & ~tgt].mean(axis=0))
    np.testing.assert_allclose(replicate_means([X[:50], dense[50:]], rep, tgt, 4, paired=True), M)
    U = replicate_means(dense, rep, tgt, 4, paired=False)
    np.testing.assert_allclose(U[2], dense[rep == 2].mean(axis=0))
    # pseudobulk: log1p of the mean expm1, the sparse input never densified (zeros stay zeros), in blocks of rows
    P = replicate_means([X[:50], X[50:]], rep, tgt, 4, paired=False, pseudobulk=True)
    np.testing.assert_allclose(P[1], np.log1p(np.expm1(dense[rep == 1]).mean(axis=0)))
    np.testing.assert_allclose(replicate_means(dense, rep, tgt, 4, paired=False, pseudobulk=True), P)
    with pytest.raises(ScontrastError, match="has no cell"):
        replicate_means(dense, rep, tgt, 5, paired=False)


def test_min_p_combination_is_uniform_on_its_grid():
    """Every member's combined p-value within the set: with no ties they are exactly 1/L, 2/L, ..., 1 (uniform on the
    attainable grid whichever labelling is the observed one); with ties, never below their uniform share."""
    rng = np.random.default_rng(8)
    T = rng.normal(size=(70, 3))
    p = min_p_combination(T)
    np.testing.assert_allclose(np.sort(p), np.arange(1, 71) / 70)
    # the member with the most extreme part (smallest within-set p) ranks first; one monotone map per part changes nothing
    assert np.argmin(p) in np.flatnonzero(set_pvalues(T).min(axis=1) == 1 / 70)
    np.testing.assert_array_equal(min_p_combination(np.column_stack([np.exp(T[:, 0]), T[:, 1], T[:, 2] ** 3])), p)
    ties = np.round(rng.normal(size=(60, 2)), 1)
    q = min_p_combination(ties)
    for a in np.arange(1, 61) / 60:
        assert np.mean(q <= a + 1e-12) <= a + 1e-12



def test_min_p_combination_ranks_many_parts_as_sorted_tuples():
    """SPARDA's replicate test combines 6 parts over up to ``n_permutations`` labellings: each rank is the share of
    rows whose sorted within-set p-values are, as a tuple, at most its own (an integer key of base L + 1 overflows)."""
    T = np.round(np.random.default_rng(3).normal(size=(3000, 6)), 1)
    T[0] = 9.0                                   # the observed labelling: the most extreme in every part
    keys = [tuple(row) for row in np.sort(set_pvalues(T), axis=1)]
    ordered = sorted(keys)
    p = min_p_combination(T)
    assert p[0] == 1 / 3000
    np.testing.assert_array_equal(np.rint(p * 3000), [bisect.bisect_right(ordered, k) for k in keys])

def test_location_test_finds_a_planted_shift_and_holds_its_level():
    rng = np.random.default_rng(9)
    R, G = 12, 200
    base = rng.uniform(0, 4, G)
    M = base + rng.normal(0, 0.3, size=(R, G))
    target = np.arange(R) < 6
    null = location_test(M, target, paired=False)
    assert null["exact"] and null["n_labellings"] == math.comb(12, 6) and null["floor"] == pytest.approx(2 / 924)
    M[target, 17] += 1.0
    res = location_test(M, target, paired=False)
    # relabellings keeping 5 of the 6 target replicates still see most of the shift: p is a few times the floor
    assert res["pvalue"] <= 0.01 and int(np.argmax(np.abs(res["t"]))) == 17
    assert res["adjusted_pvalue"][17] == res["pvalue"] and np.median(res["adjusted_pvalue"]) > 0.5
    # location_statistics on the same labelling matrix: the max |t| of every row, observed first
    lab, _ = replicate_labellings(target, paired=False)
    stat = location_statistics(M, lab, paired=False)
    assert stat[0] == pytest.approx(res["statistic"]) and stat.shape == (924,)
    # type I error over 60 null designs (exact: P(p <= 0.1) <= 0.1; >= 12 rejections has probability < 0.01)
    rejections = sum(location_test(base + rng.normal(0, 0.3, size=(8, G)), np.arange(8) < 4, paired=False)["pvalue"]
                     <= 0.1 for _ in range(60))
    assert rejections < 12


# --------------------------------------------------------------------------- the donor test
@pytest.mark.parametrize("rows", [8192, 7])
def test_replicate_features_sparse_equals_dense_and_direct(rows, monkeypatch):
    """Each family against a direct per-replicate computation; sparse (in row blocks) equals dense."""
    import scontrast.donor_test

    monkeypatch.setattr(scontrast.donor_test, "_ROWS", rows)
    rng = np.random.default_rng(11)
    X = sp.random(80, 9, density=0.35, random_state=12, format="csr")
    X.data = np.log1p(X.data * 5)
    rep = np.repeat(np.arange(4), 20)
    tgt = np.tile(np.arange(20) < 9, 4)
    dense = X.toarray()
    paired = replicate_features([X[:33], X[33:]], rep, tgt, 4, paired=True)
    again = replicate_features(dense, rep, tgt, 4, paired=True)
    for f in ("location", "spread", "detected"):
        np.testing.assert_allclose(paired[f], again[f], rtol=1e-12, atol=1e-12)
        assert paired[f].shape == (4, 2, 9)
    for r in range(4):
        for g, cells in ((0, (rep == r) & tgt), (1, (rep == r) & ~tgt)):
            np.testing.assert_allclose(paired["location"][r, g], np.log1p(np.expm1(dense[cells]).mean(axis=0)))
            np.testing.assert_allclose(paired["spread"][r, g], dense[cells].std(axis=0), atol=1e-12)
            np.testing.assert_allclose(paired["detected"][r, g], (dense[cells] > 0).mean(axis=0))
    unpaired = replicate_features(X, rep, rng.random(80) < 2, 4, paired=False)
    np.testing.assert_allclose(unpaired["spread"][2], dense[rep == 2].std(axis=0), atol=1e-12)
    with pytest.raises(ScontrastError, match="replicate features: a replicate .* has no cell"):
        replicate_features(dense, rep, tgt, 5, paired=False)


def test_family_t_of_paired_differences_is_limmas_one_sample_t():
    """Paired differences without a covariate: limma's squeezeVar with a constant prior (written out in
    _reference_squeeze), then ``dbar / sqrt(s2_post / R)``, for every sign flip checked."""
    rng = np.random.default_rng(13)
    R, G = 6, 40
    D = rng.normal(0.2, 1.0, size=(R, G)) * rng.uniform(0.3, 2.0, G)
    lab, _ = replicate_labellings(np.ones(R, bool), paired=True)
    t, df = family_t(D, lab, paired=True)
    for row in (0, 7, 33):
        d = np.where(lab[row][:, None], -D, D)
        s2 = d.var(axis=0, ddof=1)
        post, d0 = _reference_squeeze(s2, R - 1)
        np.testing.assert_allclose(t[row], d.mean(axis=0) / np.sqrt(post / R), rtol=1e-7)
        assert df[row] == pytest.approx(d0 + R - 1, rel=1e-7)


def _relabelled_pvalues(features, lab, paired, **kw):
    """The donor test's p-value with each labelling of ``lab`` taken as the observed one (rows reordered so it is
    first: the set of labellings is the same, only which member is observed changes)."""
    out = []
    for row in range(lab.shape[0]):
        order = np.r_[row, np.delete(np.arange(lab.shape[0]), row)]
        out.append(donor_test(features, lab[order], paired=paired, **kw)["pvalue"])
    return np.array(out)


@pytest.mark.parametrize("design", ["unpaired", "paired", "blocks"])
def test_donor_test_is_exact_over_its_relabellings(design):
    """Exactness by brute force: every labelling taken in turn as the observed one; under the null each is equally
    likely, so P(p <= a) = #{labellings with p <= a} / L must be at most a at every a. Unpaired 4 vs 4 (70), paired
    5 donors (32 sign flips), and 3 + 3 donors in two blocks of 3 + 3 (400 labellings keeping each block's count)."""
    rng = np.random.default_rng(14)
    if design == "paired":
        feats = {"location": rng.normal(size=(5, 2, 30)), "spread": rng.gamma(2.0, size=(5, 2, 30))}
        lab, exact = replicate_labellings(np.ones(5, bool), paired=True)
        kw = {}
    else:
        R = 8 if design == "unpaired" else 12
        feats = {"location": rng.normal(size=(R, 30)), "spread": rng.gamma(2.0, size=(R, 30))}
        blocks = None if design == "unpaired" else np.repeat(["a", "b"], 6)
        target = np.arange(R) % (2 if blocks is not None else R) < (1 if blocks is not None else 4)
        lab, exact = replicate_labellings(target, paired=False, blocks=blocks, max_labellings=10_000)
        kw = {"top_k": 3, "weights": [2.0, 1.0]}
    assert exact and lab.shape[0] == {"unpaired": 70, "paired": 32, "blocks": 400}[design]
    res = donor_test(feats, lab, paired=design == "paired", **kw)
    # 70 and 32 labellings (a mirror ties: floor 2/L): a family at its floor could not reach 0.05 in a min-p of two,
    # so the location family alone; 400 blocked labellings (no mirror): both, weighted 2:1
    assert res["combined"] == (["location", "spread"] if design == "blocks" else ["location"])
    p = _relabelled_pvalues(feats, lab, design == "paired", **kw)
    L = lab.shape[0]
    for a in np.arange(1, L + 1) / L:
        assert np.mean(p <= a + 1e-12) <= a + 1e-12
    # not trivially conservative: the smallest p-values are near the floor the set allows
    assert p.min() <= 4 / L


def test_donor_test_finds_a_mean_shift_and_a_spread_change_and_records_its_parts():
    rng = np.random.default_rng(15)
    R, G = 12, 300
    base = rng.uniform(0.2, 3.0, G)
    loc = np.log1p(base + rng.normal(0, 0.1, size=(R, G)) * base)
    spread = 0.5 + rng.normal(0, 0.05, size=(R, G))
    target = np.arange(R) < 6
    lab, exact = replicate_labellings(target, paired=False)
    null = donor_test({"location": loc, "spread": spread}, lab, paired=False, exact=exact)
    assert null["floor"] == pytest.approx(2 / 924) and set(null["parts"]) == {"location", "spread"}
    shifted = loc.copy()
    shifted[target, 5] += 0.8
    res = donor_test({"location": shifted, "spread": spread}, lab, paired=False, exact=exact)
    assert res["parts"]["location"] <= 3 / 924 and res["pvalue"] <= 0.01
    assert int(np.argmax(np.abs(res["t"]["location"]))) == 5 and res["statistics"].shape == (924, 2)
    wider = spread.copy()
    wider[target, 9] += 0.3
    res = donor_test({"location": loc, "spread": wider}, lab, paired=False, exact=exact)
    assert res["parts"]["spread"] <= 3 / 924 and res["pvalue"] <= 0.01 and res["parts"]["location"] > 0.01


# --------------------------------------------------------------------------- the co-expression family
def _cells(seed, n_cells=120, n_genes=12):
    """Log-normalised-like sparse cells with correlated genes (a shared per-cell factor in the first 4 genes)."""
    rng = np.random.default_rng(seed)
    lam = rng.uniform(0.3, 3.0, n_genes)[None, :] * np.ones((n_cells, 1))
    lam[:, :4] *= np.exp(rng.normal(0, 0.7, size=(n_cells, 1)))
    return sp.csr_matrix(np.log1p(rng.poisson(lam).astype(float)))


@pytest.mark.parametrize("rows", [8192, 7])
def test_replicate_coexpression_is_the_fisher_z_of_each_replicates_corrcoef(rows, monkeypatch):
    """Against np.corrcoef per replicate (and group), on the genes of largest pooled variance; sparse in row blocks
    equals dense; the paired shape is (R, 2, P)."""
    import scontrast.donor_test

    monkeypatch.setattr(scontrast.donor_test, "_ROWS", rows)
    X = _cells(21)
    dense = X.toarray()
    rep = np.repeat(np.arange(4), 30)
    tgt = np.tile(np.arange(30) < 13, 4)
    z, genes = replicate_coexpression([X[:50], X[50:]], rep, tgt, 4, paired=True, n_pair_genes=6)
    np.testing.assert_array_equal(genes, np.sort(np.argsort(-dense.var(axis=0))[:6]))
    np.testing.assert_allclose(pooled_variance(X), dense.var(axis=0), rtol=1e-10)
    assert z.shape == (4, 2, 15)
    iu = np.triu_indices(6, 1)
    for r in range(4):
        for g, cells in ((0, (rep == r) & tgt), (1, (rep == r) & ~tgt)):
            direct = np.arctanh(np.corrcoef(dense[np.ix_(cells, genes)], rowvar=False)[iu])
            np.testing.assert_allclose(z[r, g], direct, rtol=1e-9, atol=1e-9)
    unpaired, same = replicate_coexpression(dense, rep, tgt, 4, paired=False, n_pair_genes=6)
    assert unpaired.shape == (4, 15) and np.array_equal(same, genes)
    np.testing.assert_allclose(unpaired[1], np.arctanh(np.corrcoef(dense[rep == 1][:, genes], rowvar=False)[iu]),
                               rtol=1e-9, atol=1e-9)
    # the shared factor of genes 0-3 shows: their pairs' mean z is well above the other pairs'
    everything, _ = replicate_coexpression(dense, rep, tgt, 4, paired=False, n_pair_genes=12)
    i, j = np.triu_indices(12, 1)
    module = (i < 4) & (j < 4)
    assert everything[:, module].mean() > everything[:, ~module].mean() + 0.3
    with pytest.raises(ScontrastError, match="replicate co-expression: a replicate .* has no cell"):
        replicate_coexpression(dense, rep, tgt, 5, paired=False)
    with pytest.raises(ScontrastError, match="n_pair_genes must be >= 2"):
        replicate_coexpression(dense, rep, tgt, 4, paired=False, n_pair_genes=1)


def test_replicate_coexpression_of_a_constant_gene_is_zero():
    """A gene constant within a replicate (all zero there, or one value) has no correlation: z = 0 for its pairs in
    that replicate, finite elsewhere; two identical genes are clipped to a finite z."""
    dense = _cells(22, n_cells=60, n_genes=5).toarray()
    dense[:30, 1] = 0.0          # replicate 0: gene 1 never expressed
    dense[30:, 2] = 0.7          # replicate 1: gene 2 one value
    dense[:, 4] = dense[:, 0]    # genes 0 and 4 identical
    rep = np.repeat([0, 1], 30)
    z, genes = replicate_coexpression(dense, rep, np.ones(60, bool), 2, paired=False, n_pair_genes=5)
    assert np.array_equal(genes, np.arange(5)) and np.all(np.isfinite(z))
    i, j = np.triu_indices(5, 1)
    assert np.all(z[0, (i == 1) | (j == 1)] == 0.0) and np.all(z[1, (i == 2) | (j == 2)] == 0.0)
    # the same genes' other pairs (but pair (1, 2), which has a constant member in both) are correlations
    assert np.all(z[1, ((i == 1) | (j == 1)) & (j != 2)] != 0.0) and np.all(z[0, ((i == 2) | (j == 2)) & (i != 1)] != 0.0)
    twin = (i == 0) & (j == 4)
    np.testing.assert_allclose(z[:, twin], np.arctanh(1 - 1e-6))


def test_the_donor_test_with_coexpression_stays_exact():
    """The genes are chosen on all cells pooled, so renaming the donors permutes the features' rows and nothing
    else: the statistics over every labelling are the same multiset. Under the null every labelling taken as the
    observed one gives P(p <= a) <= a (4 vs 4 donors of cells from one law: 70 labellings)."""
    X = _cells(23, n_cells=240, n_genes=10)
    rep = np.repeat(np.arange(8), 30)
    target = np.arange(8) < 4
    lab, exact = replicate_labellings(target, paired=False)
    z, genes = replicate_coexpression(X, rep, target[rep], 8, paired=False, n_pair_genes=8)
    perm = np.random.default_rng(24).permutation(8)
    z2, genes2 = replicate_coexpression(X, perm[rep], target[perm[rep]], 8, paired=False, n_pair_genes=8)
    assert np.array_equal(genes, genes2)
    np.testing.assert_allclose(z2[perm], z, rtol=1e-12, atol=1e-12)
    loc = replicate_features(X, rep, target[rep], 8, paired=False)["location"]
    feats = {"location": loc, "coexpression": z}
    stats = donor_test(feats, lab, paired=False, exact=exact)["statistics"]
    renamed = {"location": replicate_features(X, perm[rep], target[rep], 8, paired=False)["location"],
               "coexpression": z2}
    stats2 = donor_test(renamed, lab[:, np.argsort(perm)], paired=False, exact=exact)["statistics"]
    np.testing.assert_allclose(np.sort(stats, axis=0), np.sort(stats2, axis=0), rtol=1e-9)
    p = _relabelled_pvalues({"coexpression": z}, lab, False, top_k=5)
    for a in np.arange(1, 71) / 70:
        assert np.mean(p <= a + 1e-12) <= a + 1e-12
    assert p.min() <= 4 / 70


def test_module_coexpression_averages_each_genes_strongest_pairs():
    """Against a loop: each gene's partners are those of largest mean z over every replicate (and group), and the
    feature is the replicate's mean z over them; paired (R, 2, P) gives (R, 2, n); bad shapes are refused."""
    rng = np.random.default_rng(25)
    n, m = 7, 3
    z = rng.normal(0, 0.3, size=(5, 2, n * (n - 1) // 2))
    out = module_coexpression(z, m)
    assert out.shape == (5, 2, n)
    i, j = np.triu_indices(n, 1)
    full = np.zeros((5, 2, n, n))
    full[..., i, j] = z
    full[..., j, i] = z
    for got, f in ((out, full), (module_coexpression(z[:, 0], m), full[:, 0])):
        mean = f.reshape(-1, n, n).mean(axis=0)
        for g in range(n):
            partners = sorted((h for h in range(n) if h != g), key=lambda h: -mean[g, h])[:m]
            np.testing.assert_allclose(got[..., g], f[..., g, partners].mean(axis=-1), rtol=1e-12)
    with pytest.raises(ScontrastError, match="module co-expression"):
        module_coexpression(z[..., :20], 2)
    with pytest.raises(ScontrastError, match="module co-expression"):
        module_coexpression(z, n)


# --------------------------------------------------------------------------- the spread freed of the donors' means
def _counts_cells(seed, n_cells=160, n_genes=15):
    """Raw Poisson counts (cells x genes) with a per-cell depth and a per-cell log-normal factor on the first 5 genes;
    the log-normalised cells (log1p of counts per 10,000 of the cell's total) and each cell's value of one count."""
    rng = np.random.default_rng(seed)
    lam = rng.uniform(0.2, 6.0, n_genes)[None, :] * rng.uniform(0.5, 2.0, size=(n_cells, 1))
    lam[:, :5] *= np.exp(rng.normal(0, 0.8, size=(n_cells, 5)))
    c = rng.poisson(lam).astype(float)
    c[:, -1] += 1.0  # every cell has a count (its total is not 0)
    k = 1e4 / c.sum(axis=1)
    return c, sp.csr_matrix(np.log1p(c * k[:, None])), k


@pytest.mark.parametrize("rows", [8192, 7])
def test_spread_families_against_a_direct_computation(rows, monkeypatch):
    """dispersion, residual_spread and gene_residual_spread of replicate_features against loops over the replicates
    (and groups), paired (R, 2, G) and unpaired; sparse in row blocks equals dense; the cells' scale estimated from
    X (the smallest non-zero expm1) equals the one given when every cell has a gene at one count."""
    import scontrast.donor_test

    monkeypatch.setattr(scontrast.donor_test, "_ROWS", rows)
    c, X, k = _counts_cells(31)
    dense = X.toarray()
    rep = np.repeat(np.arange(4), 40)
    tgt = np.tile(np.arange(40) < 17, 4)
    paired = replicate_features([X[:61], X[61:]], rep, tgt, 4, paired=True, cell_scale_of=k)
    again = replicate_features(dense, rep, tgt, 4, paired=True, cell_scale_of=k)
    ones = (c == 1).any(axis=1)
    assert ones.mean() > 0.9
    np.testing.assert_allclose(cell_scale(X)[ones], k[ones], rtol=1e-12)
    np.testing.assert_allclose(cell_scale(dense), cell_scale(X), rtol=1e-12)
    assert cell_scale(sp.csr_matrix((2, 3))).tolist() == [1.0, 1.0] and cell_scale(np.zeros((1, 3))).tolist() == [1.0]
    loc, sd = paired["location"].reshape(8, -1), paired["spread"].reshape(8, -1)
    for f in ("dispersion", "residual_spread", "gene_residual_spread"):
        np.testing.assert_allclose(paired[f], again[f], rtol=1e-10, atol=1e-12)
        assert paired[f].shape == (4, 2, 15)
    cap = np.quantile(np.expm1(dense), CAP_QUANTILE, axis=0)
    np.testing.assert_allclose(column_quantile([X[:61], X[61:]], CAP_QUANTILE), cap, rtol=1e-12)
    for q in (0.0, 0.3, 0.5, 0.97, 1.0):   # the sparse path against np.quantile, zeros included
        np.testing.assert_allclose(column_quantile(X, q), np.quantile(np.expm1(dense), q, axis=0), rtol=1e-12)
    assert (cap < np.expm1(dense).max(axis=0)).all()   # the cap bites: the largest cells are capped
    for r in range(4):
        for g, cells in ((0, (rep == r) & tgt), (1, (rep == r) & ~tgt)):
            e = np.minimum(np.expm1(dense[cells]), cap)
            ratio = ((e * e).mean(axis=0) - (k[cells, None] * e).mean(axis=0)) / e.mean(axis=0) ** 2
            np.testing.assert_allclose(paired["dispersion"][r, g], np.log(np.maximum(ratio, 1.0)), rtol=1e-9)
            u = 2 * r + g
            B = _natural_spline_basis(loc[u], 4)
            fit = B @ np.linalg.solve(B.T @ B, B.T @ sd[u])
            np.testing.assert_allclose(paired["residual_spread"][r, g], sd[u] - fit, atol=1e-10)
    for j in range(15):   # per gene: the residual of its least-squares line over all 8 samples
        slope, icpt = np.polyfit(loc[:, j], sd[:, j], 1)
        np.testing.assert_allclose(paired["gene_residual_spread"].reshape(8, -1)[:, j],
                                   sd[:, j] - (slope * loc[:, j] + icpt), atol=1e-10)
    unpaired = replicate_features(X, rep, tgt, 4, paired=False)
    assert unpaired["dispersion"].shape == (4, 15)
    # the study's dense path: the same capped dispersion per unit
    unit = 2 * rep + ~tgt
    np.testing.assert_allclose(unit_dispersion(np.expm1(dense), k, unit, list(range(8))),
                               paired["dispersion"].reshape(8, -1), rtol=1e-10, atol=1e-12)
    with pytest.raises(ScontrastError, match="residual spread: location .* and spread .* must share one shape"):
        residual_spread(loc, sd[:, :3])
    with pytest.raises(ScontrastError, match="cell_scale_of: 160 positive values expected .* got 159"):
        replicate_features(X, rep, tgt, 4, paired=False, cell_scale_of=k[1:])
    with pytest.raises(ScontrastError, match="cell_scale_of: 160 positive values expected .* minimum 0"):
        replicate_features(X, rep, tgt, 4, paired=False, cell_scale_of=np.r_[0.0, k[1:]])


def test_dispersion_is_the_squared_cv_beyond_poisson():
    """Cells of Poisson counts whose normalised mean is mu times a per-cell log-normal factor of log-sd s (counts
    follow each cell's depth, 1 / k): log(1 + phi) -> s^2 for every mu and depth (without the Poisson part it would be
    about log(e^{s^2} + 1/mu): 0.4 at mu = 5 counts, s = 0.5); with a fixed mean (s = 0) it is about 0; a constant
    factor on the gene's mean (a donor's) leaves it unchanged."""
    rng = np.random.default_rng(32)
    n = 40_000
    k = 1e4 / rng.uniform(500, 2000, n)
    for mu, s in ((5.0, 0.5), (20.0, 0.5), (5.0, 0.0)):
        got = []
        for factor in (1.0, 3.0):
            lam = mu * factor * np.exp(rng.normal(-s * s / 2, s, n)) * k.mean() / k
            e = rng.poisson(lam) * k
            got.append(dispersion(e.mean(), (e * e).mean(), (k * e).mean()))
        # sampling sd of the estimate at n = 40,000 is below 0.01 here: 0.03 is >= 3 of them
        assert got[0] == pytest.approx(s * s, abs=0.03) and got[1] == pytest.approx(s * s, abs=0.03)
    assert dispersion(0.0, 0.0, 0.0) == 0.0 and dispersion(1.0, 0.5, 0.6) == 0.0


@pytest.mark.parametrize("paired", [False, True])
def test_spread_families_keep_the_donor_test_exact(paired):
    """The families are computed without the labels: relabelling the donors' cells (unpaired: which donors are target;
    paired: a donor's two samples swapped) gives the same features (paired: that donor's rows swapped), so the donor
    test's statistics over every relabelling are the same multiset; and with every labelling taken as the observed
    one, P(p <= a) <= a."""
    c, X, k = _counts_cells(33, n_cells=320, n_genes=12)
    names = ("dispersion", "residual_spread", "gene_residual_spread", "tail")
    if paired:
        rep, tgt = np.repeat(np.arange(5), 64), np.tile(np.arange(64) < 32, 5)
        lab, exact = replicate_labellings(np.ones(5, bool), paired=True)
        swap = np.isin(rep, [1, 3])
        moved = tgt ^ swap
    else:
        rep = np.repeat(np.arange(8), 40)
        target = np.arange(8) < 4
        tgt = target[rep]
        lab, exact = replicate_labellings(target, paired=False)
        moved = np.array([False, True, True, False, True, False, False, True])[rep]
    feats = replicate_features(X, rep, tgt, rep.max() + 1, paired=paired, cell_scale_of=k)
    other = replicate_features(X, rep, moved, rep.max() + 1, paired=paired, cell_scale_of=k)
    for f in names:
        want = feats[f].copy()
        if paired:
            want[[1, 3]] = want[[1, 3]][:, ::-1]
        np.testing.assert_allclose(other[f], want, rtol=1e-10, atol=1e-12)
        p = _relabelled_pvalues({f: feats[f]}, lab, paired, top_k=3)
        for a in np.arange(1, lab.shape[0] + 1) / lab.shape[0]:
            assert np.mean(p <= a + 1e-12) <= a + 1e-12
