"""AnnData front end of sparse principal differences analysis: ``tl.sparda(adata, ...)``."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

import anndata as ad
import numpy as np

from ..core import ScontrastError
from ..design import cell_blocks
from ._common import (
    TARGET_KEY,
    build_estimator,
    expression,
    fitted_params,
    fmt,
    group_matrices,
    record_params,
    renamed,
    replicate_design,
    result_warnings,
    target_mask,
)

if TYPE_CHECKING:
    from ..sparda import SPARDA

log = logging.getLogger(__name__)

# the donor test's feature families whose genes uns['sparda']['test'] may hold (scontrast.donor_test)
_TEST_FAMILIES = ("location", "spread", "dispersion", "tail", "detected")


def ordered_parts(parts) -> list[str]:
    """The replicate test's part names, the donor test's families first in their own order, then the others (a
    written file gives ``uns`` dicts back in alphabetical order)."""
    return [f for f in _TEST_FAMILIES if f in parts] + [k for k in parts if k not in _TEST_FAMILIES]


def sparda(
    adata: ad.AnnData,
    *,
    genes: str = "highly_variable",
    layer: str | None = None,
    groupby: str = TARGET_KEY,
    block: str | None = None,
    key_added: str = "sparda",
    random_state=0,
    n_jobs: int = 1,
    copy: bool = False,
    key: str | None = None,
    **params,
):
    """Sparse principal differences analysis of the target against the background cells.

    Finds the sparse unit direction along which the projected target and background
    cells differ most in squared 2-Wasserstein distance (any kind of difference:
    mean, spread, correlation), with a permutation p-value; see
    :class:`scontrast.sparda.SPARDA` for the algorithm.  The direction is oriented so
    that the target cells project higher on average: a positive weight means the gene
    contributes to the target side.

    Parameters
    ----------
    adata
        Cells x genes, log-normalised, with boolean ``obs[groupby]`` (True = target).
    genes
        ``'all'`` or a boolean var column (default ``'highly_variable'``).
    layer
        Matrix to use instead of ``X``.
    groupby
        Boolean obs column of the target/background split.
    key_added
        Where the results go: ``var[f'{key_added}_weight']`` (and ``_selected``,
        ``_marginal_w2``), ``varm[f'{key_added}_directions']``, ``obsm[f'X_{key_added}']`` and
        ``uns[key_added]``; the default gives the names below.
    random_state
        Seed of subsampling, folds and permutations (None, an int or a numpy Generator).
    n_jobs
        Parallel workers for cross-validation folds and permutations.
    copy
        Work on (and return) a copy.
    key
        Deprecated name of ``groupby`` (a ``FutureWarning``; removed in the next release).
    block
        Categorical obs column of the replicates' blocks (batch, site; one per replicate), with
        a declared replicate design: the replicate test relabels replicates only within blocks
        and its floor follows (``uns['sparda']['test']['blocks']``). None: no block.
    **params
        Hyper-parameters of :class:`scontrast.sparda.SPARDA` (their defaults are its
        own): ``lam`` (L1 penalty; None with ``k=None`` = chosen by ``cv_rule``), ``k``,
        ``n_directions``, ``n_permutations``, ``test``, ``cv_folds``, ``n_lambdas``,
        ``lam_min_ratio``, ``cv_rule``, ``cv_fraction``, ``cv_max_cells`` (the lambda folds' cells per group,
        recorded in ``uns['sparda']['lambda_path']``), ``test_max_cells`` (the replicate test's cells,
        recorded in ``uns['sparda']['test']``), ``max_genes`` (marginal-W2 screening, recorded
        in ``uns['sparda']['screening']``), ``relax_max_cells``, ``relax_max_iter``,
        ``relax_patience``, ``relax_step``, ``tighten_max_iter``, ``standardize``.

    Writes
    ------
    ``var['sparda_weight']`` weight of every gene in the first direction (0 outside the
    gene set or not selected; positive = contributes to the target side, the target
    cells project higher on every direction); ``var['sparda_selected']`` (bool) nonzero in any
    direction; ``var['sparda_marginal_w2']`` marginal squared W2 of each gene (the
    screening score; NaN outside the gene set); ``varm['sparda_directions']``
    (n_vars x n_directions; the columns of directions the deflation did not find are
    zero, ``uns['sparda']['n_directions_found']``); ``obsm['X_sparda']``
    (n_obs x max(2, n_directions)): column j is every cell's projection on direction j + 1,
    and with fewer than two directions found the second column is the cell's score on the
    leading principal component of the screened genes orthogonal to direction 1 (the largest
    variation of the cells that direction 1 leaves out: it is not a contrast), so that
    ``sc.pl.embedding(adata, basis='sparda')`` draws the direction against it; what each column
    is: ``uns['sparda']['embedding']``; ``uns['sparda']``: params, versions, seed,
    divergence(s), pvalue (NaN without permutations) and ``test`` (its resolution:
    method, n_permutations, n_at_least, bound = p is its floor), selected genes,
    lambda (and ``lambda_path`` when chosen by CV: path, held-out scores, sizes, rule,
    chosen index and size, at_edge), screening and iteration diagnostics, warnings.

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> import scontrast as sct
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 20))
    >>> X[:40, :3] += 2.0                                 # the target's genes g0-g2 are higher
    >>> adata = ad.AnnData(X, var=pd.DataFrame(index=[f"g{i}" for i in range(20)]))
    >>> adata.obs["scontrast_target"] = np.arange(80) < 40  # what sct.preprocess writes
    >>> sct.tl.sparda(adata, genes="all", n_permutations=19, random_state=0)
    >>> adata.uns["sparda"]["selected_genes"].tolist()
    ['g0', 'g1', 'g2']
    >>> bool((adata.var.loc[["g0", "g1", "g2"], "sparda_weight"] > 0).all())  # higher on the target side
    True
    """
    from ..sparda import SPARDA  # loaded by a fit only: reading a result (summary, figure) skips the method's stack

    groupby = renamed(groupby, key, new_name="groupby", old_name="key", default=TARGET_KEY, who="sparda")
    model = build_estimator(SPARDA, params, random_state=random_state, n_jobs=n_jobs)
    adata = adata.copy() if copy else adata
    X, Y, mask = group_matrices(adata, genes=genes, layer=layer, key=groupby, min_cells=2)
    with result_warnings("sparda") as warned:
        model.fit(X, Y, **_replicates(adata, groupby, block))
    names = adata.var_names[mask].to_numpy()
    log.info("sparda: lambda=%.4g, %d genes selected, divergence %.4g, p=%s", model.lam_, model.selected_.size,
             model.divergence_, model.pvalue_)
    columns = _write_directions(adata, model, mask, layer, key_added)
    front = dict(genes=genes, layer=layer, groupby=groupby, key_added=key_added, **({"block": block} if block else {}))
    _record(adata, model, front, random_state, warned,
            mask=mask, names=names,
            n_target=int(X.shape[0]), n_background=int(Y.shape[0]), embedding=columns)
    return adata if copy else None


def _write_directions(adata: ad.AnnData, model: SPARDA, mask: np.ndarray, layer: str | None,
                      key_added: str = "sparda") -> np.ndarray:
    """The ``var`` columns, ``varm['sparda_directions']`` and ``obsm['X_sparda']`` of the fitted model
    (``sparda`` being ``key_added``); returns what each column of ``obsm['X_sparda']`` is (:func:`_embedding`)."""
    n_vars = adata.n_vars
    W = np.zeros((n_vars, model.n_directions))
    W[mask] = model.components_.T
    adata.var[f"{key_added}_weight"] = W[:, 0]
    adata.var[f"{key_added}_selected"] = np.any(W != 0, axis=1)
    w2 = np.full(n_vars, np.nan)
    w2[mask] = model.marginal_w2_
    adata.var[f"{key_added}_marginal_w2"] = w2
    adata.varm[f"{key_added}_directions"] = W

    full = expression(adata, layer, mask)
    adata.obsm[f"X_{key_added}"], columns = _embedding(model, full)
    return columns


def _embedding(model: SPARDA, full) -> tuple[np.ndarray, np.ndarray]:
    """Every cell's coordinates for ``obsm['X_sparda']`` (n_obs x max(2, n_directions)) and what each column is.

    ``full`` (n_obs x genes of the gene set, sparse or dense) is the expression the model was fitted
    on. Column j is the projection on direction j + 1 (0 for a direction the deflation did not find).
    An embedding plot needs two coordinates: with fewer than two directions found, the second
    column holds :func:`_orthogonal_pc`, named as such in the returned labels.
    """
    proj = model.transform(full)
    found = int(model.n_directions_)
    labels = [f"projection on SPARDA direction {j + 1}" if j < found else
              f"SPARDA direction {j + 1} was not found: 0" for j in range(proj.shape[1])]
    if found < 2:
        pc = _orthogonal_pc(model, full)
        if proj.shape[1] < 2:
            proj = np.column_stack([proj, np.zeros(proj.shape[0])])
            labels.append("")
        proj[:, 1] = pc
        labels[1] = ("score on the leading principal component of the screened genes orthogonal to SPARDA direction 1 "
                     "(the cells' largest other variation, over both groups: not a contrast)")
    return proj, np.array(labels, dtype=str)


def _orthogonal_pc(model: SPARDA, full) -> np.ndarray:
    """Every cell's score (n_obs,) on the leading principal component, over all cells, of the screened genes
    (``model.screened_``) in the model's scale (standardised when it was), within the complement of direction 1.

    The covariance is formed from the genes' sums (a sparse matrix stays sparse; genes x genes is at
    most ``max_genes`` squared). The component's sign puts its largest loading positive. Scores are
    centred; they are 0 when the screened genes span no direction but direction 1.
    """
    idx = np.asarray(model.screened_)
    Z = full[:, idx]
    Z = Z.astype(np.float64) if hasattr(Z, "toarray") else np.asarray(Z, dtype=np.float64)
    n = Z.shape[0]
    scale = np.ones(idx.size) if model.scale_ is None else np.asarray(model.scale_, dtype=np.float64)[idx]
    mean = np.asarray(Z.mean(axis=0)).ravel()
    gram = Z.T @ Z
    gram = gram.toarray() if hasattr(gram, "toarray") else np.asarray(gram)
    C = (gram / n - np.outer(mean, mean)) / np.outer(scale, scale)
    b = np.asarray(model.components_, dtype=np.float64)[0, idx]
    norm = np.linalg.norm(b)
    P = np.eye(idx.size) - (np.outer(b, b) / norm**2 if norm > 0 else 0.0)
    values, vectors = np.linalg.eigh(P @ C @ P)
    v = vectors[:, -1]
    if values[-1] <= 1e-12 * max(float(np.trace(C)), 1e-300):
        return np.zeros(n)
    v = v * np.sign(v[np.argmax(np.abs(v))])
    w = v / scale
    return np.asarray(Z @ w).ravel() - float(mean @ w)


def _record(adata: ad.AnnData, model: SPARDA, front: dict, random_state, warned: list[str], *, mask: np.ndarray,
            names: np.ndarray, n_target: int, n_background: int, embedding: np.ndarray) -> None:
    """``uns[front['key_added']]``: the parameters, the fit's results and its diagnostics."""
    d_in = int(mask.sum())
    relax_info, tighten_info = _iterations(model, max(n_target, n_background))
    extra = _path_and_test(model, n_target, n_background)
    for family in _TEST_FAMILIES:
        if f"{family}_genes" in extra.get("test", {}):
            # the donor test's genes of the family by name (the model knows their columns in the gene set)
            extra["test"][f"{family}_genes"] = names[np.asarray(extra["test"][f"{family}_genes"], dtype=int)].astype(str)
    selected = names[model.selected_].astype(str)
    model_params = fitted_params(model)
    record_params(
        adata, front["key_added"], dict(model_params, **front), random_state, warnings=warned,
        divergence=float(model.divergence_),
        divergences=np.asarray(model.divergences_, dtype=float),
        # directions actually found (the deflation stops once none pays for its genes)
        n_directions_found=int(model.n_directions_),
        pvalue=float("nan") if model.pvalue_ is None else float(model.pvalue_),
        lam=float(model.lam_),
        k=int(model.k_),
        n_selected=int(selected.size),
        selected_genes=selected,
        n_target=n_target,
        n_background=n_background,
        n_genes=d_in,
        screening=_screening(model, d_in, names),
        embedding=embedding,
        relax=relax_info,
        tighten=tighten_info,
        **extra,
    )


