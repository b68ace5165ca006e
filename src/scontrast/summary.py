"""One table per dataset of the numbers a reader looks for first (the report's summary).

The table opens with a one-line verdict built from the numbers (:func:`verdict`), then what a
reader must act on (methods that did not run, warnings: one row per fact), then each method's
results with the genes it names. A result that reaches its limit (a p-value at the smallest value
its test can give, a method that finds no structure) is a finding, stated as such, not a warning.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

import anndata as ad
import numpy as np
import pandas as pd

from .tl import _cpca, _fangs, _pcpca, _pseudobulk, _quadro, _sparda
from .tl._common import fmt

# each method's rows come from its own front-end module (a method's change stays in its files)
_SUMMARY_ROWS = {
    "sparda": _sparda.summary_rows,
    "cpca": _cpca.summary_rows,
    "pcpca": _pcpca.summary_rows,
    "quadro": _quadro.summary_rows,
    "fangs": _fangs.summary_rows,
    "pseudobulk": _pseudobulk.summary_rows,
}

__all__ = ["summarise", "to_html", "verdict", "verdict_record", "add_verdict", "top_loadings", "quadro_terms",
           "overview_html"]

ALPHA = 0.05  # the level the verdict reads p-values and adjusted p-values at
# rows a reader reads before the numbers, highlighted in the page (the verdict in its own colour)
ATTENTION = ("did not run", "warning", "replicates dropped")


# --------------------------------------------------------------------------- small readers

def _get(mapping, key, default=None):
    return mapping.get(key, default) if isinstance(mapping, Mapping) else default


def _float(value) -> float:
    try:
        return float(np.asarray(value).ravel()[0])
    except (TypeError, ValueError, IndexError):
        return float("nan")


def _method(adata: ad.AnnData, name: str) -> Mapping | None:
    """``uns[name]`` when the method ran (no ``failed`` record), else None."""
    entry = adata.uns.get(name)
    return entry if isinstance(entry, Mapping) and "failed" not in entry else None


def _design(adata: ad.AnnData) -> Mapping | None:
    design = _get(adata.uns.get("scontrast"), "design")
    return design if isinstance(design, Mapping) and str(_get(design, "unit", "")) == "replicate" else None


def _plural(word: str, n: int) -> str:
    """``word`` for ``n`` of them: 'patient' -> 'patients' (a name ending in s, or one already plural, as is)."""
    return word if n == 1 or word.endswith("s") else word + "s"


def _replicates_text(design: Mapping) -> str:
    """'6 patients, paired' or '4 vs 3 donors' from the recorded design."""
    word = str(_get(design, "replicate", "replicate"))
    n_t = len(np.asarray(_get(design, "target_replicates", [])).ravel())
    n_b = len(np.asarray(_get(design, "background_replicates", [])).ravel())
    if bool(_get(design, "paired", False)):
        return f"{n_t} {_plural(word, n_t)}, paired"
    return f"{n_t} vs {n_b} {_plural(word, max(n_t, n_b))}"


def top_loadings(loadings: np.ndarray, names, n_genes: int = 5) -> list[list[tuple[str, float]]]:
    """The ``n_genes`` largest |loadings| of each component, signed: one list of (gene, loading) per column.

    loadings (n_vars, k), names (n_vars,) -> k lists (genes with a zero loading are left out).
    """
    L = np.asarray(loadings, dtype=float)
    names = np.asarray(names).astype(str)
    out = []
    for j in range(L.shape[1] if L.ndim == 2 else 0):
        col = np.nan_to_num(L[:, j])
        order = np.argsort(-np.abs(col), kind="stable")[:n_genes]
        out.append([(names[i], float(col[i])) for i in order if col[i] != 0])
    return out


def _loadings_text(components: list[list[tuple[str, float]]], prefix: str) -> str:
    return "; ".join(f"{prefix}{j + 1}: " + ", ".join(f"{g} ({w:+.2f})" for g, w in genes)
                     for j, genes in enumerate(components) if genes)


def quadro_terms(q: Mapping) -> dict[str, list[tuple[str, float]]]:
    """QUADRO's non-zero terms, each signed toward the target (+ pushes a cell's score to the target side).

    ``{'linear': [(gene, -2 delta)], 'spread': [(gene, Omega_gg)], 'pairs': [('A x B', Omega_ab)]}``
    on standardised genes, largest first: Q(z) = z' Omega z - 2 delta' z, larger = target, so a
    positive linear weight means higher expression pushes toward the target, a positive spread
    term that values far from the centre (either way) do, a positive pair that the two genes
    moving together do.
    """
    def pairs(block, names_key="gene"):
        genes = np.asarray(_get(block, names_key, [])).astype(str)
        return genes, np.asarray(_get(block, "weight", []), dtype=float)

    g, w = pairs(_get(q, "linear", {}))
    linear = [(a, -2.0 * b) for a, b in zip(g, w)]
    g, w = pairs(_get(q, "squared", {}))
    spread = [(a, float(b)) for a, b in zip(g, w)]
    inter = _get(q, "interactions", {})
    gi, gj = np.asarray(_get(inter, "gene_i", [])).astype(str), np.asarray(_get(inter, "gene_j", [])).astype(str)
    wij = np.asarray(_get(inter, "weight", []), dtype=float)
    pair = [(f"{a} x {b}", float(c)) for a, b, c in zip(gi, gj, wij)]
    return {k: sorted(v, key=lambda t: -abs(t[1])) for k, v in
            (("linear", linear), ("spread", spread), ("pairs", pair))}


# --------------------------------------------------------------------------- the verdict

def _sparda_test(adata: ad.AnnData) -> tuple[float, float, Mapping]:
    """(p, floor, test record) of SPARDA's test; the floor is nan when its test has none recorded."""
    s = _method(adata, "sparda") or {}
    test = _get(s, "test", {}) or {}
    p = _float(_get(test, "pvalue", _get(s, "pvalue", np.nan)))
    floor = _get(test, "floor", _get(test, "pvalue_floor"))
    if floor is None and "n_permutations" in test:
        floor = 1.0 / (int(test["n_permutations"]) + 1)
    return p, _float(floor) if floor is not None else float("nan"), test


