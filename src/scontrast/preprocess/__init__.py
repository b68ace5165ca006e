"""Preprocessing: restrict to the two groups, QC, normalisation, highly variable genes.

``preprocess(adata, groupby=..., target=[...], background=[...], counts=...)`` returns a new
AnnData holding only target and background cells, with

- ``X``: log-normalised expression: ``normalize_total`` + ``log1p`` for raw counts
  (``counts='raw'``), ``log1p`` alone for depth-normalised values (``counts='tpm'``: TPM,
  CPM, FPKM), the input values, checked, when already log-normalised (``'normalized'``);
- ``layers['counts']``: the raw counts (raw input only; float32, or float64 when a count
  exceeds 2**24 so that every count stays exact);
- ``obs['scontrast_target']``: True for target cells, False for background;
- ``obs['n_genes_by_counts']``, ``obs['pct_counts_mt']`` and the other scanpy QC metrics
  (computed on the input values);
- ``var['highly_variable']`` and scanpy's HVG statistics;
- ``obs['scontrast_group']``: the same split as a categorical ("<target labels> (target)",
  "<background labels> (background)") with ``uns['scontrast_group_colors']``, and
  ``uns['<groupby>_colors']``: scanpy's colours of the group column (its categories in its order;
  a text column is made categorical, as anndata writes it), the figures' red for target and blue
  for background;
- ``uns['scontrast']['preprocess']``: parameters, package versions, cell and gene counts,
  ``warnings`` (one-line messages), ``qc_removed`` (the QC metrics of the removed cells) and
  ``input_annotations`` (what of the input was carried, renamed or not carried).

The user's own annotations of the kept cells and genes are carried: every obs and var column,
every obsm, varm, obsp and varp entry (subset to the kept cells and genes as anndata subsets
them: a graph in obsp keeps the edges between kept cells) and every uns entry (colours of a
categorical column follow its categories). An input name that collides with preprocessing's own
(scanpy's QC metrics and HVG statistics, ``<groupby>_colors``) is kept as ``<name>_input``
(logged, and listed in ``input_annotations['renamed']``): nothing is overwritten. Slots that
scontrast's steps write (``METHOD_SLOTS``: an input that is a finished ``scontrast.h5ad``) are not
carried over, so every result is fresh (logged). The input's layers and ``raw`` are not carried
(each as large as X; logged). Sparse input stays sparse.

The steps live in ``_groups`` (the split), ``_counts`` (what the values are), ``_qc``,
``_normalise`` (normalisation and highly variable genes) and ``_annotations`` (what is carried).
"""

from __future__ import annotations

import copy
import inspect
import logging
import warnings
from collections.abc import Sequence

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..core import TARGET_KEY, ScontrastError, ScontrastWarning, package_versions, result_warnings
from ..design import REPLICATE_KEY, declare_design, undeclared_design_columns
from ..io import canonical_matrix, check_finite, check_sparse_structure, read_h5ad
from ._annotations import METHOD_SLOTS, QC_OBS, _edges, _finish_annotations, _renames, _take, method_slots
from ._counts import _F32_EXACT, _check_range, _validate_normalized, _validate_tpm, _values, validate_counts
from ._groups import _as_list, group_labels
from ._normalise import _normalise_and_flag
from ._qc import _check_group_losses, _quality_control

__all__ = ["preprocess", "preprocess_file", "validate_counts", "group_labels", "method_slots", "METHOD_SLOTS"]

