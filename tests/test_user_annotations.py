"""The user's own annotations through the library: carried into the results in their slots, renamed
where they collide with scontrast's, scanpy's colours matching the figures, embeddings scanpy can
draw, and only per-cell embeddings in obsm."""

from __future__ import annotations

import warnings

import anndata as ad
import matplotlib
import numpy as np
import pandas as pd
import pytest
import scanpy as sc
import scipy.sparse as sp

from conftest import make_counts
from scontrast import io, tl
from scontrast.core import ScontrastError
from scontrast.pl._style import BACKGROUND_COLOUR, TARGET_COLOUR
from scontrast.preprocess import preprocess

matplotlib.use("Agg")

KW = dict(min_genes=5, min_cells=2, n_top_genes=20, min_cells_per_group=5)
GROUPS = dict(groupby="condition", target=["disease"], background=["healthy"])
USER_COLOURS = np.array(["#000000", "#111111", "#222222"], dtype=object)  # disease, healthy, other


def _annotated() -> ad.AnnData:
    """``make_counts`` (disease, healthy, other) with what a scanpy user's file holds, some names colliding."""
    a = make_counts()
    n, g = a.shape
    rng = np.random.default_rng(1)
    X = a.X.toarray()
    X[0, :] = 0
    X[0, 0] = 1  # cell0 (disease): one detected gene, removed by min_genes
    X[:, 7] = 0  # gene7 detected nowhere: removed by min_cells
    a.X = sp.csr_matrix(X)
    cond = a.obs["condition"].astype(str).to_numpy()
    a.obs["batch"] = pd.Categorical(np.where(cond == "other", "b_other", np.where(np.arange(n) % 2, "b1", "b2")))
    a.obs["total_counts"] = 1.0  # scanpy's QC metric of the user's own run: collides with preprocessing's
    a.uns["condition_colors"] = USER_COLOURS.copy()
    a.uns["batch_colors"] = np.array(["#aa0000", "#00aa00", "#0000aa"], dtype=object)  # b1, b2, b_other
    a.var["gene_ids"] = [f"ENSG{i:05d}" for i in range(g)]
    a.var["highly_variable"] = False  # collides, and so does its first new name
    a.var["highly_variable_input"] = True
    a.obsm["X_umap"] = rng.normal(size=(n, 2))
    a.obsm["X_frame"] = pd.DataFrame(rng.normal(size=(n, 3)), index=a.obs_names, columns=["a", "b", "c"])
    a.varm["PCs"] = rng.normal(size=(g, 3))
    graph = sp.random(n, n, density=0.1, random_state=2, format="csr")
    a.obsp["connectivities"] = graph + graph.T
    a.uns["neighbors"] = {"params": {"n_neighbors": 5, "method": "umap"}, "connectivities_key": "connectivities"}
    a.layers["spliced"] = a.X.copy()
    return a


def _preprocessed(a: ad.AnnData, **kw) -> ad.AnnData:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return preprocess(a, **{**GROUPS, **KW, **kw})


