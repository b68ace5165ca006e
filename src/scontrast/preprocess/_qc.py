"""Quality control: scanpy's QC metrics, the cells and genes it removes, and what that loss says about the groups."""

from __future__ import annotations

import warnings

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..core import ScontrastError, ScontrastWarning
from ._annotations import _keep
from ._counts import _pieces
from ._groups import _as_list, _group_name
from ._normalise import _entries_per_gene

QC_WARN_FRACTION = 0.2  # QC removing more than this share of a group's cells is warned


_MITO_NAMES = frozenset({
    "ND1", "ND2", "ND3", "ND4", "ND4L", "ND5", "ND6", "CYTB", "COX1", "COX2", "COX3", "CO1", "CO2", "CO3",
    "COI", "COII", "COIII", "ATP6", "ATP8", "RNR1", "RNR2", "MTND1", "MTND2", "MTND3", "MTND4", "MTND4L",
    "MTND5", "MTND6", "MTCYB", "MTCO1", "MTCO2", "MTCO3", "MTATP6", "MTATP8", "MTRNR1", "MTRNR2", "CYB",
})
_OTHER_PREFIXES = ("MT-", "MT.", "MT_", "MT:")


def _mito_mask(var_names: pd.Index, prefix: str) -> np.ndarray:
    return np.asarray(var_names.str.upper().str.startswith(prefix.upper()), dtype=bool)


def _mito_advice(var_names: pd.Index, prefix: str) -> str:
    """What the gene names suggest when ``prefix`` matches none (empty when they suggest nothing)."""
    upper = pd.Index(var_names.astype(str).str.upper())
    for other in _OTHER_PREFIXES:
        if other == prefix.upper():
            continue
        stems = upper[upper.str.startswith(other)].str[len(other):]
        hits = [s for s in stems if s in _MITO_NAMES]
        if len(hits) >= 3:
            return f"; {len(hits)} genes look mitochondrial with the prefix '{other}': set mito_prefix: '{other}'"
    bare = [str(g) for g, u in zip(var_names, upper) if u in _MITO_NAMES]
    if bare:
        shown = ", ".join(bare[:6]) + (", ..." if len(bare) > 6 else "")
        return (f"; {len(bare)} gene(s) have mitochondrial names without a prefix ({shown}): rename them "
                f"'{prefix}<name>' in var_names to filter on them")
    return ""


def _qc_metrics(sc, out: ad.AnnData) -> None:
    """``sc.pp.calculate_qc_metrics(out, qc_vars=['mt'], percent_top=None, log1p=False, inplace=True)``, bitwise.

    For a CSR matrix the genes' counts of cells are counted a piece at a time (``_entries_per_gene``):
    scipy's ``getnnz(axis=0)``, which scanpy's ``describe_var`` calls, bincounts an int64 copy of
    the column indices (the peak of preprocessing once normalisation is in place). The rest is
    scanpy's own code (``describe_obs``; ``describe_var``'s other columns by its own functions).
    """
    try:
        from scanpy.preprocessing import _qc
        describe_obs, mean_var, axis_sum = _qc.describe_obs, _qc._get_mean_var, _qc.axis_sum
    except (ImportError, AttributeError):  # another scanpy: its own function, at its own memory cost
        describe_obs = None
    X = out.X
    if describe_obs is None or not (sp.issparse(X) and X.format == "csr"):
        sc.pp.calculate_qc_metrics(out, qc_vars=["mt"], percent_top=None, log1p=False, inplace=True)
        return
    X.eliminate_zeros()
    describe_obs(out, qc_vars=["mt"], percent_top=None, inplace=True, x=X, log1p=False)
    # scanpy 1.11 describe_var(expr_type='counts', var_type='genes', log1p=False)
    var_metrics = pd.DataFrame(index=out.var_names)
    var_metrics["n_cells_by_counts"], var_metrics["mean_counts"] = _entries_per_gene(X), mean_var(X, axis=0)[0]
    var_metrics["pct_dropout_by_counts"] = (1 - var_metrics["n_cells_by_counts"] / X.shape[0]) * 100
    var_metrics["total_counts"] = np.ravel(axis_sum(X, axis=0))
    out.var[var_metrics.columns] = var_metrics


