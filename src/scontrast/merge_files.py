"""Merging result files without reading their matrices: the ``collect`` and ``summary`` rules at any size.

``preprocessed.h5ad`` holds the expression matrix and the counts (hundreds of MB to GB);
each method's delta holds a few annotations. :func:`merge_files` writes the merged
``scontrast.h5ad`` as a byte copy of the base file to which the deltas' entries are added
in place: the base's ``X`` and layers are never read, decompressed or recompressed, so the
merge takes seconds and little memory whatever the data's size. :func:`read_annotations`
reads a file's annotations (obs, var, uns, obsm, varm, obsp) without ``X`` or layers, and
:func:`read_merged` a method's input without the layers it does not use.

What is merged, and what is refused or warned, is exactly :func:`scontrast.io.merge`'s
(it runs on the annotations, with placeholders standing in for the layers).
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import anndata as ad
import h5py
import scipy.sparse as sp
from anndata.experimental import read_dispatched
from anndata.io import read_elem, write_elem

from . import io
from ._paths import input_file_problem
from .core import ScontrastError, move_into_place, temporary_beside

__all__ = ["merge_files", "read_annotations", "read_merged", "used_layers"]

_log = logging.getLogger("scontrast.io")

#: annotation slots read by :func:`read_annotations` (every slot but ``X``, ``raw``, ``layers``, ``varp``)
_ANNOTATIONS = ("obs", "var", "uns", "obsm", "varm", "obsp")
#: how the workflow writes every element (:func:`scontrast.io.write_h5ad`)
_DATASET_KWARGS = {"compression": "gzip"}


def _layer_keys(fh: h5py.File) -> list[str]:
    return list(fh["layers"].keys()) if "layers" in fh else []


def read_annotations(path: str | os.PathLike, layers: str = "skip") -> ad.AnnData:
    """The annotations of an ``.h5ad`` file (obs, var, uns, obsm, varm, obsp), never its matrices.

    The file is checked as :func:`scontrast.io.read_h5ad` checks its inputs (a regular HDF5
    file, unique names); its matrices are not (they are not read). ``layers='placeholder'`` gives each layer of the file as an empty
    sparse matrix of the right shape (its key is known, its values are not read); ``'skip'``
    leaves them out. Returns an AnnData with ``X=None``: (n_obs, n_vars) of the file.
    """
    path = Path(path)
    problem = input_file_problem(path)
    if problem is None and not h5py.is_hdf5(path):
        problem = "is not an .h5ad file (not HDF5; truncated or another format?)"
    if problem is not None:
        raise ScontrastError(f"input '{path}' {problem}")
    try:
        with h5py.File(path, "r") as fh:
            parts = {k: read_elem(fh[k]) for k in _ANNOTATIONS if k in fh}
            keys = _layer_keys(fh)
        obs, var = parts.pop("obs"), parts.pop("var")
    except Exception as exc:  # h5py and anndata raise many types for broken files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ScontrastError(f"input '{path}' is not a readable AnnData .h5ad file: {first}") from exc
    for axis, names in (("cell (obs)", obs.index), ("gene (var)", var.index)):
        if not names.is_unique:
            raise ScontrastError(f"input '{path}' has duplicated {axis} names, e.g. {names[names.duplicated()][:3].tolist()}")
    if layers == "placeholder":
        parts["layers"] = {k: _placeholder((len(obs), len(var))) for k in keys}
    return ad.AnnData(obs=obs, var=var, **parts)


def _read_with_layers(path: Path, layers) -> ad.AnnData:
    """The whole AnnData of ``path`` with only the layers named in ``layers`` (None = all)."""
    if layers is None:
        return ad.read_h5ad(path)
    wanted = set(layers)

    def pick(read, elem_name, elem, iospec):
        if elem_name == "/layers":  # the other layers are never read
            return {k: read_elem(elem[k]) for k in elem if k in wanted}
        return read(elem)

    with h5py.File(path, "r") as fh:
        return read_dispatched(fh, pick)


def read_merged(base_path: str | os.PathLike, *delta_paths: str | os.PathLike, layers=None,
                failures: str = "raise") -> ad.AnnData:
    """:func:`scontrast.io.read_merged` reading only the base's layers named in ``layers`` (None = all).

    What a method's rule reads: the base's ``X`` and annotations with the layer the method uses
    (none by default), not the counts it does not use, which as large as ``X`` would double the
    job's memory. The base gets the checks of :func:`scontrast.io.read_h5ad` (a regular HDF5 file
    within the compression bound, unique names, its matrices canonical); the deltas are read by it.
    """
    base_path = Path(base_path)
    problem = input_file_problem(base_path)
    if problem is None and not h5py.is_hdf5(base_path):
        problem = "is not an .h5ad file (not HDF5; truncated or another format?)"
    if problem is not None:
        raise ScontrastError(f"input '{base_path}' {problem}")
    io.check_hdf5_content(base_path)
    try:
        base = _read_with_layers(base_path, layers)
    except Exception as exc:  # anndata raises many types for broken files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ScontrastError(f"input '{base_path}' is not a readable AnnData .h5ad file: {first}") from exc
    for axis, names in (("cell (obs)", base.obs_names), ("gene (var)", base.var_names)):
        if not names.is_unique:
            raise ScontrastError(f"input '{base_path}' has duplicated {axis} names, e.g. {names[names.duplicated()][:3].tolist()}")
    if base.X is not None:
        base.X = io.canonical_matrix(base.X, f"input '{base_path}': X")
    for key in list(base.layers.keys()):
        base.layers[key] = io.canonical_matrix(base.layers[key], f"input '{base_path}': layers['{key}']")
    deltas = [io.read_h5ad(p) for p in delta_paths]
    if not deltas:
        return base
    return _merge_without_copy(base, deltas, [f"'{p}'" for p in delta_paths], failures)


def used_layers(params: dict) -> list[str]:
    """The layers a method's parameters (its config block) make it read: its ``layer``, if one is set."""
    layer = params.get("layer")
    return [] if layer is None else [str(layer)]


