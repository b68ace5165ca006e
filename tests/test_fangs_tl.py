"""AnnData front ends of latent_features and FANGS, and the FANGS figure, on made-up data."""

from __future__ import annotations

import anndata as ad
import matplotlib
import numpy as np
import pandas as pd
import pytest

from scontrast import io
from scontrast.core import ScontrastError
from scontrast.fangs import faro_loss
from scontrast.feature_samples import load_samples, save_samples
from scontrast.latent_features import simulate_linear_gaussian
from scontrast.pl._fangs import cell_order
from scontrast.pl._fangs import fangs as plot_fangs
from scontrast.tl._fangs import fangs
from scontrast.tl._latent_features import latent_features, samples_from_adata

matplotlib.use("Agg")


def made_up(n=120, seed=0):
    """Cells whose 5-D embedding is Z A + noise; feature 0 is held by target cells only."""
    rng = np.random.default_rng(seed)
    is_target = np.arange(n) % 2 == 0
    Z = np.zeros((n, 3), dtype=np.uint8)
    Z[:, 0] = is_target & (rng.random(n) < 0.8)
    Z[:, 1] = rng.random(n) < 0.4
    Z[:, 2] = rng.random(n) < 0.3
    X, _ = simulate_linear_gaussian(Z, 5, sigma_x=0.2, sigma_a=1.5, random_state=seed)
    adata = ad.AnnData(X=rng.poisson(1.0, size=(n, 8)).astype(np.float32),
                       obs=pd.DataFrame({"scontrast_target": is_target}, index=[f"cell{i}" for i in range(n)]))
    adata.obsm["X_cpca"] = X
    return adata, Z


@pytest.fixture(scope="module")
def fitted():
    adata, Z = made_up()
    latent_features(adata, method="ibp", use_rep="X_cpca", n_iter=300, burn_in=150, thin=3, random_state=0)
    return adata, Z


def test_latent_features_writes_its_slots(fitted):
    adata, _ = fitted
    info = adata.uns["latent_features"]
    k = np.asarray(info["n_features"])
    assert k.size == 100  # two chains x 50
    assert info["samples"].shape == (adata.n_obs, k.sum()) and info["samples"].dtype == np.uint8
    assert list(adata.obsm) == ["X_cpca"]  # neither the samples nor the matrix explained is an embedding
    np.testing.assert_array_equal(info["cells"], adata.obs_names)
    for key in ("log_joint", "K", "alpha", "sigma_x", "sigma_a"):
        assert np.asarray(info[key]).shape == (2, 300)
    assert list(np.asarray(info["chains"])) == [0] * 50 + [1] * 50
    assert info["params"]["use_rep"] == "X_cpca" and info["params"]["n_dims"] is None
    assert info["params"]["n_chains"] == 2 and info["params"]["sigma_a"] == 1.0
    for key in ("rhat_log_joint", "rhat_K", "ess_log_joint", "ess_K"):
        assert np.isfinite(info[key])
    assert info["rhat_log_joint"] < 1.1 and info["rhat_K"] < 1.1  # a well-separated planted case converges
    np.testing.assert_array_equal(info["input_names"], [f"X_cpca[{j}]" for j in range(5)])
    np.testing.assert_allclose(info["input"], adata.obsm["X_cpca"], rtol=1e-6)
    # every sampler parameter is recorded: the ones given and the estimator's own defaults
    assert info["params"]["n_iter"] == 300 and info["params"]["thin"] == 3 and info["params"]["max_features"] == 30
    assert info["params"]["alpha"] is None and list(info["params"]["alpha_prior"]) == [1.0, 1.0]
    assert "random_state" not in info["params"]
    assert info["random_state"] == 0 and "numba" in info["versions"]
    assert info["n_target"] == 60 and info["n_background"] == 60
    samples = samples_from_adata(adata)
    assert len(samples) == 100 and all(s.shape == (adata.n_obs, kk) for s, kk in zip(samples, k))