log = logging.getLogger(__name__)


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
    replicate: str | None = None,
    paired: bool = False,
    min_cells_per_replicate: int = 3,
) -> ad.AnnData:
    """Prepare ``adata`` (cells x genes) for the contrast of ``target`` vs ``background``.

    Parameters
    ----------
    groupby
        obs column holding the group labels.
    target, background
        Label(s) of ``obs[groupby]`` forming each group; other cells are dropped.
    counts
        What the matrix holds: ``'raw'`` (UMI or read counts: QC on counts, then
        ``normalize_total`` and ``log1p``), ``'tpm'`` (depth-normalised, not logged: TPM,
        CPM, FPKM: QC on the values, then ``log1p`` without depth normalisation) or
        ``'normalized'`` (already log-normalised: checked and kept). Values that do not
        fit the declaration are refused with the declaration they fit.
    layer
        Read the matrix from ``adata.layers[layer]`` instead of ``X``.
    min_genes, min_cells
        Keep cells with at least ``min_genes`` detected genes and genes detected
        in at least ``min_cells`` of the kept cells.
    max_pct_mito
        Drop cells whose mitochondrial share of the values exceeds this (raw and tpm);
        genes whose name starts with ``mito_prefix`` (any case) are mitochondrial.
    n_top_genes, hvg_flavor
        Highly variable genes (``sc.pp.highly_variable_genes``); all genes are
        flagged when fewer remain.
    target_sum
        ``normalize_total`` target for raw counts (None = the median of the cells' totals).
    min_cells_per_group
        Fail when a group keeps fewer cells than this after QC.
    replicate
        obs column naming each cell's replicate (donor, patient, sample), or None. Declared,
        every p-value, error and enrichment of the methods is computed per replicate (see
        :mod:`scontrast.design`); undeclared while a column named like one (``patient``,
        ``donor``, ``sample``...) takes >= 2 values in both groups, a warning names it.
    paired
        Each replicate gives cells to both groups (tumour and normal tissue of one patient).
        Unpaired, a replicate with cells in both groups is refused; paired, a replicate
        missing a group is dropped with a warning.
    min_cells_per_replicate
        A replicate with fewer kept cells than this in a group is dropped with a warning.

    Returns
    -------
    AnnData with the target and background cells (n_kept x genes_kept); see the
    module docstring for its slots. What the user must know (the mitochondrial prefix
    matching no gene, QC removing more than 20% of a group, integers declared tpm) is
    warned (``ScontrastWarning``), logged and kept in
    ``uns['scontrast']['preprocess']['warnings']``.

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> import scontrast as sct
    >>> rng = np.random.default_rng(0)
    >>> counts = rng.poisson(2.0, size=(60, 300)).astype(np.float32)
    >>> obs = pd.DataFrame({"condition": ["disease"] * 30 + ["healthy"] * 30}, index=[f"c{i}" for i in range(60)])
    >>> adata = ad.AnnData(counts, obs=obs, var=pd.DataFrame(index=[f"g{i}" for i in range(300)]))
    >>> pre = sct.preprocess(adata, groupby="condition", target=["disease"], background=["healthy"],
    ...                      counts="raw", min_genes=10, n_top_genes=50)
    >>> int(pre.obs["scontrast_target"].sum()), int(pre.var["highly_variable"].sum())
    (30, 50)
    >>> "counts" in pre.layers                             # the raw counts are kept beside log1p(normalised)
    True
    """
    return _recorded([adata], False, groupby=groupby, target=target, background=background, counts=counts,
                     layer=layer, min_genes=min_genes, min_cells=min_cells, max_pct_mito=max_pct_mito,
                     mito_prefix=mito_prefix, n_top_genes=n_top_genes, hvg_flavor=hvg_flavor, target_sum=target_sum,
                     min_cells_per_group=min_cells_per_group, replicate=replicate, paired=paired,
                     min_cells_per_replicate=min_cells_per_replicate)


def preprocess_file(path, **params) -> ad.AnnData:
    """``preprocess(io.read_h5ad(path), **params)`` holding the input only until the two groups are taken.

    What the workflow's rule runs: the input is read, the two groups' cells taken from it
    (without a copy when they are all its cells) and the input dropped before QC, so that a
    large file is held once, not twice (``preprocess`` keeps the caller's AnnData as given).
    ``params``: the keywords of :func:`preprocess`, with its defaults.
    """
    bound = inspect.signature(preprocess).bind(None, **params)
    bound.apply_defaults()
    args = {k: v for k, v in bound.arguments.items() if k != "adata"}
    return _recorded([read_h5ad(path)], True, **args)


