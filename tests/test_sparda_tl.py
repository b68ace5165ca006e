"""SPARDA AnnData front end, figure, rule script and delta round trip on a small made-up AnnData."""

import runpy

import anndata as ad
import matplotlib
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import yaml

from conftest import REPO, rule_object
from scontrast import io
from scontrast.core import ScontrastError
from scontrast.pl._sparda import sparda as plot_sparda
from scontrast.sparda import SPARDA
from scontrast.tl._sparda import sparda, summary_rows

matplotlib.use("Agg")

PLANTED = ["g3", "g8", "g15"]


def _adata(sparse=True, seed=0):
    rng = np.random.default_rng(seed)
    n, d = 140, 40
    target = np.arange(n) % 2 == 0
    X = rng.poisson(1.0, size=(n, d)).astype(np.float32)
    idx = [int(g[1:]) for g in PLANTED]
    X[np.ix_(target, idx)] += rng.poisson(2.0, size=(target.sum(), len(idx)))
    X = np.log1p(X)
    var = pd.DataFrame(index=[f"g{i}" for i in range(d)])
    var["highly_variable"] = np.arange(d) < 30
    obs = pd.DataFrame({"scontrast_target": target, "cell_type": np.where(target, "tumour", "normal")},
                       index=[f"c{i}" for i in range(n)])
    return ad.AnnData(X=sp.csr_matrix(X) if sparse else X, obs=obs, var=var)


FAST = dict(n_permutations=9, n_lambdas=4, relax_max_iter=20, relax_max_cells=60)


def test_front_end_writes_slots_and_finds_planted_genes(tmp_path):
    adata = _adata()
    before = io.slot_keys(adata)
    assert sparda(adata, **FAST, random_state=0) is None
    var = adata.var
    assert var["sparda_selected"].dtype == bool
    assert var["sparda_weight"].dtype == float
    assert set(PLANTED) <= set(var.index[var["sparda_selected"]])
    # genes outside the gene set (not highly variable) get no weight and no W2
    assert np.all(var.loc[~var["highly_variable"], "sparda_weight"] == 0)
    assert var.loc[~var["highly_variable"], "sparda_marginal_w2"].isna().all()
    assert adata.varm["sparda_directions"].shape == (40, 1)
    np.testing.assert_allclose(np.linalg.norm(var["sparda_weight"]), 1.0)
    # one direction and, for an embedding plot, the leading PC orthogonal to it (uns['sparda']['embedding'])
    assert adata.obsm["X_sparda"].shape == (140, 2)

    info = adata.uns["sparda"]
    for key in ["params", "versions", "random_state", "divergence", "pvalue", "lam", "selected_genes",
                "lambda_path", "screening", "relax", "tighten", "null_divergences", "pda_divergence"]:
        assert key in info, key
    assert 0 < info["pvalue"] <= 1 and info["pvalue"] == pytest.approx(0.1)  # 1/(9+1): a real difference
    # the test's resolution and the floor warning are recorded
    test = info["test"]
    # small (140 cells x the highly variable genes): test="auto" runs the re-optimised permutation test
    assert test["method"] == "permute" and test["requested"] == "auto"
    assert test["n_permutations"] == 9 and test["n_at_least"] == 0 and test["bound"]
    assert any("p-value at its floor" in w for w in info["warnings"])
    path = info["lambda_path"]
    assert path["rule"] == "fraction" and path["chosen_lam"] == info["lam"]
    assert path["reference_score"] > 0 and isinstance(path["at_edge"], bool)
    # positive weights are target-side genes: the target projects higher
    tgt = adata.obs["scontrast_target"].to_numpy(dtype=bool)
    assert adata.obsm["X_sparda"][tgt, 0].mean() > adata.obsm["X_sparda"][~tgt, 0].mean()
    assert set(info["selected_genes"]) == set(var.index[var["sparda_selected"]])
    assert info["lam"] in info["lambda_path"]["lam"]
    assert info["screening"]["screened"] is False and info["screening"]["n_genes_in"] == 30
    # front-end settings and every hyper-parameter of the estimator, its defaults included
    params = info["params"]
    assert params["lam"] is None and params["layer"] is None
    assert params["genes"] == "highly_variable" and params["groupby"] == "scontrast_target"
    assert params["key_added"] == "sparda"
    assert set(params) == set(SPARDA._get_param_names()) - {"random_state", "n_jobs"} | {"genes", "layer", "groupby",
                                                                                         "key_added"}
    assert {k: params[k] for k in FAST} == FAST
    assert params["max_genes"] == SPARDA().max_genes and params["tighten_max_iter"] == SPARDA().tighten_max_iter
    # the projection on the direction is what the divergence was measured on
    X = adata.X.toarray()
    np.testing.assert_allclose(adata.obsm["X_sparda"][:, 0], X @ var["sparda_weight"].to_numpy(), rtol=1e-5)

    delta = io.extract_delta(adata, before)
    path = tmp_path / "sparda.h5ad"
    io.write_h5ad(delta, path)
    back = ad.read_h5ad(path)
    np.testing.assert_array_equal(back.var["sparda_selected"].to_numpy(), var["sparda_selected"].to_numpy())
    assert back.uns["sparda"]["pvalue"] == pytest.approx(info["pvalue"])
    np.testing.assert_allclose(back.uns["sparda"]["lambda_path"]["cv_score"], info["lambda_path"]["cv_score"])
    assert back.uns["sparda"]["params"]["lam"] is None  # None survives the h5ad round trip


