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

TARGET_COLOUR = "#d62728"
BACKGROUND_COLOUR = "#1f77b4"
#: cells of neither group (a category of the group column that is neither target nor background)
NEUTRAL_COLOUR = "#7f7f7f"


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
