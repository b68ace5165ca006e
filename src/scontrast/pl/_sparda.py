"""Figure of SPARDA: the weights of the selected genes and the projected populations."""

from __future__ import annotations

import anndata as ad
import matplotlib.pyplot as plt
import numpy as np

from ..bounds import check_count
from ..core import TARGET_KEY, ScontrastError
from ._style import BACKGROUND_COLOUR as _BACKGROUND_COLOUR
from ._style import TARGET_COLOUR as _TARGET_COLOUR
from ._style import group_labels, literal, titled


def _weights_panel(ax, adata: ad.AnnData, n_genes: int) -> None:
    w = adata.var["sparda_weight"].to_numpy(dtype=float)
    order = np.argsort(-np.abs(w), kind="stable")
    order = order[np.abs(w[order]) > 0][:n_genes]
    if order.size == 0:
        ax.text(0.5, 0.5, "no gene selected", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    y = np.arange(order.size)[::-1]
    colours = np.where(w[order] > 0, _TARGET_COLOUR, _BACKGROUND_COLOUR)
    ax.barh(y, w[order], color=colours)
    ax.set_yticks(y)
    ax.set_yticklabels([literal(g) for g in adata.var_names[order]], fontsize=8 if order.size <= 25 else 6)
    ax.axvline(0, color="k", lw=0.6)
    n_sel = int(adata.var["sparda_selected"].sum())
    ax.set_xlabel("weight (+ = target side)")
    ax.set_title(f"top {order.size} of {n_sel} selected genes")


def _density_panel(ax, proj: np.ndarray, is_target: np.ndarray, title: str, labels: tuple[str, str]) -> None:
    lo, hi = np.percentile(proj, [0.5, 99.5])
    pad = 0.05 * (hi - lo if hi > lo else 1.0)
    bins = np.linspace(lo - pad, hi + pad, 40)
    ax.hist(proj[~is_target], bins=bins, density=True, alpha=0.55, color=_BACKGROUND_COLOUR,
            label=literal(f"{labels[1]} (n={int((~is_target).sum())})"))
    ax.hist(proj[is_target], bins=bins, density=True, alpha=0.55, color=_TARGET_COLOUR,
            label=literal(f"{labels[0]} (n={int(is_target.sum())})"))
    ax.set_xlabel("projection on the SPARDA direction")
    ax.set_ylabel("density")
    ax.set_title(title)
    ax.legend(frameon=False, fontsize=8)


def sparda(
    adata: ad.AnnData,
    *,
    n_genes: int = 20,
    key: str = TARGET_KEY,
    figsize=(11.5, 4.6),
    ax=None,
) -> plt.Figure:
    """Weights of the top genes and projected target/background densities.

    Needs only the annotations ``tl.sparda`` writes (``var['sparda_weight']``,
    ``var['sparda_selected']``, ``obsm['X_sparda']``, ``uns['sparda']``) and
    ``obs[key]``; ``X`` is not read.

    Left: the ``n_genes`` largest weights (by magnitude) of the first direction
    (red positive = the gene contributes to the target side, blue negative = to the
    background side; the direction is oriented so that the target cells project
    higher on average).  Right: histograms of the projections
    ``obsm['X_sparda'][:, 0]`` of target and background cells, titled with the
    Wasserstein divergence and the p-value (``<=`` when it is its permutation floor).  With ``ax`` (a sequence of
    two Axes) the panels are drawn there; ``figsize`` (width, height in inches) is
    used otherwise.
    """
    for slot, name in ((adata.var, "sparda_weight"), (adata.var, "sparda_selected"), (adata.obsm, "X_sparda")):
        if name not in slot:
            raise ScontrastError(f"adata: '{name}' is missing; run scontrast.tl.sparda first")
    if "sparda" not in adata.uns:
        raise ScontrastError("adata: uns['sparda'] is missing; run scontrast.tl.sparda first")
    if key not in adata.obs:
        raise ScontrastError(f"key: obs column '{key}' does not exist")
    check_count(n_genes, "n_genes", 1, "sparda", key="plot.n_genes")
    info = adata.uns["sparda"]
    if ax is None:
        fig, axes = plt.subplots(1, 2, figsize=figsize, gridspec_kw={"width_ratios": [1, 1.3]})
    else:
        axes = list(ax)
        if len(axes) != 2:
            raise ScontrastError(f"ax: expected two Axes, got {len(axes)}")
        fig = axes[0].figure
    _weights_panel(axes[0], adata, n_genes)
    proj = np.asarray(adata.obsm["X_sparda"])[:, 0]
    is_target = adata.obs[key].to_numpy(dtype=bool)
    p = float(info.get("pvalue", np.nan))
    test = info.get("test")
    if not np.isfinite(p):
        ptxt = "no permutation test"
    elif test is not None and str(test["method"]) == "replicate":
        ptxt = f"p = {p:.3g} per replicate (smallest possible {float(test['floor']):.2g})"
    elif test is not None and bool(test["bound"]):
        ptxt = f"p <= {p:.2g} ({int(test['n_permutations'])} permutations)"
    else:
        ptxt = f"p = {p:.3g}"
    lam = float(info.get("lam", np.nan))
    title = f"W2$^2$ = {float(info['divergence']):.3g}, {ptxt}\n(lambda = {lam:.3g})"
    target_label, background_label = group_labels(adata)
    _density_panel(axes[1], proj, is_target, title, (target_label, background_label))
    fig.suptitle(titled(f"SPARDA: the sparse direction of largest Wasserstein difference, {target_label} vs "
                        f"{background_label}", adata))
    fig.tight_layout()
    return fig


__all__ = ["sparda"]
