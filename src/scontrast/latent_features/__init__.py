"""Latent features: binary features of the cells, by a resampled ensemble or the IBP's Gibbs sampler.

Two estimators of the model X ~ 1 b' + Z A (Z binary, cells x K) whose samples FANGS summarises:
``BinaryFactorEnsemble`` (the default of ``tl.latent_features``: fixed-K least-squares fits on
Bayesian-bootstrap reweightings of the cells, K the largest that recurs across them) and
``LinearGaussianIBP`` (the Indian buffet process posterior, sampled by collapsed Gibbs sampling).

Files
-----
``_ensemble``      ``BinaryFactorEnsemble`` (members per K, the stability that chooses K)
``_binary_factor`` one member's fit: exact enumerated assignment, weighted ridge loadings, starts
``_estimator``     ``LinearGaussianIBP`` (parameters, checks, the chains run and pooled; the model)
``_chain``         one chain: its frozen settings (``_ChainSettings``), ICA start and sweep steps
``_row_sweep``     the compiled row sweep (rank-one posterior updates, Gibbs and joint flips, new features)
``_moves``         death / random birth, complement, noise scale
``_likelihood``    the collapsed likelihood (``collapsed_log_likelihood``) and the
                   IBP prior terms (``ibp_log_prob``)
``_diagnostics``   split R-hat, effective sample size, the convergence warnings
``_simulate``      ``sample_ibp``, ``simulate_linear_gaussian``

The samples file format is :mod:`scontrast.feature_samples` (its names are re-exported here).
Measurements behind the defaults: ``docs/latent_features.md``.
"""

from __future__ import annotations

from ..feature_samples import FeatureSamples, load_samples, pack_samples, save_samples, unpack_samples
from ._diagnostics import effective_sample_size, split_rhat
from ._ensemble import BinaryFactorEnsemble
from ._estimator import LinearGaussianIBP
from ._likelihood import collapsed_log_likelihood, ibp_log_prob
from ._simulate import sample_ibp, simulate_linear_gaussian

__all__ = [
    "BinaryFactorEnsemble",
    "LinearGaussianIBP",
    "split_rhat",
    "effective_sample_size",
    "ibp_log_prob",
    "collapsed_log_likelihood",
    "sample_ibp",
    "simulate_linear_gaussian",
    "FeatureSamples",
    "save_samples",
    "load_samples",
    "pack_samples",
    "unpack_samples",
]
