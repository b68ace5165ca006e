"""Scatter figure of the contrastive PCA embeddings, one panel per fitted alpha."""

from __future__ import annotations

import anndata as ad
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..core import TARGET_KEY, ScontrastError
from ..tl._common import renamed
from ._style import BACKGROUND_COLOUR, TARGET_COLOUR, group_labels, level_colours, literal, note, replicate_colour, titled


def _coordinates(E, components, rng):
    """(x, y) of the cells; a 1-D embedding gets a small vertical jitter so cells do not overlap."""
    if E.shape[1] == 1:
        return E[:, 0], rng.uniform(-0.4, 0.4, size=E.shape[0])
    return E[:, components[0]], E[:, components[1]]


def cpca(
    adata: ad.AnnData,
    *,
    color: str = TARGET_KEY,
    groupby: str = TARGET_KEY,
    components: tuple[int, int] = (0, 1),
    show_background: bool = True,
    point_size: float | None = None,
    panel_size: float = 3.6,
    ax=None,
    key: str | None = None,
) -> plt.Figure:
    """Cells in the cPCA embedding of every fitted alpha (``obsm['X_cpca_alpha<i>']``).

    One panel per alpha (alpha = 0 is plain PCA of the target). Target cells, the
    ones cPCA embeds, are coloured by ``obs[color]`` (categorical: one colour per
    level, shared across panels; numeric: a colour bar); background cells, projected
    on the same components, are drawn underneath in grey (``show_background``). With
    ``color == groupby`` (the boolean obs column of the groups, True = target) the
    target cells get one colour; ``key=`` is its deprecated name (a ``FutureWarning``). ``components``: the two
    components on the axes (0-based; ignored with one component, which is plotted
    against a jitter). ``point_size``: marker area (None: from the number of cells).
    ``panel_size``: inches per panel. ``ax``: a sequence of Axes, one per alpha.

    Reads only ``obs``, ``obsm`` and ``uns`` (no expression matrix).

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> import scontrast as sct
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 20))
    >>> X[:40, :3] += 2.0                                 # the target's genes g0-g2 are higher
    >>> adata = ad.AnnData(X, var=pd.DataFrame(index=[f"g{i}" for i in range(20)]))
    >>> adata.obs["scontrast_target"] = np.arange(80) < 40  # what sct.preprocess writes
    >>> sct.tl.cpca(adata, genes="all", random_state=0)
    >>> fig = sct.pl.cpca(adata)
    >>> len(fig.axes) == len(adata.uns["cpca"]["alphas"])  # one panel per alpha
    True
    """
    groupby = renamed(groupby, key, new_name="groupby", old_name="key", default=TARGET_KEY, who="pl.cpca")
    color = replicate_colour(adata, color, groupby)
    uns, names, alphas, components, k = _checked(adata, color=color, components=components)
    is_target = adata.obs[groupby].to_numpy(dtype=bool)
    fig, axes = _panels(ax, len(names), panel_size)
    s = point_size if point_size is not None else max(2.0, min(30.0, 3000.0 / max(adata.n_obs, 1)))
    colouring = _colouring(adata, color=color, groupby=groupby, is_target=is_target)

    rng = np.random.default_rng(0)
    sc = None
    for i, (panel, name) in enumerate(zip(axes, names)):
        E = np.asarray(adata.obsm[name])
        x, y = _coordinates(E, components, rng)
        sc = _scatter(panel, x, y, is_target, colouring, s=s, show_background=show_background)
        a = alphas[i] if i < alphas.size else float("nan")
        chosen = " (default)" if int(uns.get("default_index", -1)) == i else ""
        panel.set_title("alpha = 0 (PCA of target)" if a == 0 else f"alpha = {a:.3g}{chosen}")
        # each axis with its top genes (signed loadings of this alpha): what the direction is made of
        genes = _axis_genes(adata, f"cPCs_alpha{i}" if f"cPCs_alpha{i}" in adata.varm else None)
        c0 = components[0] if k > 1 else 0
        panel.set_xlabel(literal(f"cPC {c0 + 1}" + genes.get(c0, "")), fontsize="small")
        panel.set_ylabel(literal(f"cPC {components[1] + 1}" + genes.get(components[1], "")) if k > 1 else "jitter",
                         fontsize="small")

    _legend(fig, adata, is_target, colouring, color=color, show_background=show_background)
    if sc is not None:
        fig.colorbar(sc, ax=axes[:len(names)], label=literal(f"{color} (target cells)"))
    target_label, background_label = group_labels(adata)
    fig.suptitle(titled(f"contrastive PCA of {target_label} ({int(np.sum(is_target))} cells) against "
                        f"{background_label} ({int(np.sum(~is_target))}), {int(uns.get('n_genes', 0))} genes", adata))
    if ax is None and np.any(alphas > 0) and show_background:
        # the objective's doing, not biology: said where the eye reads it
        note(fig, _ALPHA_NOTE.format(background=background_label))
    return fig


_ALPHA_NOTE = ("With alpha > 0 the axes are chosen so that {background} varies little along them: its narrow cloud is "
               "built in, so a wider target cloud there does not show that the target is more heterogeneous.")


