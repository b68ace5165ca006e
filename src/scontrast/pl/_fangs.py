"""Figure of the FANGS rule: the estimated features of every cell, target vs background, with their genes."""

from __future__ import annotations

import textwrap

import anndata as ad
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.ticker import MaxNLocator

from ..core import TARGET_KEY, ScontrastError
from ..tl._common import renamed
from ._style import BACKGROUND_COLOUR, TARGET_COLOUR, group_labels, literal, titled

_GROUP_COLORS = (BACKGROUND_COLOUR, TARGET_COLOUR)  # background, target: as in every figure


def cell_order(features: np.ndarray, is_target: np.ndarray) -> np.ndarray:
    """Column order of the heatmap: background then target, each sorted by feature pattern.

    features (N, K) binary, is_target (N,) bool -> (N,) permutation. Within a
    group, cells holding feature 1 come first, then by feature 2, and so on.
    """
    keys = [1 - features[:, k] for k in range(features.shape[1] - 1, -1, -1)]
    return np.lexsort(keys + [is_target.astype(int)])


def feature_labels(uns: dict, k: int, n_genes: int = 3) -> list[str]:
    """Row labels: 'F<j>  T <prevalence> / B <prevalence>, q <q> [*]  held <per chain>' and the first top genes."""
    labels = []
    for j in range(k):
        text = f"F{j + 1}"
        if "feature_prevalence_target" in uns:
            pt, pb = float(uns["feature_prevalence_target"][j]), float(uns["feature_prevalence_background"][j])
            q = float(uns["feature_qvalue"][j])
            star = " *" if bool(np.asarray(uns["feature_enriched"])[j]) else ""
            text += f"  T {pt:.2f} / B {pb:.2f}, q {q:.2g}{star}"
        if "feature_chain_support" in uns and np.asarray(uns["feature_chain_support"]).shape[1] > 1:
            text += "  held " + "/".join(f"{v:.2f}" for v in np.asarray(uns["feature_chain_support"])[j])
        if "feature_top_genes" in uns:
            text += "\n" + ", ".join(str(uns["feature_top_genes"][j]).split(", ")[:n_genes])
        labels.append(text)
    return labels


def _wrapped(text: str, width_in: float, fontsize_pt: float = 10.0) -> str:
    """``text`` wrapped to lines that fit ``width_in`` inches at ``fontsize_pt`` (about 0.6 em per character)."""
    return textwrap.fill(text, width=max(20, int(width_in * 72 / (0.6 * fontsize_pt))), break_on_hyphens=False)


def _is_ensemble(lf) -> bool:
    """Whether the samples are ``tl.latent_features(method='ensemble')``'s fits (its ``uns`` holds the
    stability per K), as the summary tells them apart: their two halves then stand in for chains."""
    return isinstance(lf, dict) and "stability" in lf


def _key(uns: dict, lf=None) -> str:
    """What the row labels say, with the test that gave the q-values (over cells or over replicates).

    ``lf``: ``uns['latent_features']`` (None when the samples were supplied): the 'held' numbers
    are per half of the ensemble's fits, or per chain of the sampler, worded as the summary words them.
    """
    parts = ["T / B: prevalence in target / background",
             "q: " + str(uns.get("feature_test", "Fisher's exact test over cells")) + ", Benjamini-Hochberg "
             "(* enriched)"]
    if "feature_chain_support" in uns and np.asarray(uns["feature_chain_support"]).shape[1] > 1:
        holders = "each of the two halves of the fits" if _is_ensemble(lf) else "each chain's samples"
        parts.append(f"held: mean Jaccard with its match in {holders}")
    return "; ".join(parts)


def _heatmap(ax, features, is_target, uns, labels=("target", "background"), width_in: float | None = None, lf=None):
    """The estimate as a heatmap on ``ax``; its title and caption wrapped to ``width_in`` inches (None: the axes').

    ``lf``: ``uns['latent_features']`` when present (which method gave the samples: :func:`_key`).
    """
    if width_in is None:
        width_in = ax.get_position().width * ax.figure.get_figwidth()
    order = cell_order(features, is_target)
    labels = tuple(literal(v) for v in labels)  # the groups' labels in the caption: drawn as they are
    F = features[order].T  # features x cells
    n_b = int((~is_target).sum())
    k = F.shape[0]
    if k == 0:
        ax.text(0.5, 0.5, "empty estimate (no feature)", ha="center", va="center", transform=ax.transAxes)
        ax.set_yticks([])
    else:
        ax.imshow(F, aspect="auto", interpolation="nearest", cmap=ListedColormap(["#f4f4f4", "#262626"]),
                  vmin=0, vmax=1)
        ax.set_yticks(np.arange(k), [literal(t) for t in feature_labels(uns, k)],
                      fontsize="small" if k <= 8 else "x-small")
    # the groups: a coloured band above the cells and a line between them
    n = F.shape[1]
    for lo, hi, colour in ((0, n_b, _GROUP_COLORS[0]), (n_b, n, _GROUP_COLORS[1])):
        if hi > lo:  # a coloured band under the cells of each group
            ax.axvspan(lo - 0.5, hi - 0.5, ymin=-0.03, ymax=0.0, color=colour, clip_on=False)
    if 0 < n_b < n:
        ax.axvline(n_b - 0.5, color="black", lw=1.5)
    ax.set_xticks([])
    # wrapped to the heatmap's width: a longer line runs over the panels beside it
    caption = (f"cells: {labels[1]} ({n_b}, blue) | {labels[0]} ({n - n_b}, red), each group sorted by feature "
               "pattern (black = holds the feature)")
    ax.set_xlabel(_wrapped(caption, width_in), labelpad=14)  # below the band of group colours
    title = f"FANGS estimate: K = {k}"
    if uns:
        title += f", a = {uns.get('a', float('nan')):.3g}, E[FARO] = {uns.get('expected_loss', float('nan')):.4g}"
        d = uns.get("draws_expected_loss")
        if d is not None and np.isfinite(d):
            title += f" (draws {d:.4g})"
    title = _wrapped(title, width_in)
    if "feature_qvalue" in uns:
        title += "\n" + _wrapped(_key(uns, lf), width_in)
    ax.set_title(title, fontsize="medium")


