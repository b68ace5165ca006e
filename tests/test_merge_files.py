"""merge_files (rule collect) and read_annotations (rule summary): read_merged's answer without reading the matrices."""

import tracemalloc

import anndata as ad
import h5py
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from scontrast import io
from scontrast.core import ScontrastError
from scontrast.merge_files import merge_files, read_annotations, read_merged


def _base(n=300, d=80, density=0.3, seed=0):
    """A preprocessed-like file's content: sparse X and layers['counts'], obs, var, uns."""
    rng = np.random.default_rng(seed)
    counts = sp.random(n, d, density=density, random_state=rng, format="csr", dtype=np.float32)
    counts.data = np.ceil(counts.data * 20)
    X = counts.copy()
    X.data = np.log1p(X.data)
    obs = pd.DataFrame({"scontrast_target": np.arange(n) % 2 == 0, "group": pd.Categorical(np.where(np.arange(n) % 2, "a", "b"))},
                       index=[f"c{i}" for i in range(n)])
    var = pd.DataFrame({"highly_variable": np.arange(d) < d // 2}, index=[f"g{i}" for i in range(d)])
    uns = {"scontrast": {"preprocess": {"n_cells_kept": {"target": n // 2}, "params": {"counts": "raw"}}}}
    return ad.AnnData(X=X, obs=obs, var=var, uns=uns, layers={"counts": counts})


def _deltas(base: ad.AnnData):
    """Two method deltas (obs, var, obsm, varm, uns entries) like the methods' rules write."""
    n, d = base.shape
    rng = np.random.default_rng(1)
    a = ad.AnnData(obs=pd.DataFrame({"quadro_score": rng.standard_normal(n), "quadro_pred": rng.random(n) > 0.5},
                                    index=base.obs_names),
                   var=pd.DataFrame(index=base.var_names),
                   uns={"quadro": {"auc": 0.7, "genes": np.array(["g1", "g2"]), "Omega": rng.standard_normal((2, 2)),
                                   "warnings": np.array(["a warning"])}})
    b = ad.AnnData(obs=pd.DataFrame(index=base.obs_names),
                   var=pd.DataFrame({"sparda_selected": np.arange(d) % 7 == 0, "sparda_weight": rng.standard_normal(d),
                                     "sparda_note": ["x"] * d}, index=base.var_names),
                   obsm={"X_sparda": rng.standard_normal((n, 1))}, varm={"sparda_directions": rng.standard_normal((d, 1))},
                   uns={"sparda": {"p_value": 0.01, "params": {"lam": None, "k": 3}}})
    return a, b


def _write_all(tmp_path, base, deltas):
    io.write_h5ad(base, tmp_path / "preprocessed.h5ad")
    paths = []
    for i, delta in enumerate(deltas):
        paths.append(tmp_path / f"delta{i}.h5ad")
        io.write_h5ad(delta, paths[-1])
    return tmp_path / "preprocessed.h5ad", paths


def _assert_same(a: ad.AnnData, b: ad.AnnData):
    assert (a.X != b.X).nnz == 0 and a.X.dtype == b.X.dtype
    assert set(a.layers) == set(b.layers) and all((a.layers[k] != b.layers[k]).nnz == 0 for k in a.layers)
    pd.testing.assert_frame_equal(a.obs, b.obs)
    pd.testing.assert_frame_equal(a.var, b.var)
    for slot in ("obsm", "varm"):
        assert set(getattr(a, slot)) == set(getattr(b, slot))
        for k in getattr(a, slot):
            assert np.array_equal(getattr(a, slot)[k], getattr(b, slot)[k])
    _same_tree(dict(a.uns), dict(b.uns))


def _same_tree(x, y):
    if isinstance(x, dict):
        assert isinstance(y, dict) and set(x) == set(y), (set(x), set(y))
        for k in x:
            _same_tree(x[k], y[k])
    else:
        assert np.array_equal(np.asarray(x), np.asarray(y)), (x, y)


def test_merged_file_reads_as_read_merged(tmp_path):
    base = _base()
    base_path, paths = _write_all(tmp_path, base, _deltas(base))
    # a method that did not run: recorded, the others kept (what collect does)
    failed = tmp_path / "failed.h5ad"
    io.write_h5ad(io.failure_delta(base_path, "pcpca", "gamma' above its bound"), failed)
    out = tmp_path / "scontrast.h5ad"
    merge_files(base_path, [*paths, failed], out, failures="record")
    got = io.read_h5ad(out)
    want = io.read_merged(base_path, *paths, failed, failures="record")
    _assert_same(got, want)
    assert dict(got.uns["scontrast"]["failed"]) == {"pcpca": "gamma' above its bound"}
    assert got.obs["quadro_score"].dtype == np.float64 and got.var["sparda_note"].dtype == "category"
    # the matrices are the base's bytes: same compression, same storage
    with h5py.File(base_path) as fb, h5py.File(out) as fo:
        for name in ("X/data", "X/indices", "layers/counts/data"):
            assert fo[name].compression == fb[name].compression == "gzip"
            assert fo[name].id.get_storage_size() == fb[name].id.get_storage_size()
    # and the annotations alone, without X or layers, are what the summary reads
    notes = read_annotations(out)
    assert notes.X is None and not notes.layers and notes.shape == got.shape
    pd.testing.assert_frame_equal(notes.obs, got.obs)
    _same_tree(dict(notes.uns), dict(got.uns))
    assert np.array_equal(notes.obsm["X_sparda"], got.obsm["X_sparda"])


def test_merge_never_reads_the_matrices(tmp_path):
    # a base of 30 MB of matrix values: the merge's traced peak stays a small fraction of it
    base = _base(n=4000, d=2000, density=0.25, seed=3)
    matrix_mb = 2 * (base.X.data.nbytes + base.X.indices.nbytes) / 2**20
    base_path, paths = _write_all(tmp_path, base, _deltas(base))
    del base
    tracemalloc.start()
    try:
        merge_files(base_path, paths, tmp_path / "out.h5ad")
        peak_mb = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    assert matrix_mb > 25 and peak_mb < 0.1 * matrix_mb, (peak_mb, matrix_mb)


def test_refusals_are_those_of_merge_and_leave_no_output(tmp_path):
    base = _base()
    base_path, paths = _write_all(tmp_path, base, _deltas(base))
    out = tmp_path / "scontrast.h5ad"
    other = tmp_path / "other.h5ad"
    io.write_h5ad(ad.AnnData(obs=pd.DataFrame({"x": 1.0}, index=[f"c{i}" for i in range(5)]),
                             var=pd.DataFrame(index=base.var_names)), other)
    with pytest.raises(ScontrastError, match="does not have the cells and genes"):
        merge_files(base_path, [*paths, other], out)
    with pytest.raises(ScontrastError, match=r"writes obs\['quadro_pred'\] which"):
        merge_files(base_path, [paths[0], paths[0]], out)
    failed = tmp_path / "failed.h5ad"
    io.write_h5ad(io.failure_delta(base_path, "pcpca", "why"), failed)
    with pytest.raises(io.MethodFailed):
        merge_files(base_path, [failed], out)
    assert not out.exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    text = tmp_path / "x.h5ad"
    text.write_text("not hdf5")
    with pytest.raises(ScontrastError, match="not an .h5ad file"):
        read_annotations(text)


def test_a_delta_replacing_a_base_entry_wins_with_a_warning(tmp_path, caplog):
    base = _base()
    base.uns["quadro"] = {"auc": 0.1}  # a stale result in the base
    base_path, paths = _write_all(tmp_path, base, _deltas(base))
    merge_files(base_path, paths, tmp_path / "out.h5ad")
    assert float(io.read_h5ad(tmp_path / "out.h5ad").uns["quadro"]["auc"]) == 0.7
    assert "replaces uns['quadro'] of the preprocessed data" in caplog.text


def test_read_merged_reads_only_the_layers_a_method_uses(tmp_path):
    base = _base()
    base_path, paths = _write_all(tmp_path, base, _deltas(base))
    want = io.read_merged(base_path, *paths)
    _assert_same(read_merged(base_path, *paths), want)  # all layers: io.read_merged's answer
    only_x = read_merged(base_path, *paths, layers=())
    assert not only_x.layers and (only_x.X != want.X).nnz == 0
    pd.testing.assert_frame_equal(only_x.obs, want.obs)
    _same_tree(dict(only_x.uns), dict(want.uns))
    counts = read_merged(base_path, layers=["counts"])
    assert list(counts.layers) == ["counts"] and (counts.layers["counts"] != want.layers["counts"]).nnz == 0
    with pytest.raises(ScontrastError, match=r"writes obs\['quadro_pred'\] which"):
        read_merged(base_path, paths[0], paths[0], layers=())


def test_read_merged_holds_x_once(tmp_path):
    # io.read_merged holds X, the counts and a copy of both while merging; a method's read holds X
    base = _base(n=4000, d=2000, density=0.25, seed=3)
    x_bytes = base.X.data.nbytes + base.X.indices.nbytes + base.X.indptr.nbytes
    base_path, paths = _write_all(tmp_path, base, _deltas(base))
    del base
    read_merged(base_path, *paths, layers=())  # anndata's readers warmed up before memory is traced
    tracemalloc.start()
    try:
        adata = read_merged(base_path, *paths, layers=())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert adata.X.nnz > 0 and peak < 1.6 * x_bytes, peak / x_bytes
