"""AnnData front end of the linear-Gaussian IBP sampler: ``tl.latent_features(adata, ...)``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..bounds import check_count
from ..core import TARGET_KEY, ScontrastError
from ..feature_samples import pack_samples, unpack_samples
from ._common import build_estimator, expression, fitted_params, gene_mask, record_params, result_warnings

if TYPE_CHECKING:
    from ..latent_features import BinaryFactorEnsemble, LinearGaussianIBP

log = logging.getLogger(__name__)

#: ``uns[key_added]`` entries of the per-cell matrices: the packed samples, the matrix explained, the cells
SAMPLES, INPUT, CELLS = "samples", "input", "cells"
#: the methods, by the name of their estimator in scontrast.latent_features (loaded by a fit only: reading
#: samples for FANGS, a summary or a figure skips the samplers' stack)
METHODS = {"ensemble": "BinaryFactorEnsemble", "ibp": "LinearGaussianIBP"}


def gene_matrix(adata: ad.AnnData, genes: str = "highly_variable", n_genes: int = 50,
                layer: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The standardised log expression of the ``n_genes`` most variable genes of ``genes``.

    Returns ``(M (n_obs, n) float64, names (n,) str)``, n = min(n_genes, genes with
    variance > 0), genes in decreasing order of variance. The ranking ignores the groups,
    so the features (and the test of their enrichment in the target) are blind to them.
    Each gene is standardised (z-score: centred at its mean, divided by its standard
    deviation, so one unit = one standard deviation of the gene). Centring at the median
    instead was measured worse: on random halves of pbmc68k's dendritic cells the chains then
    stuck in different modes (split R-hat of the log joint 1.97 vs 1.05 with z-scores).
    """
    n_genes = check_count(n_genes, "n_genes", 1, "latent_features")
    idx = np.flatnonzero(gene_mask(adata, genes))
    M = expression(adata, layer, idx)
    if sp.issparse(M):
        mean = np.asarray(M.mean(axis=0)).ravel()
        var = np.asarray(M.multiply(M).mean(axis=0)).ravel() - mean**2
    else:
        var = np.asarray(M, dtype=np.float64).var(axis=0)
    order = np.argsort(-var, kind="stable")
    order = order[var[order] > 1e-12 * max(float(var.max(initial=0.0)), 1e-300)][:n_genes]
    if order.size == 0:
        raise ScontrastError(f"genes: no gene of '{genes}' varies across the cells")
    sub = M[:, order]
    sub = sub.toarray() if sp.issparse(sub) else np.asarray(sub)
    sub = sub.astype(np.float64)
    if not np.isfinite(sub).all():
        raise ScontrastError("X: the expression holds NaN or infinite values")
    sub = (sub - sub.mean(axis=0)) / sub.std(axis=0)
    return np.ascontiguousarray(sub), adata.var_names.to_numpy()[idx[order]].astype(str)


