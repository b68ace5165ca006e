"""Preprocessing: restrict to the two groups, QC, normalisation, highly variable genes.

``preprocess(adata, groupby=..., target=[...], background=[...], counts=...)`` returns a new
AnnData holding only target and background cells, with

- ``X``: log-normalised expression: ``normalize_total`` + ``log1p`` for raw counts
  (``counts='raw'``), ``log1p`` alone for depth-normalised values (``counts='tpm'``: TPM,
  CPM, FPKM), the input values, checked, when already log-normalised (``'normalized'``);
- ``layers['counts']``: the raw counts (raw input only; float32, or float64 when a count
  exceeds 2**24 so that every count stays exact);
- ``obs['scontrast_target']``: True for target cells, False for background;
- ``obs['n_genes_by_counts']``, ``obs['pct_counts_mt']`` and the other scanpy QC metrics
  (computed on the input values);
- ``var['highly_variable']`` and scanpy's HVG statistics;
- ``obs['scontrast_group']``: the same split as a categorical ("<target labels> (target)",
  "<background labels> (background)") with ``uns['scontrast_group_colors']``, and
  ``uns['<groupby>_colors']``: scanpy's colours of the group column (its categories in its order;
  a text column is made categorical, as anndata writes it), the figures' red for target and blue
  for background;
- ``uns['scontrast']['preprocess']``: parameters, package versions, cell and gene counts,
  ``warnings`` (one-line messages), ``qc_removed`` (the QC metrics of the removed cells) and
  ``input_annotations`` (what of the input was carried, renamed or not carried).

The user's own annotations of the kept cells and genes are carried: every obs and var column,
every obsm, varm, obsp and varp entry (subset to the kept cells and genes as anndata subsets
them: a graph in obsp keeps the edges between kept cells) and every uns entry (colours of a
categorical column follow its categories). An input name that collides with preprocessing's own
(scanpy's QC metrics and HVG statistics, ``<groupby>_colors``) is kept as ``<name>_input``
(logged, and listed in ``input_annotations['renamed']``): nothing is overwritten. Slots that
scontrast's steps write (``METHOD_SLOTS``: an input that is a finished ``scontrast.h5ad``) are not
carried over, so every result is fresh (logged). The input's layers and ``raw`` are not carried
(each as large as X; logged). Sparse input stays sparse.
"""

from __future__ import annotations

import copy
import inspect
import logging
import numbers
import warnings
from collections.abc import Sequence

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from .core import TARGET_KEY, ScontrastError, ScontrastWarning, package_versions, result_warnings
from .design import REPLICATE_KEY, declare_design, undeclared_design_columns
from .io import canonical_matrix, check_finite, check_sparse_structure, read_h5ad

__all__ = ["preprocess", "preprocess_file", "validate_counts", "group_labels", "method_slots", "METHOD_SLOTS"]

log = logging.getLogger(__name__)


def _as_list(labels) -> list[str]:
    """Labels as a list of text: one label (text or a number, ``target: 1.0``) or a list of them."""
    return [str(x) for x in ([labels] if isinstance(labels, (str, numbers.Number)) else labels)]


def _number(text: str) -> float | None:
    """The number a config label spells (``'1.0'``, ``'1'``, ``'1e0'``), or None."""
    try:
        return float(text)
    except ValueError:
        return None


def _is_number(value) -> bool:
    return isinstance(value, (numbers.Real, np.number)) and not isinstance(value, (bool, np.bool_))


def _denoted(label: str, values) -> set:
    """The present values of a column that a config label denotes.

    Its text (``str(value) == label``), and on a numeric value the number it spells: ``'1'``,
    ``'1.0'`` and ``'1e0'`` all select the cells holding 1.0. Text is never read as a number the
    other way round (``'01'`` does not select ``'1'``).
    """
    number = _number(label)
    return {v for v in values if str(v) == label or (number is not None and _is_number(v) and float(v) == number)}


def group_labels(obs: pd.DataFrame, groupby: str, target: Sequence[str], background: Sequence[str]) -> pd.Series:
    """Label each cell 'target', 'background' or NaN (neither).

    Labels are matched against the values present in ``obs[groupby]`` by what they denote
    (:func:`_denoted`: as text, and on a numeric column as numbers, so ``'0'`` and ``'0.0'``
    select the same cells); a cell with no value (NaN, None) is never selected, whatever the
    label (``'nan'`` selects nothing unless a cell holds that text). Raises when ``groupby`` is
    not a column, a label selects no cell (naming it and the values present), or a value is
    selected as both target and background (however each label spells it).
    """
    if groupby not in obs:
        raise ScontrastError(f"obs column '{groupby}' (groupby) is absent; have {list(obs.columns)[:20]}")
    target, background = _as_list(target), _as_list(background)
    col = obs[groupby]
    has_value = col.notna().to_numpy()
    present = list(pd.unique(col[has_value]))
    shown = sorted({str(v) for v in present})
    n_missing = int((~has_value).sum())
    chosen: dict[str, dict[str, set]] = {}
    for role, labels in (("target", target), ("background", background)):
        chosen[role] = {x: _denoted(x, present) for x in labels}
        missing = [x for x, values in chosen[role].items() if not values]
        if missing:
            note = f"; {n_missing} cell(s) have no value, which no label selects" if n_missing else ""
            raise ScontrastError(
                f"{role} label(s) {missing} not found in obs['{groupby}'] (values: {shown[:20]}{note})"
            )
    selected = {role: set().union(*by_label.values()) for role, by_label in chosen.items()}
    both = selected["target"] & selected["background"]
    if both:
        spelled = {role: sorted(x for x, values in chosen[role].items() if values & both) for role in chosen}
        n_both = int(col.isin(both).to_numpy()[has_value].sum())
        raise ScontrastError(
            f"labels are both target and background: target {spelled['target']} and background "
            f"{spelled['background']} both select obs['{groupby}'] value(s) {sorted(str(v) for v in both)} "
            f"({n_both} cells)"
        )
    out = pd.Series(np.nan, index=obs.index, dtype=object)
    for role in ("target", "background"):
        out[(col.isin(selected[role]).to_numpy() & has_value)] = role
    return out


