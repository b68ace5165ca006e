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
    _raises("counts must be 'raw' or 'normalized'", make_counts(), counts="tpm")
    _raises("layer 'spliced' is absent", make_counts(), layer="spliced")
