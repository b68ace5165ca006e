"""Gibbs sampler for the linear-Gaussian Indian buffet process latent feature model.

Model (Griffiths and Ghahramani 2011, section 5), for a cells x dims matrix X::

    Z ~ IBP(alpha)                      binary N x K, K unbounded
    A[k, :] ~ N(0, sigma_a^2 I_D)        loadings of feature k
    X = 1 b' + Z A + E,   E[i, d] ~ N(0, sigma_x^2 / w_i)

with a baseline b ~ N(0, sigma_a^2 I_D) shared by all cells (``intercept``),
Student-t noise as a scale mixture w_i ~ Gamma(nu / 2, nu / 2) (``noise_df``
= nu; w = 1 gives Gaussian noise), optionally one noise variance per column
(``noise='gene'``, conjugate loading prior N(0, sigma_a^2 sigma_x[d]^2)), and
conjugate hyperpriors sigma_x^2 ~ InvGamma, sigma_a^2 ~ InvGamma, alpha ~
Gamma. Each cell may carry several overlapping features, unlike a clustering.

The Z step is the collapsed Gibbs sampler (A integrated out) in the
accelerated form of Doshi-Velez and Ghahramani (2009): the Gaussian posterior
of A, N(S h, S) per column with S = (Z'Z / sigma_x^2 + I / sigma_a^2)^-1, is
downdated to "all cells but i" by a rank-one (Sherman-Morrison) step, row i
is resampled from the exact predictive X_i ~ N(z_i mu_-i, (z_i S_-i z_i' +
sigma_x^2) I), and the row is added back, so a row costs O(K^2 D) instead of
the O(N K^2) of recomputing the marginal likelihood:

* z_ik for features other cells also hold: Bernoulli with prior odds
  m_-i,k / (N - m_-i,k) times the predictive ratio;
* Metropolis moves flipping 2 or 3 of the cell's entries at once (a
  symmetric proposal among the features other cells hold), which let a cell
  move between representations that single flips cannot connect, such as
  one feature with loading a + b versus two features with a and b;
* the features held by cell i alone are resampled as one block: their number
  k from Poisson(alpha / N) times the predictive with k more loadings of
  variance sigma_a^2, truncated at ``max_new`` and at the cap on K;
* then per sweep A | Z, X from its Gaussian posterior, and sigma_x^2,
  the cells' weights w, sigma_a^2 and alpha from their conjugate posteriors
  (when not fixed). The baseline is a column of ones in Z that is never
  resampled; the weights enter the row step as the cell's own noise variance
  sigma_x^2 / w_i; per-column noise is swept on the data divided by each
  column's noise standard deviation (homoscedastic with unit noise there);
* with Student-t noise and one noise variance, a group move (Liu and Wu 1999)
  rescaling w and sigma_x^2 together, along which the likelihood is flat
  (``noise_scale_moves``, ``_noise_scale_draw``).

* ``death_moves`` Metropolis-Hastings proposals to remove a feature, or to add one
  on a uniformly random set of cells of a uniformly random size (``_random_birth_death``):
  that proposal matches the IBP prior's count of cell sets, so the acceptance of
  removing feature j (m_j cells, K features) is
  p(X | Z without j) / p(X | Z) x K m_j / (alpha (N - 1)): a feature without support
  in the likelihood goes in a few sweeps, where the row sweep would shed its cells by
  drift alone (a start feature of noise: hundreds of sweeps, a different number in
  each chain).

Optional Metropolis-Hastings moves on whole features (off by default; exact, tested
against the enumerated posterior): split-merge (``split_merge_moves``, Meeds et al.
2007 with the restricted Gibbs proposals of Jain and Neal 2004) and birth-death
(``birth_death_moves``), both with the loadings integrated out (``_split_merge``,
``_birth_death``). On real contrasts they are accepted about once per 1,000-10,000
proposals: the chains' modes differ by re-partitions of several features at once,
which neither move reaches in one step.

The row sweep is compiled with numba; its random numbers come from numba's
generator, seeded with an int drawn from ``random_state`` (``core.spawn_seed``)
at the start of ``fit``, so a fit is reproducible for a given seed.

Optional coarsened posterior (``likelihood_power`` = zeta < 1, Miller and Dunson 2019): the
Gaussian likelihood raised to zeta, which amounts to the cells' weights zeta * w in every Z and A
step plus tempered conjugate updates of sigma_x^2 and w (see the class). Off by default (measured:
no zeta both converges on real contrasts and keeps the planted programmes).

Posterior samples are written in the format of :mod:`scontrast.feature_samples`.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
from scipy.special import gammaln
from scipy.stats import geninvgauss
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from .core import (
    ScontrastError,
    ScontrastWarning,
    check_int,
    check_matrix,
    check_random_state,
    check_real,
    one_blas_thread,
    progress,
    silenced_warnings,
    spawn_seed,
)
from .feature_samples import FeatureSamples, load_samples, pack_samples, save_samples, unpack_samples

__all__ = [
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



# --------------------------------------------------------------------------- compiled row sweep


# numba's compiled code has only the legacy ``np.random`` functions (one generator per
# thread, seeded here with ``core.spawn_seed(rng)``): hence the NPY002 exemptions below.
@numba.njit(cache=True, nogil=True)
def _seed_numba(seed):
    np.random.seed(seed)  # noqa: NPY002


@numba.njit(cache=True, nogil=True)
def _drop_feature(k, K, Z, m, S, h, mu):
    """Remove feature k by moving the last active feature (index K - 1) into its place."""
    N = Z.shape[0]
    last = K - 1
    for r in range(N):
        Z[r, k] = Z[r, last]
        Z[r, last] = 0
    m[k] = m[last]
    m[last] = 0
    for c in range(K):
        S[k, c] = S[last, c]
    for c in range(K):
        S[c, k] = S[c, last]
    S[k, k] = S[last, last]
    for c in range(K):
        S[last, c] = 0.0
        S[c, last] = 0.0
    for d in range(h.shape[1]):
        h[k, d] = h[last, d]
        mu[k, d] = mu[last, d]
        h[last, d] = 0.0
        mu[last, d] = 0.0
    return K - 1


@numba.njit(cache=True, nogil=True)
def _sweep_rows(X, Z, m, K, s2x, s2a, alpha, max_features, max_new, n_moves, S, h, mu, n_fixed, w):
    """One collapsed Gibbs pass over the rows of Z (in place), A integrated out.

    X (N, D); Z (N, Kcap) uint8 with the first K columns active; m (Kcap,)
    column counts; S (Kcap, Kcap), h (Kcap, D), mu (Kcap, D) work arrays.
    The first ``n_fixed`` columns are held fixed (the intercept: a column of ones
    outside the IBP); they enter the predictive but are never resampled.
    The posterior of A given all rows is N(S h, S) per column with
    S = (Z'Z / s2x + I / s2a)^-1 and h = Z'X / s2x; for row i it is
    downdated to the other rows (Sherman-Morrison), the row's entries are
    drawn from the Gaussian predictive of X_i, and the row is added back.
    w (N,): each cell's noise precision factor (its noise variance is s2x / w[i];
    all ones for Gaussian noise): Z'Z and Z'X above are then weighted by w.
    Returns the new K.
    """
    N, D = X.shape
    # Posterior of A from scratch once per sweep (the variances changed, and
    # this bounds the round-off of the rank-one updates).
    P = np.zeros((K, K))
    for r in range(N):
        for a in range(K):
            if Z[r, a]:
                for b in range(K):
                    if Z[r, b]:
                        P[a, b] += w[r]
    for a in range(K):
        for b in range(K):
            P[a, b] /= s2x
        P[a, a] += 1.0 / s2a
    if K > 0:
        Pinv = np.linalg.inv(P)
        for a in range(K):
            for b in range(K):
                S[a, b] = Pinv[a, b]
    for a in range(K):
        for d in range(D):
            h[a, d] = 0.0
    for r in range(N):
        for a in range(K):
            if Z[r, a]:
                for d in range(D):
                    h[a, d] += w[r] * X[r, d] / s2x
    kcap = Z.shape[1]
    z = np.zeros(kcap)
    u = np.zeros(kcap)
    pred = np.zeros(D)
    logp = np.empty(max_new + 1)
    elig = np.empty(kcap, np.int64)
    pick = np.empty(3, np.int64)
    for i in range(N):
        s2xi = s2x / w[i]  # the cell's noise variance (w = 1: Gaussian noise; else its Student-t scale)
        for a in range(K):
            z[a] = Z[i, a]
        # Downdate to the other rows: S <- S + u u' / (s2x - z'u), u = S z; h <- h - z x' / s2x.
        q = 0.0
        for a in range(K):
            acc = 0.0
            for b in range(K):
                acc += S[a, b] * z[b]
            u[a] = acc
            q += z[a] * acc
        den = s2xi - q
        for a in range(K):
            for b in range(K):
                S[a, b] += u[a] * u[b] / den
        for a in range(K):
            if z[a] != 0.0:
                for d in range(D):
                    h[a, d] -= X[i, d] / s2xi
        for a in range(K):
            for d in range(D):
                acc = 0.0
                for b in range(K):
                    acc += S[a, b] * h[b, d]
                mu[a, d] = acc
        # Predictive of X_i: N(z mu, (z S z + s2x) I); keep s = S z, q = z S z, pred = z mu.
        q = 0.0
        for a in range(K):
            acc = 0.0
            for b in range(K):
                acc += S[a, b] * z[b]
            u[a] = acc
            q += z[a] * acc
        for d in range(D):
            acc = 0.0
            for a in range(K):
                acc += z[a] * mu[a, d]
            pred[d] = acc
        for k in range(n_fixed, K):
            zik = Z[i, k]
            mk = m[k] - zik
            if mk == 0:
                continue
            if n_fixed and zik == 0 and mk == N - 1:
                continue  # with the baseline, a feature held by every cell is excluded (it is the baseline)
            skk = S[k, k]
            if zik == 1:
                q1 = q
                q0 = q - 2.0 * u[k] + skk
                sgn = -1.0
            else:
                q0 = q
                q1 = q + 2.0 * u[k] + skk
                sgn = 1.0
            r0 = 0.0
            r1 = 0.0
            for d in range(D):
                if zik == 1:
                    p1 = pred[d]
                    p0 = pred[d] - mu[k, d]
                else:
                    p0 = pred[d]
                    p1 = pred[d] + mu[k, d]
                r0 += (X[i, d] - p0) ** 2
                r1 += (X[i, d] - p1) ** 2
            v0 = q0 + s2xi
            v1 = q1 + s2xi
            dl = -0.5 * D * (math.log(v1) - math.log(v0)) - r1 / (2.0 * v1) + r0 / (2.0 * v0)
            lo = math.log(mk) - math.log(N - mk) + dl
            if lo > 0:
                pz = 1.0 / (1.0 + math.exp(-lo))
            else:
                e = math.exp(lo)
                pz = e / (1.0 + e)
            new = 1 if np.random.random() < pz else 0  # noqa: NPY002
            if new != zik:
                # sgn is the change of z_k when moving away from the current value.
                for a in range(K):
                    u[a] += sgn * S[a, k]
                for d in range(D):
                    pred[d] += sgn * mu[k, d]
                q = q1 if new == 1 else q0
                z[k] = new
                Z[i, k] = new
                m[k] += 1 if new == 1 else -1
        # Joint flips of 2 or 3 entries (Metropolis, symmetric proposal): single
        # flips cannot move a cell between representations that fit equally
        # well, e.g. one feature with loading a + b versus two with a and b.
        n_elig = 0
        for k in range(n_fixed, K):
            if m[k] - Z[i, k] > 0:
                elig[n_elig] = k
                n_elig += 1
        if n_elig >= 2:
            for _ in range(n_moves):
                size = 2 if (n_elig == 2 or np.random.random() < 0.5) else 3  # noqa: NPY002
                # a uniform random subset of the eligible features
                for t in range(size):
                    while True:
                        pick[t] = elig[np.random.randint(n_elig)]  # noqa: NPY002
                        dup = False
                        for t2 in range(t):
                            if pick[t2] == pick[t]:
                                dup = True
                        if not dup:
                            break
                # new q = q + 2 delta'u + delta' S delta, new pred = pred + sum delta_k mu_k
                dq = 0.0
                lprior = 0.0
                for t in range(size):
                    k = pick[t]
                    dk = 1.0 - 2.0 * z[k]
                    dq += 2.0 * dk * u[k]
                    for t2 in range(size):
                        dq += dk * (1.0 - 2.0 * z[pick[t2]]) * S[k, pick[t2]]
                    mk = m[k] - Z[i, k]
                    lprior += dk * (math.log(mk) - math.log(N - mk))
                if n_fixed:
                    full = False
                    for t in range(size):
                        if z[pick[t]] == 0.0 and m[pick[t]] == N - 1:
                            full = True
                    if full:
                        continue  # would make a feature held by every cell (excluded with the baseline)
                r_old = 0.0
                r_new = 0.0
                for d in range(D):
                    pn = pred[d]
                    for t in range(size):
                        pn += (1.0 - 2.0 * z[pick[t]]) * mu[pick[t], d]
                    r_old += (X[i, d] - pred[d]) ** 2
                    r_new += (X[i, d] - pn) ** 2
                v_old = q + s2xi
                v_new = q + dq + s2xi
                lr = (lprior - 0.5 * D * (math.log(v_new) - math.log(v_old))
                      - r_new / (2.0 * v_new) + r_old / (2.0 * v_old))
                if lr >= 0.0 or np.random.random() < math.exp(lr):  # noqa: NPY002
                    for t in range(size):
                        k = pick[t]
                        dk = 1.0 - 2.0 * z[k]
                        for a2 in range(K):
                            u[a2] += dk * S[a2, k]
                        for d in range(D):
                            pred[d] += dk * mu[k, d]
                        z[k] = 1.0 - z[k]
                        Z[i, k] = 1 - Z[i, k]
                        m[k] += 1 if Z[i, k] == 1 else -1
                    q += dq
        # Cell i's own features: their loadings are uninformed by the other
        # cells, so drop them and redraw how many the cell holds.
        k = K - 1
        while k >= n_fixed:
            if Z[i, k] == 1 and m[k] == 1:
                Z[i, k] = 0
                m[k] = 0
                K = _drop_feature(k, K, Z, m, S, h, mu)
                z[k] = z[K]
                z[K] = 0.0
            k -= 1
        q = 0.0
        for a in range(K):
            acc = 0.0
            for b in range(K):
                acc += S[a, b] * z[b]
            u[a] = acc
            q += z[a] * acc
        rr = 0.0
        for d in range(D):
            acc = 0.0
            for a in range(K):
                acc += z[a] * mu[a, d]
            rr += (X[i, d] - acc) ** 2
        kmax = min(max_new, max_features - K)
        lam = alpha / N
        top = -np.inf
        for kk in range(kmax + 1):
            v = q + s2xi + kk * s2a
            logp[kk] = kk * math.log(lam) - math.lgamma(kk + 1.0) - 0.5 * D * math.log(v) - rr / (2.0 * v)
            if logp[kk] > top:
                top = logp[kk]
        total = 0.0
        for kk in range(kmax + 1):
            logp[kk] = math.exp(logp[kk] - top)
            total += logp[kk]
        draw = np.random.random() * total  # noqa: NPY002
        knew = 0
        acc = logp[0]
        while acc < draw and knew < kmax:
            knew += 1
            acc += logp[knew]
        for f in range(knew):
            kf = K + f
            for r in range(N):
                Z[r, kf] = 0
            Z[i, kf] = 1
            m[kf] = 1
            z[kf] = 1.0
            for c in range(K + knew):
                S[kf, c] = 0.0
                S[c, kf] = 0.0
            S[kf, kf] = s2a
            for d in range(D):
                h[kf, d] = 0.0
                mu[kf, d] = 0.0
        K += knew
        # Add row i back: S <- S - u u' / (s2x + z'u), u = S z; h <- h + z x' / s2x.
        q = 0.0
        for a in range(K):
            acc = 0.0
            for b in range(K):
                acc += S[a, b] * z[b]
            u[a] = acc
            q += z[a] * acc
        den = s2xi + q
        for a in range(K):
            for b in range(K):
                S[a, b] -= u[a] * u[b] / den
        for a in range(K):
            if z[a] != 0.0:
                for d in range(D):
                    h[a, d] += X[i, d] / s2xi
        for a in range(K):
            z[a] = 0.0
    return K


# Split-merge moves: the state of the two moving columns a, b given the other columns o, as the
# scalars of their Schur complement (see _split_merge); indices into the array ``st``.
_NA, _NB, _NAB, _TAA, _TBB, _TAB, _QAA, _QBB, _QAB = range(9)


@numba.njit(cache=True, nogil=True)
def _sm_prepare(Y, Z, r, others, ko, Gi, P, zo, e):
    """Cell r's other columns zo (ko,), its residual e = y_r - P' zo (D,); returns (zo' Gi zo, e'e)."""
    beta = 0.0
    for a in range(ko):
        zo[a] = Z[r, others[a]]
    for a in range(ko):
        if zo[a] != 0.0:
            for b in range(ko):
                if zo[b] != 0.0:
                    beta += Gi[a, b]
    eps = 0.0
    for d in range(Y.shape[1]):
        acc = Y[r, d]
        for a in range(ko):
            if zo[a] != 0.0:
                acc -= P[a, d]
        e[d] = acc
        eps += acc * acc
    return beta, eps


@numba.njit(cache=True, nogil=True)
def _sm_cache(Y, Z, cells, n, others, ko, Gi, P, ZO, E, BE, EP):
    """Rows t < n of ZO, E, BE, EP: ``_sm_prepare`` of cell cells[t] (fixed during a move)."""
    for t in range(n):
        BE[t], EP[t] = _sm_prepare(Y, Z, cells[t], others, ko, Gi, P, ZO[t], E[t])


@numba.njit(cache=True, nogil=True)
def _gram(Y, Z, K, w, Gf, Hf):
    """Gf[:K, :K] = Z'WZ and Hf[:K] = Z'WY over the first K columns."""
    N, D = Y.shape
    for a in range(K):
        for b in range(K):
            Gf[a, b] = 0.0
        for d in range(D):
            Hf[a, d] = 0.0
    for r in range(N):
        wr = w[r]
        for a in range(K):
            if Z[r, a]:
                for b in range(K):
                    if Z[r, b]:
                        Gf[a, b] += wr
                for d in range(D):
                    Hf[a, d] += wr * Y[r, d]


@numba.njit(cache=True, nogil=True)
def _others_posterior(Gf, Hf, others, ko, c_ratio):
    """(G_oo^-1, G_oo^-1 H_o) of the other columns, from the full Z'WZ and Z'WY."""
    D = Hf.shape[1]
    if ko == 0:
        return np.zeros((0, 0)), np.zeros((0, D))
    G = np.empty((ko, ko))
    H = np.empty((ko, D))
    for a in range(ko):
        for b in range(ko):
            G[a, b] = Gf[others[a], others[b]]
        G[a, a] += c_ratio
        for d in range(D):
            H[a, d] = Hf[others[a], d]
    Gi = np.linalg.inv(G)
    return Gi, Gi @ H


@numba.njit(cache=True, nogil=True)
def _sm_dots(ua, ub, Ra, Rb, zo, e, ko, out):
    """out = (zo'ua, zo'ub, e'Ra, e'Rb): what adding the prepared cell to a or b needs."""
    al_a = 0.0
    al_b = 0.0
    for a in range(ko):
        if zo[a] != 0.0:
            al_a += ua[a]
            al_b += ub[a]
    rho_a = 0.0
    rho_b = 0.0
    for d in range(e.shape[0]):
        rho_a += Ra[d] * e[d]
        rho_b += Rb[d] * e[d]
    out[0] = al_a
    out[1] = al_b
    out[2] = rho_a
    out[3] = rho_b


@numba.njit(cache=True, nogil=True)
def _sm_scalars(st, new, in_a, in_b, x, dots, beta, eps):
    """new = the scalars after adding the prepared cell with weight x (negative: removing) to a and/or b."""
    for t in range(9):
        new[t] = st[t]
    al_a, al_b, rho_a, rho_b = dots[0], dots[1], dots[2], dots[3]
    if in_a:
        new[_NA] += x
        new[_TAA] += 2.0 * x * al_a + x * x * beta
        new[_QAA] += 2.0 * x * rho_a + x * x * eps
        new[_TAB] += x * al_b
        new[_QAB] += x * rho_b
    if in_b:
        new[_NB] += x
        new[_TBB] += 2.0 * x * al_b + x * x * beta
        new[_QBB] += 2.0 * x * rho_b + x * x * eps
        new[_TAB] += x * al_a
        new[_QAB] += x * rho_a
    if in_a and in_b:
        new[_NAB] += x
        new[_TAB] += x * x * beta
        new[_QAB] += x * x * eps


@numba.njit(cache=True, nogil=True)
def _sm_apply(st, ua, ub, Ra, Rb, Gi, zo, e, ko, in_a, in_b, x, dots, beta, eps):
    """Add the prepared cell with weight x to a and/or b (scalars and the vectors u = Gi g, R)."""
    _sm_scalars(st, st, in_a, in_b, x, dots, beta, eps)
    for a in range(ko):
        if zo[a] != 0.0:
            for b in range(ko):
                g = Gi[b, a] * x
                if in_a:
                    ua[b] += g
                if in_b:
                    ub[b] += g
    for d in range(e.shape[0]):
        if in_a:
            Ra[d] += x * e[d]
        if in_b:
            Rb[d] += x * e[d]


@numba.njit(cache=True, nogil=True)
def _sm_loglik(st, c_ratio, v_x, D):
    """log p(Y | a, b, o) - log p(Y | o) (collapsed), the two columns' part (each with its K term)."""
    saa = st[_NA] + c_ratio - st[_TAA]
    sbb = st[_NB] + c_ratio - st[_TBB]
    sab = st[_NAB] - st[_TAB]
    det = saa * sbb - sab * sab
    return D * math.log(c_ratio) - 0.5 * D * math.log(det) + (
        sbb * st[_QAA] - 2.0 * sab * st[_QAB] + saa * st[_QBB]) / (2.0 * v_x * det)