def _recorded(source: list, owned: bool, **params) -> ad.AnnData:
    """``_preprocess`` of the AnnData in ``source`` (taken out of it), its warnings recorded in uns."""
    with result_warnings("preprocess") as warned:
        out = _preprocess(source, owned=owned, **params)
    out.uns["scontrast"]["preprocess"]["warnings"] = np.array(warned, dtype=object).astype(str)
    return out


def _preprocess(source: list, *, owned: bool, groupby, target, background, counts, layer, min_genes, min_cells,
                max_pct_mito, mito_prefix, n_top_genes, hvg_flavor, target_sum, min_cells_per_group, replicate,
                paired, min_cells_per_replicate) -> ad.AnnData:
    """The work of ``preprocess`` on the AnnData popped from ``source``; ``owned``: no one else holds it."""
    import scanpy as sc  # here, not at module level: `import scontrast` stays light for every other job

    adata = source.pop()
    labels, keep, X, dtype = _checked_input(adata, groupby=groupby, target=target, background=background,
                                            counts=counts, layer=layer, replicate=replicate, owned=owned)
    n_genes_in = int(adata.n_vars)
    out, carried = _two_groups(adata, X, labels, keep, dtype)
    del adata, X  # an input handed over (preprocess_file) is freed here: only the two groups' cells are held
    is_target = out.obs[TARGET_KEY].to_numpy()
    n_in = {"target": int(is_target.sum()), "background": int((~is_target).sum())}
    out, qc = _quality_control(sc, out, counts=counts, min_genes=min_genes, min_cells=min_cells,
                               max_pct_mito=max_pct_mito, mito_prefix=mito_prefix)
    removed_reason = qc["removed_reason"]

    out, design, design_keep, no_replicate = _apply_design(out, replicate=replicate, paired=paired,
                                                           min_cells=min_cells_per_replicate, groupby=groupby)
    removed_reason[qc["rows_in"][~design_keep]] = "replicate"
    removed_reason[qc["rows_in"][no_replicate]] = "no_replicate"
    n_kept = {"target": int(out.obs[TARGET_KEY].sum()), "background": int((~out.obs[TARGET_KEY]).sum())}
    _check_group_losses(is_target, removed_reason, n_in, n_kept, target=target, background=background,
                        min_genes=min_genes, max_pct_mito=max_pct_mito, min_cells=min_cells,
                        min_cells_per_group=min_cells_per_group)
    _normalise_and_flag(sc, out, counts=counts, target_sum=target_sum, n_top_genes=n_top_genes,
                        hvg_flavor=hvg_flavor, share=owned)

    params = dict(groupby=groupby, target=_as_list(target), background=_as_list(background), counts=counts,
                  layer=str(layer), min_genes=min_genes, min_cells=min_cells, max_pct_mito=max_pct_mito,
                  mito_prefix=mito_prefix, n_top_genes=n_top_genes, hvg_flavor=hvg_flavor,
                  target_sum="median" if target_sum is None else target_sum,
                  min_cells_per_group=min_cells_per_group, replicate=str(replicate), paired=bool(paired),
                  min_cells_per_replicate=min_cells_per_replicate)
    gone = removed_reason != ""
    qc_table = qc["qc_table"]
    out.uns["scontrast"] = {"design": design, "preprocess": {
        "params": params,
        "versions": package_versions(),
        "n_cells_in": n_in,
        "n_cells_kept": n_kept,
        "n_genes_in": n_genes_in,
        "n_genes_kept": int(out.n_vars),
        "n_highly_variable": int(out.var["highly_variable"].sum()),
        "n_mito_genes": int(qc["mito"].sum()),
        "mito_filter": bool(qc["mito_filter"] and qc["mito"].any()),
        # the QC metrics of the removed cells (the kept cells' are in obs): the QC figure shows both
        "qc_removed": {
            "cell": np.asarray(qc_table.index[gone], dtype=str),
            "target": is_target[gone],
            "reason": removed_reason[gone].astype(str),
            **{k: qc_table[k].to_numpy(dtype=float)[gone] for k in qc_table.columns},
        },
    }}
    out.uns["scontrast"]["preprocess"]["input_annotations"] = _finish_annotations(
        out, carried, groupby=groupby, target=_as_list(target), background=_as_list(background))
    log.info("kept %s cells and %d genes (%d highly variable)", n_kept, out.n_vars,
             int(out.var["highly_variable"].sum()))
    return out