def test_every_input_annotation_is_carried_to_the_kept_cells_and_genes(tmp_path, caplog):
    a = _annotated()
    before = {k: v.copy() for k, v in a.uns.items() if k.endswith("_colors")}
    with caplog.at_level("INFO", logger="scontrast"):
        out = _preprocessed(a)
    assert "cell0" not in out.obs_names and "gene7" not in out.var_names  # QC removed a cell and a gene
    rows = a.obs_names.get_indexer(out.obs_names)
    cols = a.var_names.get_indexer(out.var_names)
    np.testing.assert_array_equal(out.obsm["X_umap"], a.obsm["X_umap"][rows])
    pd.testing.assert_frame_equal(out.obsm["X_frame"], a.obsm["X_frame"].iloc[rows])
    np.testing.assert_array_equal(out.varm["PCs"], a.varm["PCs"][cols])
    # a graph keeps the edges between kept cells, and stays sparse
    assert sp.issparse(out.obsp["connectivities"])
    assert (out.obsp["connectivities"] != a.obsp["connectivities"][rows][:, rows]).nnz == 0
    kept, total = out.obsp["connectivities"].nnz, a.obsp["connectivities"].nnz
    assert 0 < kept < total
    assert (f"obsp['connectivities'] holds the graph between the kept cells: {kept} of its {total} edges (a cell's "
            "neighbours outside the kept cells are not among them)") in caplog.messages
    assert out.uns["neighbors"] == a.uns["neighbors"]
    np.testing.assert_array_equal(out.var["gene_ids"], a.var["gene_ids"].to_numpy()[cols])
    # a colliding name is kept under a free one, never overwritten
    assert not out.var["highly_variable_input2"].any() and out.var["highly_variable_input"].all()
    assert out.var["highly_variable"].sum() == 20  # preprocessing's own
    assert (out.obs["total_counts_input"] == 1.0).all()
    np.testing.assert_allclose(out.obs["total_counts"], np.asarray(out.layers["counts"].sum(1)).ravel(), rtol=1e-6)
    record = out.uns["scontrast"]["preprocess"]["input_annotations"]
    assert list(zip(record["renamed"]["slot"], record["renamed"]["name"], record["renamed"]["as"])) == [
        ("obs", "total_counts", "total_counts_input"), ("var", "highly_variable", "highly_variable_input2"),
        ("uns", "condition_colors", "condition_colors_input")]
    assert list(record["not_carried"]["layers"]) == ["spliced"] and "spliced" not in out.layers
    # categories no kept cell holds leave with their colours (as anndata's subsets do)
    assert list(out.obs["batch"].cat.categories) == ["b1", "b2"]
    assert list(out.uns["batch_colors"]) == ["#aa0000", "#00aa00"]
    assert list(out.uns["condition_colors_input"]) == list(USER_COLOURS[:2])
    # the caller's AnnData is left as given
    assert "spliced" in a.layers and list(a.uns["condition_colors"]) == list(before["condition_colors"])
    assert list(a.obs["batch"].cat.categories) == ["b1", "b2", "b_other"] and not a.var["highly_variable"].any()
    io.write_h5ad(out, tmp_path / "p.h5ad")  # everything recorded is writable
    back = io.read_h5ad(tmp_path / "p.h5ad")
    np.testing.assert_array_equal(back.obsm["X_umap"], out.obsm["X_umap"])
    assert list(back.uns["scontrast"]["preprocess"]["input_annotations"]["renamed"]["as"]) == list(
        record["renamed"]["as"])


def test_group_colours_are_the_figures_in_the_columns_order():
    a = _annotated()
    out = _preprocessed(a)
    assert list(out.obs["condition"].cat.categories) == ["disease", "healthy"]
    assert list(out.uns["condition_colors"]) == [TARGET_COLOUR, BACKGROUND_COLOUR]
    group = out.obs["scontrast_group"]
    assert list(group.cat.categories) == ["disease (target)", "healthy (background)"]
    np.testing.assert_array_equal(group.to_numpy() == "disease (target)", out.obs["scontrast_target"].to_numpy())
    assert list(out.uns["scontrast_group_colors"]) == [TARGET_COLOUR, BACKGROUND_COLOUR]
    # the background first in the column's order: the colours follow the categories, not the roles
    swapped = _preprocessed(_annotated(), target=["healthy"], background=["disease"])
    assert list(swapped.uns["condition_colors"]) == [BACKGROUND_COLOUR, TARGET_COLOUR]
    # two labels on one side: each of their categories takes that side's colour
    two = _preprocessed(_annotated(), target=["disease", "other"])
    assert list(two.uns["condition_colors"]) == [TARGET_COLOUR, BACKGROUND_COLOUR, TARGET_COLOUR]


def test_a_text_group_column_becomes_categorical_and_a_numeric_one_gets_no_colours():
    a = _annotated()
    a.obs["condition"] = a.obs["condition"].astype(str)  # plain text, categories in sorted order
    out = _preprocessed(a, target=["healthy"], background=["disease"])
    assert isinstance(out.obs["condition"].dtype, pd.CategoricalDtype)
    assert list(out.obs["condition"].cat.categories) == ["disease", "healthy"]
    assert list(out.uns["condition_colors"]) == [BACKGROUND_COLOUR, TARGET_COLOUR]
    b = _annotated()
    b.obs["code"] = b.obs["condition"].cat.codes.astype(int)  # disease 0, healthy 1, other 2
    out = _preprocessed(b, groupby="code", target=["0"], background=["1"])
    assert "code_colors" not in out.uns and out.obs["code"].dtype.kind == "i"  # scanpy draws numbers on a scale
    assert list(out.uns["scontrast_group_colors"]) == [TARGET_COLOUR, BACKGROUND_COLOUR]


