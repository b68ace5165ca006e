"""scontrast.io: validated reading, atomic writing, deltas and merging."""

import errno
from pathlib import Path

import anndata as ad
import numpy as np
import pytest

from conftest import make_counts
from scontrast import io
from scontrast.io import ScontrastError


def test_round_trip_and_atomic_write(tmp_path):
    a = make_counts()
    path = tmp_path / "sub" / "a.h5ad"
    io.write_h5ad(a, path)
    b = io.read_h5ad(path)
    assert (b.X != a.X).nnz == 0
    assert b.obs_names.equals(a.obs_names)
    assert [p.name for p in path.parent.iterdir()] == ["a.h5ad"]  # no temporary file left


def test_failed_write_leaves_nothing(tmp_path):
    a = make_counts()
    a.uns["bad"] = object()  # not storable in h5ad
    path = tmp_path / "a.h5ad"
    with pytest.raises(Exception, match="No method registered for writing"):  # anndata's IORegistryError
        io.write_h5ad(a, path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "content, message",
    [(None, "does not exist"), (b"", "not an .h5ad"), (b"hello, not hdf5", "not an .h5ad")],
)
def test_read_bad_files(tmp_path, content, message):
    path = tmp_path / "x.h5ad"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ScontrastError, match=message) as err:
        io.read_h5ad(path)
    assert "x.h5ad" in str(err.value) and "\n" not in str(err.value)


def _read_in_thread(path, seconds=60):
    """io.read_h5ad's exception, failing the test (not hanging it) if the reader blocks."""
    import threading

    out = {}

    def read():
        try:
            io.read_h5ad(path)
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            out["error"] = exc

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"reading {path} blocked"
    return out.get("error")


@pytest.mark.parametrize("kind, reason", [
    ("fifo", "is not a regular file (a FIFO)"),
    ("directory", "is not a regular file (a directory)"),
    ("device", "is not a regular file (a character device)"),
    ("dangling", "is a symbolic link to '"),
])
def test_read_refuses_what_is_not_a_regular_file(tmp_path, kind, reason):
    """Without opening it: a FIFO would block the reader until a writer came, a device never end."""
    import os

    path = tmp_path / "x.h5ad"
    {"fifo": lambda: os.mkfifo(path), "directory": path.mkdir, "device": lambda: path.symlink_to("/dev/zero"),
     "dangling": lambda: path.symlink_to(tmp_path / "gone.h5ad")}[kind]()
    error = _read_in_thread(path)
    assert isinstance(error, ScontrastError)
    assert str(error).startswith(f"input '{path}' {reason}") and "\n" not in str(error)


# What HDF5 says when the disk is full (about 300 characters, through h5py, as an OSError)
HDF5_FULL = ("[Errno 28] Can't synchronously write data (file write failed: time = Wed Dec  2 10:14:03 2026\n, "
             "filename = '/scratch/.a.h5ad.k2j4h5g6.tmp', file descriptor = 3, errno = 28, error message = 'No space "
             "left on device', buf = 0x7f94ca693810, total write size = 79801344, bytes this sub-write = 79801344, "
             "offset = 204800)")


@pytest.mark.parametrize("raised", [
    OSError(errno.ENOSPC),                                   # errno as the only argument
    OSError(errno.ENOSPC, HDF5_FULL),                        # h5py's
    RuntimeError(HDF5_FULL.replace("[Errno 28] ", "")),      # HDF5's text alone, in another type
])
def test_disk_full_write_is_one_line_and_leaves_nothing(tmp_path, monkeypatch, raised):
    def full(self, *args, **kwargs):
        Path(args[0]).write_bytes(b"\x89HDF partial")  # what a full disk leaves of the temporary file
        raise raised

    monkeypatch.setattr(ad.AnnData, "write_h5ad", full)
    path = tmp_path / "out" / "a.h5ad"
    with pytest.raises(ScontrastError) as err:
        io.write_h5ad(make_counts(), path)
    assert str(err.value) == f"{path}: could not write (disk full? No space left on device)"
    assert err.value.__cause__ is raised  # the full text stays in the traceback (the job's log)
    assert list(path.parent.iterdir()) == []


