"""AnnData front end, figure and rule script of contrastive PCA, on made-up data."""

from __future__ import annotations

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
from scontrast.cpca import CPCA
from scontrast.cpca import _estimator as cpca_module
from scontrast.pl._cpca import cpca as plot_cpca
from scontrast.tl._cpca import cpca

matplotlib.use("Agg")


def made_up(n_target=120, n_background=100, n_genes=50, seed=0, sparse=True):
    """Log-normalised-like data: three target-only subgroups on genes 0-9, a shared strong axis
    on genes 10-19, HVG flags on the first 40 genes and a made-up SPARDA selection."""
    rng = np.random.default_rng(seed)
    n = n_target + n_background
    X = rng.gamma(2.0, 0.5, size=(n, n_genes)) * (rng.random((n, n_genes)) < 0.7)
    X[:, 10:20] += rng.gamma(1.0, 3.0, size=(n, 1))          # shared between the groups
    sub = rng.integers(0, 3, n_target)
    X[:n_target, 0:5] += 2.5 * (sub == 1)[:, None]
    X[:n_target, 5:10] += 2.5 * (sub == 2)[:, None]
    X = np.log1p(X)
    is_target = np.arange(n) < n_target
    obs = pd.DataFrame({
        "scontrast_target": is_target,
        "subgroup": pd.Categorical(np.r_[np.array(["a", "b", "c"])[sub], np.full(n_background, "normal")]),
        "score": rng.normal(size=n),
    }, index=[f"c{i}" for i in range(n)])
    var = pd.DataFrame({"highly_variable": np.arange(n_genes) < 40,
                        "sparda_selected": np.isin(np.arange(n_genes), [0, 1, 2, 5, 6, 7, 12])},
                       index=[f"g{j}" for j in range(n_genes)])
    return ad.AnnData(X=sp.csr_matrix(X) if sparse else X, obs=obs, var=var)


def test_writes_the_slots_and_matches_the_estimator(tmp_path):
    adata = made_up()
    before = io.slot_keys(adata)
    cpca(adata, random_state=0)
    u = adata.uns["cpca"]
    alphas = np.asarray(u["alphas"])
    assert alphas[0] == 0 and 2 <= alphas.size <= 4 and u["alpha"] == alphas[1]
    hv = adata.var["highly_variable"].to_numpy()
    X = adata.X[:, hv]
    ref = CPCA(random_state=0).fit(X[:120], X[120:])
    np.testing.assert_array_equal(alphas, ref.alphas_)
    for i, a in enumerate(alphas):
        E = adata.obsm[f"X_cpca_alpha{i}"]
        assert E.shape == (220, 2)
        np.testing.assert_allclose(E, ref.transform(X, alpha=a), atol=1e-10)
        W = adata.varm[f"cPCs_alpha{i}"]
        assert W.shape == (50, 2) and np.all(W[~hv] == 0)
        np.testing.assert_allclose(W[hv], ref.components_[i].T)
    np.testing.assert_array_equal(adata.obsm["X_cpca"], adata.obsm["X_cpca_alpha1"])
    np.testing.assert_array_equal(adata.varm["cPCs"], adata.varm["cPCs_alpha1"])
    assert u["affinity"].shape == (41, 41) and u["alpha_grid"].shape == (41,) and u["alpha_labels"].shape == (41,)
    np.testing.assert_allclose(u["explained_contrast"], ref.explained_contrast_)
    assert u["params"]["alpha"] == "auto" and u["random_state"] == 0 and "numpy" in u["versions"]
    # the front end's own parameters and every model parameter of the estimator, with its defaults
    assert u["params"] == {"genes": "highly_variable", "layer": None, "groupby": "scontrast_target", "key_added": None,
                           **{k: v for k, v in CPCA().get_params().items() if k not in ("random_state", "n_jobs")}}
    assert u["n_threads"] == ref.n_threads_  # the fit's threads: the BLAS's setting here
    assert (u["n_target"], u["n_background"], u["n_genes"]) == (120, 100, 40)
    # the delta round-trips through h5ad and merges back
    delta = io.extract_delta(adata, before)
    path = tmp_path / "cpca.h5ad"
    io.write_h5ad(delta, path)
    merged = io.merge(made_up(), io.read_h5ad(path))
    np.testing.assert_allclose(merged.obsm["X_cpca"], adata.obsm["X_cpca"])
    np.testing.assert_allclose(merged.uns["cpca"]["affinity"], u["affinity"])
    assert merged.uns["cpca"]["params"]["layer"] is None


