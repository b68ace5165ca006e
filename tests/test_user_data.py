"""A user's own data through the real workflow: input scales, warnings that surface, a result fed back in.

One ``snakemake --keep-going`` run holds every case as a dataset of one config:

- ``tpm_raw``, ``tpm_normalized``: CPM values (the shipped wu2020 counts scaled to a million
  per cell) declared ``raw`` and ``normalized``: one line each, naming ``counts: tpm``;
- ``tpm``: the same file declared ``tpm``: log1p without depth normalisation, the run finishes;
- ``no_mito``: wu2020 as shipped, whose mitochondrial genes are named ND1, COX2, ATP6 (no
  ``MT-`` prefix): a warning in the log, the terminal and ``summary.tsv``; the run continues;
- ``qc_most``: wu2020 under the default ``min_genes: 200``, which removes 44% of the tumour
  cells: a warning naming the group and the limit; the run continues;
- ``fed_back``: ``results/no_mito/scontrast.h5ad`` (a finished result, built in the same run)
  as input, with target and background swapped and the counts read from ``layer: counts``:
  the old method slots are dropped (a log line) and ``scontrast.h5ad`` holds the new results;
- ``fed_back_x``: the same file without ``layer``: its X is log-normalised, refused with the
  advice to read ``layer: counts``;
- ``pbmc``: pbmc68k as shipped: its ``obsm['X_umap']``, like wu2020's ``var['gene_ids']`` and
  ``obsm['X_umap_orig']``, reaches ``scontrast.h5ad``, and scanpy draws the SPARDA, cPCA and UMAP
  embeddings in the report's colours.
"""

from __future__ import annotations

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from test_workflow import snakemake, tiny_config

from conftest import REPO
from scontrast.pl._style import BACKGROUND_COLOUR, TARGET_COLOUR

pytestmark = pytest.mark.workflow

WU = dict(path=str(REPO / "data/wu2020_tcells_200.h5ad"), groupby="source", target=["Tumor"], background=["NAT"],
          counts="raw")
MITO = ("mito_prefix 'MT-' matches no gene, so max_pct_mito=20 removed no cell; 11 gene(s) have mitochondrial "
        "names without a prefix (RNR1, RNR2, ND1, ND2, COX2, ATP6, ...): rename them 'MT-<name>' in var_names to "
        "filter on them")
# wu2020 holds cells of 13 patients in each group and no replicate is declared in these configs: true, and warned


def donors(n_target: int, n_background: int) -> str:
    return (f"obs column 'patient' looks like donors or samples ({n_target} values in the target group, {n_background} in "
            "the background) but no replicate is declared: p-values and errors treat cells as independent, so "
            "differences between patients can read as differences between groups; declare replicate: patient (and "
            "paired: true if each gives cells to both groups)")


FAILING = {
    "tpm_raw": "X has non-integer values but counts: raw was declared (values up to {top} look depth-normalised "
               "(TPM, CPM, FPKM): declare counts: tpm)",
    "tpm_normalized": "X has values up to {top}, not a log scale, but counts: normalized was declared (log-normalised "
                      "values stay below 50): depth-normalised values (TPM, CPM, FPKM) are counts: tpm",
    "fed_back_x": "X has non-integer values but counts: raw was declared (values up to {top} look log-normalised: "
                  "declare counts: normalized, or read the raw counts with layer: counts)",
}


def _cpm(path) -> float:
    a = ad.read_h5ad(WU["path"])
    X = a.X.toarray().astype(np.float64)
    a.X = sp.csr_matrix(X / X.sum(1, keepdims=True) * 1e6)
    a.write_h5ad(path)
    keep = a.obs["source"].isin(["Tumor", "NAT"]).to_numpy()
    return float(a.X[keep].max())


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("user_data")
    cpm = workdir / "cpm.h5ad"
    top = _cpm(cpm)
    small = {"min_genes": 20}
    fed = dict(path="results/no_mito/scontrast.h5ad", groupby="source", target=["NAT"], background=["Tumor"],
               counts="raw", preprocess=small)
    cfg = tiny_config(methods=["sparda", "quadro", "cpca"])
    cfg["datasets"] = {
        "pbmc": cfg["datasets"]["pbmc68k"],
        "tpm_raw": {**WU, "path": str(cpm), "preprocess": small},
        "tpm_normalized": {**WU, "path": str(cpm), "counts": "normalized", "preprocess": small},
        "tpm": {**WU, "path": str(cpm), "counts": "tpm", "preprocess": small},
        "no_mito": {**WU, "preprocess": small},
        "qc_most": {**WU, "preprocess": {}},
        "fed_back": {**fed, "layer": "counts"},
        "fed_back_x": fed,
    }
    proc = snakemake(workdir, cfg, "--keep-going", check=False)
    return workdir, cfg, proc, top