def _p_text(p: float, floor: float, test: Mapping) -> str:
    if np.isfinite(floor) and p <= floor * (1 + 1e-9) and not bool(_get(test, "exact", False)):
        return f"p <= {p:.2g}"
    return f"p = {p:.2g}"


def _parts_text(test: Mapping) -> str:
    parts = _get(test, "parts")
    if not isinstance(parts, Mapping) or len(parts) < 2:
        return ""
    return "; parts: " + ", ".join(f"{k} {_float(parts[k]):.2g}" for k in _sparda.ordered_parts(parts))


def _sparda_genes(adata: ad.AnnData, n: int) -> list[str]:
    if "sparda_weight" not in adata.var:
        return []
    w = adata.var["sparda_weight"].to_numpy(dtype=float)
    order = [i for i in np.argsort(-np.abs(w), kind="stable")[:n] if w[i] != 0]
    return [f"{adata.var_names[i]} ({'+' if w[i] > 0 else '-'})" for i in order]


def verdict(adata: ad.AnnData, alpha: float = ALPHA, n_genes: int = 3) -> str:
    """One line in plain words of what the contrast shows, built from the recorded numbers.

    SPARDA's test gives the head ("differs ..." when its p-value is at most ``alpha``, "no
    difference shown" otherwise, with the smallest p-value the design allows when replicates are
    the unit), then the genes (SPARDA's top ``n_genes`` with the side they push to), pseudobulk's
    genes at ``padj < alpha`` and QUADRO's held-out AUC. Reads ``uns['sparda']['test']``
    (``pvalue``, ``floor`` or ``pvalue_floor``, ``parts`` when present), ``uns['scontrast']['design']``,
    ``uns['pseudobulk']`` and ``uns['quadro']``; a method absent is left out.
    """
    design = _design(adata)
    who = _replicates_text(design) if design is not None else ""
    p, floor, test = _sparda_test(adata)
    parts = []
    if np.isfinite(p):
        per_replicate = str(_get(test, "unit", "")) == "replicate" or design is not None
        per = f"per {_get(design, 'replicate', 'replicate')}" if per_replicate else "per cell"
        where = f"{_p_text(p, floor, test)} {per}" + (f", {who}" if who else "; no replicate declared")
        level = "at the donor level" if per_replicate else "with cells as the unit"
        if p <= alpha:
            genes = _sparda_genes(adata, n_genes)
            parts.append(f"differs {level} (SPARDA {where}{_parts_text(test)})"
                         + (f"; genes: {', '.join(genes)}" if genes else ""))
        elif np.isfinite(floor) and floor > alpha:
            parts.append(f"no difference can be shown: with {who or 'this design'} the smallest possible p is "
                         f"{floor:.2g} (SPARDA {where})")
        else:
            floor_text = f"; the smallest possible p is {floor:.2g}" if design is not None and np.isfinite(floor) else ""
            parts.append(f"no difference shown {level} (SPARDA {where}{floor_text}{_parts_text(test)})")
    elif _method(adata, "sparda") is not None:
        parts.append("SPARDA ran without a test (n_permutations = 0)")
    pb = _method(adata, "pseudobulk")
    if pb is not None:
        n_sig = int(_get(pb, "n_significant", 0))
        a = _float(_get(_get(pb, "params", {}), "alpha", alpha))
        sig = [str(g) for g in np.asarray(_get(pb, "significant_genes", [])).ravel()][:n_genes]
        parts.append(f"pseudobulk finds {n_sig} gene{'s' if n_sig != 1 else ''} at padj < {fmt(a)}"
                     + (f" ({', '.join(sig)})" if sig else ""))
    q = _method(adata, "quadro")
    if q is not None and "cv_auc" in q:
        held = "held-out donors" if str(_get(q, "unit", "cell")) == "replicate" else "held-out cells"
        auc = _float(q["cv_auc"])
        how = "separable" if auc >= 0.6 else "not separable"  # below 0.6: hardly better than chance (0.5)
        parts.append(f"{how} with AUC {auc:.2f} on {held} (QUADRO; chance 0.5)")
    if not parts:
        return "no test ran on this contrast"
    return "; ".join(parts)


