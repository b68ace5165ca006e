"""QUADRO front end (tl.quadro), its figure, and the benchmark's core on tiny sizes."""

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from matplotlib.figure import Figure

from benchmarks import bench_quadro
from scontrast import io
from scontrast.core import ScontrastError
from scontrast.pl._quadro import quadro as plot_quadro
from scontrast.quadro import QUADRO
from scontrast.tl._common import fmt
from scontrast.tl._quadro import quadro, select_genes, summary_rows


def _adata(n=160, n_genes=12, seed=0, sparse=False):
    """Log-normal-ish expression; in target cells genes g0 and g1 co-vary and g2 varies more."""
    rng = np.random.default_rng(seed)
    target = np.arange(n) % 2 == 0
    Z = rng.standard_normal((n, n_genes))
    Z[target, 1] = 0.9 * Z[target, 0] + np.sqrt(1 - 0.81) * Z[target, 1]
    Z[target, 2] *= 2.0
    X = np.log1p(np.exp(Z + 1.0)).astype(np.float32)
    var = pd.DataFrame(index=[f"g{i}" for i in range(n_genes)])
    var["highly_variable"] = np.arange(n_genes) < 8
    # g11 is the least dispersed of the set; g0-g2 are ranked among the top
    var["dispersions_norm"] = np.r_[5.0, 4.0, 3.0, 2.5, 2.0, 1.5, 1.0, 0.5, 6.0, 6.0, 6.0, 6.0]
    obs = pd.DataFrame({"scontrast_target": target}, index=[f"c{i}" for i in range(n)])
    return ad.AnnData(X=sp.csr_matrix(X) if sparse else X, obs=obs, var=var)


FAST = dict(n_genes=5, outer_cv=3, cv=3, lambda_grid=[1.0, 0.1], lambda2=1.0, random_state=0)


def test_select_genes_ranks_the_set():
    a = _adata()
    assert list(a.var_names[select_genes(a, "highly_variable", 3)]) == ["g0", "g1", "g2"]
    assert select_genes(a, "highly_variable", None).size == 8
    a.var["sparda_selected"] = [False, True, True, True] + [False] * 8
    a.var["sparda_weight"] = [0.0, 0.1, -0.9, 0.5] + [0.0] * 8
    assert list(a.var_names[select_genes(a, "sparda_selected", 2)]) == ["g2", "g3"]
    del a.var["dispersions_norm"]
    del a.var["sparda_weight"]
    idx = select_genes(a, "highly_variable", 2)  # falls back to the variance in the data
    v = np.asarray(a.X).var(axis=0)[:8]
    assert set(idx) == set(np.argsort(-v)[:2])


