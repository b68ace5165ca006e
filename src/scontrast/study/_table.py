"""The study table as files: study.tsv (with its global p-value), study.html; the methods' columns."""

from __future__ import annotations

import html
import io as _io

import numpy as np
import pandas as pd

from ._study import StudyResult

__all__ = ["add_method_results", "study_tsv", "read_study_tsv", "study_html"]

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


def study_html(result: StudyResult, name: str) -> str:
    """One self-contained page: the findings, the study table and the design check."""
    findings = "".join(f"<li>{html.escape(s)}</li>" for s in result.findings)
    design = result.design.drop(columns=["donors"], errors="ignore")
    return (f"<html><head><meta charset='utf-8'><title>study {html.escape(name)}</title></head><body>"
            f"<h2>Study {html.escape(name)}</h2><p>global p-value (any split differs): "
            f"<b>{result.global_pvalue:.3g}</b></p><ul>{findings}</ul>"
            f"<h3>Splits, ranked</h3>{result.table.to_html(index=False, na_rep='', float_format=lambda x: f'{x:.3g}')}"
            f"<h3>Design check</h3>{design.to_html(index=False, float_format=lambda x: f'{x:.3g}')}</body></html>")
