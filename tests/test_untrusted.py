"""Untrusted .h5ad inputs: no reading of other files, no memory beyond a bounded compression ratio.

An HDF5 file can point outside itself (external links, datasets whose bytes live in another
file, virtual datasets) and can decompress to far more than its size (a gzip bomb, chunks never
written that read as their fill value). ``io.read_h5ad`` refuses each with one line naming the
object, before anndata reads anything.
"""

from __future__ import annotations

import h5py
import numpy as np
import pytest

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
