"""The user's annotations carried to the result: subset, renamed when they collide, scontrast's own slots dropped."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..core import TARGET_KEY
from ..design import REPLICATE_KEY
from ._groups import _group_name

log = logging.getLogger("scontrast.preprocess")  # the package's logger: one name in the job's log


METHOD_SLOTS = {
    "obs": ("quadro_score", "quadro_pred", TARGET_KEY, REPLICATE_KEY, "scontrast_group"),
    "var": ("sparda_*", "pseudobulk_*"),
    "obsm": ("X_sparda", "X_cpca*", "X_pcpca", "fangs_features", "latent_features_samples", "latent_features_input"),
    "varm": ("sparda_directions", "cPCs*", "PCPCA_W"),
    "uns": ("sparda", "cpca", "pcpca", "quadro", "latent_features", "fangs", "pseudobulk", "scontrast",
            "scontrast_group_colors"),
}

#: the categorical obs column of the split for scanpy's plots (``TARGET_KEY`` is its boolean)
GROUP_KEY = "scontrast_group"
#: obs columns preprocessing's QC writes (scanpy's ``calculate_qc_metrics`` with ``qc_vars=['mt']``):
#: an input column of one of these names is kept renamed, not overwritten
QC_OBS = ("n_genes_by_counts", "total_counts", "total_counts_mt", "pct_counts_mt")
#: an input name that collides with one of preprocessing's own is kept as ``<name>`` + this
RENAMED_SUFFIX = "_input"
#: what scanpy's highly_variable_genes writes, whatever its flavour: preprocessing chooses its own highly variable
#: genes, so the input's (another computation, on other cells) must not be read as them (a method ranks its genes
#: by ``highly_variable_rank`` or ``dispersions_norm`` when present)
HVG_COLUMNS = frozenset({"highly_variable", "highly_variable_rank", "highly_variable_nbatches",
                         "highly_variable_intersection", "means", "variances", "variances_norm", "dispersions",
                         "dispersions_norm"})


def _owned(key: str, patterns: Sequence[str]) -> bool:
    return any(key.startswith(p[:-1]) if p.endswith("*") else key == p for p in patterns)


def method_slots(adata: ad.AnnData) -> dict[str, list[str]]:
    """The slots of ``adata`` that preprocessing or a method writes (see ``METHOD_SLOTS``), per slot."""
    found = {}
    for slot, patterns in METHOD_SLOTS.items():
        keys = adata.obs.columns if slot == "obs" else adata.var.columns if slot == "var" else getattr(adata, slot).keys()
        hit = {str(k) for k in keys if _owned(str(k), patterns)}
        if slot == "uns":  # a finished result's colours of its group column are scontrast's too
            hit |= {k for k in (_previous_colours(adata),) if k in adata.uns}
        if hit:
            found[slot] = sorted(hit)
    return found


def _previous_colours(adata: ad.AnnData) -> str | None:
    """``'<groupby>_colors'`` of a finished result (its ``uns['scontrast']`` names the group column), else None."""
    info = adata.uns.get("scontrast")
    info = info.get("preprocess") if isinstance(info, dict) else None
    params = info.get("params") if isinstance(info, dict) else None
    groupby = params.get("groupby") if isinstance(params, dict) else None
    return None if groupby is None else f"{groupby}_colors"


# Mitochondrially encoded genes under the names some annotations give them without a prefix.


def _edges(graph) -> int:
    """Stored entries of an obsp graph (sparse), or its non-zero entries (dense)."""
    return int(graph.nnz) if sp.issparse(graph) else int(np.count_nonzero(np.asarray(graph)))


def _take(value, rows: np.ndarray, axis: int = 0):
    """``value`` (an obsm/obsp entry: array, sparse matrix or DataFrame) at the positions ``rows`` of ``axis``."""
    if isinstance(value, pd.DataFrame):
        return value.iloc[rows] if axis == 0 else value.iloc[:, rows]
    return value[rows] if axis == 0 else value[:, rows]


def _free_name(name: str, taken) -> str:
    """``<name>_input`` (``_input2``, ... when taken): where an input entry colliding with one of ours is kept."""
    new, i = f"{name}{RENAMED_SUFFIX}", 2
    while new in taken:
        new, i = f"{name}{RENAMED_SUFFIX}{i}", i + 1
    return new


def _renames(names, ours, slot: str) -> list[tuple[str, str, str]]:
    """``(slot, name, new name)`` for each input name that is one of ``ours``; logged."""
    names = [str(n) for n in names]
    taken = set(names) | set(map(str, ours))
    out = []
    for name in names:
        if name in ours:
            new = _free_name(name, taken)
            taken.add(new)
            out.append((slot, name, new))
            log.info("input %s['%s'] is kept as %s['%s']: scontrast writes its own %s['%s']", slot, name, slot, new,
                     slot, name)
    return out


def _finish_annotations(out: ad.AnnData, carried: dict, *, groupby: str, target: list[str],
                        background: list[str]) -> dict:
    """Join the input's var columns and uns entries (``carried``, by :func:`_two_groups`) to ``out`` and write
    the group's categorical and colours; returns what ``uns['scontrast']['preprocess']['input_annotations']``
    records: ``renamed`` (``slot``, ``name``, ``as``: the input entries kept under another name),
    ``not_carried`` (the input's layers and whether it had ``raw``) and what was carried per slot.
    """
    renamed = list(carried["renamed"])
    uns = carried["uns"]
    # categories no kept cell holds are dropped, and their colours with them, as anndata's subsets do
    for col, before in carried["categories"].items():
        if col in out.obs:
            out.obs[col] = out.obs[col].cat.remove_unused_categories()
            _follow_categories(uns, col, before, list(out.obs[col].cat.categories))
    user_var = carried["var"].loc[out.var_names]
    for col in user_var.columns:
        if isinstance(user_var[col].dtype, pd.CategoricalDtype):
            user_var[col] = user_var[col].cat.remove_unused_categories()
    var_renamed = _renames(user_var.columns, set(out.var.columns) | HVG_COLUMNS, "var")
    renamed += var_renamed
    user_var = user_var.rename(columns={old: new for _, old, new in var_renamed})
    out.var = pd.concat([user_var, out.var], axis=1)

    _write_group_colours(out, groupby, target, background)
    uns_renamed = _renames(uns.keys(), set(out.uns.keys()) | {"hvg"}, "uns")  # uns['hvg'] describes HVG_COLUMNS
    renamed += uns_renamed
    for _, old, new in uns_renamed:
        uns[new] = uns.pop(old)
    out.uns = {**uns, **out.uns}

    not_carried = carried["not_carried"]
    if not_carried["layers"] or not_carried["raw"]:
        log.info("not carried from the input (each as large as X): %s",
                 "; ".join([f"layers{not_carried['layers']}"] * bool(not_carried["layers"])
                           + ["raw"] * bool(not_carried["raw"])))
    for key, before in carried["edges"].items():
        if key in out.obsp:
            log.info("obsp['%s'] holds the graph between the kept cells: %d of its %d edges (a cell's neighbours "
                     "outside the kept cells are not among them)", key, _edges(out.obsp[key]), before)
    log.info("carried from the input: %d obs and %d var columns; obsm %s; varm %s; obsp %s; uns %s",
             len(carried["obs"]), len(user_var.columns), list(out.obsm.keys()), list(out.varm.keys()), list(out.obsp.keys()),
             sorted(uns.keys()))
    return {
        "renamed": {key: np.array([r[i] for r in renamed], dtype=str) for i, key in enumerate(("slot", "name", "as"))},
        "not_carried": {"layers": np.array(not_carried["layers"], dtype=str), "raw": bool(not_carried["raw"])},
        "obs": np.array(carried["obs"], dtype=str),
        "var": np.array(user_var.columns, dtype=str),
        "obsm": np.array(list(out.obsm.keys()), dtype=str),
        "uns": np.array(sorted(uns.keys()), dtype=str),
    }


def _follow_categories(uns: dict, col: str, before: list, after: list) -> None:
    """Keep ``uns['<col>_colors']`` (one colour per category in ``before``) for the categories ``after``."""
    key = f"{col}_colors"
    colours = uns.get(key)
    if colours is None or np.ndim(colours) != 1 or len(colours) != len(before) or before == after:
        return  # scanpy redraws colours that do not match the categories
    where = {c: i for i, c in enumerate(before)}
    uns[key] = np.asarray(colours)[[where[c] for c in after]]


def _write_group_colours(out: ad.AnnData, groupby: str, target: list[str], background: list[str]) -> None:
    """``obs['scontrast_group']`` and scanpy's colours of it and of ``obs[groupby]``, as the figures draw them.

    ``uns['<groupby>_colors']`` holds one colour per category of ``obs[groupby]`` in its order: the
    target's red for a category of target cells, the background's blue for one of background cells,
    grey for any other. A text column is made categorical first (what anndata does on writing, and
    scanpy on plotting); a numeric or boolean one is drawn by scanpy on a colour scale: no colours.
    """
    from ..core import BACKGROUND_COLOUR, NEUTRAL_COLOUR, TARGET_COLOUR

    is_target = out.obs[TARGET_KEY].to_numpy(dtype=bool)
    names = [_group_name(target, "target"), _group_name(background, "background")]
    out.obs[GROUP_KEY] = pd.Categorical(np.where(is_target, names[0], names[1]), categories=names)
    out.uns[f"{GROUP_KEY}_colors"] = np.array([TARGET_COLOUR, BACKGROUND_COLOUR], dtype=object)
    col = out.obs[groupby]
    if not isinstance(col.dtype, pd.CategoricalDtype):
        if not (pd.api.types.is_string_dtype(col) or pd.api.types.is_object_dtype(col)):
            return
        out.obs[groupby] = pd.Categorical(col.astype(str))
        col = out.obs[groupby]
    colours = []
    values = col.to_numpy()
    for category in col.cat.categories:
        cells = values == category
        colours.append(TARGET_COLOUR if cells.any() and is_target[cells].all() else
                       BACKGROUND_COLOUR if cells.any() and not is_target[cells].any() else NEUTRAL_COLOUR)
    out.uns[f"{groupby}_colors"] = np.array(colours, dtype=object)


def _keep(adata: ad.AnnData, obs: np.ndarray | None = None, var: np.ndarray | None = None) -> ad.AnnData:
    """``adata[obs][:, var].copy()`` (boolean masks, None = all), made in place.

    The caller still holds ``adata``: a new object would keep the old matrix alive beside it.
    Here the matrix is subset once by scipy (anndata's view and copy would make two) and the old
    one freed as soon as the new one exists; nothing is copied when every cell (gene) is kept.
    The annotations (obs, var) are subset by anndata as usual.
    """
    rows = obs is not None and not obs.all()
    cols = var is not None and not var.all()
    if not (rows or cols):
        return adata
    X, adata.X = adata.X, None  # the only reference left is X's: reassigning it frees the old matrix
    if rows:
        X = X[obs]
        adata._inplace_subset_obs(obs)
    if cols:
        X = X[:, var]
        adata._inplace_subset_var(var)
    adata.X = X
    return adata
