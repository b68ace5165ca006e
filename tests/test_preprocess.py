"""scontrast.preprocess: QC, normalisation, HVGs, the group split, and bad inputs."""

import numpy as np
import pytest
import scanpy as sc
import scipy.sparse as sp

from conftest import make_counts
from scontrast.io import ScontrastError
from scontrast.preprocess import preprocess

KW = dict(min_genes=5, min_cells=2, n_top_genes=20, min_cells_per_group=5)


def test_restricts_to_groups_and_flags_target(counts_adata, groups):
    out = preprocess(counts_adata, **groups, **{**KW, "max_pct_mito": 100})
    cond = out.obs["condition"].astype(str)
    assert set(cond) == {"disease", "healthy"}
    np.testing.assert_array_equal(out.obs["scontrast_target"].to_numpy(), (cond == "disease").to_numpy())
    assert out.obs["scontrast_target"].dtype == bool
    info = out.uns["scontrast"]["preprocess"]
    assert info["n_cells_kept"] == {"target": 40, "background": 40}
    assert info["params"]["groupby"] == "condition" and "numpy" in info["versions"]


def test_normalisation_matches_scanpy_and_keeps_counts(counts_adata, groups):
    out = preprocess(counts_adata, **groups, **KW)
    assert sp.issparse(out.X) and sp.issparse(out.layers["counts"])
    ref = counts_adata[out.obs_names, out.var_names].copy()
    sc.pp.normalize_total(ref, target_sum=1e4)
    sc.pp.log1p(ref)
    np.testing.assert_allclose(out.X.toarray(), ref.X.toarray(), rtol=1e-5, atol=1e-6)
    raw = counts_adata[out.obs_names, out.var_names].X
    assert (out.layers["counts"] != raw).nnz == 0
    # each cell's normalised counts sum to target_sum
    np.testing.assert_allclose(np.expm1(out.X.toarray()).sum(1), 1e4, rtol=1e-4)


def test_dense_input_stays_dense(groups):
    out = preprocess(make_counts(sparse=False), **groups, **KW)
    assert isinstance(out.X, np.ndarray)


def test_hvg_count_and_planted_genes(groups):
    out = preprocess(make_counts(fold=10.0), **groups, **KW)
    hvg = out.var["highly_variable"]
    assert hvg.sum() == 20
    # the genes with a 4x shift in one group are the most variable ones
    assert hvg[[f"gene{i}" for i in range(5)]].all()


def test_qc_filters_cells_and_genes(groups):
    a = make_counts()
    X = a.X.toarray()
    X[0, :] = 0
    X[0, 0] = 1  # cell0 (disease) has one detected gene
    X[3, -3:] = 5000  # cell3 (disease) is mostly mitochondrial
    X[:, 10] = 0
    X[1, 10] = 1  # gene10 detected in one cell
    a.X = sp.csr_matrix(X)
    out = preprocess(a, **groups, **KW)
    assert "cell0" not in out.obs_names and "cell3" not in out.obs_names
    assert "gene10" not in out.var_names
    assert out.uns["scontrast"]["preprocess"]["n_mito_genes"] == 3


def test_normalized_input_is_kept(groups):
    a = make_counts()
    sc.pp.normalize_total(a, target_sum=1e4)
    sc.pp.log1p(a)
    out = preprocess(a, counts="normalized", **groups, **KW)
    ref = a[out.obs_names, out.var_names].X
    np.testing.assert_allclose(out.X.toarray(), ref.toarray(), rtol=1e-6)
    assert "counts" not in out.layers


def test_layer_is_read(groups):
    a = make_counts()
    a.layers["counts"] = a.X.copy()
    a.X = a.X * 0.5  # not counts any more
    out = preprocess(a, layer="counts", **groups, **KW)
    assert (out.layers["counts"] != a[out.obs_names, out.var_names].layers["counts"]).nnz == 0


# --- bad inputs: one-line errors that name the problem -------------------------------------------

def _raises(match, adata, **kw):
    args = dict(groupby="condition", target=["disease"], background=["healthy"], **KW)
    args.update(kw)
    with pytest.raises(ScontrastError, match=match) as err:
        preprocess(adata, **args)
    assert "\n" not in str(err.value)