def _checked_input(adata, *, groupby, target, background, counts, layer, replicate, owned=False):
    """The group labels, the mask of the two groups' cells, their matrix checked against ``counts``, its dtype.

    The checks run in this order so that the first problem met is the one reported. ``owned``:
    the caller hands ``adata`` over, so its matrix may be taken as is when every cell is kept.
    """
    if counts not in ("raw", "tpm", "normalized"):
        raise ScontrastError(f"counts must be 'raw', 'tpm' or 'normalized', got {counts!r}")
    if layer is not None and layer not in adata.layers:
        raise ScontrastError(f"layer '{layer}' is absent (have {list(adata.layers.keys())})")
    matrix_name = "X" if layer is None else f"layers['{layer}']"
    labels = group_labels(adata.obs, groupby, target, background)
    if replicate is not None and replicate not in adata.obs:
        raise ScontrastError(f"obs column '{replicate}' (replicate) is absent; have {list(adata.obs.columns)[:20]}")
    if replicate is not None and replicate == groupby:
        raise ScontrastError(f"replicate: '{replicate}' is the groupby column itself: name the obs column of the "
                             "donors, patients or samples")
    keep = labels.notna().to_numpy()
    X = adata.X if layer is None else adata.layers[layer]
    if X is None:
        raise ScontrastError("the AnnData has no X matrix")
    check_sparse_structure(X, matrix_name)  # before scipy's routines, which trust the arrays, read them
    # duplicate entries summed (QC counts stored entries), on the slice: the caller's matrix stays as given
    X = canonical_matrix(X if owned and keep.all() else X[keep], matrix_name, check=False)
    check_finite(X, matrix_name)
    _check_range(_values(X), matrix_name)
    if counts == "raw":
        validate_counts(X, matrix_name, layers=list(adata.layers.keys()) if layer is None else ())
    elif counts == "tpm":
        _validate_tpm(X, matrix_name)
    else:
        _validate_normalized(X, matrix_name)
    values = _values(X)
    # counts above 2**24 are not all exact in float32: keep them exact in float64
    dtype = np.float64 if counts == "raw" and values.size and float(values.max()) > _F32_EXACT else np.float32
    if dtype == np.float64:
        log.info("%s holds counts up to %g, above float32's exact integers (2**24): counts kept in float64",
                 matrix_name, values.max())
    return labels, keep, X, dtype


def _two_groups(adata, X, labels, keep, dtype) -> tuple[ad.AnnData, dict]:
    """A fresh AnnData of the two groups' cells, flagged in ``obs[TARGET_KEY]``, without the slots of a past run.

    It holds the input's obs columns (those named as QC's own renamed: :data:`QC_OBS`) and its
    obsm, obsp, varm and varp entries (subset to the two groups' cells), which every later subset
    keeps aligned; the rest of the input's annotations, joined at the end by
    :func:`_finish_annotations`, are returned beside it.
    """
    stale = method_slots(adata)
    if stale:
        log.info("input slots written by scontrast's own steps are dropped (a finished result fed back in?): %s",
                 "; ".join(f"{slot}{keys}" for slot, keys in stale.items()))
    obs = adata.obs.loc[keep].drop(columns=stale.get("obs", []))
    renamed = _renames(obs.columns, QC_OBS, "obs")
    rows = np.flatnonzero(keep)
    mine = {slot: {k: v for k, v in getattr(adata, slot).items() if k not in stale.get(slot, [])}
            for slot in ("obsm", "obsp", "varm", "varp")}
    out = ad.AnnData(
        X=sp.csr_matrix(X, dtype=dtype) if sp.issparse(X) else np.asarray(X, dtype=dtype),
        obs=obs.rename(columns={old: new for _, old, new in renamed}),
        var=adata.var[[]].copy(),
        obsm={k: _take(v, rows) for k, v in mine["obsm"].items()},
        obsp={k: _take(_take(v, rows), rows, axis=1) for k, v in mine["obsp"].items()},
        varm={k: v.copy() for k, v in mine["varm"].items()},
        varp={k: v.copy() for k, v in mine["varp"].items()},
    )
    out.obs[TARGET_KEY] = (labels[keep] == "target").to_numpy()
    carried = {
        "obs": [str(c) for c in out.obs.columns if c != TARGET_KEY],
        "var": adata.var.drop(columns=stale.get("var", [])).copy(),
        "uns": copy.deepcopy({k: v for k, v in adata.uns.items() if k not in stale.get("uns", [])}),
        # each categorical column's categories in the input: the colours of its categories follow them
        "categories": {c: list(obs[c].cat.categories) for c in obs.columns
                       if isinstance(obs[c].dtype, pd.CategoricalDtype)},
        "renamed": renamed,
        "not_carried": {"layers": [str(k) for k in adata.layers.keys()], "raw": adata.raw is not None},
        # each graph's edges in the input: the result keeps those between kept cells (said in the log)
        "edges": {k: _edges(v) for k, v in mine["obsp"].items()},
    }
    return out, carried


