"""Figure of ``tl.quadro``: cross-validated score distributions per group and the ROC curve."""

from __future__ import annotations

import anndata as ad
import numpy as np
from matplotlib.figure import Figure
from pandas.api.types import is_bool_dtype
from sklearn.metrics import roc_auc_score, roc_curve

from ..bounds import check_count
from ..core import TARGET_KEY, ScontrastError
from ..tl._common import renamed
from ._style import BACKGROUND_COLOUR, TARGET_COLOUR, group_labels, literal, titled


def _scored_classes(adata: ad.AnnData, flag: str, score_key: str):
    """(scores, second-class mask, [first, second]) of the cells ``tl.quadro`` scored; ``flag``: the groups' boolean column."""
    info = adata.uns.get("quadro", {})
    groupby = info.get("params", {}).get("groupby")
    score = adata.obs[score_key].to_numpy(dtype=float)
    if groupby not in (None, "None") and groupby in adata.obs and is_bool_dtype(adata.obs[groupby]):
        flag = groupby  # tl.quadro's groupby was a boolean target/background split
    if groupby in (None, "None") or flag == groupby:  # "None": files written before None was stored as None
        if flag not in adata.obs:
            raise ScontrastError(f"obs['{flag}'] is missing: run scontrast.tl.quadro first")
        target_label, background_label = group_labels(adata)
        return score, adata.obs[flag].to_numpy(dtype=bool), [background_label, target_label]
    names = [str(v) for v in info["confusion_labels"]]
    col = adata.obs[groupby].astype("string")
    used = col.isin(names).fillna(False).to_numpy(dtype=bool) & np.isfinite(score)
    return score[used], (col[used] == names[1]).to_numpy(dtype=bool), names


