"""Subsets and splits of a study: which cells a study keeps and the contrast each value makes."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..core import ScontrastError

__all__ = ["read_obs", "subset_mask", "split_folders"]


def read_obs(path) -> pd.DataFrame:
    """The cells' annotations (obs) of an ``.h5ad``, never its matrices (a study reads them per split).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> from scontrast.study import read_obs
    >>> adata = ad.AnnData(np.ones((4, 3), np.float32), obs=pd.DataFrame({"donor": ["a", "a", "b", "b"]},
    ...                                                                  index=["c0", "c1", "c2", "c3"]))
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "cells.h5ad")
    ...     adata.write_h5ad(path)
    ...     obs = read_obs(path)                                     # the annotations only
    >>> obs["donor"].tolist()
    ['a', 'a', 'b', 'b']
    """
    import h5py
    from anndata.io import read_elem

    with h5py.File(path, "r") as fh:
        return read_elem(fh["obs"])


def _present(column: pd.Series) -> list[str]:
    return sorted(map(str, pd.unique(column.dropna())))


def subset_mask(obs: pd.DataFrame, subset: Mapping[str, Sequence] | None) -> np.ndarray:
    """Cells (n_obs,) whose value in every column of ``subset`` is one of those listed.

    A column that is absent, or a listed value that no cell has, is a one-line error naming it
    and listing what is present: a typo never silently empties or narrows a study.

    Examples
    --------
    >>> import pandas as pd
    >>> from scontrast.study import subset_mask
    >>> subset_mask(pd.DataFrame({"tissue": ["blood", "lung", "blood"]}), {"tissue": ["blood"]}).tolist()
    [True, False, True]
    """
    keep = np.ones(obs.shape[0], dtype=bool)
    for col, values in (subset or {}).items():
        if col not in obs:
            raise ScontrastError(f"subset: obs column '{col}' is absent; have {list(obs.columns)[:20]}")
        values = [values] if isinstance(values, str) or not isinstance(values, Sequence) else list(values)
        column = obs[col].astype(str)
        present = _present(obs[col])
        missing = [v for v in map(str, values) if v not in present]
        if missing:
            raise ScontrastError(f"subset: {col} has no cell with value(s) {missing}; values present: {present[:30]}")
        keep &= column.isin(list(map(str, values))).to_numpy()
    return keep


def _folder(value: str) -> str:
    """A filesystem-safe folder name for a split value (letters, digits, '_', '.', '-')."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", value).strip("._-")
    return name or "split"


def split_folders(values: Sequence) -> dict[str, str]:
    """``{value: folder}`` for the values of a split column, folders distinct (a suffix when two clash).

    Examples
    --------
    >>> from scontrast.study import split_folders
    >>> split_folders(["CD4 T", "CD4/T", "B cells"])             # safe folder names; a clash gets a suffix
    {'B cells': 'B_cells', 'CD4 T': 'CD4_T', 'CD4/T': 'CD4_T_2'}
    """
    out: dict[str, str] = {}
    taken: set[str] = set()
    for value in sorted(map(str, values)):
        base = _folder(value)
        name, i = base, 2
        while name.lower() in taken:  # case-insensitive file systems would merge two folders
            name, i = f"{base}_{i}", i + 1
        taken.add(name.lower())
        out[value] = name
    return out


def read_subset(path, subset: Mapping[str, Sequence] | None):
    """The cells of an ``.h5ad`` that ``subset`` keeps, in memory: only their rows are read.

    The file is opened backed (:func:`scontrast.io.read_h5ad`), the rows chosen from its obs and
    copied out, and the file closed; a split of a large study never holds the whole matrix.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> from scontrast.study import read_subset
    >>> adata = ad.AnnData(np.arange(12, dtype=np.float32).reshape(4, 3),
    ...                    obs=pd.DataFrame({"donor": ["a", "a", "b", "b"]}, index=["c0", "c1", "c2", "c3"]))
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "cells.h5ad")
    ...     adata.write_h5ad(path)
    ...     sub = read_subset(path, {"donor": ["b"]})              # only donor b's rows are read
    >>> sub.obs_names.tolist(), np.asarray(sub.X)[:, 0].tolist()
    (['c2', 'c3'], [6.0, 9.0])
    """
    from ..io import read_h5ad

    mask = subset_mask(read_obs(path), subset)
    if not mask.any():
        raise ScontrastError(f"subset {dict(subset or {})}: no cell of '{path}' is kept")
    adata = read_h5ad(path, backed=True)
    try:
        return adata[np.flatnonzero(mask)].to_memory()
    finally:
        adata.file.close()