def test_fangs_from_adata_recovers_features(fitted, tmp_path):
    adata, Z = fitted
    adata = adata.copy()
    out = fangs(adata, n_jobs=1, random_state=0, copy=True)
    assert "fangs_features" not in adata.obsm  # copy=True leaves the input alone
    est = out.obsm["fangs_features"]
    info = out.uns["fangs"]
    assert est.dtype == np.uint8 and est.shape == (adata.n_obs, info["n_features"])
    assert np.all(np.diff(est.sum(axis=0).astype(int)) <= 0)  # features sorted by size
    assert faro_loss(est, Z) <= 0.02 * Z.size
    # never worse than the best sample (ties: equal up to the summation order's round-off)
    assert info["expected_loss"] <= info["draws_expected_loss"] * (1.0 + 1e-12)
    assert info["a"] == 1.0 and info["n_samples"] == 100
    assert int(np.sum(info["samples_K_counts"])) == 100
    assert set(info["timings"]) == {"initialization", "sweetening", "total", "draws"}
    # the target-only feature shows up as such
    only_target = (np.asarray(info["feature_n_background"]) == 0) & (np.asarray(info["feature_n_target"]) > 30)
    assert only_target.any()
    # ... and is the one feature enriched (Fisher's exact test, BH), in the target
    enriched = np.asarray(info["feature_enriched"])
    assert enriched[only_target].all() and np.asarray(info["feature_difference"])[only_target].min() > 0.5
    assert np.asarray(info["log_joint"]).shape == (2, 300)
    assert np.asarray(info["loadings"]).shape == (info["n_features"], 5)  # on the embedding's dims
    # the planted case converged: both chains hold every feature of the estimate, alike (the
    # shortfall from 1 is the cells whose features the data leave uncertain, in both chains)
    support = np.asarray(info["feature_chain_support"])
    assert support.shape == (info["n_features"], 2) and list(info["support_chains"]) == [0, 1]
    assert support.min() > 0.75 and np.abs(support[:, 0] - support[:, 1]).max() < 0.1
    assert not any("not held" in w for w in info["warnings"])
    out.write_h5ad(tmp_path / "fangs.h5ad")  # every uns value is storable
    back = ad.read_h5ad(tmp_path / "fangs.h5ad")
    np.testing.assert_array_equal(back.obsm["fangs_features"], est)


def test_fangs_from_a_samples_file_matches_rows_by_name(fitted, tmp_path):
    adata, _ = fitted
    samples = samples_from_adata(adata)
    ref = fangs(adata, n_jobs=1, random_state=0, draws=False, copy=True)
    perm = np.random.default_rng(1).permutation(adata.n_obs)
    path = tmp_path / "samples.npz"
    save_samples(path, [s[perm] for s in samples], cell_names=adata.obs_names.to_numpy()[perm])
    shuffled = fangs(adata, samples=str(path), n_jobs=1, random_state=0, draws=False, copy=True)
    np.testing.assert_array_equal(shuffled.obsm["fangs_features"], ref.obsm["fangs_features"])
    assert np.isnan(shuffled.uns["fangs"]["draws_expected_loss"]) and shuffled.uns["fangs"]["draws_index"] == -1
    assert shuffled.uns["fangs"]["source"] == str(path)
    # extra cells in the file are fine; missing ones are not
    save_samples(path, [s[:-3] for s in samples], cell_names=adata.obs_names.to_numpy()[:-3])
    with pytest.raises(ScontrastError, match="3 of the 120 cells are not in"):
        fangs(adata, samples=path, n_jobs=1, copy=True)
    save_samples(path, [s[:-3] for s in samples])
    with pytest.raises(ScontrastError, match="117 rows and no cell names"):
        fangs(adata, samples=path, n_jobs=1, copy=True)
    with pytest.raises(ScontrastError, match="does not exist"):
        fangs(adata, samples=tmp_path / "nope.npz", n_jobs=1, copy=True)
    loaded = load_samples(tmp_path / "samples.npz")
    assert len(loaded.samples) == 100