def test_front_end_writes_cross_validated_results():
    a = _adata()
    assert quadro(a, **FAST) is None
    score, pred = a.obs["quadro_score"].to_numpy(), a.obs["quadro_pred"].to_numpy()
    assert score.shape == (a.n_obs,) and np.isfinite(score).all()
    assert pred.dtype == bool
    assert np.array_equal(pred, score > 0)  # the decision score's sign is the prediction
    target = a.obs["scontrast_target"].to_numpy()
    u = a.uns["quadro"]
    assert list(u["genes"]) == ["g0", "g1", "g2", "g3", "g4"]
    assert u["cv_error"] == pytest.approx(np.mean(pred != target))
    assert u["cv_error"] < 0.35  # the interaction and the variance change are visible
    assert u["cv_auc"] > 0.7
    cm = u["confusion_matrix"]
    assert cm.sum() == a.n_obs and cm[1].sum() == target.sum()
    assert u["params"]["n_genes"] == 5 and u["params"]["nested"] is True
    # front-end parameters and every model parameter (the estimator's defaults), None stored as None
    p = u["params"]
    assert p["outer_cv"] == 3 and p["cv"] == 3 and "inner_cv" not in p
    assert p["lambda1"] is None and p["lambda2"] == 1.0 and p["lambda_grid"] == [1.0, 0.1]
    defaults = QUADRO().get_params()
    assert {k: p[k] for k in ("estimator", "cv_rule", "psd_norm", "threshold", "patience", "tol")} == \
        {k: defaults[k] for k in ("estimator", "cv_rule", "psd_norm", "threshold", "patience", "tol")}
    assert "random_state" not in p and "n_jobs" not in p
    assert "versions" in u and u["random_state"] == 0
    assert len(u["fold_lambda1"]) == 3 and set(u["fold_lambda2"]) == {1.0}
    assert u["rayleigh_quotient"] > 0 and u["converged"]
    assert abs(u["constraint_residual"]) < 1e-6
    inter, squared = u["interactions"], u["squared"]
    assert len(inter["gene_i"]) == len(inter["weight"]) and len(squared["gene"]) == len(squared["weight"])
    # gene pairs and squared terms apart, together every nonzero entry of Omega's upper triangle
    assert all(i != j for i, j in zip(inter["gene_i"], inter["gene_j"]))
    assert len(inter["gene_i"]) + len(squared["gene"]) == np.count_nonzero(np.triu(u["Omega"])) > 0
    # the strongest term involves the genes that carry the difference
    terms = [(abs(w), {i, j}) for i, j, w in zip(inter["gene_i"], inter["gene_j"], inter["weight"])]
    terms += [(abs(w), {g}) for g, w in zip(squared["gene"], squared["weight"])]
    assert max(terms, key=lambda t: t[0])[1] <= {"g0", "g1", "g2"}
    assert u["Omega"].shape == (5, 5)


def test_front_end_reproducible_copy_and_sparse():
    a = _adata()
    b = quadro(a, copy=True, **FAST)
    assert "quadro_score" not in a.obs  # copy=True leaves the input alone
    c = quadro(_adata(sparse=True), copy=True, **FAST)  # sparse X gives the same answer
    assert np.allclose(b.obs["quadro_score"], c.obs["quadro_score"])
    d = quadro(_adata(), copy=True, **{**FAST, "random_state": 1})
    assert not np.allclose(b.obs["quadro_score"], d.obs["quadro_score"])
    e = quadro(_adata(), copy=True, nested=False, **FAST)
    assert e.uns["quadro"]["cv_error"] < 0.35
    assert len(e.uns["quadro"]["fold_lambda1"]) == 0
    assert np.array_equal(e.obs["quadro_pred"].to_numpy(), e.obs["quadro_score"].to_numpy() > 0)


def test_front_end_errors():
    a = _adata()
    with pytest.raises(ScontrastError, match="sparda_selected"):
        quadro(a, genes="sparda_selected", **FAST)
    with pytest.raises(ScontrastError, match=r"^n_genes: expected"):
        quadro(a, **{**FAST, "n_genes": 1})
    with pytest.raises(ScontrastError, match=r"^outer_cv: expected an integer >= 2"):
        quadro(a, **{**FAST, "outer_cv": 1})
    with pytest.raises(ScontrastError, match=r"^nested: expected one of"):
        quadro(a, **{**FAST, "nested": "yes"})
    # the old name of the model's own folds is refused, naming what the model takes
    with pytest.raises(ScontrastError, match=r"unknown parameter\(s\) \['inner_cv'\]"):
        quadro(a, inner_cv=3, **FAST)
    with pytest.raises(ScontrastError, match=r"^cv: expected"):
        quadro(a, **{**FAST, "cv": 0})
    with pytest.raises(ScontrastError, match=r"^layer: 'counts' is not a layer of the data"):
        quadro(a, layer="counts", **FAST)
    b = a.copy()
    b.obs["scontrast_target"] = b.obs["scontrast_target"].astype(int)
    with pytest.raises(ScontrastError, match="boolean"):
        quadro(b, **FAST)
    with pytest.raises(ScontrastError, match=r"^estimator: expected one of"):
        quadro(a, estimator="mle", **FAST)
    c = a.copy()
    c.X[0, 0] = np.nan
    with pytest.raises(ScontrastError, match=r"^X: contains 1 NaN"):
        quadro(c, **FAST)


