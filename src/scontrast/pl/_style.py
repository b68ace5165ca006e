"""One look for every figure: the group colours, the user's group labels and the dataset's name.

Target cells are red and background cells blue in every method's figure; legends and titles use
the labels the user configured (``uns['scontrast']['preprocess']['params']``), not "target" and
"background".

Labels, gene names, obs columns and levels and the dataset's name are data: every text that holds
one goes to matplotlib through :func:`literal` (:func:`titled` does it for titles), so that it is
drawn as it is and never read as mathtext (``$x^2$``) or fails to parse (``$\\frac$``).
"""

from __future__ import annotations

from collections.abc import Mapping

import anndata as ad

from ..core import BACKGROUND_COLOUR, NEUTRAL_COLOUR, TARGET_COLOUR  # noqa: F401  (the figures import them from here)


def literal(text) -> str:
    """``text`` as matplotlib draws it literally: every ``$`` escaped (``\\$``).

    Without an unescaped ``$`` a text is never mathtext, and matplotlib then draws each ``\\$``
    as ``$`` and leaves every other character alone (a ``\\`` before a ``$`` in the data stays).
    Escaping the string rather than setting ``parse_math=False`` on a Text holds wherever the
    string ends up: tick labels that matplotlib re-creates when it draws, legends, a notebook's
    redraw. Apply it once, to the whole text handed to matplotlib.
    """
    return str(text).replace("$", r"\$")


def _preprocess_info(adata: ad.AnnData) -> Mapping:
    info = adata.uns.get("scontrast", {})
    info = info.get("preprocess", {}) if isinstance(info, Mapping) else {}
    return info if isinstance(info, Mapping) else {}


def group_labels(adata: ad.AnnData) -> tuple[str, str]:
    """``(target, background)`` labels for legends: the configured labels, else 'target'/'background'.

    As the data holds them: a text built from them goes through :func:`literal` (or :func:`titled`).
    """
    params = _preprocess_info(adata).get("params", {})

    def label(key: str, fallback: str) -> str:
        values = params.get(key) if isinstance(params, Mapping) else None
        if values is None:
            return fallback
        values = [values] if isinstance(values, str) else [str(v) for v in values]
        return " + ".join(values) if values else fallback

    return label("target", "target"), label("background", "background")


def dataset_name(adata: ad.AnnData) -> str | None:
    """The workflow's dataset name when preprocessing recorded it (``uns['scontrast']['preprocess']['dataset']``)."""
    name = _preprocess_info(adata).get("dataset")
    return None if name is None else str(name)


def titled(text: str, adata: ad.AnnData) -> str:
    """``text`` prefixed with the dataset's name when known (every figure title names its dataset), drawn literally.

    ``text`` is plain text (labels and names in it as the data holds them), never mathtext.
    """
    name = dataset_name(adata)
    return literal(f"{name}: {text}" if name else text)


def place_labels(ax, x, y, texts, *, fontsize: float = 7, max_radius: float = 60.0) -> int:
    """Name points ``(x, y)`` (data coordinates) with ``texts``, no label over another or out of the axes.

    Each label takes the first free place on rings of growing radius (points) around its point,
    a thin line back to the point when it had to move away; a label with no free place within
    ``max_radius`` is not drawn. Place labels after the figure's layout is final (a later layout
    moves the axes and the points under the labels). Returns how many labels were not drawn.
    """
    import numpy as np
    from matplotlib.text import Text

    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    legend = ax.get_legend()
    taken = [legend.get_window_extent(renderer)] if legend is not None else []  # boxes kept free, in pixels
    px_per_pt = fig.dpi / 72.0
    rings = [(0.0, [(3.0, 2.0)])] + [
        (r, [(r * np.cos(t), r * np.sin(t)) for t in np.linspace(0, 2 * np.pi, 16, endpoint=False)])
        for r in np.arange(10.0, max_radius + 1e-9, 8.0)]
    missed = 0
    for xi, yi, text in zip(x, y, texts):
        placed = False
        for radius, offsets in rings:
            for dx, dy in offsets:
                ha = "left" if dx >= 0 else "right"
                va = "bottom" if dy >= 0 else "top"
                ann = ax.annotate(literal(text), (xi, yi), xytext=(dx, dy), textcoords="offset points",
                                  fontsize=fontsize, ha=ha, va=va,
                                  arrowprops=dict(arrowstyle="-", lw=0.4, color="0.4") if radius > 0 else None)
                ann.update_positions(renderer)
                box = Text.get_window_extent(ann, renderer)  # the text's own box, not its leader line's
                inside = (box.x0 >= frame.x0 and box.x1 <= frame.x1 and box.y0 >= frame.y0 and box.y1 <= frame.y1)
                if inside and not any(box.overlaps(b) for b in taken):
                    taken.append(box.padded(1.0 * px_per_pt))
                    placed = True
                    break
                ann.remove()
            if placed:
                break
        missed += not placed
    return missed


def replicate_colour(adata: ad.AnnData, color: str | None, key: str) -> str | None:
    """The obs column to colour cells by: the declared replicate when ``color`` is the group flag ``key``.

    With a declared replicate the tests are per donor, so the embeddings show the donors (a direction
    that separates donors, not a shared sub-population, then shows as colours in blocks).
    """
    from ..design import REPLICATE_KEY

    design = adata.uns.get("scontrast", {})
    design = design.get("design", {}) if isinstance(design, Mapping) else {}
    declared = isinstance(design, Mapping) and str(design.get("unit", "cell")) == "replicate"
    if color == key and declared:
        column = str(design.get("replicate", REPLICATE_KEY))  # the user's own column name when it is there
        return column if column in adata.obs else REPLICATE_KEY if REPLICATE_KEY in adata.obs else color
    return color


def level_colours(levels) -> dict:
    """A colour per level of a categorical colouring, never the target's red or the background's blue."""
    import matplotlib.pyplot as plt

    tab10, tab20 = plt.get_cmap("tab10"), plt.get_cmap("tab20")
    palette = [tab10(i) for i in (1, 2, 4, 5, 6, 7, 8, 9)]  # tab10 without its blue (0) and red (3)
    palette += [tab20(i) for i in range(20) if i not in (0, 1, 6, 7)] if len(levels) > len(palette) else []
    return {lev: palette[i % len(palette)] for i, lev in enumerate(levels)}


def note(fig, text: str, fontsize: float = 9.0) -> None:
    """A plain sentence under the figure's panels, wrapped to its width, inside the layout (``supxlabel``)."""
    import textwrap

    width = max(30, int(fig.get_figwidth() * 72 / (0.55 * fontsize)) - 4)
    fig.supxlabel(literal(textwrap.fill(text, width=width, break_on_hyphens=False)), fontsize=fontsize)
