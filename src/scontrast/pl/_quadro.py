"""Figure of ``tl.quadro``: cross-validated score distributions per group and the ROC curve."""

from __future__ import annotations

import anndata as ad
import numpy as np
from matplotlib.figure import Figure
from sklearn.metrics import roc_auc_score, roc_curve

from ..io import ScontrastError
from ..tl._common import TARGET_KEY


def quadro(adata: ad.AnnData, *, key: str = TARGET_KEY, score_key: str = "quadro_score", bins: int = 40,
           ax=None) -> Figure:
    """Histograms of the out-of-fold QUADRO score per group and its ROC curve.

    Parameters
    ----------
    adata : AnnData after ``tl.quadro`` (``obs[score_key]``, ``obs[key]``).
    key : boolean obs column of the groups (True = target).
    score_key : obs column of the scores.
    bins : histogram bins.
    ax : None or a sequence of two Axes (scores, ROC) to draw into.

    Returns
    -------
    matplotlib Figure.
    """
    for col in (score_key, key):
        if col not in adata.obs:
            raise ScontrastError(f"obs['{col}'] is missing: run scontrast.tl.quadro first")
    score = adata.obs[score_key].to_numpy(dtype=float)
    is_target = adata.obs[key].to_numpy(dtype=bool)
    if ax is None:
        fig = Figure(figsize=(10, 4), layout="constrained")
        axes = fig.subplots(1, 2)
    else:
        axes = list(ax)
        if len(axes) != 2:
            raise ScontrastError("ax must hold two Axes (scores, ROC)")
        fig = axes[0].figure
    info = adata.uns.get("quadro", {})

    # clip to the 1-99% range so that a few heavy-tailed scores do not squash the histograms
    lo, hi = np.quantile(score, [0.01, 0.99])
    edges = np.linspace(lo, hi, bins + 1) if hi > lo else bins
    for mask, label, colour in ((~is_target, "background", "tab:blue"), (is_target, "target", "tab:red")):
        axes[0].hist(np.clip(score[mask], lo, hi), bins=edges, density=True, alpha=0.55, color=colour,
                     label=f"{label} (n={int(mask.sum())})")
    axes[0].set_xlabel("cross-validated QUADRO score Q(x), clipped to its 1-99% range")
    axes[0].set_ylabel("density")
    title = "QUADRO scores (out of fold)"
    if "cv_error" in info:
        title += f"\nCV error {float(info['cv_error']):.3f}"
    axes[0].set_title(title)
    axes[0].legend(frameon=False)

    fpr, tpr, _ = roc_curve(is_target, score)
    auc = roc_auc_score(is_target, score)
    axes[1].plot(fpr, tpr, color="black", label=f"QUADRO (AUC {auc:.3f})")
    axes[1].plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=0.8, label="chance")
    axes[1].set_xlim(0, 1)
    axes[1].set_ylim(0, 1.01)
    axes[1].set_xlabel("false positive rate (background called target)")
    axes[1].set_ylabel("true positive rate (target called target)")
    axes[1].set_title("ROC of the cross-validated scores")
    axes[1].legend(loc="lower right", frameon=False)
    return fig
