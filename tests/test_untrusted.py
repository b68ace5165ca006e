"""Untrusted .h5ad inputs: no reading of other files, no memory beyond a bounded compression ratio.

An HDF5 file can point outside itself (external links, datasets whose bytes live in another
file, virtual datasets) and can decompress to far more than its size (a gzip bomb, chunks never
written that read as their fill value). ``io.read_h5ad`` refuses each with one line naming the
object, before anndata reads anything.
"""

from __future__ import annotations

import h5py
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from conftest import REPO, make_counts
from scontrast import io
from scontrast.io import ScontrastError


@pytest.fixture
def h5ad(tmp_path):
    path = tmp_path / "in.h5ad"
    make_counts().write_h5ad(path)
    return path


def _refused(path, *fragments):
    with pytest.raises(ScontrastError) as err:
        io.read_h5ad(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


def test_plain_files_pass(h5ad):
    io.check_hdf5_content(h5ad)
    for shipped in ("data/wu2020_tcells_200.h5ad", "data/pbmc68k_reduced.h5ad"):
        io.check_hdf5_content(REPO / shipped)


def test_external_storage_is_refused_and_not_read(h5ad, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"password=hunter2\n")
    with h5py.File(h5ad, "a") as fh:
        ds = fh.create_dataset("uns/notes", shape=(secret.stat().st_size,), dtype="u1",
                               external=[(str(secret), 0, secret.stat().st_size)])
        ds.attrs["encoding-type"], ds.attrs["encoding-version"] = "array", "0.2.0"
    # anndata on its own reads the other file's bytes into the result
    import anndata as ad

    assert bytes(ad.read_h5ad(h5ad).uns["notes"]) == secret.read_bytes()
    message = _refused(h5ad, "dataset /uns/notes keeps its data in the external file", "secret.txt", "refused")
    assert "hunter2" not in message


def test_external_link_is_refused(h5ad, tmp_path):
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as fh:
        fh["x"] = np.arange(3)
    with h5py.File(h5ad, "a") as fh:
        fh["uns/linked"] = h5py.ExternalLink(str(other), "/x")
    _refused(h5ad, "/uns/linked is an external link to", "other.h5", "refused")


def test_virtual_dataset_is_refused(h5ad, tmp_path):
    other = tmp_path / "source.h5"
    with h5py.File(other, "w") as fh:
        fh["x"] = np.arange(10.0)
    layout = h5py.VirtualLayout(shape=(10,), dtype="f8")
    layout[:] = h5py.VirtualSource(str(other), "x", shape=(10,))
    with h5py.File(h5ad, "a") as fh:
        fh.create_virtual_dataset("uns/virtual", layout)
    _refused(h5ad, "dataset /uns/virtual is a virtual dataset", "refused")


def test_gzip_bomb_is_refused(h5ad, monkeypatch):
    monkeypatch.setattr(io, "BOMB_FLOOR_BYTES", 2**20)  # the shipped floor is 256 MiB: same rule, small file
    with h5py.File(h5ad, "a") as fh:
        ds = fh.create_dataset("uns/bomb", shape=(2**21,), dtype="f4", chunks=(2**18,), compression="gzip")
        ds[:] = 0.0
    _refused(h5ad, "dataset /uns/bomb takes 8 MB once read but", "more than 100x", "decompression bomb")


def test_a_none_in_uns_does_not_switch_the_check_off(h5ad, monkeypatch):
    """anndata writes None as a null HDF5 dataset (every scontrast result holds some, e.g. a
    parameter left at None); its size is None, which made the whole content check fail and be
    skipped, so a bomb beside it was read."""
    import anndata as ad

    a = ad.read_h5ad(h5ad)
    a.uns["params"] = {"layer": None}
    a.write_h5ad(h5ad)
    with h5py.File(h5ad, "r") as fh:
        assert fh["uns/params/layer"].shape is None  # the null dataspace this test is about
    io.check_hdf5_content(h5ad)
    monkeypatch.setattr(io, "BOMB_FLOOR_BYTES", 2**20)
    with h5py.File(h5ad, "a") as fh:
        ds = fh.create_dataset("uns/bomb", shape=(2**21,), dtype="f4", chunks=(2**18,), compression="gzip")
        ds[:] = 0.0
    _refused(h5ad, "dataset /uns/bomb takes 8 MB once read but", "decompression bomb")


def test_unwritten_chunks_are_refused(h5ad, monkeypatch):
    """A chunked dataset never written takes no space on disk but reads as its fill value."""
    monkeypatch.setattr(io, "BOMB_FLOOR_BYTES", 2**20)
    with h5py.File(h5ad, "a") as fh:
        fh.create_dataset("uns/empty", shape=(2**22,), dtype="f8", chunks=(2**16,), fillvalue=1.0)
    _refused(h5ad, "dataset /uns/empty takes 32 MB once read but 0 B on disk", "decompression bomb")


def test_many_small_bombs_are_refused_as_a_whole(h5ad, monkeypatch):
    monkeypatch.setattr(io, "BOMB_FLOOR_BYTES", 2**20)
    with h5py.File(h5ad, "a") as fh:
        for i in range(12):  # each under the floor, together far beyond 100x the file
            ds = fh.create_dataset(f"uns/piece{i}", shape=(2**18 - 1,), dtype="f4", chunks=(2**16,),
                                   compression="gzip")
            ds[:] = 0.0
    _refused(h5ad, "its data take", "once read but the file is", "largest: /", "decompression bomb")


def test_ratio_below_the_limit_passes(h5ad, monkeypatch):
    monkeypatch.setattr(io, "BOMB_FLOOR_BYTES", 2**20)
    rng = np.random.default_rng(0)
    with h5py.File(h5ad, "a") as fh:  # counts-like values: compress a few times, well under 100x
        fh.create_dataset("uns/counts", data=rng.poisson(0.3, 2**20).astype("f4"), chunks=(2**16,),
                          compression="gzip")
    io.check_hdf5_content(h5ad)


def test_self_linked_group_is_walked_once(h5ad):
    with h5py.File(h5ad, "a") as fh:
        fh["uns/loop"] = fh["uns"]  # a hard link making a cycle
        fh["uns/alias"] = h5py.SoftLink("/X")
    io.check_hdf5_content(h5ad)
    assert io.hdf5_sizes(h5ad)["X"] > 0


# --------------------------------------------------------------------------- crafted sparse matrices
GROUPS = dict(groupby="condition", target=["disease"], background=["healthy"])


def _split_entries(X: sp.csr_matrix) -> sp.csr_matrix:
    """The same matrix with every count >= 2 stored as two entries of its column (half, rest).

    scipy and anndata keep such a matrix as it is; QC that counts stored entries saw two genes.
    """
    coo = X.tocoo()
    split = coo.data >= 2
    half = np.floor(coo.data[split] / 2).astype(coo.data.dtype)
    rows = np.concatenate([coo.row, coo.row[split]])
    cols = np.concatenate([coo.col, coo.col[split]])
    data = np.concatenate([np.where(split, coo.data - np.floor(coo.data / 2), coo.data), half]).astype(X.dtype)
    order = np.lexsort((cols, rows))  # rows in order, each row's columns sorted: only the duplicates differ
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=X.shape[0]))])
    out = sp.csr_matrix((data[order], cols[order], indptr), shape=X.shape)
    assert not out.has_canonical_format and out.nnz > X.nnz
    return out