@numba.njit(cache=True, nogil=True)
def _sm_scan(Y, w, cells, nc, ca, cb, ko, Gi, st, ua, ub, Ra, Rb, counts, N, c_ratio, v_x,
             forced, fa, fb, ZO, E, BE, EP, dots, new, lw):
    """One restricted Gibbs scan of the cells (a alone, b alone or both); returns the log probability of
    the options taken. forced: take the options (fa, fb) instead of drawing them (a merge's reverse)."""
    D = Y.shape[1]
    logq = 0.0
    for t in range(nc):
        wr = w[cells[t]]
        zo = ZO[t]
        e = E[t]
        beta = BE[t]
        eps = EP[t]
        _sm_dots(ua, ub, Ra, Rb, zo, e, ko, dots)
        _sm_apply(st, ua, ub, Ra, Rb, Gi, zo, e, ko, ca[t] == 1, cb[t] == 1, -wr, dots, beta, eps)
        counts[0] -= ca[t]
        counts[1] -= cb[t]
        _sm_dots(ua, ub, Ra, Rb, zo, e, ko, dots)
        top = -np.inf
        for o in range(3):
            in_a = o != 1
            in_b = o != 0
            _sm_scalars(st, new, in_a, in_b, wr, dots, beta, eps)
            ma = counts[0] + (1 if in_a else 0)
            mb = counts[1] + (1 if in_b else 0)
            # the IBP prior of the two columns (the others' part does not change)
            lw[o] = (_sm_loglik(new, c_ratio, v_x, D) + math.lgamma(N - ma + 1.0) + math.lgamma(ma)
                     + math.lgamma(N - mb + 1.0) + math.lgamma(mb))
            if lw[o] > top:
                top = lw[o]
        tot = 0.0
        for o in range(3):
            lw[o] = math.exp(lw[o] - top)
            tot += lw[o]
        if forced:
            opt = 2 if (fa[t] and fb[t]) else (0 if fa[t] else 1)
        else:
            u = np.random.random() * tot  # noqa: NPY002
            opt = 0
            cum = lw[0]
            while cum < u and opt < 2:
                opt += 1
                cum += lw[opt]
        logq += math.log(lw[opt] / tot)
        ca[t] = 0 if opt == 1 else 1
        cb[t] = 0 if opt == 0 else 1
        counts[0] += ca[t]
        counts[1] += cb[t]
        _sm_apply(st, ua, ub, Ra, Rb, Gi, zo, e, ko, ca[t] == 1, cb[t] == 1, wr, dots, beta, eps)
    return logq