def test_delta_round_trip_and_figure(tmp_path):
    a = _adata()
    base = tmp_path / "preprocessed.h5ad"
    io.write_h5ad(a, base)
    before = io.slot_keys(a)
    quadro(a, **FAST)
    path = tmp_path / "quadro.h5ad"
    io.write_h5ad(io.extract_delta(a, before), path)
    back = io.read_h5ad(path)
    assert np.allclose(back.obs["quadro_score"], a.obs["quadro_score"])
    assert list(back.uns["quadro"]["interactions"]["gene_i"]) == list(a.uns["quadro"]["interactions"]["gene_i"])
    assert back.uns["quadro"]["params"]["lambda1"] is None
    # the figure rule's input: annotations of the preprocessed file (no X) + the delta
    annotations = io.read_for_figure(base, path)
    assert annotations.X is None
    fig = plot_quadro(annotations, bins=12)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 3  # scores, ROC, the model's terms
    assert fig.axes[1].get_xlabel().startswith("false positive rate")
    from scontrast.summary import quadro_terms

    n_terms = sum(len(v) for v in quadro_terms(back.uns["quadro"]).values())
    assert fig.axes[2].get_title().startswith(f"the model's terms ({n_terms}") or n_terms == 0
    assert len(fig.axes[0].patches) == 2 * 12  # two histograms of `bins` bars
    fig.savefig(tmp_path / "quadro.png")
    with pytest.raises(ScontrastError, match="quadro_score"):
        plot_quadro(_adata())
    with pytest.raises(ScontrastError, match=r"^bins: expected"):
        plot_quadro(annotations, bins=0)


def test_benchmark_core_runs_on_tiny_sizes():
    res = bench_quadro.run_setting("b", 1, d=6, n=30, n_test=100, quick=True,
                                   only=["QUADRO robust", "LDA (shrinkage)", "QDA (regularised)"])
    assert set(res["errors"]) == {"QUADRO robust", "LDA (shrinkage)", "QDA (regularised)"}
    assert all(0 <= e[0] <= 1 for e in res["errors"].values())


def test_front_end_separates_two_labels_of_another_column():
    a = _adata()
    # a second column: the same classes under other names, plus cells of a third label left out
    phase = np.where(a.obs["scontrast_target"], "S", "G1").astype(object)
    phase[:20] = "G2M"
    a.obs["phase"] = pd.Categorical(phase)
    quadro(a, groupby="phase", labels=["G1", "S"], **FAST)
    score, pred = a.obs["quadro_score"].to_numpy(dtype=float), a.obs["quadro_pred"]
    assert np.isnan(score[:20]).all() and np.isfinite(score[20:]).all()
    assert pred.isna()[:20].all() and set(pred.dropna().unique()) <= {"G1", "S"}
    u = a.uns["quadro"]
    assert list(u["confusion_labels"]) == ["G1", "S"] and u["n_cells"] == {"S": 70, "G1": 70}
    # the same cells with the boolean split give the same model and scores (same seeds, same folds)
    b = _adata()[20:].copy()
    quadro(b, **FAST)
    np.testing.assert_allclose(score[20:], b.obs["quadro_score"].to_numpy())
    assert isinstance(plot_quadro(a), Figure)


def test_front_end_one_class_of_another_column_is_refused():
    a = _adata()
    a.obs["batch"] = "b1"
    with pytest.raises(ScontrastError, match=r"obs\['batch'\] holds 1 labels"):
        quadro(a, groupby="batch", **FAST)
    a.obs["batch"] = np.where(np.arange(a.n_obs) < 3, "b2", "b1")
    with pytest.raises(ScontrastError, match="at least 6 of each"):
        quadro(a, groupby="batch", **FAST)
    with pytest.raises(ScontrastError, match="'nope' is absent"):
        quadro(a, groupby="nope", **FAST)
    with pytest.raises(ScontrastError, match="^labels: needs groupby"):
        quadro(a, labels=["b1", "b2"], **FAST)