_F32_MAX = float(np.finfo(np.float32).max)
_F32_EXACT = 2**24  # every integer up to this is exact in float32
_F64_EXACT = 2**53
_LOG_SCALE_MAX = 50.0  # no log-normalised value exceeds this (log1p(1e6 * 1) ~ 13.8, log2(1e6) ~ 20)


def _values(X) -> np.ndarray:
    return X.data if sp.issparse(X) else np.asarray(X)


def _check_range(values: np.ndarray, name: str) -> None:
    """Finite values held in float32 must fit float32: refuse values beyond its range with one line."""
    if not values.size:
        return
    top = max(float(values.max()), -float(values.min()))  # no copy of a large matrix
    if top > _F32_MAX:
        raise ScontrastError(f"{name} has values up to {top:.3g}, beyond the float32 range ({_F32_MAX:.3g}) the data "
                             "are held in")


#: stored values handled at a time by the whole-matrix passes (integer check, detected genes,
#: normalisation): their temporaries stay a small fraction of the matrix (2**24: 64 MB of float32)
PASS_ENTRIES = 2**24


def _pieces(n: int, step: int | None = None):
    """``(start, stop)`` of consecutive pieces of ``range(n)`` holding at most ``step`` (``PASS_ENTRIES``) each."""
    step = max(1, step or PASS_ENTRIES)
    return ((a, min(a + step, n)) for a in range(0, n, step))


def _is_integer(values: np.ndarray) -> bool:
    if np.issubdtype(values.dtype, np.integer) or np.issubdtype(values.dtype, np.bool_):
        return True
    # a piece at a time: np.round of the whole array is a second copy of the values
    flat = values.reshape(-1)
    return all(np.array_equal(flat[a:b], np.round(flat[a:b])) for a, b in _pieces(flat.size))


def validate_counts(X, name: str = "X", layers: Sequence[str] = ()) -> None:
    """Raise unless ``X`` looks like raw counts: finite, non-negative integers.

    Advice fits the values: non-integer values on a log scale point to ``counts: normalized``,
    larger ones (TPM, CPM, FPKM) to ``counts: tpm``, and a ``counts`` layer to ``layer: counts``.
    """
    check_finite(X, name)
    values = _values(X)
    if values.size and values.min() < 0:
        raise ScontrastError(f"{name} has negative values but counts: raw was declared")
    if values.size and not _is_integer(values):
        top = float(values.max())
        fractional = values[values != np.round(values)]
        if fractional.size < 0.01 * values.size:  # counts with a few stray values, not another scale
            raise ScontrastError(f"{name} has non-integer values but counts: raw was declared ({fractional.size} of "
                                 f"{values.size} stored values, e.g. {fractional[0]:.4g}; raw counts are integers)")
        if top > _LOG_SCALE_MAX:
            advice = f"values up to {top:.4g} look depth-normalised (TPM, CPM, FPKM): declare counts: tpm"
        else:
            advice = f"values up to {top:.4g} look log-normalised: declare counts: normalized"
        if "counts" in layers:
            advice += ", or read the raw counts with layer: counts"
        raise ScontrastError(f"{name} has non-integer values but counts: raw was declared ({advice})")
    # compared as Python floats: numpy would cast the limit to the data's dtype (float16: inf, with
    # an "overflow encountered in cast" warning that says nothing true about the data)
    if values.size and float(values.max()) > _F64_EXACT:
        raise ScontrastError(f"{name} holds counts up to {values.max():.4g}, more than 2**53: they cannot be kept "
                             "exactly as floating-point numbers")


def _validate_normalized(X, name: str = "X") -> None:
    check_finite(X, name)
    values = _values(X)
    if values.size and values.min() < 0:
        raise ScontrastError(
            f"{name} has negative values: give log-normalised (not scaled) expression, e.g. adata.raw or a layer"
        )
    if values.size and _is_integer(values) and values.max() > 30:
        raise ScontrastError(
            f"{name} holds integers up to {values.max():g}: it looks like raw counts, declare counts: raw"
        )
    if values.size and values.max() > _LOG_SCALE_MAX:
        raise ScontrastError(
            f"{name} has values up to {values.max():.4g}, not a log scale, but counts: normalized was declared "
            "(log-normalised values stay below 50): depth-normalised values (TPM, CPM, FPKM) are counts: tpm"
        )


def _validate_tpm(X, name: str = "X") -> None:
    check_finite(X, name)
    values = _values(X)
    if values.size and values.min() < 0:
        raise ScontrastError(f"{name} has negative values but counts: tpm was declared (TPM, CPM, FPKM are >= 0)")
    if values.size and values.max() <= _LOG_SCALE_MAX and not _is_integer(values):
        raise ScontrastError(
            f"{name} has values up to {values.max():.4g}, a log scale, but counts: tpm was declared: "
            "log-normalised values are counts: normalized"
        )
    if values.size and _is_integer(values) and values.max() > 30:
        warnings.warn(f"{name} holds only integers (up to {values.max():g}) but counts: tpm was declared: if these "
                      "are raw counts declare counts: raw (tpm skips the depth normalisation)", ScontrastWarning,
                      stacklevel=3)


# Slots the workflow's steps write; an input that already holds them (a finished scontrast.h5ad
# fed back in) must not carry them into the new results. Exact names, or prefixes ending in '*'.
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
_MITO_NAMES = frozenset({
    "ND1", "ND2", "ND3", "ND4", "ND4L", "ND5", "ND6", "CYTB", "COX1", "COX2", "COX3", "CO1", "CO2", "CO3",
    "COI", "COII", "COIII", "ATP6", "ATP8", "RNR1", "RNR2", "MTND1", "MTND2", "MTND3", "MTND4", "MTND4L",
    "MTND5", "MTND6", "MTCYB", "MTCO1", "MTCO2", "MTCO3", "MTATP6", "MTATP8", "MTRNR1", "MTRNR2", "CYB",
})
_OTHER_PREFIXES = ("MT-", "MT.", "MT_", "MT:")


def _mito_mask(var_names: pd.Index, prefix: str) -> np.ndarray:
    return np.asarray(var_names.str.upper().str.startswith(prefix.upper()), dtype=bool)


