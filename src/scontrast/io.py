"""Reading, validating, writing and merging the AnnData files of the workflow.

Every method rule writes a *delta*: an AnnData with the same cells and genes as
``preprocessed.h5ad``, no ``X``, and only the slots the method added. ``merge``
joins a base and its deltas back into one object (what the ``collect`` rule and
any rule that needs another method's output do).
"""

from __future__ import annotations

import errno
import logging
import os
import re
from pathlib import Path

import anndata as ad
import h5py
import numpy as np
import scipy.sparse as sp

from ._merge import FAILURE_KEY, MethodFailed, extract_delta, merge, slot_keys
from ._paths import input_file_problem  # the check the workflow makes of every input path
from .core import CannotRun, ScontrastError, move_into_place, temporary_beside

__all__ = [
    "ScontrastError",
    "read_h5ad",
    "write_h5ad",
    "slot_keys",
    "extract_delta",
    "merge",
    "read_merged",
    "read_annotations",
    "gene_moments",
    "read_for_figure",
    "save_figure",
    "write_failure",
    "check_finite",
    "check_sparse_structure",
    "canonical_matrix",
    "check_hdf5_content",
    "hdf5_sizes",
    "failure_delta",
    "CannotRun",
    "MethodFailed",
    "remove_orphans",
    "MAX_COMPRESSION_RATIO",
    "BOMB_FLOOR_BYTES",
    "write_text",
]

_log = logging.getLogger("scontrast.io")

#: An input whose data, once read, would take more than this many times its size on disk
#: (and more than :data:`BOMB_FLOOR_BYTES`) is refused as a possible decompression bomb. Real
#: count matrices compress 2-10x with gzip (a dense matrix of mostly zeros up to ~30x).
MAX_COMPRESSION_RATIO = 100
#: Inputs whose data take less than this once read (256 MiB) are never refused for their ratio.
BOMB_FLOOR_BYTES = 256 * 2**20

def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} TB"  # pragma: no cover


def _walk_hdf5(path: Path):
    """Yield ``(name, dataset)`` for every dataset of the file; refuse external links.

    Soft links are not followed (they point inside the file, at objects visited anyway);
    hard links seen twice (a group linked into itself) are visited once.
    """
    with h5py.File(path, "r") as fh:
        seen = set()
        stack = [fh]
        while stack:
            group = stack.pop()
            for key in group:
                link = group.get(key, getlink=True)
                name = f"{group.name.rstrip('/')}/{key}"
                if isinstance(link, h5py.ExternalLink):
                    raise ScontrastError(
                        f"input '{path}': {name} is an external link to '{link.filename}' ({link.path}); "
                        "refused: an .h5ad must hold its own data"
                    )
                if isinstance(link, h5py.SoftLink):
                    continue
                obj = group.get(key)
                if obj is None or obj.id in seen:
                    continue
                seen.add(obj.id)
                if isinstance(obj, h5py.Group):
                    stack.append(obj)
                elif isinstance(obj, h5py.Dataset):
                    yield name, obj


def _dataset_bytes(ds: h5py.Dataset) -> int:
    """Bytes the dataset takes once read (variable-length entries counted by their pointers).

    A null dataspace (how anndata writes a None in ``uns``) holds nothing: 0, where its ``size``
    is None (which failed the whole content check and so skipped it).
    """
    return 0 if ds.shape is None else int(ds.size) * int(ds.dtype.itemsize)


def check_hdf5_content(path: str | os.PathLike) -> None:
    """Refuse what an untrusted ``.h5ad`` could use to read other files or exhaust memory.

    One line naming the object: external links, datasets with external storage (raw bytes of
    another file) and virtual datasets (data mapped from other files); a dataset, or the whole
    file, whose data once read exceed :data:`MAX_COMPRESSION_RATIO` times their size on disk
    and :data:`BOMB_FLOOR_BYTES` (a gzip bomb, or chunks never written that read as fill value).
    """
    path = Path(path)
    total, largest = 0, ("", 0)
    for name, ds in _walk_hdf5(path):
        if ds.external:
            raise ScontrastError(
                f"input '{path}': dataset {name} keeps its data in the external file '{ds.external[0][0]}'; "
                "refused: an .h5ad must hold its own data"
            )
        if ds.is_virtual:
            raise ScontrastError(
                f"input '{path}': dataset {name} is a virtual dataset (data mapped from other files); "
                "refused: an .h5ad must hold its own data"
            )
        size = _dataset_bytes(ds)
        stored = ds.id.get_storage_size()
        if size > BOMB_FLOOR_BYTES and size > MAX_COMPRESSION_RATIO * max(stored, 1):
            raise ScontrastError(
                f"input '{path}': dataset {name} takes {_human(size)} once read but {_human(stored)} on disk "
                f"(more than {MAX_COMPRESSION_RATIO}x); refused as a possible decompression bomb"
            )
        total += size
        if size > largest[1]:
            largest = (name, size)
    on_disk = path.stat().st_size
    if total > BOMB_FLOOR_BYTES and total > MAX_COMPRESSION_RATIO * max(on_disk, 1):
        raise ScontrastError(
            f"input '{path}': its data take {_human(total)} once read but the file is {_human(on_disk)} "
            f"(more than {MAX_COMPRESSION_RATIO}x; largest: {largest[0]}); refused as a possible decompression bomb"
        )