def latent_features(
    adata: ad.AnnData,
    *,
    method: str = "ensemble",
    genes: str = "highly_variable",
    n_genes: int = 50,
    layer: str | None = None,
    use_rep: str | None = None,
    n_dims: int | None = None,
    key_added: str = "latent_features",
    random_state: int = 0,
    n_jobs: int | None = 1,
    copy: bool = False,
    **params,
):
    """Samples of binary latent features of every cell: resampled fits (default) or IBP posterior draws.

    Each cell may carry several overlapping features; the model X ~ 1 b' + Z A is fitted on
    all cells of ``adata`` (target and background together, so that features
    can be compared between the groups). By default it explains a gene matrix
    (see :func:`gene_matrix`), so each feature's loadings are a gene programme;
    ``use_rep`` explains an embedding instead. ``tl.fangs`` then summarises the samples.

    Parameters
    ----------
    adata
        Cells x genes, log-normalised in ``X`` (or ``layer``).
    method
        ``'ensemble'`` (:class:`scontrast.latent_features.BinaryFactorEnsemble`): for each K up to
        ``max_features``, ``n_members`` fixed-K binary factorisations on Bayesian-bootstrap
        reweightings of the cells; K is the largest whose features recur across the resamples
        (``stability``), and its members are the samples (resamples, not posterior draws). The
        same answer from any seed on real contrasts, and K does not grow with the number of cells
        (``docs/latent_features.md``, "Ensemble"). ``'ibp'``
        (:class:`scontrast.latent_features.LinearGaussianIBP`): the Gibbs sampler of the
        linear-Gaussian Indian buffet process; on real cells its chains often disagree (its
        posterior K grows with the cells), which its diagnostics and FANGS's support report.
    genes
        Candidate genes: ``'all'`` or a boolean ``var`` column (``'highly_variable'``,
        ``'sparda_selected'``...).
    n_genes
        The model explains the standardised log expression of this many candidates,
        the most variable over all cells.
    layer
        Read the expression from ``layers[layer]`` instead of ``X``.
    use_rep
        Explain the embedding ``obsm[use_rep]`` (cells x dims) instead of genes
        (then ``genes``, ``n_genes`` and ``layer`` are not used).
    n_dims
        With ``use_rep``: use only its first ``n_dims`` columns (None = all).
    key_added
        Where the results go: ``uns[key_added]``.
    random_state
        Seed of the chains (None, an int >= 0 or a numpy Generator).
    n_jobs
        Threads running chains at once (-1 = all cores); results do not depend on it.
    copy
        Work on (and return) a copy.
    **params
        Hyper-parameters of the method's estimator (their defaults are its own). ``'ensemble'``:
        ``max_features``, ``n_members``, ``stability``, ``starts``, ``max_iter``, ``ridge``,
        ``min_cells``, ``max_cells``, ``scale``. ``'ibp'``: ``n_iter``, ``burn_in``, ``thin``, ``n_chains``,
        ``alpha``, ``sigma_x``, ``sigma_a``, ``max_features``, ``max_new``,
        ``block_moves``, ``scale``, ``intercept``, ``noise``, ``noise_df``,
        ``init_features``, ``complement_moves``, ``noise_scale_moves``, ``death_moves``, ``max_cells`` and
        the hyperpriors.

    Writes
    ------
    ``uns[key_added]``, nothing in ``obsm`` (the samples and the matrix explained are not
    embeddings of the cells): ``samples`` (n_obs x sum K_b, uint8): the B kept samples of Z side
    by side, packed (:func:`samples_from_adata` unpacks them; ``'ensemble'``: the chosen K's
    members, ``chains`` their halves, and ``stability`` (max_features,) per K, NaN where not tried, ``n_features_chosen``,
    ``medoid_support``, ``sigma_x_mean`` the residual sd and ``sigma_a_mean`` the loading sd of the
    ridge, ``converged``; no sweeps or traces). ``'ibp'``: chain after chain (sample b in the columns given by
    ``uns[key_added]['n_features']``); ``input`` (n_obs x D, float32): the matrix explained;
    ``cells`` (n_obs,): the cells of the rows of both (a subset of the AnnData still finds its
    rows); params, versions, seed,
    warnings, ``input_names`` (D,) (genes, or ``use_rep[j]``), ``n_features``,
    ``sweeps``, ``chains`` (B,), per-sweep traces ``log_joint``, ``K``, ``alpha``,
    ``sigma_x``, ``sigma_a`` (n_chains, n_iter), ``rhat_log_joint``, ``rhat_K``,
    ``ess_log_joint``, ``ess_K``, ``sigma_x_mean``, ``sigma_a_mean`` (posterior
    means after burn-in), ``n_dims_used``, ``scale``, ``timings`` and, when
    ``obs['scontrast_target']`` is present, ``n_target`` and ``n_background``; ``subsample``
    (``n_cells``, ``of``...) when the chains ran on a subsample of the cells (``max_cells``,
    stratified by group and replicate; the other cells' features drawn per kept sample).

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> import scontrast as sct
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 12))
    >>> X[rng.random(200) < 0.4, :4] += 3.0               # a programme of g0-g3 in 40% of the cells
    >>> adata = ad.AnnData(X, var=pd.DataFrame(index=[f"g{i}" for i in range(12)]))
    >>> adata.obs["scontrast_target"] = np.arange(200) < 100
    >>> sct.tl.latent_features(adata, genes="all", random_state=0)
    >>> int(adata.uns["latent_features"]["n_features_chosen"])   # the one programme, stable over 40 resamples
    1
    """
    if method not in METHODS:
        raise ScontrastError(f"method: expected one of {list(METHODS)}, got {method!r}")
    from .. import latent_features as _samplers

    model = build_estimator(getattr(_samplers, METHODS[method]), params, random_state=random_state, n_jobs=n_jobs)
    X, names, n_dims = _explained_matrix(adata, genes=genes, n_genes=n_genes, layer=layer, use_rep=use_rep,
                                         n_dims=n_dims)
    adata = adata.copy() if copy else adata
    front = dict(method=method, genes=genes, n_genes=n_genes, layer=layer, use_rep=use_rep, n_dims=n_dims,
                 key_added=key_added)
    record = _ensemble_and_record if method == "ensemble" else _sample_and_record
    record(adata, model, X, names, front, random_state)
    return adata if copy else None


