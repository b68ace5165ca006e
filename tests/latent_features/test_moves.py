"""The whole-feature moves (death / random birth, complement) and the noise-scale move."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from scontrast.latent_features._diagnostics import effective_sample_size
from scontrast.latent_features._estimator import LinearGaussianIBP
from scontrast.latent_features._moves import _death_or_random_birth, _noise_scale_draw

from ._helpers import _moves_from_exact, planted

_RANDOM_BD_RNG = np.random.default_rng(0)


def _random_bd(X, Z, m, K, w, s2x, s2a, alpha, nf, kcap, n_moves, n_scans):
    """``_death_or_random_birth`` in the harness's signature (it has no restricted scans; numpy's Generator)."""
    return _death_or_random_birth(X, Z, m, K, w, s2x, s2a, alpha, nf, kcap, n_moves, _RANDOM_BD_RNG)


@pytest.mark.parametrize("intercept", [True, False])
def test_death_and_random_birth_moves_leave_the_exact_posterior_invariant(intercept):
    """Detailed balance of the death / random-birth kernel (proposal ratios, IBP prior with identical
    columns, the collapsed likelihood, the cap on K): states drawn from the exact
    posterior (4 cells, every hyperparameter and weight fixed, K <= 4) stay distributed as it after
    10 proposals each. Chi-square over the classes expected >= 20 times. The check has power: the
    same kernel given a wrong prior ratio (alpha x 1.3) must fail it."""
    from scipy.stats import chi2

    kernel = _random_bd
    p, after, acc, k = _moves_from_exact(kernel, intercept, 1.5)
    assert acc > 0.5  # the moves act: more than one accepted per 2 draws
    ok = p * 30000 >= 20
    stat = float(((after - p)[ok] ** 2 / p[ok]).sum() * 30000)
    assert chi2.sf(stat, ok.sum() - 1) > 1e-3, (stat, ok.sum())
    pk, ak = np.bincount(k, p), np.bincount(k, after)
    assert np.all(np.abs(ak - pk) < 4 * np.sqrt(pk * (1 - pk) / 30000) + 1e-3), (pk, ak)
    _, bad, _, _ = _moves_from_exact(kernel, intercept, 1.5 * 1.3)
    stat_bad = float(((bad - p)[ok] ** 2 / p[ok]).sum() * 30000)
    assert chi2.sf(stat_bad, ok.sum() - 1) < 1e-6, stat_bad


def test_complement_moves_let_chains_agree_given_the_baseline():
    """Given the baseline, a feature and its complement explain the data alike: without the complement
    moves each chain keeps the orientation it found first and the chains disagree; with them they agree.
    The death moves are off in both arms: on these data they bring the chains together by themselves
    (measured: 6 of 6 seeds agree without complement moves), so they would hide the moves' effect."""
    def rhat(seed, **kw):
        _, X = planted(n=80, d=6, seed=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = LinearGaussianIBP(n_iter=400, burn_in=200, death_moves=0, random_state=0, **kw).fit(X)
        return max(m.rhat_log_joint_, m.rhat_K_)

    seeds = range(4)
    assert all(rhat(s) <= 1.1 for s in seeds)
    assert sum(rhat(s, complement_moves=False) > 1.1 for s in seeds) >= 2


def test_noise_scale_move_leaves_the_priors_invariant():
    """The move (w, sigma_x^2) -> (c w, c sigma_x^2) leaves the likelihood unchanged, so it must leave the
    prior of (w, sigma_x^2) invariant: exact prior draws moved once keep their law (Kolmogorov-Smirnov),
    while the same draw of c without the Haar measure dc / c (one power of c more) is detected."""
    from scipy.stats import gamma, geninvgauss, invgamma, kstest

    rng = np.random.default_rng(0)
    nu, ax, bx, n, reps = 4.0, 1.5, 1.0, 3, 8000
    w0 = rng.gamma(nu / 2, 2 / nu, size=(reps, n))
    s0 = 1.0 / rng.gamma(ax, 1.0 / bx, size=reps)
    c = np.array([_noise_scale_draw(rng, w0[r], s0[r], nu, ax, bx) for r in range(reps)])
    assert kstest(s0 * c, invgamma(ax, scale=bx).cdf).pvalue > 1e-3
    assert kstest(w0[:, 0] * c, gamma(nu / 2, scale=2 / nu).cdf).pvalue > 1e-3
    a, b = nu * w0.sum(axis=1), 2 * bx / s0
    wrong = np.sqrt(b / a) * geninvgauss.rvs(0.5 * n * nu - ax + 1, np.sqrt(a * b), random_state=rng)
    assert kstest(s0 * wrong, invgamma(ax, scale=bx).cdf).pvalue < 1e-6


def test_noise_scale_moves_mix_sigma_x():
    """1,500 cells x 60 genes of planted programmes: without the move sigma_x and the cells' weights creep
    along the direction that leaves the likelihood unchanged (effective sample size of sigma_x 13-20 in
    2 x 200 kept sweeps over seeds 0-2); with it sigma_x mixes (200-350)."""
    from scontrast.latent_features._simulate import planted_programmes
    from scontrast.tl._latent_features import gene_matrix

    adata, _, _ = planted_programmes(n_cells=1500, seed=0)
    X, _ = gene_matrix(adata, n_genes=60)
    kw = dict(n_iter=300, burn_in=100, n_chains=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        on = LinearGaussianIBP(**kw).fit(X)
        off = LinearGaussianIBP(noise_scale_moves=False, **kw).fit(X)
    ess_on = effective_sample_size(on.sigma_x_[:, 100:])
    ess_off = effective_sample_size(off.sigma_x_[:, 100:])
    assert ess_on > 120 and ess_off < 50 and ess_on > 5 * ess_off, (ess_on, ess_off)