def verdict_record(adata: ad.AnnData, alpha: float = ALPHA, n_genes: int = 3) -> dict:
    """The verdict with the numbers it is built from: what ``uns['scontrast']['verdict']`` holds.

    ``text`` is :func:`verdict`'s line (the summary's verdict row), ``alpha`` the level it reads
    p-values at, ``call`` one of ``'differs'``, ``'no difference shown'``,
    ``'no difference can be shown'`` (the design's smallest p-value is above ``alpha``) or
    ``'no test'``. Then the numbers of the methods that ran: ``sparda_pvalue``,
    ``sparda_pvalue_floor`` (nan when the test records none), ``sparda_unit`` (``'replicate'`` or
    ``'cell'``), ``sparda_genes`` (top ``n_genes`` by weight with their side, only when it differs),
    ``n_target_replicates`` and ``n_background_replicates`` with ``paired`` (a declared replicate),
    ``pseudobulk_n_significant`` with ``pseudobulk_alpha``, ``quadro_cv_auc`` with ``quadro_unit``.
    """
    record: dict = {"text": verdict(adata, alpha=alpha, n_genes=n_genes), "alpha": float(alpha), "call": "no test"}
    design = _design(adata)
    if design is not None:
        record["n_target_replicates"] = len(np.asarray(_get(design, "target_replicates", [])).ravel())
        record["n_background_replicates"] = len(np.asarray(_get(design, "background_replicates", [])).ravel())
        record["paired"] = bool(_get(design, "paired", False))
    p, floor, test = _sparda_test(adata)
    if np.isfinite(p):
        per_replicate = str(_get(test, "unit", "")) == "replicate" or design is not None
        record.update(sparda_pvalue=p, sparda_pvalue_floor=floor, sparda_unit="replicate" if per_replicate else "cell")
        if p <= alpha:
            record["call"] = "differs"
            record["sparda_genes"] = _sparda_genes(adata, n_genes)
        else:
            record["call"] = "no difference can be shown" if np.isfinite(floor) and floor > alpha else "no difference shown"
    pb = _method(adata, "pseudobulk")
    if pb is not None:
        record["pseudobulk_n_significant"] = int(_get(pb, "n_significant", 0))
        record["pseudobulk_alpha"] = _float(_get(_get(pb, "params", {}), "alpha", alpha))
    q = _method(adata, "quadro")
    if q is not None and "cv_auc" in q:
        record["quadro_cv_auc"] = _float(q["cv_auc"])
        record["quadro_unit"] = str(_get(q, "unit", "cell"))
    return record