def _axis_genes(adata: ad.AnnData, slot: str | None, n: int = 3) -> dict[int, str]:
    """' (A+, B-, C+)' per component: the ``n`` genes of largest |loading| in ``varm[slot]``, with their signs."""
    if slot is None or slot not in adata.varm:
        return {}
    from ..summary import top_loadings

    comps = top_loadings(np.asarray(adata.varm[slot]), adata.var_names, n)
    return {j: " (" + ", ".join(f"{g}{'+' if w > 0 else '-'}" for g, w in genes) + ")"
            for j, genes in enumerate(comps) if genes}


def _checked(adata: ad.AnnData, *, color: str, components) -> tuple:
    """``uns['cpca']``, the embeddings' obsm keys, the alphas, the components as a tuple and their number."""
    uns = adata.uns.get("cpca")
    if uns is None or "embedding_keys" not in uns:
        raise ScontrastError("adata: uns['cpca'] is missing; run scontrast.tl.cpca first")
    names = [str(k) for k in np.asarray(uns["embedding_keys"]).ravel()]
    missing = [k for k in names if k not in adata.obsm]
    if missing:
        raise ScontrastError(f"adata: obsm {missing} missing; run scontrast.tl.cpca first")
    if color not in adata.obs:
        raise ScontrastError(f"color: obs column '{color}' does not exist (have: {list(adata.obs.columns)[:15]})")
    alphas = np.asarray(uns["alphas"], dtype=float).ravel()
    k = adata.obsm[names[0]].shape[1]
    components = tuple(components)
    if len(components) != 2 or (k > 1 and not (0 <= components[0] < k and 0 <= components[1] < k
                                               and components[0] != components[1])):
        raise ScontrastError(f"components: {list(components)} is not a pair of distinct indices below {k}")
    return uns, names, alphas, components, k


def _panels(ax, n: int, panel_size: float):
    """The figure and one Axes per alpha: a grid of at most 4 columns, or the given ``ax``."""
    if ax is None:
        ncols = min(n, 4)
        nrows = int(np.ceil(n / ncols))
        fig, axes = plt.subplots(nrows, ncols, figsize=(panel_size * ncols + 1.8, panel_size * nrows),
                                 squeeze=False, layout="constrained")
        axes = list(axes.ravel())
        for extra in axes[n:]:
            extra.set_visible(False)
    else:
        axes = list(np.atleast_1d(ax))
        if len(axes) < n:
            raise ScontrastError(f"ax: {n} Axes are needed (one per alpha), got {len(axes)}")
        fig = axes[0].figure
    return fig, axes


def _colouring(adata: ad.AnnData, *, color: str, groupby: str, is_target: np.ndarray) -> dict:
    """How the target cells are coloured, shared by every panel: per level (categorical) or on one colour scale."""
    values = adata.obs[color]
    one_colour = color == groupby
    categorical = one_colour or not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values)
    if not categorical:
        vals = values.to_numpy(dtype=float)
        return {"categorical": False, "one_colour": False, "vals": vals,
                "vmin": np.nanmin(vals[is_target]), "vmax": np.nanmax(vals[is_target])}
    target_label, background_label = group_labels(adata)
    codes = np.where(is_target, target_label, background_label) if one_colour else np.asarray(values.astype(str))
    levels = [target_label] if one_colour else list(pd.Categorical(codes[is_target]).categories)
    if one_colour:
        colours = {target_label: TARGET_COLOUR}  # the target's colour in every method's figure
    else:
        colours = level_colours(levels)
    return {"categorical": True, "one_colour": one_colour, "codes": codes, "levels": levels, "colours": colours}


def _scatter(panel, x, y, is_target, colouring: dict, *, s: float, show_background: bool):
    """One panel's cells, the background underneath; the numeric colouring's collection (for the colour bar)."""
    if show_background:
        panel.scatter(x[~is_target], y[~is_target], s=s, color=BACKGROUND_COLOUR, alpha=0.35,
                      linewidths=0, rasterized=True)
    if colouring["categorical"]:
        for lev in colouring["levels"]:
            pick = is_target & (colouring["codes"] == lev)
            panel.scatter(x[pick], y[pick], s=s, color=colouring["colours"][lev], alpha=0.85, linewidths=0,
                          rasterized=True)
        return None
    vals = colouring["vals"]
    return panel.scatter(x[is_target], y[is_target], s=s, c=vals[is_target], cmap="viridis", vmin=colouring["vmin"],
                         vmax=colouring["vmax"], linewidths=0, rasterized=True)


def _legend(fig, adata: ad.AnnData, is_target, colouring: dict, *, color: str, show_background: bool) -> None:
    handles = []
    if colouring["categorical"]:
        codes, colours = colouring["codes"], colouring["colours"]
        handles = [plt.Line2D([], [], marker="o", linestyle="", color=colours[lev],
                              label=literal(f"{lev} ({int(np.sum(is_target & (codes == lev)))})"))
                   for lev in colouring["levels"]]
    if show_background:
        handles.append(plt.Line2D([], [], marker="o", linestyle="", color=BACKGROUND_COLOUR,
                                  label=literal(f"{group_labels(adata)[1]} ({int((~is_target).sum())})")))
    if handles:
        fig.legend(handles=handles, title=None if colouring["one_colour"] else literal(f"target: {color}"),
                   loc="outside right center", fontsize="small", ncols=1 if len(handles) <= 20 else 2)


__all__ = ["cpca"]