@numba.njit(cache=True, nogil=True)
def _split_merge(Y, Z, m, K, w, v_x, s2a, alpha, n_fixed, kcap, n_moves, n_scans):
    """Split-merge Metropolis-Hastings moves on the features (in place); returns (new K, accepted).

    After Meeds, Ghahramani, Neal and Roweis (2007) with the restricted Gibbs proposals of Jain
    and Neal (2004). Pick two cells i != j at random and one feature of each (uniformly among
    their IBP features). The same feature c: propose to split it into a (holding i, not j) and
    b (holding j, not i); two features k1 of i and k2 of j (i not in k2, j not in k1): propose
    their union c (the reverse). The cells of c but i and j start (the launch state) in a
    alone, b alone or both at random, then ``n_scans`` restricted Gibbs scans (in a random
    order, each cell drawn from its conditional among the three given the others, under the
    collapsed likelihood and the IBP prior) lead to a last scan, which is the split proposal;
    for a merge, the probability that the last scan from an independent launch gives the
    current a and b is the reverse proposal's.

    On the multisets of columns (the IBP's left-ordered classes) the choice probabilities,
    the multiplicities of identical columns and the number of each cell's features cancel,
    so a split is accepted with probability
    min(1, alpha (N - m_a)! (m_a - 1)! (N - m_b)! (m_b - 1)! / (N! (N - m_c)! (m_c - 1)!)
    x p(Y | split) / p(Y | merged) / q(last scan)), a merge with the inverse. The loadings
    (and the baseline) are integrated out as in the row sweep: given the other columns o,
    with G = Z'WZ + (v_x / s2a) I, Gi = G_oo^-1 and P = Gi Z_o'WY (fixed during the move),
    log p(Y | Z) = const + |n| D / 2 log(v_x / s2a) - D / 2 log|S| + tr(S^-1 R R') / (2 v_x),
    S = G_nn - G_no Gi G_on and R = Z_n'W(Y - Z_o P) for the moving columns n, updated in
    O(|o| (|o| + D)) when a cell joins or leaves a or b.
    """
    N, D = Y.shape
    c_ratio = v_x / s2a
    acc_count = 0
    others = np.empty(kcap, np.int64)
    fi = np.empty(kcap, np.int64)
    fj = np.empty(kcap, np.int64)
    cells = np.empty(N, np.int64)
    ca = np.zeros(N, np.uint8)
    cb = np.zeros(N, np.uint8)
    fa = np.zeros(N, np.uint8)
    fb = np.zeros(N, np.uint8)
    Ra = np.zeros(D)
    Rb = np.zeros(D)
    ua = np.zeros(kcap)
    ub = np.zeros(kcap)
    st = np.zeros(9)
    new = np.zeros(9)
    dots = np.zeros(4)
    lw = np.empty(3)
    counts = np.zeros(2, np.int64)
    ZO = np.zeros((N, kcap))
    E = np.zeros((N, D))
    BE = np.zeros(N)
    EP = np.zeros(N)
    Gf = np.zeros((kcap, kcap))
    Hf = np.zeros((kcap, D))
    _gram(Y, Z, K, w, Gf, Hf)
    for _ in range(n_moves):
        i = np.random.randint(N)  # noqa: NPY002
        j = np.random.randint(N - 1)  # noqa: NPY002
        if j >= i:
            j += 1
        ni = 0
        nj = 0
        for k in range(n_fixed, K):
            if Z[i, k]:
                fi[ni] = k
                ni += 1
            if Z[j, k]:
                fj[nj] = k
                nj += 1
        if ni == 0 or nj == 0:
            continue
        k1 = fi[np.random.randint(ni)]  # noqa: NPY002
        k2 = fj[np.random.randint(nj)]  # noqa: NPY002
        split = k1 == k2
        if split:
            if K >= kcap:
                continue
        elif Z[i, k2] or Z[j, k1]:
            continue  # not the merge of a split (which puts i in a only, j in b only)
        nc = 0
        for r in range(N):
            if r != i and r != j and (Z[r, k1] or Z[r, k2]):
                cells[nc] = r
                nc += 1
        mc = nc + 2
        if not split and n_fixed and mc == N:
            continue  # the union would be held by every cell: excluded with the baseline
        # the other columns (baseline included): G_oo^-1 and P
        ko = 0
        for k in range(K):
            if k != k1 and k != k2:
                others[ko] = k
                ko += 1
        Gi, P = _others_posterior(Gf, Hf, others, ko, c_ratio)
        for t in range(nc - 1, 0, -1):
            s = np.random.randint(t + 1)  # noqa: NPY002
            tmp = cells[t]
            cells[t] = cells[s]
            cells[s] = tmp
        cells[nc] = i
        cells[nc + 1] = j
        _sm_cache(Y, Z, cells, nc + 2, others, ko, Gi, P, ZO, E, BE, EP)
        # the merged column: c alone (as a, b empty)
        for t in range(9):
            st[t] = 0.0
        for a in range(ko):
            ua[a] = 0.0
            ub[a] = 0.0
        for d in range(D):
            Ra[d] = 0.0
            Rb[d] = 0.0
        for t in range(nc + 2):
            _sm_dots(ua, ub, Ra, Rb, ZO[t], E[t], ko, dots)
            _sm_apply(st, ua, ub, Ra, Rb, Gi, ZO[t], E[t], ko, True, False, w[cells[t]], dots, BE[t],
                      EP[t])
        saa = st[_NA] + c_ratio - st[_TAA]
        ll_merged = 0.5 * D * math.log(c_ratio) - 0.5 * D * math.log(saa) + st[_QAA] / (2.0 * v_x * saa)
        # launch: i in a, j in b, the others at random; then the intermediate scans
        for t in range(9):
            st[t] = 0.0
        for a in range(ko):
            ua[a] = 0.0
            ub[a] = 0.0
        for d in range(D):
            Ra[d] = 0.0
            Rb[d] = 0.0
        counts[0] = 1
        counts[1] = 1
        for t in range(nc + 2):
            r = cells[t]
            if t == nc:
                in_a, in_b = True, False
            elif t == nc + 1:
                in_a, in_b = False, True
            else:
                o = np.random.randint(3)  # noqa: NPY002
                in_a = o != 1
                in_b = o != 0
                ca[t] = 1 if in_a else 0
                cb[t] = 1 if in_b else 0
                counts[0] += ca[t]
                counts[1] += cb[t]
                if not split:
                    fa[t] = Z[r, k1]
                    fb[t] = Z[r, k2]
            _sm_dots(ua, ub, Ra, Rb, ZO[t], E[t], ko, dots)
            _sm_apply(st, ua, ub, Ra, Rb, Gi, ZO[t], E[t], ko, in_a, in_b, w[r], dots, BE[t], EP[t])
        for _s in range(n_scans):
            _sm_scan(Y, w, cells, nc, ca, cb, ko, Gi, st, ua, ub, Ra, Rb, counts, N, c_ratio, v_x,
                     False, fa, fb, ZO, E, BE, EP, dots, new, lw)
        log_q = _sm_scan(Y, w, cells, nc, ca, cb, ko, Gi, st, ua, ub, Ra, Rb, counts, N, c_ratio,
                         v_x, not split, fa, fb, ZO, E, BE, EP, dots, new, lw)
        ll_split = _sm_loglik(st, c_ratio, v_x, D)
        ma = counts[0]
        mb = counts[1]
        prior = (math.log(alpha) + math.lgamma(N - ma + 1.0) + math.lgamma(ma) + math.lgamma(N - mb + 1.0)
                 + math.lgamma(mb) - math.lgamma(N + 1.0) - math.lgamma(N - mc + 1.0) - math.lgamma(mc))
        lr = prior + ll_split - ll_merged - log_q  # log acceptance ratio of the split
        if not split:
            lr = -lr
        if lr >= 0.0 or np.random.random() < math.exp(lr):  # noqa: NPY002
            acc_count += 1
            if split:
                Z[i, K] = 0
                Z[j, k1] = 0
                Z[j, K] = 1
                for t in range(nc):
                    Z[cells[t], k1] = ca[t]
                    Z[cells[t], K] = cb[t]
                m[k1] = ma
                m[K] = mb
                K += 1
            else:
                for t in range(nc):
                    Z[cells[t], k1] = 1
                Z[j, k1] = 1
                m[k1] = mc
                last = K - 1
                for r in range(N):
                    Z[r, k2] = Z[r, last]
                    Z[r, last] = 0
                m[k2] = m[last]
                m[last] = 0
                K -= 1
            _gram(Y, Z, K, w, Gf, Hf)
    return K, acc_count