def add_verdict(adata: ad.AnnData, alpha: float = ALPHA) -> None:
    """Write :func:`verdict_record` to ``adata.uns['scontrast']['verdict']`` (in place).

    Rule collect calls it on the merged results, so ``scontrast.h5ad`` carries the same verdict
    as the first row of ``summary.tsv``.
    """
    scontrast = adata.uns.get("scontrast")
    scontrast = dict(scontrast) if isinstance(scontrast, Mapping) else {}
    scontrast["verdict"] = verdict_record(adata, alpha=alpha)
    adata.uns["scontrast"] = scontrast


# --------------------------------------------------------------------------- rows

def _rows(adata: ad.AnnData, n_top: int) -> Iterator[tuple[str, str, str]]:
    pre = adata.uns.get("scontrast", {}).get("preprocess")
    if isinstance(pre, Mapping) and "params" in pre:
        p = pre["params"]
        yield "data", "contrast", f"{list(p['target'])} vs {list(p['background'])} in obs['{p['groupby']}']"
        yield "data", "cells (target / background)", f"{pre['n_cells_kept']['target']} / {pre['n_cells_kept']['background']}"
        yield "data", "genes kept (highly variable)", f"{pre['n_genes_kept']} ({pre['n_highly_variable']})"
    design = adata.uns.get("scontrast", {}).get("design")
    if isinstance(design, Mapping):
        # the unit every p-value, error and q-value below is computed over
        yield "data", "unit of the tests", str(design["summary"])
    for method, rows in _SUMMARY_ROWS.items():
        if _method(adata, method) is None:
            continue
        if method == "fangs" and int(_float(_get(adata.uns["fangs"], "n_features", 1))) == 0:
            yield method, "features", _no_programme(adata)  # one sentence, no rows of nothing
            continue
        for item, value in rows(adata, n_top):
            yield method, item, value
        yield from _finding_rows(adata, method)
        yield from _gene_rows(adata, method)


def _no_programme(adata: ad.AnnData) -> str:
    lf = adata.uns.get("latent_features")
    text = "no recurring programme: the estimate holds no feature (K = 0)"
    if isinstance(lf, Mapping) and "stability" in lf:
        stab = np.asarray(lf["stability"], dtype=float)
        thr = _float(_get(_get(lf, "params", {}), "stability", 0.8))
        text = (f"no recurring programme: no binary feature recurs across the resampled fits (stability "
                f"{', '.join(f'{v:.2f}' for v in stab[np.isfinite(stab)])} for K = 1, 2, ...; a feature needs {fmt(thr)})")
    return text


def _gene_rows(adata: ad.AnnData, method: str, n_genes: int = 5) -> Iterator[tuple[str, str, str]]:
    """The genes a method names that its own rows leave out: cPCA's and PCPCA's loadings, QUADRO's terms."""
    if method == "cpca" and "cPCs" in adata.varm:
        alpha = _float(_get(adata.uns["cpca"], "alpha"))
        text = _loadings_text(top_loadings(adata.varm["cPCs"], adata.var_names, n_genes), "cPC")
        if text:
            yield method, f"top genes per component at alpha = {fmt(alpha)} (loading)", text
    elif method == "pcpca" and "PCPCA_W" in adata.varm:
        text = _loadings_text(top_loadings(adata.varm["PCPCA_W"], adata.var_names, n_genes), "PCPCA ")
        if text:
            yield method, "top genes per component (loading)", text
    elif method == "quadro":
        terms = quadro_terms(adata.uns["quadro"])
        labels = {"linear": "genes, mean term (+ = higher in target pushes to target)",
                  "spread": "genes, spread term (+ = far from the centre pushes to target)",
                  "pairs": "gene pairs, co-expression term (+ = moving together pushes to target)"}
        for key, label in labels.items():
            if terms[key]:
                more = f" (and {len(terms[key]) - 10} more)" if len(terms[key]) > 10 else ""
                yield method, label, ", ".join(f"{g} ({w:+.3g})" for g, w in terms[key][:10]) + more