def test_a_finished_result_fed_back_keeps_the_users_entries_and_drops_scontrasts(tmp_path):
    first = _preprocessed(_annotated())
    first.var["pseudobulk_padj"] = 0.5  # a method's results of the earlier run
    first.uns["pseudobulk"] = {"design": "~ condition"}
    again = _preprocessed(first, layer="counts", target=["healthy"], background=["disease"])
    assert "pseudobulk" not in again.uns and not [c for c in again.var.columns if c.startswith("pseudobulk")]
    assert list(again.uns["condition_colors"]) == [BACKGROUND_COLOUR, TARGET_COLOUR]  # fresh, for the new roles
    assert "condition_colors_input2" not in again.uns and "scontrast_group_colors_input" not in again.uns
    assert list(again.uns["condition_colors_input"]) == list(USER_COLOURS[:2])  # the user's, still carried
    np.testing.assert_array_equal(again.obsm["X_umap"], first.obsm["X_umap"][first.obs_names.get_indexer(
        again.obs_names)])
    assert list(again.obs["scontrast_group"].cat.categories) == ["healthy (target)", "disease (background)"]


FAST_SPARDA = dict(n_permutations=0, lam=0.05, relax_max_iter=20)


def _contrast() -> ad.AnnData:
    out = _preprocessed(_annotated())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tl.sparda(out, **FAST_SPARDA, random_state=0)
        tl.cpca(out, random_state=0)
    return out


def test_sparda_embedding_second_axis_is_the_leading_orthogonal_pc():
    """With one direction, X_sparda's second column is the cells' score on the leading principal component
    of the screened genes orthogonal to the direction: numpy's eigendecomposition of the projected
    covariance, and no other unit vector orthogonal to the direction has a larger variance."""
    out = _contrast()
    info = out.uns["sparda"]
    E = out.obsm["X_sparda"]
    assert E.shape == (out.n_obs, 2) and info["n_directions_found"] == 1
    assert list(info["embedding"])[0] == "projection on SPARDA direction 1"
    assert "orthogonal to SPARDA direction 1" in info["embedding"][1]
    genes = out.var_names.get_indexer(np.asarray(info["screening"]["genes_kept"]))
    Z = out.X.toarray()[:, genes].astype(np.float64)
    b = out.var["sparda_weight"].to_numpy()[genes]
    np.testing.assert_allclose(E[:, 0], Z @ b, rtol=1e-5, atol=1e-6)
    P = np.eye(b.size) - np.outer(b, b) / (b @ b)
    values, vectors = np.linalg.eigh(P @ np.cov(Z, rowvar=False, bias=True) @ P)
    v = vectors[:, -1] * np.sign(vectors[np.argmax(np.abs(vectors[:, -1])), -1])
    Zc = Z - Z.mean(0)
    scale = np.abs(Zc).max()
    np.testing.assert_allclose(E[:, 1], Zc @ v, atol=1e-6 * scale * np.sqrt(b.size))
    assert E[:, 1].var() == pytest.approx(values[-1], rel=1e-6)
    rng = np.random.default_rng(0)
    for u in rng.normal(size=(200, b.size)):
        u = P @ u
        assert (Zc @ (u / np.linalg.norm(u))).var() <= E[:, 1].var() * (1 + 1e-9)


def test_two_directions_found_are_the_two_columns():
    out = _preprocessed(make_counts(fold=6.0, shift_genes=8))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tl.sparda(out, **FAST_SPARDA, n_directions=2, random_state=0)
    W = out.varm["sparda_directions"]
    assert out.uns["sparda"]["n_directions_found"] == 2
    np.testing.assert_allclose(out.obsm["X_sparda"], out.X.toarray() @ W, rtol=1e-5, atol=1e-6)
    assert all(label.startswith("projection on SPARDA direction") for label in out.uns["sparda"]["embedding"])


@pytest.mark.parametrize("basis", ["sparda", "cpca", "umap"])
def test_scanpy_draws_the_embeddings_in_the_figures_colours(basis):
    out = _contrast()
    ax = sc.pl.embedding(out, basis=basis, color="condition", show=False)
    legend = {t.get_text(): matplotlib.colors.to_hex(h.get_facecolor()[0], keep_alpha=False)
              for t, h in zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles)}
    assert legend == {"disease": TARGET_COLOUR, "healthy": BACKGROUND_COLOUR}
    points = ax.collections[0].get_facecolors()
    assert {matplotlib.colors.to_hex(c, keep_alpha=False) for c in points} == {TARGET_COLOUR, BACKGROUND_COLOUR}
    assert list(out.uns["condition_colors"]) == [TARGET_COLOUR, BACKGROUND_COLOUR]  # scanpy kept them
    matplotlib.pyplot.close("all")


