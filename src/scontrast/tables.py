"""The gene table of a contrast: every method's number for each gene, one row per gene, sorted by evidence.

Like scanpy's ``rank_genes_groups`` tables, but across methods: SPARDA's weight, selection and
marginal Wasserstein distance, pseudobulk DESeq2's log2 fold change, p and adjusted p, cPCA's and
PCPCA's loadings, QUADRO's signed terms and the mean expression of each group.
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from .core import TARGET_KEY
from .summary import ALPHA, quadro_terms

__all__ = ["gene_table", "group_means", "gene_table_html"]


def group_means(path: str | os.PathLike, is_target: np.ndarray, chunk_cells: int = 10000) -> tuple[np.ndarray, np.ndarray]:
    """Each gene's mean of ``X`` over the target and over the background cells of an ``.h5ad``.

    is_target (n_obs,) bool -> (target means (n_vars,), background means (n_vars,)); ``X`` is read
    ``chunk_cells`` rows at a time (never whole, the layers never), sparse blocks stay sparse.
    """
    from . import io

    is_target = np.asarray(is_target, dtype=bool)
    blocks = io.x_row_blocks(path, chunk_cells)
    n, g = next(blocks)
    if n != is_target.size:
        blocks.close()
        raise ValueError(f"is_target: {is_target.size} values for {n} cells of '{path}'")
    sums = np.zeros((2, g))
    for i, block in enumerate(blocks):  # to the end: the generator then closes the file
        start = i * chunk_cells
        # (2, cells) indicator of the block's background and target cells, times the block
        pick = sp.csr_matrix(np.vstack([~is_target[start:start + chunk_cells],
                                        is_target[start:start + chunk_cells]]).astype(np.float64))
        product = pick @ block
        sums += product.toarray() if sp.issparse(product) else product
    counts = np.array([(~is_target).sum(), is_target.sum()], dtype=float)[:, None]
    means = sums / np.maximum(counts, 1)
    return means[1], means[0]


def _terms_by_gene(adata: ad.AnnData) -> dict[str, pd.Series]:
    """QUADRO's signed terms per gene: linear weight, spread weight and its pairs as text."""
    q = adata.uns.get("quadro")
    if not isinstance(q, Mapping) or "failed" in q:
        return {}
    terms = quadro_terms(q)
    names = adata.var_names
    linear = pd.Series(dict(terms["linear"]), dtype=float).reindex(names)
    spread = pd.Series(dict(terms["spread"]), dtype=float).reindex(names)
    pairs: dict[str, list[str]] = {}
    for label, w in terms["pairs"]:
        a, b = label.split(" x ", 1)
        pairs.setdefault(a, []).append(f"{b} ({w:+.3g})")
        pairs.setdefault(b, []).append(f"{a} ({w:+.3g})")
    out = {"quadro_mean_term": linear, "quadro_spread_term": spread,
           "quadro_pairs": pd.Series({g: ", ".join(v) for g, v in pairs.items()}, dtype=object).reindex(names)}
    folds = q.get("gene_folds")
    if isinstance(folds, Mapping) and "gene" in folds:
        out["quadro_n_folds"] = pd.Series(np.asarray(folds["n_folds"], dtype=float),
                                          index=np.asarray(folds["gene"]).astype(str)).reindex(names)
    return out