@numba.njit(cache=True, nogil=True)
def _bd_loglik(st, c_ratio, v_x, D):
    """log p(Y | b, o) - log p(Y | o) (collapsed) for the one moving column b (its K term included)."""
    sbb = st[_NB] + c_ratio - st[_TBB]
    return 0.5 * D * math.log(c_ratio) - 0.5 * D * math.log(sbb) + st[_QBB] / (2.0 * v_x * sbb)


@numba.njit(cache=True, nogil=True)
def _birth_death(Y, Z, m, K, w, v_x, s2a, alpha, n_fixed, kcap, n_moves, n_scans):
    """Birth-death Metropolis-Hastings moves of whole features (in place); returns (new K, accepted).

    With probability 1/2 propose a new feature b: every cell starts (the launch) in b or not at
    random, then ``n_scans`` restricted Gibbs scans over all cells (in a random order, each cell in
    or out of b from the collapsed likelihood given the others) and a last scan, which is the
    proposal (Jain and Neal 2004); else pick one of the K features uniformly and propose to remove
    it (the reverse: the probability that the last scan from an independent launch gives it).
    On the multisets of columns the multiplicities of identical columns cancel, so a birth is
    accepted with probability min(1, alpha (N - m_b)! (m_b - 1)! / N! x p(Y | Z, b) / p(Y | Z)
    / ((K + 1) q(last scan))), a death with the inverse (K + 1 the number of features with b).
    A b held by no cell, or by every cell with the baseline, is rejected. The collapsed
    likelihood of b given the other columns is the Schur complement of ``_split_merge``.
    """
    N, D = Y.shape
    c_ratio = v_x / s2a
    acc_count = 0
    others = np.empty(kcap, np.int64)
    cells = np.empty(N, np.int64)
    ca = np.zeros(N, np.uint8)
    cb = np.zeros(N, np.uint8)
    fb = np.zeros(N, np.uint8)
    Ra = np.zeros(D)
    Rb = np.zeros(D)
    ua = np.zeros(kcap)
    ub = np.zeros(kcap)
    st = np.zeros(9)
    new = np.zeros(9)
    dots = np.zeros(4)
    ZO = np.zeros((N, kcap))
    E = np.zeros((N, D))
    BE = np.zeros(N)
    EP = np.zeros(N)
    Gf = np.zeros((kcap, kcap))
    Hf = np.zeros((kcap, D))
    _gram(Y, Z, K, w, Gf, Hf)
    for _ in range(n_moves):
        birth = np.random.random() < 0.5  # noqa: NPY002
        kf = K - n_fixed  # IBP features now
        if birth:
            if K >= kcap:
                continue
            kd = -1
        else:
            if kf == 0:
                continue
            kd = n_fixed + np.random.randint(kf)  # noqa: NPY002
        ko = 0
        for k in range(K):
            if k != kd:
                others[ko] = k
                ko += 1
        Gi, P = _others_posterior(Gf, Hf, others, ko, c_ratio)
        for r in range(N):
            cells[r] = r
        for t in range(N - 1, 0, -1):
            s = np.random.randint(t + 1)  # noqa: NPY002
            tmp = cells[t]
            cells[t] = cells[s]
            cells[s] = tmp
        _sm_cache(Y, Z, cells, N, others, ko, Gi, P, ZO, E, BE, EP)
        for t in range(9):
            st[t] = 0.0
        for a in range(ko):
            ub[a] = 0.0
        for d in range(D):
            Rb[d] = 0.0
        mb = 0
        for t in range(N):
            r = cells[t]
            ca[t] = 0
            cb[t] = 1 if np.random.random() < 0.5 else 0  # noqa: NPY002
            if not birth:
                fb[t] = Z[r, kd]
            if cb[t]:
                mb += 1
                _sm_dots(ua, ub, Ra, Rb, ZO[t], E[t], ko, dots)
                _sm_apply(st, ua, ub, Ra, Rb, Gi, ZO[t], E[t], ko, False, True, w[r], dots, BE[t], EP[t])
        log_q = 0.0
        for scan in range(n_scans + 1):
            last = scan == n_scans
            for t in range(N):
                wr = w[cells[t]]
                zo = ZO[t]
                e = E[t]
                beta = BE[t]
                eps = EP[t]
                if cb[t]:
                    _sm_dots(ua, ub, Ra, Rb, zo, e, ko, dots)
                    _sm_apply(st, ua, ub, Ra, Rb, Gi, zo, e, ko, False, True, -wr, dots, beta, eps)
                    mb -= 1
                _sm_dots(ua, ub, Ra, Rb, zo, e, ko, dots)
                l_out = _bd_loglik(st, c_ratio, v_x, D)
                _sm_scalars(st, new, False, True, wr, dots, beta, eps)
                l_in = _bd_loglik(new, c_ratio, v_x, D)
                # P(in) = 1 / (1 + exp(l_out - l_in)), computed stably
                dl = l_in - l_out
                if dl > 0:
                    lp_in = -math.log1p(math.exp(-dl))
                    lp_out = -dl - math.log1p(math.exp(-dl))
                else:
                    lp_in = dl - math.log1p(math.exp(dl))
                    lp_out = -math.log1p(math.exp(dl))
                if last and not birth:
                    take = fb[t] == 1
                else:
                    take = np.random.random() < math.exp(lp_in)  # noqa: NPY002
                if last:
                    log_q += lp_in if take else lp_out
                cb[t] = 1 if take else 0
                if take:
                    mb += 1
                    _sm_apply(st, ua, ub, Ra, Rb, Gi, zo, e, ko, False, True, wr, dots, beta, eps)
        if mb == 0 or (n_fixed and mb == N):
            continue  # an empty feature, or one held by every cell (excluded with the baseline)
        lr = (math.log(alpha) + math.lgamma(N - mb + 1.0) + math.lgamma(mb) - math.lgamma(N + 1.0)
              + _bd_loglik(st, c_ratio, v_x, D) - math.log(kf + 1.0 if birth else kf) - log_q)
        if not birth:
            lr = -lr
        if lr >= 0.0 or np.random.random() < math.exp(lr):  # noqa: NPY002
            acc_count += 1
            if birth:
                for t in range(N):
                    Z[cells[t], K] = cb[t]
                m[K] = mb
                K += 1
            else:
                last_k = K - 1
                for r in range(N):
                    Z[r, kd] = Z[r, last_k]
                    Z[r, last_k] = 0
                m[kd] = m[last_k]
                m[last_k] = 0
                K -= 1
            _gram(Y, Z, K, w, Gf, Hf)
    return K, acc_count


def _warm_up() -> None:
    """Compile (or load from numba's cache) the row sweep before the clock and the seed."""
    _sweep_rows(np.zeros((2, 1)), np.zeros((2, 1), np.uint8), np.zeros(1, np.int64), 0, 1.0, 1.0, 1.0, 1, 1, 1,
                np.zeros((1, 1)), np.zeros((1, 1)), np.zeros((1, 1)), 0, np.ones(2))
    _split_merge(np.zeros((2, 1)), np.zeros((2, 2), np.uint8), np.zeros(2, np.int64), 0, np.ones(2), 1.0, 1.0, 1.0,
                 0, 2, 1, 1)
    _birth_death(np.zeros((2, 1)), np.zeros((2, 2), np.uint8), np.zeros(2, np.int64), 0, np.ones(2), 1.0, 1.0, 1.0,
                 0, 2, 1, 1)


# --------------------------------------------------------------------------- IBP helpers


def ibp_log_prob(Z, alpha: float) -> float:
    """log P([Z] | alpha): IBP probability of the left-ordered class of Z.

    Parameters
    ----------
    Z : array-like (N, K), binary; empty columns are ignored
    alpha : float > 0

    Returns
    -------
    float
        ``K log a - sum_h log K_h! - a H_N + sum_k [log (N - m_k)! + log (m_k - 1)! - log N!]``
        (Griffiths and Ghahramani 2011, eq. 14), K_h the number of columns
        with history h.
    """
    Z = np.asarray(Z, dtype=np.uint8)
    n = Z.shape[0]
    Z = Z[:, Z.any(axis=0)]
    k = Z.shape[1]
    harmonic = float(np.sum(1.0 / np.arange(1, n + 1)))
    out = k * math.log(alpha) - alpha * harmonic
    if k:
        counts = np.array(list(Counter(col.tobytes() for col in np.ascontiguousarray(Z.T)).values()))
        out -= float(gammaln(counts + 1.0).sum())
        mk = Z.sum(axis=0).astype(np.float64)
        out += float(np.sum(gammaln(n - mk + 1.0) + gammaln(mk) - gammaln(n + 1.0)))
    return out


def collapsed_log_likelihood(X, Z, sigma_x: float, sigma_a: float) -> float:
    """log p(X | Z, sigma_x, sigma_a) with the loadings A integrated out.

    Griffiths and Ghahramani 2011, eq. 26: with W = Z'Z + (sigma_x / sigma_a)^2 I,
    ``-ND/2 log 2pi - (N-K) D log sigma_x - K D log sigma_a - D/2 log|W|
    - tr(X'X - X'Z W^-1 Z'X) / (2 sigma_x^2)``; equivalently each column of
    X is N(0, sigma_a^2 Z Z' + sigma_x^2 I).

    X (N, D) float, Z (N, K) binary.
    """
    X = np.asarray(X, dtype=np.float64)
    Z = np.asarray(Z, dtype=np.float64)
    n, d = X.shape
    k = Z.shape[1]
    out = -0.5 * n * d * math.log(2 * math.pi) - (n - k) * d * math.log(sigma_x) - k * d * math.log(sigma_a)
    quad = float(np.sum(X * X))
    if k:
        W = Z.T @ Z + (sigma_x / sigma_a) ** 2 * np.eye(k)
        L = np.linalg.cholesky(W)
        ZtX = Z.T @ X
        half = np.linalg.solve(L, ZtX)  # L^-1 Z'X, so that |half|^2 = tr(X'Z W^-1 Z'X)
        out -= d * float(np.sum(np.log(np.diag(L))))
        quad -= float(np.sum(half * half))
    return out - quad / (2 * sigma_x**2)


def sample_ibp(n: int, alpha: float, random_state=None, max_features: int | None = None) -> np.ndarray:
    """Draw Z (n, K) uint8 from the Indian buffet process (the restaurant construction).

    Customer i takes each previous dish k with probability m_k / i and
    Poisson(alpha / i) new dishes; ``max_features`` truncates K.
    """
    rng = check_random_state(random_state)
    cols: list[list[int]] = []
    counts: list[int] = []
    for i in range(1, n + 1):
        for k in range(len(cols)):
            if rng.random() < counts[k] / i:
                cols[k].append(i - 1)
                counts[k] += 1
        for _ in range(rng.poisson(alpha / i)):
            if max_features is not None and len(cols) >= max_features:
                break
            cols.append([i - 1])
            counts.append(1)
    Z = np.zeros((n, len(cols)), dtype=np.uint8)
    for k, rows in enumerate(cols):
        Z[rows, k] = 1
    return Z