def test_missing_group_column():
    _raises(r"obs column 'cond' \(groupby\) is absent", make_counts(), groupby="cond")


def test_missing_target_label():
    _raises(r"target label\(s\) \['sick'\] not found", make_counts(), target=["sick"])


def test_missing_background_label():
    _raises(r"background label\(s\) \['ctrl'\] not found", make_counts(), background=["ctrl"])


def test_label_in_both_groups():
    _raises("both target and background", make_counts(), background=["disease"])


def test_too_few_cells_in_a_group():
    _raises("target group has 40 cells after QC .* fewer than min_cells_per_group=50", make_counts(),
            min_cells_per_group=50)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_or_inf(bad):
    a = make_counts()
    a.X.data[0] = bad
    _raises("X contains 1 NaN or infinite values", a)


def test_negative_counts():
    a = make_counts()
    a.X.data[0] = -1
    _raises("X has negative values but counts: raw was declared", a)


def test_non_integer_counts():
    a = make_counts()
    a.X.data[0] = 0.5
    _raises("non-integer values but counts: raw", a)


def test_scaled_data_declared_normalized():
    a = make_counts(sparse=False)
    a.X = a.X - a.X.mean(0)
    _raises("negative values: give log-normalised", a, counts="normalized")


def test_counts_declared_normalized():
    _raises("looks like raw counts", make_counts(n_cells=300), counts="normalized")


def test_all_cells_fail_qc():
    _raises("no cell has at least min_genes=1000", make_counts(), min_genes=1000)


def test_unknown_counts_kind_and_layer():
    _raises("counts must be 'raw', 'tpm' or 'normalized', got 'log'", make_counts(), counts="log")
    _raises("layer 'spliced' is absent", make_counts(), layer="spliced")


# --- input scales: raw counts, TPM/CPM (counts: tpm), log-normalised; advice that fits the values -

def _tpm(a):
    """TPM-like values: each cell's counts scaled to a million, non-integer, max in the thousands."""
    X = a.X.toarray().astype(np.float64)
    X = X / X.sum(1, keepdims=True) * 1e6
    a.X = sp.csr_matrix(X)
    return a


def test_tpm_is_log1p_without_depth_normalisation(groups):
    a = _tpm(make_counts())
    out = preprocess(a, counts="tpm", **groups, **KW)
    ref = a[out.obs_names, out.var_names].X.toarray()
    np.testing.assert_allclose(out.X.toarray(), np.log1p(ref), rtol=1e-6)
    assert "counts" not in out.layers and out.X.dtype == np.float32
    assert out.uns["scontrast"]["preprocess"]["params"]["counts"] == "tpm"
    assert len(out.uns["scontrast"]["preprocess"]["warnings"]) == 0
    # the mitochondrial filter applies to TPM too (a share of the values)
    X = a.X.toarray()
    X[0, -3:] = 5e5  # cell0 (disease): half its values on MT- genes
    a.X = sp.csr_matrix(X)
    out = preprocess(a, counts="tpm", **groups, **KW)
    assert "cell0" not in out.obs_names and out.uns["scontrast"]["preprocess"]["qc_removed"]["reason"][0] == \
        "max_pct_mito"


def test_tpm_declared_raw_suggests_tpm():
    _raises(r"non-integer values but counts: raw was declared \(values up to [0-9.e+]+ look depth-normalised "
            r"\(TPM, CPM, FPKM\): declare counts: tpm\)", _tpm(make_counts()))


def test_log_values_declared_raw_suggest_normalized_or_the_counts_layer():
    a = make_counts()
    a.layers["counts"] = a.X.copy()
    sc.pp.normalize_total(a, target_sum=1e4)
    sc.pp.log1p(a)
    _raises(r"look log-normalised: declare counts: normalized, or read the raw counts with layer: counts\)$", a)


def test_tpm_declared_normalized_is_refused_naming_tpm():
    _raises(r"X has values up to [0-9.e+]+, not a log scale, but counts: normalized was declared .*"
            r"depth-normalised values \(TPM, CPM, FPKM\) are counts: tpm", _tpm(make_counts()), counts="normalized")