def _trace(adata: ad.AnnData, uns: dict):
    """(log joint (chains, sweeps) or None, burn-in or None, split R-hat or None)."""
    lf = adata.uns.get("latent_features")
    if isinstance(lf, dict) and "log_joint" in lf:
        lj = np.atleast_2d(np.asarray(lf["log_joint"], dtype=float))
        burn = lf.get("params", {}).get("burn_in")
        return lj, burn, lf.get("rhat_log_joint")
    if "log_joint" in uns:
        return np.atleast_2d(np.asarray(uns["log_joint"], dtype=float)), None, None
    return None, None, None


def _stability(ax, lf: dict, side_in: float) -> None:
    """The ensemble's stability per K (``tl.latent_features(method='ensemble')``), threshold and chosen K."""
    stab = np.asarray(lf["stability"], dtype=float)
    ks = np.arange(1, stab.size + 1)
    tried = np.isfinite(stab)
    ax.plot(ks[tried], stab[tried], "o-", color="black", lw=1, label="stability")
    threshold = float(lf.get("params", {}).get("stability", 0.8))
    ax.axhline(threshold, color="grey", ls="--", lw=1, label=f"threshold {threshold:g}")
    chosen = int(lf.get("n_features_chosen", 0))
    if chosen:
        ax.plot([chosen], [stab[chosen - 1]], "o", color="tab:red", ms=9, label=f"chosen K = {chosen}")
    ax.set_ylim(0, 1.05)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("K of the resampled fits")
    ax.set_ylabel("stability (matched Jaccard)")
    ax.legend(fontsize="x-small", loc="lower left")  # a fixed place: "best" is slow to find on a busy machine, and warns
    ax.set_title(_wrapped("features that recur across resamples", side_in))