def _cells_detected(X) -> np.ndarray:
    """Cells each gene (column) holds a positive value in: ``(X > 0).sum(axis=0)`` without its copies.

    scipy's comparison makes a boolean matrix with its own copy of the indices, and its sum an
    int64 copy of it (together 1.6 times a float32 CSR matrix at its peak): for a CSR matrix the
    column indices of the positive values are counted here a piece at a time. The same counts.
    """
    if not (sp.issparse(X) and X.format == "csr"):
        return np.asarray((X > 0).sum(axis=0)).ravel()
    out = np.zeros(X.shape[1], dtype=np.int64)
    for a, b in _pieces(X.nnz):
        out += np.bincount(X.indices[a:b][X.data[a:b] > 0], minlength=X.shape[1])
    return out


def _quality_control(sc, out, *, counts, min_genes, min_cells, max_pct_mito, mito_prefix) -> tuple[ad.AnnData, dict]:
    """The cells and genes passing QC, and what the record needs of it.

    Returns the filtered AnnData and ``mito`` (mask of the input genes), ``mito_filter``,
    ``removed_reason`` (per input cell, '' when kept), ``qc_table`` (the QC metrics of every
    input cell) and ``rows_in`` (each kept row as a row of ``qc_table``).
    """
    if not mito_prefix and counts in ("raw", "tpm") and max_pct_mito < 100:
        raise ScontrastError(f"mito_prefix '' marks every gene as mitochondrial, so max_pct_mito={max_pct_mito:g} would "
                             "remove every cell: give the prefix of the mitochondrial genes' names ('MT-', 'mt-'), or set "
                             "max_pct_mito: 100 to filter on none")
    mito = _mito_mask(out.var_names, mito_prefix)
    out.var["mt"] = mito
    _qc_metrics(sc, out)
    mito_filter = counts in ("raw", "tpm") and max_pct_mito < 100
    if mito_filter and not mito.any():
        # stacklevel: this function, _preprocess, _recorded, preprocess, then the user's call
        warnings.warn(f"mito_prefix '{mito_prefix}' matches no gene, so max_pct_mito={max_pct_mito:g} removed no "
                      f"cell{_mito_advice(out.var_names, mito_prefix)}", ScontrastWarning, stacklevel=5)
    low_genes = out.obs["n_genes_by_counts"].to_numpy() < min_genes
    high_mito = (out.obs["pct_counts_mt"].to_numpy() > max_pct_mito) & ~low_genes if mito_filter and mito.any() \
        else np.zeros(out.n_obs, dtype=bool)
    cell_ok = ~(low_genes | high_mito)
    removed_reason = np.where(low_genes, "min_genes", np.where(high_mito, "max_pct_mito", ""))
    qc_table = out.obs[["n_genes_by_counts", "total_counts", "pct_counts_mt"]].copy()
    out = _keep(out, obs=cell_ok)
    if out.n_obs == 0:
        raise ScontrastError(_no_cell_left(qc_table, low_genes, high_mito, min_genes=min_genes,
                                           max_pct_mito=max_pct_mito))
    detected = _cells_detected(out.X)
    gene_ok = detected >= min_cells
    if gene_ok.sum() < 2:
        raise ScontrastError(_too_few_genes(detected, out.n_obs, min_cells))
    out = _keep(out, var=gene_ok)
    zero_cells = np.asarray(out.X.sum(axis=1)).ravel() == 0
    if zero_cells.any():
        removed_reason[np.flatnonzero(cell_ok)[zero_cells]] = "min_cells"
        out = _keep(out, obs=~zero_cells)
    rows_in = np.flatnonzero(cell_ok)[~zero_cells]
    return out, {"mito": mito, "mito_filter": mito_filter, "removed_reason": removed_reason, "qc_table": qc_table,
                 "rows_in": rows_in}