def _mito_advice(var_names: pd.Index, prefix: str) -> str:
    """What the gene names suggest when ``prefix`` matches none (empty when they suggest nothing)."""
    upper = pd.Index(var_names.astype(str).str.upper())
    for other in _OTHER_PREFIXES:
        if other == prefix.upper():
            continue
        stems = upper[upper.str.startswith(other)].str[len(other):]
        hits = [s for s in stems if s in _MITO_NAMES]
        if len(hits) >= 3:
            return f"; {len(hits)} genes look mitochondrial with the prefix '{other}': set mito_prefix: '{other}'"
    bare = [str(g) for g, u in zip(var_names, upper) if u in _MITO_NAMES]
    if bare:
        shown = ", ".join(bare[:6]) + (", ..." if len(bare) > 6 else "")
        return (f"; {len(bare)} gene(s) have mitochondrial names without a prefix ({shown}): rename them "
                f"'{prefix}<name>' in var_names to filter on them")
    return ""


def preprocess(
    adata: ad.AnnData,
    *,
    groupby: str,
    target: Sequence[str] | str,
    background: Sequence[str] | str,
    counts: str = "raw",
    layer: str | None = None,
    min_genes: int = 200,
    min_cells: int = 3,
    max_pct_mito: float = 20.0,
    mito_prefix: str = "MT-",
    n_top_genes: int = 2000,
    hvg_flavor: str = "seurat",
    target_sum: float | None = 1e4,
    min_cells_per_group: int = 10,
    replicate: str | None = None,
    paired: bool = False,
    min_cells_per_replicate: int = 3,
) -> ad.AnnData:
    """Prepare ``adata`` (cells x genes) for the contrast of ``target`` vs ``background``.

    Parameters
    ----------
    groupby
        obs column holding the group labels.
    target, background
        Label(s) of ``obs[groupby]`` forming each group; other cells are dropped.
    counts
        What the matrix holds: ``'raw'`` (UMI or read counts: QC on counts, then
        ``normalize_total`` and ``log1p``), ``'tpm'`` (depth-normalised, not logged: TPM,
        CPM, FPKM: QC on the values, then ``log1p`` without depth normalisation) or
        ``'normalized'`` (already log-normalised: checked and kept). Values that do not
        fit the declaration are refused with the declaration they fit.
    layer
        Read the matrix from ``adata.layers[layer]`` instead of ``X``.
    min_genes, min_cells
        Keep cells with at least ``min_genes`` detected genes and genes detected
        in at least ``min_cells`` of the kept cells.
    max_pct_mito
        Drop cells whose mitochondrial share of the values exceeds this (raw and tpm);
        genes whose name starts with ``mito_prefix`` (any case) are mitochondrial.
    n_top_genes, hvg_flavor
        Highly variable genes (``sc.pp.highly_variable_genes``); all genes are
        flagged when fewer remain.
    target_sum
        ``normalize_total`` target for raw counts (None = the median of the cells' totals).
    min_cells_per_group
        Fail when a group keeps fewer cells than this after QC.
    replicate
        obs column naming each cell's replicate (donor, patient, sample), or None. Declared,
        every p-value, error and enrichment of the methods is computed per replicate (see
        :mod:`scontrast.design`); undeclared while a column named like one (``patient``,
        ``donor``, ``sample``...) takes >= 2 values in both groups, a warning names it.
    paired
        Each replicate gives cells to both groups (tumour and normal tissue of one patient).
        Unpaired, a replicate with cells in both groups is refused; paired, a replicate
        missing a group is dropped with a warning.
    min_cells_per_replicate
        A replicate with fewer kept cells than this in a group is dropped with a warning.

    Returns
    -------
    AnnData with the target and background cells (n_kept x genes_kept); see the
    module docstring for its slots. What the user must know (the mitochondrial prefix
    matching no gene, QC removing more than 20% of a group, integers declared tpm) is
    warned (``ScontrastWarning``), logged and kept in
    ``uns['scontrast']['preprocess']['warnings']``.

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> import scontrast as sct
    >>> rng = np.random.default_rng(0)
    >>> counts = rng.poisson(2.0, size=(60, 300)).astype(np.float32)
    >>> obs = pd.DataFrame({"condition": ["disease"] * 30 + ["healthy"] * 30}, index=[f"c{i}" for i in range(60)])
    >>> adata = ad.AnnData(counts, obs=obs, var=pd.DataFrame(index=[f"g{i}" for i in range(300)]))
    >>> pre = sct.preprocess(adata, groupby="condition", target=["disease"], background=["healthy"],
    ...                      counts="raw", min_genes=10, n_top_genes=50)
    >>> int(pre.obs["scontrast_target"].sum()), int(pre.var["highly_variable"].sum())
    (30, 50)
    >>> "counts" in pre.layers                             # the raw counts are kept beside log1p(normalised)
    True
    """
    return _recorded([adata], False, groupby=groupby, target=target, background=background, counts=counts,
                     layer=layer, min_genes=min_genes, min_cells=min_cells, max_pct_mito=max_pct_mito,
                     mito_prefix=mito_prefix, n_top_genes=n_top_genes, hvg_flavor=hvg_flavor, target_sum=target_sum,
                     min_cells_per_group=min_cells_per_group, replicate=replicate, paired=paired,
                     min_cells_per_replicate=min_cells_per_replicate)


def preprocess_file(path, **params) -> ad.AnnData:
    """``preprocess(io.read_h5ad(path), **params)`` holding the input only until the two groups are taken.

    What the workflow's rule runs: the input is read, the two groups' cells taken from it
    (without a copy when they are all its cells) and the input dropped before QC, so that a
    large file is held once, not twice (``preprocess`` keeps the caller's AnnData as given).
    ``params``: the keywords of :func:`preprocess`, with its defaults.
    """
    bound = inspect.signature(preprocess).bind(None, **params)
    bound.apply_defaults()
    args = {k: v for k, v in bound.arguments.items() if k != "adata"}
    return _recorded([read_h5ad(path)], True, **args)


def _recorded(source: list, owned: bool, **params) -> ad.AnnData:
    """``_preprocess`` of the AnnData in ``source`` (taken out of it), its warnings recorded in uns."""
    with result_warnings("preprocess") as warned:
        out = _preprocess(source, owned=owned, **params)
    out.uns["scontrast"]["preprocess"]["warnings"] = np.array(warned, dtype=object).astype(str)
    return out


