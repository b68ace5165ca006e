"""QC figure of the preprocessing rule."""

from __future__ import annotations

import anndata as ad
import matplotlib.pyplot as plt
import numpy as np

from ..core import TARGET_KEY

_METRICS = (("n_genes_by_counts", "detected genes per cell"),
            ("total_counts", "total counts per cell"),
            ("pct_counts_mt", "mitochondrial counts (%)"))


def preprocess(adata: ad.AnnData, figsize=(11, 3.4)) -> plt.Figure:
    """Per-group distributions of the QC metrics of a preprocessed AnnData.

    One violin panel per metric in ``obs`` (background vs target), plus the
    mean-dispersion plot of the genes with the highly variable ones highlighted.
    """
    # A metric that is zero everywhere (no mitochondrial gene in the panel) says nothing.
    metrics = [(k, label) for k, label in _METRICS if k in adata.obs and adata.obs[k].to_numpy().any()]
    fig, axes = plt.subplots(1, len(metrics) + 1, figsize=figsize, layout="constrained")
    is_target = adata.obs[TARGET_KEY].to_numpy(dtype=bool)
    for ax, (key, label) in zip(axes, metrics):
        values = adata.obs[key].to_numpy(dtype=float)
        ax.violinplot([values[~is_target], values[is_target]], showmedians=True)
        ax.set_xticks([1, 2], [f"background\n(n={int((~is_target).sum())})", f"target\n(n={int(is_target.sum())})"])
        ax.set_ylabel(label)
        ax.set_title(label)
    ax = axes[-1]
    hvg = adata.var["highly_variable"].to_numpy(dtype=bool)
    if "means" in adata.var and "dispersions_norm" in adata.var:
        x, y = adata.var["means"].to_numpy(), adata.var["dispersions_norm"].to_numpy()
        ax.set_xlabel("mean expression")
        ax.set_ylabel("normalised dispersion")
    else:
        X = adata.X
        x = np.asarray(X.mean(axis=0)).ravel()
        y = np.asarray(X.power(2).mean(axis=0)).ravel() - x**2 if hasattr(X, "power") else np.asarray(X).var(axis=0)
        ax.set_xlabel("mean expression")
        ax.set_ylabel("variance")
    ax.scatter(x[~hvg], y[~hvg], s=3, c="lightgrey", label="other genes", rasterized=True)
    ax.scatter(x[hvg], y[hvg], s=3, c="tab:red", label=f"highly variable ({hvg.sum()})", rasterized=True)
    ax.legend(loc="best", fontsize="small", markerscale=3)
    ax.set_title("highly variable genes")
    return fig
