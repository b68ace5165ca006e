"""AnnData front end of the linear-Gaussian IBP sampler: ``tl.latent_features(adata, ...)``."""

from __future__ import annotations

import logging

import anndata as ad
import numpy as np

from ..io import ScontrastError
from ..latent_features import LinearGaussianIBP, pack_samples, unpack_samples
from ._common import TARGET_KEY, record_params

log = logging.getLogger(__name__)

SAMPLES_SUFFIX = "_samples"


def latent_features(
    adata: ad.AnnData,
    *,
    use_rep: str = "X_cpca",
    n_dims: int | None = None,
    n_iter: int = 1000,
    burn_in: int = 500,
    thin: int = 5,
    alpha: float | None = None,
    sigma_x: float | None = None,
    sigma_a: float | None = None,
    max_features: int = 30,
    max_new: int = 3,
    block_moves: int = 4,
    scale: bool = True,
    key_added: str = "latent_features",
    random_state: int = 0,
    copy: bool = False,
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
    n_iter, burn_in, thin
        Sweeps in total, discarded, and the spacing of the kept samples.
    alpha, sigma_x, sigma_a
        Fixed IBP concentration, noise and loading standard deviations (in
        the embedding's units); None samples them.
    max_features
        Cap on the number of features.
    max_new
        Most features a cell may open in one Gibbs step.
    block_moves
        Metropolis moves per cell and sweep flipping 2-3 of its entries at once.
    scale
        Divide the embedding by its overall standard deviation before
        sampling (the hyperpriors then suit any units).
    key_added
        Slot names: ``obsm[key_added + '_samples']`` and ``uns[key_added]``.
    random_state
        Seed of the sampler.
    copy
        Work on (and return) a copy.

    Writes
    ------
    ``obsm['latent_features_samples']`` (n_obs x sum K_b, uint8): the B kept
    samples of Z side by side (sample b in the columns given by
    ``uns['latent_features']['n_features']``); ``uns['latent_features']``:
    params, versions, seed, ``n_features`` (B,), ``sweeps`` (B,), per-sweep
    traces ``log_joint``, ``K``, ``alpha``, ``sigma_x``, ``sigma_a``, and
    ``timings``.
    """
    if use_rep not in adata.obsm:
        raise ScontrastError(f"use_rep: obsm['{use_rep}'] is missing (have: {list(adata.obsm.keys())})")
    X = np.asarray(adata.obsm[use_rep], dtype=np.float64)
    if X.ndim != 2:
        raise ScontrastError(f"use_rep: obsm['{use_rep}'] must be a 2-D cells x dims array")
    if n_dims is not None:
        if isinstance(n_dims, bool) or not isinstance(n_dims, (int, np.integer)) or n_dims < 1:
            raise ScontrastError(f"n_dims: expected a positive integer or None, got {n_dims!r}")
        if n_dims > X.shape[1]:
            raise ScontrastError(f"n_dims: {n_dims} requested but obsm['{use_rep}'] has {X.shape[1]} columns")
        X = X[:, :n_dims]
    params = dict(use_rep=use_rep, n_dims=n_dims, n_iter=n_iter, burn_in=burn_in, thin=thin, alpha=alpha,
                  sigma_x=sigma_x, sigma_a=sigma_a, max_features=max_features, max_new=max_new,
                  block_moves=block_moves, scale=scale)
    adata = adata.copy() if copy else adata
    model = LinearGaussianIBP(n_iter=n_iter, burn_in=burn_in, thin=thin, alpha=alpha, sigma_x=sigma_x,
                              sigma_a=sigma_a, max_features=max_features, max_new=max_new,
                              block_moves=block_moves, scale=scale,
                              random_state=random_state).fit(X)
    Z, k = pack_samples(model.samples_)
    log.info("latent_features: %d cells x %d dims, %d sweeps in %.1f s, %d samples, K from %d to %d",
             X.shape[0], X.shape[1], n_iter, model.timings_["sampling"], k.size, k.min(), k.max())
    adata.obsm[key_added + SAMPLES_SUFFIX] = Z
    extra = {}
    if TARGET_KEY in adata.obs:
        is_target = adata.obs[TARGET_KEY].to_numpy(dtype=bool)
        extra = {"n_target": int(is_target.sum()), "n_background": int((~is_target).sum())}
    record_params(adata, key_added, params, random_state, n_features=k, n_dims_used=int(X.shape[1]),
                  scale=float(model.scale_), timings={key: float(v) for key, v in model.timings_.items()},
                  **{key: np.asarray(v) for key, v in model.traces().items()}, **extra)
    return adata if copy else None


def samples_from_adata(adata: ad.AnnData, key: str = "latent_features") -> list[np.ndarray]:
    """The samples written by ``latent_features(adata, key_added=key)``: a list of (n_obs, K_b)."""
    slot = key + SAMPLES_SUFFIX
    if slot not in adata.obsm or key not in adata.uns or "n_features" not in adata.uns[key]:
        raise ScontrastError(f"no feature samples under obsm['{slot}'] and uns['{key}']['n_features']: "
                             "run tl.latent_features first or pass samples")
    return unpack_samples(np.asarray(adata.obsm[slot]), np.asarray(adata.uns[key]["n_features"]))


__all__ = ["latent_features", "samples_from_adata"]