def latent_features_params(cfg: dict) -> dict:
    """The keyword arguments of :func:`latent_features` from a workflow config block.

    The block holds the front end's settings, ``method`` and one block of settings per method
    (``ensemble``, ``ibp``); only the chosen method's block is passed on, flattened.

    Examples
    --------
    >>> import scontrast as sct
    >>> block = {"method": "ensemble", "genes": "highly_variable", "ensemble": {"max_features": 4}, "ibp": {"n_iter": 500}}
    >>> sct.tl.latent_features_params(block)                  # only the chosen method's settings, flattened
    {'method': 'ensemble', 'genes': 'highly_variable', 'max_features': 4}
    """
    method = cfg.get("method", "ensemble")
    if method not in METHODS:
        raise ScontrastError(f"method: expected one of {list(METHODS)}, got {method!r}")
    front = {k: v for k, v in cfg.items() if k not in METHODS}
    return {**front, **dict(cfg.get(method) or {})}


def _explained_matrix(adata: ad.AnnData, *, genes, n_genes, layer, use_rep, n_dims):
    """The matrix the model explains (cells x D float64), its column names and ``n_dims`` checked."""
    if use_rep is not None:
        if use_rep not in adata.obsm:
            raise ScontrastError(f"use_rep: obsm['{use_rep}'] is missing (have: {list(adata.obsm.keys())})")
        X = np.asarray(adata.obsm[use_rep], dtype=np.float64)
        if X.ndim != 2:
            raise ScontrastError(f"use_rep: obsm['{use_rep}'] must be a 2-D cells x dims array")
        n_dims = check_count(n_dims, "n_dims", 1, "latent_features", allow_none=True)
        if n_dims is not None:
            if n_dims > X.shape[1]:
                raise ScontrastError(f"n_dims: {n_dims} requested but obsm['{use_rep}'] has {X.shape[1]} columns")
            X = X[:, :n_dims]
        names = np.array([f"{use_rep}[{j}]" for j in range(X.shape[1])])
    else:
        if n_dims is not None:
            raise ScontrastError("n_dims: only applies with use_rep (an embedding); use n_genes for genes")
        X, names = gene_matrix(adata, genes, n_genes, layer)
    return X, names, n_dims