def _terms_panel(ax, info, target: str, n_terms: int = 12) -> None:
    """The final model's largest terms, signed toward ``target``: mean terms, spread terms and gene pairs."""
    from ..summary import quadro_terms

    terms = quadro_terms(info)
    rows = [(f"{g} (mean)", w) for g, w in terms["linear"]] + [(f"{g} (spread)", w) for g, w in terms["spread"]] + [
        (f"{g} (pair)", w) for g, w in terms["pairs"]]
    rows = sorted(rows, key=lambda r: -abs(r[1]))
    if not rows:
        ax.text(0.5, 0.5, "no gene term: the final model\nis the intercept alone", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_axis_off()
        return
    shown = rows[:n_terms]
    y = (max(len(shown), 6) - 1) - np.arange(len(shown))  # from the top, as many rows as 6 at least
    w = np.array([r[1] for r in shown])
    ax.barh(y, w, color=np.where(w > 0, TARGET_COLOUR, BACKGROUND_COLOUR), height=0.7)
    ax.set_yticks(y, [literal(r[0]) for r in shown], fontsize=9 if len(shown) <= 12 else 7)
    ax.set_ylim(-0.6, max(len(shown), 6) - 0.4)
    ax.axvline(0, color="black", lw=0.6)
    ax.set_xlabel(literal(f"weight (+ pushes to {target}; standardised genes)"))
    more = f", {len(rows) - len(shown)} more in the summary" if len(rows) > len(shown) else ""
    ax.set_title(f"the model's terms ({len(rows)}{more})")


def quadro(adata: ad.AnnData, *, groupby: str = TARGET_KEY, score_key: str = "quadro_score", bins: int = 40,
           ax=None, key: str | None = None) -> Figure:
    """Histograms of the out-of-fold QUADRO score per group and its ROC curve.

    Needs only annotations (``obs``, ``uns``), not the expression matrix.

    Parameters
    ----------
    adata : AnnData after ``tl.quadro`` (``obs[score_key]``, ``obs[groupby]``, ``uns['quadro']``).
    groupby : boolean obs column of the groups (True = target).
    score_key : obs column of the scores.
    bins : histogram bins (>= 1).
    ax : None or a sequence of two Axes (scores, ROC) to draw into.
    key : the deprecated name of ``groupby`` (a ``FutureWarning``).

    Returns
    -------
    matplotlib Figure.

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> import scontrast as sct
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 20))
    >>> X[:40, :3] += 2.0                                 # the target's genes g0-g2 are higher
    >>> adata = ad.AnnData(X, var=pd.DataFrame(index=[f"g{i}" for i in range(20)]))
    >>> adata.obs["scontrast_target"] = np.arange(80) < 40  # what sct.preprocess writes
    >>> sct.tl.quadro(adata, genes="all", random_state=0)
    >>> fig = sct.pl.quadro(adata)                          # held-out scores per group and the ROC curve
    >>> len(fig.axes) >= 2
    True
    """
    groupby = renamed(groupby, key, new_name="groupby", old_name="key", default=TARGET_KEY, who="pl.quadro")
    bins = check_count(bins, "bins", 1, "quadro", key="plot.bins")
    if score_key not in adata.obs:
        raise ScontrastError(f"obs['{score_key}'] is missing: run scontrast.tl.quadro first")
    score, is_target, names = _scored_classes(adata, groupby, score_key)
    if ax is None:
        fig = Figure(figsize=(16.5, 4.8), layout="constrained")
        axes = fig.subplots(1, 3, width_ratios=[1.25, 1, 1])
    else:
        axes = list(ax)
        if len(axes) not in (2, 3):
            raise ScontrastError("ax: expected two Axes (scores, ROC) or three (and the terms)")
        fig = axes[0].figure
    info = adata.uns.get("quadro", {})
    first, second = names
    # clip to the 1-99% range so that a few heavy-tailed scores do not squash the histograms
    lo, hi = np.quantile(score, [0.01, 0.99])
    edges = np.linspace(lo, hi, bins + 1) if hi > lo else bins
    for mask, label, colour in ((~is_target, first, BACKGROUND_COLOUR), (is_target, second, TARGET_COLOUR)):
        axes[0].hist(np.clip(score[mask], lo, hi), bins=edges, density=True, alpha=0.55, color=colour,
                     label=literal(f"{label} (n={int(mask.sum())})"))
    if lo <= 0.0 <= hi:
        axes[0].axvline(0.0, color="black", linestyle="--", linewidth=0.8, label=literal(f"cut ({second} above)"))
    axes[0].set_xlabel("cross-validated QUADRO score Q(x) - threshold, clipped to its 1-99% range")
    axes[0].set_ylabel("density")
    auc = roc_auc_score(is_target, score)
    # balanced error and AUC first: on groups of different sizes the raw error flatters a rule
    # that calls every cell the larger group
    bal = float(info["balanced_error"]) if "balanced_error" in info else float(
        np.mean([np.mean((score[m] > 0) != is_target[m]) for m in (~is_target, is_target) if m.any()]))
    title = f"QUADRO out of fold: balanced error {bal:.3f}, AUC {auc:.3f}"
    if "cv_error" in info:
        base = dict(info.get("majority_baseline", {}))
        title += f"\nerror {float(info['cv_error']):.3f}"
        if "error" in base:
            label = {"background": first, "target": second}.get(str(base["label"]), str(base["label"]))
            title += f" (all called {label}: {float(base['error']):.3f})"
    axes[0].set_title(literal(title))
    # room above the bars for the legend, whose white box hides the cut's line behind its text ("best" is slow on a
    # busy machine, and warns)
    axes[0].set_ylim(0, axes[0].get_ylim()[1] * 1.35)
    axes[0].legend(loc="upper center", frameon=True, framealpha=0.9, edgecolor="none")

    fpr, tpr, _ = roc_curve(is_target, score)
    axes[1].plot(fpr, tpr, color="black", label=f"QUADRO (AUC {auc:.3f})")
    axes[1].plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=0.8, label="chance")
    axes[1].set_xlim(0, 1)
    axes[1].set_ylim(0, 1.01)
    axes[1].set_xlabel(literal(f"false positive rate ({first} called {second})"))
    axes[1].set_ylabel(literal(f"true positive rate ({second} called {second})"))
    axes[1].set_title("ROC of the cross-validated scores")
    axes[1].legend(loc="lower right", frameon=False)
    if len(axes) == 3:
        _terms_panel(axes[2], info, second)
    fig.suptitle(titled(f"QUADRO: {second} vs {first}", adata))
    return fig