def test_front_end_reports_balanced_error_recall_baseline_and_fold_genes():
    """Imbalanced groups (1:5): balanced error, AUC, recalls and the majority baseline lead the summary."""
    a = _adata(n=800, seed=3)
    target = a.obs["scontrast_target"].to_numpy().copy()
    keep = ~target | (np.cumsum(target) <= 80)  # 80 target vs 400 background cells
    a = a[keep].copy()
    target = a.obs["scontrast_target"].to_numpy()
    quadro(a, **{**FAST, "n_genes": None, "n_features": 4})
    u = a.uns["quadro"]
    pred = a.obs["quadro_pred"].to_numpy()
    rec_t, rec_b = float(np.mean(pred[target])), float(np.mean(~pred[~target]))
    assert u["recall"] == {"target": pytest.approx(rec_t), "background": pytest.approx(rec_b)}
    assert u["balanced_error"] == pytest.approx(1 - (rec_t + rec_b) / 2)
    assert u["auc"] == u["cv_auc"]
    assert u["majority_baseline"]["label"] == "background"
    assert u["majority_baseline"]["error"] == pytest.approx(80 / 480)
    assert u["balanced_error"] < 0.35 and rec_t > 0.5  # the rare group is found
    # each outer model kept 4 of the 8 candidates on its own training cells; the final model's genes listed
    assert u["n_candidates"] == 8 and len(u["genes"]) == 4
    folds = u["gene_folds"]
    assert int(np.sum(folds["n_folds"])) == 3 * 4
    assert set(u["genes"]) == set(np.asarray(folds["gene"])[np.asarray(folds["final"])])
    assert {"g0", "g1", "g2"} <= set(u["genes"])  # the genes carrying the difference
    rows = list(summary_rows(a))
    assert rows[0] == ("cross-validated balanced error, cells held out (chance 0.5)", fmt(u["balanced_error"]))
    assert rows[1] == ("cross-validated AUC, cells held out (chance 0.5)", fmt(u["auc"]))
    assert any(label.startswith("cross-validated error (all called background") for label, _ in rows)
    fig = plot_quadro(a)
    assert fig.axes[0].get_title().startswith(f"QUADRO out of fold: balanced error {u['balanced_error']:.3f}, AUC")


def test_front_end_records_a_choice_at_the_end_of_the_path():
    """A path too short for the data (a linear rule, then an almost free Omega): logged in uns."""
    a = _adata()
    quadro(a, **{**FAST, "lambda_grid": [100.0, 1e-3]})
    u = a.uns["quadro"]
    assert u["lambda1"] == 1e-3 and set(u["fold_lambda1"]) == {1e-3}
    assert any(w.startswith("QUADRO: lambda1 chosen at the least penalised end of its path") for w in u["warnings"])
    assert any("lambda1 chosen at the least penalised end" in value for _, value in summary_rows(a)) or \
        len(u["warnings"]) > 0


def test_front_end_two_threads_same_result_and_warnings_recorded():
    """n_jobs=2 (the workflow's threads: outer folds in two threads) gives n_jobs=1's answer and warnings."""
    one, two = _adata(), _adata()
    params = {**FAST, "lambda_grid": [100.0, 1e-3]}
    quadro(one, **params, n_jobs=1)
    quadro(two, **params, n_jobs=2)
    np.testing.assert_allclose(two.obs["quadro_score"], one.obs["quadro_score"], rtol=0,
                               atol=1e-9 * np.abs(one.obs["quadro_score"]).max())
    assert two.uns["quadro"]["balanced_error"] == one.uns["quadro"]["balanced_error"]
    assert list(two.uns["quadro"]["warnings"]) == list(one.uns["quadro"]["warnings"])
    assert any("least penalised end" in w for w in two.uns["quadro"]["warnings"])