QC_WARN_FRACTION = 0.2  # QC removing more than this share of a group's cells is warned


def _group_name(labels: list[str], role: str) -> str:
    return f"{' + '.join(labels)} ({role})"


def _preprocess(source: list, *, owned: bool, groupby, target, background, counts, layer, min_genes, min_cells,
                max_pct_mito, mito_prefix, n_top_genes, hvg_flavor, target_sum, min_cells_per_group, replicate,
                paired, min_cells_per_replicate) -> ad.AnnData:
    """The work of ``preprocess`` on the AnnData popped from ``source``; ``owned``: no one else holds it."""
    import scanpy as sc  # here, not at module level: `import scontrast` stays light for every other job

    adata = source.pop()
    labels, keep, X, dtype = _checked_input(adata, groupby=groupby, target=target, background=background,
                                            counts=counts, layer=layer, replicate=replicate, owned=owned)
    n_genes_in = int(adata.n_vars)
    out, carried = _two_groups(adata, X, labels, keep, dtype)
    del adata, X  # an input handed over (preprocess_file) is freed here: only the two groups' cells are held
    is_target = out.obs[TARGET_KEY].to_numpy()
    n_in = {"target": int(is_target.sum()), "background": int((~is_target).sum())}
    out, qc = _quality_control(sc, out, counts=counts, min_genes=min_genes, min_cells=min_cells,
                               max_pct_mito=max_pct_mito, mito_prefix=mito_prefix)
    removed_reason = qc["removed_reason"]

    out, design, design_keep, no_replicate = _apply_design(out, replicate=replicate, paired=paired,
                                                           min_cells=min_cells_per_replicate, groupby=groupby)
    removed_reason[qc["rows_in"][~design_keep]] = "replicate"
    removed_reason[qc["rows_in"][no_replicate]] = "no_replicate"
    n_kept = {"target": int(out.obs[TARGET_KEY].sum()), "background": int((~out.obs[TARGET_KEY]).sum())}
    _check_group_losses(is_target, removed_reason, n_in, n_kept, target=target, background=background,
                        min_genes=min_genes, max_pct_mito=max_pct_mito, min_cells=min_cells,
                        min_cells_per_group=min_cells_per_group)
    _normalise_and_flag(sc, out, counts=counts, target_sum=target_sum, n_top_genes=n_top_genes,
                        hvg_flavor=hvg_flavor, share=owned)

    params = dict(groupby=groupby, target=_as_list(target), background=_as_list(background), counts=counts,
                  layer=str(layer), min_genes=min_genes, min_cells=min_cells, max_pct_mito=max_pct_mito,
                  mito_prefix=mito_prefix, n_top_genes=n_top_genes, hvg_flavor=hvg_flavor,
                  target_sum="median" if target_sum is None else target_sum,
                  min_cells_per_group=min_cells_per_group, replicate=str(replicate), paired=bool(paired),
                  min_cells_per_replicate=min_cells_per_replicate)
    gone = removed_reason != ""
    qc_table = qc["qc_table"]
    out.uns["scontrast"] = {"design": design, "preprocess": {
        "params": params,
        "versions": package_versions(),
        "n_cells_in": n_in,
        "n_cells_kept": n_kept,
        "n_genes_in": n_genes_in,
        "n_genes_kept": int(out.n_vars),
        "n_highly_variable": int(out.var["highly_variable"].sum()),
        "n_mito_genes": int(qc["mito"].sum()),
        "mito_filter": bool(qc["mito_filter"] and qc["mito"].any()),
        # the QC metrics of the removed cells (the kept cells' are in obs): the QC figure shows both
        "qc_removed": {
            "cell": np.asarray(qc_table.index[gone], dtype=str),
            "target": is_target[gone],
            "reason": removed_reason[gone].astype(str),
            **{k: qc_table[k].to_numpy(dtype=float)[gone] for k in qc_table.columns},
        },
    }}
    out.uns["scontrast"]["preprocess"]["input_annotations"] = _finish_annotations(
        out, carried, groupby=groupby, target=_as_list(target), background=_as_list(background))
    log.info("kept %s cells and %d genes (%d highly variable)", n_kept, out.n_vars,
             int(out.var["highly_variable"].sum()))
    return out


def _checked_input(adata, *, groupby, target, background, counts, layer, replicate, owned=False):
    """The group labels, the mask of the two groups' cells, their matrix checked against ``counts``, its dtype.

    The checks run in this order so that the first problem met is the one reported. ``owned``:
    the caller hands ``adata`` over, so its matrix may be taken as is when every cell is kept.
    """
    if counts not in ("raw", "tpm", "normalized"):
        raise ScontrastError(f"counts must be 'raw', 'tpm' or 'normalized', got {counts!r}")
    if layer is not None and layer not in adata.layers:
        raise ScontrastError(f"layer '{layer}' is absent (have {list(adata.layers.keys())})")
    matrix_name = "X" if layer is None else f"layers['{layer}']"
    labels = group_labels(adata.obs, groupby, target, background)
    if replicate is not None and replicate not in adata.obs:
        raise ScontrastError(f"obs column '{replicate}' (replicate) is absent; have {list(adata.obs.columns)[:20]}")
    if replicate is not None and replicate == groupby:
        raise ScontrastError(f"replicate: '{replicate}' is the groupby column itself: name the obs column of the "
                             "donors, patients or samples")
    keep = labels.notna().to_numpy()
    X = adata.X if layer is None else adata.layers[layer]
    if X is None:
        raise ScontrastError("the AnnData has no X matrix")
    check_sparse_structure(X, matrix_name)  # before scipy's routines, which trust the arrays, read them
    # duplicate entries summed (QC counts stored entries), on the slice: the caller's matrix stays as given
    X = canonical_matrix(X if owned and keep.all() else X[keep], matrix_name, check=False)
    check_finite(X, matrix_name)
    _check_range(_values(X), matrix_name)
    if counts == "raw":
        validate_counts(X, matrix_name, layers=list(adata.layers.keys()) if layer is None else ())
    elif counts == "tpm":
        _validate_tpm(X, matrix_name)
    else:
        _validate_normalized(X, matrix_name)
    values = _values(X)
    # counts above 2**24 are not all exact in float32: keep them exact in float64
    dtype = np.float64 if counts == "raw" and values.size and float(values.max()) > _F32_EXACT else np.float32
    if dtype == np.float64:
        log.info("%s holds counts up to %g, above float32's exact integers (2**24): counts kept in float64",
                 matrix_name, values.max())
    return labels, keep, X, dtype