def _summary_warnings(workdir, name) -> list[str]:
    table = pd.read_csv(workdir / f"results/{name}/summary.tsv", sep="\t")
    return table.loc[(table["method"] == "preprocess") & (table["item"] == "warning"), "value"].tolist()


@pytest.mark.parametrize("name", list(FAILING))
def test_wrong_scale_is_one_line_naming_the_right_declaration(run, name):
    workdir, _, proc, top = run
    assert proc.returncode != 0  # these three fail; --keep-going finishes the others
    prefix = f"scontrast preprocess [dataset={name}]: "
    # the job's own line, and the same line again where snakemake shows the failed job's log
    lines = sorted({ln for ln in proc.stderr.splitlines() if ln.startswith(prefix)})
    assert len(lines) == 1, proc.stderr[-3000:]
    if name == "fed_back_x":
        x_max = ad.read_h5ad(workdir / "results/no_mito/scontrast.h5ad").X.max()
        expected = FAILING[name].format(top=f"{x_max:.4g}")
    else:
        expected = FAILING[name].format(top=f"{top:.4g}")
    assert lines[0] == prefix + expected
    assert (workdir / f"logs/{name}/preprocess.log").read_text().rstrip("\n").splitlines()[-1] == lines[0]
    assert not (workdir / "results" / name / "preprocessed.h5ad").exists()


def test_tpm_is_log1p_of_the_values_and_runs_through(run):
    workdir, cfg, _, _ = run
    pre = ad.read_h5ad(workdir / "results/tpm/preprocessed.h5ad")
    src = ad.read_h5ad(cfg["datasets"]["tpm_raw"]["path"])
    expected = np.log1p(src[pre.obs_names, pre.var_names].X.toarray())
    np.testing.assert_allclose(pre.X.toarray(), expected, rtol=1e-6)
    assert "counts" not in pre.layers and pre.uns["scontrast"]["preprocess"]["params"]["counts"] == "tpm"
    assert (workdir / "results/tpm/scontrast.h5ad").exists()
    assert _summary_warnings(workdir, "tpm") == [MITO, donors(13, 13)]


def test_no_mito_gene_warns_everywhere_and_the_run_continues(run):
    workdir, _, proc, _ = run
    assert _summary_warnings(workdir, "no_mito") == [MITO, donors(13, 13)]
    log = (workdir / "logs/no_mito/preprocess.log").read_text()
    assert f"scontrast.preprocess WARNING preprocess: {MITO}" in log
    assert f"preprocess: {MITO}" in proc.stderr  # the terminal
    merged = ad.read_h5ad(workdir / "results/no_mito/scontrast.h5ad")
    assert list(merged.uns["scontrast"]["preprocess"]["warnings"]) == [MITO, donors(13, 13)]
    assert "sparda" in merged.uns and "quadro_score" in merged.obs
    assert merged.uns["scontrast"]["preprocess"]["dataset"] == "no_mito"  # the QC figure's title names it
    assert (workdir / "results/no_mito/figures/preprocess_qc.png").stat().st_size > 10_000


def test_qc_removing_most_of_a_group_warns_and_the_run_continues(run):
    workdir, _, _, _ = run
    warned = _summary_warnings(workdir, "qc_most")
    assert warned == [MITO, donors(12, 8), "QC removed 42 of 95 Tumor (target) cells (44%): 42 below min_genes=200",
                      "QC removed 29 of 85 NAT (background) cells (34%): 29 below min_genes=200"]
    pre = ad.read_h5ad(workdir / "results/qc_most/preprocessed.h5ad")
    assert pre.uns["scontrast"]["preprocess"]["n_cells_kept"] == {"target": 53, "background": 56}
    assert (workdir / "results/qc_most/scontrast.h5ad").exists()


def test_a_finished_result_fed_back_in_gets_fresh_results(run):
    workdir, _, _, _ = run
    old = ad.read_h5ad(workdir / "results/no_mito/scontrast.h5ad")
    new = ad.read_h5ad(workdir / "results/fed_back/scontrast.h5ad")
    log = (workdir / "logs/fed_back/preprocess.log").read_text()
    assert ("input slots written by scontrast's own steps are dropped (a finished result fed back in?): "
            "obs['quadro_pred', 'quadro_score', 'scontrast_group', 'scontrast_target']; var['sparda_marginal_w2', "
            "'sparda_selected', 'sparda_weight']; obsm['X_cpca', 'X_cpca_alpha0', 'X_cpca_alpha1', 'X_cpca_alpha2', "
            "'X_cpca_alpha3', 'X_sparda']; varm['cPCs', 'cPCs_alpha0', 'cPCs_alpha1', 'cPCs_alpha2', 'cPCs_alpha3', "
            "'sparda_directions']; uns['cpca', 'quadro', 'scontrast', 'scontrast_group_colors', 'source_colors', "
            "'sparda']") in log
    # the groups are swapped: the new target is the old background
    assert new.obs_names.equals(old.obs_names)
    np.testing.assert_array_equal(new.obs["scontrast_target"].to_numpy(), ~old.obs["scontrast_target"].to_numpy())
    quadro = ad.read_h5ad(workdir / "results/fed_back/quadro.h5ad")
    np.testing.assert_array_equal(new.obs["quadro_score"].to_numpy(), quadro.obs["quadro_score"].to_numpy())
    assert not np.allclose(new.obs["quadro_score"].to_numpy(), old.obs["quadro_score"].to_numpy())
    sparda = ad.read_h5ad(workdir / "results/fed_back/sparda.h5ad")
    assert list(new.uns["sparda"]["params"]) == list(sparda.uns["sparda"]["params"])
    np.testing.assert_array_equal(new.var["sparda_weight"].to_numpy(), sparda.var["sparda_weight"].to_numpy())
    assert new.uns["scontrast"]["preprocess"]["params"]["target"] == ["NAT"]
    assert new.uns["scontrast"]["preprocess"]["dataset"] == "fed_back"
    # counts read from the layer the first run kept: the same normalised values
    np.testing.assert_allclose(new.X.toarray(), old[new.obs_names, new.var_names].X.toarray(), rtol=1e-5, atol=1e-6)


