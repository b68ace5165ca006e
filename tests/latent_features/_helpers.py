"""Shared helpers of the latent-feature tests: exact posteriors by enumeration, planted data, the move harness."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.special import logsumexp

from scontrast.latent_features._estimator import LinearGaussianIBP
from scontrast.latent_features._likelihood import collapsed_log_likelihood, ibp_log_prob
from scontrast.latent_features._row_sweep import _seed_numba
from scontrast.latent_features._simulate import simulate_linear_gaussian


def lof_key(Z):
    """The left-ordered-form class of Z: its non-empty columns as a sorted tuple."""
    Z = np.asarray(Z, dtype=np.uint8)
    return tuple(sorted(bytes(c) for c in Z.T if c.any()))


def _log_ibp_alpha_integrated(Z, a0, b0, rate, harmonic):
    """log P([Z]) with alpha ~ Gamma(a0, b0) integrated out analytically (``rate`` = b0 + the harmonic
    sum the IBP's exp(-alpha H_N) adds, ``harmonic`` = H_N, which ibp_log_prob(Z, 1) subtracts)."""
    k = Z.shape[1]
    return (ibp_log_prob(Z, 1.0) + harmonic
            + math.lgamma(a0 + k) - math.lgamma(a0) + a0 * math.log(b0) - (a0 + k) * math.log(rate))


def _normalised(logp: dict) -> dict:
    """{class: probability} from {class: unnormalised log probability}."""
    keys = list(logp)
    v = np.array([logp[q] for q in keys])
    return dict(zip(keys, np.exp(v - logsumexp(v))))


def exact_posterior(X, sigma_a, k_max, alpha_prior=(1.0, 1.0), s2x_prior=(1.0, 1.0), intercept=False):
    """P([Z] | X) over every left-ordered class with at most k_max features.

    alpha ~ Gamma(alpha_prior) is integrated out analytically, sigma_x^2 ~
    InvGamma(s2x_prior) by quadrature on a log grid; sigma_a is fixed. With
    ``intercept`` the model has a baseline b ~ N(0, sigma_a^2) shared by all cells
    (each column of X is then N(0, sigma_a^2 (Z Z' + 1 1') + sigma_x^2 I)) and the IBP
    is conditioned on no feature held by every cell (P(none | alpha) = exp(-alpha / n)).
    """
    n, d = X.shape
    a0, b0 = alpha_prior
    ax, bx = s2x_prior
    harmonic = sum(1.0 / i for i in range(1, n + 1))
    log_s2 = np.linspace(np.log(1e-3), np.log(30.0), 400)
    s2 = np.exp(log_s2)
    # log prior density of sigma_x^2 times the Jacobian of the log grid
    log_w = ax * np.log(bx) - math.lgamma(ax) - (ax + 1) * log_s2 - bx / s2 + log_s2 + np.log(log_s2[1] - log_s2[0])
    histories = [np.array(h, dtype=np.uint8) for h in itertools.product([0, 1], repeat=n)
                 if any(h) and not (intercept and all(h))]
    rate = b0 + harmonic - (1.0 / n if intercept else 0.0)
    logp = {}
    for k in range(k_max + 1):
        for combo in itertools.combinations_with_replacement(range(len(histories)), k):
            Z = np.array([histories[c] for c in combo], dtype=np.uint8).T.reshape(n, k)
            # each column of X is N(0, sigma_a^2 Z Z' + sigma_x^2 I) once A is integrated out
            lam, V = np.linalg.eigh(sigma_a**2 * ((Z @ Z.T).astype(float) + float(intercept)))
            proj = (V.T @ X) ** 2  # (n, d)
            var = lam[:, None] + s2[None, :]  # (n, grid)
            ll = -0.5 * d * np.log(2 * np.pi * var).sum(axis=0) - 0.5 * (proj.sum(axis=1)[:, None] / var).sum(axis=0)
            if k == 2 and not intercept:
                assert ll[200] == pytest.approx(collapsed_log_likelihood(X, Z, math.sqrt(s2[200]), sigma_a))
            logp[lof_key(Z)] = _log_ibp_alpha_integrated(Z, a0, b0, rate, harmonic) + logsumexp(ll + log_w)
    return _normalised(logp)


def planted(n=150, d=8, seed=0, sigma_x=0.25):
    rng = np.random.default_rng(seed)
    Z = np.zeros((n, 3), dtype=np.uint8)
    Z[:, 0] = rng.random(n) < 0.5
    Z[:, 1] = rng.random(n) < 0.3
    Z[:, 2] = rng.random(n) < 0.4
    X, A = simulate_linear_gaussian(Z, d, sigma_x=sigma_x, sigma_a=1.0, random_state=seed + 1)
    return Z, X


def _exact_fixed(X, w, s2x, s2a, alpha, k_max, intercept):
    """Exact posterior of [Z] given every hyperparameter and the cells' weights w, K <= k_max:
    (classes as sorted tuples of column patterns, probabilities, the patterns)."""
    n = X.shape[0]
    pats = [np.array(p, np.uint8) for p in itertools.product([0, 1], repeat=n)
            if any(p) and not (intercept and all(p))]
    keys, logp = [], []
    sw = np.sqrt(w)[:, None]
    for k in range(k_max + 1):
        for combo in itertools.combinations_with_replacement(range(len(pats)), k):
            Z = np.column_stack([pats[c] for c in combo]) if k else np.zeros((n, 0), np.uint8)
            Zf = np.column_stack([np.ones(n), Z]) if intercept else Z.astype(float)
            keys.append(combo)
            logp.append(collapsed_log_likelihood(X * sw, Zf * sw, math.sqrt(s2x), math.sqrt(s2a))
                        + ibp_log_prob(Z, alpha))
    p = np.exp(np.array(logp) - max(logp))
    return keys, p / p.sum(), pats


def _moves_from_exact(kernel, intercept, alpha_used, n_draws=30000, n_moves=10, n_scans=2):
    """Draw classes from the exact posterior, apply ``n_moves`` proposals of ``kernel`` to each
    (columns in a random order); returns (exact, after, accepted per draw, K of each class)."""
    X = np.array([[1.2, 0.3], [1.0, -0.2], [0.1, 1.4], [0.9, 1.1]])
    w = np.array([1.0, 0.7, 1.3, 0.9])  # unequal Student-t weights, as the chains have them
    s2x, s2a, alpha, k_max = 0.3, 1.0, 1.5, 4
    keys, p, pats = _exact_fixed(X, w, s2x, s2a, alpha, k_max, intercept)
    index = {k: j for j, k in enumerate(keys)}
    pat = {q.tobytes(): j for j, q in enumerate(pats)}
    nf = int(intercept)
    rng = np.random.default_rng(0)
    _seed_numba(1)
    after = np.zeros(len(keys))
    accepted = 0
    for b in rng.choice(len(keys), size=n_draws, p=p):
        Z = np.zeros((4, k_max + nf + 1), np.uint8)
        Z[:, 0] = nf
        for t, c in enumerate(rng.permutation(len(keys[b]))):
            Z[:, nf + t] = pats[keys[b][c]]
        K = nf + len(keys[b])
        m = Z.sum(axis=0).astype(np.int64)
        K, acc = kernel(X, Z, m, K, w, s2x, s2a, alpha_used, nf, k_max + nf, n_moves, n_scans)
        accepted += acc
        assert np.array_equal(m[:K], Z[:, :K].sum(axis=0)) and not Z[:, K:].any() and Z[:, nf:K].any(axis=0).all()
        after[index[tuple(sorted(pat[Z[:, k].tobytes()] for k in range(nf, K)))]] += 1
    return p, after / n_draws, accepted / n_draws, np.array([len(k) for k in keys])


def _exact_student_t(X, s2x, sa, nu, k_max, alpha_prior=(1.0, 1.0), s2x_prior=None):
    """P([Z] | X) with the baseline and Student-t noise, 2 cells.

    sigma_a fixed, alpha ~ Gamma(alpha_prior) integrated analytically, the cells' weights
    w_i ~ Gamma(nu / 2, nu / 2) by quadrature on a 2-D log grid; sigma_x^2 fixed at ``s2x``, or
    with ``s2x_prior`` = (shape, rate) integrated against that inverse gamma on a 1-D log grid.
    Given the weights (noise variance s2x / w_i), each column of X is
    N(0, sa^2 (Z Z' + 1 1') + diag(s2x / w)).
    """
    n, d = X.shape
    assert n == 2
    a0, b0 = alpha_prior
    g = np.exp(np.linspace(np.log(1e-3), np.log(40.0), 160))
    w1, w2 = np.meshgrid(g, g, indexing="ij")
    step = np.log(g[1] / g[0])
    log_prior_w = sum(0.5 * nu * np.log(0.5 * nu) - math.lgamma(0.5 * nu) + 0.5 * nu * np.log(w) - 0.5 * nu * w + np.log(step)
                      for w in (w1, w2))  # Gamma density times the Jacobian of the log grid (w dlog w)
    if s2x_prior is None:
        s2_grid, log_prior_s2 = np.array([s2x]), np.zeros(1)
    else:
        ax, bx = s2x_prior
        s2_grid = np.exp(np.linspace(np.log(1e-3), np.log(30.0), 120))
        log_prior_s2 = (ax * np.log(bx) - math.lgamma(ax) - ax * np.log(s2_grid) - bx / s2_grid
                        + np.log(np.log(s2_grid[1] / s2_grid[0])))  # InvGamma density x s2 (log grid)
    pats = [np.array(p, np.uint8) for p in ((1, 0), (0, 1))]  # not empty, not held by both (the baseline)
    harmonic = 1.5
    rate = b0 + harmonic - 1.0 / n
    logp = {}
    for k in range(k_max + 1):
        for combo in itertools.combinations_with_replacement(range(2), k):
            Z = np.array([pats[c] for c in combo], dtype=np.uint8).T.reshape(n, k)
            C = sa**2 * ((Z @ Z.T).astype(float) + 1.0)
            parts = []
            for s2, lp in zip(s2_grid, log_prior_s2):
                e1, e2 = s2 / w1, s2 / w2
                c00, c11, c01 = C[0, 0] + e1, C[1, 1] + e2, C[0, 1]
                det = c00 * c11 - c01**2
                ll = lp + log_prior_w
                for j in range(d):
                    x0, x1 = X[0, j], X[1, j]
                    quad = (x0 * x0 * c11 - 2 * x0 * x1 * c01 + x1 * x1 * c00) / det
                    ll = ll - np.log(2 * np.pi) - 0.5 * np.log(det) - 0.5 * quad
                parts.append(logsumexp(ll))
            logp[lof_key(Z)] = _log_ibp_alpha_integrated(Z, a0, b0, rate, harmonic) + logsumexp(parts)
    return _normalised(logp)


def _ten_chains_match(X, exact, top, **kw):
    """Ten single chains on the 2-cell problems (Student-t noise, baseline, sigma_a = 1, no complement
    moves) against the exact class probabilities ``exact`` of the classes ``top``: a band of 4 standard
    errors of the chains' spread plus 0.002 for the quadrature."""
    freqs = []
    for seed in range(10):
        model = LinearGaussianIBP(n_iter=3000, burn_in=200, thin=1, n_chains=1, sigma_a=1.0, scale=False,
                                  max_features=14, max_new=6, noise_df=4.0, init_features=0, complement_moves=False,
                                  random_state=seed, **kw).fit(X)
        keys = [lof_key(Z) for Z in model.samples_]
        freqs.append([keys.count(q) / len(keys) for q in top])
    freqs = np.array(freqs)
    mean = freqs.mean(axis=0)
    se = freqs.std(axis=0, ddof=1) / np.sqrt(len(freqs))
    assert np.all(se < 0.015), se
    np.testing.assert_array_less(np.abs(mean - np.array([exact[q] for q in top])), 4 * se + 0.002)