def test_disk_full_figure_and_text_writes_are_one_line(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure()
    monkeypatch.setattr(fig, "savefig", lambda *a, **k: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space")))
    with pytest.raises(ScontrastError, match=r"a\.png: could not write \(disk full\? No space left on device\)$"):
        io.save_figure(fig, tmp_path / "a.png")
    monkeypatch.setattr(Path, "write_text", lambda *a, **k: (_ for _ in ()).throw(OSError(errno.EDQUOT, "quota")))
    with pytest.raises(ScontrastError, match=r"s\.tsv: could not write \(disk full\? Disk quota exceeded\)$"):
        io.write_text("x\n", tmp_path / "s.tsv")
    assert list(tmp_path.iterdir()) == []


def test_other_write_failures_keep_their_type_or_name_their_cause(tmp_path, monkeypatch):
    """A refusal of the system other than a full disk is named as it is; any other error is left alone."""
    monkeypatch.setattr(ad.AnnData, "write_h5ad", lambda self, *a, **k: (_ for _ in ()).throw(
        PermissionError(errno.EACCES, "Permission denied")))
    with pytest.raises(ScontrastError, match=r"a\.h5ad: could not write \(Permission denied\)$"):
        io.write_h5ad(make_counts(), tmp_path / "a.h5ad")
    monkeypatch.setattr(ad.AnnData, "write_h5ad", lambda self, *a, **k: (_ for _ in ()).throw(
        RuntimeError("a bug, not the disk")))
    with pytest.raises(RuntimeError, match="a bug, not the disk"):
        io.write_h5ad(make_counts(), tmp_path / "a.h5ad")


def test_read_truncated_file(tmp_path):
    path = tmp_path / "t.h5ad"
    make_counts().write_h5ad(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ScontrastError, match="t.h5ad"):
        io.read_h5ad(path)


def test_hdf5_but_not_anndata(tmp_path):
    import h5py

    path = tmp_path / "plain.h5ad"
    with h5py.File(path, "w") as f:
        f["numbers"] = np.arange(3)
    with pytest.raises(ScontrastError, match="not a readable AnnData"):
        io.read_h5ad(path)


@pytest.mark.parametrize("axis", ["obs", "var"])
def test_duplicated_names_rejected(tmp_path, axis):
    a = make_counts()
    names = list(getattr(a, f"{axis}_names"))
    names[1] = names[0]
    setattr(a, f"{axis}_names", names)
    path = tmp_path / "dup.h5ad"
    a.write_h5ad(path)
    with pytest.raises(ScontrastError, match="duplicated"):
        io.read_h5ad(path)


def test_delta_holds_only_new_slots_and_merges_back(tmp_path):
    a = make_counts()
    a.obs["old"] = 1
    before = io.slot_keys(a)
    a.obs["score"] = np.arange(a.n_obs, dtype=float)
    a.var["weight"] = np.linspace(0, 1, a.n_vars)
    a.obsm["X_new"] = np.ones((a.n_obs, 2))
    a.varm["loadings"] = np.zeros((a.n_vars, 2))
    a.uns["method"] = {"params": {"k": 1}}
    delta = io.extract_delta(a, before)
    assert delta.X is None
    assert list(delta.obs.columns) == ["score"] and list(delta.var.columns) == ["weight"]
    assert set(delta.obsm) == {"X_new"} and set(delta.uns) == {"method"}
    io.write_h5ad(delta, tmp_path / "d.h5ad")
    base = make_counts()
    base.obs["old"] = 1
    io.write_h5ad(base, tmp_path / "base.h5ad")
    merged = io.read_merged(tmp_path / "base.h5ad", tmp_path / "d.h5ad")
    np.testing.assert_array_equal(merged.obs["score"], a.obs["score"])
    np.testing.assert_array_equal(merged.obsm["X_new"], a.obsm["X_new"])
    assert merged.uns["method"]["params"]["k"] == 1
    assert (merged.X != base.X).nnz == 0


def test_merge_replaces_stale_base_entries_and_refuses_clashes_between_deltas(caplog):
    base = make_counts()
    base.obs["score"] = -1.0  # a stale result of an earlier run
    d = ad.AnnData(obs=base.obs[[]].copy(), var=base.var[[]].copy())
    d.obs["score"] = np.arange(base.n_obs, dtype=float)
    with caplog.at_level("WARNING", logger="scontrast.io"):
        merged = io.merge(base, d, names=["'d.h5ad'"])
    np.testing.assert_array_equal(merged.obs["score"], d.obs["score"])  # this run's result wins
    assert "'d.h5ad' replaces obs['score'] of the preprocessed data" in caplog.text
    assert (base.obs["score"] == -1.0).all()  # the base itself is not modified
    with pytest.raises(ScontrastError, match=r"'e' writes obs\['score'\] which 'd' also writes"):
        io.merge(base, d, d.copy(), names=["'d'", "'e'"])
    other = ad.AnnData(obs=base.obs[[]].iloc[:10].copy(), var=base.var[[]].copy())
    with pytest.raises(ScontrastError, match="cells and genes"):
        io.merge(base, other)


def test_delta_keeps_entries_a_method_replaced(caplog):
    """An input that already holds a method's slots: the method's new values go into the delta."""
    a = make_counts()
    a.obs["score"] = -1.0
    a.var["weight"] = 99.0
    a.obsm["X_m"] = np.zeros((a.n_obs, 2))
    a.uns["m"] = {"stale": True}
    a.obs["same"] = 3.0
    before = io.slot_keys(a)
    a.obs["score"] = np.arange(a.n_obs, dtype=float)  # what a method does: assign its slots anew
    a.var["weight"] = np.linspace(0, 1, a.n_vars)
    a.obsm["X_m"] = np.ones((a.n_obs, 2))
    a.uns["m"] = {"fresh": True}
    a.obs["same"] = 3.0  # rewritten with the same values: nothing to carry
    with caplog.at_level("INFO", logger="scontrast.io"):
        delta = io.extract_delta(a, before)
    assert list(delta.obs.columns) == ["score"] and list(delta.var.columns) == ["weight"]
    assert set(delta.obsm) == {"X_m"} and set(delta.uns) == {"m"}
    assert "obs['score'] was in the input and is replaced" in caplog.text
    stale = make_counts()
    stale.obs["score"] = -1.0
    stale.uns["m"] = {"stale": True}
    merged = io.merge(stale, delta)
    np.testing.assert_array_equal(merged.obs["score"], np.arange(a.n_obs))
    assert dict(merged.uns["m"]) == {"fresh": True}
    np.testing.assert_array_equal(merged.obsm["X_m"], 1.0)


def test_failure_delta_refused_as_input_and_recorded_by_collect(tmp_path):
    base = make_counts()
    base.uns["scontrast"] = {"preprocess": {"n": 1}}
    io.write_h5ad(base, tmp_path / "pre.h5ad")
    io.write_h5ad(io.failure_delta(tmp_path / "pre.h5ad", "quadro", "moments: identical classes"),
                  tmp_path / "quadro.h5ad")
    good = ad.AnnData(obs=base.obs[[]].copy(), var=base.var[[]].copy(), obsm={"X_c": np.ones((base.n_obs, 2))})
    io.write_h5ad(good, tmp_path / "cpca.h5ad")
    with pytest.raises(io.MethodFailed, match="quadro.h5ad' records that quadro did not run on this dataset: "
                                              "moments: identical classes"):
        io.read_merged(tmp_path / "pre.h5ad", tmp_path / "cpca.h5ad", tmp_path / "quadro.h5ad")
    with pytest.raises(io.MethodFailed, match="records that quadro did not run"):
        io.read_for_figure(tmp_path / "pre.h5ad", tmp_path / "quadro.h5ad")
    merged = io.read_merged(tmp_path / "pre.h5ad", tmp_path / "cpca.h5ad", tmp_path / "quadro.h5ad",
                            failures="record")
    np.testing.assert_array_equal(merged.obsm["X_c"], 1.0)  # the other method's result is kept
    assert dict(merged.uns["scontrast"]["failed"]) == {"quadro": "moments: identical classes"}
    assert merged.uns["scontrast"]["preprocess"]["n"] == 1
    assert io.FAILURE_KEY not in merged.uns
    io.write_h5ad(merged, tmp_path / "out.h5ad")  # storable
    assert dict(io.read_h5ad(tmp_path / "out.h5ad").uns["scontrast"]["failed"]) == {"quadro": "moments: identical classes"}


def test_remove_orphans_only_removes_a_writers_temporary_files(tmp_path):
    out = tmp_path / "preprocessed.h5ad"
    fig = tmp_path / "qc.png"
    orphans = [tmp_path / ".preprocessed.h5ad.k2_x9a0b.tmp", tmp_path / ".qc.png.abcdefgh.png"]
    keep = [tmp_path / ".preprocessed.h5ad.notes", tmp_path / ".other.h5ad.k2_x9a0b.tmp", out,
            tmp_path / "preprocessed.h5ad.k2_x9a0b.tmp"]
    for p in orphans + keep:
        p.write_text("x")
    assert sorted(io.remove_orphans(out) + io.remove_orphans(fig)) == sorted(orphans)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in keep)
    assert io.remove_orphans(tmp_path / "nowhere" / "x.h5ad") == []


def test_temporary_files_match_the_orphan_pattern(tmp_path, monkeypatch):
    """What write_h5ad leaves when killed mid-write is what remove_orphans deletes."""
    seen = []
    real = io.temporary_beside
    monkeypatch.setattr(io, "temporary_beside", lambda path, suffix: seen.append(real(path, suffix)) or seen[-1])
    monkeypatch.setattr(ad.AnnData, "write_h5ad", lambda self, path, **kw: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        io.write_h5ad(make_counts(), tmp_path / "a.h5ad")
    Path(seen[0]).write_text("partial")  # as if SIGKILL had stopped the cleanup
    assert io.remove_orphans(tmp_path / "a.h5ad") == [Path(seen[0])]


def test_hdf5_sizes_counts_uncompressed_bytes(tmp_path):
    a = make_counts(n_cells=200, n_genes=100)
    io.write_h5ad(a, tmp_path / "a.h5ad")
    sizes = io.hdf5_sizes(tmp_path / "a.h5ad")
    assert sizes["X"] == a.X.data.nbytes + a.X.indices.nbytes + a.X.indptr.nbytes
    assert sizes["total"] > sizes["X"]
    assert sizes["layers"] == {}


def test_hdf5_sizes_counts_each_layer_apart(tmp_path):
    """Each layer's bytes under its own name (sparse: its three arrays; dense: the array), apart from X."""
    import scipy.sparse as sp

    a = make_counts(n_cells=200, n_genes=100)
    a.layers["counts"] = a.X.copy()
    half = (a.X.astype(np.float64) @ sp.diags((np.arange(100) < 50).astype(np.float64))).tocsr()
    half.eliminate_zeros()
    a.layers["half"] = half  # float64, half the genes: a size of its own
    a.layers["dense"] = np.ones(a.shape, dtype=np.float32)
    io.write_h5ad(a, tmp_path / "a.h5ad")
    sizes = io.hdf5_sizes(tmp_path / "a.h5ad")

    def nbytes(m):
        return m.nbytes if isinstance(m, np.ndarray) else m.data.nbytes + m.indices.nbytes + m.indptr.nbytes

    assert sizes["layers"] == {k: nbytes(a.layers[k]) for k in ("counts", "half", "dense")}
    assert sizes["layers"]["dense"] == 200 * 100 * 4
    assert sizes["X"] == nbytes(a.X)
    assert sizes["total"] > sizes["X"] + sum(sizes["layers"].values())  # obs, var and uns besides


def test_check_finite_sparse_and_dense():
    a = make_counts()
    io.check_finite(a.X, "X")
    a.X.data[3] = np.nan
    with pytest.raises(ScontrastError, match="1 NaN"):
        io.check_finite(a.X, "X")
    with pytest.raises(ScontrastError, match="NaN or infinite"):
        io.check_finite(np.array([[1.0, np.inf]]), "X")


def test_read_annotations_reads_no_matrix(tmp_path):
    """obs, var and uns as read_h5ad gives them, without X, the layers or obsm: a layer anndata
    cannot decode does not matter (anndata's backed read, used before, loaded every layer and failed)."""
    import h5py
    import pandas as pd
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    adata = ad.AnnData(X=sp.random(40, 12, density=0.3, format="csr", random_state=0),
                       obs=pd.DataFrame({"group": pd.Categorical(["a", "b"] * 20), "n": np.arange(40)},
                                        index=[f"c{i}" for i in range(40)]),
                       var=pd.DataFrame({"means": rng.random(12)}, index=[f"g{i}" for i in range(12)]),
                       uns={"scontrast": {"preprocess": {"n": 3, "genes": np.array(["g1", "g2"])}}},
                       layers={"counts": np.ones((40, 12))}, obsm={"X_pca": rng.random((40, 2))})
    path = tmp_path / "pre.h5ad"
    io.write_h5ad(adata, path)
    full = io.read_h5ad(path)
    with h5py.File(path, "r+") as fh:  # a layer no reader can decode
        del fh["layers/counts"]
        fh["layers"].create_group("counts").attrs["encoding-type"] = "no-such-encoding"
    with pytest.raises(io.ScontrastError, match="not a readable AnnData"):
        io.read_h5ad(path, backed=True)
    got = io.read_annotations(path)
    assert got.X is None and not got.layers and not got.obsm
    pd.testing.assert_frame_equal(got.obs, full.obs)
    pd.testing.assert_frame_equal(got.var, full.var)
    assert got.uns["scontrast"]["preprocess"]["n"] == 3
    np.testing.assert_array_equal(got.uns["scontrast"]["preprocess"]["genes"], ["g1", "g2"])
    with pytest.raises(io.ScontrastError, match="nowhere.h5ad"):
        io.read_annotations(tmp_path / "nowhere.h5ad")
    with h5py.File(path, "r+") as fh:
        del fh["obs"]
    with pytest.raises(io.ScontrastError, match="not a readable AnnData .h5ad file"):
        io.read_annotations(path)


@pytest.mark.parametrize("sparse", [True, False])
def test_gene_moments_read_a_block_of_cells_at_a_time(tmp_path, sparse):
    """Means and variances (ddof 0) as numpy's over the whole X, with blocks that do not divide the cells."""
    import scipy.sparse as sp

    rng = np.random.default_rng(1)
    X = rng.poisson(0.7, size=(53, 9)).astype(np.float32) * rng.gamma(2.0, 1.0, 9).astype(np.float32)
    adata = ad.AnnData(X=sp.csr_matrix(X) if sparse else X, layers={"counts": X})
    adata.obs_names = [f"c{i}" for i in range(53)]
    adata.var_names = [f"g{i}" for i in range(9)]
    io.write_h5ad(adata, tmp_path / "x.h5ad")
    means, variances = io.gene_moments(tmp_path / "x.h5ad", chunk_cells=10)
    X64 = X.astype(np.float64)
    np.testing.assert_allclose(means, X64.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(variances, X64.var(axis=0), rtol=1e-9, atol=1e-12 * (X64**2).mean())


def test_preprocess_figure_without_dispersions_draws_the_moments_of_x(tmp_path):
    """All genes kept without scanpy's dispersions: the script's path (annotations + io.gene_moments) draws
    the points the figure would draw from X in memory."""
    import matplotlib

    matplotlib.use("Agg")
    from conftest import make_counts
    from scontrast import pl
    from scontrast.preprocess import preprocess

    pre = preprocess(make_counts(), groupby="condition", target=["disease"], background=["healthy"],
                     min_genes=5, min_cells=2, n_top_genes=10**6, min_cells_per_group=5)  # every gene kept
    assert "dispersions_norm" not in pre.var
    io.write_h5ad(pre, tmp_path / "pre.h5ad")
    light = io.read_for_figure(tmp_path / "pre.h5ad")
    light.var["means"], light.var["variances"] = io.gene_moments(tmp_path / "pre.h5ad", chunk_cells=7)
    panels = [fig.axes[-1] for fig in (pl.preprocess(light), pl.preprocess(io.read_h5ad(tmp_path / "pre.h5ad")))]
    assert [ax.get_ylabel() for ax in panels] == ["variance", "variance"]
    for a, b in zip(panels[0].collections, panels[1].collections):
        # the in-memory path computes in X's float32 (E[x^2] - E[x]^2: ~1e-5 relative), gene_moments in float64
        np.testing.assert_allclose(a.get_offsets(), b.get_offsets(), rtol=1e-4, atol=1e-6)
    X = pre.X.toarray().astype(np.float64)
    np.testing.assert_allclose(light.var["variances"], X.var(axis=0), rtol=1e-9, atol=1e-12 * (X**2).mean())
    matplotlib.pyplot.close("all")


def test_read_annotations_reads_the_layers_named_and_no_other_matrix(tmp_path):
    """The named layers only (canonical, as read_h5ad makes them); X, the other layers and obsm are not read."""
    import pandas as pd
    import scipy.sparse as sp

    counts = sp.csr_matrix((np.array([1.0, 2.0, 3.0]), np.array([2, 0, 1]), np.array([0, 2, 3])), shape=(2, 3))
    adata = ad.AnnData(X=np.zeros((2, 3)), obs=pd.DataFrame(index=["c0", "c1"]), var=pd.DataFrame(index=["a", "b", "c"]),
                       layers={"counts": counts, "other": np.ones((2, 3))}, obsm={"X_pca": np.ones((2, 2))})
    path = tmp_path / "pre.h5ad"
    adata.write_h5ad(path)  # anndata's own writer keeps the unsorted indices of row 0
    got = io.read_annotations(path, layers=("counts", "absent"))
    assert got.X is None and list(got.layers.keys()) == ["counts"] and not got.obsm
    assert got.layers["counts"].has_sorted_indices
    np.testing.assert_array_equal(got.layers["counts"].toarray(), counts.toarray())
    assert not io.read_annotations(path).layers
