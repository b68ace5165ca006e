"""One table per dataset of the numbers a reader looks for first (the report's summary)."""

from __future__ import annotations

from collections.abc import Mapping

import anndata as ad
import numpy as np
import pandas as pd

__all__ = ["summarise"]


def _fmt(value) -> str:
    if isinstance(value, (float, np.floating)):
        return "nan" if np.isnan(value) else f"{value:.4g}"
    return str(value)


def _top_genes(adata: ad.AnnData, n: int) -> str:
    if "sparda_weight" not in adata.var:
        return ", ".join(map(str, adata.uns["sparda"].get("selected_genes", [])[:n]))
    w = adata.var["sparda_weight"].to_numpy(dtype=float)
    order = np.argsort(-np.abs(w), kind="stable")[:n]
    return ", ".join(f"{adata.var_names[i]} ({w[i]:+.2f})" for i in order if w[i] != 0)


def _rows(adata: ad.AnnData, n_top: int):
    pre = adata.uns.get("scontrast", {}).get("preprocess")
    if isinstance(pre, Mapping):
        p = pre["params"]
        yield "data", "contrast", f"{list(p['target'])} vs {list(p['background'])} in obs['{p['groupby']}']"
        yield "data", "cells (target / background)", f"{pre['n_cells_kept']['target']} / {pre['n_cells_kept']['background']}"
        yield "data", "genes kept (highly variable)", f"{pre['n_genes_kept']} ({pre['n_highly_variable']})"
    if "sparda" in adata.uns:
        s = adata.uns["sparda"]
        yield "sparda", "permutation p-value", _fmt(s.get("pvalue", float("nan")))
        yield "sparda", "divergence (W2^2 along beta)", _fmt(s.get("divergence"))
        yield "sparda", "genes selected", _fmt(s.get("n_selected"))
        yield "sparda", "top genes (weight)", _top_genes(adata, n_top)
    if "cpca" in adata.uns:
        c = adata.uns["cpca"]
        yield "cpca", "alphas chosen", ", ".join(_fmt(a) for a in np.asarray(c.get("alphas", []))[1:])
    if "pcpca" in adata.uns:
        c = adata.uns["pcpca"]
        yield "pcpca", "gamma' (admissible below)", f"{_fmt(c['gamma_prime'])} ({_fmt(c['max_gamma_prime'])})"
        yield "pcpca", "held-out log-likelihood (PPCA)", f"{_fmt(c['heldout_loglik'])} ({_fmt(c['heldout_loglik_ppca'])})"
    if "quadro" in adata.uns:
        q = adata.uns["quadro"]
        for key, label in (("cv_error", "cross-validated error"), ("cv_auc", "cross-validated AUC"),
                           ("rayleigh_quotient", "Rayleigh quotient")):
            if key in q:
                yield "quadro", label, _fmt(q[key])
    if "fangs" in adata.uns:
        f = adata.uns["fangs"]
        yield "fangs", "features K (estimate)", _fmt(f.get("n_features"))
        ks, counts = np.asarray(f.get("samples_K_values", [])), np.asarray(f.get("samples_K_counts", []))
        if ks.size:
            yield "fangs", "K over samples (K: count)", ", ".join(f"{k}: {c}" for k, c in zip(ks, counts))
        yield "fangs", "expected FARO loss: FANGS vs draws", f"{_fmt(f.get('expected_loss'))} vs {_fmt(f.get('draws_expected_loss'))}"


def summarise(adata: ad.AnnData, n_top: int = 10) -> pd.DataFrame:
    """Key results of every method present in ``adata.uns``.

    Returns a DataFrame with columns ``method``, ``item``, ``value`` (strings),
    one row per number: cells per group, genes kept, SPARDA p-value and top
    genes, QUADRO cross-validated error, FANGS K and expected loss vs draws...
    """
    return pd.DataFrame(list(_rows(adata, n_top)), columns=["method", "item", "value"])
