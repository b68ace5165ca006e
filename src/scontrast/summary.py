"""One table per dataset of the numbers a reader looks for first (the report's summary)."""

from __future__ import annotations

from collections.abc import Mapping

import anndata as ad
import numpy as np
import pandas as pd

from .tl import _cpca, _fangs, _pcpca, _pseudobulk, _quadro, _sparda

# each method's rows come from its own front-end module (a method's change stays in its files)
_SUMMARY_ROWS = {
    "sparda": _sparda.summary_rows,
    "cpca": _cpca.summary_rows,
    "pcpca": _pcpca.summary_rows,
    "quadro": _quadro.summary_rows,
    "fangs": _fangs.summary_rows,
    "pseudobulk": _pseudobulk.summary_rows,
}

__all__ = ["summarise", "to_html"]


def _rows(adata: ad.AnnData, n_top: int):
    pre = adata.uns.get("scontrast", {}).get("preprocess")
    if isinstance(pre, Mapping):
        p = pre["params"]
        yield "data", "contrast", f"{list(p['target'])} vs {list(p['background'])} in obs['{p['groupby']}']"
        yield "data", "cells (target / background)", f"{pre['n_cells_kept']['target']} / {pre['n_cells_kept']['background']}"
        yield "data", "genes kept (highly variable)", f"{pre['n_genes_kept']} ({pre['n_highly_variable']})"
    design = adata.uns.get("scontrast", {}).get("design")
    if isinstance(design, Mapping):
        # the unit every p-value, error and q-value below is computed over
        yield "data", "unit of the tests", str(design["summary"])
    for method, rows in _SUMMARY_ROWS.items():
        if isinstance(adata.uns.get(method), Mapping) and "failed" not in adata.uns[method]:
            for item, value in rows(adata, n_top):
                yield method, item, value


def _failed_rows(adata: ad.AnnData):
    """One row per method that did not run on the dataset, with why (``uns['scontrast']['failed']``)."""
    failed = adata.uns.get("scontrast", {}).get("failed", {})
    for method, reason in dict(failed if isinstance(failed, Mapping) else {}).items():
        yield method, "did not run", str(reason)


_METHODS = ("sparda", "cpca", "pcpca", "quadro", "latent_features", "fangs", "pseudobulk")


def _warning_rows(adata: ad.AnnData):
    """One row per warning a step recorded (``uns[<step>]['warnings']``): never silence."""
    pre = adata.uns.get("scontrast", {}).get("preprocess")
    steps = [("preprocess", pre)] if isinstance(pre, Mapping) else []
    steps += [(m, adata.uns[m]) for m in _METHODS if isinstance(adata.uns.get(m), Mapping)]
    for step, entry in steps:
        for text in np.asarray(entry.get("warnings", []), dtype=object).ravel():
            yield step, "warning", str(text)


def summarise(adata: ad.AnnData, n_top: int = 10) -> pd.DataFrame:
    """Key results of every method present in ``adata.uns``.

    Returns a DataFrame with columns ``method``, ``item``, ``value`` (strings),
    first a ``did not run`` row per method that did not run and a ``warning`` row per
    warning any step recorded (what a reader must see before the numbers), then one row per
    number: cells per group, genes kept, SPARDA p-value and top genes, QUADRO
    cross-validated error, FANGS K and expected loss vs draws...
    """
    rows = list(_failed_rows(adata)) + list(_warning_rows(adata)) + list(_rows(adata, n_top))
    return pd.DataFrame(rows, columns=["method", "item", "value"])


_STYLE = (
    "body{font-family:sans-serif;font-size:14px;margin:1em}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}"
    "th{background:#f0f0f0}tr.warning td{background:#fff3cd}"
)


def to_html(table: pd.DataFrame, title: str) -> str:
    """``summarise``'s table as a small self-contained HTML page (warning rows highlighted).

    The report shows it inline; the ``.tsv`` stays the file to read with code.
    """
    import html

    rows = []
    for method, item, value in table[["method", "item", "value"]].itertuples(index=False):
        cls = ' class="warning"' if item in ("warning", "did not run") else ""
        rows.append(f"<tr{cls}><td>{html.escape(str(method))}</td><td>{html.escape(str(item))}</td>"
                    f"<td>{html.escape(str(value))}</td></tr>")
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body><h3>{html.escape(title)}</h3>"
            "<table><tr><th>step</th><th>item</th><th>value</th></tr>" + "".join(rows) + "</table></body></html>\n")