def test_fangs_from_a_list_and_bad_inputs(fitted):
    adata, Z = fitted
    out = fangs(adata, samples=[Z, Z[:, ::-1]], n_jobs=1, random_state=0, copy=True)
    assert faro_loss(out.obsm["fangs_features"], Z) == 0.0
    assert out.uns["fangs"]["expected_loss"] == 0.0
    with pytest.raises(ScontrastError, match="not binary"):
        fangs(adata, samples=[Z * 3], n_jobs=1, copy=True)
    with pytest.raises(ScontrastError, match="rows but the data has"):
        fangs(adata, samples=[Z[:10]], n_jobs=1, copy=True)
    bare = ad.AnnData(X=np.zeros((4, 2)))
    with pytest.raises(ScontrastError, match="run tl.latent_features first"):
        fangs(bare, n_jobs=1)
    with pytest.raises(ScontrastError, match=r"obsm\['X_pcpca'\] is missing"):
        latent_features(adata.copy(), use_rep="X_pcpca")
    with pytest.raises(ScontrastError, match="n_dims"):
        latent_features(adata.copy(), use_rep="X_cpca", n_dims=9)
    with pytest.raises(ScontrastError, match=r"^n_dims: only applies with use_rep"):
        latent_features(adata.copy(), n_dims=2)
    with pytest.raises(ScontrastError, match=r"gene set 'highly_variable' is not a var column"):
        latent_features(adata.copy())  # the default explains genes


def test_a_feature_of_one_chain_only_is_a_warning(fitted):
    """Chain 1's samples lack the estimate's second feature: its support is 0 there, 1 in chain 0,
    a warning names it (log, uns, summary), and the figure labels show the support per chain."""
    from scontrast.latent_features import FeatureSamples
    from scontrast.pl._fangs import feature_labels
    from scontrast.tl._fangs import summary_rows

    adata, Z = fitted
    samples = [Z] * 6 + [Z[:, [0, 2]]] * 6
    fs = FeatureSamples(samples=samples, extra={"chains": np.repeat([0, 1], 6)})
    out = fangs(adata, samples=fs, a=0.6, n_jobs=1, random_state=0, copy=True)
    info = out.uns["fangs"]
    est = out.obsm["fangs_features"]
    j = next(k for k in range(est.shape[1]) if np.array_equal(est[:, k], Z[:, 1]))
    np.testing.assert_allclose(np.asarray(info["feature_chain_support"])[j], [1.0, 0.0])
    others = np.delete(np.asarray(info["feature_chain_support"]), j, axis=0)
    np.testing.assert_allclose(others, 1.0)
    (warning,) = [w for w in info["warnings"] if "not held" in w]
    assert f"F{j + 1} (1.00 / 0.00)" in warning and "of the 2 chains" in warning
    rows = dict(summary_rows(out))
    # listed apart as unsupported (below 0.8 in some chain), after the findings, which keep their plain rows
    unsupported = f"unsupported feature F{j + 1} (held below 0.8 by one of the chains' samples: not a finding)"
    assert rows[unsupported].count("held by the chains' samples (Jaccard) 1.00 / 0.00") == 1
    assert f"feature F{j + 1}" not in rows and list(rows)[-1] == unsupported
    assert sorted(k for k in rows if k.startswith("feature F")) == [f"feature F{i + 1}" for i in range(est.shape[1])
                                                                   if i != j]
    np.testing.assert_array_equal(info["feature_supported"], np.arange(est.shape[1]) != j)
    assert "held 1.00/0.00" in feature_labels(info, est.shape[1])[j]
    # without chain labels all samples form one group: the feature is held by half of them
    flat = fangs(adata, samples=samples, a=0.6, n_jobs=1, random_state=0, copy=True).uns["fangs"]
    assert np.asarray(flat["feature_chain_support"]).shape == (est.shape[1], 1)
    np.testing.assert_allclose(np.asarray(flat["feature_chain_support"])[j], [0.5])
    with pytest.raises(ScontrastError, match=r"^samples: its chain labels have shape \(3,\) but there are 12"):
        fangs(adata, samples=FeatureSamples(samples=samples, extra={"chains": np.zeros(3)}), n_jobs=1, copy=True)


