"""scontrast.io: validated reading, atomic writing, deltas and merging."""

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


def test_merge_rejects_clashes_and_other_cells():
    base = make_counts()
    d = ad.AnnData(obs=base.obs[[]].copy(), var=base.var[[]].copy())
    d.obs["condition"] = "x"
    with pytest.raises(ScontrastError, match="already present"):
        io.merge(base, d, names=["d"])
    other = ad.AnnData(obs=base.obs[[]].iloc[:10].copy(), var=base.var[[]].copy())
    with pytest.raises(ScontrastError, match="cells and genes"):
        io.merge(base, other)


def test_check_finite_sparse_and_dense():
    a = make_counts()
    io.check_finite(a.X, "X")
    a.X.data[3] = np.nan
    with pytest.raises(ScontrastError, match="1 NaN"):
        io.check_finite(a.X, "X")
    with pytest.raises(ScontrastError, match="NaN or infinite"):
        io.check_finite(np.array([[1.0, np.inf]]), "X")