def _floor_finding(adata: ad.AnnData) -> str | None:
    p, floor, test = _sparda_test(adata)
    if not np.isfinite(p) or not np.isfinite(floor) or p > floor * (1 + 1e-9):
        return None
    if str(_get(test, "method", "")) == "replicate":
        how = "all" if bool(_get(test, "exact", False)) else "a random sample of"
        return (f"p = {fmt(p)}: the observed labelling is the most extreme of {how} {int(_get(test, 'n_labellings', 0))} "
                "relabellings of the replicates, the smallest p-value this design allows")
    n = int(_get(test, "n_permutations", round(1 / floor - 1)))
    text = f"p <= {fmt(p)}: none of {n} permutations reached the observed statistic"
    if p > ALPHA:  # only then can more permutations change the answer
        text += f" (raise n_permutations: at {n} the bound cannot reach {fmt(ALPHA)})"
    return text


_FINDINGS = (
    # (method, pattern of the recorded warning, item of its finding row or None when another row
    # states it): the warning row is dropped, the finding is written among the method's numbers
    ("sparda", re.compile(r"^p-value at its floor"), None),  # _floor_finding's row states it
    ("sparda", re.compile(r"its sparse end: the best single genes carry the difference"), "lambda at the sparse end"),
    ("latent_features", re.compile(r"no feature is stable"), None),  # the fangs row says it (K = 0)
)


def _is_finding(step: str, text: str) -> bool:
    return any(step == m and pat.search(text) for m, pat, _ in _FINDINGS)


def _finding_rows(adata: ad.AnnData, method: str) -> Iterator[tuple[str, str, str]]:
    """A result at its limit, stated among the method's numbers (whether or not the method warned it)."""
    found = _floor_finding(adata) if method == "sparda" else None
    if found:
        yield method, "p-value at its floor", found
    sparse_end = _sparse_end(adata) if method == "sparda" else None
    if sparse_end:
        yield method, "lambda at the sparse end", sparse_end
        return
    recorded = [str(t) for t in np.asarray(_get(adata.uns[method], "warnings", []), dtype=object).ravel()]
    for m, pattern, item in _FINDINGS:
        if m == method and item is not None:
            yield from ((method, item, t) for t in recorded if pattern.search(t))


def _sparse_end(adata: ad.AnnData) -> str | None:
    """SPARDA's lambda chosen at the sparse end of its path, from ``uns['sparda']['lambda_path']``."""
    path = _get(adata.uns.get("sparda"), "lambda_path")
    lam = np.asarray(_get(path, "lam", []), dtype=float).ravel()
    if lam.size < 2 or int(_get(path, "best_index", -1)) != 0:
        return None
    n = _float(_get(path, "chosen_n_selected", np.nan))
    genes = f", {n:.0f} gene(s)" if np.isfinite(n) else ""
    return (f"cv_rule={str(_get(path, 'rule', ''))!r} chose the largest lambda of the path ({lam[0]:.3g}{genes}), its "
            "sparse end: the best single genes carry the difference")


def _failed_rows(adata: ad.AnnData):
    """One row per method that did not run on the dataset, with why (``uns['scontrast']['failed']``)."""
    failed = adata.uns.get("scontrast", {}).get("failed", {})
    for method, reason in dict(failed if isinstance(failed, Mapping) else {}).items():
        yield method, "did not run", str(reason)


_METHODS = ("sparda", "cpca", "pcpca", "quadro", "latent_features", "fangs", "pseudobulk")
_DROPPED = re.compile(r"^replicate '.*' of obs column '.*' dropped: ")