def test_front_ends_forward_model_parameters_and_refuse_unknown_ones(fitted):
    adata, Z = fitted
    out = fangs(adata, samples=[Z, Z[:, ::-1]], a=1.5, n_iter=10, n_jobs=1, random_state=0, copy=True)
    params = out.uns["fangs"]["params"]
    assert out.uns["fangs"]["a"] == 1.5 and params["a"] == 1.5 and params["n_iter"] == 10
    # the parameters left out are recorded with scontrast.fangs.fangs's own defaults
    assert params["n_init"] == 16 and params["n_sweet"] == 4 and params["max_seconds"] is None
    assert params["samples"] == "list" and params["draws"] is True and "random_state" not in params
    with pytest.raises(ScontrastError, match=r"^fangs: unknown parameter\(s\) \['n_iters'\]; it takes \['a', "):
        fangs(adata, samples=[Z], n_iters=10, copy=True)
    with pytest.raises(ScontrastError, match=r"^a: expected"):
        fangs(adata, samples=[Z], a=2.0, n_jobs=1, copy=True)
    with pytest.raises(ScontrastError, match=r"^n_iter: None .* max_seconds"):
        fangs(adata, samples=[Z], n_iter=None, n_jobs=1, copy=True)
    with pytest.raises(ScontrastError, match=r"^BinaryFactorEnsemble: unknown parameter\(s\) \[.sweeps.\]"):
        latent_features(adata.copy(), sweeps=10)
    with pytest.raises(ScontrastError, match=r"^burn_in: expected fewer than n_iter"):
        latent_features(adata.copy(), method="ibp", use_rep="X_cpca", n_iter=10)  # the estimator's burn_in default is 500


def test_latent_features_uses_the_leading_dims(fitted):
    adata, _ = fitted
    out = latent_features(adata, method="ibp", use_rep="X_cpca", n_dims=2, n_iter=20, burn_in=10, thin=5, key_added="lf2",
                          copy=True)
    assert out.uns["lf2"]["n_dims_used"] == 2
    assert out.uns["lf2"]["samples"].shape[0] == adata.n_obs and "lf2_samples" not in out.obsm
    assert len(samples_from_adata(out, "lf2")) == 4  # 2 per chain


def test_figure(fitted):
    adata, Z = fitted
    out = fangs(adata, n_jobs=1, random_state=0, copy=True)
    fig = plot_fangs(out)
    axes = fig.get_axes()
    assert any("FANGS estimate" in ax.get_title() for ax in axes)
    # every chain's trace, with the split R-hat from uns['latent_features']
    trace = [ax for ax in axes if ax.get_title().startswith("sampler trace\nsplit R-hat ")]
    assert len(trace) == 1 and len(trace[0].get_lines()) == 2
    heat = [ax for ax in axes if "FANGS estimate" in ax.get_title()][0]
    labels = [t.get_text() for t in heat.get_yticklabels()]
    assert len(labels) == out.uns["fangs"]["n_features"] and all(" / B " in t and "q " in t for t in labels)
    fig2 = plot_fangs(out, ax=matplotlib.pyplot.figure().add_subplot())
    assert fig2 is not None
    matplotlib.pyplot.close("all")
    with pytest.raises(ScontrastError, match="fangs_features"):
        plot_fangs(adata)


def _texts(fig) -> list[tuple[str, object, object]]:
    """(owner, text, its box in pixels) of every visible, non-empty title, label and tick label."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    out = [("figure", fig._suptitle, fig._suptitle.get_window_extent(renderer))] if fig._suptitle else []
    for i, ax in enumerate(fig.get_axes()):
        texts = [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label]
        for axis, (lo, hi) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):  # the ticks drawn
            lo, hi = min(lo, hi), max(lo, hi)
            texts += [t for loc, t in zip(axis.get_ticklocs(), axis.get_ticklabels()) if lo <= loc <= hi]
        out += [(f"axes {i}", t, t.get_window_extent(renderer)) for t in texts if t.get_visible() and t.get_text()]
    return out


def test_figure_text_stays_in_its_panel_and_in_the_figure(fitted):
    """No title, caption or tick label runs into another panel's or out of the figure, and the K
    axis, a count, has integer ticks only (the demo runs showed all four)."""
    adata, _ = fitted
    out = fangs(adata, n_jobs=1, random_state=0, copy=True)
    out.uns["scontrast"] = {"preprocess": {"dataset": "wu2020", "params": {"target": ["Tumor"],
                                                                           "background": ["NAT"]}}}
    out.uns["latent_features"]["rhat_log_joint"] = 0.998  # the widest R-hat text, as on pbmc68k
    for figsize in ((12, 6), (10, 5)):
        fig = plot_fangs(out, figsize=figsize)
        texts = _texts(fig)
        bounds = fig.bbox
        for owner, text, box in texts:
            assert bounds.x0 <= box.x0 and box.x1 <= bounds.x1 + 0.5 and bounds.y0 <= box.y0 and \
                box.y1 <= bounds.y1 + 0.5, f"{text.get_text()!r} ({owner}) leaves the figure"
        for i, (owner, text, box) in enumerate(texts):
            for other_owner, other, other_box in texts[i + 1:]:
                if other_owner != owner:
                    assert not box.overlaps(other_box), f"{text.get_text()!r} overlaps {other.get_text()!r}"
        kax = [ax for ax in fig.get_axes() if " ".join(ax.get_title().split()) == "K over the samples"][0]
        assert all(float(t).is_integer() for t in kax.get_xticks()), kax.get_xticks()
        matplotlib.pyplot.close(fig)


def test_figure_names_the_enrichment_test_it_shows(fitted):
    """The heatmap's key names the test behind its q-values: over replicates when one was declared."""
    adata, _ = fitted
    out = fangs(adata, n_jobs=1, random_state=0, copy=True)
    heat_title = [ax.get_title() for ax in plot_fangs(out).get_axes() if "FANGS estimate" in ax.get_title()][0]
    assert "Fisher's exact test over cells" in " ".join(heat_title.split())
    out.uns["fangs"]["feature_test"] = "sign-flip permutation of within-replicate differences"
    heat_title = [ax.get_title() for ax in plot_fangs(out).get_axes() if "FANGS estimate" in ax.get_title()][0]
    assert "sign-flip permutation of within-replicate differences" in " ".join(heat_title.split())
    assert "Fisher" not in heat_title
    matplotlib.pyplot.close("all")