def test_log_values_declared_tpm_are_refused_naming_normalized():
    a = make_counts()
    sc.pp.normalize_total(a, target_sum=1e4)
    sc.pp.log1p(a)
    _raises(r"a log scale, but counts: tpm was declared: log-normalised values are counts: normalized", a,
            counts="tpm")


def test_integers_declared_tpm_warn(groups):
    a = make_counts()
    a.X = a.X * 40  # integers up to well above 30: raw counts, most likely
    out = preprocess(a, counts="tpm", **groups, **KW)
    (w,) = out.uns["scontrast"]["preprocess"]["warnings"]
    assert w.startswith("X holds only integers (up to") and "declare counts: raw" in w


def test_values_beyond_float32_are_refused():
    for counts, X in (("raw", 1e39), ("tpm", 1.5e39), ("normalized", 4e38)):
        a = make_counts()
        a.X = a.X.astype(np.float64)
        a.X.data[0] = X
        _raises(r"X has values up to [0-9.e+]+, beyond the float32 range \(3.4e\+38\)", a, counts=counts)


def test_large_integer_counts_stay_exact(groups):
    a = make_counts()
    X = a.X.toarray().astype(np.int64)
    X[0, 0] = 2**24 + 1  # not a float32 number: float32 would round it to 2**24
    X[4, 1] = 123_456_789
    a.X = sp.csr_matrix(X)
    out = preprocess(a, **groups, **KW)
    counts = out.layers["counts"]
    assert counts.dtype == np.float64
    assert counts[out.obs_names.get_loc("cell0"), out.var_names.get_loc("gene0")] == 2**24 + 1
    assert counts[out.obs_names.get_loc("cell4"), out.var_names.get_loc("gene1")] == 123_456_789
    assert out.X.dtype == np.float32
    np.testing.assert_allclose(np.expm1(out.X.toarray().astype(np.float64)).sum(1), 1e4, rtol=1e-4)
    # below 2**24 nothing changes: float32
    assert preprocess(make_counts(), **groups, **KW).layers["counts"].dtype == np.float32
    X[0, 0] = 2**53 + 2
    a.X = sp.csr_matrix(X)
    _raises(r"X holds counts up to [0-9.e+]+, more than 2\*\*53: they cannot be kept exactly", a)



@pytest.mark.parametrize("counts", ["raw", "tpm", "normalized"])
def test_float16_input_gives_the_float32_result_and_no_false_warning(groups, counts):
    """float16 holds these values exactly; the checks compared them with limits cast to float16
    (2**24 and 2**53 overflow it), which recorded "overflow encountered in cast" as a warning."""
    import warnings

    a = make_counts(sparse=False)
    if counts != "raw":
        a.X = (np.log1p(a.X) if counts == "normalized" else a.X * 100.5).astype(np.float32)
    ref = preprocess(a, counts=counts, **groups, **KW)
    x32 = a.X.copy()
    a.X = a.X.astype(np.float16)
    assert counts != "raw" or np.array_equal(a.X, x32)  # small integers: float16 holds them exactly
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a numerical warning would now fail the call
        out = preprocess(a, counts=counts, **groups, **KW)
    assert list(out.uns["scontrast"]["preprocess"]["warnings"]) == list(ref.uns["scontrast"]["preprocess"]["warnings"])
    assert out.X.dtype == np.float32
    if counts == "raw":  # the same integers: the same result
        np.testing.assert_array_equal(out.X, ref.X)


# --- labels: matched against the values present; a missing value is never selected --------------

def test_nan_label_never_selects_missing_values():
    a = make_counts()
    cond = a.obs["condition"].astype(object)
    cond[cond == "other"] = np.nan
    a.obs["condition"] = cond
    _raises(r"target label\(s\) \['nan'\] not found in obs\['condition'\] \(values: \['disease', 'healthy'\]; "
            r"40 cell\(s\) have no value, which no label selects\)", a, target=["nan"])