def _screening(model: SPARDA, d_in: int, names: np.ndarray) -> dict:
    return {
        "method": "marginal_w2",
        "screened": bool(d_in > model.max_genes),
        "n_genes_in": d_in,
        "n_genes_kept": int(model.screened_.size),
        "max_genes": int(model.max_genes),
        # smallest marginal W2 that entered the relaxation (0 genes below it were kept)
        "min_kept_w2": float(model.marginal_w2_[model.screened_].min()),
        "genes_kept": names[model.screened_].astype(str),
    }


def _iterations(model: SPARDA, n_cells_max: int) -> tuple[dict, dict]:
    """The relaxation's and the tightening's diagnostics, one entry per direction."""
    relax_info = {
        "n_iter": np.array([r["n_iter"] for r in model.relax_info_], dtype=int),
        "eig_fraction": np.array([r["eig_fraction"] for r in model.relax_info_], dtype=float),
        "objective": np.array([r["objective"] for r in model.relax_info_], dtype=float),
        "divergence": np.array([r["divergence"] for r in model.relax_info_], dtype=float),
        # both groups are subsampled to this size
        "n_cells_per_group": int(model.n_relax_cells_),
        "subsampled": bool(n_cells_max > model.n_relax_cells_),
    }
    tighten_info = {
        "n_iter": np.array([t["n_iter"] for t in model.tighten_info_], dtype=int),
        "divergence": np.array([t["divergence"] for t in model.tighten_info_], dtype=float),
        "objective": np.array([t["objective"] for t in model.tighten_info_], dtype=float),
        # which relaxation the winning tightening started from: 'relax' (penalised) or 'pda_relax'
        "start": np.array([t["start"] for t in model.tighten_info_], dtype=str),
    }
    return relax_info, tighten_info


