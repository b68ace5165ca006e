"""AnnData front end of probabilistic contrastive PCA: ``tl.pcpca(adata, ...)``."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import anndata as ad
import numpy as np

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

log = logging.getLogger(__name__)


def pcpca(
    adata: ad.AnnData,
    *,
    genes: str = "highly_variable",
    layer: str | None = None,
    groupby: str = TARGET_KEY,
    key_added: str | None = None,
    holdout_fraction: float = 0.2,
    random_state=0,
    copy: bool = False,
    key: str | None = None,
    **params,
):
    """Probabilistic contrastive PCA of the target cells against the background cells.

    Parameters
    ----------
    adata
        Cells x genes, log-normalised, with boolean ``obs[groupby]`` (True = target).
    genes
        ``'all'`` or a boolean var column (default ``'highly_variable'``).
    layer
        Matrix to use instead of ``X``. NaN entries are treated as missing at random.
    groupby
        Boolean obs column of the target/background split.
    key_added
        Where the results go. None: ``obsm['X_pcpca']``, ``varm['PCPCA_W']``, ``uns['pcpca']``
        (as below); a name: ``obsm[key_added]``, ``varm[key_added]``, ``uns[key_added]`` (as
        ``scanpy.pp.pca``'s ``key_added``).
    holdout_fraction
        Fraction of target cells held out to report the held-out log-likelihood of PCPCA
        and of PPCA fitted on the rest (:func:`scontrast.pcpca.heldout_loglik`); 0 skips it.
    random_state
        None, an int >= 0 or a numpy Generator: the eigensolver start vectors and the
        held-out split.
    copy
        Work on (and return) a copy.
    key
        Deprecated name of ``groupby`` (a ``FutureWarning``; removed in the next release).
    **params
        Hyper-parameters of :class:`scontrast.pcpca.PCPCA` (their defaults are its own):
        ``n_components``, ``gamma_prime`` (default 0.5) or ``gamma``, ``on_inadmissible``,
        ``clip_fraction``, ``solver``, ``eigen_solver``, ``max_iter``, ``tol``.

    Writes
    ------
    ``obsm['X_pcpca']`` (n_obs x k) posterior means of z for every cell;
    ``varm['PCPCA_W']`` (n_vars x k) loadings, 0 for genes outside the gene set;
    ``uns['pcpca']``: params, versions, seed, gamma, gamma_prime, gamma_requested, clipped,
    sigma2, max_gamma, max_gamma_prime, held-out log-likelihoods, fit diagnostics.

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
    >>> adata.obsm["X_pcpca"].shape, adata.varm["PCPCA_W"].shape
    ((80, 2), (20, 2))
    """
    from ..pcpca import PCPCA, heldout_loglik  # loaded by a fit only: reading a result (summary, figure) skips the method's stack

    groupby = renamed(groupby, key, new_name="groupby", old_name="key", default=TARGET_KEY, who="pcpca")
    model = build_estimator(PCPCA, params, random_state=random_state)
    adata = adata.copy() if copy else adata
    X, Y, mask = group_matrices(adata, genes=genes, layer=layer, key=groupby, min_cells=2)
    with result_warnings("pcpca") as warned:
        model.fit(X, Y)
        held = heldout_loglik(model, X, Y, holdout_fraction, random_state)
    log.info("pcpca: gamma'=%.4g (bound %.4g), sigma2=%.4g, %s", model.gamma_prime_, model.max_gamma_prime_,
             model.sigma2_, model.optimizer_message_)

    full = expression(adata, layer, mask)
    obsm_key, varm_key, uns_key = ("X_pcpca", "PCPCA_W", "pcpca") if key_added is None else (key_added,) * 3
    adata.obsm[obsm_key] = model.transform(full)
    W = np.zeros((adata.n_vars, model.W_.shape[1]))
    W[mask] = model.W_
    adata.varm[varm_key] = W
    with result_warnings("pcpca") as design_warned:
        by_replicate = replicate_share(adata, adata.obsm[obsm_key], "PCPCA component", groupby)
    warned += design_warned
    front = dict(genes=genes, layer=layer, groupby=groupby, key_added=key_added, holdout_fraction=holdout_fraction)
    model_params = fitted_params(model)
    n, m = X.shape[0], Y.shape[0]
    record_params(
        adata, uns_key, {**front, **model_params}, random_state, warnings=warned,
        gamma=float(model.gamma_), gamma_prime=float(model.gamma_prime_),
        gamma_requested=float(model.gamma_requested_), clipped=bool(model.clipped_),
        sigma2=float(model.sigma2_), max_gamma=float(model.max_gamma_), max_gamma_prime=float(model.max_gamma_prime_),
        n_target=int(n), n_background=int(m), n_genes=int(mask.sum()),
        objective=float(model.objective_), solver=model.solver_, converged=bool(model.converged_),
        n_iter=int(model.n_iter_), optimizer_message=model.optimizer_message_,
        eigenvalues=np.asarray(model.eigenvalues_, dtype=float), **held, **by_replicate,
    )
    return adata if copy else None



def _heldout_reading(c) -> str:
    """The held-out log-likelihoods of ``uns['pcpca']`` with what their order means.

    Both models are fitted without the held-out target cells and score them (mean log-likelihood
    per cell). PPCA (gamma' = 0) is the maximum-likelihood model of the target alone; PCPCA gives up
    the target variation the background shares for the variation it lacks, so a lower value is what
    the contrast costs, not a failure of it.
    """
    pc, pp = float(c["heldout_loglik"]), float(c["heldout_loglik_ppca"])
    text = f"{fmt(pc)} ({fmt(pp)})"
    if not (np.isfinite(pc) and np.isfinite(pp)):
        note = str(c.get("heldout_note", "")).strip()
        return f"{text}: {note}" if note else text
    where = f"over {int(c['n_heldout'])} held-out target cells" if "n_heldout" in c else "on held-out target cells"
    if pc < pp:
        return (f"{text} {where}: PCPCA's is lower, as expected: PPCA's components follow the target's largest "
                "variation, PCPCA's the variation the background lacks, so PCPCA explains new target cells less "
                "well; this does not measure the contrast")
    return f"{text} {where}: PCPCA's is as high or higher: its contrastive directions explain new target cells as well"


def summary_rows(adata: ad.AnnData, n_top: int = 10) -> Iterator[tuple[str, str]]:
    """(item, value) rows of the workflow's summary table for ``uns['pcpca']``."""
    c = adata.uns["pcpca"]
    yield "gamma' (admissible below)", f"{fmt(c['gamma_prime'])} ({fmt(c['max_gamma_prime'])})"
    yield ("held-out log-likelihood per target cell, PCPCA (PPCA); higher is better",
           _heldout_reading(c))
    if "replicate_share" in c:
        yield "share of each component's target variance between replicates", ", ".join(
            f"{v:.2f}" for v in np.asarray(c["replicate_share"]))

__all__ = ["pcpca", "summary_rows"]