def _two_groups(adata, X, labels, keep, dtype) -> tuple[ad.AnnData, dict]:
    """A fresh AnnData of the two groups' cells, flagged in ``obs[TARGET_KEY]``, without the slots of a past run.

    It holds the input's obs columns (those named as QC's own renamed: :data:`QC_OBS`) and its
    obsm, obsp, varm and varp entries (subset to the two groups' cells), which every later subset
    keeps aligned; the rest of the input's annotations, joined at the end by
    :func:`_finish_annotations`, are returned beside it.
    """
    stale = method_slots(adata)
    if stale:
        log.info("input slots written by scontrast's own steps are dropped (a finished result fed back in?): %s",
                 "; ".join(f"{slot}{keys}" for slot, keys in stale.items()))
    obs = adata.obs.loc[keep].drop(columns=stale.get("obs", []))
    renamed = _renames(obs.columns, QC_OBS, "obs")
    rows = np.flatnonzero(keep)
    mine = {slot: {k: v for k, v in getattr(adata, slot).items() if k not in stale.get(slot, [])}
            for slot in ("obsm", "obsp", "varm", "varp")}
    out = ad.AnnData(
        X=sp.csr_matrix(X, dtype=dtype) if sp.issparse(X) else np.asarray(X, dtype=dtype),
        obs=obs.rename(columns={old: new for _, old, new in renamed}),
        var=adata.var[[]].copy(),
        obsm={k: _take(v, rows) for k, v in mine["obsm"].items()},
        obsp={k: _take(_take(v, rows), rows, axis=1) for k, v in mine["obsp"].items()},
        varm={k: v.copy() for k, v in mine["varm"].items()},
        varp={k: v.copy() for k, v in mine["varp"].items()},
    )
    out.obs[TARGET_KEY] = (labels[keep] == "target").to_numpy()
    carried = {
        "obs": [str(c) for c in out.obs.columns if c != TARGET_KEY],
        "var": adata.var.drop(columns=stale.get("var", [])).copy(),
        "uns": copy.deepcopy({k: v for k, v in adata.uns.items() if k not in stale.get("uns", [])}),
        # each categorical column's categories in the input: the colours of its categories follow them
        "categories": {c: list(obs[c].cat.categories) for c in obs.columns
                       if isinstance(obs[c].dtype, pd.CategoricalDtype)},
        "renamed": renamed,
        "not_carried": {"layers": [str(k) for k in adata.layers.keys()], "raw": adata.raw is not None},
        # each graph's edges in the input: the result keeps those between kept cells (said in the log)
        "edges": {k: _edges(v) for k, v in mine["obsp"].items()},
    }
    return out, carried


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
    var_renamed = _renames(user_var.columns, out.var.columns, "var")
    renamed += var_renamed
    user_var = user_var.rename(columns={old: new for _, old, new in var_renamed})
    out.var = pd.concat([user_var, out.var], axis=1)

    _write_group_colours(out, groupby, target, background)
    uns_renamed = _renames(uns.keys(), set(out.uns.keys()), "uns")
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
    from .core import BACKGROUND_COLOUR, NEUTRAL_COLOUR, TARGET_COLOUR

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


def _qc_metrics(sc, out: ad.AnnData) -> None:
    """``sc.pp.calculate_qc_metrics(out, qc_vars=['mt'], percent_top=None, log1p=False, inplace=True)``, bitwise.

    For a CSR matrix the genes' counts of cells are counted a piece at a time (``_entries_per_gene``):
    scipy's ``getnnz(axis=0)``, which scanpy's ``describe_var`` calls, bincounts an int64 copy of
    the column indices (the peak of preprocessing once normalisation is in place). The rest is
    scanpy's own code (``describe_obs``; ``describe_var``'s other columns by its own functions).
    """
    try:
        from scanpy.preprocessing import _qc
        describe_obs, mean_var, axis_sum = _qc.describe_obs, _qc._get_mean_var, _qc.axis_sum
    except (ImportError, AttributeError):  # another scanpy: its own function, at its own memory cost
        describe_obs = None
    X = out.X
    if describe_obs is None or not (sp.issparse(X) and X.format == "csr"):
        sc.pp.calculate_qc_metrics(out, qc_vars=["mt"], percent_top=None, log1p=False, inplace=True)
        return
    X.eliminate_zeros()
    describe_obs(out, qc_vars=["mt"], percent_top=None, inplace=True, x=X, log1p=False)
    # scanpy 1.11 describe_var(expr_type='counts', var_type='genes', log1p=False)
    var_metrics = pd.DataFrame(index=out.var_names)
    var_metrics["n_cells_by_counts"], var_metrics["mean_counts"] = _entries_per_gene(X), mean_var(X, axis=0)[0]
    var_metrics["pct_dropout_by_counts"] = (1 - var_metrics["n_cells_by_counts"] / X.shape[0]) * 100
    var_metrics["total_counts"] = np.ravel(axis_sum(X, axis=0))
    out.var[var_metrics.columns] = var_metrics


def _cells_detected(X) -> np.ndarray:
    """Cells each gene (column) holds a positive value in: ``(X > 0).sum(axis=0)`` without its copies.

    scipy's comparison makes a boolean matrix with its own copy of the indices, and its sum an
    int64 copy of it (together 1.6 times a float32 CSR matrix at its peak): for a CSR matrix the
    column indices of the positive values are counted here a piece at a time. The same counts.
    """
    if not (sp.issparse(X) and X.format == "csr"):
        return np.asarray((X > 0).sum(axis=0)).ravel()
    out = np.zeros(X.shape[1], dtype=np.int64)
    for a, b in _pieces(X.nnz):
        out += np.bincount(X.indices[a:b][X.data[a:b] > 0], minlength=X.shape[1])
    return out


