"""AnnData front end and figure of PCPCA, on made-up data."""

from __future__ import annotations

import anndata as ad
import matplotlib
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from benchmarks import bench_pcpca
from scontrast import io
from scontrast.core import ScontrastError
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
    assert u["params"]["gamma"] is None and u["params"]["gamma_prime"] == 0.4 and u["params"]["holdout_fraction"] == 0.2
    model_params = {k: v for k, v in PCPCA(gamma_prime=0.4).get_params().items() if k != "random_state"}
    assert u["params"] == {**model_params, "genes": "highly_variable", "layer": None, "groupby": "scontrast_target",
                           "key_added": None,
                           "holdout_fraction": 0.2}
    assert "random_state" not in u["params"] and u["random_state"] == 0 and "numpy" in u["versions"]
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
    with pytest.raises(ScontrastError, match="set one of the two, not both"):
        pcpca(adata, gamma=0.3, gamma_prime=0.3)
    with pytest.raises(ScontrastError, match=r"PCPCA: unknown parameter\(s\) \['gama'\]"):
        pcpca(adata, gama=0.3)


def test_defaults_are_the_estimators():
    """No model parameter: gamma' = 0.5, k = 2, errors on an inadmissible gamma (PCPCA's defaults)."""
    adata = made_up()
    pcpca(adata)
    u = adata.uns["pcpca"]
    assert u["gamma_prime"] == pytest.approx(0.5) and adata.obsm["X_pcpca"].shape[1] == 2
    assert {k: u["params"][k] for k in PCPCA().get_params() if k != "random_state"} == {
        k: v for k, v in PCPCA().get_params().items() if k != "random_state"}


def test_inadmissible_gamma_error_or_clip(caplog):
    adata = made_up()
    with pytest.raises(ValueError, match=r"need gamma_prime < "):
        pcpca(adata, gamma_prime=0.999)
    with caplog.at_level("WARNING", logger="scontrast"):
        pcpca(adata, gamma_prime=0.999, on_inadmissible="clip", clip_fraction=0.9)
    u = adata.uns["pcpca"]
    # the clipping reaches the log and uns (and from there the summary and the report)
    assert len(u["warnings"]) == 1 and "clipped" in u["warnings"][0]
    assert [r.levelname for r in caplog.records if "clipped" in r.getMessage()] == ["WARNING"]
    assert u["clipped"] and u["gamma"] == pytest.approx(0.9 * u["max_gamma"])
    assert u["gamma_requested"] == pytest.approx(0.999 * 80 / 70)
    assert u["params"]["on_inadmissible"] == "clip" and u["params"]["clip_fraction"] == 0.9


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
        fig = plot_pcpca(adata, color=color)
        W = adata.varm["PCPCA_W"][:, 0]
        top = int(np.argmax(np.abs(W)))  # the axis names its largest |loading| first, with its sign
        assert len(fig.axes) >= 2 and fig.axes[0].get_xlabel().startswith(
            f"PCPCA 1 ({adata.var_names[top]}{'+' if W[top] > 0 else '-'}, ")
        matplotlib.pyplot.close(fig)
    one = made_up()
    pcpca(one, n_components=1, gamma_prime=0.4)
    plot_pcpca(one, color="condition")
    with pytest.raises(ScontrastError, match="does not exist"):
        plot_pcpca(adata, color="nope")


def test_figure_from_annotations_and_the_delta(tmp_path):
    """What rule pcpca_figure gives pl.pcpca: the preprocessed annotations (no X) and the method's delta."""
    adata = made_up()
    io.write_h5ad(adata, tmp_path / "pre.h5ad")
    before = io.slot_keys(adata)
    pcpca(adata, gamma_prime=0.4)
    io.write_h5ad(io.extract_delta(adata, before), tmp_path / "pcpca.h5ad")
    light = io.read_for_figure(tmp_path / "pre.h5ad", tmp_path / "pcpca.h5ad")
    assert light.X is None
    fig = plot_pcpca(light, color="condition", components=[1, 0], point_size=3.0, figsize=[6, 3])
    assert fig.axes[0].get_xlabel().startswith("PCPCA 2 (") and "0.4" in fig.get_suptitle()
    matplotlib.pyplot.close(fig)


def test_benchmark_core_runs_on_tiny_sizes():
    row = bench_pcpca.missing_data_speed(n=30, m=30, D=6, k=2, frac=0.2, n_iter=3, seed=0)
    assert row["ref_s"] > 0 and row["ours_s"] > 0 and np.isfinite(row["ours_objective"])
    assert row["ours_objective"] >= row["start_objective"]


def test_share_of_the_components_between_donors():
    """Donors cut along the target programme (a donor axis) vs donors drawn at random."""
    from scontrast.design import REPLICATE_KEY

    adata = made_up(n_target=200, n_background=150)
    target = adata.obs["scontrast_target"].to_numpy()
    programme = np.asarray(adata.X[:, :5].sum(axis=1)).ravel()
    cuts = np.quantile(programme[target], [1 / 3, 2 / 3])
    by_programme = np.where(target, np.array(["t1", "t2", "t3"])[np.searchsorted(cuts, programme)], "n1")
    by_programme[~target & (np.arange(adata.n_obs) % 2 == 0)] = "n2"
    for donors, expect_warning in ((by_programme, True),
                                   (np.where(target, np.random.default_rng(0).choice(["t1", "t2", "t3"], adata.n_obs),
                                             by_programme), False)):
        a = adata.copy()
        a.obs[REPLICATE_KEY] = pd.Categorical(donors)
        a.uns["scontrast"] = {"design": {"replicate": "donor", "paired": False, "unit": "replicate",
                                         "summary": "replicate: donor, 3 target / 2 background (unpaired)"}}
        pcpca(a, gamma_prime=0.4, random_state=0)
        share = a.uns["pcpca"]["replicate_share"]
        warned = any("PCPCA component 1:" in w for w in a.uns["pcpca"]["warnings"])
        assert warned == expect_warning and (share[0] > 0.5) == expect_warning


def test_summary_says_which_held_out_likelihood_is_better_and_what_a_lower_one_means():
    """The summary row names the better direction and reads PCPCA's lower value (both demo datasets)
    as the cost of the contrast, a higher one as directions that also explain new target cells."""
    from scontrast.tl._pcpca import summary_rows

    adata = made_up(sparse=True)
    pcpca(adata, gamma_prime=0.4, random_state=0)
    u = adata.uns["pcpca"]
    rows = dict(summary_rows(adata))
    (item,) = [k for k in rows if k.startswith("held-out log-likelihood")]
    assert item == "held-out log-likelihood per target cell, PCPCA (PPCA); higher is better"
    lower = u["heldout_loglik"] < u["heldout_loglik_ppca"]
    assert lower  # PPCA is the target's own maximum-likelihood model: it wins on new target cells here too
    assert rows[item].startswith(f"{u['heldout_loglik']:.4g} ({u['heldout_loglik_ppca']:.4g}) over 16 held-out "
                                 "target cells: PCPCA's is lower, as expected")
    assert "this does not measure the contrast" in rows[item]
    u["heldout_loglik"] = u["heldout_loglik_ppca"] + 1.0
    assert "PCPCA's is as high or higher" in dict(summary_rows(adata))[item]
    u["heldout_loglik"], u["heldout_note"] = float("nan"), "split of 3 target cells too small"
    assert dict(summary_rows(adata))[item].endswith(": split of 3 target cells too small")
