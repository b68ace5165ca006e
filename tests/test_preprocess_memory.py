"""Preprocessing at scale: the workflow's path holds the input once and never copies X twice.

Same results as ``preprocess``, bitwise; the peak memory (traced) stays within three copies of
the input's sparse matrix, where it was above six.
"""

import tracemalloc
import warnings

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scanpy as sc
import scipy.sparse as sp

from scontrast import io
from scontrast.preprocess import _counts as counts_checks
from scontrast.preprocess import _normalise, _qc, preprocess, preprocess_file

GROUPS = dict(groupby="group", target=["t"], background=["b"], counts="raw", min_genes=50)


def _counts(n=3000, d=2500, density=0.08, seed=0, others=0):
    """Sparse NB-like counts with a few MT- genes and cells QC removes; ``others`` cells of a third group."""
    rng = np.random.default_rng(seed)
    X = sp.random(n + others, d, density=density, random_state=rng, format="csr", dtype=np.float32)
    X.data = np.ceil(rng.gamma(0.8, 3.0, X.nnz)).astype(np.float32)
    X = X.tolil()
    X[:20, :] = 0  # empty cells: below min_genes
    X[:, 5:9] = 0  # genes detected nowhere: below min_cells
    X = sp.csr_matrix(X)
    group = np.r_[np.where(np.arange(n) % 2 == 0, "t", "b"), np.full(others, "o")]
    names = [f"MT-{i}" if i < 10 else f"G{i}" for i in range(d)]
    return ad.AnnData(X=X, obs=pd.DataFrame({"group": group}, index=[f"c{i}" for i in range(n + others)]),
                      var=pd.DataFrame(index=names))


def _same(a: ad.AnnData, b: ad.AnnData):
    for key in ("X", "counts"):
        x, y = (a.X, b.X) if key == "X" else (a.layers[key], b.layers[key])
        assert x.dtype == y.dtype and all(np.array_equal(getattr(x, f), getattr(y, f)) for f in ("data", "indices", "indptr"))
    pd.testing.assert_frame_equal(a.obs, b.obs, check_exact=True)
    pd.testing.assert_frame_equal(a.var, b.var, check_exact=True)


@pytest.mark.parametrize("others", [0, 200])
def test_preprocess_file_is_preprocess_bitwise(tmp_path, monkeypatch, others):
    monkeypatch.setattr(_normalise, "HVG_BLOCK_ENTRIES", 1000)  # the highly variable genes a block at a time
    io.write_h5ad(_counts(others=others), tmp_path / "in.h5ad")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = preprocess(io.read_h5ad(tmp_path / "in.h5ad"), n_top_genes=300, **GROUPS)
        b = preprocess_file(tmp_path / "in.h5ad", n_top_genes=300, **GROUPS)
    assert a.n_obs == 3000 - 20 and a.n_vars == 2500 - 4  # QC removed cells and genes
    _same(a, b)
    # the workflow's result shares X's index arrays with the counts (written, then dropped);
    # the library's does not: changing one matrix in place never changes the other
    assert np.shares_memory(b.X.indices, b.layers["counts"].indices)
    assert not np.shares_memory(a.X.indices, a.layers["counts"].indices)
    with pytest.raises(TypeError):
        preprocess_file(tmp_path / "in.h5ad", n_top_gene=300, **GROUPS)  # the keywords of preprocess only


def test_the_scanpy_internals_the_passes_reuse_are_there():
    # a scanpy without them falls back to its own functions: the bitwise tests below would then
    # compare scanpy with itself, so the supported scanpy range (pyproject.toml) must provide them
    from scanpy.preprocessing import _qc as scanpy_qc
    from scanpy.preprocessing._highly_variable_genes import _get_disp_stats, _get_mean_bins, _subset_genes
    from scanpy.preprocessing._normalization import _normalize_csr
    from scanpy.preprocessing._utils import _get_mean_var

    assert all(map(callable, (_get_disp_stats, _get_mean_bins, _subset_genes, _normalize_csr, _get_mean_var)))
    assert all(callable(getattr(scanpy_qc, name)) for name in ("describe_obs", "_get_mean_var", "axis_sum"))


