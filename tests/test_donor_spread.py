"""The tail family of the donor test (scontrast.donor_spread.tail_share) and the variance trend every family shares."""

import numpy as np
import pytest
import scipy.sparse as sp

from scontrast.design import replicate_labellings
from scontrast.donor_spread import TAIL_QUANTILE, tail_piece, tail_share
from scontrast.donor_test import family_t, replicate_features, top_mean


def _cells(seed, n_cells=240, n_genes=20, substate=0.0):
    """Log-normalised Poisson cells (log1p of counts per 10,000) of 6 replicates, the first 3 target; a share
    ``substate`` of the target cells carries the first 4 genes at 5x."""
    rng = np.random.default_rng(seed)
    rep = np.repeat(np.arange(6), n_cells // 6)
    tgt = rep < 3
    lam = rng.uniform(0.3, 5.0, n_genes)[None, :] * rng.uniform(0.5, 2.0, size=(n_cells, 1))
    carriers = tgt & (rng.random(n_cells) < substate)
    lam[np.ix_(carriers, np.arange(4))] *= 5.0
    c = rng.poisson(lam).astype(float)
    c[:, -1] += 1.0
    return sp.csr_matrix(np.log1p(c * (1e4 / c.sum(axis=1))[:, None])), rep, tgt


@pytest.mark.parametrize("paired", [False, True])
def test_tail_is_the_logit_share_above_the_pooled_quantile(paired):
    """Per replicate (and group when paired), (#cells with expm1(x) above the gene's pooled 90th percentile + 0.5) /
    (n + 1) on the logit scale; sparse in row blocks equals dense and a loop over the cells."""
    X, rep, tgt = _cells(1)
    if paired:
        tgt = np.tile(np.arange(40) < 17, 6)
    got = replicate_features([X[:77], X[77:]], rep, tgt, 6, paired=paired)["tail"]
    dense = replicate_features(X.toarray(), rep, tgt, 6, paired=paired)["tail"]
    np.testing.assert_allclose(got, dense, rtol=1e-12)
    e = np.expm1(X.toarray())
    thr = np.quantile(e, TAIL_QUANTILE, axis=0)
    for r in range(6):
        for g, cells in enumerate([(rep == r) & tgt, (rep == r) & ~tgt] if paired else [rep == r]):
            p = ((e[cells] > thr).sum(axis=0) + 0.5) / (cells.sum() + 1.0)
            want = np.log(p / (1 - p))
            np.testing.assert_allclose(got[r, g] if paired else got[r], want, rtol=1e-12)
    assert got.shape == ((6, 2, 20) if paired else (6, 20))
    # dense and sparse pieces agree, and a cell at the threshold is not above it
    piece = tail_piece(sp.csr_matrix(np.array([[0.0, 2.0, 3.0]])), np.array([0.0, 2.0, 1.0]))
    assert piece.toarray().tolist() == [[0.0, 0.0, 1.0]] == tail_piece(np.array([[0.0, 2.0, 3.0]]),
                                                                        np.array([0.0, 2.0, 1.0])).tolist()
    assert np.isfinite(tail_share(np.array([[0.0, 1.0]]), np.array([5]))).all()


def test_tail_sees_a_substate_in_a_share_of_the_target_cells():
    """A share of the target cells carrying 4 genes at 5x raises those genes' tail shares in the target replicates:
    their moderated t are the family's largest, and the family's statistic is at the floor of the 20 labellings."""
    X, rep, tgt = _cells(2, n_cells=600, substate=0.15)
    feats = replicate_features(X, rep, tgt, 6, paired=False)
    lab, _ = replicate_labellings(np.arange(6) < 3, paired=False)
    t, _ = family_t(feats["tail"], lab, paired=False)
    assert set(np.argsort(-t[0])[:4]) == {0, 1, 2, 3}
    stat = top_mean(t, 4)
    assert np.mean(stat >= stat[0] - 1e-9) == pytest.approx(2 / 20)   # the observed and its mirror


def test_spline_basis_with_tied_quantiles_drops_the_repeated_knots():
    """Many tied values make inner quantiles coincide: the basis keeps the distinct knots (finite, full rank) instead
    of dividing by a zero knot spacing; with distinct quantiles it is the full natural-spline basis."""
    from scontrast.donor_spread import _natural_spline_basis

    tied = np.r_[np.zeros(60), np.ones(30), np.linspace(2.0, 5.0, 10)]    # quantiles 0, 0, 1, 5 at df 4
    B = _natural_spline_basis(tied, 4)
    assert np.isfinite(B).all() and B.shape == (100, 3) and np.linalg.matrix_rank(B) == 3
    spread = np.linspace(0.0, 1.0, 100) ** 2
    full = _natural_spline_basis(spread, 4)
    assert full.shape == (100, 4) and np.linalg.matrix_rank(full) == 4
    assert _natural_spline_basis(np.r_[np.zeros(99), 1.0], 4).shape == (100, 2)   # two distinct values: a line


@pytest.mark.parametrize("paired", [False, True])
def test_every_family_trends_on_the_genes_mean_location(paired):
    """The donor test's moderated t of the spread families uses the genes' mean location (limma's average expression)
    as the covariate of its variance trend, not the family's own mean: a dispersion's level is mostly its Poisson
    floor, while its noise follows the counts. The study test does the same with its first family unpaired."""
    from scontrast.donor_test import donor_test, trend_covariates
    from scontrast.study._test import unpaired_t

    X, rep, tgt = _cells(5, n_cells=480, n_genes=40)
    tgt = np.tile(np.arange(80) < 40, 6) if paired else tgt
    feats = replicate_features(X, rep, tgt, 6, paired=paired)
    feats = {f: feats[f] for f in ("location", "dispersion")}
    lab, exact = replicate_labellings(np.arange(6) < 3, paired=paired)
    res = donor_test(feats, lab, paired=paired, exact=exact)
    ave = feats["location"].mean(axis=(0, 1) if paired else 0)
    np.testing.assert_allclose(trend_covariates(feats, paired=paired)["dispersion"], ave)
    by_location = family_t(feats["dispersion"], lab, paired=paired, covariate=ave)[0]
    own = family_t(feats["dispersion"], lab, paired=paired)[0]
    np.testing.assert_allclose(res["t"]["dispersion"], by_location[0])
    assert not np.allclose(by_location[0], own[0], rtol=1e-3)   # the covariate changes the t
    T = top_mean(by_location, 10)
    assert res["parts"]["dispersion"] == pytest.approx(np.mean(T >= T[0] - 1e-10 * max(1.0, abs(T[0]))))
    if not paired:
        both = np.hstack([feats["location"], feats["dispersion"]])
        t = unpaired_t(both, lab, np.repeat([0, 1], 40))
        np.testing.assert_allclose(t[:, 40:], by_location)