def _sample_and_record(adata: ad.AnnData, model: LinearGaussianIBP, X: np.ndarray, names: np.ndarray, front: dict,
                       random_state) -> None:
    """Run the sampler on ``X`` and write its samples, its input and ``uns[key_added]``."""
    key_added, use_rep = front["key_added"], front["use_rep"]
    with result_warnings("latent_features") as warned:
        model.fit(X, strata=_strata(adata))
    Z, k = pack_samples(model.samples_)
    diag = model.diagnostics()
    log.info("latent_features: %d cells x %d %s, %d chains x %d sweeps in %.1f s, %d samples, K from %d to %d, "
             "split R-hat log joint %.3g, K %.3g, ESS %.0f", X.shape[0], X.shape[1],
             "dims" if use_rep else "genes", model.n_chains, model.n_iter, model.timings_["sampling"], k.size,
             k.min(), k.max(), diag["rhat_log_joint"], diag["rhat_K"], diag["ess_log_joint"])
    extra = _write_samples(adata, key_added, Z, X, model.fitted_cells_, "the chains",
                           "features drawn given each kept sample's loadings (3 Gibbs scans)")
    kept = slice(model.burn_in, None)
    record_params(adata, key_added, dict(**front, **fitted_params(model)),
                  random_state, warnings=warned, n_features=k, n_dims_used=int(X.shape[1]), input_names=names,
                  scale=float(model.scale_), timings={key: float(v) for key, v in model.timings_.items()},
                  sigma_x_mean=float(model.sigma_x_[:, kept].mean()), sigma_a_mean=float(model.sigma_a_[:, kept].mean()),
                  **diag, **{key: np.asarray(v) for key, v in model.traces().items()}, **extra)


def _ensemble_and_record(adata: ad.AnnData, model: BinaryFactorEnsemble, X: np.ndarray, names: np.ndarray,
                         front: dict, random_state) -> None:
    """Fit the ensemble on ``X`` and write its members (the samples), its input and ``uns[key_added]``."""
    key_added = front["key_added"]
    with result_warnings("latent_features") as warned:
        model.fit(X, strata=_strata(adata))
    Z, k = pack_samples(model.samples_)
    stab = ", ".join(f"{v:.2f}" for v in model.stability_[np.isfinite(model.stability_)])
    log.info("latent_features: %d cells x %d %s, %d resampled fits per K in %.1f s; stability per K from 1: %s; "
             "chosen K = %d (stability >= %g)", X.shape[0], X.shape[1], "dims" if front["use_rep"] else "genes",
             model.n_members, model.timings_["fitting"], stab, model.n_features_, model.stability)
    extra = _write_samples(adata, key_added, Z, X, model.fitted_cells_, "the fits",
                           "assigned their best pattern given each member's loadings")
    record_params(adata, key_added, dict(**front, **fitted_params(model)), random_state, warnings=warned,
                  n_features=k, n_dims_used=int(X.shape[1]), input_names=names, scale=float(model.scale_),
                  timings={key: float(v) for key, v in model.timings_.items()}, chains=model.sample_chains_,
                  stability=np.asarray(model.stability_, dtype=np.float64), n_features_chosen=int(model.n_features_),
                  medoid_support=np.asarray(model.medoid_support_, dtype=np.float64),
                  converged=np.asarray(model.converged_, dtype=bool), intercept=True, sigma_x_mean=float(model.sigma_x_),
                  sigma_a_mean=float(model.sigma_x_ / np.sqrt(model.ridge)), **extra)


def _write_samples(adata: ad.AnnData, key_added: str, Z: np.ndarray, X: np.ndarray, fitted: np.ndarray, who: str,
                   other_cells: str) -> dict:
    """The packed samples, the matrix explained and their cells (for ``uns[key_added]``), the group counts and,
    when ``who`` (the chains, the fits) ran on a subsample of the cells, its record (the approximation, stated
    where the result is)."""
    extra = {SAMPLES: Z, INPUT: X.astype(np.float32), CELLS: adata.obs_names.to_numpy().astype(str),
             **_group_counts(adata)}
    n_fitted = int(fitted.size)
    if n_fitted < X.shape[0]:
        extra["subsample"] = {"n_cells": n_fitted, "of": int(X.shape[0]), "strata": "group and replicate",
                              "other_cells": other_cells}
        log.info("latent_features: %s ran on a stratified subsample of %d of %d cells (max_cells); the other cells: %s",
                 who, n_fitted, X.shape[0], other_cells)
    return extra


