"""``tl.quadro``: how well do the selected genes, with interactions, tell target from background?

AnnData in, AnnData out: the cells and genes are chosen here, the model and its
cross-validation are :class:`scontrast.quadro.QUADRO` and
:func:`scontrast.quadro.cross_validated_scores`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..bounds import check_count, check_memory
from ..core import ScontrastError, check_matrix, check_option
from ._common import (
    TARGET_KEY,
    build_estimator,
    expression,
    fitted_params,
    fmt,
    gene_mask,
    record_params,
    renamed,
    replicate_design,
    result_warnings,
    target_mask,
)

log = logging.getLogger(__name__)

# var columns that rank the genes of a set, best first: (column, larger_is_better)
_HVG_RANKINGS = (
    ("highly_variable_rank", False),
    ("dispersions_norm", True),
    ("variances_norm", True),
)


def _column_variance(M) -> np.ndarray:
    if sp.issparse(M):
        mean = np.asarray(M.mean(axis=0)).ravel()
        return np.asarray(M.multiply(M).mean(axis=0)).ravel() - mean**2
    return np.asarray(M).var(axis=0)


def select_genes(adata: ad.AnnData, genes: str = "highly_variable", n_genes: int | None = 50,
                 layer: str | None = None) -> np.ndarray:
    """Indices of the (at most ``n_genes``) candidate genes of the set ``genes``, best ranked first (label-free).

    The set is ``gene_mask(adata, genes)``; when it holds more than ``n_genes``
    genes they are ranked by ``|var['sparda_weight']|`` for ``'sparda_selected'``,
    otherwise by the first of ``var['highly_variable_rank']`` (ascending),
    ``dispersions_norm``, ``variances_norm`` (descending) present, else by their
    variance in the data.
    """
    mask = gene_mask(adata, genes)
    idx = np.flatnonzero(mask)
    if n_genes is None or idx.size <= n_genes:
        return idx
    rankings = ((("sparda_weight", True),) if genes == "sparda_selected" else ()) + _HVG_RANKINGS
    for col, larger in rankings:
        if col in adata.var:
            val = adata.var[col].to_numpy(dtype=float)[idx]
            if col == "sparda_weight":
                val = np.abs(val)
            val = np.where(np.isfinite(val), val, -np.inf if larger else np.inf)
            order = np.argsort(-val if larger else val, kind="stable")
            return idx[order[:n_genes]]
    order = np.argsort(-_column_variance(expression(adata, layer, idx)), kind="stable")
    return idx[order[:n_genes]]


def _is_split(adata: ad.AnnData, groupby: str) -> bool:
    """Whether ``obs[groupby]`` is a boolean target/background split (the default column is, or is missing)."""
    return groupby == TARGET_KEY or (groupby in adata.obs and pd.api.types.is_bool_dtype(adata.obs[groupby]))


def _classes(adata: ad.AnnData, groupby: str, labels, min_cells: int):
    """The two classes QUADRO separates: a boolean ``obs[groupby]`` (background, target) or two of its labels.

    Returns
    -------
    used : (n_obs,) bool, the cells of either class; y : (used.sum(),) bool, True
    for the second class (scoring higher); names : [first, second].
    """
    if _is_split(adata, groupby):
        if labels is not None:
            raise ScontrastError(f"labels: needs groupby (the obs column holding them; obs['{groupby}'] is a boolean "
                                 "target/background split)")
        y = target_mask(adata, groupby, min_cells=min_cells)
        return np.ones(adata.n_obs, dtype=bool), y, ["background", "target"]
    if groupby not in adata.obs:
        raise ScontrastError(f"groupby: obs column '{groupby}' is absent (have {list(adata.obs.columns)[:20]})")
    col = adata.obs[groupby].astype("string")
    present = sorted(col.dropna().unique())
    if labels is None:
        if len(present) != 2:
            raise ScontrastError(f"groupby: obs['{groupby}'] holds {len(present)} labels {present[:10]}; "
                                 "QUADRO needs exactly two classes (choose two with labels)")
        labels = present
    labels = [str(v) for v in labels]
    if len(labels) != 2 or labels[0] == labels[1]:
        raise ScontrastError(f"labels: expected two different labels of obs['{groupby}'], got {labels}")
    counts = {lab: int((col == lab).sum()) for lab in labels}
    if min(counts.values()) < min_cells:
        raise ScontrastError(f"labels: obs['{groupby}'] has {counts} cells of the two classes; QUADRO needs at "
                             f"least {min_cells} of each (one class only or too few cells)")
    used = col.isin(labels).fillna(False).to_numpy(dtype=bool)
    return used, (col[used] == labels[1]).to_numpy(dtype=bool), labels


def quadro(
    adata: ad.AnnData,
    *,
    genes: str = "highly_variable",
    n_genes: int | None = 2000,
    layer: str | None = None,
    groupby: str | None = TARGET_KEY,
    labels: list[str] | None = None,
    key_added: str = "quadro",
    outer_cv: int = 5,
    nested: bool = True,
    random_state: int = 0,
    n_jobs: int = 1,
    copy: bool = False,
    key: str | None = None,
    **params,
):
    """Cross-validated QUADRO classification of target vs background cells.

    Every cell is scored by a QUADRO model that did not see it
    (:func:`scontrast.quadro.cross_validated_scores`: ``outer_cv`` stratified
    folds drawn from ``random_state``); with ``nested`` each outer model chooses
    its own lambdas and threshold by its own ``cv``-fold CV, so the reported
    error is honest. Without ``nested`` the lambdas are chosen once on all cells
    and the scores are those of the model's own folds (a little optimistic,
    one fit instead of ``outer_cv`` + 1). A final model on all cells gives the
    interactions and the Rayleigh quotient.

    Gene choice is supervised and honest: ``genes``/``n_genes`` give the
    candidate genes (label-free), and every QUADRO fit keeps the ``n_features``
    (model parameter, default 50) candidates of largest one-gene Rayleigh
    quotient (mean and spread differences) computed on its own training cells
    only. For a fixed set of your own, give it as ``genes`` (a boolean var
    column) with ``n_features=None``.

    Groups of different sizes weigh alike by default (``class_weight='balanced'``
    of the model: equal priors, threshold for the balanced error); the result
    reports the balanced error and AUC first, the recall of each class and the
    majority-class baseline (calling every cell the larger group: error = the
    smaller group's share, balanced error 0.5).

    Parameters
    ----------
    adata : AnnData with log-normalised X (or ``layer``) and the obs column
        ``groupby``.
    genes : candidate gene set: ``'highly_variable'``, ``'all'`` or a boolean var
        column such as ``'sparda_selected'``.
    n_genes : at most this many candidate genes of the set (ranked without the
        labels, see ``select_genes``), of which each fit keeps ``n_features``
        (Omega is ``n_features`` x ``n_features``). None = all.
    layer : matrix to use instead of ``X``.
    groupby : obs column of the two classes: a boolean column is the
        target/background split (True = target = QUADRO's class 2, scoring
        higher; default (or None) the one ``scontrast.preprocess`` writes); any
        other column is read as labels (see ``labels``).
    labels : two labels of a non-boolean ``obs[groupby]`` to separate,
        ``[first, second]`` (the second scores higher); None = the column's two
        labels (it must hold exactly two). Cells with other labels are not used
        (NaN scores).
    key_added : where the results go: ``obs[f'{key_added}_score']``,
        ``obs[f'{key_added}_pred']`` and ``uns[key_added]`` (the default gives
        the names below).
    outer_cv : outer folds of the cross-validated scores (each class needs
        ``2 outer_cv`` cells).
    nested : see above.
    random_state : seeds the outer folds and the model's own folds.
    n_jobs : threads: with ``nested`` the final model and the outer folds are
        fitted side by side, each on one thread (the same results as one thread);
        otherwise the one fit's Kendall's tau and BLAS threads.
    copy : return a modified copy instead of writing into ``adata``.
    key : deprecated name of ``groupby`` (a ``FutureWarning``; removed in the
        next release).
    **params : hyper-parameters of :class:`scontrast.quadro.QUADRO` (their
        defaults are its own), e.g. ``max_cells`` (each fit learns from a
        subsample of at most this many cells, stratified by group and replicate,
        and every cell is still scored by a model that never trained on it;
        default 10,000), ``n_features``, ``class_weight``,
        ``estimator``, ``lambda1``, ``lambda2``, ``lambda_grid``, ``cv`` (each
        model's own folds), ``cv_rule``, ``gamma``, ``psd_norm``, ``threshold``.

    Returns
    -------
    None (or the copy). Writes ``obs['quadro_score']`` (out-of-fold decision
    score ``Q - threshold`` of the model that did not see the cell: positive =
    predicted target, larger = more target-like), ``obs['quadro_pred']`` (bool,
    predicted target; with a column of labels the predicted label, categorical,
    NaN for unused cells) and ``uns['quadro']`` (params; ``balanced_error``, ``auc``,
    ``recall`` per class, ``majority_baseline``, ``cv_error`` (raw), ``cv_auc``
    (= ``auc``), confusion matrix; ``genes`` of the final model and
    ``gene_folds`` (how many outer models kept each gene); Rayleigh quotient,
    chosen lambdas, nonzero interactions as gene pairs with weights, linear
    terms, and the final model's Omega, delta, centre, scale); with more cells than
    ``max_cells`` in a fit, ``subsample`` (``max_cells``, ``n_cells`` of the final model,
    ``of``, ``strata``, ``outer_fit_cells``, how the cells were scored).

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> import scontrast as sct
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 20))
    >>> X[:40, :3] += 2.0                                 # the target's genes g0-g2 are higher
    >>> adata = ad.AnnData(X, var=pd.DataFrame(index=[f"g{i}" for i in range(20)]))
    >>> adata.obs["scontrast_target"] = np.arange(80) < 40  # what sct.preprocess writes
    >>> sct.tl.quadro(adata, genes="all", random_state=0)
    >>> bool(adata.uns["quadro"]["auc"] > 0.9)            # every cell scored by a model that never saw it
    True
    """
    groupby = renamed(groupby, key, new_name="groupby", old_name="key", default=TARGET_KEY, who="quadro")
    groupby = TARGET_KEY if groupby is None else groupby  # a config's null: the target/background split
    adata = adata.copy() if copy else adata
    _quadro(adata, genes=genes, n_genes=n_genes, layer=layer, groupby=groupby, labels=labels, key_added=key_added,
            outer_cv=outer_cv, nested=nested, random_state=random_state, n_jobs=n_jobs, params=params)
    return adata if copy else None


def _quadro(adata: ad.AnnData, *, genes, n_genes, layer, groupby, labels, key_added, outer_cv, nested, random_state,
            n_jobs, params) -> None:
    """``quadro``'s work on ``adata`` (already the copy when one was asked for)."""
    # loaded by a fit only: reading a result (summary, figure) skips the method's stack
    from ..quadro import QUADRO, cross_validated_scores

    n_genes = check_count(n_genes, "n_genes", 2, "quadro", allow_none=True)
    outer_cv = check_count(outer_cv, "outer_cv", 2, "quadro")
    check_option(nested, "nested", [True, False])
    model = build_estimator(QUADRO, params, random_state=random_state, n_jobs=n_jobs)
    used, is_target, class_names, idx, X = _training_data(adata, genes=genes, n_genes=n_genes, layer=layer,
                                                          groupby=groupby, labels=labels, outer_cv=outer_cv,
                                                          n_features=model.n_features)
    gene_names = adata.var_names[idx].astype(str).to_numpy()
    log.info("QUADRO on %d candidate genes of '%s', %d %s and %d %s cells", idx.size, genes,
             int(is_target.sum()), class_names[1], int((~is_target).sum()), class_names[0])

    design = replicate_design(adata)
    groups = None if design is None else design["replicates"][used]
    with result_warnings("quadro") as warned:
        res = cross_validated_scores(model, X, is_target, outer_cv, nested=nested, random_state=random_state,
                                     groups=groups)
    score, pred = res.decision, res.predicted.astype(bool)
    _write_predictions(adata, key_added, not _is_split(adata, groupby), used, score, pred, class_names)
    front = dict(genes=genes, n_genes=n_genes, layer=layer, groupby=groupby, key_added=key_added,
                 labels=None if labels is None else [str(v) for v in labels], outer_cv=outer_cv,
                 nested=bool(nested))
    model_params = fitted_params(model)
    unit = {"unit": "cell"} if design is None else {
        "unit": "replicate", "design": design["summary"], "n_outer_folds": int(len(res.fold_lambdas)),
        "replicate_scores": _replicate_scores(groups, is_target, score, pred)}
    results = _results(res, is_target, pred, class_names, gene_names)
    sub = _subsample(res, int(used.sum()), design is not None, nested)
    record_params(adata, key_added, {**front, **model_params}, random_state, warnings=warned, **unit, **results,
                  **sub)
    log.info("QUADRO cross-validated balanced error %.3f (majority baseline 0.5), AUC %.3f, error %.3f "
             "(majority baseline %.3f); %d gene pairs, %d squared terms, %d linear terms", results["balanced_error"],
             results["auc"], results["cv_error"], results["majority_baseline"]["error"],
             len(results["interactions"]["weight"]), len(results["squared"]["weight"]),
             len(results["linear"]["weight"]))


def _training_data(adata: ad.AnnData, *, genes, n_genes, layer, groupby=TARGET_KEY, labels=None, outer_cv,
                   n_features=None):
    """The cells and candidate genes QUADRO is cross-validated on.

    Returns ``used`` (n_obs,) bool, ``is_target`` (used cells), the two class names, the
    candidate genes' indices and the (used cells x candidates) matrix: CSR for sparse data
    (QUADRO makes dense only the genes each step keeps, see ``_dense_genes``), else dense.
    Only the candidate genes are read, so a backed AnnData works and never loads the whole matrix.
    """
    used, is_target, class_names = _classes(adata, groupby, labels, min_cells=2 * outer_cv)
    idx = select_genes(adata, genes, n_genes, layer)
    if idx.size < 2:
        raise ScontrastError(f"genes: gene set '{genes}' has {idx.size} gene; QUADRO needs at least 2")
    # read in column order (a backed dense X is an HDF5 dataset, read by increasing indices only)
    order = np.argsort(idx, kind="stable")
    M = expression(adata, layer, idx[order])[:, np.argsort(order)]
    # the largest dense block grows with the cells: refused before it is made, naming n_genes
    width = _dense_genes(idx.size, n_features, sp.issparse(M))
    check_memory(8.0 * int(used.sum()) * width, "n_genes", n_genes,
                 f"the candidate genes as a dense matrix ({int(used.sum())} cells x {width} genes)")
    if not used.all():
        M = M[np.flatnonzero(used)]
    X = check_matrix(M, "X" if layer is None else f"layers['{layer}']")
    return used, is_target, class_names, idx, X


def _dense_genes(n_candidates: int, n_features, sparse: bool) -> int:
    """How many candidate genes QUADRO holds dense at once: all of dense data; of sparse data the
    screen's co-expression candidates or the kept genes, whichever are more (all without a screen)."""
    if not sparse or not isinstance(n_features, (int, np.integer)) or isinstance(n_features, bool):
        return n_candidates  # None (no screen); a bad value is the model's to refuse
    from ..quadro._screen import RayleighScreen

    return min(n_candidates, max(int(n_features), RayleighScreen().n_pair_genes))


def _write_predictions(adata: ad.AnnData, key_added: str, labelled_classes: bool, used, score, pred,
                       class_names) -> None:
    """``obs['quadro_score']`` and ``obs['quadro_pred']`` (``quadro`` being ``key_added``); with classes of
    labels, NaN and no label for unused cells."""
    if not labelled_classes:
        adata.obs[f"{key_added}_score"] = score
        adata.obs[f"{key_added}_pred"] = pred
    else:
        full = np.full(adata.n_obs, np.nan)
        full[used] = score
        adata.obs[f"{key_added}_score"] = full
        labelled = np.full(adata.n_obs, None, dtype=object)
        labelled[used] = np.where(pred, class_names[1], class_names[0])
        adata.obs[f"{key_added}_pred"] = pd.Categorical(labelled, categories=class_names)


def _results(res, is_target, pred, class_names, gene_names) -> dict:
    """``uns['quadro']``'s results (in the order they are stored): the held-out scores' errors and the final model."""
    from sklearn.metrics import confusion_matrix, roc_auc_score

    from ..quadro import balanced_error

    final, score = res.final, res.decision
    terms, linear = final.interactions(gene_names)
    # a gene with itself is a change of spread, a pair of genes a change of co-expression: apart
    pairs = [t for t in terms if t[0] != t[1]]
    squared = [(t[0], t[2]) for t in terms if t[0] == t[1]]
    cm = confusion_matrix(is_target, pred, labels=[False, True])
    cv_error = float(np.mean(pred != is_target))
    cv_auc = float(roc_auc_score(is_target, score))
    recall = {class_names[0]: float(np.mean(~pred[~is_target])), class_names[1]: float(np.mean(pred[is_target]))}
    n_small = int(min(is_target.sum(), (~is_target).sum()))
    majority = {"label": class_names[1] if is_target.sum() > (~is_target).sum() else class_names[0],
                "error": n_small / is_target.size, "balanced_error": 0.5}
    kept = np.zeros(gene_names.size, dtype=np.int64)
    for feat in res.fold_features:
        kept[feat] += 1
    shown = np.union1d(np.flatnonzero(kept), final.features_)
    return dict(
        genes=gene_names[final.features_],
        n_candidates=int(gene_names.size),
        gene_folds={"gene": gene_names[shown], "n_folds": kept[shown], "final": np.isin(shown, final.features_)},
        balanced_error=balanced_error(is_target, pred),
        auc=cv_auc,
        recall=recall,
        majority_baseline=majority,
        n_cells={class_names[1]: int(is_target.sum()), class_names[0]: int((~is_target).sum())},
        cv_error=cv_error,
        cv_auc=cv_auc,
        confusion_matrix=cm.astype(np.int64),
        confusion_labels=np.array(class_names, dtype=str),
        rayleigh_quotient=float(final.rayleigh_quotient_),
        lambda1=float(final.lambda1_),
        lambda2=float(final.lambda2_),
        penalties=np.asarray(final.penalties_, dtype=float),
        fold_lambda1=res.fold_lambdas[:, 0].astype(float),
        fold_lambda2=res.fold_lambdas[:, 1].astype(float),
        gamma=float(final.gamma_),
        threshold=float(final.threshold_),
        n_iter=int(final.n_iter_),
        converged=bool(final.converged_),
        constraint_residual=float(final.constraint_residual_),
        interactions={
            "gene_i": np.array([p[0] for p in pairs], dtype=str),
            "gene_j": np.array([p[1] for p in pairs], dtype=str),
            "weight": np.array([p[2] for p in pairs], dtype=float),
        },
        squared={
            "gene": np.array([g for g, _ in squared], dtype=str),
            "weight": np.array([w for _, w in squared], dtype=float),
        },
        linear={
            "gene": np.array([g for g, _ in linear], dtype=str),
            "weight": np.array([w for _, w in linear], dtype=float),
        },
        Omega=final.Omega_,
        delta=final.delta_,
        center=final.center_,
        scale=final.scale_,
    )


def _subsample(res, n_cells: int, replicates: bool, nested: bool) -> dict:
    """``{'subsample': ...}`` when the fits learned from a stratified subsample of the cells (``max_cells``), else {}.

    States the approximation where the result is: how many cells each fit learned from, how many
    it stands for, and that every cell was still scored by a model that never trained on it.
    """
    final = res.final
    n_final, outer = int(final.fitted_cells_.size), res.fold_fitted
    if n_final == n_cells:  # no more cells than max_cells: no fit was subsampled (the outer ones have fewer)
        return {}
    scored = ("the outer model whose test fold holds it (which never trained on it)" if nested else
              "its fold's model inside the subsample, the final model (which never trained on it) outside")
    info = {"max_cells": int(final.max_cells), "n_cells": n_final, "of": n_cells,
            "strata": "group and replicate" if replicates else "group",
            "outer_fit_cells": outer.astype(np.int64), "scored": f"every cell by {scored}"}
    log.info("QUADRO: each fit learned from a stratified subsample of at most %d cells (max_cells; the final model "
             "%d of %d); every cell is scored by a model that never trained on it", info["max_cells"], n_final, n_cells)
    return {"subsample": info}


def _replicate_scores(groups, is_target, score, pred) -> dict:
    """Held-out scores per (replicate, class): every outer fold held the replicate out whole."""
    keys = sorted({(str(g), bool(t)) for g, t in zip(groups, is_target)})
    rows = [np.flatnonzero((groups == g) & (is_target == t)) for g, t in keys]
    return {"replicate": np.array([g for g, _ in keys], dtype=str), "is_target": np.array([t for _, t in keys]),
            "n_cells": np.array([r.size for r in rows], dtype=np.int64),
            "mean_score": np.array([score[r].mean() for r in rows]),
            "fraction_called_target": np.array([pred[r].mean() for r in rows])}


def summary_rows(adata: ad.AnnData, n_top: int = 10) -> Iterator[tuple[str, str]]:
    """(item, value) rows of the workflow's summary table for ``uns['quadro']``."""
    q = adata.uns["quadro"]
    held = "replicates held out" if str(q.get("unit", "cell")) == "replicate" else "cells held out"
    if str(q.get("unit", "cell")) == "replicate":
        yield "cross-validation unit", f"whole replicates held out ({q['design']}; {int(q['n_outer_folds'])} outer folds)"
    if "subsample" in q:
        sub = dict(q["subsample"])
        yield ("fits on a stratified subsample (max_cells)",
               f"{int(sub['n_cells'])} of {int(sub['of'])} cells per fit ({sub['strata']}); every cell scored held out")
    for key, label in (("balanced_error", f"cross-validated balanced error, {held} (chance 0.5)"),
                       ("cv_auc", f"cross-validated AUC, {held} (chance 0.5)")):
        if key in q:
            yield label, fmt(q[key])
    for name, value in dict(q.get("recall", {})).items():
        yield f"recall of {name}", fmt(float(value))
    if "cv_error" in q:
        base = dict(q.get("majority_baseline", {}))
        extra = f" (all called {base['label']}: {fmt(float(base['error']))})" if "error" in base else ""
        yield "cross-validated error" + extra, fmt(q["cv_error"])
    if "rayleigh_quotient" in q:
        yield "Rayleigh quotient", fmt(q["rayleigh_quotient"])
    if "genes" in q:
        n_pairs = len(q.get("interactions", {}).get("weight", []))
        yield "genes kept / interactions", f"{len(q['genes'])} of {q.get('n_candidates', len(q['genes']))} / {n_pairs}"