def test_only_embeddings_in_obsm_after_every_method():
    out = _contrast()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tl.latent_features(out, n_genes=10, max_features=2, n_members=4, random_state=0)
        tl.fangs(out, n_init=2, n_sweet=1, n_iter=20, random_state=0)
    K = int(out.uns["fangs"]["n_features"])
    for key, value in out.obsm.items():
        # a per-cell embedding: one float row per cell, at least one column (fangs' binary features when K > 0)
        assert value.shape[0] == out.n_obs and value.ndim == 2 and value.shape[1] >= 1, key
    assert not any(k.startswith("latent_features") for k in out.obsm)
    assert ("fangs_features" in out.obsm) == (K > 0)
    info = out.uns["latent_features"]
    assert info["samples"].dtype == np.uint8 and info["input"].shape == (out.n_obs, 10)


def test_samples_follow_a_subset_of_the_cells():
    out = _preprocessed(_annotated())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tl.latent_features(out, n_genes=10, max_features=2, n_members=4, random_state=0)
    full = tl.samples_from_adata(out)
    part = out[::-3].copy()  # every third cell, in reverse
    rows = out.obs_names.get_indexer(part.obs_names)
    for whole, sub in zip(full, tl.samples_from_adata(part), strict=True):
        np.testing.assert_array_equal(sub, whole[rows])
    stranger = part.copy()
    stranger.obs_names = [f"new{i}" for i in range(stranger.n_obs)]
    with pytest.raises(ScontrastError, match=r"^uns\['latent_features'\]\['samples'\]: \d+ of the \d+ cells are not"):
        tl.samples_from_adata(stranger)


def test_fangs_with_no_feature_writes_no_zero_width_array_and_still_draws():
    from scontrast.pl._fangs import fangs as plot_fangs

    n = 60
    adata = ad.AnnData(X=np.zeros((n, 2), np.float32),
                       obs=pd.DataFrame({"scontrast_target": np.arange(n) % 2 == 0}, index=[f"c{i}" for i in range(n)]))
    adata.obsm["fangs_features"] = np.ones((n, 1), np.uint8)  # an earlier call's estimate
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tl.fangs(adata, samples=[np.zeros((n, 0), np.uint8)] * 5, draws=False, random_state=0)
    assert adata.uns["fangs"]["n_features"] == 0 and "fangs_features" not in adata.obsm
    assert plot_fangs(adata) is not None
    matplotlib.pyplot.close("all")


def test_the_inputs_own_highly_variable_ranking_is_kept_apart_and_never_ranks_our_genes():
    """A file scanpy processed holds its own ranking of highly variable genes (seurat_v3: highly_variable_rank,
    variances_norm), computed on other cells: kept as <name>_input, so that QUADRO, which ranks its genes by
    those columns when present, ranks them by preprocessing's own and picks what it picks without them."""
    plain = make_counts()
    ranked = plain.copy()
    g = ranked.n_vars
    ranked.var["highly_variable_rank"] = np.arange(g, dtype=float)[::-1]  # the opposite order of any sensible one
    ranked.var["variances_norm"] = np.arange(g, dtype=float)
    out = _preprocessed(ranked)
    assert "highly_variable_rank" not in out.var and "variances_norm" not in out.var
    np.testing.assert_array_equal(out.var["highly_variable_rank_input"],
                                  ranked.var["highly_variable_rank"].to_numpy()[ranked.var_names.get_indexer(out.var_names)])
    renamed = out.uns["scontrast"]["preprocess"]["input_annotations"]["renamed"]
    assert {"highly_variable_rank", "variances_norm"} <= set(renamed["name"])
    ranked.uns["hvg"] = {"flavor": "seurat_v3"}  # what scanpy says of its own ranking goes with it
    assert _preprocessed(ranked).uns["hvg_input"] == {"flavor": "seurat_v3"}
    reference = _preprocessed(plain)
    for adata in (out, reference):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tl.quadro(adata, n_genes=5, lambda_grid=[1.0, 0.1], outer_cv=2, cv=2, nested=False, random_state=0, n_jobs=1)
    assert list(out.uns["quadro"]["genes"]) == list(reference.uns["quadro"]["genes"])