def test_numeric_group_column(groups):
    a = make_counts()
    a.obs["batch"] = np.where(a.obs["condition"] == "disease", 2020.0,
                              np.where(a.obs["condition"] == "healthy", 2021.0, np.nan))
    out = preprocess(a, groupby="batch", target=["2020"], background=["2021.0"], **KW)
    ref = preprocess(a, **groups, **KW)
    assert out.obs_names.equals(ref.obs_names) and out.uns["scontrast"]["preprocess"]["n_cells_in"] == {
        "target": 40, "background": 40}
    np.testing.assert_array_equal(out.obs["scontrast_target"].to_numpy(), ref.obs["scontrast_target"].to_numpy())


# --- warnings that surface ------------------------------------------------------------------------

def _warnings(out):
    return list(out.uns["scontrast"]["preprocess"]["warnings"])


def test_mito_prefix_matching_no_gene_warns_and_names_unprefixed_genes(groups, caplog):
    a = make_counts()
    a.var_names = [*a.var_names[:-3], "ND1", "COX2", "ATP6"]  # wu2020's names for MT-ND1, MT-CO2, MT-ATP6
    with caplog.at_level("WARNING", logger="scontrast"):
        out = preprocess(a, **groups, **KW)
    (w,) = _warnings(out)
    assert w == ("mito_prefix 'MT-' matches no gene, so max_pct_mito=20 removed no cell; 3 gene(s) have "
                 "mitochondrial names without a prefix (ND1, COX2, ATP6): rename them 'MT-<name>' in var_names "
                 "to filter on them")
    assert any(w in r.getMessage() for r in caplog.records if r.name == "scontrast.preprocess")
    assert out.uns["scontrast"]["preprocess"]["mito_filter"] is False
    # another prefix: name it
    a.var_names = [*a.var_names[:-3], "MT.ND1", "MT.CO2", "MT.ATP6"]
    (w,) = _warnings(preprocess(a, **groups, **KW))
    assert w.endswith("3 genes look mitochondrial with the prefix 'MT.': set mito_prefix: 'MT.'")
    # nothing to say when the filter is off or does not apply
    assert _warnings(preprocess(a, **groups, **{**KW, "max_pct_mito": 100})) == []
    b = make_counts(n_mito=0)
    sc.pp.normalize_total(b, target_sum=1e4)
    sc.pp.log1p(b)
    assert _warnings(preprocess(b, counts="normalized", **groups, **KW)) == []
    # the mitochondrial genes found: no warning
    assert _warnings(preprocess(make_counts(), **groups, **KW)) == []


def test_qc_removing_over_a_fifth_of_a_group_warns(groups):
    a = make_counts()
    X = a.X.toarray()
    disease = np.flatnonzero((a.obs["condition"] == "disease").to_numpy())
    X[disease[:9]] = 0
    X[disease[:9], :2] = 1     # 9 of 40 disease cells with 2 detected genes (< min_genes=5)
    X[disease[9:12], -3:] = 5000  # 3 mostly mitochondrial
    a.X = sp.csr_matrix(X)
    kw = {**KW, "max_pct_mito": 25}  # no cell of the made-up data is above 21% otherwise
    out = preprocess(a, **groups, **kw)
    assert _warnings(out) == ["QC removed 12 of 40 disease (target) cells (30%): 9 below min_genes=5, "
                              "3 above max_pct_mito=25"]
    removed = out.uns["scontrast"]["preprocess"]["qc_removed"]
    assert sorted(removed["reason"]) == ["max_pct_mito"] * 3 + ["min_genes"] * 9 and removed["target"].all()
    np.testing.assert_array_equal(removed["n_genes_by_counts"][removed["reason"] == "min_genes"], 2)
    # 8 of 40 (20%) is not more than a fifth: no warning
    X[disease[8:12]] = a.X[disease[20:24]].toarray()
    a.X = sp.csr_matrix(X)
    assert _warnings(preprocess(a, **groups, **kw)) == []


def test_warnings_reach_the_file_and_the_summary(groups, tmp_path):
    from scontrast import io
    from scontrast.summary import summarise

    a = make_counts(n_mito=0)
    out = preprocess(a, **groups, **KW)
    io.write_h5ad(out, tmp_path / "p.h5ad")
    back = io.read_h5ad(tmp_path / "p.h5ad")
    rows = summarise(back)
    rows = rows[rows["item"] == "warning"]
    assert rows[["method", "value"]].values.tolist() == [["preprocess", _warnings(out)[0]]]
    assert list(back.uns["scontrast"]["preprocess"]["qc_removed"]["cell"]) == []