def fangs(adata: ad.AnnData, *, groupby: str = TARGET_KEY, ax=None, figsize=(12, 6), key: str | None = None) -> plt.Figure:
    """Heatmap of ``obsm['fangs_features']`` (features x cells), background and target side by side.

    Features are rows labelled with their prevalence in target (T) and background (B), the
    BH q-value of their enrichment (* when enriched) and their top genes; cells are columns,
    background then target, each sorted by feature pattern. Without ``ax`` the figure adds
    the distribution of K over the samples (the estimate's K marked) and, when available, the
    ensemble's stability per K (threshold and chosen K) or the log joint of every chain of the
    sampler (burn-in shaded, split R-hat).

    Reads only ``obsm['fangs_features']`` (absent when K = 0), ``uns['fangs']``, ``uns['latent_features']`` (when
    present) and ``obs[groupby]`` (the boolean column of the groups, True = target; ``key=`` is its deprecated
    name, a ``FutureWarning``; no ``X``), so it draws from the preprocessed annotations joined with the fangs
    delta. ``figsize`` (inches) applies without ``ax``.

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> import scontrast as sct
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 12))
    >>> X[rng.random(200) < 0.4, :4] += 3.0               # a programme of g0-g3 in 40% of the cells
    >>> adata = ad.AnnData(X, var=pd.DataFrame(index=[f"g{i}" for i in range(12)]))
    >>> adata.obs["scontrast_target"] = np.arange(200) < 100
    >>> sct.tl.latent_features(adata, genes="all", random_state=0)
    >>> sct.tl.fangs(adata, random_state=0)
    >>> fig = sct.pl.fangs(adata)
    >>> fig.axes[0].get_images() != []                    # the heatmap of features x cells
    True
    """
    groupby = renamed(groupby, key, new_name="groupby", old_name="key", default=TARGET_KEY, who="pl.fangs")
    if "fangs_features" not in adata.obsm and "fangs" not in adata.uns:
        raise ScontrastError("adata: obsm['fangs_features'] is missing; run scontrast.tl.fangs first")
    # K = 0 leaves no obsm entry: no cell carries a feature
    features = (np.asarray(adata.obsm["fangs_features"]).astype(np.uint8) if "fangs_features" in adata.obsm
                else np.zeros((adata.n_obs, 0), dtype=np.uint8))
    is_target = adata.obs[groupby].to_numpy(dtype=bool) if groupby in adata.obs else np.zeros(adata.n_obs, bool)
    uns = dict(adata.uns.get("fangs", {}))
    labels = group_labels(adata)
    lf = adata.uns.get("latent_features")
    if ax is not None:
        _heatmap(ax, features, is_target, uns, labels, lf=lf)
        return ax.figure
    if features.shape[1] == 0:  # nothing to draw: one sentence says so, in a small figure
        return _no_feature(adata, uns, lf, labels)
    fig = plt.figure(figsize=figsize, layout="constrained")
    fig.suptitle(titled(f"binary features of the cells: {labels[0]} vs {labels[1]}", adata))
    grid = fig.add_gridspec(2, 2, width_ratios=[7, 3])
    # the heatmap's share of the width, less its row labels (about 2.4 in at the default size)
    width_in = max(2.0, fig.get_figwidth() * 0.7 - 2.4 * min(1.0, fig.get_figwidth() / 12))
    side_in = max(1.0, fig.get_figwidth() * 0.3 - 0.8)  # the right panels, less their y labels
    _heatmap(fig.add_subplot(grid[:, 0]), features, is_target, uns, labels, width_in=width_in, lf=lf)
    kax = fig.add_subplot(grid[0, 1])
    if "samples_K_values" in uns:
        kax.bar(np.asarray(uns["samples_K_values"]), np.asarray(uns["samples_K_counts"]), color="grey",
                label="samples")
        kax.axvline(features.shape[1], color="tab:red", lw=2, label="FANGS estimate")
        # headroom above the bars for the key: it never covers a bar
        kax.set_ylim(0, 1.7 * max(1, int(np.max(np.asarray(uns["samples_K_counts"])))))
        kax.legend(fontsize="x-small", loc="upper center", ncols=2, framealpha=1, edgecolor="none")
        ks = np.append(np.asarray(uns["samples_K_values"]), features.shape[1])
        kax.set_xlim(ks.min() - 1, ks.max() + 1)  # one K alone would get a sub-integer axis
    kax.xaxis.set_major_locator(MaxNLocator(integer=True))  # K is a count: no tick at 5.5
    kax.set_xlabel("number of features K")
    kax.set_ylabel("samples")
    kax.set_title(_wrapped("K over the samples", side_in))
    tax = fig.add_subplot(grid[1, 1])
    lj, burn, rhat = _trace(adata, uns)
    if _is_ensemble(lf):
        _stability(tax, lf, side_in)
    elif lj is not None:
        for c, row in enumerate(lj):
            tax.plot(np.arange(1, row.size + 1), row, lw=0.7, label=f"chain {c + 1}")
        if burn:
            tax.axvspan(0, burn, color="grey", alpha=0.15, label="burn-in")
            kept = lj[:, int(burn):]
            if kept.size:  # the y range of the kept sweeps (the first sweeps would flatten them)
                lo, hi = float(kept.min()), float(kept.max())
                pad = 0.1 * (hi - lo) if hi > lo else 1.0
                tax.set_ylim(lo - pad, hi + pad)
        tax.legend(fontsize="x-small", ncol=2, loc="lower right")
        tax.set_xlabel("sweep")
        tax.set_ylabel("log joint density")
        title = "sampler trace"
        if rhat is not None and np.isfinite(rhat):
            title += f"\nsplit R-hat {float(rhat):.3g}"  # on one line it is wider than the panel
        tax.set_title("\n".join(_wrapped(line, side_in) for line in title.split("\n")))
    else:
        tax.text(0.5, 0.5, "no sampler trace\n(samples supplied)", ha="center", va="center",
                 transform=tax.transAxes)
        tax.set_axis_off()
    return fig


def _no_feature(adata: ad.AnnData, uns: dict, lf, labels) -> plt.Figure:
    """The figure of an empty estimate (K = 0): one sentence with the numbers behind it."""
    text = "No binary feature: the FANGS estimate holds none (K = 0), so no cell carries a recurring programme."
    if _is_ensemble(lf):
        stab = np.asarray(lf["stability"], dtype=float)
        stab = stab[np.isfinite(stab)]
        threshold = float(lf.get("params", {}).get("stability", 0.8))
        if stab.size:
            text = (f"No binary feature recurs across the resampled fits: the most stable K reaches "
                    f"{float(stab.max()):.2f} (matched Jaccard), below the {threshold:g} a feature needs. The cells show "
                    "no reproducible programme in these genes (K = 0).")
    fig = plt.figure(figsize=(8, 1.5), layout="constrained")
    fig.suptitle(titled(f"binary features of the cells: {labels[0]} vs {labels[1]}", adata))
    fig.text(0.5, 0.4, _wrapped(text, 7.2, 11), ha="center", va="center", fontsize=11)
    return fig


__all__ = ["fangs", "cell_order", "feature_labels"]