def _quality_control(sc, out, *, counts, min_genes, min_cells, max_pct_mito, mito_prefix) -> tuple[ad.AnnData, dict]:
    """The cells and genes passing QC, and what the record needs of it.

    Returns the filtered AnnData and ``mito`` (mask of the input genes), ``mito_filter``,
    ``removed_reason`` (per input cell, '' when kept), ``qc_table`` (the QC metrics of every
    input cell) and ``rows_in`` (each kept row as a row of ``qc_table``).
    """
    if not mito_prefix and counts in ("raw", "tpm") and max_pct_mito < 100:
        raise ScontrastError(f"mito_prefix '' marks every gene as mitochondrial, so max_pct_mito={max_pct_mito:g} would "
                             "remove every cell: give the prefix of the mitochondrial genes' names ('MT-', 'mt-'), or set "
                             "max_pct_mito: 100 to filter on none")
    mito = _mito_mask(out.var_names, mito_prefix)
    out.var["mt"] = mito
    _qc_metrics(sc, out)
    mito_filter = counts in ("raw", "tpm") and max_pct_mito < 100
    if mito_filter and not mito.any():
        # stacklevel: this function, _preprocess, _recorded, preprocess, then the user's call
        warnings.warn(f"mito_prefix '{mito_prefix}' matches no gene, so max_pct_mito={max_pct_mito:g} removed no "
                      f"cell{_mito_advice(out.var_names, mito_prefix)}", ScontrastWarning, stacklevel=5)
    low_genes = out.obs["n_genes_by_counts"].to_numpy() < min_genes
    high_mito = (out.obs["pct_counts_mt"].to_numpy() > max_pct_mito) & ~low_genes if mito_filter and mito.any() \
        else np.zeros(out.n_obs, dtype=bool)
    cell_ok = ~(low_genes | high_mito)
    removed_reason = np.where(low_genes, "min_genes", np.where(high_mito, "max_pct_mito", ""))
    qc_table = out.obs[["n_genes_by_counts", "total_counts", "pct_counts_mt"]].copy()
    out = _keep(out, obs=cell_ok)
    if out.n_obs == 0:
        raise ScontrastError(_no_cell_left(qc_table, low_genes, high_mito, min_genes=min_genes,
                                           max_pct_mito=max_pct_mito))
    detected = _cells_detected(out.X)
    gene_ok = detected >= min_cells
    if gene_ok.sum() < 2:
        raise ScontrastError(_too_few_genes(detected, out.n_obs, min_cells))
    out = _keep(out, var=gene_ok)
    zero_cells = np.asarray(out.X.sum(axis=1)).ravel() == 0
    if zero_cells.any():
        removed_reason[np.flatnonzero(cell_ok)[zero_cells]] = "min_cells"
        out = _keep(out, obs=~zero_cells)
    rows_in = np.flatnonzero(cell_ok)[~zero_cells]
    return out, {"mito": mito, "mito_filter": mito_filter, "removed_reason": removed_reason, "qc_table": qc_table,
                 "rows_in": rows_in}


def _no_cell_left(qc_table: pd.DataFrame, low_genes: np.ndarray, high_mito: np.ndarray, *, min_genes,
                  max_pct_mito) -> str:
    """The line when QC removes every cell of the two groups: which setting removed how many, and what
    the cells hold (``qc_table``: the QC metrics of every cell; the masks: one entry per cell)."""
    genes = qc_table["n_genes_by_counts"].to_numpy()
    spread = f"median genes per cell {np.median(genes):g}, most {genes.max():g}"
    n = len(genes)
    if not high_mito.any():
        return (f"no cell has at least min_genes={min_genes} detected genes: min_genes={min_genes} removed all {n} "
                f"cells of the two groups ({spread})")
    mito = qc_table["pct_counts_mt"].to_numpy()[high_mito]
    parts = [f"min_genes={min_genes} removed {int(low_genes.sum())} ({spread})"] if low_genes.any() else []
    parts.append(f"max_pct_mito={max_pct_mito:g} removed {int(high_mito.sum())} (their mitochondrial share: median "
                 f"{np.median(mito):.1f}%, least {mito.min():.1f}%)")
    return f"QC removed all {n} cells of the two groups: " + ", ".join(parts)


def _too_few_genes(detected: np.ndarray, n_cells: int, min_cells: int) -> str:
    """The line when fewer than 2 genes pass ``min_cells`` (``detected``: the kept cells each gene is detected in)."""
    kept = int((detected >= min_cells).sum())
    if kept == len(detected):
        why = f"the data has {len(detected)} gene(s)"
    else:
        why = (f"min_cells={min_cells} removed {len(detected) - kept} of {len(detected)} genes (the most cells a "
               f"gene is detected in: {int(detected.max())} of the {n_cells} cells QC kept)")
    return f"fewer than 2 genes are detected in at least min_cells={min_cells} cells: {why}"


def _removed_by(reasons: np.ndarray, limits: dict[str, str]) -> str:
    """``"9 below min_genes=5, 3 above max_pct_mito=25"``: how many cells each reason removed."""
    return ", ".join(f"{int((reasons == r).sum())} {text}" for r, text in limits.items() if (reasons == r).any())


def _check_group_losses(is_target, removed_reason, n_in, n_kept, *, target, background, min_genes, max_pct_mito,
                        min_cells, min_cells_per_group) -> None:
    """Warn about a group QC thinned by more than ``QC_WARN_FRACTION``; refuse one left too small."""
    names = {"target": _group_name(_as_list(target), "target"),
             "background": _group_name(_as_list(background), "background")}
    limits = {"min_genes": f"below min_genes={min_genes}", "max_pct_mito": f"above max_pct_mito={max_pct_mito:g}",
              "min_cells": f"with no value left after min_cells={min_cells}", "no_replicate": "with no replicate value"}
    for group, in_group in (("target", is_target), ("background", ~is_target)):
        # cells of dropped replicates are warned replicate by replicate, not as QC losses; cells with no
        # replicate value count here, beside QC's (their own warning gives their number only)
        lost = n_in[group] - n_kept[group] - int((removed_reason[in_group] == "replicate").sum())
        if n_in[group] and lost > QC_WARN_FRACTION * n_in[group]:
            why = _removed_by(removed_reason[in_group], limits)
            qc_only = not (removed_reason[in_group] == "no_replicate").any()
            # stacklevel: this function, _preprocess, _recorded, preprocess, then the user's call
            warnings.warn(f"{'QC removed' if qc_only else 'removed'} {lost} of {n_in[group]} {names[group]} cells "
                          f"({100 * lost / n_in[group]:.0f}%): {why}", ScontrastWarning, stacklevel=5)
    limits["replicate"] = "in dropped replicates"
    for group, n in n_kept.items():
        if n < min_cells_per_group:
            removed = _removed_by(removed_reason[is_target if group == "target" else ~is_target], limits)
            raise ScontrastError(
                f"{group} group has {n} cells after QC (of {n_in[group]}), fewer than min_cells_per_group="
                f"{min_cells_per_group}" + (f"; removed: {removed}" if removed else "")
            )