def test_given_alphas_gene_sets_and_copy():
    adata = made_up(sparse=False)
    out = cpca(adata, alpha=[0.0, 2.0], genes="sparda_selected", n_components=1, copy=True)
    assert "cpca" not in adata.uns and out is not None
    assert out.obsm["X_cpca"].shape == (220, 1)
    np.testing.assert_array_equal(out.uns["cpca"]["alphas"], [0.0, 2.0])
    assert out.uns["cpca"]["alpha"] == 2.0 and out.uns["cpca"]["n_genes"] == 7
    np.testing.assert_array_equal(out.uns["cpca"]["params"]["alpha"], [0.0, 2.0])
    assert np.count_nonzero(out.varm["cPCs"]) <= 7
    single = cpca(made_up(), alpha=3.0, genes="all", copy=True)
    assert single.uns["cpca"]["n_genes"] == 50 and single.uns["cpca"]["alphas"].tolist() == [3.0]
    assert "X_cpca_alpha0" in single.obsm and "X_cpca_alpha1" not in single.obsm


def test_separates_the_target_subgroups():
    from sklearn.metrics import silhouette_score

    adata = made_up(n_target=300, n_background=250, seed=1)
    cpca(adata, random_state=0)
    target = adata.obs["scontrast_target"].to_numpy()
    labels = adata.obs["subgroup"].to_numpy()[target]
    alphas = adata.uns["cpca"]["alphas"]
    sil = [silhouette_score(adata.obsm[f"X_cpca_alpha{i}"][target], labels) for i in range(alphas.size)]
    assert max(sil[1:]) > sil[0] + 0.2


def test_errors_are_one_line_value_errors():
    adata = made_up()
    with pytest.raises(ScontrastError, match="gene set"):
        cpca(adata, genes="nonexistent")
    # the estimator's check, naming n_components and the number of genes
    with pytest.raises(ScontrastError, match=r"^n_components: the gene set selects 7 gene\(s\), fewer than n_components=8$"):
        cpca(adata, genes="sparda_selected", n_components=8)
    with pytest.raises(ScontrastError, match=r"^CPCA: unknown parameter\(s\) \['colour'\]"):
        cpca(adata, colour="subgroup")
    with pytest.raises(ScontrastError, match=r"^layer: 'counts' is not a layer"):
        cpca(adata, layer="counts")
    with pytest.raises(ScontrastError, match=r"^solver: expected one of"):
        cpca(adata, solver="lanczos")
    del adata.obs["scontrast_target"]
    with pytest.raises(ScontrastError, match="scontrast_target"):
        cpca(adata)


def test_schema_accepts_what_the_estimator_accepts():
    """The workflow schema's enums are the estimator's options (the solver list included)."""
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "cpca.schema.yaml").read_text())["properties"]
    assert tuple(schema["solver"]["enum"]) == cpca_module._SOLVERS
    assert tuple(schema["affinity"]["enum"]) == cpca_module._AFFINITIES
    adata = made_up(n_target=30, n_background=25)
    for solver in schema["solver"]["enum"]:
        cpca(adata, solver=solver, alpha=[0.0, 1.0], copy=True)


@pytest.mark.parametrize("color", ["scontrast_target", "subgroup", "score"])
def test_figure_has_a_panel_per_alpha(color):
    adata = made_up()
    cpca(adata, random_state=0)
    fig = plot_cpca(adata, color=color)
    n = adata.uns["cpca"]["alphas"].size
    panels = [a for a in fig.axes if a.get_visible() and a.get_title().startswith("alpha")]
    assert len(panels) == n
    assert panels[0].get_title().startswith("alpha = 0") and "(default)" in panels[1].get_title()
    # each axis names the alpha's top genes: its largest |loading| first, with its sign
    for i, p in enumerate(panels):
        W = adata.varm[f"cPCs_alpha{i}"][:, 0]
        top = int(np.argmax(np.abs(W)))
        assert p.get_xlabel().startswith(f"cPC 1 ({adata.var_names[top]}{'+' if W[top] > 0 else '-'}, "), p.get_xlabel()
    if color != "score":
        labels = [t.get_text() for t in fig.legends[0].get_texts()]
        assert any(lab.startswith("background") for lab in labels)
    matplotlib.pyplot.close(fig)
    with pytest.raises(ScontrastError, match="^color: obs column 'nope'"):
        plot_cpca(adata, color="nope")
    with pytest.raises(ScontrastError, match="^components: "):
        plot_cpca(adata, components=(0, 2))
    with pytest.raises(ScontrastError, match="tl.cpca"):
        plot_cpca(made_up())


def test_one_component_figure():
    adata = made_up()
    cpca(adata, n_components=1, alpha=[0.0, 1.0])
    fig = plot_cpca(adata, color="subgroup")
    assert [a.get_ylabel() for a in fig.axes if a.get_title().startswith("alpha")] == ["jitter", "jitter"]
    matplotlib.pyplot.close(fig)