def _group_counts(adata: ad.AnnData) -> dict:
    """``n_target`` and ``n_background`` when the groups are annotated, else nothing."""
    if TARGET_KEY not in adata.obs:
        return {}
    is_target = adata.obs[TARGET_KEY].to_numpy(dtype=bool)
    return {"n_target": int(is_target.sum()), "n_background": int((~is_target).sum())}


def _strata(adata: ad.AnnData) -> np.ndarray | None:
    """Each cell's group and replicate (what a subsample of the cells keeps in proportion), or None."""
    from ..design import REPLICATE_KEY

    cols = [c for c in (TARGET_KEY, REPLICATE_KEY) if c in adata.obs]
    if not cols:
        return None
    return adata.obs[cols].astype(str).agg("|".join, axis=1).to_numpy()


def samples_from_adata(adata: ad.AnnData, key: str = "latent_features") -> list[np.ndarray]:
    """The samples written by ``latent_features(adata, key_added=key)``: a list of (n_obs, K_b), rows in
    the order of ``adata.obs_names``.

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> import scontrast as sct
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 12))
    >>> X[rng.random(200) < 0.4, :4] += 3.0               # a programme of g0-g3 in 40% of the cells
    >>> adata = ad.AnnData(X, var=pd.DataFrame(index=[f"g{i}" for i in range(12)]))
    >>> adata.obs["scontrast_target"] = np.arange(200) < 100
    >>> sct.tl.latent_features(adata, genes="all", random_state=0)
    >>> samples = sct.tl.samples_from_adata(adata)
    >>> len(samples) > 0, samples[0].shape[0]                 # one binary (cells x K) matrix per sample
    (True, 200)
    """
    info = adata.uns.get(key)
    if not isinstance(info, dict) or SAMPLES not in info or "n_features" not in info:
        raise ScontrastError(f"samples: none under uns['{key}']['{SAMPLES}'] and uns['{key}']['n_features']; "
                             "run tl.latent_features first or pass samples")
    return unpack_samples(cell_rows(adata, key, SAMPLES), np.asarray(info["n_features"]))


def cell_rows(adata: ad.AnnData, key: str, what: str) -> np.ndarray:
    """``uns[key][what]`` (a matrix with one row per cell latent_features ran on) in the order of ``adata.obs_names``.

    Its rows are matched by ``uns[key]['cells']``, so that a subset of the AnnData (or its cells
    in another order) gets its own rows; a cell latent_features did not see is a one-line error.
    """
    info = adata.uns[key]
    M = np.asarray(info[what])
    cells = info.get(CELLS)
    if cells is None or (M.shape[0] == adata.n_obs and np.array_equal(np.asarray(cells).astype(str),
                                                                        adata.obs_names.to_numpy().astype(str))):
        if M.shape[0] != adata.n_obs:
            raise ScontrastError(f"uns['{key}']['{what}'] has {M.shape[0]} rows, the data {adata.n_obs} cells")
        return M
    rows = pd.Index(np.asarray(cells).astype(str)).get_indexer(adata.obs_names.astype(str))
    if (rows < 0).any():
        missing = adata.obs_names[rows < 0]
        raise ScontrastError(f"uns['{key}']['{what}']: {missing.size} of the {adata.n_obs} cells are not among the "
                             f"cells latent_features ran on (e.g. {list(missing[:3])})")
    return M[rows]


__all__ = ["latent_features", "samples_from_adata", "gene_matrix", "cell_rows"]