def simulate_linear_gaussian(Z, n_dims: int, sigma_x: float = 0.5, sigma_a: float = 1.0,
                             random_state=None) -> tuple[np.ndarray, np.ndarray]:
    """Data from the linear-Gaussian model: X = Z A + noise.

    Returns ``(X (N, n_dims), A (K, n_dims))``.
    """
    rng = check_random_state(random_state)
    Z = np.asarray(Z, dtype=np.float64)
    A = rng.normal(0.0, sigma_a, size=(Z.shape[1], n_dims))
    X = Z @ A + rng.normal(0.0, sigma_x, size=(Z.shape[0], n_dims))
    return X, A


# --------------------------------------------------------------------------- the sampler


def _check_prior(value, name: str) -> tuple[float, float]:
    """A (shape, rate) pair of positive finite numbers: a Gamma or inverse-gamma hyperprior."""
    what = f"{name}: expected a pair (shape, rate) of positive numbers, got {value!r}"
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 2:
        raise ScontrastError(what)
    try:
        shape, rate = (check_real(v, name, 0.0, strict_min=True) for v in value)
    except ScontrastError:
        raise ScontrastError(what) from None
    return shape, rate


def _inv_gamma(rng, shape, rate):
    return 1.0 / rng.gamma(shape, 1.0 / rate)


def _log_inv_gamma(x, shape, rate):
    return shape * math.log(rate) - math.lgamma(shape) - (shape + 1.0) * math.log(x) - rate / x


def _log_gamma_pdf(x, shape, rate):
    return shape * math.log(rate) - math.lgamma(shape) + (shape - 1.0) * math.log(x) - rate * x


def split_rhat(chains) -> float:
    """Split R-hat (Gelman et al., Bayesian Data Analysis 3rd ed., section 11.4) of a scalar trace.

    chains (M, T): M chains of T draws after burn-in, T >= 4. Each chain is cut into
    halves and R-hat = sqrt(var+ / W) over the 2M halves, var+ = (n - 1) / n W + B / n.
    Near 1 when the chains (and their halves) agree; above 1.1 is the usual alarm.
    A trace constant within every half gives 1.0 when all halves agree, inf otherwise.
    """
    x = _split_halves(chains)
    n = x.shape[1]
    means = x.mean(axis=1)
    W = float(x.var(axis=1, ddof=1).mean())
    B = float(n * means.var(ddof=1))
    if W <= 0.0:
        return 1.0 if B <= 0.0 else math.inf
    return math.sqrt(((n - 1) / n * W + B / n) / W)


def effective_sample_size(chains) -> float:
    """Effective sample size of a scalar trace from M chains (M, T), T >= 4.

    The multi-chain estimator of Bayesian Data Analysis (3rd ed., section 11.5) on the
    split chains: autocorrelations rho_t = 1 - (W - mean autocovariance_t) / var+,
    summed over Geyer's initial positive and monotone sequence of pair sums;
    ESS = M T / (1 + 2 sum rho_t). A trace constant within every half gives M T.
    """
    x = _split_halves(chains)
    m, n = x.shape
    W = float(x.var(axis=1, ddof=1).mean())
    var_plus = (n - 1) / n * W + float(x.mean(axis=1).var(ddof=1))
    if var_plus <= 0.0:
        return float(m * n)
    centred = x - x.mean(axis=1, keepdims=True)
    size = 1 << int(2 * n - 1).bit_length()
    f = np.fft.rfft(centred, size, axis=1)
    acov = np.fft.irfft(f * np.conj(f), size, axis=1)[:, :n] / n  # (m, n), lag 0 = biased variance
    rho = 1.0 - (W - acov.mean(axis=0) * n / (n - 1)) / var_plus
    rho[0] = 1.0
    total, prev, t = 0.0, math.inf, 0
    while t + 1 < n:
        pair = rho[t] + rho[t + 1]
        if pair <= 0.0:
            break
        pair = min(pair, prev)  # initial monotone sequence
        total += pair
        prev = pair
        t += 2
    tau = max(2.0 * total - 1.0, 1.0 / math.log10(max(m * n, 10)))
    return float(m * n / tau)


def _split_halves(chains) -> np.ndarray:
    x = np.asarray(chains, dtype=np.float64)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] < 4:
        raise ScontrastError(f"chains: expected (chains, draws) with at least 4 draws, got shape {x.shape}")
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, x.shape[1] - half:]], axis=0)


