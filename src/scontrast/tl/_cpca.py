"""AnnData front end of contrastive PCA: ``tl.cpca(adata, ...)``."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

import anndata as ad
import numpy as np

from ..core import ScontrastWarning
from ._common import (
    TARGET_KEY,
    build_estimator,
    expression,
    fitted_params,
    fmt,
    group_matrices,
    record_params,
    renamed,
    replicate_share,
    result_warnings,
)

if TYPE_CHECKING:
    from ..cpca import CPCA

log = logging.getLogger(__name__)


def _alpha_param(alpha):
    """The alpha setting in a form h5ad can store (a string, a float or a float array)."""
    if isinstance(alpha, str):
        return alpha
    arr = np.asarray(alpha, dtype=float)
    return float(arr) if arr.ndim == 0 else arr


def _warn_rank(n_target: int, n_components: int) -> None:
    """Warn when components outnumber the target's directions of variance (n - 1 for n centred cells)."""
    if n_components > n_target - 1:
        first = max(n_target, 1)
        which = f"component {first} has" if first == n_components else f"components {first} to {n_components} have"
        warnings.warn(f"cpca: the target group has {n_target} cells, so at most {n_target - 1} direction(s) carry "
                      f"target variance: {which} none (their contrast is minus alpha times the background's "
                      "variance)", ScontrastWarning, stacklevel=3)


def cpca(
    adata: ad.AnnData,
    *,
    genes: str = "highly_variable",
    layer: str | None = None,
    groupby: str = TARGET_KEY,
    key_added: str | None = None,
    random_state=0,
    n_jobs: int | None = None,
    copy: bool = False,
    key: str | None = None,
    **params,
):
    """Contrastive PCA of the target cells against the background cells.

    Parameters
    ----------
    adata
        Cells x genes, log-normalised, with boolean ``obs[groupby]`` (True = target).
    genes
        ``'highly_variable'`` (default), ``'sparda_selected'`` (needs SPARDA's
        ``var['sparda_selected']``), ``'all'`` or any boolean var column.
    layer
        Matrix to use instead of ``X``.
    groupby
        Boolean obs column of the target/background split.
    key_added
        Where the results go. None: ``obsm['X_cpca']``, ``varm['cPCs']``, ``uns['cpca']`` (as
        below); a name: ``obsm[key_added]``, ``varm[key_added]``, ``uns[key_added]`` and
        ``obsm``/``varm[f'{key_added}_alpha<i>']`` (as ``scanpy.pp.pca``'s ``key_added``).
    random_state
        Seed of the spectral clustering of the alpha grid (None, an int or a numpy Generator).
    n_jobs
        Threads of the fit: None follows the BLAS's current setting (all cores unless limited
        with ``threadpoolctl``), -1 every core, a number that many (recorded in
        ``uns['cpca']['n_threads']``; the results do not depend on it).
    copy
        Work on (and return) a copy.
    key
        Deprecated name of ``groupby`` (a ``FutureWarning``; removed in the next release).
    **params
        Hyper-parameters of :class:`scontrast.cpca.CPCA` (their defaults are its own):
        ``n_components`` (components per alpha), ``alpha`` (``'auto'``: alphas chosen
        from a grid by spectral clustering of subspaces, as in the paper, alpha = 0,
        plain PCA of the target, always first; or a number >= 0, or a list of them),
        ``n_alphas``, ``max_log_alpha``, ``n_alpha_clusters``, ``affinity``,
        ``standardize``, ``solver``, ``tol``, ``max_iter``.

    Writes
    ------
    ``obsm['X_cpca']`` (n_obs x k): every cell projected (centred on the target mean)
    on the components of the default alpha (the first chosen non-zero alpha for
    ``'auto'``, else the first non-zero given alpha); with k >= 2 (the default)
    ``sc.pl.embedding(adata, basis='cpca')`` draws the first two;
    ``obsm['X_cpca_alpha<i>']``: the same for the i-th fitted alpha
    (``uns['cpca']['alphas'][i]``; for ``'auto'`` i = 0 is alpha = 0);
    ``varm['cPCs']`` (n_vars x k) loadings of the default alpha and
    ``varm['cPCs_alpha<i>']`` per fitted alpha, 0 for genes outside the gene set;
    ``uns['cpca']``: params, versions, seed, ``alphas``, ``alpha`` (the default),
    ``alpha_grid``, ``affinity`` (grid x grid), ``alpha_labels`` (spectral
    clusters), ``explained_contrast`` (fitted alphas x k eigenvalues of
    C_X - alpha C_Y), ``grid_explained_contrast``, ``residuals``, ``solver``,
    ``n_threads`` (the fit's threads: ``n_jobs``, by default the BLAS's setting), the
    group sizes and the number of genes.

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
    >>> adata.obsm["X_cpca"].shape, adata.varm["cPCs"].shape
    ((80, 2), (20, 2))
    >>> float(adata.uns["cpca"]["alphas"][0])                # alpha = 0 (PCA of the target) comes first
    0.0
    """
    from ..cpca import CPCA  # loaded by a fit only: reading a result (summary, figure) skips the method's stack

    groupby = renamed(groupby, key, new_name="groupby", old_name="key", default=TARGET_KEY, who="cpca")
    model = build_estimator(CPCA, params, random_state=random_state, n_jobs=n_jobs)
    adata = adata.copy() if copy else adata
    X, Y, mask = group_matrices(adata, genes=genes, layer=layer, key=groupby, min_cells=2)
    with result_warnings("cpca") as warned:
        model.fit(X, Y)
        _warn_rank(X.shape[0], model.n_components)
    log.info("cpca: %d target x %d background cells, %d genes, solver %s; alphas %s (default %.4g)",
             X.shape[0], Y.shape[0], X.shape[1], model.solver_, np.round(model.alphas_, 4).tolist(),
             model.default_alpha_)

    obsm_key, varm_key, uns_key = ("X_cpca", "cPCs", "cpca") if key_added is None else (key_added,) * 3
    keys = _write_embeddings(adata, model, mask, layer, obsm_key, varm_key)
    default = model.default_index_
    with result_warnings("cpca") as design_warned:
        by_replicate = replicate_share(adata, adata.obsm[obsm_key], "cPC", groupby)
    warned += design_warned
    model_params = fitted_params(model)
    model_params["alpha"] = _alpha_param(model_params["alpha"])
    record_params(
        adata, uns_key, dict(genes=genes, layer=layer, groupby=groupby, key_added=key_added, **model_params),
        random_state, warnings=warned,
        alphas=np.asarray(model.alphas_, dtype=float), alpha=float(model.default_alpha_),
        default_index=int(default), embedding_keys=np.asarray(keys, dtype=str),
        alpha_grid=np.asarray(model.alpha_grid_, dtype=float), affinity=np.asarray(model.affinity_, dtype=float),
        alpha_labels=np.asarray(model.alpha_labels_, dtype=int),
        explained_contrast=np.asarray(model.explained_contrast_, dtype=float),
        grid_explained_contrast=np.asarray(model.grid_explained_contrast_, dtype=float),
        residuals=np.asarray(model.residuals_, dtype=float), solver=model.solver_, n_threads=int(model.n_threads_),
        n_target=int(X.shape[0]), n_background=int(Y.shape[0]), n_genes=int(mask.sum()), **by_replicate,
    )
    return adata if copy else None


