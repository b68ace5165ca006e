"""AnnData front end of the linear-Gaussian IBP sampler: ``tl.latent_features(adata, ...)``."""

from __future__ import annotations

import logging

import anndata as ad
import numpy as np

from ..core import TARGET_KEY, ScontrastError, check_int
from ..latent_features import LinearGaussianIBP, pack_samples, unpack_samples
from ._common import build_estimator, fitted_params, record_params, result_warnings

log = logging.getLogger(__name__)

SAMPLES_SUFFIX = "_samples"


def latent_features(
    adata: ad.AnnData,
    *,
    use_rep: str = "X_cpca",
    n_dims: int | None = None,
    key_added: str = "latent_features",
    random_state: int = 0,
    copy: bool = False,
    **params,
):
    """Posterior samples of binary latent features of every cell (linear-Gaussian IBP).

    Each cell may carry several overlapping features; the model is fitted on
    all cells of ``adata`` (target and background together, so that features
    can be compared between the groups) from the embedding ``obsm[use_rep]``.

    Parameters
    ----------
    adata
        Cells x genes with the embedding in ``obsm[use_rep]``.
    use_rep
        The embedding (cells x dims), e.g. ``'X_cpca'`` or ``'X_pcpca'``.
    n_dims
        Use only its first ``n_dims`` columns (None = all).
    key_added
        Slot names: ``obsm[key_added + '_samples']`` and ``uns[key_added]``.
    random_state
        Seed of the sampler (None, an int >= 0 or a numpy Generator).
    copy
        Work on (and return) a copy.
    **params
        Hyper-parameters of :class:`scontrast.latent_features.LinearGaussianIBP`
        (their defaults are its own): ``n_iter``, ``burn_in``, ``thin``, ``alpha``,
        ``sigma_x``, ``sigma_a``, ``max_features``, ``max_new``, ``block_moves``,
        ``scale`` and the hyperpriors.

    Writes
    ------
    ``obsm[key_added + '_samples']`` (n_obs x sum K_b, uint8): the B kept
    samples of Z side by side (sample b in the columns given by
    ``uns[key_added]['n_features']``); ``uns[key_added]``: params, versions,
    seed, ``n_features`` (B,), ``sweeps`` (B,), per-sweep traces
    ``log_joint``, ``K``, ``alpha``, ``sigma_x``, ``sigma_a`` (n_iter,),
    ``n_dims_used``, ``scale``, ``timings`` and, when ``obs['scontrast_target']``
    is present, ``n_target`` and ``n_background``.
    """
    model = build_estimator(LinearGaussianIBP, params, random_state=random_state)
    if use_rep not in adata.obsm:
        raise ScontrastError(f"use_rep: obsm['{use_rep}'] is missing (have: {list(adata.obsm.keys())})")
    X = np.asarray(adata.obsm[use_rep], dtype=np.float64)
    if X.ndim != 2:
        raise ScontrastError(f"use_rep: obsm['{use_rep}'] must be a 2-D cells x dims array")
    n_dims = check_int(n_dims, "n_dims", 1, allow_none=True)
    if n_dims is not None:
        if n_dims > X.shape[1]:
            raise ScontrastError(f"n_dims: {n_dims} requested but obsm['{use_rep}'] has {X.shape[1]} columns")
        X = X[:, :n_dims]
    adata = adata.copy() if copy else adata
    with result_warnings("latent_features") as warned:
        model.fit(X)
    Z, k = pack_samples(model.samples_)
    log.info("latent_features: %d cells x %d dims, %d sweeps in %.1f s, %d samples, K from %d to %d",
             X.shape[0], X.shape[1], model.n_iter, model.timings_["sampling"], k.size, k.min(), k.max())
    adata.obsm[key_added + SAMPLES_SUFFIX] = Z
    extra = {}
    if TARGET_KEY in adata.obs:
        is_target = adata.obs[TARGET_KEY].to_numpy(dtype=bool)
        extra = {"n_target": int(is_target.sum()), "n_background": int((~is_target).sum())}
    model_params = fitted_params(model)
    record_params(adata, key_added, dict(use_rep=use_rep, n_dims=n_dims, key_added=key_added, **model_params),
                  random_state, warnings=warned, n_features=k, n_dims_used=int(X.shape[1]), scale=float(model.scale_),
                  timings={key: float(v) for key, v in model.timings_.items()},
                  **{key: np.asarray(v) for key, v in model.traces().items()}, **extra)
    return adata if copy else None


def samples_from_adata(adata: ad.AnnData, key: str = "latent_features") -> list[np.ndarray]:
    """The samples written by ``latent_features(adata, key_added=key)``: a list of (n_obs, K_b)."""
    slot = key + SAMPLES_SUFFIX
    if slot not in adata.obsm or key not in adata.uns or "n_features" not in adata.uns[key]:
        raise ScontrastError(f"samples: none under obsm['{slot}'] and uns['{key}']['n_features']; "
                             "run tl.latent_features first or pass samples")
    return unpack_samples(np.asarray(adata.obsm[slot]), np.asarray(adata.uns[key]["n_features"]))


__all__ = ["latent_features", "samples_from_adata"]
