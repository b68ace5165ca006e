"""Reading, validating, writing and merging the AnnData files of the workflow.

Every method rule writes a *delta*: an AnnData with the same cells and genes as
``preprocessed.h5ad``, no ``X``, and only the slots the method added. ``merge``
joins a base and its deltas back into one object (what the ``collect`` rule and
any rule that needs another method's output do).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import anndata as ad
import h5py
import numpy as np
import scipy.sparse as sp

from .core import ScontrastError

__all__ = [
    "ScontrastError",
    "read_h5ad",
    "write_h5ad",
    "slot_keys",
    "extract_delta",
    "merge",
    "read_merged",
    "read_for_figure",
    "save_figure",
    "check_finite",
]

_SLOTS = ("obs", "var", "obsm", "varm", "obsp", "layers", "uns")


def read_h5ad(path: str | os.PathLike, backed: bool = False) -> ad.AnnData:
    """Read an ``.h5ad`` file, failing with a one-line message that names it.

    Checks that the file exists, is an HDF5 AnnData, and has unique cell and
    gene names (duplicates make every later join ambiguous). ``backed``: open it
    read-only without loading ``X`` (close it with ``adata.file.close()``).
    """
    path = Path(path)
    if not path.exists():
        raise ScontrastError(f"input '{path}' does not exist")
    if not path.is_file():
        raise ScontrastError(f"input '{path}' is not a file")
    if not h5py.is_hdf5(path):
        raise ScontrastError(f"input '{path}' is not an .h5ad file (not HDF5; truncated or another format?)")
    try:
        adata = ad.read_h5ad(path, backed="r" if backed else None)
    except Exception as exc:  # anndata raises many types for broken files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ScontrastError(f"input '{path}' is not a readable AnnData .h5ad file: {first}") from exc
    for axis, names in (("cell (obs)", adata.obs_names), ("gene (var)", adata.var_names)):
        if not names.is_unique:
            dup = names[names.duplicated()][:3].tolist()
            raise ScontrastError(f"input '{path}' has duplicated {axis} names, e.g. {dup}")
    return adata


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _temporary_beside(path: Path, suffix: str) -> str:
    """A new empty file next to ``path``, with the mode of any file the user creates there.

    ``mkstemp`` makes it 0600 whatever the umask; results must be readable by whoever the
    user's umask lets read their files (collaborators), like the figures and tables.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())
    return tmp


def write_h5ad(adata: ad.AnnData, path: str | os.PathLike) -> None:
    """Write ``adata`` atomically: a temporary file in the same folder, then a rename.

    A job killed mid-write therefore never leaves a truncated file under the
    final name.
    """
    path = Path(path)
    tmp = _temporary_beside(path, ".tmp")
    try:
        adata.write_h5ad(tmp, compression="gzip")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_finite(X, name: str) -> None:
    """Raise if the dense or sparse matrix ``X`` holds NaN or Inf."""
    values = X.data if sp.issparse(X) else np.asarray(X)
    if values.size and not np.isfinite(values).all():
        n_bad = int((~np.isfinite(values)).sum())
        raise ScontrastError(f"{name} contains {n_bad} NaN or infinite values")


def slot_keys(adata: ad.AnnData) -> dict[str, set[str]]:
    """The keys of every annotation slot, to diff against after a method ran."""
    return {
        "obs": set(adata.obs.columns),
        "var": set(adata.var.columns),
        "obsm": set(adata.obsm.keys()),
        "varm": set(adata.varm.keys()),
        "obsp": set(adata.obsp.keys()),
        "layers": set(adata.layers.keys()),
        "uns": set(adata.uns.keys()),
    }


def extract_delta(adata: ad.AnnData, before: dict[str, set[str]]) -> ad.AnnData:
    """The slots of ``adata`` added since ``before = slot_keys(adata)``.

    Returns an AnnData with ``adata``'s cell and gene index, ``X=None``, and
    only the new obs/var columns, obsm/varm/obsp/layers entries and uns keys.
    """
    now = slot_keys(adata)
    new = {slot: sorted(now[slot] - before[slot]) for slot in _SLOTS}
    return ad.AnnData(
        obs=adata.obs[new["obs"]].copy(),
        var=adata.var[new["var"]].copy(),
        obsm={k: adata.obsm[k] for k in new["obsm"]},
        varm={k: adata.varm[k] for k in new["varm"]},
        obsp={k: adata.obsp[k] for k in new["obsp"]},
        layers={k: adata.layers[k] for k in new["layers"]},
        uns={k: adata.uns[k] for k in new["uns"]},
    )


def merge(base: ad.AnnData, *deltas: ad.AnnData, names: list[str] | None = None) -> ad.AnnData:
    """Join deltas into a copy of ``base``.

    Each delta must have exactly ``base``'s cells and genes in the same order,
    and may not write a slot that ``base`` or an earlier delta already holds.
    ``names`` (one per delta) only serve the error messages.
    """
    out = base.copy()
    names = names or [f"delta {i}" for i in range(len(deltas))]
    for name, delta in zip(names, deltas, strict=True):
        if not (delta.obs_names.equals(out.obs_names) and delta.var_names.equals(out.var_names)):
            raise ScontrastError(f"{name} does not have the cells and genes of the preprocessed data")
        taken = slot_keys(out)
        for slot, keys in slot_keys(delta).items():
            clash = keys & taken[slot]
            if clash:
                raise ScontrastError(f"{name} writes {slot}{sorted(clash)} which is already present")
        for col in delta.obs.columns:
            out.obs[col] = delta.obs[col]
        for col in delta.var.columns:
            out.var[col] = delta.var[col]
        for slot in ("obsm", "varm", "obsp", "layers"):
            getattr(out, slot).update(dict(getattr(delta, slot)))
        out.uns.update(delta.uns)
    return out


def read_merged(base_path: str | os.PathLike, *delta_paths: str | os.PathLike) -> ad.AnnData:
    """Read ``base_path`` and join the deltas read from ``delta_paths``."""
    base = read_h5ad(base_path)
    deltas = [read_h5ad(p) for p in delta_paths]
    return merge(base, *deltas, names=[f"'{p}'" for p in delta_paths])


def read_for_figure(base_path: str | os.PathLike, *delta_paths: str | os.PathLike) -> ad.AnnData:
    """The annotations of ``base_path`` (obs, var, uns; ``X`` is not read) joined with the deltas.

    What a method's figure needs: its own slots and the cells' groups and labels. The
    expression matrix of a large dataset is never loaded.
    """
    b = read_h5ad(base_path, backed=True)
    try:
        base = ad.AnnData(obs=b.obs.copy(), var=b.var.copy(),
                          uns=dict(b.uns))
    finally:
        b.file.close()
    deltas = [read_h5ad(p) for p in delta_paths]
    return merge(base, *deltas, names=[f"'{p}'" for p in delta_paths])


def save_figure(fig, path: str | os.PathLike, dpi: int = 120) -> None:
    """Save a matplotlib figure atomically (temporary file, then rename) and close it."""
    import matplotlib.pyplot as plt

    path = Path(path)
    tmp = _temporary_beside(path, path.suffix)
    try:
        fig.savefig(tmp, dpi=dpi)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        plt.close(fig)