def test_front_end_forwards_model_parameters_to_the_estimator():
    a = _adata(sparse=False)
    sparda(a, lam=0.05, n_permutations=0, random_state=0)
    model = SPARDA(lam=0.05, n_permutations=0, random_state=0).fit(
        a.X[a.obs["scontrast_target"].to_numpy()][:, :30], a.X[~a.obs["scontrast_target"].to_numpy()][:, :30])
    np.testing.assert_array_equal(a.var["sparda_weight"].to_numpy()[:30], model.components_[0])
    assert a.uns["sparda"]["lam"] == model.lam_ and a.uns["sparda"]["divergence"] == model.divergence_


def test_front_end_screening_recorded_and_copy():
    adata = _adata(sparse=False)
    out = sparda(adata, lam=0.05, n_permutations=0, max_genes=10, genes="all", copy=True, random_state=0)
    assert "sparda" not in adata.uns and "sparda_weight" not in adata.var
    info = out.uns["sparda"]
    assert np.isnan(info["pvalue"]) and "lambda_path" not in info
    scr = info["screening"]
    assert scr["screened"] is True and scr["n_genes_in"] == 40 and scr["n_genes_kept"] == 10
    assert set(PLANTED) <= set(scr["genes_kept"])
    assert set(out.var.index[out.var["sparda_selected"]]) <= set(scr["genes_kept"])


def test_front_end_sparse_equals_dense():
    kw = dict(**FAST, random_state=1)
    a, b = _adata(sparse=True), _adata(sparse=False)
    sparda(a, **kw)
    sparda(b, **kw)
    np.testing.assert_allclose(a.var["sparda_weight"], b.var["sparda_weight"], atol=1e-6)
    assert a.uns["sparda"]["pvalue"] == b.uns["sparda"]["pvalue"]


def test_front_end_several_directions():
    adata = _adata()
    sparda(adata, lam=0.05, n_directions=2, n_permutations=0, random_state=0)
    W = adata.varm["sparda_directions"]
    assert W.shape == (40, 2) and adata.obsm["X_sparda"].shape == (140, 2)
    np.testing.assert_allclose(W[:, 0], adata.var["sparda_weight"])
    assert abs(W[:, 0] @ W[:, 1]) < 1e-8
    assert adata.uns["sparda"]["divergences"].shape == (2,)


def test_front_end_errors():
    adata = _adata()
    del adata.obs["scontrast_target"]
    with pytest.raises(ScontrastError, match="scontrast_target"):
        sparda(adata)
    with pytest.raises(ScontrastError, match="^lam: expected"):
        sparda(_adata(), lam=-1.0)
    with pytest.raises(ScontrastError, match=r"^SPARDA: unknown parameter\(s\) \['lamda'\]"):
        sparda(_adata(), lamda=0.1)
    with pytest.raises(ScontrastError, match="^layer: 'counts'"):
        sparda(_adata(), layer="counts")
    fitted = _adata()
    sparda(fitted, lam=0.05, n_permutations=0, random_state=0)
    with pytest.raises(ScontrastError, match="^n_genes: expected"):
        plot_sparda(fitted, n_genes=0)


def test_figure():
    adata = _adata()
    sparda(adata, lam=0.05, n_permutations=4, random_state=0)
    fig = plot_sparda(adata, n_genes=5)
    ax_w, ax_d = fig.axes[:2]
    assert len(ax_w.patches) == min(5, int(adata.var["sparda_selected"].sum()))
    assert ax_w.get_xlabel() and ax_d.get_xlabel() and ax_d.get_ylabel()
    # none of the 4 permutations reached the planted difference: p is its floor, shown as a bound
    assert adata.uns["sparda"]["test"]["bound"] and "p <= 0.2 (4 permutations)" in ax_d.get_title()
    assert ax_w.get_xlabel() == "weight (+ = target side)"
    labels = [t.get_text() for t in ax_d.get_legend().get_texts()]
    assert any("target" in t for t in labels) and any("background" in t for t in labels)
    with pytest.raises(ScontrastError, match="tl.sparda"):
        plot_sparda(_adata())


