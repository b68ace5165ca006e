"""The compiled row sweep: one collapsed Gibbs pass over the rows of Z, A integrated out.

The posterior of A given all rows is N(S h, S) per column with S = (Z'WZ / s2x + I / s2a)^-1
and h = Z'WX / s2x. For each row i it is downdated to the other rows (Sherman-Morrison), the
row's entries are drawn from the Gaussian predictive of X_i, and the row is added back, so a row
costs O(K^2 D). The per-row steps are named compiled helpers; the rank-one quantities
u = S z, q = z'Sz they all need are ``_s_times_z``. The two loops over a row's entries (single-site
Gibbs draws, joint flips of 2-3 entries) stay in the body of ``_sweep_rows``: moved into helpers,
their work vectors become arguments that may alias, and the sweep ran 15-25% slower
(``docs/latent_features.md``, "Row sweep").
"""

from __future__ import annotations

import math

import numba
import numpy as np


# numba's compiled code has only the legacy ``np.random`` functions (one generator per
# thread, seeded here with ``core.spawn_seed(rng)``): hence the NPY002 exemptions below.
@numba.njit(cache=True, nogil=True)
def _seed_numba(seed):
    np.random.seed(seed)  # noqa: NPY002


@numba.njit(cache=True, nogil=True)
def _move_last_column(Z, m, k, K):
    """Overwrite column k of Z and m with the last active one (K - 1), which is cleared."""
    last = K - 1
    for r in range(Z.shape[0]):
        Z[r, k] = Z[r, last]
        Z[r, last] = 0
    m[k] = m[last]
    m[last] = 0


@numba.njit(cache=True, nogil=True)
def _drop_feature(k, K, Z, m, S, h, mu):
    """Remove feature k by moving the last active feature (index K - 1) into its place."""
    _move_last_column(Z, m, k, K)
    last = K - 1
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
def _s_times_z(S, z, u, K):
    """u = S z over the first K entries (in place); returns q = z'Sz."""
    q = 0.0
    for a in range(K):
        acc = 0.0
        for b in range(K):
            acc += S[a, b] * z[b]
        u[a] = acc
        q += z[a] * acc
    return q


@numba.njit(cache=True, nogil=True)
def _posterior_from_scratch(X, Z, K, s2x, s2a, w, S, h):
    """S = (Z'WZ / s2x + I / s2a)^-1 and h = Z'WX / s2x over the first K columns (in place)."""
    N, D = X.shape
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


@numba.njit(cache=True, nogil=True)
def _take_row_out(x, z, K, S, h, u, s2xi):
    """The posterior of A given the other rows: S <- S + u u' / (s2x - z'u), u = S z; h <- h - z x' / s2x."""
    q = _s_times_z(S, z, u, K)
    den = s2xi - q
    for a in range(K):
        for b in range(K):
            S[a, b] += u[a] * u[b] / den
    for a in range(K):
        if z[a] != 0.0:
            for d in range(x.shape[0]):
                h[a, d] -= x[d] / s2xi


@numba.njit(cache=True, nogil=True)
def _put_row_back(x, z, K, S, h, u, s2xi):
    """The row added back: S <- S - u u' / (s2x + z'u), u = S z; h <- h + z x' / s2x."""
    q = _s_times_z(S, z, u, K)
    den = s2xi + q
    for a in range(K):
        for b in range(K):
            S[a, b] -= u[a] * u[b] / den
    for a in range(K):
        if z[a] != 0.0:
            for d in range(x.shape[0]):
                h[a, d] += x[d] / s2xi


@numba.njit(cache=True, nogil=True)
def _posterior_mean(S, h, mu, K):
    """mu = S h over the first K rows (in place)."""
    for a in range(K):
        for d in range(h.shape[1]):
            acc = 0.0
            for b in range(K):
                acc += S[a, b] * h[b, d]
            mu[a, d] = acc


@numba.njit(cache=True, nogil=True)
def _predictive_mean(z, mu, K, pred):
    """pred = z mu (in place): the mean of the row's predictive."""
    for d in range(pred.shape[0]):
        acc = 0.0
        for a in range(K):
            acc += z[a] * mu[a, d]
        pred[d] = acc


@numba.njit(cache=True, nogil=True)
def _drop_own_features(i, K, Z, m, S, h, mu, z, n_fixed):
    """Drop the features held by cell i alone (their loadings are uninformed by the others); returns K."""
    k = K - 1
    while k >= n_fixed:
        if Z[i, k] == 1 and m[k] == 1:
            Z[i, k] = 0
            m[k] = 0
            K = _drop_feature(k, K, Z, m, S, h, mu)
            z[k] = z[K]
            z[K] = 0.0
        k -= 1
    return K


@numba.njit(cache=True, nogil=True)
def _draw_new_count(x, z, mu, K, q, s2xi, s2a, alpha, N, kmax, logp):
    """How many features of its own cell i opens: Poisson(alpha / N) times the predictive with
    that many more loadings of variance s2a, truncated at kmax."""
    D = x.shape[0]
    rr = 0.0
    for d in range(D):
        acc = 0.0
        for a in range(K):
            acc += z[a] * mu[a, d]
        rr += (x[d] - acc) ** 2
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
    return knew


@numba.njit(cache=True, nogil=True)
def _open_features(i, K, knew, Z, m, S, h, mu, z, s2a):
    """Append knew features held by cell i alone (prior loadings: S = s2a I, h = 0) at columns K.."""
    N, D = Z.shape[0], h.shape[1]
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


@numba.njit(cache=True, nogil=True)
def _sweep_rows(X, Z, m, K, s2x, s2a, alpha, max_features, max_new, n_moves, S, h, mu, n_fixed, w):
    """One collapsed Gibbs pass over the rows of Z (in place), A integrated out.

    X (N, D); Z (N, Kcap) uint8 with the first K columns active; m (Kcap,)
    column counts; S (Kcap, Kcap), h (Kcap, D), mu (Kcap, D) work arrays.
    The first ``n_fixed`` columns are held fixed (the intercept: a column of ones
    outside the IBP); they enter the predictive but are never resampled.
    w (N,): each cell's noise precision factor (its noise variance is s2x / w[i];
    all ones for Gaussian noise): Z'Z and Z'X are then weighted by w.
    Returns the new K.
    """
    N, D = X.shape
    # Posterior of A from scratch once per sweep (the variances changed, and
    # this bounds the round-off of the rank-one updates).
    _posterior_from_scratch(X, Z, K, s2x, s2a, w, S, h)
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
        _take_row_out(X[i], z, K, S, h, u, s2xi)
        _posterior_mean(S, h, mu, K)
        # Predictive of X_i: N(z mu, (z S z + s2x) I); keep u = S z, q = z S z, pred = z mu.
        q = _s_times_z(S, z, u, K)
        _predictive_mean(z, mu, K, pred)
        # Single-site Gibbs draws of z_ik for the features other cells hold.
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
        K = _drop_own_features(i, K, Z, m, S, h, mu, z, n_fixed)
        q = _s_times_z(S, z, u, K)
        knew = _draw_new_count(X[i], z, mu, K, q, s2xi, s2a, alpha, N, min(max_new, max_features - K), logp)
        _open_features(i, K, knew, Z, m, S, h, mu, z, s2a)
        K += knew
        _put_row_back(X[i], z, K, S, h, u, s2xi)
        for a in range(K):
            z[a] = 0.0
    return K
