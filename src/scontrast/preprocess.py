"""Preprocessing: restrict to the two groups, QC, normalisation, highly variable genes.

``preprocess(adata, groupby=..., target=[...], background=[...])`` returns a new
AnnData holding only target and background cells, with

- ``X``: log-normalised expression (``normalize_total`` + ``log1p`` when the
  input holds raw counts; the input values, checked, when already normalised);
- ``layers['counts']``: the raw counts (raw input only);
- ``obs['scontrast_target']``: True for target cells, False for background;
- ``obs['n_genes_by_counts']``, ``obs['pct_counts_mt']`` and the other scanpy QC metrics;
- ``var['highly_variable']`` and scanpy's HVG statistics;
- ``uns['scontrast']['preprocess']``: parameters, package versions, cell and gene counts.

Sparse input stays sparse.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import anndata as ad
import numpy as np
import pandas as pd
import scanpy as sc
import scipy.sparse as sp

from .core import TARGET_KEY, ScontrastError, package_versions
from .io import check_finite

__all__ = ["preprocess", "validate_counts", "group_labels"]

log = logging.getLogger(__name__)


def _as_list(labels) -> list[str]:
    return [str(x) for x in ([labels] if isinstance(labels, (str, int)) else labels)]


def group_labels(obs: pd.DataFrame, groupby: str, target: Sequence[str], background: Sequence[str]) -> pd.Series:
    """Label each cell 'target', 'background' or NaN (neither).

    Raises when ``groupby`` is not a column, a label is absent, or a label is
    both target and background.
    """
    if groupby not in obs:
        raise ScontrastError(f"obs column '{groupby}' (groupby) is absent; have {list(obs.columns)[:20]}")
    target, background = _as_list(target), _as_list(background)
    both = set(target) & set(background)
    if both:
        raise ScontrastError(f"labels {sorted(both)} are both target and background")
    values = obs[groupby].astype(str)
    present = set(values.unique())
    for role, labels in (("target", target), ("background", background)):
        missing = [x for x in labels if x not in present]
        if missing:
            raise ScontrastError(
                f"{role} label(s) {missing} not found in obs['{groupby}'] (values: {sorted(present)[:20]})"
            )
    out = pd.Series(np.nan, index=obs.index, dtype=object)
    out[values.isin(target)] = "target"
    out[values.isin(background)] = "background"
    return out


def validate_counts(X, name: str = "X") -> None:
    """Raise unless ``X`` looks like raw counts: finite, non-negative integers."""
    check_finite(X, name)
    values = X.data if sp.issparse(X) else np.asarray(X)
    if values.size and values.min() < 0:
        raise ScontrastError(f"{name} has negative values but counts: raw was declared")
    if values.size and not np.array_equal(values, np.round(values)):
        raise ScontrastError(f"{name} has non-integer values but counts: raw was declared (use counts: normalized)")


def _validate_normalized(X, name: str = "X") -> None:
    check_finite(X, name)
    values = X.data if sp.issparse(X) else np.asarray(X)
    if values.size and values.min() < 0:
        raise ScontrastError(
            f"{name} has negative values: give log-normalised (not scaled) expression, e.g. adata.raw or a layer"
        )
    if values.size and np.array_equal(values, np.round(values)) and values.max() > 30:
        raise ScontrastError(
            f"{name} holds integers up to {values.max():g}: it looks like raw counts, declare counts: raw"
        )


def _mito_mask(var_names: pd.Index, prefix: str) -> np.ndarray:
    return np.asarray(var_names.str.upper().str.startswith(prefix.upper()), dtype=bool)


def preprocess(
    adata: ad.AnnData,
    *,
    groupby: str,
    target: Sequence[str] | str,
    background: Sequence[str] | str,
    counts: str = "raw",
    layer: str | None = None,
    min_genes: int = 200,
    min_cells: int = 3,
    max_pct_mito: float = 20.0,
    mito_prefix: str = "MT-",
    n_top_genes: int = 2000,
    hvg_flavor: str = "seurat",
    target_sum: float | None = 1e4,
    min_cells_per_group: int = 10,
) -> ad.AnnData:
    """Prepare ``adata`` (cells x genes) for the contrast of ``target`` vs ``background``.

    Parameters
    ----------
    groupby
        obs column holding the group labels.
    target, background
        Label(s) of ``obs[groupby]`` forming each group; other cells are dropped.
    counts
        ``'raw'`` (X holds UMI counts: QC on counts, then normalise and log) or
        ``'normalized'`` (X is already log-normalised: checked and kept).
    layer
        Read the matrix from ``adata.layers[layer]`` instead of ``X``.
    min_genes, min_cells
        Keep cells with at least ``min_genes`` detected genes and genes detected
        in at least ``min_cells`` of the kept cells.
    max_pct_mito
        Drop cells whose mitochondrial share of counts exceeds this (raw only);
        genes whose name starts with ``mito_prefix`` (any case) are mitochondrial.
    n_top_genes, hvg_flavor
        Highly variable genes (``sc.pp.highly_variable_genes``); all genes are
        flagged when fewer remain.
    target_sum
        ``normalize_total`` target (None = the median of the cells' totals).
    min_cells_per_group
        Fail when a group keeps fewer cells than this after QC.

    Returns
    -------
    AnnData with the target and background cells (n_kept x genes_kept); see the
    module docstring for its slots.
    """
    if counts not in ("raw", "normalized"):
        raise ScontrastError(f"counts must be 'raw' or 'normalized', got {counts!r}")
    if layer is not None and layer not in adata.layers:
        raise ScontrastError(f"layer '{layer}' is absent (have {list(adata.layers.keys())})")
    matrix_name = "X" if layer is None else f"layers['{layer}']"
    labels = group_labels(adata.obs, groupby, target, background)
    keep = labels.notna().to_numpy()
    X = adata.X if layer is None else adata.layers[layer]
    if X is None:
        raise ScontrastError("the AnnData has no X matrix")
    X = X[keep]
    if counts == "raw":
        validate_counts(X, matrix_name)
    else:
        _validate_normalized(X, matrix_name)

    out = ad.AnnData(
        X=sp.csr_matrix(X, dtype=np.float32) if sp.issparse(X) else np.asarray(X, dtype=np.float32),
        obs=adata.obs.loc[keep].copy(),
        var=adata.var[[]].copy(),
    )
    out.obs[TARGET_KEY] = (labels[keep] == "target").to_numpy()
    n_in = {"target": int(out.obs[TARGET_KEY].sum()), "background": int((~out.obs[TARGET_KEY]).sum())}

    mito = _mito_mask(out.var_names, mito_prefix)
    out.var["mt"] = mito
    sc.pp.calculate_qc_metrics(out, qc_vars=["mt"], percent_top=None, log1p=False, inplace=True)
    cell_ok = out.obs["n_genes_by_counts"].to_numpy() >= min_genes
    if counts == "raw" and mito.any():
        cell_ok &= out.obs["pct_counts_mt"].to_numpy() <= max_pct_mito
    out = out[cell_ok].copy()
    if out.n_obs == 0:
        raise ScontrastError(f"no cell has at least min_genes={min_genes} detected genes")
    gene_ok = np.asarray((out.X > 0).sum(axis=0)).ravel() >= min_cells
    if gene_ok.sum() < 2:
        raise ScontrastError(f"fewer than 2 genes are detected in at least min_cells={min_cells} cells")
    out = out[:, gene_ok].copy()
    zero_cells = np.asarray(out.X.sum(axis=1)).ravel() == 0
    if zero_cells.any():
        out = out[~zero_cells].copy()

    n_kept = {"target": int(out.obs[TARGET_KEY].sum()), "background": int((~out.obs[TARGET_KEY]).sum())}
    for group, n in n_kept.items():
        if n < min_cells_per_group:
            raise ScontrastError(
                f"{group} group has {n} cells after QC (of {n_in[group]}), fewer than min_cells_per_group="
                f"{min_cells_per_group}"
            )

    if counts == "raw":
        out.layers["counts"] = out.X.copy()
        sc.pp.normalize_total(out, target_sum=target_sum)
        sc.pp.log1p(out)
        out.uns.pop("log1p", None)

    n_hvg = min(n_top_genes, out.n_vars)
    if n_hvg >= out.n_vars:
        out.var["highly_variable"] = True
    else:
        sc.pp.highly_variable_genes(out, n_top_genes=n_hvg, flavor=hvg_flavor, subset=False)
        out.uns.pop("hvg", None)

    params = dict(groupby=groupby, target=_as_list(target), background=_as_list(background), counts=counts,
                  layer=str(layer), min_genes=min_genes, min_cells=min_cells, max_pct_mito=max_pct_mito,
                  mito_prefix=mito_prefix, n_top_genes=n_top_genes, hvg_flavor=hvg_flavor,
                  target_sum="median" if target_sum is None else target_sum,
                  min_cells_per_group=min_cells_per_group)
    out.uns["scontrast"] = {"preprocess": {
        "params": params,
        "versions": package_versions(),
        "n_cells_in": n_in,
        "n_cells_kept": n_kept,
        "n_genes_in": int(adata.n_vars),
        "n_genes_kept": int(out.n_vars),
        "n_highly_variable": int(out.var["highly_variable"].sum()),
        "n_mito_genes": int(mito.sum()),
    }}
    log.info("kept %s cells and %d genes (%d highly variable)", n_kept, out.n_vars,
             int(out.var["highly_variable"].sum()))
    return out