#: A target_sum below this share of the cells' median total (or below 1) is warned: log1p of so small
#: values is linear (log1p(x) ~ x), so the data is no longer on a log scale.
TARGET_SUM_LOW = 1e-3


def _check_target_sum(target_sum, totals: np.ndarray) -> None:
    """Warn when ``target_sum`` is implausibly small against the cells' totals (a typo like 1e-6 for 1e6)."""
    if target_sum is None or not totals.size:
        return
    median = float(np.median(totals))
    if target_sum < 1 or target_sum < TARGET_SUM_LOW * median:
        warnings.warn(f"target_sum={target_sum:g} scales every cell to that total, far below the cells' own (median "
                      f"{median:.4g}): every value is then at most {target_sum:g}, where log1p is nearly linear, so X "
                      "is not on a log scale; the usual value is 10000 (or null: the median total)", ScontrastWarning,
                      stacklevel=6)


def _normalise_and_flag(sc, out, *, counts, target_sum, n_top_genes, hvg_flavor, share=False) -> None:
    """Log-normalise ``out`` in place as ``counts`` requires (raw counts kept in a layer) and flag its HVGs.

    ``share``: the counts layer shares X's index arrays (see ``_beside``).
    """
    if counts == "raw":
        _check_target_sum(target_sum, out.obs["total_counts"].to_numpy())
        raw = out.X.copy() if not sp.issparse(out.X) else out.X.data.copy()  # sparse: the values only
        _normalize_total(sc, out, target_sum)
    if counts in ("raw", "tpm"):
        sc.pp.log1p(out)
        out.uns.pop("log1p", None)
        if out.X.dtype != np.float32:
            out.X = out.X.astype(np.float32)
    if counts == "raw":
        out.layers["counts"] = _beside(raw, out.X, share)

    n_hvg = min(n_top_genes, out.n_vars)
    if n_hvg >= out.n_vars:
        out.var["highly_variable"] = True
    elif hvg_flavor == "seurat" and sp.issparse(out.X) and out.X.nnz > HVG_BLOCK_ENTRIES:
        _seurat_hvg_in_blocks(out, n_hvg)
    else:
        sc.pp.highly_variable_genes(out, n_top_genes=n_hvg, flavor=hvg_flavor, subset=False)
        out.uns.pop("hvg", None)


def _normalize_total(sc, out: ad.AnnData, target_sum) -> None:
    """``sc.pp.normalize_total(out, target_sum=target_sum)``, bitwise, in place for a CSR matrix.

    scanpy divides the values by each row's factor repeated over its entries and then assigns
    the quotient: two temporary arrays as large as the values (the peak of preprocessing at
    50,000 cells). Here scanpy's own row sums and factors are computed as it does, and the values
    divided in place a piece of rows at a time: the same float operations on the same operands.
    Other matrices, and a scanpy whose internals are not those of the tested versions, take
    scanpy's function.
    """
    X = out.X
    try:
        import numba
        from scanpy.preprocessing._normalization import _normalize_csr
    except ImportError:
        _normalize_csr = None
    if _normalize_csr is None or not (sp.issparse(X) and X.format == "csr") or not np.issubdtype(X.dtype, np.floating):
        sc.pp.normalize_total(out, target_sum=target_sum)
        return
    # scanpy 1.11 _normalize_total_helper and axis_mul_or_truediv(op=truediv, allow_divide_by_zero=False)
    counts_per_cell, _ = _normalize_csr(X.indptr, X.indices, X.data, rows=X.shape[0], columns=X.shape[1],
                                        exclude_highly_expressed=False, max_fraction=0.05,
                                        n_threads=numba.get_num_threads())
    if target_sum is None:
        target_sum = np.median(counts_per_cell)
    counts_per_cell = counts_per_cell / target_sum
    scaling = counts_per_cell.copy() + (counts_per_cell == 0)
    data = X.data
    if scaling.dtype != data.dtype:  # not expected (scanpy's factors take the values' dtype): its own division
        sc.pp.normalize_total(out, target_sum=target_sum)
        return
    if not np.all(counts_per_cell > 0):
        warnings.warn("Some cells have zero counts", UserWarning, stacklevel=2)  # scanpy's (QC leaves none)
    per_row = np.diff(X.indptr)
    rows = np.searchsorted(X.indptr, np.arange(0, X.nnz, PASS_ENTRIES), side="right") - 1
    bounds = np.unique(np.r_[rows, X.shape[0]])
    for r0, r1 in zip(bounds[:-1], bounds[1:]):
        a, b = X.indptr[r0], X.indptr[r1]
        np.true_divide(data[a:b], np.repeat(scaling[r0:r1], per_row[r0:r1]), out=data[a:b])


def _beside(raw, X, share: bool):
    """The raw counts as a matrix: ``raw`` itself when dense; for sparse ``X``, the values ``raw`` on
    ``X``'s sparsity pattern (normalising and log1p keep every stored entry). ``share``: its index
    arrays are ``X``'s own (a third less memory; only for a result written and dropped, as an
    in-place change of one matrix's pattern would corrupt the other), else copies."""
    if not sp.issparse(X):
        return raw
    if X.nnz != raw.size:  # not expected: the pattern is no longer the counts'
        raise ScontrastError(f"normalisation changed the stored entries ({raw.size} counts, {X.nnz} values)")
    indices, indptr = (X.indices, X.indptr) if share else (X.indices.copy(), X.indptr.copy())
    kind = sp.csr_matrix if X.format == "csr" else sp.csc_matrix
    return kind((raw, indices, indptr), shape=X.shape)


#: a sparse matrix with more stored entries than this has its HVG statistics computed a block of
#: genes at a time (scanpy copies the whole matrix twice); the same numbers either way
HVG_BLOCK_ENTRIES = 2**24