def _write_embeddings(adata: ad.AnnData, model: CPCA, mask: np.ndarray, layer: str | None, obsm_key: str,
                      varm_key: str) -> list[str]:
    """Every cell's projection and the loadings per fitted alpha (``obsm[obsm_key + '_alpha<i>']``,
    ``varm[varm_key + '_alpha<i>']``), and those of the default alpha (``obsm[obsm_key]``,
    ``varm[varm_key]``); returns the per-alpha obsm keys."""
    full = expression(adata, layer, mask)
    keys = []
    for i, a in enumerate(model.alphas_):
        name = f"{obsm_key}_alpha{i}"
        adata.obsm[name] = model.transform(full, alpha=a)
        W = np.zeros((adata.n_vars, model.components_.shape[1]))
        W[mask] = model.components_[i].T
        adata.varm[f"{varm_key}_alpha{i}"] = W
        keys.append(name)
    default = model.default_index_
    adata.obsm[obsm_key] = adata.obsm[keys[default]].copy()
    adata.varm[varm_key] = adata.varm[f"{varm_key}_alpha{default}"].copy()
    return keys


def summary_rows(adata: ad.AnnData, n_top: int = 10) -> Iterator[tuple[str, str]]:
    """(item, value) rows of the workflow's summary table for ``uns['cpca']``."""
    c = adata.uns["cpca"]
    yield "alphas chosen", ", ".join(fmt(a) for a in np.asarray(c.get("alphas", []))[1:])
    if "replicate_share" in c:
        yield "share of each cPC's target variance between replicates", ", ".join(
            f"{v:.2f}" for v in np.asarray(c["replicate_share"]))

__all__ = ["cpca", "summary_rows"]
