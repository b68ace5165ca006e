"""Figure of the replicate-level pseudobulk reference: a volcano plot with SPARDA's genes marked."""

from __future__ import annotations

import anndata as ad
import matplotlib.pyplot as plt
import numpy as np

from ..core import ScontrastError, check_int
from ._style import BACKGROUND_COLOUR, TARGET_COLOUR, group_labels, literal, place_labels, titled


def pseudobulk(adata: ad.AnnData, *, n_labels: int = 10, figsize=(7.5, 5.2), ax=None) -> plt.Figure:
    """log2 fold change against -log10 p of every tested gene (DESeq2 over replicates).

    Genes at ``padj < alpha`` are coloured by side (red: higher in the target group); SPARDA's
    selected genes (``var['sparda_selected']``, when present) are ringed in black and the
    ``n_labels`` genes of smallest p-value are named. Needs only ``tl.pseudobulk``'s slots.

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
    >>> sct.tl.pseudobulk(pre)
    >>> fig = sct.pl.pseudobulk(pre)
    >>> len(fig.axes)
    1
    """
    for name in ("pseudobulk_log2fc", "pseudobulk_pvalue", "pseudobulk_padj"):
        if name not in adata.var:
            raise ScontrastError(f"adata: var['{name}'] is missing; run scontrast.tl.pseudobulk first")
    check_int(n_labels, "n_labels", 0)
    info = adata.uns["pseudobulk"]
    alpha = float(info["params"]["alpha"])
    lfc = adata.var["pseudobulk_log2fc"].to_numpy(dtype=float)
    p = adata.var["pseudobulk_pvalue"].to_numpy(dtype=float)
    padj = adata.var["pseudobulk_padj"].to_numpy(dtype=float)
    ok = np.isfinite(lfc) & np.isfinite(p)
    y = -np.log10(np.clip(p, 1e-300, 1))
    sig = ok & (padj < alpha)
    fig, ax = plt.subplots(figsize=figsize) if ax is None else (ax.figure, ax)
    ax.scatter(lfc[ok & ~sig], y[ok & ~sig], s=6, color="0.7", linewidths=0, label="not significant")
    for side, colour, label in ((lfc > 0, TARGET_COLOUR, group_labels(adata)[0]),
                                (lfc <= 0, BACKGROUND_COLOUR, group_labels(adata)[1])):
        pick = sig & side
        ax.scatter(lfc[pick], y[pick], s=12, color=colour, linewidths=0,
                   label=literal(f"padj < {alpha:g}, higher in {label}"))
    if "sparda_selected" in adata.var:
        chosen = ok & adata.var["sparda_selected"].to_numpy(dtype=bool)
        ax.scatter(lfc[chosen], y[chosen], s=40, facecolors="none", edgecolors="k", linewidths=0.9,
                   label=f"SPARDA's genes ({int(chosen.sum())})")
    order = np.flatnonzero(ok)[np.argsort(p[ok], kind="stable")][:n_labels]
    ax.axvline(0, color="k", lw=0.5)
    ax.set_xlabel("log2 fold change (target over background)")
    ax.set_ylabel("-log10 p (DESeq2 Wald, per replicate)")
    ax.legend(frameon=False, fontsize=7, loc="upper left")
    title = (f"pseudobulk DESeq2 {info['design_formula']}: {int(info['n_significant'])} genes at padj < "
             f"{alpha:g}\n{info['design']}")
    ax.set_title(titled(title, adata), fontsize=10)
    if order.size:  # room above the points for their names
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo, hi + 0.12 * (hi - lo))
    fig.tight_layout()
    # the names of the smallest p-values, placed once the layout is final so that none covers another
    missed = place_labels(ax, lfc[order], y[order], adata.var_names[order].astype(str), fontsize=7)
    if missed:
        ax.set_title(titled(f"{title} ({missed} of the {order.size} smallest p not named: no room)", adata),
                     fontsize=10)
    return fig


__all__ = ["pseudobulk"]
