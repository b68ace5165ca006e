"""Figure of SPARDA: the weights of the selected genes and the projected populations."""

from __future__ import annotations

import anndata as ad
import matplotlib.pyplot as plt
import numpy as np

from ..bounds import check_count
from ..core import TARGET_KEY, ScontrastError
from ..tl._common import renamed
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
    y = (max(order.size, 6) - 1) - np.arange(order.size)  # from the top, the largest weight first
    colours = np.where(w[order] > 0, _TARGET_COLOUR, _BACKGROUND_COLOUR)
    ax.barh(y, w[order], color=colours, height=0.7)
    ax.set_yticks(y)
    # a short list names each weight beside its gene and keeps readable labels
    names = [f"{g} ({wi:+.2f})" if order.size <= 10 else g for g, wi in zip(adata.var_names[order], w[order])]
    ax.set_yticklabels([literal(g) for g in names], fontsize=10 if order.size <= 10 else 8 if order.size <= 25 else 6)
    # a few genes keep the bars' thickness of a longer list (one gene is not a wall of colour)
    ax.set_ylim(-0.6, max(order.size, 6) - 0.4)
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
    ax.legend(frameon=False, fontsize=8, loc="upper center")  # between the groups' modes; "best" is slow on a busy machine, and warns


def _donor_means(adata: ad.AnnData, groupby: str) -> dict | None:
    """Each replicate's mean projection per group when the design declares replicates, else None.

    ``{'word': obs column, 'paired': bool, 'names': (r,), 'target': (r,), 'background': (r,)}``
    (nan where a replicate has no cell of a group).
    """
    from ..design import REPLICATE_KEY

    design = adata.uns.get("scontrast", {}).get("design", {})
    if not isinstance(design, dict) or str(design.get("unit", "cell")) != "replicate" or REPLICATE_KEY not in adata.obs:
        return None
    reps = adata.obs[REPLICATE_KEY].astype(str).to_numpy()
    proj = np.asarray(adata.obsm["X_sparda"])[:, 0]
    is_target = adata.obs[groupby].to_numpy(dtype=bool)
    names = np.unique(reps[reps != ""])
    means = {side: np.array([proj[(reps == r) & mask].mean() if ((reps == r) & mask).any() else np.nan
                             for r in names]) for side, mask in (("target", is_target), ("background", ~is_target))}
    return {"word": str(design.get("replicate", "replicate")), "paired": bool(design.get("paired", False)),
            "names": names, **means}


def _donor_panel(ax, donors: dict, labels: tuple[str, str]) -> None:
    """Each donor's mean projection in each group: a line joins a donor's two groups when paired."""
    rng = np.random.default_rng(0)
    b, t = donors["background"], donors["target"]
    if donors["paired"]:
        for bi, ti in zip(b, t):
            if np.isfinite(bi) and np.isfinite(ti):
                ax.plot([0, 1], [bi, ti], color="0.55", lw=0.8, zorder=1)
        xb, xt = np.zeros(b.size), np.ones(t.size)
    else:
        xb, xt = rng.uniform(-0.08, 0.08, b.size), 1 + rng.uniform(-0.08, 0.08, t.size)
    ax.scatter(xb, b, color=_BACKGROUND_COLOUR, s=28, zorder=2)
    ax.scatter(xt, t, color=_TARGET_COLOUR, s=28, zorder=2)
    n_b, n_t = int(np.isfinite(b).sum()), int(np.isfinite(t).sum())
    ax.set_xticks([0, 1], [literal(f"{labels[1]}\n({n_b})"), literal(f"{labels[0]}\n({n_t})")])
    ax.set_xlim(-0.5, 1.5)
    ax.set_ylabel("mean projection")
    word = donors["word"]
    ax.set_title(literal(f"each {word}'s mean" + (" (paired)" if donors["paired"] else "")))


def sparda(
    adata: ad.AnnData,
    *,
    n_genes: int = 20,
    groupby: str = TARGET_KEY,
    figsize=(11.5, 4.6),
    ax=None,
    key: str | None = None,
) -> plt.Figure:
    """Weights of the top genes and projected target/background densities.

    Needs only the annotations ``tl.sparda`` writes (``var['sparda_weight']``,
    ``var['sparda_selected']``, ``obsm['X_sparda']``, ``uns['sparda']``) and
    ``obs[groupby]`` (the boolean column of the groups, True = target; ``key=`` is its deprecated name, a
    ``FutureWarning``); ``X`` is not read.

    Left: the ``n_genes`` largest weights (by magnitude) of the first direction
    (red positive = the gene contributes to the target side, blue negative = to the
    background side; the direction is oriented so that the target cells project
    higher on average).  Right: histograms of the projections
    ``obsm['X_sparda'][:, 0]`` of target and background cells, titled with the
    Wasserstein divergence and the p-value (``<=`` when it is its permutation floor).  With ``ax`` (a sequence of
    two Axes) the panels are drawn there; ``figsize`` (width, height in inches) is
    used otherwise.

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> import scontrast as sct
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 20))
    >>> X[:40, :3] += 2.0                                 # the target's genes g0-g2 are higher
    >>> adata = ad.AnnData(X, var=pd.DataFrame(index=[f"g{i}" for i in range(20)]))
    >>> adata.obs["scontrast_target"] = np.arange(80) < 40  # what sct.preprocess writes
    >>> sct.tl.sparda(adata, genes="all", n_permutations=19, random_state=0)
    >>> fig = sct.pl.sparda(adata, n_genes=5)
    >>> len(fig.axes)
    2
    """
    groupby = renamed(groupby, key, new_name="groupby", old_name="key", default=TARGET_KEY, who="pl.sparda")
    for slot, name in ((adata.var, "sparda_weight"), (adata.var, "sparda_selected"), (adata.obsm, "X_sparda")):
        if name not in slot:
            raise ScontrastError(f"adata: '{name}' is missing; run scontrast.tl.sparda first")
    if "sparda" not in adata.uns:
        raise ScontrastError("adata: uns['sparda'] is missing; run scontrast.tl.sparda first")
    if groupby not in adata.obs:
        raise ScontrastError(f"groupby: obs column '{groupby}' does not exist")
    check_count(n_genes, "n_genes", 1, "sparda", key="plot.n_genes")
    info = adata.uns["sparda"]
    donors = _donor_means(adata, groupby)
    if ax is None:
        if donors is None:
            fig, axes = plt.subplots(1, 2, figsize=figsize, gridspec_kw={"width_ratios": [1, 1.3]})
        else:  # the test's unit beside the cells: one point per donor and group
            fig, axes = plt.subplots(1, 3, figsize=(figsize[0] + 3.6, figsize[1]),
                                     gridspec_kw={"width_ratios": [1, 1.3, 0.75]})
    else:
        axes = list(ax)
        if len(axes) not in (2, 3):
            raise ScontrastError(f"ax: expected two Axes (three to show the donors), got {len(axes)}")
        fig = axes[0].figure
    _weights_panel(axes[0], adata, n_genes)
    proj = np.asarray(adata.obsm["X_sparda"])[:, 0]
    is_target = adata.obs[groupby].to_numpy(dtype=bool)
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
    if donors is not None and len(axes) == 3:
        _donor_panel(axes[2], donors, (target_label, background_label))
    fig.suptitle(titled(f"SPARDA: the sparse direction of largest Wasserstein difference, {target_label} vs "
                        f"{background_label}", adata))
    fig.tight_layout()
    return fig


__all__ = ["sparda"]
