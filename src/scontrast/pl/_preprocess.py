"""QC figure of the preprocessing rule."""

from __future__ import annotations

from collections.abc import Mapping

import anndata as ad
import matplotlib.pyplot as plt
import numpy as np

from ..core import TARGET_KEY
from ._style import BACKGROUND_COLOUR, TARGET_COLOUR, group_labels, literal, titled

# what each QC metric is for each declared input (the metrics are computed on the input values)
_LABELS = {
    "raw": {"n_genes_by_counts": "detected genes per cell", "total_counts": "total counts per cell",
            "pct_counts_mt": "mitochondrial share of counts (%)"},
    "tpm": {"n_genes_by_counts": "detected genes per cell", "total_counts": "sum of the TPM/CPM values per cell",
            "pct_counts_mt": "mitochondrial share of the values (%)"},
    "normalized": {"n_genes_by_counts": "detected genes per cell",
                   "total_counts": "sum of the log-normalised values per cell"},
}


def _info(adata: ad.AnnData) -> Mapping:
    info = adata.uns.get("scontrast", {})
    info = info.get("preprocess", {}) if isinstance(info, Mapping) else {}
    return info if isinstance(info, Mapping) else {}


def preprocess(adata: ad.AnnData, figsize: tuple[float, float] | None = None) -> plt.Figure:
    """Per-group distributions of the QC metrics of a preprocessed AnnData, with the QC limits.

    One violin panel per metric (background, then target, in the configured labels and the
    fixed group colours) of the kept cells (``obs``), with the cells QC removed
    (``uns['scontrast']['preprocess']['qc_removed']``) as grey points and the cells that passed QC
    but left with a replicate the design dropped (``qc_removed['reason']``) as open diamonds;
    the limits ``min_genes`` and ``max_pct_mito`` are drawn where they applied. Panels are
    named by what the metric is for the declared input (counts, TPM/CPM values or
    log-normalised values; no mitochondrial panel for log-normalised input or without
    mitochondrial genes). The last panel is the mean-dispersion plot of the genes with the
    highly variable ones highlighted. The title names the dataset when preprocessing recorded it.

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> import scontrast as sct
    >>> rng = np.random.default_rng(0)
    >>> counts = rng.poisson(5.0, size=(120, 200)).astype(np.float32)
    >>> counts[:60, :5] = rng.poisson(20.0, size=(60, 5))   # genes g0-g4 four times higher in the target
    >>> obs = pd.DataFrame({"condition": np.repeat(["disease", "healthy"], 60),
    ...                     "donor": np.tile(np.repeat(["d1", "d2", "d3"], 20), 2)}, index=[f"c{i}" for i in range(120)])
    >>> adata = ad.AnnData(counts, obs=obs, var=pd.DataFrame(index=[f"g{i}" for i in range(200)]))
    >>> pre = sct.preprocess(adata, groupby="condition", target=["disease"], background=["healthy"], counts="raw",
    ...                      replicate="donor", paired=True, min_genes=10, n_top_genes=50)
    >>> fig = sct.pl.preprocess(pre)                        # QC of the kept and removed cells, the genes' dispersion
    >>> len(fig.axes) >= 2
    True
    """
    info = _info(adata)
    params = info.get("params", {}) if isinstance(info.get("params"), Mapping) else {}
    counts = str(params.get("counts", "raw"))
    removed = info.get("qc_removed", {}) if isinstance(info.get("qc_removed"), Mapping) else {}
    removed_target = np.asarray(removed.get("target", []), dtype=bool)
    # cells QC removed apart from those that left with a replicate the design dropped (or had none):
    # the latter passed QC, and a figure that calls them "removed by QC" misleads
    reason = np.asarray(removed.get("reason", [""] * removed_target.size), dtype=str)
    design = np.isin(reason, list(_DESIGN_REASONS))
    limits = _limits(info, params)
    metrics = _metrics(adata, info, counts)
    if figsize is None:
        figsize = (3.5 * (len(metrics) + 1), 3.8)
    fig, axes = plt.subplots(1, len(metrics) + 1, figsize=figsize, layout="constrained")
    axes = np.atleast_1d(axes)
    is_target = adata.obs[TARGET_KEY].to_numpy(dtype=bool)
    t_label, b_label = group_labels(adata)
    rng = np.random.default_rng(0)  # jitter of the removed cells' points only
    for ax, (key, label) in zip(axes, metrics):
        kept = adata.obs[key].to_numpy(dtype=float)
        gone = np.asarray(removed.get(key, []), dtype=float)
        groups = [(b_label, BACKGROUND_COLOUR, kept[~is_target], *_split(gone, ~removed_target, design)),
                  (t_label, TARGET_COLOUR, kept[is_target], *_split(gone, removed_target, design))]
        _metric_panel(ax, groups, rng, limit=limits.get(key), label=label)
    _hvg_panel(axes[-1], adata)
    # one key under the panels for the removed cells and the limits (inside a panel it covered the violins)
    keyed = {}
    for ax in axes[:-1]:
        for handle, text in zip(*ax.get_legend_handles_labels()):
            keyed.setdefault(text, handle)
    if keyed:
        fig.legend(list(keyed.values()), list(keyed), loc="outside lower center", ncols=min(len(keyed), 4),
                   fontsize="small", frameon=False)
    fig.suptitle(titled(f"quality control: {t_label} vs {b_label} ({counts} input)", adata))
    return fig