def gene_table(adata: ad.AnnData, means: tuple[np.ndarray, np.ndarray] | None = None, key: str = TARGET_KEY,
               alpha: float = ALPHA) -> pd.DataFrame:
    """One row per gene with every method's number for it, the genes most methods name first.

    Columns (those whose method ran): ``gene``, ``n_methods`` (how many of SPARDA's selection,
    pseudobulk's ``padj < alpha``, a non-zero QUADRO term and FANGS's top genes name the gene),
    ``mean_target``, ``mean_background`` (mean of ``X``, log-normalised; from ``means`` =
    (target, background) when given, else from ``adata.X``), ``sparda_weight``,
    ``sparda_selected``, ``sparda_marginal_w2``, ``pseudobulk_log2fc``, ``pseudobulk_pvalue``,
    ``pseudobulk_padj``, ``cpca_cPC<j>`` (loadings at the default alpha), ``pcpca_W<j>``,
    ``quadro_mean_term`` / ``quadro_spread_term`` (signed toward the target, see
    :func:`scontrast.summary.quadro_terms`), ``quadro_pairs``, ``quadro_n_folds``, ``fangs_features``.
    Sorted by ``n_methods``, then pseudobulk's p-value, then |SPARDA weight|, then the marginal W2.
    """
    var = adata.var
    t = pd.DataFrame(index=adata.var_names.astype(str))
    t.index.name = "gene"
    if means is None and adata.X is not None and key in adata.obs:
        is_target = adata.obs[key].to_numpy(dtype=bool)
        X = adata.X
        means = tuple(np.asarray(X[m].mean(axis=0)).ravel() if m.any() else np.full(adata.n_vars, np.nan)
                      for m in (is_target, ~is_target))
    if means is not None:
        t["mean_target"], t["mean_background"] = np.asarray(means[0], float), np.asarray(means[1], float)
    for col in ("sparda_weight", "sparda_selected", "sparda_marginal_w2", "pseudobulk_log2fc", "pseudobulk_pvalue",
                "pseudobulk_padj"):
        if col in var:
            t[col] = var[col].to_numpy()
    for slot, prefix in (("cPCs", "cpca_cPC"), ("PCPCA_W", "pcpca_W")):
        if slot in adata.varm:
            L = np.asarray(adata.varm[slot], dtype=float)
            for j in range(L.shape[1]):
                t[f"{prefix}{j + 1}"] = L[:, j]
    for col, values in _terms_by_gene(adata).items():
        t[col] = values.to_numpy()
    fangs = adata.uns.get("fangs")
    if isinstance(fangs, Mapping) and "feature_top_genes" in fangs and int(fangs.get("n_features", 0)) > 0:
        named: dict[str, list[str]] = {}
        for j, genes in enumerate(np.asarray(fangs["feature_top_genes"]).astype(str)):
            for g in filter(None, genes.split(", ")):
                named.setdefault(g, []).append(f"F{j + 1}")
        t["fangs_features"] = pd.Series({g: ", ".join(v) for g, v in named.items()}, dtype=object).reindex(t.index)
    t.insert(0, "n_methods", _n_methods(t, alpha))
    order = np.lexsort((
        -np.nan_to_num(t["sparda_marginal_w2"].to_numpy(float), nan=-np.inf) if "sparda_marginal_w2" in t else np.zeros(len(t)),
        -np.abs(np.nan_to_num(t["sparda_weight"].to_numpy(float))) if "sparda_weight" in t else np.zeros(len(t)),
        np.nan_to_num(t["pseudobulk_pvalue"].to_numpy(float), nan=np.inf) if "pseudobulk_pvalue" in t else np.zeros(len(t)),
        -t["n_methods"].to_numpy(),
    ))
    return t.iloc[order].reset_index()


def _n_methods(t: pd.DataFrame, alpha: float) -> np.ndarray:
    n = np.zeros(len(t), dtype=np.int64)
    if "sparda_selected" in t:
        n += t["sparda_selected"].fillna(False).to_numpy(dtype=bool)
    if "pseudobulk_padj" in t:
        n += np.nan_to_num(t["pseudobulk_padj"].to_numpy(float), nan=1.0) < alpha
    quadro = [c for c in ("quadro_mean_term", "quadro_spread_term") if c in t]
    if quadro or "quadro_pairs" in t:
        hit = np.zeros(len(t), dtype=bool)
        for c in quadro:
            hit |= np.nan_to_num(t[c].to_numpy(float)) != 0
        if "quadro_pairs" in t:
            hit |= t["quadro_pairs"].notna().to_numpy()
        n += hit
    if "fangs_features" in t:
        n += t["fangs_features"].notna().to_numpy()
    return n


def gene_table_html(table: pd.DataFrame, title: str, n_rows: int = 50) -> str:
    """The first ``n_rows`` of :func:`gene_table` as a self-contained HTML page (the whole table is the TSV)."""
    shown = table.head(n_rows).copy()
    for col in shown.columns:
        if pd.api.types.is_float_dtype(shown[col]):
            shown[col] = shown[col].map(lambda v: "" if not np.isfinite(v) else f"{v:.3g}")
    body = shown.to_html(index=False, na_rep="", escape=True, border=0)
    note = (f"The {min(n_rows, len(table))} genes with the most evidence of {len(table)} (the whole table: genes.tsv). "
            "n_methods: how many of SPARDA's selection, pseudobulk's padj, QUADRO's terms and FANGS's features name "
            "the gene; quadro terms are signed toward the target.")
    style = ("body{font-family:sans-serif;font-size:13px;margin:1em}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#f0f0f0}"
             "td:first-child{text-align:left}")
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body><h3>{html.escape(title)}</h3><p>{html.escape(note)}</p>"
            f"{body}</body></html>\n")