def test_the_users_annotations_reach_the_results(run):
    workdir, cfg, _, _ = run
    for name, ds, kept in (("pbmc", cfg["datasets"]["pbmc"], {"obsm": ["X_umap"], "var": []}),
                           ("no_mito", cfg["datasets"]["no_mito"], {"obsm": ["X_umap_orig"],
                                                                    "var": ["gene_ids", "feature_types"]})):
        src = ad.read_h5ad(ds["path"])
        for file in ("preprocessed.h5ad", "scontrast.h5ad"):
            out = ad.read_h5ad(workdir / f"results/{name}/{file}")
            rows, cols = src.obs_names.get_indexer(out.obs_names), src.var_names.get_indexer(out.var_names)
            for key in kept["obsm"]:
                np.testing.assert_array_equal(out.obsm[key], src.obsm[key][rows])
            for col in kept["var"]:
                np.testing.assert_array_equal(out.var[col].to_numpy(), src.var[col].to_numpy()[cols])
            for col in src.obs.columns:  # every obs column, each cell's own value
                np.testing.assert_array_equal(out.obs[col].astype(str).to_numpy(),
                                              src.obs[col].astype(str).to_numpy()[rows])
            # scanpy's colours of the group column are the figures': categories in the column's order
            groups = list(out.obs[ds["groupby"]].cat.categories)
            assert sorted(groups) == sorted(ds["target"] + ds["background"])
            assert list(out.uns[f"{ds['groupby']}_colors"]) == [
                TARGET_COLOUR if g in ds["target"] else BACKGROUND_COLOUR for g in groups]
    wu = ad.read_h5ad(workdir / "results/no_mito/scontrast.h5ad")
    src = ad.read_h5ad(WU["path"])
    # wu2020's own HVG flags (scanpy's seurat_v3 on all its cells) are kept beside scontrast's
    np.testing.assert_array_equal(wu.var["highly_variable_input"].to_numpy(),
                                  src.var.loc[wu.var_names, "highly_variable"].to_numpy())
    # with its ranking and its uns['hvg'], apart from preprocessing's own highly variable genes
    assert dict(wu.uns["hvg_input"]) == dict(src.uns["hvg"])
    renamed = wu.uns["scontrast"]["preprocess"]["input_annotations"]["renamed"]
    assert list(renamed["as"]) == ["highly_variable_input", "highly_variable_rank_input", "means_input",
                                   "variances_input", "variances_norm_input", "hvg_input"]
    log = (workdir / "logs/no_mito/preprocess.log").read_text()
    assert "input var['highly_variable'] is kept as var['highly_variable_input']" in log


def test_scanpy_draws_every_embedding_of_the_results_in_the_reports_colours(run):
    import matplotlib
    import scanpy as sc

    matplotlib.use("Agg")
    workdir, cfg, _, _ = run
    out = ad.read_h5ad(workdir / "results/pbmc/scontrast.h5ad")
    for key, value in out.obsm.items():  # embeddings only: one float row of >= 2 coordinates per cell
        assert value.ndim == 2 and value.shape == (out.n_obs, value.shape[1]) and value.shape[1] >= 2, key
        assert np.issubdtype(value.dtype, np.floating), key
    for basis in ("sparda", "cpca", "umap"):
        ax = sc.pl.embedding(out, basis=basis, color="bulk_labels", show=False)
        legend = {t.get_text(): matplotlib.colors.to_hex(h.get_facecolor()[0], keep_alpha=False)
                  for t, h in zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles)}
        assert legend == {"CD14+ Monocyte": TARGET_COLOUR, "Dendritic": BACKGROUND_COLOUR}, basis
    matplotlib.pyplot.close("all")
