"""Helpers the AnnData front ends share: the group split, gene sets, provenance."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..io import ScontrastError

TARGET_KEY = "scontrast_target"

_VERSIONED = ("scontrast", "numpy", "scipy", "scikit-learn", "anndata", "scanpy", "pot", "numba")


def package_versions() -> dict[str, str]:
    """Versions of the packages whose numbers a result depends on."""
    out = {}
    for name in _VERSIONED:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def target_mask(adata: ad.AnnData, key: str = TARGET_KEY, min_cells: int = 1) -> np.ndarray:
    """Boolean (n_obs,) mask of target cells from ``adata.obs[key]``.

    Raises when the column is missing, not boolean, or a group has fewer than
    ``min_cells`` cells.
    """
    if key not in adata.obs:
        raise ScontrastError(f"obs['{key}'] is missing: run scontrast.preprocess first or pass the group column")
    col = adata.obs[key]
    if not pd.api.types.is_bool_dtype(col):
        raise ScontrastError(f"obs['{key}'] must be boolean (True = target), got dtype {col.dtype}")
    mask = col.to_numpy(dtype=bool)
    n_t, n_b = int(mask.sum()), int((~mask).sum())
    if min(n_t, n_b) < min_cells:
        raise ScontrastError(
            f"obs['{key}'] has {n_t} target and {n_b} background cells; at least {min_cells} of each are needed"
        )
    return mask


def gene_mask(adata: ad.AnnData, genes: str = "highly_variable") -> np.ndarray:
    """Boolean (n_vars,) mask of the genes a method uses.

    ``genes`` is ``'all'`` or the name of a boolean ``var`` column such as
    ``'highly_variable'`` or ``'sparda_selected'``.
    """
    if genes == "all":
        return np.ones(adata.n_vars, dtype=bool)
    if genes not in adata.var:
        raise ScontrastError(f"gene set '{genes}' is not a var column (have: {list(adata.var.columns)})")
    mask = adata.var[genes].to_numpy(dtype=bool)
    if not mask.any():
        raise ScontrastError(f"gene set var['{genes}'] selects no gene")
    return mask


def group_matrices(
    adata: ad.AnnData,
    genes: str = "highly_variable",
    layer: str | None = None,
    use_rep: str | None = None,
    key: str = TARGET_KEY,
    min_cells: int = 2,
):
    """Split the data into target and background matrices.

    Returns ``(X, Y, mask)``: X (n_target x d) and Y (n_background x d) from
    ``layer`` (``None`` = ``adata.X``) restricted to ``gene_mask(adata, genes)``
    (``mask``, shape (n_vars,)), or from ``obsm[use_rep]`` (then ``mask`` is
    None). Sparse input stays sparse (CSR).
    """
    is_target = target_mask(adata, key, min_cells)
    if use_rep is not None:
        if use_rep not in adata.obsm:
            raise ScontrastError(f"obsm['{use_rep}'] is missing (have: {list(adata.obsm.keys())})")
        M = np.asarray(adata.obsm[use_rep])
        mask = None
    else:
        mask = gene_mask(adata, genes)
        M = adata.X if layer is None else adata.layers[layer]
        if M is None:
            raise ScontrastError("the AnnData has no X matrix")
        M = M[:, mask]
        M = sp.csr_matrix(M) if sp.issparse(M) else np.asarray(M)
    return M[is_target], M[~is_target], mask


def _h5_safe(value: Any) -> Any:
    """Make a parameter value storable in h5ad (which has no None)."""
    if value is None:
        return "None"
    if isinstance(value, dict):
        return {str(k): _h5_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [_h5_safe(v) for v in value]
        return items if all(isinstance(v, (int, float, bool, np.number)) for v in items) else [str(v) for v in items]
    return value


def record_params(adata: ad.AnnData, method: str, params: dict, random_state, **extra) -> dict:
    """Create ``adata.uns[method]`` with params, package versions and seed, plus ``extra``."""
    entry = {
        "params": _h5_safe(dict(params)),
        "versions": package_versions(),
        "random_state": _h5_safe(random_state if isinstance(random_state, (int, np.integer)) or random_state is None
                                 else str(random_state)),
    }
    entry.update(extra)
    adata.uns[method] = entry
    return entry