def hdf5_sizes(path: str | os.PathLike) -> dict:
    """Bytes an ``.h5ad`` file's data take once read (uncompressed).

    ``{"X": ..., "layers": {name: ...}, "total": ...}``: ``X``, each layer apart (a job may read
    some layers and not others: :func:`scontrast.merge_files.read_merged`), and the whole file.
    """
    out = {"X": 0, "layers": {}, "total": 0}
    for name, ds in _walk_hdf5(Path(path)):
        size = _dataset_bytes(ds)
        out["total"] += size
        if name == "/X" or name.startswith("/X/"):
            out["X"] += size
        elif name.startswith("/layers/"):
            key = name.split("/")[2]
            out["layers"][key] = out["layers"].get(key, 0) + size
    return out


def read_h5ad(path: str | os.PathLike, backed: bool = False) -> ad.AnnData:
    """Read an ``.h5ad`` file, failing with a one-line message that names it.

    Checks that the file exists and is a regular, readable file (never opening a FIFO or a
    device, which would block or never end), is an HDF5 AnnData, and has unique cell and
    gene names (duplicates make every later join ambiguous), and that it holds its own
    data within a bounded compression ratio (:func:`check_hdf5_content`). A sparse ``X`` and
    sparse layers are checked (:func:`check_sparse_structure`) and put in canonical form
    (:func:`canonical_matrix`: duplicate entries summed, indices sorted). ``backed``: open
    it read-only without loading ``X`` (close it with ``adata.file.close()``).
    """
    path = _checked_h5ad_path(path)
    try:
        adata = ad.read_h5ad(path, backed="r" if backed else None)
    except Exception as exc:  # anndata raises many types for broken files
        raise _unreadable(path, exc) from exc
    _check_unique_names(adata, path)
    if not backed:  # once, on reading: every later step sees a consistent matrix in canonical form
        _canonical_matrices(adata, path)
    return adata


def read_annotations(path: str | os.PathLike, layers: tuple[str, ...] = ()) -> ad.AnnData:
    """The cells' and genes' annotations and ``uns`` of an ``.h5ad`` (obs, var, uns), and of the
    matrices only the ``layers`` named (those the file holds; checked and made canonical as by
    :func:`read_h5ad`): neither X nor the other layers nor obsm/varm/obsp are read (anndata's
    backed mode would load every layer). The same checks and one-line errors as :func:`read_h5ad`.
    Returns an AnnData without X.
    """
    path = _checked_h5ad_path(path)
    try:
        with h5py.File(path, "r") as fh:
            parts = {key: ad.io.read_elem(fh[key]) for key in ("obs", "var", "uns") if key in fh}
            matrices = {key: ad.io.read_elem(fh["layers"][key]) for key in layers
                        if "layers" in fh and key in fh["layers"]}
        adata = ad.AnnData(obs=parts["obs"], var=parts["var"], uns=parts.get("uns", {}), layers=matrices)
    except Exception as exc:  # a missing obs/var or a damaged element
        raise _unreadable(path, exc) from exc
    _check_unique_names(adata, path)
    _canonical_matrices(adata, path)
    return adata


def x_row_blocks(path: str | os.PathLike, chunk_cells: int = 10000):
    """Read ``X`` of an ``.h5ad`` a block of rows at a time: yields its shape ``(n_obs, n_vars)`` first, then each
    block of ``chunk_cells`` rows as float64 (CSR when ``X`` is sparse). Neither ``X`` whole nor the layers are
    loaded; a missing or damaged ``X`` is a one-line error naming the file."""
    path = _checked_h5ad_path(path)
    try:
        with h5py.File(path, "r") as fh:
            X = fh["X"]
            sparse = isinstance(X, h5py.Group)
            if sparse:
                X = ad.io.sparse_dataset(X)
            yield X.shape
            for start in range(0, X.shape[0], chunk_cells):
                block = X[start:start + chunk_cells]
                yield sp.csr_matrix(block, dtype=np.float64) if sparse else np.asarray(block, dtype=np.float64)
    except Exception as exc:  # a missing or damaged X
        raise _unreadable(path, exc) from exc