def _assert_same_qc(out, ref):
    """Same kept cells and genes, QC columns, values and record: bit for bit."""
    assert out.obs_names.equals(ref.obs_names) and out.var_names.equals(ref.var_names)
    pd.testing.assert_frame_equal(out.obs, ref.obs)
    pd.testing.assert_frame_equal(out.var, ref.var)
    for a, b in ((out.X, ref.X), (out.layers["counts"], ref.layers["counts"])):
        assert a.dtype == b.dtype and sp.issparse(a) and a.has_canonical_format
        np.testing.assert_array_equal(a.indptr, b.indptr)
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a.data, b.data)
    for key in ("n_cells_kept", "n_genes_kept"):
        assert out.uns["scontrast"]["preprocess"][key] == ref.uns["scontrast"]["preprocess"][key]


@pytest.fixture
def split_counts():
    """(canonical counts, the same counts with split entries), and QC that the split would fool."""
    ref = make_counts()
    crafted = ref.copy()
    crafted.X = _split_entries(ref.X)
    genes = np.diff(ref.X.indptr)
    # min_genes at the median: counting entries put most cells below it above it
    qc = dict(min_genes=int(np.median(genes)), min_cells=1, n_top_genes=20, min_cells_per_group=5, max_pct_mito=100)
    return ref, crafted, qc


def test_duplicate_entries_give_the_qc_of_the_canonical_matrix(split_counts):
    """Through the library: n_genes_by_counts counts genes, not entries; min_genes keeps the same cells."""
    from scontrast.preprocess import preprocess

    ref, crafted, qc = split_counts
    stored = crafted.X.nnz
    out = preprocess(crafted, **GROUPS, **qc)
    _assert_same_qc(out, preprocess(ref, **GROUPS, **qc))
    assert (out.var["pct_dropout_by_counts"] >= 0).all()
    assert crafted.X.nnz == stored and not crafted.X.has_canonical_format  # the caller's matrix is left as given