def _apply_design(out: ad.AnnData, *, replicate, paired, min_cells, groupby) -> tuple[ad.AnnData, dict, np.ndarray]:
    """Keep the cells of the declared design's replicates.

    Returns the kept cells, the design as ``uns['scontrast']['design']`` and the mask of kept rows.

    Without a declared replicate the unit is the cell, and a column that looks like an undeclared
    design (named like a donor or sample, >= 2 values within both groups) is warned about.
    """
    is_target = out.obs[TARGET_KEY].to_numpy()
    if replicate is None:
        if paired:
            raise ScontrastError("paired: true needs a replicate column (replicate: <obs column>)")
        suspects = undeclared_design_columns(out.obs, is_target, exclude={groupby, TARGET_KEY})
        if suspects:
            col = suspects[0]
            warnings.warn(
                f"obs column '{col}' looks like donors or samples ({out.obs.loc[is_target, col].nunique()} values in the "
                f"target group, {out.obs.loc[~is_target, col].nunique()} in the background) but no replicate is declared: "
                f"p-values and errors treat cells as independent, so differences between {col}s can read as "
                f"differences between groups; declare replicate: {col} (and paired: true if each gives cells to both "
                "groups)", ScontrastWarning, stacklevel=5)
        return out, {"replicate": "none", "paired": False, "unit": "cell",
                     "summary": "no replicate declared: cells are the unit",
                     "undeclared_candidates": np.array(suspects, dtype=str)}, np.ones(out.n_obs, dtype=bool), \
            np.zeros(out.n_obs, dtype=bool)
    values = out.obs[replicate].to_numpy()
    design = declare_design(values, is_target, column=replicate, paired=paired, min_cells=min_cells)
    missing = pd.isna(out.obs[replicate]).to_numpy()
    if missing.any():
        n_t, n_b = int((missing & is_target).sum()), int((missing & ~is_target).sum())
        warnings.warn(f"{int(missing.sum())} cells have no value in obs column '{replicate}' (replicate) and were "
                      f"dropped ({n_t} target, {n_b} background): give each cell its {replicate}, or leave those "
                      "cells out of the file", ScontrastWarning, stacklevel=5)
    if design.dropped:  # one fact, one line (the terminal, the log, the summary's row of dropped replicates)
        warnings.warn("; ".join(f"replicate '{name}' of obs column '{replicate}' dropped: {why}"
                                for name, why in design.dropped.items()), ScontrastWarning, stacklevel=5)
    if not design.keep.all():
        out = out[design.keep].copy()
    out.obs[REPLICATE_KEY] = pd.Categorical(design.replicates[design.keep])
    log.info("%s", design.summary())
    uns = design.as_uns()
    uns["cells_without_replicate"] = int(missing.sum())
    return out, uns, design.keep, missing