def _seurat_hvg_in_blocks(out: ad.AnnData, n_top_genes: int) -> None:
    """``sc.pp.highly_variable_genes(out, n_top_genes, flavor='seurat')``, bitwise, one block of genes at a time.

    Scanpy makes two copies of the whole log matrix (``expm1`` of a copy) for each gene's mean
    and variance; these are computed here on blocks of about an eighth of the stored entries
    with scanpy's own routine (a gene's sums run over the same cells in the same order), and
    the rest is scanpy's (binning by mean, normalised dispersions, the top genes). Falls back
    to scanpy's function when its internals are not those of the tested versions.
    """
    import scanpy as sc

    try:
        from scanpy.preprocessing._highly_variable_genes import _get_disp_stats, _get_mean_bins, _subset_genes
        from scanpy.preprocessing._utils import _get_mean_var
    except ImportError:  # another scanpy: its own function, at its own memory cost
        sc.pp.highly_variable_genes(out, n_top_genes=n_top_genes, flavor="seurat", subset=False)
        out.uns.pop("hvg", None)
        return
    X = out.X
    mean, var = np.empty(X.shape[1]), np.empty(X.shape[1])
    for cols in _entry_blocks(_entries_per_gene(X), max(X.nnz // 8, 1)):
        block = X[:, cols[0]: cols[-1] + 1]
        mean[cols], var[cols] = _get_mean_var(np.expm1(block))
    # what scanpy's seurat flavour does with them (scanpy 1.11 _highly_variable_genes_single_batch)
    mean[mean == 0] = 1e-12
    dispersion = var / mean
    dispersion[dispersion == 0] = np.nan
    dispersion = np.log(dispersion)
    mean = np.log1p(mean)
    df = pd.DataFrame({"means": mean, "dispersions": dispersion})
    df["mean_bin"] = _get_mean_bins(df["means"], "seurat", 20)
    stats = _get_disp_stats(df, "seurat")
    df["dispersions_norm"] = (df["dispersions"] - stats["avg"]) / stats["dev"]
    df["highly_variable"] = _subset_genes(out, mean=mean, dispersion_norm=df["dispersions_norm"].to_numpy(),
                                          cutoff=n_top_genes)
    df.index = out.var_names
    out.var["highly_variable"] = df["highly_variable"]
    out.var["means"] = df["means"]
    out.var["dispersions"] = df["dispersions"]
    out.var["dispersions_norm"] = df["dispersions_norm"].astype(np.float32, copy=False)


def _entries_per_gene(X) -> np.ndarray:
    """Stored entries of each column of a CSR or CSC matrix (bincount in pieces: no int64 copy of the indices)."""
    if X.format == "csc":
        return np.diff(X.indptr)
    step = max(1, X.nnz // 8)
    out = np.zeros(X.shape[1], dtype=np.int64)
    for start in range(0, X.nnz, step):
        out += np.bincount(X.indices[start: start + step], minlength=X.shape[1])
    return out


def _entry_blocks(per_gene: np.ndarray, most: int) -> list[np.ndarray]:
    """Consecutive blocks of genes holding at most ``most`` stored entries each (one gene alone may hold more)."""
    blocks, start, held = [], 0, 0
    for j, n in enumerate(per_gene):
        if j > start and held + n > most:
            blocks.append(np.arange(start, j))
            start, held = j, 0
        held += int(n)
    blocks.append(np.arange(start, per_gene.size))
    return blocks


def _apply_design(out: ad.AnnData, *, replicate, paired, min_cells, groupby) -> tuple[ad.AnnData, dict, np.ndarray]:
    """Keep the cells of the declared design's replicates.

    Returns the kept cells, the design as ``uns['scontrast']['design']`` and the mask of kept rows.

    Without a declared replicate the unit is the cell, and a column that looks like an undeclared
    design (named like a donor or sample, >= 2 values within both groups) is warned about.
    """
    is_target = out.obs[TARGET_KEY].to_numpy()
    if replicate is None:
        if paired:
            raise ScontrastError("paired: true needs a replicate column (replicate: <obs column>)")
        suspects = undeclared_design_columns(out.obs, is_target, exclude={groupby, TARGET_KEY})
        if suspects:
            col = suspects[0]
            warnings.warn(
                f"obs column '{col}' looks like donors or samples ({out.obs.loc[is_target, col].nunique()} values in the "
                f"target group, {out.obs.loc[~is_target, col].nunique()} in the background) but no replicate is declared: "
                f"p-values and errors treat cells as independent, so differences between {col}s can read as "
                f"differences between groups; declare replicate: {col} (and paired: true if each gives cells to both "
                "groups)", ScontrastWarning, stacklevel=5)
        return out, {"replicate": "none", "paired": False, "unit": "cell",
                     "summary": "no replicate declared: cells are the unit",
                     "undeclared_candidates": np.array(suspects, dtype=str)}, np.ones(out.n_obs, dtype=bool), \
            np.zeros(out.n_obs, dtype=bool)
    values = out.obs[replicate].to_numpy()
    design = declare_design(values, is_target, column=replicate, paired=paired, min_cells=min_cells)
    missing = pd.isna(out.obs[replicate]).to_numpy()
    if missing.any():
        n_t, n_b = int((missing & is_target).sum()), int((missing & ~is_target).sum())
        warnings.warn(f"{int(missing.sum())} cells have no value in obs column '{replicate}' (replicate) and were "
                      f"dropped ({n_t} target, {n_b} background): give each cell its {replicate}, or leave those "
                      "cells out of the file", ScontrastWarning, stacklevel=5)
    if design.dropped:  # one fact, one line (the terminal, the log, the summary's row of dropped replicates)
        warnings.warn("; ".join(f"replicate '{name}' of obs column '{replicate}' dropped: {why}"
                                for name, why in design.dropped.items()), ScontrastWarning, stacklevel=5)
    if not design.keep.all():
        out = out[design.keep].copy()
    out.obs[REPLICATE_KEY] = pd.Categorical(design.replicates[design.keep])
    log.info("%s", design.summary())
    uns = design.as_uns()
    uns["cells_without_replicate"] = int(missing.sum())
    return out, uns, design.keep, missing