def _donor_null(seed, n_donors=8, cells=40, n_genes=10):
    """Donors with their own gene means (sd 1), split 4 vs 4 into target and background: no group effect."""
    from scontrast.design import REPLICATE_KEY

    rng = np.random.default_rng(seed)
    means = rng.normal(0, 1.0, size=(n_donors, n_genes))
    X = np.vstack([m + 0.5 * rng.standard_normal((cells, n_genes)) for m in means]).astype(np.float32)
    donor = np.repeat([f"d{i}" for i in range(n_donors)], cells)
    target = np.isin(donor, [f"d{i}" for i in range(n_donors // 2)])
    obs = pd.DataFrame({"scontrast_target": target, REPLICATE_KEY: pd.Categorical(donor)},
                       index=[f"c{i}" for i in range(donor.size)])
    var = pd.DataFrame({"highly_variable": np.ones(n_genes, bool)}, index=[f"g{i}" for i in range(n_genes)])
    adata = ad.AnnData(X=X, obs=obs, var=var)
    design = {"replicate": "donor", "paired": False, "unit": "replicate", "summary": "replicate: donor, 4 target / 4 "
              "background (unpaired)"}
    return adata, design


def test_folds_hold_out_whole_donors_so_donor_differences_do_not_read_as_separation():
    """Cell-level folds learn the donors (AUC near 1); donor folds score new donors (AUC near chance)."""
    auc_cells, auc_donors = [], []
    for seed in range(6):
        adata, design = _donor_null(seed)
        cells = adata.copy()
        quadro(cells, **FAST)
        auc_cells.append(cells.uns["quadro"]["auc"])
        adata.uns["scontrast"] = {"design": design}
        quadro(adata, **FAST)
        q = adata.uns["quadro"]
        assert q["unit"] == "replicate" and int(q["n_outer_folds"]) == 3
        assert list(q["replicate_scores"]["replicate"]) == [f"d{i}" for i in range(8)]
        assert (q["replicate_scores"]["n_cells"] == 40).all()
        auc_donors.append(q["auc"])
    # measured (seeds 0-5): cells 0.81-0.99, donors 0.15-0.63 (mean 0.44; 8 donors make a noisy AUC)
    assert min(auc_cells) > 0.75 and np.mean(auc_cells) > 0.85
    assert abs(np.mean(auc_donors) - 0.5) < 0.2 and np.mean(auc_cells) - np.mean(auc_donors) > 0.3
    rows = dict(summary_rows(adata))
    assert rows["cross-validation unit"].startswith("whole replicates held out (replicate: donor")
    assert "cross-validated AUC, replicates held out (chance 0.5)" in rows


def test_front_end_max_cells_subsample_recorded_and_bitwise_unchanged_below_it():
    """Above max_cells each fit learns from a stratified subsample (stated in uns and the summary), every cell
    still scored held out; at or below it the result is that of max_cells=None, bit for bit."""
    a = _adata(n=240)
    ref, same, sub = a.copy(), a.copy(), a.copy()
    quadro(ref, **FAST, max_cells=None)
    quadro(same, **FAST, max_cells=240)
    np.testing.assert_array_equal(same.obs["quadro_score"].to_numpy(), ref.obs["quadro_score"].to_numpy())
    np.testing.assert_array_equal(same.uns["quadro"]["Omega"], ref.uns["quadro"]["Omega"])
    assert "subsample" not in same.uns["quadro"] and same.uns["quadro"]["params"]["max_cells"] == 240
    quadro(sub, **FAST, max_cells=90)
    q = sub.uns["quadro"]
    assert dict(q["subsample"], outer_fit_cells=None) == {
        "max_cells": 90, "n_cells": 90, "of": 240, "strata": "group", "outer_fit_cells": None,
        "scored": "every cell by the outer model whose test fold holds it (which never trained on it)"}
    assert list(q["subsample"]["outer_fit_cells"]) == [90, 90, 90]
    assert np.isfinite(sub.obs["quadro_score"].to_numpy()).all()
    rows = dict(summary_rows(sub))
    assert rows["fits on a stratified subsample (max_cells)"] == "90 of 240 cells per fit (group); every cell scored held out"
    assert "fits on a stratified subsample (max_cells)" not in dict(summary_rows(ref))
    with pytest.raises(ScontrastError, match=r"^max_cells: expected an integer >= 2 or None, got 0$"):
        quadro(a.copy(), **FAST, max_cells=0)