def _path_and_test(model: SPARDA, n_target: int, n_background: int) -> dict:
    """What the fit has only sometimes: the lambda path (lambda chosen by CV), the null divergences, the test."""
    extra = {}
    if model.cv_results_ is not None:
        cv = model.cv_results_
        extra["lambda_path"] = {
            "lam": np.asarray(cv["lam"], dtype=float),
            "cv_score": np.asarray(cv["score"], dtype=float),
            "cv_score_se": np.asarray(cv["score_se"], dtype=float),
            "n_selected": np.asarray(cv["n_selected"], dtype=float),
            "best_index": int(cv["best_index"]),
            "rule": model.cv_rule,
            # the chosen lambda's place on the path and its size
            "chosen_lam": float(cv["lam"][cv["best_index"]]),
            "chosen_n_selected": float(cv["n_selected"][cv["best_index"]]),
            "at_edge": bool(cv["lam"].size > 1 and cv["best_index"] in (0, cv["lam"].size - 1)),
            # the unpenalised fit on all screened genes (the reference of cv_rule='fraction')
            "reference_score": float(cv["reference_score"]),
            "reference_n_selected": float(cv["reference_n_selected"]),
            # cells per group the folds were drawn from; below the groups' sizes when subsampled (cv_max_cells)
            "n_cells": np.asarray(cv["n_cells"], dtype=int),
            "subsampled": bool(cv["n_cells"][0] < n_target or cv["n_cells"][1] < n_background),
        }
        extra["pda_divergence"] = float(model.pda_divergence_)
    if model.null_divergences_ is not None:
        extra["null_divergences"] = np.asarray(model.null_divergences_, dtype=float)
    if model.test_ is not None:
        extra["test"] = {key_: (np.asarray(v) if isinstance(v, list) else v) for key_, v in model.test_.items()}
        reps = model.replicates_
        if model.test_["method"] == "replicate" and reps is not None and reps.blocks is not None:
            extra["test"]["blocks"] = np.unique(reps.blocks)  # relabelled within these
    return extra


