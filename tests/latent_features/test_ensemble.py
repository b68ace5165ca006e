"""BinaryFactorEnsemble and its member fit: exact steps against brute force, K by stability, determinism."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

from scontrast.core import ScontrastError, ScontrastWarning
from scontrast.latent_features import BinaryFactorEnsemble
from scontrast.latent_features._binary_factor import assign, fit_member, oriented, patterns, refit, weighted_loss
from scontrast.latent_features._ensemble import _chosen_k, _past_patience, stability


def _planted(n=600, d=30, k=3, effect=2.0, seed=0):
    """Cells with ``k`` overlapping programmes of 10 genes (shift ``effect`` noise sds): (X, Z)."""
    rng = np.random.default_rng(seed)
    Z = (rng.random((n, k)) < np.array([0.4, 0.3, 0.2][:k])).astype(np.uint8)
    A = np.zeros((k, d))
    for j in range(k):
        A[j, 8 * j:8 * j + 10] = effect
    return Z @ A + rng.normal(size=(n, d)), Z


def _jaccard(a, b):
    return (a & b).sum() / max((a | b).sum(), 1)


def test_patterns_are_every_binary_row_once():
    P = patterns(3)
    assert P.shape == (8, 3)
    assert {tuple(r) for r in P.astype(int)} == set(itertools.product([0, 1], repeat=3))


def test_assign_is_the_enumerated_best_pattern():
    rng = np.random.default_rng(1)
    X, b, A = rng.normal(size=(50, 7)), rng.normal(size=7), rng.normal(size=(4, 7))
    Z = assign(X, b, A)
    for i in range(50):
        losses = [np.sum((X[i] - b - np.array(p) @ A) ** 2) for p in itertools.product([0, 1], repeat=4)]
        best = np.array(list(itertools.product([0, 1], repeat=4))[int(np.argmin(losses))])
        assert np.sum((X[i] - b - Z[i] @ A) ** 2) == pytest.approx(min(losses), rel=1e-12)
        assert np.array_equal(Z[i], best) or np.isclose(np.sum((X[i] - b - Z[i] @ A) ** 2), min(losses))


def test_assign_with_no_features_is_empty():
    assert assign(np.ones((5, 3)), np.zeros(3), np.zeros((0, 3))).shape == (5, 0)


def test_refit_is_the_weighted_ridge_least_squares_solution():
    rng = np.random.default_rng(2)
    X, Z, w = rng.normal(size=(40, 5)), (rng.random((40, 3)) < 0.5).astype(np.uint8), rng.random(40) * 2
    b, A = refit(X, Z, w, ridge=0.7)
    # the same problem as an ordinary least-squares one: rows scaled by sqrt(w), ridge rows for A only
    D = np.hstack([np.ones((40, 1)), Z])
    top = np.sqrt(w)[:, None] * D
    pen = np.hstack([np.zeros((3, 1)), np.sqrt(0.7) * np.eye(3)])
    B = np.linalg.lstsq(np.vstack([top, pen]), np.vstack([np.sqrt(w)[:, None] * X, np.zeros((3, 5))]), rcond=None)[0]
    scale = np.abs(B).max()
    np.testing.assert_allclose(b, B[0], atol=1e-10 * scale)
    np.testing.assert_allclose(A, B[1:], atol=1e-10 * scale)


def test_a_member_fit_never_ends_above_its_start_and_sits_at_a_fixed_point():
    X, _ = _planted(seed=3)
    w = np.random.default_rng(3).dirichlet(np.ones(X.shape[0])) * X.shape[0]
    fit = fit_member(X, w, 3, starts=1, max_iter=200, ridge=1.0, min_cells=5, rng=np.random.default_rng(0), tol=0.0)
    assert fit["converged"]
    from scontrast.latent_features._binary_factor import initial_allocation

    Z0 = initial_allocation(X, w, 3, None, 1.0)
    b0, A0 = refit(X, Z0, w, 1.0)
    start = weighted_loss(X, Z0, b0, A0, w) + float((A0 * A0).sum())
    assert fit["loss"] <= start * (1 + 1e-12)
    # exact fixed point: the loadings of Z assign every cell back to its own row of Z
    assert np.array_equal(assign(X, fit["b"], fit["A"]), fit["Z"])


def test_orientation_keeps_the_fit_and_makes_each_feature_the_minority():
    rng = np.random.default_rng(4)
    Z = (rng.random((30, 3)) < np.array([0.8, 0.3, 0.6])).astype(np.uint8)
    b, A = rng.normal(size=6), rng.normal(size=(3, 6))
    Zo, bo, Ao = oriented(Z, b, A)
    assert (Zo.mean(axis=0) <= 0.5).all()
    np.testing.assert_allclose(bo + Zo @ Ao, b + Z @ A, atol=1e-12 * np.abs(b + Z @ A).max())


def test_stability_edge_cases():
    rng = np.random.default_rng(5)
    Z = (rng.random((100, 2)) < 0.4).astype(np.uint8)
    assert stability([Z, Z.copy(), Z.copy()])[0] == 1.0  # the same features in every member
    assert stability([np.zeros((100, 0), np.uint8)] * 3)[0] == 1.0  # no feature asked for: nothing unstable
    # members that lost their features (below min_cells) do not make a K look stable: the demo's wu2020 chose
    # K = 1 at stability 1.00 because an empty member was the "medoid" of vacuous support
    empty = np.zeros((100, 0), np.uint8)
    # the two that found the feature agree, and the empty one lacks it: half of the others hold it
    assert stability([empty, Z[:, :1], Z[:, :1].copy()], k=1)[0] == 0.5
    weakest, medoid, _ = stability([empty, Z[:, :1], (rng.random((100, 1)) < 0.4).astype(np.uint8)], k=1)
    assert medoid != 0 and weakest < 0.6  # an empty member is never the medoid
    assert stability([empty] * 3, k=1)[0] == 0.0
    assert stability([Z, Z[:, :1], Z], k=2)[1] != 1  # the member missing a feature is not the medoid
    noise = [(rng.random((100, 2)) < 0.4).astype(np.uint8) for _ in range(6)]
    assert stability(noise)[0] < 0.5  # unrelated random features do not recur
    # one member of five differs: the medoid is one of the four that agree, its support 3/4 + 1/4 * overlap
    odd = (rng.random((100, 2)) < 0.4).astype(np.uint8)
    s, medoid, per = stability([Z, Z, odd, Z, Z])
    assert medoid != 2 and per.shape == (2,) and 0.75 <= s < 1.0


def test_the_chosen_k_is_the_largest_stable_one_and_the_search_stops_after_patience():
    assert _chosen_k(np.array([0.9, 0.85, 0.5, np.nan]), 0.8) == 2
    assert _chosen_k(np.array([0.5, 0.9, 0.79]), 0.8) == 2  # K = 1 unstable, K = 2 stable
    assert _chosen_k(np.array([0.5, 0.6]), 0.8) == 0
    assert _chosen_k(np.array([0.8]), 0.8) == 1  # at the threshold is stable
    assert not _past_patience(np.array([0.9, 0.5]), 0.8)  # one unstable K after a stable one
    assert _past_patience(np.array([0.9, 0.5, 0.4]), 0.8)  # two
    assert not _past_patience(np.array([0.5, 0.4, 0.3]), 0.8)  # no stable K yet: up to four are tried
    assert _past_patience(np.array([0.5, 0.4, 0.3, 0.2]), 0.8)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planted_programmes_are_found_at_their_number_by_any_seed(seed):
    X, Z = _planted(seed=10 + seed)
    m = BinaryFactorEnsemble(n_members=12, random_state=seed, n_jobs=1).fit(X)
    assert m.n_features_ == 3
    med = m.samples_[m.medoid_]
    for j in range(3):  # each planted programme is one of the medoid's features, nearly cell for cell
        assert max(_jaccard(Z[:, j] == 1, med[:, c] == 1) for c in range(med.shape[1])) >= 0.9
    assert m.medoid_support_.min() >= 0.9


def test_two_seeds_give_the_same_features():
    X, _ = _planted(seed=20)
    a = BinaryFactorEnsemble(n_members=12, random_state=0).fit(X)
    b = BinaryFactorEnsemble(n_members=12, random_state=1).fit(X)
    A, B = a.samples_[a.medoid_], b.samples_[b.medoid_]
    assert A.shape[1] == B.shape[1] == 3
    for j in range(3):
        assert max(_jaccard(A[:, j] == 1, B[:, c] == 1) for c in range(3)) >= 0.9


def test_pure_noise_has_no_stable_feature_and_says_so(caplog):
    """A finding, logged at INFO (n_features_ = 0 holds it), not a warning: no setting changes it."""
    X = np.random.default_rng(6).normal(size=(400, 20))
    with warnings.catch_warnings(), caplog.at_level("INFO", logger="scontrast.latent_features"):
        warnings.simplefilter("error", ScontrastWarning)
        m = BinaryFactorEnsemble(n_members=10, max_features=3, random_state=0).fit(X)
    assert [r.levelname for r in caplog.records if "no feature is stable over 10 resamples" in r.getMessage()] == [
        "INFO"]
    assert m.n_features_ == 0 and all(s.shape == (400, 0) for s in m.samples_)
    assert np.nanmax(m.stability_) < 0.8


def test_a_fit_is_reproducible_and_does_not_depend_on_threads():
    X, _ = _planted(n=300, seed=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScontrastWarning)
        a = BinaryFactorEnsemble(n_members=6, max_features=4, random_state=3, n_jobs=1).fit(X)
        b = BinaryFactorEnsemble(n_members=6, max_features=4, random_state=3, n_jobs=2).fit(X)
    np.testing.assert_array_equal(a.stability_, b.stability_)
    assert all(np.array_equal(x, y) for x, y in zip(a.samples_, b.samples_))
    assert list(a.sample_chains_) == [0, 1] * 3


def test_the_subsample_fits_and_every_other_cell_is_assigned_from_the_loadings():
    X, Z = _planted(n=900, seed=8)
    strata = np.arange(900) % 3
    m = BinaryFactorEnsemble(n_members=8, max_cells=300, random_state=0).fit(X, strata=strata)
    assert m.fitted_cells_.size == 300 and np.bincount(strata[m.fitted_cells_]).tolist() == [100, 100, 100]
    others = np.setdiff1d(np.arange(900), m.fitted_cells_)
    med = m.samples_[m.medoid_]
    # the other cells' rows are the medoid's loadings' best patterns (in the units of X)
    np.testing.assert_array_equal(med[others], assign(X[others], m.intercept_, m.A_))
    assert m.n_features_ == 3


def test_choosing_max_features_is_a_warning():
    X, _ = _planted(seed=9)
    with pytest.warns(ScontrastWarning, match="edge of the grid"):
        m = BinaryFactorEnsemble(n_members=8, max_features=2, random_state=0).fit(X)
    assert m.n_features_ == 2


@pytest.mark.parametrize("params, message", [
    ({"max_features": 13}, r"^max_features=13 is above its maximum 12$"),
    ({"n_members": 1}, r"n_members"),
    ({"stability": 0.0}, r"stability"),
    ({"scale": "yes"}, r"scale: expected True or False"),
])
def test_bad_settings_are_refused_with_their_name(params, message):
    with pytest.raises(ScontrastError, match=message):
        BinaryFactorEnsemble(**params).fit(np.random.default_rng(0).normal(size=(20, 3)))


def test_the_default_front_end_writes_the_ensemble_and_fangs_reports_it():
    """tl.latent_features's default method: members as samples, their halves as chains, the stability
    per K in uns; tl.fangs then finds the planted programmes, the summary states the method and K, and
    the figure shows the stability curve."""
    import anndata as ad
    import pandas as pd

    from scontrast import pl, tl
    from scontrast.tl._fangs import summary_rows

    X, Z = _planted(n=500, seed=30)
    obs = pd.DataFrame({"scontrast_target": np.arange(500) < 250}, index=[f"c{i}" for i in range(500)])
    adata = ad.AnnData(X=(X + 5).astype(np.float32), obs=obs,
                       var=pd.DataFrame(index=[f"g{j}" for j in range(X.shape[1])]))
    tl.latent_features(adata, genes="all", n_genes=30, n_members=10, max_features=6, random_state=0)
    info = adata.uns["latent_features"]
    assert info["params"]["method"] == "ensemble" and info["n_features_chosen"] == 3
    assert list(np.asarray(info["n_features"])) == [3] * 10 and list(np.asarray(info["chains"])) == [0, 1] * 5
    # K = 4 and 5 unstable: K = 6 is not tried
    assert np.asarray(info["stability"]).shape == (6,) and np.isnan(np.asarray(info["stability"])[-1])
    tl.fangs(adata, random_state=0)
    f = adata.uns["fangs"]
    assert f["n_features"] == 3 and np.asarray(f["feature_supported"]).all()
    est = adata.obsm["fangs_features"]
    for j in range(3):
        assert max(_jaccard(Z[:, j] == 1, est[:, c] == 1) for c in range(3)) >= 0.9
    rows = dict(summary_rows(adata))
    assert rows["latent features: chosen K"].startswith("3 (the largest K")
    assert "resamples, not posterior draws" in rows["latent features: method"]
    assert all("held by the two halves of the fits (Jaccard)" in rows[f"feature F{j + 1}"] for j in range(3))
    # a feature listed as unsupported is worded by halves too, not by chains
    f["feature_supported"] = np.array([False, True, True])
    rows = dict(summary_rows(adata))
    assert "unsupported feature F1 (held below 0.8 by one of the two halves of the fits: not a finding)" in rows
    f["feature_supported"] = np.ones(3, dtype=bool)
    fig = pl.fangs(adata)
    assert any(" ".join(ax.get_title().split()) == "features that recur across resamples" for ax in fig.get_axes())
    # the heatmap's key words the 'held' numbers as the summary does: per half of the fits, not per chain
    heatmap = " ".join(fig.get_axes()[0].get_title().split())
    assert "held: mean Jaccard with its match in each of the two halves of the fits" in heatmap, heatmap
    assert "chain" not in heatmap, heatmap