def test_figure_from_annotations_and_delta_only(tmp_path):
    """What rule sparda_figure does: no X, only the preprocessed annotations and SPARDA's delta."""
    adata = _adata()
    base = tmp_path / "preprocessed.h5ad"
    io.write_h5ad(adata, base)
    before = io.slot_keys(adata)
    sparda(adata, lam=0.05, n_permutations=4, random_state=0)
    delta = tmp_path / "sparda.h5ad"
    io.write_h5ad(io.extract_delta(adata, before), delta)
    light = io.read_for_figure(base, delta)
    assert light.X is None
    fig = plot_sparda(light, n_genes=3, figsize=[6.0, 3.0])
    assert len(fig.axes[0].patches) == 3
    np.testing.assert_allclose(fig.get_size_inches(), [6.0, 3.0])
    assert "p <= 0.2" in fig.axes[1].get_title()


def test_rule_scripts_write_the_delta_and_draw_it_without_x(tmp_path):
    """scripts/sparda.py and scripts/figure.py through stand-ins for the snakemake object, with the
    schema's defaults as the workflow fills them in (and the tiny test config's quick settings)."""
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "sparda.schema.yaml").read_text())["properties"]
    cfg = {k: v["default"] for k, v in schema.items() if k != "plot"}
    cfg.update(n_permutations=9, n_lambdas=3, cv_folds=2)
    plot = {k: v["default"] for k, v in schema["plot"]["properties"].items()}
    plot["n_genes"] = 2  # fewer than the 3 planted genes SPARDA selects
    base = _adata()
    io.write_h5ad(base, tmp_path / "preprocessed.h5ad")

    smk = rule_object({"h5ad": str(tmp_path / "preprocessed.h5ad")}, {"h5ad": str(tmp_path / "sparda.h5ad")},
                     {"cfg": cfg, "seed": 0}, tmp_path / "sparda.log", "sparda", threads=1)
    runpy.run_path(str(REPO / "scripts" / "sparda.py"), init_globals={"snakemake": smk})
    delta = io.read_h5ad(tmp_path / "sparda.h5ad")
    assert delta.X is None and set(delta.var.columns) == {"sparda_weight", "sparda_selected", "sparda_marginal_w2"}
    assert "highly_variable" not in delta.var and set(delta.uns) == {"sparda"}
    info = delta.uns["sparda"]
    assert {k: info["params"][k] for k in cfg} == cfg and info["random_state"] == 0
    assert info["pvalue"] == pytest.approx(0.1)  # the planted genes: the smallest p-value of 9 permutations

    smk = rule_object({"h5ad": str(tmp_path / "preprocessed.h5ad"), "deltas": [str(tmp_path / "sparda.h5ad")]},
                     {"figure": str(tmp_path / "sparda.png")}, {"method": "sparda", "plot": plot},
                     tmp_path / "sparda_figure.log", "sparda_figure")
    runpy.run_path(str(REPO / "scripts" / "figure.py"), init_globals={"snakemake": smk})
    assert (tmp_path / "sparda.png").stat().st_size > 10000
    shown = io.read_for_figure(tmp_path / "preprocessed.h5ad", tmp_path / "sparda.h5ad")
    assert shown.X is None and not shown.layers
    fig = plot_sparda(shown, **plot)
    assert len(fig.axes[0].patches) == 2
    np.testing.assert_allclose(fig.get_size_inches(), schema["plot"]["properties"]["figsize"]["default"])
    matplotlib.pyplot.close(fig)