def _limits(info: Mapping, params: Mapping) -> dict:
    """The QC limits drawn, per metric: (parameter name, value), where they applied."""
    limits = {}
    if "min_genes" in params:
        limits["n_genes_by_counts"] = ("min_genes", float(params["min_genes"]))
    if info.get("mito_filter") and "max_pct_mito" in params:
        limits["pct_counts_mt"] = ("max_pct_mito", float(params["max_pct_mito"]))
    return limits


def _metrics(adata: ad.AnnData, info: Mapping, counts: str) -> list[tuple[str, str]]:
    """(obs column, axis label) of the QC metrics shown: those present and not all zero."""
    names = _LABELS.get(counts, _LABELS["raw"])
    return [
        (key, label) for key, label in names.items()
        if key in adata.obs and (key != "pct_counts_mt" or int(info.get("n_mito_genes", 1)) > 0)
        and np.asarray(adata.obs[key].to_numpy(dtype=float)).any()
    ]


_DESIGN_REASONS = {"replicate": "dropped with their replicate", "no_replicate": "without a replicate"}


def _split(gone: np.ndarray, in_group: np.ndarray, design: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values of the group's cells removed by QC, values of those that left with the design) of one metric."""
    if not gone.size:
        return gone, gone
    return gone[in_group & ~design], gone[in_group & design]


def _metric_panel(ax, groups, rng, *, limit, label: str) -> None:
    """One metric: a violin per group (name, colour, kept values, values removed by QC, values of cells that left
    with their replicate), the removed cells as points: grey dots (QC) and open diamonds (the design)."""
    ticks, labelled, labelled_design = [], False, False
    for pos, (name, colour, k, g, d) in enumerate(groups, start=1):
        values = k
        if values.size > 1 and np.ptp(values) > 0:
            parts = ax.violinplot([values], positions=[pos], showmedians=True)
            for body in parts["bodies"]:
                body.set_facecolor(colour)
                body.set_edgecolor(colour)
                body.set_alpha(0.45)
            for line in ("cbars", "cmins", "cmaxes", "cmedians"):
                parts[line].set_color(colour)
        elif values.size:
            ax.scatter(np.full(values.size, pos), values, s=6, c=colour)
        if g.size:
            ax.scatter(pos + rng.uniform(-0.12, 0.12, g.size), g, s=5, c="0.45", zorder=3,
                       label=None if labelled else "removed by QC")
            labelled = True
        if d.size:
            ax.scatter(pos + 0.25 + rng.uniform(-0.06, 0.06, d.size), d, s=9, marker="D", facecolors="none",
                       edgecolors="#8c564b", linewidths=0.6, zorder=3,
                       label=None if labelled_design else "passed QC, dropped with their replicate (design)")
            labelled_design = True
        ticks.append(f"{name}\n{k.size} kept" + (f"\n{g.size} removed by QC" if g.size else "")
                     + (f"\n{d.size} dropped\n(replicate)" if d.size else ""))
    ax.set_xticks([1, 2], [literal(t) for t in ticks])
    if limit is not None:
        pname, value = limit
        ax.axhline(value, color="0.2", ls="--", lw=1, label=f"{pname} = {value:g}")
    ax.set_ylabel(label)
    ax.ticklabel_format(axis="y", useOffset=False, style="plain")


def _hvg_panel(ax, adata: ad.AnnData) -> None:
    """The genes' mean against their (normalised) dispersion, the highly variable ones highlighted."""
    hvg = adata.var["highly_variable"].to_numpy(dtype=bool)
    if "means" in adata.var and "dispersions_norm" in adata.var:
        x, y = adata.var["means"].to_numpy(), adata.var["dispersions_norm"].to_numpy()
        ax.set_xlabel("mean of the log-normalised expression")
        ax.set_ylabel("normalised dispersion")
    elif "means" in adata.var and "variances" in adata.var:  # the moments, read beside X (io.gene_moments)
        x, y = adata.var["means"].to_numpy(), adata.var["variances"].to_numpy()
        ax.set_xlabel("mean of the log-normalised expression")
        ax.set_ylabel("variance")
    else:
        X = adata.X
        x = np.asarray(X.mean(axis=0)).ravel()
        y = np.asarray(X.power(2).mean(axis=0)).ravel() - x**2 if hasattr(X, "power") else np.asarray(X).var(axis=0)
        ax.set_xlabel("mean of the log-normalised expression")
        ax.set_ylabel("variance")
    ax.scatter(x[~hvg], y[~hvg], s=3, c="lightgrey", label="other genes", rasterized=True)
    ax.scatter(x[hvg], y[hvg], s=3, c="0.15", label=f"highly variable ({hvg.sum()})", rasterized=True)
    ax.legend(loc="best", fontsize="small", markerscale=3)
    ax.set_title("highly variable genes")