def _replicates(adata: ad.AnnData, key: str, block: str | None = None) -> dict:
    """``fit``'s replicate keywords from the declared design (none without one: cells are the unit), and its blocks."""
    design = replicate_design(adata)
    if design is None:
        if block is not None:
            raise ScontrastError(f"block '{block}': blocks group replicates, and no replicate is declared")
        return {}
    t = target_mask(adata, key)
    out = {"replicates_x": design["replicates"][t], "replicates_y": design["replicates"][~t], "paired": design["paired"]}
    if block is not None:
        blocks = cell_blocks(adata.obs, block)
        out.update(blocks_x=blocks[t], blocks_y=blocks[~t])
    return out


def summary_rows(adata: ad.AnnData, n_top: int = 10) -> Iterator[tuple[str, str]]:
    """(item, value) rows of the workflow's summary table for ``uns['sparda']``."""
    s = adata.uns["sparda"]
    test = s.get("test")
    if test is not None and test["method"] == "replicate":
        how = "all" if bool(test["exact"]) else "a random sample"
        p = (f"{fmt(s.get('pvalue'))} per replicate ({test['design']}; {how} of {int(test['n_labellings'])} relabellings, "
             f"smallest possible p {fmt(float(test['floor']))}"
             + (f"; each on {int(test['n_cells'][0])} + {int(test['n_cells'][1])} cells, one share of every replicate "
                "and group (test_max_cells)" if bool(test.get("subsampled", False)) else "") + ")")
    elif test is not None and int(test["n_at_least"]) == 0:
        p = f"<= {fmt(s.get('pvalue'))} per cell (none of {int(test['n_permutations'])} permutations as large)"
    elif test is not None:
        p = f"{fmt(s.get('pvalue'))} per cell ({int(test['n_at_least'])} of {int(test['n_permutations'])} permutations as large)"
    else:
        p = fmt(s.get("pvalue", float("nan")))
    yield f"p-value ({test['method']} test)" if test is not None else "permutation p-value", p
    if test is not None and "parts" in test:
        # the replicate test's parts, combined by min-p over the same relabellings into the p-value above
        parts = test["parts"]
        names = ordered_parts(parts)
        yield f"p-values of the parts ({', '.join(names)})", ", ".join(fmt(parts[k]) for k in names)
        for family in _TEST_FAMILIES:
            if f"{family}_genes" in test:
                yield f"{family} part's genes (moderated t, max-T adjusted p)", ", ".join(
                    f"{g} ({t:+.1f}, {fmt(p)})" for g, t, p in zip(test[f"{family}_genes"][:5], test[f"{family}_t"][:5],
                                                                    test[f"{family}_adjusted_pvalue"][:5]))
    elif test is not None and "shape_pvalue" in test:
        # the permute test's two parts, combined by min-p into the p-value above
        yield "p-values of the parts (divergence, its shape part)", (
            f"{fmt(test['divergence_pvalue'])}, {fmt(test['shape_pvalue'])}")
    yield "divergence (W2^2 along beta)", fmt(s.get("divergence"))
    yield "genes selected", fmt(s.get("n_selected"))
    path = s.get("lambda_path")
    if path is not None:
        cells = path.get("n_cells")
        sub = f", folds of {int(cells[0])} + {int(cells[1])} cells" if path.get("subsampled", False) else ""
        yield "lambda (rule, place on the path)", (
            f"{fmt(s.get('lam'))} ({path['rule']}, {int(path['best_index']) + 1} of {len(path['lam'])}"
            f"{', at its edge' if path.get('at_edge') else ''}{sub})")
    if "sparda_weight" in adata.var:
        w = adata.var["sparda_weight"].to_numpy(dtype=float)
        order = np.argsort(-np.abs(w), kind="stable")[:n_top]
        top = ", ".join(f"{adata.var_names[i]} ({w[i]:+.2f})" for i in order if w[i] != 0)
    else:
        top = ", ".join(map(str, s.get("selected_genes", [])[:n_top]))
    yield "top genes (weight)", top

__all__ = ["sparda", "summary_rows"]