def _dropped_row(adata: ad.AnnData) -> tuple[str, str, str] | None:
    """One row for every replicate preprocessing dropped: '8 of 14 patients dropped: ...; 6 kept'."""
    design = _get(adata.uns.get("scontrast"), "design")
    dropped = [str(d) for d in np.asarray(_get(design, "dropped", []), dtype=object).ravel()]
    if not dropped:
        return None
    kept = set(np.asarray(_get(design, "target_replicates", [])).astype(str)) | set(
        np.asarray(_get(design, "background_replicates", [])).astype(str))
    word = str(_get(design, "replicate", "replicate"))
    # replicates dropped for the same reason are listed together
    by_reason: dict[str, list[str]] = {}
    for entry in dropped:
        name, _, why = entry.partition(": ")
        reason = re.sub(r"^\d+ target / \d+ background cells, | \(paired design\)$", "", why)
        by_reason.setdefault(reason, []).append(name)
    n_all = len(dropped) + len(kept)
    text = "; ".join(f"{', '.join(names)} ({reason})" for reason, names in by_reason.items())
    return ("preprocess", "replicates dropped",
            f"{len(dropped)} of {n_all} {_plural(word, n_all)} dropped: {text}; {len(kept)} kept")


def _warning_rows(adata: ad.AnnData):
    """One row per fact a step warned about (``uns[<step>]['warnings']``): never silence.

    The replicates preprocessing dropped are one row; a warning that states a result at its limit
    (see ``_FINDINGS``) becomes a finding row among the method's numbers.
    """
    pre = adata.uns.get("scontrast", {}).get("preprocess")
    steps = [("preprocess", pre)] if isinstance(pre, Mapping) else []
    steps += [(m, adata.uns[m]) for m in _METHODS if isinstance(adata.uns.get(m), Mapping)]
    dropped = _dropped_row(adata)
    for step, entry in steps:
        for text in np.asarray(entry.get("warnings", []), dtype=object).ravel():
            text = str(text)
            if dropped is not None and step == "preprocess" and _DROPPED.match(text):
                continue
            if _is_finding(step, text):
                continue
            yield step, "warning", re.sub(rf"^{re.escape(step)}: ", "", text)
        if dropped is not None and step == "preprocess":
            yield dropped
            dropped = None
    if dropped is not None:
        yield dropped


def summarise(adata: ad.AnnData, n_top: int = 10) -> pd.DataFrame:
    """Key results of every method present in ``adata.uns``.

    Returns a DataFrame with columns ``method``, ``item``, ``value`` (strings): first the
    ``verdict`` row (:func:`verdict`), then a ``did not run`` row per method that did not run and
    one row per fact a step warned about (the dropped replicates in one row), then one row per
    number: cells per group, genes kept, SPARDA p-value and top genes, the top-loading genes of
    cPCA and PCPCA per component, QUADRO's error, AUC and signed terms, FANGS's features (one
    sentence when there is none), pseudobulk's genes.
    """
    rows = [("verdict", "verdict", verdict(adata))]
    rows += list(_failed_rows(adata)) + list(_warning_rows(adata)) + list(_rows(adata, n_top))
    return pd.DataFrame(rows, columns=["method", "item", "value"])


_STYLE = (
    "body{font-family:sans-serif;font-size:14px;margin:1em}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}"
    "th{background:#f0f0f0}tr.warning td{background:#fff3cd}tr.verdict td{background:#e3f0fb;font-weight:bold}"
)


def table_rows_html(table: pd.DataFrame) -> str:
    """The rows of ``summarise``'s table as HTML ``<tr>`` elements (verdict and warnings classed for colour)."""
    import html

    rows = []
    for method, item, value in table[["method", "item", "value"]].itertuples(index=False):
        cls = ' class="verdict"' if item == "verdict" else ' class="warning"' if item in ATTENTION else ""
        rows.append(f"<tr{cls}><td>{html.escape(str(method))}</td><td>{html.escape(str(item))}</td>"
                    f"<td>{html.escape(str(value))}</td></tr>")
    return "".join(rows)


def to_html(table: pd.DataFrame, title: str) -> str:
    """``summarise``'s table as a small self-contained HTML page (verdict and warning rows highlighted).

    The report shows it inline; the ``.tsv`` stays the file to read with code.
    """
    import html

    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body><h3>{html.escape(title)}</h3>"
            "<table><tr><th>step</th><th>item</th><th>value</th></tr>" + table_rows_html(table)
            + "</table></body></html>\n")


# --------------------------------------------------------------------------- the report's landing page