def test_figure_from_annotations_and_the_fangs_delta(fitted, tmp_path):
    """What rule fangs_figure does: preprocessed annotations (no X) joined with the fangs delta."""
    adata, _ = fitted
    base = adata.copy()
    del base.uns["latent_features"]  # the preprocessed file holds neither samples nor estimate
    io.write_h5ad(base, tmp_path / "preprocessed.h5ad")
    before = io.slot_keys(base)
    samples = samples_from_adata(adata)
    save_samples(tmp_path / "samples.npz", samples, cell_names=adata.obs_names.to_numpy(),
                 log_joint=adata.uns["latent_features"]["log_joint"])
    fangs(base, samples=str(tmp_path / "samples.npz"), n_jobs=1, random_state=0)
    io.write_h5ad(io.extract_delta(base, before), tmp_path / "fangs.h5ad")
    annotated = io.read_for_figure(tmp_path / "preprocessed.h5ad", tmp_path / "fangs.h5ad")
    assert annotated.X is None
    fig = plot_fangs(annotated, figsize=[9, 4])  # a YAML list, as the workflow's plot block gives it
    assert tuple(fig.get_size_inches()) == (9.0, 4.0)
    axes = fig.get_axes()
    assert any("FANGS estimate" in ax.get_title() for ax in axes)
    assert any(ax.get_title() == "sampler trace" for ax in axes)  # the trace travelled in the delta
    matplotlib.pyplot.close("all")


def test_cell_order_groups_then_patterns():
    F = np.array([[0, 1], [1, 0], [1, 1], [0, 0], [1, 0]])
    is_target = np.array([True, False, True, False, False])
    order = cell_order(F, is_target)
    assert list(order) == [1, 4, 3, 2, 0]  # background: [1,0] rows then [0,0]; target: [1,1] before [0,1]