def _no_cell_left(qc_table: pd.DataFrame, low_genes: np.ndarray, high_mito: np.ndarray, *, min_genes,
                  max_pct_mito) -> str:
    """The line when QC removes every cell of the two groups: which setting removed how many, and what
    the cells hold (``qc_table``: the QC metrics of every cell; the masks: one entry per cell)."""
    genes = qc_table["n_genes_by_counts"].to_numpy()
    spread = f"median genes per cell {np.median(genes):g}, most {genes.max():g}"
    n = len(genes)
    if not high_mito.any():
        return (f"no cell has at least min_genes={min_genes} detected genes: min_genes={min_genes} removed all {n} "
                f"cells of the two groups ({spread})")
    mito = qc_table["pct_counts_mt"].to_numpy()[high_mito]
    parts = [f"min_genes={min_genes} removed {int(low_genes.sum())} ({spread})"] if low_genes.any() else []
    parts.append(f"max_pct_mito={max_pct_mito:g} removed {int(high_mito.sum())} (their mitochondrial share: median "
                 f"{np.median(mito):.1f}%, least {mito.min():.1f}%)")
    return f"QC removed all {n} cells of the two groups: " + ", ".join(parts)


def _too_few_genes(detected: np.ndarray, n_cells: int, min_cells: int) -> str:
    """The line when fewer than 2 genes pass ``min_cells`` (``detected``: the kept cells each gene is detected in)."""
    kept = int((detected >= min_cells).sum())
    if kept == len(detected):
        why = f"the data has {len(detected)} gene(s)"
    else:
        why = (f"min_cells={min_cells} removed {len(detected) - kept} of {len(detected)} genes (the most cells a "
               f"gene is detected in: {int(detected.max())} of the {n_cells} cells QC kept)")
    return f"fewer than 2 genes are detected in at least min_cells={min_cells} cells: {why}"


def _removed_by(reasons: np.ndarray, limits: dict[str, str]) -> str:
    """``"9 below min_genes=5, 3 above max_pct_mito=25"``: how many cells each reason removed."""
    return ", ".join(f"{int((reasons == r).sum())} {text}" for r, text in limits.items() if (reasons == r).any())


def _check_group_losses(is_target, removed_reason, n_in, n_kept, *, target, background, min_genes, max_pct_mito,
                        min_cells, min_cells_per_group) -> None:
    """Warn about a group QC thinned by more than ``QC_WARN_FRACTION``; refuse one left too small."""
    names = {"target": _group_name(_as_list(target), "target"),
             "background": _group_name(_as_list(background), "background")}
    limits = {"min_genes": f"below min_genes={min_genes}", "max_pct_mito": f"above max_pct_mito={max_pct_mito:g}",
              "min_cells": f"with no value left after min_cells={min_cells}", "no_replicate": "with no replicate value"}
    for group, in_group in (("target", is_target), ("background", ~is_target)):
        # cells of dropped replicates are warned replicate by replicate, not as QC losses; cells with no
        # replicate value count here, beside QC's (their own warning gives their number only)
        lost = n_in[group] - n_kept[group] - int((removed_reason[in_group] == "replicate").sum())
        if n_in[group] and lost > QC_WARN_FRACTION * n_in[group]:
            why = _removed_by(removed_reason[in_group], limits)
            qc_only = not (removed_reason[in_group] == "no_replicate").any()
            # stacklevel: this function, _preprocess, _recorded, preprocess, then the user's call
            warnings.warn(f"{'QC removed' if qc_only else 'removed'} {lost} of {n_in[group]} {names[group]} cells "
                          f"({100 * lost / n_in[group]:.0f}%): {why}", ScontrastWarning, stacklevel=5)
    limits["replicate"] = "in dropped replicates"
    for group, n in n_kept.items():
        if n < min_cells_per_group:
            removed = _removed_by(removed_reason[is_target if group == "target" else ~is_target], limits)
            raise ScontrastError(
                f"{group} group has {n} cells after QC (of {n_in[group]}), fewer than min_cells_per_group="
                f"{min_cells_per_group}" + (f"; removed: {removed}" if removed else "")
            )