# --- a finished result fed back in: the steps' own slots are dropped, with a log line ------------

def test_slots_the_methods_write_are_dropped(groups, caplog):
    a = make_counts()
    a.obs["quadro_score"] = 1.0
    a.obs["quadro_pred"] = True
    a.obs["scontrast_target"] = False
    a.obs["kept_column"] = "x"
    a.var["sparda_selected"] = True
    a.obsm["X_cpca_alpha1"] = np.ones((a.n_obs, 2))
    a.varm["PCPCA_W"] = np.ones((a.n_vars, 2))
    a.uns["quadro"] = {"cv_error": 0.5}
    a.uns["scontrast"] = {"preprocess": {"dataset": "old"}}
    with caplog.at_level("INFO", logger="scontrast"):
        out = preprocess(a, **groups, **KW)
    assert "quadro_score" not in out.obs and "quadro_pred" not in out.obs and "kept_column" in out.obs
    assert out.obs["scontrast_target"].sum() == 40
    assert not out.obsm and not out.varm and "quadro" not in out.uns and "dataset" not in out.uns["scontrast"][
        "preprocess"]
    msg = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert msg == ["input slots written by scontrast's own steps are dropped (a finished result fed back in?): "
                   "obs['quadro_pred', 'quadro_score', 'scontrast_target']; var['sparda_selected']; "
                   "obsm['X_cpca_alpha1']; varm['PCPCA_W']; uns['quadro', 'scontrast']"]


# --- the QC figure ---------------------------------------------------------------------------------

def test_qc_figure_labels_thresholds_and_title(groups):
    import matplotlib
    import matplotlib.collections

    matplotlib.use("Agg")
    from scontrast import pl
    from scontrast.pl._style import BACKGROUND_COLOUR, TARGET_COLOUR

    a = make_counts()
    X = a.X.toarray()
    X[0, -3:] = 5000
    a.X = sp.csr_matrix(X)
    out = preprocess(a, **groups, **{**KW, "max_pct_mito": 25})  # removes cell0 only
    out.uns["scontrast"]["preprocess"]["dataset"] = "toy"
    fig = pl.preprocess(out)
    assert fig._suptitle.get_text() == "toy: quality control: disease vs healthy (raw input)"
    axes = fig.axes
    assert [ax.get_ylabel() for ax in axes[:3]] == [
        "detected genes per cell", "total counts per cell", "mitochondrial share of counts (%)"]
    ticks = [t.get_text() for t in axes[0].get_xticklabels()]
    assert ticks == ["healthy\n40 kept", "disease\n39 kept\n1 removed by QC"]
    lines = {ax.get_ylabel(): [ln.get_ydata()[0] for ln in ax.get_lines()] for ax in axes[:3]}
    assert lines["detected genes per cell"] == [5] and lines["mitochondrial share of counts (%)"] == [25]
    bodies = [c for c in axes[0].collections if isinstance(c, matplotlib.collections.PolyCollection)]
    assert [matplotlib.colors.to_hex(b.get_facecolor()[0], keep_alpha=False) for b in bodies] == [
        BACKGROUND_COLOUR, TARGET_COLOUR]
    # log-normalised input: the panels say so, no mitochondrial panel
    b = make_counts()
    sc.pp.normalize_total(b, target_sum=1e4)
    sc.pp.log1p(b)
    fig = pl.preprocess(preprocess(b, counts="normalized", **groups, **KW))
    assert [ax.get_ylabel() for ax in fig.axes[:2]] == ["detected genes per cell",
                                                       "sum of the log-normalised values per cell"]
    assert len(fig.axes) == 3 and fig._suptitle.get_text() == "quality control: disease vs healthy (normalized input)"
    matplotlib.pyplot.close("all")


def test_a_few_fractional_values_declared_raw_are_named_without_scale_advice():
    a = make_counts()
    a.X.data[0] = 0.5
    _raises(r"non-integer values but counts: raw was declared \(1 of \d+ stored values, e.g. 0.5; raw counts are "
            r"integers\)$", a)