@pytest.mark.parametrize("seed", [0, 1])
def test_gene_programmes_their_genes_and_enrichment(seed):
    """Default input (genes): planted overlapping programmes come back as features with their genes,
    and exactly the ones planted as enriched in the target are flagged (BH q <= 0.05)."""
    from scontrast.latent_features._simulate import planted_programmes, programme_recovery
    from scontrast.tl._fangs import summary_rows

    adata, sets, enriched = planted_programmes(n_cells=400, n_genes=50, effect=1.5, seed=seed)
    latent_features(adata, method="ibp", n_genes=50, n_iter=300, burn_in=150, random_state=0)
    info = adata.uns["latent_features"]
    assert info["params"]["use_rep"] is None and info["n_dims_used"] == 50
    X = info["input"]
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-5)  # z-scores of the genes
    np.testing.assert_allclose(X.std(axis=0), 1.0, rtol=1e-4)
    fangs(adata, n_jobs=1, random_state=0)
    f = adata.uns["fangs"]
    assert np.asarray(f["loadings"]).shape == (f["n_features"], 50) and len(f["feature_top_genes"]) == f["n_features"]
    rec = programme_recovery(adata, sets, enriched)
    assert (rec["jaccard"] >= 0.7).all(), rec
    np.testing.assert_array_equal(rec["flagged"], enriched)
    assert rec["extra_flagged"] == 0
    # the q-values are BH of the p-values; the prevalences are the estimate's
    from scipy.stats import false_discovery_control

    np.testing.assert_allclose(f["feature_qvalue"], false_discovery_control(f["feature_pvalue"]))
    est = adata.obsm["fangs_features"]
    t = adata.obs["scontrast_target"].to_numpy(bool)
    np.testing.assert_allclose(f["feature_prevalence_target"], est[t].mean(axis=0))
    rows = dict(summary_rows(adata))
    assert "sampler: split R-hat log joint / K" in rows and rows["sampler: input"] == "50 genes"
    flagged_rows = [v for k, v in rows.items() if k.startswith("feature F") and "(enriched in target)" in v]
    assert len(flagged_rows) == 2 and all("top genes: g" in v for v in flagged_rows)


def _donor_design(adata, n_donors, paired, rng):
    """Declare a replicate design on made-up cells, as scontrast.preprocess records it."""
    from scontrast.design import REPLICATE_KEY

    is_target = adata.obs["scontrast_target"].to_numpy()
    donor = rng.integers(0, n_donors, size=adata.n_obs)
    names = np.where(is_target | paired, "d", "e").astype(object) + donor.astype(str)
    adata.obs[REPLICATE_KEY] = pd.Categorical(names.astype(str))
    adata.uns["scontrast"] = {"design": {"replicate": "donor", "paired": bool(paired), "unit": "replicate",
                                         "summary": f"replicate: donor ({'paired' if paired else 'unpaired'})"}}
    return names.astype(str)


@pytest.mark.parametrize("paired", [False, True])
def test_enrichment_is_over_replicates_when_declared(paired):
    """A feature of two donors is 'significant' over cells but not over donors; one of all target cells is, at the floor."""
    rng = np.random.default_rng(1)
    n = 600
    adata = ad.AnnData(X=np.zeros((n, 2), np.float32),
                       obs=pd.DataFrame({"scontrast_target": np.arange(n) % 2 == 0}, index=[f"c{i}" for i in range(n)]))
    donors = _donor_design(adata, 7 if paired else 6, paired, rng)  # 7 pairs: 2/128 survives BH over 2 features
    is_target = adata.obs["scontrast_target"].to_numpy()
    Z = np.zeros((n, 2), np.uint8)
    Z[:, 0] = is_target & (rng.random(n) < 0.9)                        # every target donor, no background one
    Z[:, 1] = np.isin(donors, ["d0", "d1"]) & is_target & (rng.random(n) < 0.9)  # a response of two donors only
    samples = [Z.copy() for _ in range(20)]
    fangs(adata, samples=samples, draws=False, random_state=0)
    f = adata.uns["fangs"]
    assert f["feature_unit"] == "replicate" and f["design"].startswith("replicate: donor")
    floor = 2 / 2 ** 7 if paired else 2 / 924  # sign flips of 7 pairs / 6-of-12 choices, the mirror ties
    assert f["feature_pvalue_floor"] == pytest.approx(floor)
    big, small = (0, 1) if adata.obsm["fangs_features"][:, 0].sum() > adata.obsm["fangs_features"][:, 1].sum() else (1, 0)
    assert f["feature_pvalue"][big] == pytest.approx(floor) and f["feature_enriched"][big]
    assert f["feature_pvalue"][small] > 0.05 and not f["feature_enriched"][small]
    cell_level = ad.AnnData(X=adata.X, obs=adata.obs[["scontrast_target"]].copy())
    fangs(cell_level, samples=samples, draws=False, random_state=0)
    assert cell_level.uns["fangs"]["feature_unit"] == "cell"
    assert cell_level.uns["fangs"]["feature_qvalue"].max() < 1e-10  # cells read the donor feature as a finding