def gene_moments(path: str | os.PathLike, chunk_cells: int = 10000) -> tuple[np.ndarray, np.ndarray]:
    """Each gene's mean and variance (ddof 0) over the cells of ``X`` in an ``.h5ad``, reading
    ``chunk_cells`` rows at a time (neither X whole nor the layers are loaded). Returns
    ``(means (genes,), variances (genes,))``, the variances ``E[x^2] - E[x]^2`` clipped at 0."""
    blocks = x_row_blocks(path, chunk_cells)
    n, g = next(blocks)
    total, squares = np.zeros(g), np.zeros(g)
    for block in blocks:
        if sp.issparse(block):
            total += np.asarray(block.sum(axis=0)).ravel()
            squares += np.asarray(block.multiply(block).sum(axis=0)).ravel()
        else:
            total += block.sum(axis=0)
            squares += (block * block).sum(axis=0)
    means = total / max(n, 1)
    return means, np.maximum(squares / max(n, 1) - means**2, 0.0)


def _checked_h5ad_path(path: str | os.PathLike) -> Path:
    """``path`` as a Path once it is a regular, readable HDF5 file within bounded compression (else one line)."""
    path = Path(path)
    problem = input_file_problem(path)
    if problem is not None:
        raise ScontrastError(f"input '{path}' {problem}")
    if not h5py.is_hdf5(path):
        raise ScontrastError(f"input '{path}' is not an .h5ad file (not HDF5; truncated or another format?)")
    try:
        check_hdf5_content(path)
    except ScontrastError:
        raise
    except Exception as exc:  # h5py's errors on a damaged file: anndata's reader names them below
        _log.debug("content check of %s failed: %s", path, exc)
    return path


def _unreadable(path: Path, exc: BaseException) -> ScontrastError:
    """The one-line error for an ``.h5ad`` that anndata cannot read (``exc``: its error)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return ScontrastError(f"input '{path}' is not a readable AnnData .h5ad file: {first}")


def _check_unique_names(adata: ad.AnnData, path: Path) -> None:
    """Duplicated cell or gene names make every later join ambiguous: one line naming the file."""
    for axis, names in (("cell (obs)", adata.obs_names), ("gene (var)", adata.var_names)):
        if not names.is_unique:
            dup = names[names.duplicated()][:3].tolist()
            raise ScontrastError(f"input '{path}' has duplicated {axis} names, e.g. {dup}")


def _errno_of(exc: BaseException) -> int | None:
    """The errno behind a failed write: the exception's, its first argument's, or HDF5's text ("errno = 28")."""
    if isinstance(exc, OSError):
        if exc.errno is not None:
            return exc.errno
        if exc.args and isinstance(exc.args[0], int):
            return exc.args[0]
    found = re.search(r"errno = (\d+)", str(exc))
    return int(found.group(1)) if found else None


def write_failure(path: str | os.PathLike, exc: BaseException) -> ScontrastError | None:
    """One line for a write of ``path`` that the system refused, or None when ``exc`` is no such failure.

    HDF5 reports a full disk in a few hundred characters ("Can't synchronously write data (file
    write failed: time = ..., errno = 28, error message = 'No space left on device', buf = ...");
    the line keeps the cause: ``<path>: could not write (disk full? No space left on device)``.
    """
    if not isinstance(exc, (OSError, RuntimeError)):
        return None
    code = _errno_of(exc)
    if code is None and not isinstance(exc, OSError):
        return None  # a RuntimeError of another kind: not the system's refusal
    if code in (errno.ENOSPC, errno.EDQUOT):
        reason = f"disk full? {os.strerror(code)}"
    elif code is not None:
        reason = os.strerror(code)
    else:
        first = " ".join(str(exc).split())
        reason = first[:120] + ("..." if len(first) > 120 else "")
    return ScontrastError(f"{path}: could not write ({reason})")


