"""The study table as files: study.tsv (with its global p-value), study.html; the methods' columns."""

from __future__ import annotations

import html
import io as _io

import numpy as np
import pandas as pd

from ._study import StudyResult

__all__ = ["add_method_results", "study_tsv", "read_study_tsv", "read_findings", "study_html"]

GLOBAL_LINE = "# global_pvalue\t"


def add_method_results(result: StudyResult, deltas: dict[str, dict], alpha: float = 0.05) -> None:
    """Fill ``n_pseudobulk_genes`` and ``sparda_pvalue`` of each split from its methods' deltas.

    ``deltas``: ``{folder: {'sparda': AnnData, 'pseudobulk': AnnData}}`` (annotations only). A
    method that recorded why it could not run leaves its cells empty and says why in ``note``.
    """
    from ..io import FAILURE_KEY

    table = result.table
    if "sparda_pvalue" not in table:
        table.insert(table.columns.get_loc("pvalue") + 1, "sparda_pvalue", np.nan)
    for folder, by_method in deltas.items():
        at = table["split"] == folder
        for method, delta in by_method.items():
            failure = delta.uns.get(FAILURE_KEY)
            if failure is not None:
                why = failure.get("message", failure) if isinstance(failure, dict) else failure
                table.loc[at, "note"] = table.loc[at, "note"].map(
                    lambda n, m=method, w=str(why): "; ".join(filter(None, [n, f"{m} did not run: {w}"])))
                continue
            if method == "pseudobulk" and "pseudobulk_padj" in delta.var:
                table.loc[at, "n_pseudobulk_genes"] = int((delta.var["pseudobulk_padj"] < alpha).sum())
            if method == "sparda" and "sparda" in delta.uns and "pvalue" in delta.uns["sparda"]:
                table.loc[at, "sparda_pvalue"] = float(delta.uns["sparda"]["pvalue"])


def study_tsv(result: StudyResult) -> str:
    """The table as TSV, its first lines ``# global_pvalue<TAB>p`` and ``# <finding>`` (read with comment='#')."""
    head = [f"{GLOBAL_LINE}{result.global_pvalue:.6g}"] + [f"# {s}" for s in result.findings]
    return "\n".join(head) + "\n" + result.table.to_csv(sep="\t", index=False, float_format="%.6g")


def read_study_tsv(path) -> tuple[pd.DataFrame, float]:
    """The study table and its global p-value from a study.tsv."""
    text = open(path).read()
    global_p = float("nan")
    for line in text.splitlines():
        if line.startswith(GLOBAL_LINE):
            global_p = float(line[len(GLOBAL_LINE):])
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    table = pd.read_csv(_io.StringIO(body), sep="\t", keep_default_na=False, na_values=[""])
    for col in ("top_genes", "driven_by", "note", "status", "split", "value"):
        if col in table:
            table[col] = table[col].fillna("").astype(str)
    return table, global_p


def read_findings(path) -> list[str]:
    """The findings in words of a study.tsv (its ``# `` lines after the global p-value)."""
    return [line[2:] for line in open(path).read().splitlines()
            if line.startswith("# ") and not line.startswith(GLOBAL_LINE)]


#: the study table's columns the report's landing page shows; the page's details hold the whole table
_KEY_COLUMNS = ("value", "status", "n_target_replicates", "n_background_replicates", "pvalue", "padj", "effect",
                "effect_low", "effect_high", "top_genes", "driven_by", "rank")


def _html_table(frame: pd.DataFrame) -> str:
    """``frame`` as a compact table with inline styles (the report's page styles none of its own)."""
    cell = "border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top"

    def text(value) -> str:
        if isinstance(value, float | np.floating):
            return "" if np.isnan(value) else f"{value:.3g}"
        return str(value)

    head = "".join(f'<th style="{cell};background:#f0f0f0">{html.escape(str(c))}</th>' for c in frame.columns)
    rows = "".join("<tr>" + "".join(f'<td style="{cell}">{html.escape(text(v))}</td>' for v in row) + "</tr>"
                   for row in frame.itertuples(index=False))
    return f'<div style="overflow-x:auto"><table style="border-collapse:collapse;font-size:12px"><tr>{head}</tr>{rows}</table></div>'


def _figure_html(path) -> str:
    """The PNG at ``path`` as an inline image (a data URI: the page stays one file), at most its drawn width."""
    import base64

    with open(path, "rb") as fh:
        data = base64.b64encode(fh.read()).decode()
    return (f'<img src="data:image/png;base64,{data}" style="display:block;width:960px;max-width:100%;margin:6px 0" '
            'alt="the splits ranked: effect with its donor interval, called splits filled and starred">')


def study_html(name: str, table: pd.DataFrame, global_pvalue: float, findings: list[str], design: pd.DataFrame,
               figure=None) -> str:
    """The study's answer as an HTML fragment (inline styles only), the first block of the report's landing page:
    the global p-value and the findings, the ranking figure (PNG path ``figure``, embedded), the ranked splits'
    key columns, then the whole table and the design check one click away.

    ``table``: the study table (``STUDY_COLUMNS``, ranked); ``design``: the design check (one row per
    split and group).
    """
    items = "".join(f"<li>{html.escape(s)}</li>" for s in findings)
    design = design.drop(columns=["donors"], errors="ignore")
    key = table[[c for c in _KEY_COLUMNS if c in table.columns]]
    shown = f"{_figure_html(figure)}<p style=\"margin:4px 0\"><b>Splits, ranked</b>:</p>" if figure is not None else \
        "<p style=\"margin:4px 0\"><b>Splits, ranked</b> (the ranking figure is figures/study.png):</p>"
    return ('<div class="scontrast-answer" style="border:1px solid #bbb;border-radius:6px;padding:10px 14px;'
            'margin:14px 0">'
            f'<h3 style="margin:0 0 6px 0">Study {html.escape(name)}</h3>'
            f'<p style="background:#e3f0fb;padding:6px 8px;font-weight:bold;margin:0 0 8px 0">global p-value (any '
            f"split differs): {global_pvalue:.3g}</p><ul style=\"margin:0 0 8px 0\">{items}</ul>"
            f"{shown}{_html_table(key)}"
            '<details><summary style="cursor:pointer">the whole study table</summary>'
            f"{_html_table(table)}</details>"
            '<details><summary style="cursor:pointer">the design check</summary>'
            f"{_html_table(design)}</details></div>\n")