@pytest.mark.parametrize("paired", [False, True])
def test_no_feature_with_a_replicate_design(paired):
    """Samples without any feature (the ensemble's K = 0, as on wu2020 in the quick start) under a
    declared replicate design: an empty estimate, empty per-replicate tests, a summary; the per-replicate
    test took the maximum of an empty array and failed the fangs rule."""
    from scontrast.tl._fangs import summary_rows

    rng = np.random.default_rng(3)
    n = 120
    adata = ad.AnnData(X=np.zeros((n, 2), np.float32),
                       obs=pd.DataFrame({"scontrast_target": np.arange(n) % 2 == 0}, index=[f"c{i}" for i in range(n)]))
    _donor_design(adata, 4, paired, rng)
    fangs(adata, samples=[np.zeros((n, 0), np.uint8)] * 10, draws=False, random_state=0)
    f = adata.uns["fangs"]
    assert f["n_features"] == 0 and "fangs_features" not in adata.obsm  # K = 0: no zero-width array
    assert f["feature_unit"] == "replicate"
    assert np.asarray(f["feature_pvalue"]).shape == (0,) and np.asarray(f["feature_qvalue"]).shape == (0,)
    assert not any(k.startswith("feature F") for k in dict(summary_rows(adata)))


def test_enrichment_floor_above_fdr_is_warned():
    rng = np.random.default_rng(2)
    n = 120
    adata = ad.AnnData(X=np.zeros((n, 2), np.float32),
                       obs=pd.DataFrame({"scontrast_target": np.arange(n) % 2 == 0}, index=[f"c{i}" for i in range(n)]))
    _donor_design(adata, 3, False, rng)  # 3 vs 3 donors: floor 2/20
    Z = (adata.obs["scontrast_target"].to_numpy()[:, None] & (rng.random((n, 1)) < 0.9)).astype(np.uint8)
    fangs(adata, samples=[Z] * 10, draws=False, random_state=0)
    warned = [w for w in adata.uns["fangs"]["warnings"] if "smallest p-value their relabellings allow is 0.1" in w]
    assert len(warned) == 1 and "no feature can be called enriched" in warned[0]
    assert not adata.uns["fangs"]["feature_enriched"].any()


def test_the_fangs_rule_writes_only_what_fangs_adds(fitted, tmp_path, caplog):
    """scripts/fangs.py on the sampler's delta: the fangs delta holds FANGS's slots only, so that the
    merge of every delta (rule collect) and the figure's (rule fangs_figure) warn of no stale
    entry on a clean run; the sampler's slots reach both from its own delta."""
    import logging
    import runpy

    from conftest import REPO, rule_object

    adata, _ = fitted
    pre = ad.AnnData(X=adata.X.copy(), obs=adata.obs.copy(), layers={"counts": adata.X.copy()},
                     uns={"scontrast": {"preprocess": {"dataset": "toy"}}})  # what preprocessing writes
    io.write_h5ad(pre, tmp_path / "preprocessed.h5ad")
    lf = ad.AnnData(obs=adata.obs[[]].copy(), var=pre.var[[]].copy(), uns={"latent_features": adata.uns["latent_features"]})
    io.write_h5ad(lf, tmp_path / "latent_features.h5ad")
    deltas = [str(tmp_path / "latent_features.h5ad"), str(tmp_path / "fangs.h5ad")]
    smk = rule_object({"h5ad": str(tmp_path / "preprocessed.h5ad"), "samples": deltas[0]},
                      {"h5ad": deltas[1]}, {"cfg": {"n_init": 2, "n_sweet": 1, "n_iter": 20},
                                            "samples_file": False, "seed": 0}, tmp_path / "fangs.log", "fangs")
    runpy.run_path(str(REPO / "scripts" / "fangs.py"), init_globals={"snakemake": smk})
    delta = io.read_h5ad(deltas[1])
    assert set(delta.uns) == {"fangs"} and set(delta.obsm) == {"fangs_features"}
    assert not delta.layers and not delta.varm and delta.obs.columns.empty and delta.var.columns.empty
    with caplog.at_level(logging.WARNING, logger="scontrast"):
        merged = io.read_merged(tmp_path / "preprocessed.h5ad", *deltas, failures="record")
        shown = io.read_for_figure(tmp_path / "preprocessed.h5ad", *deltas)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert {"fangs", "latent_features", "scontrast"} <= set(merged.uns)
    fig = plot_fangs(shown)
    assert any(ax.get_title().startswith("sampler trace") for ax in fig.get_axes())
    matplotlib.pyplot.close("all")