def _placeholder(shape) -> sp.csr_matrix:
    return sp.csr_matrix(shape, dtype="float32")


def _merge_without_copy(base: ad.AnnData, deltas: list, names: list[str], failures: str) -> ad.AnnData:
    """``io.merge(base, *deltas)`` without its copy of ``base``'s matrices (they are moved to the result).

    ``io.merge`` copies the base, matrices included (twice the memory of X while it runs); here it
    merges the annotations, with placeholders for X's layers (so that a delta replacing one is
    seen), and the result takes ``base``'s X and the layers no delta replaced.
    """
    X, layers = base.X, dict(base.layers)
    light = ad.AnnData(obs=base.obs, var=base.var, uns=dict(base.uns), obsm=dict(base.obsm), varm=dict(base.varm),
                       obsp=dict(base.obsp), layers={k: _placeholder(base.shape) for k in layers})
    merged = io.merge(light, *deltas, names=names, failures=failures)
    replaced = {k for d in deltas if io.FAILURE_KEY not in d.uns for k in d.layers.keys()}
    merged.X = X
    for key, value in layers.items():
        if key not in replaced:
            merged.layers[key] = value
    return merged


def _written_entries(deltas: list[ad.AnnData]) -> dict[str, set[str]]:
    """The entries the deltas of methods that ran write, per slot (obs/var columns, uns and mapping keys)."""
    out: dict[str, set[str]] = {s: set() for s in ("obs", "var", "obsm", "varm", "obsp", "layers", "uns")}
    for delta in deltas:
        if io.FAILURE_KEY in delta.uns:
            continue
        for slot, keys in io.slot_keys(delta).items():
            out[slot] |= set(keys)
    return out


def _replace(group: h5py.Group, key: str, value) -> None:
    """Write ``value`` as ``group[key]`` the way ``AnnData.write_h5ad`` writes it, replacing what was there."""
    if key in group:
        del group[key]
    write_elem(group, key, value, dataset_kwargs=_DATASET_KWARGS)


def _add_entries(path: Path, merged: ad.AnnData, entries: dict[str, set[str]]) -> None:
    """Write the merged obs and var and every entry of ``entries`` of ``merged`` into the file ``path``."""
    merged.strings_to_categoricals()  # what AnnData.write_h5ad does before writing
    with h5py.File(path, "r+") as fh:
        _replace(fh, "obs", merged.obs)
        _replace(fh, "var", merged.var)
        for slot in ("obsm", "varm", "obsp", "layers", "uns"):
            if not entries[slot]:
                continue
            group = fh[slot] if slot in fh else fh.create_group(slot)
            if slot not in fh or "encoding-type" not in group.attrs:
                group.attrs.update({"encoding-type": "dict", "encoding-version": "0.1.0"})
            mapping = getattr(merged, slot)
            for key in sorted(entries[slot]):
                _replace(group, key, mapping[key])


def merge_files(base_path: str | os.PathLike, delta_paths, out_path: str | os.PathLike, *,
                failures: str = "raise", annotate=None) -> ad.AnnData:
    """Write ``base_path`` merged with the delta files to ``out_path``, without reading the base's matrices.

    The merge is :func:`scontrast.io.merge` of the base's annotations and the deltas (same
    checks, warnings, refusals and ``failures`` handling: a delta recording a method that did
    not run raises :class:`scontrast.io.MethodFailed`, or with ``failures='record'`` is listed
    in ``uns['scontrast']['failed']``). The file is a byte copy of the base with the merged obs
    and var and the deltas' entries written in place, renamed onto ``out_path`` only when
    complete. Read back, it equals ``io.read_merged(base_path, *delta_paths)``. ``annotate``, a
    function of the merged annotations that sets entries of their ``uns['scontrast']`` in place (rule
    collect's verdict, :func:`scontrast.summary.add_verdict`), runs before the write.

    Returns the merged annotations (an AnnData without ``X``; layers as placeholders).
    """
    base_path, out_path = Path(base_path), Path(out_path)
    delta_paths = [Path(p) for p in delta_paths]
    base = read_annotations(base_path, layers="placeholder")
    deltas = [io.read_h5ad(p) for p in delta_paths]
    merged = io.merge(base, *deltas, names=[f"'{p}'" for p in delta_paths], failures=failures)
    entries = _written_entries(deltas)
    if failures == "record" and "failed" in merged.uns.get("scontrast", {}):
        entries["uns"].add("scontrast")
    if annotate is not None:
        annotate(merged)
        entries["uns"].add("scontrast")
    tmp = Path(temporary_beside(out_path, ".tmp"))
    try:
        shutil.copyfile(base_path, tmp)  # the matrices as they are on disk: no read, no recompression
        _add_entries(tmp, merged, entries)
        move_into_place(tmp, out_path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        failure = io.write_failure(out_path, exc) if hasattr(io, "write_failure") else None
        if failure is not None:
            raise failure from exc
        raise
    _log.info("merged %d delta file(s) into a copy of %s", len(delta_paths), base_path)
    return merged
