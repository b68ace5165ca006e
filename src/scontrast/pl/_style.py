"""One look for every figure: the group colours, the user's group labels and the dataset's name.

Target cells are red and background cells blue in every method's figure; legends and titles use
the labels the user configured (``uns['scontrast']['preprocess']['params']``), not "target" and
"background".
"""

from __future__ import annotations

from collections.abc import Mapping

import anndata as ad

TARGET_COLOUR = "#d62728"
BACKGROUND_COLOUR = "#1f77b4"


def _preprocess_info(adata: ad.AnnData) -> Mapping:
    info = adata.uns.get("scontrast", {})
    info = info.get("preprocess", {}) if isinstance(info, Mapping) else {}
    return info if isinstance(info, Mapping) else {}


def group_labels(adata: ad.AnnData) -> tuple[str, str]:
    """``(target, background)`` labels for legends: the configured labels, else 'target'/'background'."""
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
    """``text`` prefixed with the dataset's name when known (every figure title names its dataset)."""
    name = dataset_name(adata)
    return f"{name}: {text}" if name else text
