"""SPARDA AnnData front end, figure and delta round trip on a small made-up AnnData."""

import anndata as ad
import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from scontrast import io
from scontrast.pl._sparda import sparda as plot_sparda
from scontrast.tl._sparda import sparda

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
    assert adata.obsm["X_sparda"].shape == (140, 1)

    info = adata.uns["sparda"]
    for key in ["params", "versions", "random_state", "divergence", "pvalue", "lam", "selected_genes",
                "lambda_path", "screening", "relax", "tighten", "null_divergences", "pda_divergence"]:
        assert key in info, key
    assert 0 < info["pvalue"] <= 1 and info["pvalue"] == pytest.approx(0.1)  # 1/(9+1): a real difference
    assert set(info["selected_genes"]) == set(var.index[var["sparda_selected"]])
    assert info["lam"] in info["lambda_path"]["lam"]
    assert info["screening"]["screened"] is False and info["screening"]["n_genes_in"] == 30
    assert info["params"]["lam"] == "None"  # h5ad has no None
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
    with pytest.raises(ValueError, match="scontrast_target"):
        sparda(adata)
    with pytest.raises(ValueError, match="lam"):
        sparda(_adata(), lam=-1.0)


def test_figure():
    adata = _adata()
    sparda(adata, lam=0.05, n_permutations=4, random_state=0)
    fig = plot_sparda(adata, n_genes=5)
    ax_w, ax_d = fig.axes[:2]
    assert len(ax_w.patches) == min(5, int(adata.var["sparda_selected"].sum()))
    assert ax_w.get_xlabel() and ax_d.get_xlabel() and ax_d.get_ylabel()
    assert "p = 0.2" in ax_d.get_title()
    labels = [t.get_text() for t in ax_d.get_legend().get_texts()]
    assert any("target" in t for t in labels) and any("background" in t for t in labels)
    with pytest.raises(ValueError, match="tl.sparda"):
        plot_sparda(_adata())
