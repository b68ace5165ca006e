"""AnnData front end and figure of PCPCA, on made-up data."""

from __future__ import annotations

import importlib.util

import anndata as ad
import matplotlib
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from conftest import REPO
from scontrast.pcpca import PCPCA, max_gamma
from scontrast.pl._pcpca import pcpca as plot_pcpca
from scontrast.tl._pcpca import pcpca

matplotlib.use("Agg")


def made_up(n_target=80, n_background=70, n_genes=40, seed=0, sparse=False):
    """Log-normalised-like data: a target-only programme on genes 0-4, HVG flags on 30 genes."""
    rng = np.random.default_rng(seed)
    n = n_target + n_background
    X = rng.gamma(2.0, 0.5, size=(n, n_genes)) * (rng.random((n, n_genes)) < 0.6)
    prog = rng.normal(size=n_target)
    X[:n_target, :5] += np.abs(prog[:, None]) * 1.5
    X = np.log1p(X)
    is_target = np.arange(n) < n_target
    obs = pd.DataFrame({
        "scontrast_target": is_target,
        "condition": pd.Categorical(np.where(is_target, "tumour", "normal")),
        "score": rng.normal(size=n),
    }, index=[f"c{i}" for i in range(n)])
    var = pd.DataFrame({"highly_variable": np.arange(n_genes) < 30}, index=[f"g{j}" for j in range(n_genes)])
    return ad.AnnData(X=sp.csr_matrix(X) if sparse else X, obs=obs, var=var)


def test_writes_the_slots(tmp_path):
    adata = made_up(sparse=True)
    pcpca(adata, gamma_prime=0.4, random_state=0)
    assert adata.obsm["X_pcpca"].shape == (150, 2)
    W = adata.varm["PCPCA_W"]
    assert W.shape == (40, 2) and np.all(W[30:] == 0) and np.all(np.abs(W[:30]).sum(0) > 0)
    u = adata.uns["pcpca"]
    assert u["gamma_prime"] == pytest.approx(0.4) and u["gamma"] == pytest.approx(0.4 * 80 / 70)
    hv = adata.var["highly_variable"].to_numpy()
    X = adata.X.toarray()[:, hv]
    Xt, Xb = X[:80], X[80:]
    assert u["max_gamma"] == pytest.approx(max_gamma(Xt, Xb, 2), rel=1e-9)
    assert u["max_gamma_prime"] == pytest.approx(u["max_gamma"] * 70 / 80)
    ref = PCPCA(2, gamma_prime=0.4).fit(Xt, Xb)
    assert u["sigma2"] == pytest.approx(ref.sigma2_, rel=1e-9)
    np.testing.assert_allclose(adata.obsm["X_pcpca"], ref.transform(X), atol=1e-8)
    assert u["n_heldout"] == 16 and np.isfinite(u["heldout_loglik"]) and np.isfinite(u["heldout_loglik_ppca"])
    assert u["params"]["gamma"] == "None" and u["random_state"] == 0 and "numpy" in u["versions"]
    # The held-out split follows the seed; the full fit does not depend on it.
    again = made_up(sparse=True)
    pcpca(again, gamma_prime=0.4, random_state=0)
    assert again.uns["pcpca"]["heldout_loglik"] == u["heldout_loglik"]
    other = made_up(sparse=True)
    pcpca(other, gamma_prime=0.4, random_state=1)
    assert other.uns["pcpca"]["heldout_loglik"] != u["heldout_loglik"]
    np.testing.assert_allclose(other.obsm["X_pcpca"], adata.obsm["X_pcpca"], atol=1e-8)
    adata.write_h5ad(tmp_path / "x.h5ad")  # every uns value is storable
    back = ad.read_h5ad(tmp_path / "x.h5ad")
    assert back.uns["pcpca"]["sigma2"] == pytest.approx(u["sigma2"])


def test_copy_gamma_and_genes():
    adata = made_up()
    out = pcpca(adata, gamma=0.3, genes="all", holdout_fraction=0.0, copy=True)
    assert "pcpca" not in adata.uns and out.uns["pcpca"]["gamma"] == pytest.approx(0.3)
    assert out.varm["PCPCA_W"].shape == (40, 2) and np.all(np.abs(out.varm["PCPCA_W"][30:]).sum(0) > 0)
    assert np.isnan(out.uns["pcpca"]["heldout_loglik"])
    with pytest.raises(ValueError, match="at most one"):
        pcpca(adata, gamma=0.3, gamma_prime=0.3)


def test_inadmissible_gamma_error_or_clip():
    adata = made_up()
    with pytest.raises(ValueError, match=r"need gamma_prime < "):
        pcpca(adata, gamma_prime=0.999)
    with pytest.warns(UserWarning, match="clipped"):
        pcpca(adata, gamma_prime=0.999, on_inadmissible="clip", clip_fraction=0.9)
    u = adata.uns["pcpca"]
    assert u["clipped"] and u["gamma"] == pytest.approx(0.9 * u["max_gamma"])


def test_missing_values_in_a_layer():
    adata = made_up()
    M = adata.X.copy()
    M[np.random.default_rng(0).random(M.shape) < 0.1] = np.nan
    adata.layers["holes"] = M
    pcpca(adata, gamma_prime=0.3, layer="holes", holdout_fraction=0.25)
    u = adata.uns["pcpca"]
    assert u["solver"] == "lbfgs" and u["converged"] and np.isfinite(u["heldout_loglik"])
    assert np.all(np.isfinite(adata.obsm["X_pcpca"]))


def test_figure():
    adata = made_up()
    pcpca(adata, gamma_prime=0.4)
    for color in ("condition", "score", None):
        fig = plot_pcpca(adata, color)
        assert len(fig.axes) >= 2 and fig.axes[0].get_xlabel() == "PCPCA 1"
        matplotlib.pyplot.close(fig)
    one = made_up()
    pcpca(one, n_components=1, gamma_prime=0.4)
    plot_pcpca(one, "condition")
    with pytest.raises(ValueError, match="does not exist"):
        plot_pcpca(adata, "nope")


def test_benchmark_core_runs_on_tiny_sizes():
    spec = importlib.util.spec_from_file_location("bench_pcpca", REPO / "benchmarks" / "bench_pcpca.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    row = bench.missing_data_speed(n=30, m=30, D=6, k=2, frac=0.2, n_iter=3, seed=0)
    assert row["ref_s"] > 0 and row["ours_s"] > 0 and np.isfinite(row["ours_objective"])
    assert row["ours_objective"] >= row["start_objective"]