def test_highly_variable_genes_in_blocks_are_scanpys_bitwise():
    a = _counts(n=800, d=1500, density=0.1, seed=2)
    sc.pp.normalize_total(a, target_sum=1e4)
    sc.pp.log1p(a)
    a.uns.pop("log1p")
    b = a.copy()
    sc.pp.highly_variable_genes(a, n_top_genes=200, flavor="seurat")
    _normalise._seurat_hvg_in_blocks(b, 200)
    blocks = _normalise._entry_blocks(_normalise._entries_per_gene(b.X), b.X.nnz // 8)
    assert len(blocks) >= 8 and np.array_equal(np.concatenate(blocks), np.arange(1500))
    for col in ("highly_variable", "means", "dispersions", "dispersions_norm"):
        assert a.var[col].dtype == b.var[col].dtype
        assert np.array_equal(a.var[col].to_numpy(), b.var[col].to_numpy(), equal_nan=col != "highly_variable"), col


def test_preprocess_file_peak_memory_within_three_copies_of_the_input(tmp_path, monkeypatch):
    # traced (numpy and Python) memory against the input's CSR size: the input read, QC, the counts kept
    # beside X, normalisation and the highly variable genes; 2.8 copies, where preprocess(read_h5ad()) took 7.1
    monkeypatch.setattr(_normalise, "HVG_BLOCK_ENTRIES", 1000)
    io.write_h5ad(_counts(n=400, d=600), tmp_path / "small.h5ad")
    with warnings.catch_warnings():  # scanpy's compiled kernels are made once, before memory is traced
        warnings.simplefilter("ignore")
        preprocess_file(tmp_path / "small.h5ad", n_top_genes=100, **GROUPS)
    src = _counts(n=6000, d=3000, density=0.1, seed=1)
    csr = src.X.data.nbytes + src.X.indices.nbytes + src.X.indptr.nbytes
    io.write_h5ad(src, tmp_path / "in.h5ad")
    del src
    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = preprocess_file(tmp_path / "in.h5ad", n_top_genes=500, **GROUPS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.n_obs == 6000 - 20
    assert peak < 3.0 * csr, f"peak {peak / csr:.2f} x the input's CSR size"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("target_sum", [1e4, None])
def test_passes_in_pieces_are_scanpys_bitwise(monkeypatch, dtype, target_sum):
    # normalisation, QC metrics, detected genes and the integer check a few hundred entries at a time
    # (50k cells: 2**24), against scanpy's and scipy's whole-matrix functions; empty rows and stored zeros included
    monkeypatch.setattr(counts_checks, "PASS_ENTRIES", 777)
    a = _counts(n=500, d=700, density=0.1, seed=3)
    a.X = a.X.astype(dtype)
    a.X.data[::50] = 0  # stored zeros: not detected, dropped by the QC metrics as scanpy drops them
    a.var["mt"] = a.var_names.str.startswith("MT-")
    assert a.X.nnz > 20 * 777 and (np.diff(a.X.indptr) == 0).any()
    X = a.X.copy()
    assert np.array_equal(_qc._cells_detected(X), np.asarray((X > 0).sum(axis=0)).ravel())
    assert counts_checks._is_integer(X.data) and not counts_checks._is_integer(np.r_[X.data, 0.5])
    b = a.copy()
    _qc._qc_metrics(sc, a)
    sc.pp.calculate_qc_metrics(b, qc_vars=["mt"], percent_top=None, log1p=False, inplace=True)
    pd.testing.assert_frame_equal(a.obs, b.obs, check_exact=True)
    pd.testing.assert_frame_equal(a.var, b.var, check_exact=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # both warn of the empty cells
        _normalise._normalize_total(sc, a, target_sum)
        sc.pp.normalize_total(b, target_sum=target_sum)
    assert a.X.dtype == b.X.dtype == dtype
    assert all(np.array_equal(getattr(a.X, f), getattr(b.X, f)) for f in ("data", "indices", "indptr"))
    assert not np.array_equal(a.X.data, X.data[X.data != 0])  # it did divide