def test_front_end_tests_per_replicate_on_wu2020_paired_by_patient(tmp_path):
    """Tumour vs normal T cells of 6 patients, paired: 32 distinct swaps, floor 1/32, the unit in the summary."""
    from scontrast.preprocess import preprocess

    raw = ad.read_h5ad("data/wu2020_tcells_200.h5ad")
    adata = preprocess(raw, groupby="source", target=["Tumor"], background=["NAT"], min_genes=20, n_top_genes=1000,
                       replicate="patient", paired=True)
    sparda(adata, random_state=0)
    test = adata.uns["sparda"]["test"]
    assert test["method"] == "replicate" and bool(test["paired"]) and int(test["n_replicates"]) == 6
    assert int(test["n_labellings"]) == 32 and float(test["floor"]) == pytest.approx(1 / 32)
    assert adata.uns["sparda"]["pvalue"] >= 1 / 32
    rows = dict(summary_rows(adata))
    assert "per replicate (6 replicates, paired; all of 32 relabellings, smallest possible p 0.03125)" in \
        rows["p-value (replicate test)"]
    assert not bool(test["subsampled"]) and int(test["n_cells"].sum()) == adata.n_obs
    # the donor test's three families over the same 32 swaps, each p-value a multiple of 1/32 (location 5/32, spread
    # 8/32); with 32 relabellings a family at its floor could not reach 0.05 in their min-p, so the p-value is the
    # location family's; its genes by name, HSPA1B (pseudobulk's smallest p on these patients) among them
    assert list(test["parts"]) == ["location", "spread", "dispersion", "tail"] and "distribution_pvalue" not in test
    assert all(float(v) * 32 == pytest.approx(round(float(v) * 32)) for v in test["parts"].values())
    assert list(test["combined"]) == ["location"] and adata.uns["sparda"]["pvalue"] == pytest.approx(5 / 32)
    assert "HSPA1B" in list(test["location_genes"][:3]) and set(test["location_genes"]) <= set(adata.var_names)
    assert set(test["spread_genes"]) <= set(adata.var_names) and set(test["dispersion_genes"]) <= set(adata.var_names)
    assert "dispersion part's genes (moderated t, max-T adjusted p)" in rows
    assert "p-values of the parts (location, spread, dispersion, tail)" in rows and "HSPA1B (+" in \
        rows["location part's genes (moderated t, max-T adjusted p)"]
    # with SPARDA's distributional parts (test_distribution) and test_max_cells below half the cells: those parts'
    # relabellings use one share of every patient and group, said in uns, the written file and the summary; the
    # fit is the same
    sub = adata.copy()
    sparda(sub, test_max_cells=40, test_distribution=True, random_state=0)
    t = sub.uns["sparda"]["test"]
    assert bool(t["subsampled"]) and 70 <= int(t["n_cells"].sum()) <= 90 and int(t["n_labellings"]) == 32
    np.testing.assert_array_equal(sub.var["sparda_weight"], adata.var["sparda_weight"])
    # the donor test reads every cell whatever the share the other parts relabel
    np.testing.assert_array_equal(t["location_t"], test["location_t"])
    assert list(t["parts"]) == ["location", "spread", "dispersion", "tail", "divergence", "shape"] and \
        0 < t["distribution_pvalue"] <= 1
    assert f"each on {int(t['n_cells'][0])} + {int(t['n_cells'][1])} cells, one share of every replicate and group" \
        in dict(summary_rows(sub))["p-value (replicate test)"]
    io.write_h5ad(sub, tmp_path / "sub.h5ad")
    back = ad.read_h5ad(tmp_path / "sub.h5ad").uns["sparda"]["test"]
    assert bool(back["subsampled"]) and list(back["n_cells"]) == list(t["n_cells"])
    assert dict(back["parts"]) == dict(t["parts"]) and list(back["location_genes"]) == list(t["location_genes"])


def test_cv_subsample_is_recorded_in_uns_the_summary_and_the_h5ad(tmp_path):
    # 70 cells per group, folds drawn from 50 of each: uns, the written file and the summary say so;
    # at the default (5000) nothing is subsampled and the summary line is as before
    adata = _adata()
    sparda(adata, **FAST, cv_max_cells=50, test="split", random_state=0)
    path = adata.uns["sparda"]["lambda_path"]
    assert list(path["n_cells"]) == [50, 50] and bool(path["subsampled"])
    assert adata.uns["sparda"]["params"]["cv_max_cells"] == 50
    # the split test's learning half (35 cells per group) is below the cap: its folds use all of it
    assert list(adata.uns["sparda"]["test"]["learn_cv_n_cells"]) == [35, 35]
    rows = dict(summary_rows(adata))
    assert rows["lambda (rule, place on the path)"].endswith(", folds of 50 + 50 cells)")
    io.write_h5ad(adata, tmp_path / "a.h5ad")
    back = ad.read_h5ad(tmp_path / "a.h5ad").uns["sparda"]["lambda_path"]
    assert list(back["n_cells"]) == [50, 50] and bool(back["subsampled"])

    default = _adata()
    sparda(default, **FAST, random_state=0)
    path = default.uns["sparda"]["lambda_path"]
    assert list(path["n_cells"]) == [70, 70] and not bool(path["subsampled"])
    assert "folds of" not in dict(summary_rows(default))["lambda (rule, place on the path)"]
