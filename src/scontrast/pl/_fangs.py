"""Figure of the FANGS rule: the estimated features of every cell, target vs background."""

from __future__ import annotations

import anndata as ad
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from ..core import TARGET_KEY, ScontrastError

_GROUP_COLORS = ("tab:blue", "tab:orange")  # background, target


def cell_order(features: np.ndarray, is_target: np.ndarray) -> np.ndarray:
    """Row order for the heatmap: background then target, each sorted by feature pattern.

    features (N, K) binary, is_target (N,) bool -> (N,) permutation. Within a
    group, cells holding feature 1 come first, then by feature 2, and so on.
    """
    keys = [1 - features[:, k] for k in range(features.shape[1] - 1, -1, -1)]
    return np.lexsort(keys + [is_target.astype(int)])


def _heatmap(ax, strip_ax, features, is_target, uns):
    order = cell_order(features, is_target)
    F = features[order]
    groups = is_target[order].astype(int)
    strip_ax.imshow(groups[:, None], aspect="auto", interpolation="nearest",
                    cmap=ListedColormap(list(_GROUP_COLORS)), vmin=0, vmax=1)
    strip_ax.set_xticks([])
    strip_ax.set_ylabel(f"cells ({len(order)}), ordered by group and features")
    strip_ax.set_yticks([])
    k = F.shape[1]
    if k == 0:
        ax.text(0.5, 0.5, "empty estimate (no feature)", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
    else:
        ax.imshow(F, aspect="auto", interpolation="nearest", cmap=ListedColormap(["#f4f4f4", "#262626"]),
                  vmin=0, vmax=1)
        n_t = F[groups == 1].sum(axis=0)
        n_b = F[groups == 0].sum(axis=0)
        labels = [f"F{j + 1}\n{n_t[j]} T\n{n_b[j]} B" for j in range(k)]
        ax.set_xticks(np.arange(k), labels, fontsize="small" if k <= 12 else "x-small")
    ax.set_yticks([])
    ax.set_xlabel("features (cells holding each: T = target, B = background)")
    title = f"FANGS estimate: K = {k}"
    if uns:
        title += f", a = {uns.get('a', float('nan')):.3g}, E[FARO] = {uns.get('expected_loss', float('nan')):.4g}"
        d = uns.get("draws_expected_loss")
        if d is not None and np.isfinite(d):
            title += f" (draws {d:.4g})"
    ax.set_title(title)
    ax.legend(handles=[Patch(color=_GROUP_COLORS[1], label="target"),
                       Patch(color=_GROUP_COLORS[0], label="background")],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small", title="left strip")


def fangs(adata: ad.AnnData, *, key: str = TARGET_KEY, ax=None, figsize=(12, 6)) -> plt.Figure:
    """Heatmap of ``obsm['fangs_features']`` (cells x features), target/background annotated.

    Cells are rows (background first, then target, each sorted by feature
    pattern), features are columns labelled with their target/background
    counts; a strip on the left marks the group of each cell. Without ``ax``
    the figure adds the distribution of K over the posterior samples (the
    estimate's K marked) and, when available, the sampler's log-joint trace.

    Reads only ``obsm['fangs_features']``, ``uns['fangs']`` and ``obs[key]`` (no
    ``X``), so it draws from the preprocessed annotations joined with the fangs
    delta. ``figsize`` (inches) applies without ``ax``.
    """
    if "fangs_features" not in adata.obsm:
        raise ScontrastError("adata: obsm['fangs_features'] is missing; run scontrast.tl.fangs first")
    features = np.asarray(adata.obsm["fangs_features"]).astype(np.uint8)
    is_target = adata.obs[key].to_numpy(dtype=bool) if key in adata.obs else np.zeros(adata.n_obs, bool)
    uns = dict(adata.uns.get("fangs", {}))
    if ax is not None:
        fig = ax.figure
        strip_ax = ax.inset_axes([-0.05, 0.0, 0.03, 1.0])
        _heatmap(ax, strip_ax, features, is_target, uns)
        return fig
    fig = plt.figure(figsize=figsize, layout="constrained")
    grid = fig.add_gridspec(2, 3, width_ratios=[0.4, 7, 3.6])
    strip_ax = fig.add_subplot(grid[:, 0])
    ax = fig.add_subplot(grid[:, 1])
    _heatmap(ax, strip_ax, features, is_target, uns)
    kax = fig.add_subplot(grid[0, 2])
    if "samples_K_values" in uns:
        kax.bar(np.asarray(uns["samples_K_values"]), np.asarray(uns["samples_K_counts"]), color="grey",
                label="posterior samples")
        kax.axvline(features.shape[1], color="tab:red", lw=2, label="FANGS estimate")
        kax.legend(fontsize="small")
    kax.set_xlabel("number of features K")
    kax.set_ylabel("samples")
    kax.set_title("K over the posterior samples")
    tax = fig.add_subplot(grid[1, 2])
    if "log_joint" in uns:
        lj = np.asarray(uns["log_joint"])
        tax.plot(np.arange(1, lj.size + 1), lj, lw=0.8, color="black")
        tax.set_xlabel("sweep")
        tax.set_ylabel("log joint density")
        tax.set_title("sampler trace")
    else:
        tax.text(0.5, 0.5, "no sampler trace\n(samples supplied)", ha="center", va="center",
                 transform=tax.transAxes)
        tax.set_axis_off()
    return fig


__all__ = ["fangs", "cell_order"]