def test_duplicate_entries_are_summed_on_reading(split_counts, tmp_path, caplog):
    """Through the io reader: X read is the canonical matrix (dtype, sparsity kept); the QC is the same."""
    from scontrast.preprocess import preprocess

    ref, crafted, qc = split_counts
    crafted.layers["counts"] = crafted.X.copy()
    path = tmp_path / "split.h5ad"
    crafted.write_h5ad(path)
    with h5py.File(path) as fh:  # written as it is
        assert fh["X/data"].shape[0] == crafted.X.nnz > ref.X.nnz
    with caplog.at_level("INFO", logger="scontrast.io"):
        back = io.read_h5ad(path)
    for X in (back.X, back.layers["counts"]):
        assert sp.issparse(X) and X.format == "csr" and X.dtype == ref.X.dtype and X.has_canonical_format
        np.testing.assert_array_equal(X.indices, ref.X.indices)
        np.testing.assert_array_equal(X.data, ref.X.data)
    assert f"X: {crafted.X.nnz - ref.X.nnz} duplicate entries summed" in caplog.text
    _assert_same_qc(preprocess(back, **GROUPS, **qc), preprocess(ref, **GROUPS, **qc))


def test_canonical_input_is_left_untouched(tmp_path, caplog):
    """A canonical matrix is the very object anndata read: nothing copied, nothing logged."""
    a = make_counts()
    a.layers["counts"] = a.X.copy()
    path = tmp_path / "a.h5ad"
    a.write_h5ad(path)
    with caplog.at_level("INFO", logger="scontrast.io"):
        back = io.read_h5ad(path)
    assert "duplicate entries" not in caplog.text
    assert back.X is io.canonical_matrix(back.X, "X")
    np.testing.assert_array_equal(back.X.data, a.X.data)


def test_unsorted_csc_and_integer_counts_are_canonicalised():
    X = sp.csc_matrix((np.array([1, 2, 5], dtype=np.int16), np.array([2, 0, 2]), np.array([0, 2, 3])), shape=(3, 2))
    out = io.canonical_matrix(X, "X")
    assert out.format == "csc" and out.dtype == np.int16 and out.has_canonical_format
    np.testing.assert_array_equal(out.toarray(), [[2, 0], [0, 0], [1, 5]])


def test_integer_duplicates_beyond_the_dtype_are_refused():
    X = sp.csr_matrix((np.array([200, 100], dtype=np.uint8), np.array([0, 0]), np.array([0, 2])), shape=(1, 2))
    with pytest.raises(ScontrastError, match=r"^X: duplicate entries sum beyond the range of its dtype uint8 \(up to 300\)$"):
        io.canonical_matrix(X, "X")


def _corrupt(key: str, edit):
    """An edit of one array of X's CSR group, as a crafted file would hold it."""
    def apply(group):
        values = group[key][:]
        values = edit(values)
        del group[key]
        group[key] = values
    return apply


def _swap(v):
    v[10], v[11] = v[11], v[10]
    return v


def _set(i, value):
    def edit(v):
        v[i] = value
        return v
    return edit


# each: the edit of X's arrays, and what the one-line message names. Before these checks: "Length of
# values (5001) does not match length of index (60)", scipy's "'list' argument must have no negative
# elements", "index 116 is out of bounds", or a crash of the process (free(): invalid next size).
CORRUPTED = {
    "index_out_of_range": (_corrupt("indices", _set(5, 5000)),
                           "X: 1 column index(es) are out of range (up to 5000; the matrix has 60 columns)"),
    "negative_index": (_corrupt("indices", _set(5, -3)), "X: 1 column index(es) are negative (e.g. -3)"),
    "indptr_decreasing": (_corrupt("indptr", _swap), "X: indptr decreases at row 10 ("),
    "indptr_short": (_corrupt("indptr", lambda v: v[:-5]), "X: indptr has 116 entries for 120 rows (needs 121)"),
    "indptr_last": (_corrupt("indptr", lambda v: _set(-1, v[-1] - 7)(v)), "column indices and"),
    "indptr_first": (_corrupt("indptr", _set(0, 3)), "X: indptr starts at 3, not 0"),
    "data_short": (_corrupt("data", lambda v: v[:-4]), "column indices and"),
}


@pytest.mark.parametrize("name", list(CORRUPTED))
def test_corrupted_sparse_matrix_is_named_in_one_line(h5ad, name):
    edit, fragment = CORRUPTED[name]
    with h5py.File(h5ad, "a") as fh:
        edit(fh["X"])
    message = _refused(h5ad, fragment, ": a corrupted sparse matrix")
    assert message.startswith(f"input '{h5ad}': X: ")


@pytest.mark.parametrize("name", ["index_out_of_range", "negative_index", "indptr_decreasing"])
def test_corrupted_matrix_in_memory_is_named_by_preprocess(name):
    """A notebook's AnnData (read by anndata itself): preprocess checks before any scipy routine."""
    from scontrast.preprocess import preprocess

    a = make_counts()
    arrays = {"indices": a.X.indices, "indptr": a.X.indptr}
    key = "indices" if "index" in name else "indptr"
    {"index_out_of_range": _set(5, 5000), "negative_index": _set(5, -3), "indptr_decreasing": _swap}[name](arrays[key])
    with pytest.raises(ScontrastError, match=r"^X: .*: a corrupted sparse matrix$"):
        preprocess(a, **GROUPS, min_genes=1, min_cells=1, n_top_genes=20, min_cells_per_group=5)