def write_h5ad(adata: ad.AnnData, path: str | os.PathLike) -> None:
    """Write ``adata`` atomically: a temporary file in the same folder, then a rename.

    A job killed mid-write therefore never leaves a truncated file under the
    final name. A write the system refuses (a full disk) raises one line naming ``path``
    (:func:`write_failure`).
    """
    path = Path(path)
    tmp = temporary_beside(path, ".tmp")
    try:
        adata.write_h5ad(tmp, compression="gzip")
        move_into_place(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        failure = write_failure(path, exc)
        if failure is not None:
            raise failure from exc
        raise


def check_finite(X, name: str) -> None:
    """Raise if the dense or sparse matrix ``X`` holds NaN or Inf."""
    values = X.data if sp.issparse(X) else np.asarray(X)
    if values.size and not np.isfinite(values).all():
        n_bad = int((~np.isfinite(values)).sum())
        raise ScontrastError(f"{name} contains {n_bad} NaN or infinite values")


def _structure_problem(X) -> str | None:
    """What makes the stored arrays of a CSR or CSC matrix inconsistent with each other, or None.

    numpy on the raw arrays only: scipy's and scanpy's routines trust them, and crafted ones
    fail far from the cause (a column index past the last gene: "Length of values (5001) does
    not match length of index (3000)") or make compiled code read out of bounds (a decreasing
    ``indptr``).
    """
    major, minor = ("row", "column") if X.format == "csr" else ("column", "row")
    n_major, n_minor = X.shape if X.format == "csr" else X.shape[::-1]
    indptr, indices, data = (np.asarray(a) for a in (X.indptr, X.indices, X.data))
    for label, arr in (("indptr", indptr), ("indices", indices)):
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
            return f"{label} is not a vector of integers ({arr.dtype}, {arr.ndim} dimension(s))"
    if data.ndim != 1:
        return f"data is not a vector ({data.ndim} dimensions)"
    if len(indptr) != n_major + 1:
        return f"indptr has {len(indptr)} entries for {n_major} {major}s (needs {n_major + 1})"
    if indptr[0] != 0:
        return f"indptr starts at {indptr[0]}, not 0"
    down = np.flatnonzero(np.diff(indptr) < 0)
    if down.size:
        i = int(down[0])
        return f"indptr decreases at {major} {i} ({indptr[i]}, then {indptr[i + 1]}; {down.size} such step(s))"
    if indptr[-1] != len(indices) or len(data) != len(indices):
        return (f"indptr ends at {indptr[-1]} but {len(indices)} {minor} indices and {len(data)} values are "
                "stored (all three must agree)")
    if len(indices):
        low, high = int(indices.min()), int(indices.max())
        if low < 0:
            return f"{int((indices < 0).sum())} {minor} index(es) are negative (e.g. {low})"
        if high >= n_minor:
            return (f"{int((indices >= n_minor).sum())} {minor} index(es) are out of range (up to {high}; the "
                    f"matrix has {n_minor} {minor}s)")
    return None


def check_sparse_structure(X, name: str) -> None:
    """Raise one line naming ``name`` if the CSR or CSC matrix ``X`` has inconsistent arrays (see below).

    ``indptr`` must have one entry per row (CSC: column) plus one, start at 0, never decrease and
    end at the number of stored entries; ``indices`` and ``data`` must have that many entries,
    and every index must lie within the matrix. Other matrices (dense, other formats) pass.
    """
    if sp.issparse(X) and X.format in ("csr", "csc"):
        problem = _structure_problem(X)
        if problem is not None:
            raise ScontrastError(f"{name}: {problem}: a corrupted sparse matrix")


def canonical_matrix(X, name: str, *, check: bool = True):
    """``X`` in canonical form: duplicate entries summed and indices sorted, in place where it can.

    A duplicate entry (one row and column stored twice, which scipy and anndata keep) is the
    same matrix as their sum, but QC that counts stored entries does not see it so: a count
    split in two counted two genes. Summing keeps the dtype and sparsity (integer sums beyond
    the dtype's range are refused); a matrix already canonical, or not CSR/CSC, is returned
    untouched. ``check``: first :func:`check_sparse_structure` (scipy's routines trust it).
    Shape: any (n x m); returns the same object unless an integer dtype had to widen to sum.
    """
    if not (sp.issparse(X) and X.format in ("csr", "csc")):
        return X
    if check:
        check_sparse_structure(X, name)
    if X.has_canonical_format:
        return X
    stored = X.nnz
    if np.issubdtype(X.dtype, np.integer) and not np.issubdtype(X.dtype, np.int64):
        wide = X.astype(np.int64)
        wide.sum_duplicates()
        info = np.iinfo(X.dtype)
        if wide.nnz and (wide.data.min() < info.min or wide.data.max() > info.max):
            raise ScontrastError(f"{name}: duplicate entries sum beyond the range of its dtype {X.dtype} "
                                 f"(up to {wide.data.max()})")
        X = wide.astype(X.dtype)
    else:
        X.sum_duplicates()  # sorts the indices too
    _log.info("%s: %d duplicate entries summed and indices sorted (the same matrix, in canonical form)",
              name, stored - X.nnz)
    return X


def _canonical_matrices(adata: ad.AnnData, path: Path) -> None:
    """Check and canonicalise, in place, the matrices scontrast reads: ``X`` and every layer."""
    if adata.X is not None:
        X = canonical_matrix(adata.X, f"input '{path}': X")
        if X is not adata.X:
            adata.X = X
    for key in list(adata.layers.keys()):
        layer = canonical_matrix(adata.layers[key], f"input '{path}': layers['{key}']")
        if layer is not adata.layers[key]:
            adata.layers[key] = layer


def failure_delta(base_path: str | os.PathLike, method: str, message: str) -> ad.AnnData:
    """A delta recording that ``method`` did not run on the dataset of ``base_path``, and why.

    It has the base's cells and genes and only ``uns['scontrast_failure'] = {'method',
    'message'}``: :func:`read_merged` refuses it as an input (``MethodFailed``) unless asked
    to record it, as the ``collect`` rule does.
    """
    b = read_h5ad(base_path, backed=True)
    try:
        obs, var = b.obs[[]].copy(), b.var[[]].copy()
    finally:
        b.file.close()
    return ad.AnnData(obs=obs, var=var, uns={FAILURE_KEY: {"method": method, "message": message}})


def read_merged(base_path: str | os.PathLike, *delta_paths: str | os.PathLike, failures: str = "raise") -> ad.AnnData:
    """Read ``base_path`` and join the deltas read from ``delta_paths`` (``failures``: see :func:`merge`)."""
    base = read_h5ad(base_path)
    deltas = [read_h5ad(p) for p in delta_paths]
    return merge(base, *deltas, names=[f"'{p}'" for p in delta_paths], failures=failures)


def read_for_figure(base_path: str | os.PathLike, *delta_paths: str | os.PathLike) -> ad.AnnData:
    """The annotations of ``base_path`` (obs, var, uns: :func:`read_annotations`, no matrix) joined
    with the deltas.

    What a method's figure needs: its own slots and the cells' groups and labels. Neither the
    expression matrix nor the layers of a large dataset are loaded. A delta recording that its
    method did not run raises :class:`MethodFailed` (there is nothing to draw).
    """
    base = read_annotations(base_path)
    deltas = [read_h5ad(p) for p in delta_paths]
    return merge(base, *deltas, names=[f"'{p}'" for p in delta_paths])


def remove_orphans(path: str | os.PathLike) -> list[Path]:
    """Delete the temporary files a killed writer of ``path`` left beside it; return them.

    The writers here (:func:`write_h5ad`, :func:`save_figure`) create ``.<name>.<8 random
    characters><.tmp or the suffix>`` in ``path``'s folder and rename it to ``path``; a job
    killed mid-write (SIGKILL, node failure) leaves that file. Call it only while no other
    process writes ``path`` (a rule's job, under snakemake's lock).
    """
    path = Path(path)
    if not path.parent.is_dir():
        return []
    pattern = re.compile(rf"^\.{re.escape(path.name)}\.[a-z0-9_]{{8}}(\.tmp|{re.escape(path.suffix)})$")
    removed = []
    for p in path.parent.iterdir():
        if pattern.match(p.name) and p.is_file():
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed


def save_figure(fig, path: str | os.PathLike, dpi: int = 120) -> None:
    """Save a matplotlib figure atomically (temporary file, then rename) and close it."""
    import matplotlib.pyplot as plt

    path = Path(path)
    tmp = temporary_beside(path, path.suffix)
    try:
        fig.savefig(tmp, dpi=dpi)
        move_into_place(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        failure = write_failure(path, exc)
        if failure is not None:
            raise failure from exc
        raise
    finally:
        plt.close(fig)


def write_text(text: str, path: str | os.PathLike) -> None:
    """Write ``text`` to ``path`` atomically (temporary file, then rename), as every other output."""
    path = Path(path)
    tmp = temporary_beside(path, ".tmp")
    try:
        Path(tmp).write_text(text)
        move_into_place(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        failure = write_failure(path, exc)
        if failure is not None:
            raise failure from exc
        raise