class LinearGaussianIBP(BaseEstimator):
    """Gibbs sampler for the linear-Gaussian IBP latent feature model, several chains.

    Parameters
    ----------
    n_iter : int
        Sweeps per chain in total (burn-in included).
    burn_in : int
        Sweeps discarded before the first retained sample.
    thin : int
        Keep every ``thin``-th sweep after burn-in.
    n_chains : int
        Independent chains (each from its own seed and start); their
        retained samples are pooled, and the split R-hat and effective sample
        size of the log joint and of K are computed across them.
    alpha : float or None
        IBP concentration; None samples it (Gamma(``alpha_prior``) prior).
    sigma_x : float or None
        Noise standard deviation in the units of X; None samples sigma_x^2
        (inverse-gamma ``sigma_x_prior`` prior, in scaled units, see ``scale``).
    sigma_a : float or None
        Loading standard deviation in the units of X (default 1: one standard
        deviation of a standardised gene, the size of shift a gene programme is
        expected to make; a sampled sigma_a shrinks to the small values of the
        genes a programme leaves alone, which makes features so cheap that the
        posterior fills with features of a few cells); None samples it.
    max_features : int
        Cap on K: no new feature is proposed when K reaches it.
    max_new : int
        Truncation of the number of features a cell may open in one step.
    block_moves : int
        Metropolis proposals per cell and sweep that flip 2 or 3 of its
        entries at once (0 = single-site Gibbs only).
    scale : bool
        Divide X by its overall standard deviation (one number, so the
        geometry is unchanged) before sampling; the hyperpriors then act on
        unit-variance data whatever the units of the embedding.
    intercept : bool
        Add a baseline shared by all cells, X = 1 b' + Z A + E with b ~ N(0,
        sigma_a^2 I) integrated out like the loadings (a column of ones outside
        the IBP, never resampled). Without it, centred data need a feature held
        by (nearly) every cell, which the sampler grows slowly from one cell and
        which means nothing.
    noise : {'shared', 'gene'}
        One noise variance for all columns, or one per column (gene), each with
        the inverse-gamma ``sigma_x_prior``; with 'gene' the loading prior is the
        conjugate A[k, d] ~ N(0, sigma_a^2 sigma_x[d]^2), so ``sigma_a`` is in units
        of each gene's noise. A fixed ``sigma_x`` is shared by all columns.
    noise_df : float or None
        Degrees of freedom of Student-t noise, as a scale mixture: cell i's noise
        variance is sigma_x^2 / w_i, w_i ~ Gamma(noise_df / 2, noise_df / 2) sampled
        with the rest; None = Gaussian noise. Heavy-tailed cells (sparse counts,
        outliers) are then down-weighted instead of opening features of their own.
    init_features : int
        Chains start from ``init_features`` features found by independent
        component analysis of the data (each component's scores cut at their
        two-means threshold), each chain with its own ICA seed; 0 = start without
        features. Surplus features die out in a few sweeps, while growing a
        missing one from a single cell takes hundreds.
    complement_moves : bool
        With ``intercept``: after each sweep, a Metropolis move per feature
        replacing z_k by its complement 1 - z_k (given the baseline both explain
        the data alike; the row sweep cannot move between them).
    noise_scale_moves : bool
        With Student-t noise and one noise variance (``noise='shared'``, ``sigma_x``
        sampled): after each draw of the cells' weights, an exact move rescaling the
        weights and sigma_x^2 together (the likelihood depends only on their ratio), drawn
        from its generalised inverse Gaussian conditional; without it the two creep along
        that direction and the log joint mixes slowly.
    death_moves : int
        Metropolis-Hastings proposals per sweep (from a fifth of the burn-in on) to remove a
        feature or add one whose cells are a uniformly random set of a uniformly random size. That birth proposal matches
        the IBP prior's count of cell sets, so a feature the likelihood does not support (a
        start of noise, or a feature left neutral) is removed in a few sweeps, where the row
        sweep sheds its cells one by one by drift alone (hundreds of sweeps, at a different
        time in each chain); random births are almost never accepted. Exact.
    split_merge_moves : int
        Split-merge Metropolis-Hastings proposals per sweep (0 = none; see
        ``_split_merge``): split a feature into two (its cells re-allocated by
        restricted Gibbs scans under the collapsed likelihood) or merge two into
        their union. Exact (tested against the enumerated posterior) but off by
        default: on real contrasts they are accepted about once per 1,000-10,000
        proposals and did not bring the chains' modes together
        (``benchmarks/results/bench_latent_moves.txt``).
    birth_death_moves : int
        Proposals per sweep to add a whole new feature (drawn by restricted Gibbs
        scans over all cells) or remove one (see ``_birth_death``); exact, off
        by default for the same reason.
    move_scans : int
        Restricted Gibbs scans from a random launch state before the scan that
        makes a split or birth proposal (Jain and Neal 2004).
    likelihood_power : float in (0, 1]
        zeta of the coarsened posterior (Miller and Dunson 2019, "Robust Bayesian
        inference via coarsening"): p(Z, A, ...) p(X | Z, A, ...)^zeta, the Gaussian
        likelihood of X given every latent variable (the cells' Z and Student-t weights
        are per-cell latent variables of the prior, not tempered) raised to zeta; 1 = the
        exact model. Given sigma_x and w, N(x | m, v)^zeta is N(x | m, v / zeta) up to a
        factor free of Z and A, so every Z move (row sweep, new features, block flips,
        complement, split-merge, birth-death) and the draw of A run with the weights
        zeta * w; the conjugate updates are tempered: sigma_x^2 ~ InvGamma(a + zeta N D / 2,
        b + zeta sum_i w_i |r_i|^2 / 2) (per gene: a + (zeta N + K) / 2), w_i ~
        Gamma((nu + zeta D) / 2, (nu + zeta |r_i|^2 / sigma_x^2) / 2); ``log_joint_`` is the
        tempered log joint. zeta < 1 is reached by a ramp zeta^(t / ramp) over the first half
        of the burn-in (from the target at once, the start's features die against the data's
        whole variance taken as noise). Off by default: measured
        (``benchmarks/results/bench_latent_coarsen.txt``, zeta in 1, 0.5, 0.3, 0.15, 0.1), the
        chains agree (split R-hat <= 1.1) on all five real contrasts only at zeta = 0.1, where
        they keep at most one feature (the cell-type split), and the planted programmes of the
        3,000-cell benchmark are then lost (K = 0 at zeta <= 0.15, merged at 0.3; recovered at
        zeta >= 0.5, where real contrasts still disagree).
        ``fangs.feature_loadings`` (the loadings reported per feature) stays the standard,
        untempered conditional mean of A given the estimate.
    alpha_prior, sigma_x_prior, sigma_a_prior : (shape, rate)
        Gamma prior of alpha, inverse-gamma priors of the variances.
    n_jobs : int or None
        Threads running chains at once (-1 or None = one per core, at most
        ``n_chains``); the result does not depend on it.
    random_state : None, int >= 0 or numpy Generator
        Source of every chain's seed (hyperparameter and loading draws, and
        the int seed of the compiled row sweep's generator).

    Attributes
    ----------
    samples_ : list of ndarray (N, K_b) uint8
        Retained posterior samples of Z (no empty columns), chain after chain.
    sample_sweeps_, sample_chains_ : ndarray (B,)
        Sweep index (0-based) and chain of each retained sample.
    log_joint_ : ndarray (n_chains, n_iter)
        log p(X, [Z], hyperparameters) after each sweep, the loadings A
        integrated out (``collapsed_log_likelihood`` + ``ibp_log_prob`` +
        the log priors of the sampled hyperparameters; X in scaled units); with
        ``likelihood_power`` < 1 the tempered one, log of prior x likelihood^zeta.
    n_features_, alpha_, sigma_x_, sigma_a_ : ndarray (n_chains, n_iter)
        Traces (standard deviations in the units of X).
    rhat_log_joint_, rhat_K_ : float
        Split R-hat of the log joint and of K over the sweeps after burn-in
        (NaN with fewer than 4 such sweeps).
    ess_log_joint_, ess_K_ : float
        Their effective sample sizes (all chains, sweeps after burn-in).
    Z_ : ndarray (N, K) uint8 ; A_ : ndarray (K, D) ; intercept_ : ndarray (D,)
        Final state of the first chain (A and the baseline in the units of X;
        the baseline is zero without ``intercept``).
    sigma_x_genes_ : ndarray (D,)
        Posterior mean noise standard deviation of each column after burn-in
        (root of the mean variance, all chains; equal across columns with
        ``noise='shared'``).
    split_merge_accepted_ : ndarray (n_chains,)
        Split-merge proposals accepted by each chain (of ``n_iter * split_merge_moves``).
    birth_death_accepted_, death_accepted_ : ndarray (n_chains,)
        Accepted proposals of ``birth_death_moves`` and of ``death_moves``, per chain.
    scale_ : float
    timings_ : dict
        Seconds spent compiling/warming up and sampling (wall clock, all chains).

    A split R-hat above 1.1 or a retained sample whose K reaches
    ``max_features`` is a ``ScontrastWarning`` from ``fit``.
    """

    def __init__(self, n_iter: int = 1000, burn_in: int = 500, thin: int = 5, n_chains: int = 2,
                 alpha: float | None = None, sigma_x: float | None = None, sigma_a: float | None = 1.0,
                 max_features: int = 30, max_new: int = 3, block_moves: int = 4, scale: bool = True,
                 intercept: bool = True, noise: str = "shared", noise_df: float | None = 4.0, init_features: int = 5,
                 complement_moves: bool = True, noise_scale_moves: bool = True, death_moves: int = 5,
                 split_merge_moves: int = 0, birth_death_moves: int = 0,
                 move_scans: int = 3, likelihood_power: float = 1.0,
                 alpha_prior=(1.0, 1.0), sigma_x_prior=(1.0, 1.0), sigma_a_prior=(1.0, 1.0), n_jobs: int | None = 1,
                 random_state=None):
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.thin = thin
        self.n_chains = n_chains
        self.alpha = alpha
        self.sigma_x = sigma_x
        self.sigma_a = sigma_a
        self.max_features = max_features
        self.max_new = max_new
        self.block_moves = block_moves
        self.scale = scale
        self.intercept = intercept
        self.noise = noise
        self.init_features = init_features
        self.noise_df = noise_df
        self.complement_moves = complement_moves
        self.noise_scale_moves = noise_scale_moves
        self.death_moves = death_moves
        self.split_merge_moves = split_merge_moves
        self.birth_death_moves = birth_death_moves
        self.move_scans = move_scans
        self.likelihood_power = likelihood_power
        self.alpha_prior = alpha_prior
        self.sigma_x_prior = sigma_x_prior
        self.sigma_a_prior = sigma_a_prior
        self.n_jobs = n_jobs
        self.random_state = random_state

    def _check_params(self) -> dict:
        """The hyper-parameters checked (``ScontrastError`` naming the first bad one)."""
        n_iter = check_int(self.n_iter, "n_iter", 1)
        burn_in = check_int(self.burn_in, "burn_in", 0)
        if burn_in >= n_iter:
            raise ScontrastError(f"burn_in: expected fewer than n_iter = {n_iter} sweeps, got {burn_in}")
        out = {"n_iter": n_iter, "burn_in": burn_in, "thin": check_int(self.thin, "thin", 1),
               "n_chains": check_int(self.n_chains, "n_chains", 1),
               "max_features": check_int(self.max_features, "max_features", 1),
               "max_new": check_int(self.max_new, "max_new", 1),
               "block_moves": check_int(self.block_moves, "block_moves", 0),
               "init_features": check_int(self.init_features, "init_features", 0),
               "split_merge_moves": check_int(self.split_merge_moves, "split_merge_moves", 0),
               "birth_death_moves": check_int(self.birth_death_moves, "birth_death_moves", 0),
               "move_scans": check_int(self.move_scans, "move_scans", 0)}
        if not isinstance(self.complement_moves, (bool, np.bool_)):
            raise ScontrastError(f"complement_moves: expected True or False, got {self.complement_moves!r}")
        out["complement_moves"] = bool(self.complement_moves)
        if not isinstance(self.noise_scale_moves, (bool, np.bool_)):
            raise ScontrastError(f"noise_scale_moves: expected True or False, got {self.noise_scale_moves!r}")
        out["noise_scale_moves"] = bool(self.noise_scale_moves)
        out["death_moves"] = check_int(self.death_moves, "death_moves", 0)
        if self.n_jobs is None or self.n_jobs == -1:
            out["n_jobs"] = os.cpu_count() or 1
        else:
            out["n_jobs"] = check_int(self.n_jobs, "n_jobs", 1)
        for name in ("alpha", "sigma_x", "sigma_a", "noise_df"):
            out[name] = check_real(getattr(self, name), name, 0.0, strict_min=True, allow_none=True)
        for name in ("scale", "intercept"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ScontrastError(f"{name}: expected True or False, got {getattr(self, name)!r}")
        out["intercept"] = bool(self.intercept)
        if self.noise not in ("gene", "shared"):
            raise ScontrastError(f"noise: expected 'gene' or 'shared', got {self.noise!r}")
        out["noise"] = self.noise
        for name in ("alpha_prior", "sigma_x_prior", "sigma_a_prior"):
            out[name] = _check_prior(getattr(self, name), name)
        out["likelihood_power"] = check_real(self.likelihood_power, "likelihood_power", 0.0, 1.0, strict_min=True)
        return out

    @one_blas_thread  # the K x K algebra is tiny: BLAS threads only cost time (a lot on busy cores)
    def fit(self, X, y=None):
        """Run the chains on X, shape (N cells, D dims), N >= 2; ``y`` is ignored. Returns self."""
        p = self._check_params()
        X = check_matrix(X, "X", min_rows=2, accept_sparse=False)
        rng = check_random_state(self.random_state)
        scale = float(X.std()) if self.scale else 1.0
        if not scale > 0:
            raise ScontrastError("X: is constant, there is nothing for latent features to explain")
        Xs = np.ascontiguousarray(X / scale)
        seeds = [spawn_seed(rng) for _ in range(p["n_chains"])]
        t0 = time.perf_counter()
        _warm_up()
        t_compile = time.perf_counter() - t0
        t1 = time.perf_counter()
        jobs = min(p["n_jobs"], p["n_chains"])
        if jobs > 1:
            with ThreadPoolExecutor(jobs) as pool:
                chains = list(pool.map(lambda c: _run_chain(Xs, scale, p, seeds[c], c + 1), range(len(seeds))))
        else:
            chains = [_run_chain(Xs, scale, p, s, c + 1) for c, s in enumerate(seeds)]
        t2 = time.perf_counter()

        self.samples_ = [z for c in chains for z in c["samples"]]
        self.sample_sweeps_ = np.concatenate([c["sweeps"] for c in chains]).astype(np.int64)
        self.sample_chains_ = np.concatenate([np.full(len(c["sweeps"]), i, dtype=np.int64)
                                              for i, c in enumerate(chains)])
        self.log_joint_ = np.stack([c["log_joint"] for c in chains])
        self.n_features_ = np.stack([c["K"] for c in chains])
        self.alpha_ = np.stack([c["alpha"] for c in chains])
        self.sigma_x_ = np.stack([c["sigma_x"] for c in chains])
        self.sigma_a_ = np.stack([c["sigma_a"] for c in chains])
        self.Z_ = chains[0]["Z"]
        self.A_ = chains[0]["A"]
        self.intercept_ = chains[0]["intercept"]
        self.sigma_x_genes_ = np.mean([c["sigma_x_genes"] for c in chains], axis=0)
        self.split_merge_accepted_ = np.array([c["split_merge_accepted"] for c in chains], dtype=np.int64)
        self.birth_death_accepted_ = np.array([c["birth_death_accepted"] for c in chains], dtype=np.int64)
        self.death_accepted_ = np.array([c["death_accepted"] for c in chains], dtype=np.int64)
        self.scale_ = scale
        self.timings_ = {"compile": t_compile, "sampling": t2 - t1}
        kept = slice(p["burn_in"], None)
        if p["n_iter"] - p["burn_in"] >= 4:
            self.rhat_log_joint_ = split_rhat(self.log_joint_[:, kept])
            self.rhat_K_ = split_rhat(self.n_features_[:, kept])
            self.ess_log_joint_ = effective_sample_size(self.log_joint_[:, kept])
            self.ess_K_ = effective_sample_size(self.n_features_[:, kept])
        else:
            self.rhat_log_joint_ = self.rhat_K_ = self.ess_log_joint_ = self.ess_K_ = float("nan")
        self._warn(p)
        return self

    def _warn(self, p) -> None:
        for name, value in (("log joint", self.rhat_log_joint_), ("K", self.rhat_K_)):
            if value > 1.1:
                warnings.warn(f"split R-hat of the {name} is {value:.3f} > 1.1 over "
                              f"{p['n_chains']} chains: the chains disagree (not converged, or stuck in different modes: "
                              "compare the chains in the trace figure; more sweeps or fewer genes may help)",
                              ScontrastWarning, stacklevel=3)
        k_max = max((s.shape[1] for s in self.samples_), default=0)
        if k_max >= p["max_features"]:
            warnings.warn(f"posterior samples reach the cap max_features = {p['max_features']} "
                          "features: K is truncated (raise max_features or explain a smaller, standardised matrix)",
                          ScontrastWarning, stacklevel=3)

    def traces(self) -> dict[str, np.ndarray]:
        """The traces, keyed as in the samples file: (n_chains, n_iter) per sweep; ``sweeps``, ``chains`` (B,)."""
        check_is_fitted(self)
        return {"log_joint": self.log_joint_, "K": self.n_features_, "alpha": self.alpha_,
                "sigma_x": self.sigma_x_, "sigma_a": self.sigma_a_, "sweeps": self.sample_sweeps_,
                "chains": self.sample_chains_}

    def diagnostics(self) -> dict[str, float]:
        """Split R-hat and effective sample size of the log joint and of K (sweeps after burn-in)."""
        check_is_fitted(self)
        return {"rhat_log_joint": float(self.rhat_log_joint_), "rhat_K": float(self.rhat_K_),
                "ess_log_joint": float(self.ess_log_joint_), "ess_K": float(self.ess_K_)}


def _random_birth_death(Y, Z, m, K, w, v_x, s2a, alpha, n_fixed, kcap, n_moves, rng) -> tuple[int, int]:
    """Birth-death Metropolis-Hastings moves of whole features (in place); returns (K, accepted).

    Y (N, D), Z (N, >= kcap) with K columns in use, the first n_fixed the baseline; w (N,) the
    cells' weights, v_x the noise variance, s2a the loading variance. Each proposal is, with
    probability 1/2, the death of a feature chosen uniformly, else the birth of a feature on a
    uniformly random set of cells of size uniform in 1..S (S = N - 1 with the baseline, whose
    support excludes a feature of every cell; else N), inserted at a uniformly random position.
    With the ordered-matrix IBP prior alpha^K / K! prod_k (N - m_k)! (m_k - 1)! / N! the count
    C(N, m) of cell sets cancels, and a death is accepted with probability
    min(1, p(Y | Z without j) / p(Y | Z) x K m_j / (alpha S)), a birth with the inverse ratio.
    The likelihood has the loadings integrated out (rows weighted by w, as in the row sweep).
    """
    n, d = Y.shape
    sizes = n - 1 if n_fixed else n
    Zk = Z[:, :K].astype(np.float64)
    Zw = Zk * w[:, None]
    G = Zw.T @ Zk
    H = Zw.T @ Y
    c_ratio = v_x / s2a

    def loglik(G, H):
        k = G.shape[0]
        if k == 0:
            return 0.0
        L = np.linalg.cholesky(G + c_ratio * np.eye(k))
        half = np.linalg.solve(L, H)
        return 0.5 * d * k * math.log(c_ratio) - d * float(np.sum(np.log(np.diag(L)))) \
            + float(np.sum(half * half)) / (2.0 * v_x)

    current = loglik(G, H)
    accepted = 0
    for _ in range(n_moves):
        n_feat = K - n_fixed
        if rng.random() < 0.5:
            if n_feat == 0:
                continue
            j = n_fixed + int(rng.integers(n_feat))
            keep = np.r_[0:j, j + 1:K]
            G2, H2 = G[np.ix_(keep, keep)], H[keep]
            new = loglik(G2, H2)
            log_ratio = new - current + math.log(n_feat * m[j] / (alpha * sizes))
            if math.log(rng.random()) < log_ratio:
                Z[:, j:K - 1] = Z[:, j + 1:K]
                Z[:, K - 1] = 0
                m[j:K - 1] = m[j + 1:K]
                m[K - 1] = 0
                Zk = np.delete(Zk, j, axis=1)
                G, H, current, K = G2, H2, new, K - 1
                accepted += 1
        else:
            if K >= kcap:
                continue
            size = int(rng.integers(1, sizes + 1))
            col = np.zeros(n)
            col[rng.choice(n, size=size, replace=False)] = 1.0
            j = n_fixed + int(rng.integers(n_feat + 1))
            cw = col * w
            g = Zk.T @ cw
            order = np.r_[0:j, K, j:K]  # the new column at position j
            G2 = np.empty((K + 1, K + 1))
            G2[:K, :K] = G
            G2[K, :K] = g
            G2[:K, K] = g
            G2[K, K] = float(cw.sum())
            G2 = G2[np.ix_(order, order)]
            H2 = np.vstack([H, cw @ Y])[order]
            new = loglik(G2, H2)
            log_ratio = new - current - math.log((n_feat + 1) * size / (alpha * sizes))
            if math.log(rng.random()) < log_ratio:
                Z[:, j + 1:K + 1] = Z[:, j:K]
                Z[:, j] = col.astype(np.uint8)
                m[j + 1:K + 1] = m[j:K]
                m[j] = size
                Zk = np.insert(Zk, j, col, axis=1)
                G, H, current, K = G2, H2, new, K + 1
                accepted += 1
    return K, accepted


def _noise_scale_draw(rng, w, s2x: float, nu: float, ax: float, bx: float) -> float:
    """c for the move (w, sigma_x^2) -> (c w, c sigma_x^2) of the Student-t noise; w (N,) > 0.

    Cell i's noise variance is sigma_x^2 / w_i, so the move leaves the likelihood unchanged and
    only the priors (w_i ~ Gamma(nu / 2, nu / 2), sigma_x^2 ~ InvGamma(ax, bx)) weigh c. The
    group move of Liu and Wu (1999) draws c from pi(c w, c sigma_x^2) c^(N + 1) dc / c, i.e.
    c^(N nu / 2 - ax - 1) exp(-c nu sum(w) / 2 - bx / (c sigma_x^2)): a generalised inverse
    Gaussian. Why: the Gibbs steps sigma_x^2 | w and w | sigma_x^2 creep along that direction
    (effective sample size of sigma_x 7 in 1,000 sweeps on 3,000 planted cells).
    """
    a = nu * float(np.sum(w))
    b = 2.0 * bx / s2x
    y = geninvgauss.rvs(0.5 * w.size * nu - ax, math.sqrt(a * b), random_state=rng)
    return math.sqrt(b / a) * float(y)


def _complement_moves(Y, Z, m, K, w, v_x, s2a, alpha, rng) -> int:
    """Metropolis moves replacing each feature k by its complement 1 - z_k (in place); returns the count.

    With the baseline (column 0 of Z, all ones), z_k and 1 - z_k span the same space, so the
    two allocations explain the data almost equally well and differ only through the priors;
    the row sweep cannot move between them (every cell would have to flip at once), so
    chains would stay in the orientation they started with. The proposal is an involution
    (symmetric); the collapsed likelihood is updated from Z'WZ and Z'WY by replacing column
    k: O(N K + N D + K^3 + K^2 D) per proposal. A feature held by every cell is outside the
    sampler's space with the baseline, so is its (empty) complement.
    (Measured: XOR moves with a second, random feature as well, which relate disjoint or
    nested features, made chains stick more often on planted data; they are not used.)
    """
    n, d = Y.shape
    if K < 2:
        return 0
    Zk = Z[:, :K].astype(np.float64)
    Zw = Zk * w[:, None]
    G = Zw.T @ Zk
    H = Zw.T @ Y
    eye = np.eye(K)
    c_ratio = v_x / s2a

    def loglik(G, H):
        L = np.linalg.cholesky(G + c_ratio * eye)
        half = np.linalg.solve(L, H)
        return -d * float(np.sum(np.log(np.diag(L)))) + float(np.sum(half * half)) / (2.0 * v_x)

    current = loglik(G, H)
    prior = _ordered_log_prob(Z[:, 1:K], alpha)
    accepted = 0
    for k in range(1, K):
        col = 1 - Z[:, k]
        mc = int(col.sum())
        if mc == 0 or mc == n:
            continue
        cf = col.astype(np.float64)
        cw = cf * w
        g = Zk.T @ cw
        g[k] = float(cw.sum())
        G2 = G.copy()
        G2[k, :] = g
        G2[:, k] = g
        H2 = H.copy()
        H2[k] = cw @ Y
        new = loglik(G2, H2)
        old = Z[:, k].copy()
        Z[:, k] = col
        prior2 = _ordered_log_prob(Z[:, 1:K], alpha)
        if math.log(rng.random()) < new + prior2 - current - prior:
            G, H, current, prior = G2, H2, new, prior2
            Zk[:, k] = cf
            m[k] = mc
            accepted += 1
        else:
            Z[:, k] = old
    return accepted


def _ordered_log_prob(Z, alpha: float) -> float:
    """log P(Z | alpha) of one ordered matrix (the sampler's state): log P([Z]) + sum_h log K_h!.

    A class [Z] holds K! / prod_h K_h! orderings of its columns, equally likely, so a Metropolis
    move between ordered matrices with the same K needs this ratio, not that of P([Z]): with
    identical columns (K_h > 1) the two differ (e.g. two singletons of the same cell, whose
    complement move makes two distinct columns).
    """
    Z = np.asarray(Z, dtype=np.uint8)
    Z = Z[:, Z.any(axis=0)]
    out = ibp_log_prob(Z, alpha)
    if Z.shape[1]:
        counts = np.array(list(Counter(col.tobytes() for col in np.ascontiguousarray(Z.T)).values()))
        out += float(gammaln(counts + 1.0).sum())
    return out


def _start_features(X, Z, m, K, n_start, seed) -> int:
    """Fill columns K.. of Z with a data-driven start (in place); returns the new K.

    Binary sources mixed linearly are non-Gaussian, so independent component analysis
    (scikit-learn's FastICA, ``n_start`` components) separates overlapping programmes
    that k-means clusters would keep as combinations (a cluster of the cells carrying
    two programmes); each component's scores are cut at their two-means threshold and
    the smaller side is a starting feature. Features of noise components are dropped by
    the death moves (``death_moves``).
    """
    from sklearn.decomposition import FastICA

    n = X.shape[0]
    # FastICA's convergence warnings say nothing about the result (this is only a start); the
    # chains run in threads, hence the thread-safe silencer
    with silenced_warnings():
        S = FastICA(n_start, random_state=seed, max_iter=400).fit_transform(X)
    for j in range(S.shape[1]):
        s = S[:, j]
        t = float(np.median(s))
        for _ in range(50):
            hi = s > t
            if hi.all() or not hi.any():
                break
            t_new = 0.5 * (float(s[hi].mean()) + float(s[~hi].mean()))
            if t_new == t:
                break
            t = t_new
        col = s > t
        if col.sum() > n / 2:
            col = ~col
        if 0 < col.sum() < n:
            Z[:, K] = col
            m[K] = int(col.sum())
            K += 1
    return K


def _run_chain(Xs, scale, p, seed, chain: int = 1) -> dict:
    """One chain on the scaled data; ``seed`` seeds its Generator (ICA start, draws) and numba's stream.

    numba's generator is per thread: it is seeded here, in the thread that runs the chain.
    With ``intercept`` the first column of the sampler's Z is all ones (outside the IBP,
    never resampled); with per-gene noise the rows are swept on the data divided by each
    gene's current noise standard deviation (the conjugate prior A[k, d] ~ N(0, s2a s2x[d])
    makes the whitened problem the homoscedastic one with unit noise).
    """
    rng = np.random.default_rng(seed)
    _seed_numba(spawn_seed(rng))
    n_iter, burn_in, thin = p["n_iter"], p["burn_in"], p["thin"]
    n, d = Xs.shape
    ax, bx = p["sigma_x_prior"]
    aa, ba = p["sigma_a_prior"]
    a_alpha, b_alpha = p["alpha_prior"]
    fixed_x = None if p["sigma_x"] is None else (p["sigma_x"] / scale) ** 2
    per_gene = p["noise"] == "gene" and fixed_x is None
    # per-gene noise: sigma_a is relative to each gene's noise, so it is not rescaled
    fixed_a = None if p["sigma_a"] is None else (p["sigma_a"] ** 2 if per_gene else (p["sigma_a"] / scale) ** 2)
    sample_alpha = p["alpha"] is None
    alpha = 1.0 if sample_alpha else p["alpha"]
    # Start at the model without features (noise = the data's variance, 1 after scaling): a
    # smaller start makes every cell open features at once and the chain must then shed them.
    if per_gene:
        s2x = np.maximum(np.mean(Xs * Xs, axis=0), 1e-12)
    else:
        s2x = np.full(d, float(np.mean(Xs * Xs)) if fixed_x is None else fixed_x)
    s2a = 1.0 if fixed_a is None else fixed_a
    n_fixed = 1 if p["intercept"] else 0
    kcap = p["max_features"] + n_fixed
    harmonic = float(np.sum(1.0 / np.arange(1, n + 1)))
    # With the baseline, features held by every cell are excluded: the IBP conditioned on
    # none (their number is Poisson(alpha / N)), so P(Z | alpha) gains a factor exp(alpha / N).
    harmonic_eff = harmonic - (1.0 / n if n_fixed else 0.0)

    Z = np.zeros((n, kcap), dtype=np.uint8)
    A = np.zeros((kcap, d))
    m = np.zeros(kcap, dtype=np.int64)
    if n_fixed:
        Z[:, 0] = 1
        m[0] = n
    K = n_fixed
    n_start = min(p["init_features"], p["max_features"], n - 1)
    if n_start > 0:
        # Start from features found by ICA (see _start_features): pruning surplus features
        # takes a few sweeps, growing a missing one from a single cell hundreds.
        K = _start_features(Xs / np.sqrt(s2x), Z, m, K, n_start, spawn_seed(rng))
    work_s = np.zeros((kcap, kcap))
    work_h = np.zeros((kcap, d))
    work_mu = np.zeros((kcap, d))
    log_joint = np.empty(n_iter)
    trace_k = np.empty(n_iter, dtype=np.int64)
    trace_alpha = np.empty(n_iter)
    trace_sx = np.empty(n_iter)
    trace_sa = np.empty(n_iter)
    sum_s2x = np.zeros(d)
    samples, sweeps = [], []
    nu = p["noise_df"]
    w = np.ones(n)
    # Coarsened posterior (likelihood^zeta, Miller and Dunson 2019): given sigma_x and w, the
    # Gaussian likelihood^zeta is, up to a factor free of Z and A, the Gaussian with the cells'
    # weights zeta * w, so every Z and A step runs on w_eff = zeta * w (w itself when zeta = 1).
    # zeta < 1 is reached by a ramp, zeta_target^(t / ramp) over the first half of the burn-in: started
    # at the target, the features of the start were judged against the data's whole variance taken as
    # noise (divided by zeta) and died, and the chains sat in the mode without features.
    zeta_target = p["likelihood_power"]
    ramp = burn_in // 2
    sm_accepted = 0
    bd_accepted = 0
    death_accepted = 0
    for it in progress(range(n_iter), desc=f"latent_features: sweeps of chain {chain}",
                       logger="scontrast.latent_features"):
        zeta = zeta_target if zeta_target == 1.0 or it >= ramp else zeta_target ** (it / ramp)
        w_eff = w if zeta == 1.0 else zeta * w
        if per_gene:
            Y = np.ascontiguousarray(Xs / np.sqrt(s2x))
            v_x = 1.0
        else:
            Y = Xs
            v_x = float(s2x[0])
        K = int(_sweep_rows(Y, Z, m, K, v_x, float(s2a), float(alpha), kcap, p["max_new"],
                            p["block_moves"], work_s, work_h, work_mu, n_fixed, w_eff))
        if p["split_merge_moves"]:
            K, acc = _split_merge(Y, Z, m, K, w_eff, v_x, float(s2a), float(alpha), n_fixed, kcap, p["split_merge_moves"],
                                  p["move_scans"])
            sm_accepted += acc
        if p["birth_death_moves"]:
            K, acc = _birth_death(Y, Z, m, K, w_eff, v_x, float(s2a), float(alpha), n_fixed, kcap, p["birth_death_moves"],
                                  p["move_scans"])
            bd_accepted += acc
        if n_fixed and p["complement_moves"]:
            _complement_moves(Y, Z, m, K, w_eff, v_x, float(s2a), float(alpha), rng)
        # from a fifth of the burn-in on: in the first sweeps sigma_x is still near the data's variance
        # (the start), every feature looks weak, and a real one could go (measured on 80 planted cells: one
        # chain of 6 seeds lost one and settled 40 nats lower for good)
        if p["death_moves"] and it >= burn_in // 5:
            K, acc = _random_birth_death(Y, Z, m, K, w_eff, v_x, float(s2a), float(alpha), n_fixed, kcap,
                                         p["death_moves"], rng)
            death_accepted += acc
        Zk = Z[:, :K].astype(np.float64)
        Zw = Zk * w_eff[:, None]
        if K:
            # A | Z, X: each column N(mean, prec^-1), prec = Z'WZ / v_x + I / s2a (whitened units if per gene).
            prec = Zw.T @ Zk / v_x + np.eye(K) / s2a
            L = np.linalg.cholesky(prec)
            mean = np.linalg.solve(prec, Zw.T @ Y / v_x)
            A[:K] = mean + np.linalg.solve(L.T, rng.standard_normal((K, d)))
        R = Y - Zk @ A[:K]
        if per_gene:
            # s2x[d] | A, Z, X: inverse gamma; the loadings' prior N(0, s2a s2x[d]) adds K terms
            rss_w = w_eff @ (R * R) + np.sum(A[:K] ** 2, axis=0) / s2a  # in whitened units
            # (coarsened: the n cells count zeta * n, the K loadings' prior is not tempered)
            new = 1.0 / rng.gamma(ax + 0.5 * (zeta * n + K), 1.0 / (bx + 0.5 * rss_w * s2x))
            ratio = np.sqrt(s2x / new)
            A[:K] *= ratio  # the same loadings, whitened by the new noise (for s2a | A)
            R *= ratio
            s2x = new
        elif fixed_x is None:
            # coarsened: likelihood^zeta is an InvGamma kernel of shape zeta n d / 2, rate zeta RSS_w / 2
            s2x[:] = _inv_gamma(rng, ax + 0.5 * zeta * n * d, bx + 0.5 * float(w_eff @ np.sum(R * R, axis=1)))
        if nu is not None:
            # Student-t noise as a scale mixture: w[i] | rest ~ Gamma((nu + D) / 2, (nu + r_i / v) / 2)
            # (coarsened: Gamma((nu + zeta D) / 2, (nu + zeta r_i / v) / 2), the prior of w not tempered)
            r = np.sum(R * R, axis=1) / (1.0 if per_gene else float(s2x[0]))
            w = rng.gamma(0.5 * (nu + zeta * d), 1.0 / (0.5 * (nu + zeta * r)))
            if p["noise_scale_moves"] and fixed_x is None and not per_gene:
                c = _noise_scale_draw(rng, w, float(s2x[0]), nu, ax, bx)
                w *= c
                s2x *= c
            w_eff = w if zeta == 1.0 else zeta * w
        ssa = float(np.sum(A[:K] ** 2))
        if fixed_a is None:
            s2a = _inv_gamma(rng, aa + 0.5 * K * d, ba + 0.5 * ssa)
        if sample_alpha:
            alpha = rng.gamma(a_alpha + K - n_fixed, 1.0 / (b_alpha + harmonic_eff))
        # A integrated out, so that values are comparable across K; the cells' weights w
        # enter as rows scaled by sqrt(w) (and the Jacobian D/2 sum log w).
        sw = np.sqrt(w_eff)[:, None]
        if per_gene:
            sx = np.sqrt(s2x)
            lj = (collapsed_log_likelihood(Xs / sx * sw, Zk * sw, 1.0, math.sqrt(s2a)) - n * float(np.sum(np.log(sx)))
                  + float(np.sum(ax * math.log(bx) - math.lgamma(ax) - (ax + 1.0) * np.log(s2x) - bx / s2x)))
        else:
            lj = collapsed_log_likelihood(Xs * sw, Zk * sw, math.sqrt(s2x[0]), math.sqrt(s2a))
            if fixed_x is None:
                lj += _log_inv_gamma(float(s2x[0]), ax, bx)
        if zeta != 1.0:
            # coarsened: log of prod_(i,d) N(x | m, v)^zeta / N(x | m, v / zeta), v = s2x[d] / w_i (free of Z
            # and A); the Jacobian of the rows scaled by sqrt(zeta w) cancels its -N D / 2 log zeta
            lj += 0.5 * (1.0 - zeta) * (n * d * math.log(2.0 * math.pi) + n * float(np.sum(np.log(s2x)))
                                        - d * float(np.sum(np.log(w))))
        if nu is not None:
            lj += 0.5 * d * float(np.sum(np.log(w))) + float(np.sum(
                0.5 * nu * math.log(0.5 * nu) - math.lgamma(0.5 * nu) + (0.5 * nu - 1.0) * np.log(w) - 0.5 * nu * w))
        lj += ibp_log_prob(Z[:, n_fixed:K], alpha) + (alpha / n if n_fixed else 0.0)
        if fixed_a is None:
            lj += _log_inv_gamma(s2a, aa, ba)
        if sample_alpha:
            lj += _log_gamma_pdf(alpha, a_alpha, b_alpha)
        log_joint[it] = lj
        trace_k[it] = K - n_fixed
        trace_alpha[it] = alpha
        trace_sx[it] = math.sqrt(float(np.mean(s2x))) * scale
        trace_sa[it] = math.sqrt(s2a) * (1.0 if per_gene else scale)
        if it >= burn_in:
            sum_s2x += s2x
            if (it - burn_in) % thin == 0:
                samples.append(Z[:, n_fixed:K].copy())
                sweeps.append(it)
    # loadings in the units of X (whitened loadings times each gene's noise sd)
    unit = np.sqrt(s2x) * scale if per_gene else scale
    A_out = A[:K] * unit
    return {"samples": samples, "sweeps": np.asarray(sweeps, dtype=np.int64), "log_joint": log_joint,
            "K": trace_k, "alpha": trace_alpha, "sigma_x": trace_sx, "sigma_a": trace_sa,
            "sigma_x_genes": np.sqrt(sum_s2x / max(n_iter - burn_in, 1)) * scale,
            "Z": Z[:, n_fixed:K].copy(), "A": A_out[n_fixed:].copy(), "split_merge_accepted": sm_accepted,
            "birth_death_accepted": bd_accepted, "death_accepted": death_accepted,
            "intercept": A_out[0].copy() if n_fixed else np.zeros(d)}
