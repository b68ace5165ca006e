"""Scatter figure of the PCPCA embedding."""

from __future__ import annotations

import anndata as ad
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..core import TARGET_KEY, ScontrastError
from ..tl._common import renamed
from ._cpca import _axis_genes
from ._style import BACKGROUND_COLOUR, TARGET_COLOUR, group_labels, level_colours, literal, note, replicate_colour, titled


def _default_color(adata):
    """The obs column that defined the groups in preprocessing, else the target flag."""
    try:
        col = adata.uns["scontrast"]["preprocess"]["params"]["groupby"]
    except (KeyError, TypeError):
        return TARGET_KEY
    return col if col in adata.obs else TARGET_KEY


def _coordinates(E, components, rng):
    """(x, y) of the cells; a 1-D embedding gets a small vertical jitter so cells do not overlap."""
    if E.shape[1] == 1:
        return E[:, 0], rng.uniform(-0.4, 0.4, size=E.shape[0])
    i, j = components
    return E[:, i], E[:, j]


def pcpca(
    adata: ad.AnnData,
    *,
    color: str | None = None,
    components: tuple[int, int] = (0, 1),
    groupby: str = TARGET_KEY,
    point_size: float | None = None,
    figsize=(11.5, 4.6),
    ax=None,
    key: str | None = None,
) -> plt.Figure:
    """Target and background cells in the PCPCA embedding ``obsm['X_pcpca']``.

    Two panels on shared axes (target left, background right), cells coloured by
    ``obs[color]`` (categorical: one colour per level, the same in both panels; numeric:
    a colour bar). ``color=None`` uses the preprocessing ``groupby`` column. With
    ``ax`` (a sequence of two Axes) the panels are drawn there. ``groupby``: the boolean obs column of the
    groups (True = target; ``key=`` is its deprecated name, a ``FutureWarning``).

    Needs only annotations: ``obsm['X_pcpca']``, ``obs`` and ``uns`` (no ``X``), so it
    draws from the preprocessed data's annotations and the method's delta. In the workflow
    these keywords are the ``pcpca`` block's ``plot`` entry.

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> import scontrast as sct
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 20))
    >>> X[:40, :3] += 2.0                                 # the target's genes g0-g2 are higher
    >>> adata = ad.AnnData(X, var=pd.DataFrame(index=[f"g{i}" for i in range(20)]))
    >>> adata.obs["scontrast_target"] = np.arange(80) < 40  # what sct.preprocess writes
    >>> sct.tl.pcpca(adata, genes="all", random_state=0)
    >>> fig = sct.pl.pcpca(adata, color="scontrast_target")
    >>> len(fig.axes) >= 2                                 # target and background panels
    True
    """
    groupby = renamed(groupby, key, new_name="groupby", old_name="key", default=TARGET_KEY, who="pl.pcpca")
    if "X_pcpca" not in adata.obsm:
        raise ScontrastError("adata: obsm['X_pcpca'] is missing; run scontrast.tl.pcpca first")
    # by default the groups, or the donors when a replicate is declared (the tests' unit)
    color = replicate_colour(adata, TARGET_KEY, TARGET_KEY) if color is None else color
    color = _default_color(adata) if color == TARGET_KEY else color
    if color not in adata.obs:
        raise ScontrastError(f"color: obs column '{color}' does not exist (have: {list(adata.obs.columns)[:15]})")
    E = np.asarray(adata.obsm["X_pcpca"])
    k = E.shape[1]
    if k > 1 and not (0 <= components[0] < k and 0 <= components[1] < k):
        raise ScontrastError(f"components: {components} out of range for {k} PCPCA components")
    is_target = adata.obs[groupby].to_numpy(dtype=bool)
    x, y = _coordinates(E, components, np.random.default_rng(0))
    values = adata.obs[color]
    categorical = not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values)
    if ax is None:
        fig, axes = plt.subplots(1, 2, figsize=figsize, sharex=True, sharey=True, layout="constrained")
    else:
        axes = list(ax)
        fig = axes[0].figure
    s = point_size if point_size is not None else max(2.0, min(30.0, 3000.0 / max(adata.n_obs, 1)))

    if categorical:
        codes = np.asarray(values.astype(str))
        levels, colours = _level_colours(codes, is_target)
    else:
        vals = values.to_numpy(dtype=float)
        vmin, vmax = np.nanmin(vals), np.nanmax(vals)

    uns = adata.uns.get("pcpca", {})
    target_label, background_label = group_labels(adata)
    genes = _axis_genes(adata, "PCPCA_W")  # each axis with its top genes (signed loadings)
    for panel, (sel, name) in zip(axes, ((is_target, target_label), (~is_target, background_label))):
        if categorical:
            for lev in levels:
                pick = sel & (codes == lev)
                if pick.any():
                    panel.scatter(x[pick], y[pick], s=s, color=colours[lev], alpha=0.8, linewidths=0,
                                  rasterized=True)
        else:
            sc = panel.scatter(x[sel], y[sel], s=s, c=vals[sel], cmap="viridis", vmin=vmin, vmax=vmax,
                               linewidths=0, rasterized=True)
        panel.set_title(literal(f"{name} cells (n={int(sel.sum())})"))
        c0 = components[0] if k > 1 else 0
        panel.set_xlabel(literal(f"PCPCA {c0 + 1}" + genes.get(c0, "")), fontsize="small")
        panel.set_ylabel(literal(f"PCPCA {components[1] + 1}" + genes.get(components[1], "")) if k > 1 else "jitter",
                         fontsize="small")
    if categorical:
        _legend(fig, codes, levels, colours, title=color)
    else:
        fig.colorbar(sc, ax=list(axes), label=literal(color))
    if ax is None:  # the objective's doing, not biology: said where the eye reads it
        note(fig, _NOTE.format(background=background_label))
    if "gamma_prime" in uns:
        fig.suptitle(titled(f"PCPCA: gamma' = {float(uns['gamma_prime']):.3g} (admissible < "
                            f"{float(uns['max_gamma_prime']):.3g}), sigma^2 = {float(uns['sigma2']):.3g}", adata))
    return fig


_NOTE = ("The axes favour variation the target has and {background} lacks: {background}'s narrow cloud is built in, "
         "so a wider target cloud does not show that the target is more heterogeneous.")


def _level_colours(codes: np.ndarray, is_target: np.ndarray) -> tuple[list, dict]:
    """The levels of a categorical colouring, target levels first, and a colour per level."""
    # target levels first, in the order the cells show them, then the background's
    levels = list(dict.fromkeys(list(codes[is_target]) + list(codes[~is_target])))
    target_only = set(codes[is_target]) - set(codes[~is_target])
    if len(levels) == 2 and len(target_only) == 1:
        # the two groups themselves: the target's and the background's colours of every figure
        colours = {lev: TARGET_COLOUR if lev in target_only else BACKGROUND_COLOUR for lev in levels}
    else:
        colours = level_colours(levels)
    return levels, colours


def _legend(fig, codes: np.ndarray, levels: list, colours: dict, *, title: str) -> None:
    # One legend for both panels: the colours are shared, and it stays off the data.
    handles = [plt.Line2D([], [], marker="o", linestyle="", color=colours[lev],
                          label=literal(f"{lev} ({int(np.sum(codes == lev))})")) for lev in levels]
    fig.legend(handles=handles, title=literal(title), loc="outside right center", fontsize="small",
               ncols=1 if len(levels) <= 20 else 2)