def test_rule_scripts_write_the_delta_and_draw_it_without_x(tmp_path):
    """scripts/cpca.py (SPARDA's genes from its delta) and scripts/figure.py through stand-ins for
    the snakemake object, with the schema's defaults as the workflow fills them in."""
    import runpy

    base = made_up()
    sparda_delta = ad.AnnData(obs=pd.DataFrame(index=base.obs_names),
                              var=pd.DataFrame({"sparda_selected": base.var["sparda_selected"]}))
    del base.var["sparda_selected"]
    io.write_h5ad(base, tmp_path / "preprocessed.h5ad")
    io.write_h5ad(sparda_delta, tmp_path / "sparda.h5ad")
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "cpca.schema.yaml").read_text())["properties"]
    cfg = {k: v["default"] for k, v in schema.items() if k != "plot"}
    cfg["genes"] = "sparda_selected"
    plot = {k: v["default"] for k, v in schema["plot"]["properties"].items()}
    plot["color"] = "subgroup"

    smk = rule_object({"h5ad": str(tmp_path / "preprocessed.h5ad"), "sparda": [str(tmp_path / "sparda.h5ad")]},
                     {"h5ad": str(tmp_path / "cpca.h5ad")}, {"cfg": cfg, "seed": 0}, tmp_path / "cpca.log", "cpca",
                     threads=2)
    runpy.run_path(str(REPO / "scripts" / "cpca.py"), init_globals={"snakemake": smk})
    delta = io.read_h5ad(tmp_path / "cpca.h5ad")
    assert delta.X is None and "cpca" in delta.uns and "sparda_selected" not in delta.var
    assert delta.uns["cpca"]["n_genes"] == 7 and delta.uns["cpca"]["params"]["genes"] == "sparda_selected"

    smk = rule_object({"h5ad": str(tmp_path / "preprocessed.h5ad"), "deltas": [str(tmp_path / "cpca.h5ad")]},
                     {"figure": str(tmp_path / "cpca.png")}, {"method": "cpca", "plot": plot},
                     tmp_path / "cpca_figure.log", "cpca_figure")
    runpy.run_path(str(REPO / "scripts" / "figure.py"), init_globals={"snakemake": smk})
    assert (tmp_path / "cpca.png").stat().st_size > 10000
    # what the figure rule draws from: annotations and the delta, no expression matrix
    shown = io.read_for_figure(tmp_path / "preprocessed.h5ad", tmp_path / "cpca.h5ad")
    assert shown.X is None and not shown.layers
    fig = plot_cpca(shown, **plot)
    n = delta.uns["cpca"]["alphas"].size
    assert len([a for a in fig.axes if a.get_visible() and a.get_title().startswith("alpha")]) == n
    matplotlib.pyplot.close(fig)


def _declare(adata, donors):
    from scontrast.design import REPLICATE_KEY

    adata.obs[REPLICATE_KEY] = pd.Categorical(donors)
    adata.uns["scontrast"] = {"design": {"replicate": "donor", "paired": False, "unit": "replicate",
                                         "summary": "replicate: donor, 3 target / 2 background (unpaired)"}}


def test_a_direction_that_separates_donors_is_warned():
    """The target subgroups are donors (a donor axis) in one case and shared by every donor in the other."""
    from scontrast.tl._cpca import summary_rows

    adata = made_up(n_target=300, n_background=250, seed=1)
    target = adata.obs["scontrast_target"].to_numpy()
    sub = adata.obs["subgroup"].astype(str).to_numpy()
    background_donors = np.where(np.arange(adata.n_obs) % 2 == 0, "n1", "n2")
    _declare(adata, np.where(target, "donor_" + sub, background_donors))   # subgroup = donor
    cpca(adata, random_state=0)
    share = adata.uns["cpca"]["replicate_share"]
    assert share[0] > 0.8
    assert any("cPC 1:" in w and "between replicates" in w for w in adata.uns["cpca"]["warnings"])
    assert dict(summary_rows(adata))["share of each cPC's target variance between replicates"].startswith(f"{share[0]:.2f}")

    shared = made_up(n_target=300, n_background=250, seed=1)
    rng = np.random.default_rng(0)
    _declare(shared, np.where(target, rng.choice(["t1", "t2", "t3"], adata.n_obs), background_donors))
    cpca(shared, random_state=0)
    assert shared.uns["cpca"]["replicate_share"].max() < 0.1
    assert not any("between replicates" in w for w in shared.uns["cpca"]["warnings"])
    np.testing.assert_array_equal(shared.obsm["X_cpca"], adata.obsm["X_cpca"])  # the fit itself is untouched


def test_n_jobs_sets_the_fits_threads():
    """The workflow passes its rule's threads as n_jobs; they are the fit's, recorded in uns."""
    adata = made_up()
    cpca(adata, alpha=[1.0], n_jobs=3)
    assert adata.uns["cpca"]["n_threads"] == 3 and "n_jobs" not in adata.uns["cpca"]["params"]