_KEY_GENE_COLUMNS = ("gene", "n_methods", "mean_target", "mean_background", "sparda_weight", "pseudobulk_log2fc",
                     "pseudobulk_padj", "quadro_mean_term")


def overview_html(name: str, table: pd.DataFrame, genes: pd.DataFrame | None = None,
                  figures: list[tuple[str, str]] = (), n_genes: int = 10) -> str:
    """A contrast's answer as an HTML fragment for the report's landing page (inline styles only).

    ``table``: :func:`summarise`'s table (its verdict row first); ``genes``: the gene table
    (:func:`scontrast.tables.gene_table`), its first ``n_genes`` rows shown; ``figures``: (PNG path,
    one-line legend) pairs, embedded as data URIs so that the page stays one file.
    """
    import base64
    import html

    verdict_rows = table.loc[table["item"] == "verdict", "value"].tolist()
    head = html.escape(verdict_rows[0]) if verdict_rows else "no verdict"
    cell = "border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top"
    parts = ['<div style="border:1px solid #bbb;border-radius:6px;padding:10px 14px;margin:14px 0">',
             f'<h3 style="margin:0 0 6px 0">{html.escape(name)}</h3>',
             f'<p style="background:#e3f0fb;padding:6px 8px;font-weight:bold;margin:0 0 8px 0">{head}</p>']
    attention = table[table["item"].isin(ATTENTION)]
    if len(attention):
        parts.append('<ul style="margin:0 0 8px 0">' + "".join(
            f'<li style="background:#fff3cd">{html.escape(str(m))}: {html.escape(str(v))}</li>'
            for m, v in attention[["method", "value"]].itertuples(index=False)) + "</ul>")
    if genes is not None and len(genes):
        cols = [c for c in _KEY_GENE_COLUMNS if c in genes.columns]
        rows = "".join("<tr>" + "".join(f'<td style="{cell}">{html.escape(_cell(r[c]))}</td>' for c in cols) + "</tr>"
                       for _, r in genes.head(n_genes).iterrows())
        named = "n_methods" not in genes or bool((genes["n_methods"].head(n_genes) > 0).any())
        why = ("most methods naming them first" if named else
               "no method names a gene here: ranked by pseudobulk's p-value, then SPARDA's weight and marginal W2")
        parts.append(f"<p style=\"margin:4px 0\"><b>Top {min(n_genes, len(genes))} genes</b> ({why}; the whole "
                     "table is genes.tsv):</p>"
                     f'<table style="border-collapse:collapse;font-size:12px"><tr>'
                     + "".join(f'<th style="{cell};background:#f0f0f0">{html.escape(c)}</th>' for c in cols)
                     + f"</tr>{rows}</table>")
    shown = []
    for path, legend in figures:  # side by side: the page stays short enough to reach every contrast
        with open(path, "rb") as fh:
            data = base64.b64encode(fh.read()).decode()
        shown.append(f'<figure style="margin:0;flex:1 1 0;min-width:0"><img src="data:image/png;base64,{data}" '
                     f'style="width:100%" alt="{html.escape(legend)}"><figcaption style="font-size:12px;color:#444">'
                     f"{html.escape(legend)}</figcaption></figure>")
    if shown:
        parts.append('<div style="display:flex;gap:12px;align-items:flex-start;margin:10px 0">' + "".join(shown)
                     + "</div>")
    rest = table[~table["item"].isin(("verdict", *ATTENTION))]
    parts.append('<details><summary style="cursor:pointer">the summary table</summary>'
                 '<table style="border-collapse:collapse;font-size:12px">'
                 + "".join(f'<tr><td style="{cell}">{html.escape(str(m))}</td><td style="{cell}">{html.escape(str(i))}'
                           f'</td><td style="{cell}">{html.escape(str(v))}</td></tr>'
                           for m, i, v in rest[["method", "item", "value"]].itertuples(index=False))
                 + "</table></details></div>")
    return "\n".join(parts) + "\n"


def _cell(value) -> str:
    if isinstance(value, float | np.floating):
        return "" if not np.isfinite(value) else f"{value + 0.0:.3g}"  # + 0.0: -0.0 reads as 0
    if isinstance(value, bool | np.bool_):
        return "yes" if value else ""
    return str(value)
