"""Moves on whole features and on the noise scale, run after each row sweep.

* ``_death_or_random_birth`` (``death_moves``): remove a feature, or add one on a uniformly random
  set of cells, a proposal that matches the IBP prior's count of cell sets;
* ``_complement_moves`` (``complement_moves``): replace a feature by its complement;
* ``_noise_scale_draw`` (``noise_scale_moves``): rescale the cells' weights and sigma_x^2 together.

Every move is exact (tested against the enumerated posterior).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import geninvgauss

from ._likelihood import _gram_log_likelihood, _ordered_log_prob


def _death_or_random_birth(Y, Z, m, K, w, v_x, s2a, alpha, n_fixed, kcap, n_moves, rng) -> tuple[int, int]:
    """Death / random-birth Metropolis-Hastings moves of whole features (in place); returns (K, accepted).

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
    n = Y.shape[0]
    sizes = n - 1 if n_fixed else n
    Zk, G, H = _weighted_gram(Y, Z, K, w)
    c_ratio = v_x / s2a
    current = _gram_log_likelihood(G, H, c_ratio, v_x)
    accepted = 0
    for _ in range(n_moves):
        n_feat = K - n_fixed
        if rng.random() < 0.5:
            if n_feat == 0:
                continue
            step = _random_death(Z, m, K, n_fixed, n_feat, Zk, G, H, current, alpha, sizes, c_ratio, v_x, rng)
        else:
            if K >= kcap:
                continue
            step = _random_birth(Y, Z, m, K, w, n_fixed, n_feat, Zk, G, H, current, alpha, sizes, c_ratio, v_x,
                                 rng)
        if step is not None:
            Zk, G, H, current, K = step
            accepted += 1
    return K, accepted


def _random_death(Z, m, K, n_fixed, n_feat, Zk, G, H, current, alpha, sizes, c_ratio, v_x, rng):
    """Propose removing a uniformly chosen feature; if accepted, apply it to Z and m and return the new
    (Zk, G, H, log likelihood, K), else None."""
    j = n_fixed + int(rng.integers(n_feat))
    keep = np.r_[0:j, j + 1:K]
    G2, H2 = G[np.ix_(keep, keep)], H[keep]
    new = _gram_log_likelihood(G2, H2, c_ratio, v_x)
    log_ratio = new - current + math.log(n_feat * m[j] / (alpha * sizes))
    if not math.log(rng.random()) < log_ratio:
        return None
    Z[:, j:K - 1] = Z[:, j + 1:K]
    Z[:, K - 1] = 0
    m[j:K - 1] = m[j + 1:K]
    m[K - 1] = 0
    return np.delete(Zk, j, axis=1), G2, H2, new, K - 1


def _random_birth(Y, Z, m, K, w, n_fixed, n_feat, Zk, G, H, current, alpha, sizes, c_ratio, v_x, rng):
    """Propose a feature on a uniformly random set of cells of uniformly random size, at a uniformly
    random position; if accepted, apply it to Z and m and return the new (Zk, G, H, log likelihood,
    K), else None."""
    n = Y.shape[0]
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
    new = _gram_log_likelihood(G2, H2, c_ratio, v_x)
    log_ratio = new - current - math.log((n_feat + 1) * size / (alpha * sizes))
    if not math.log(rng.random()) < log_ratio:
        return None
    Z[:, j + 1:K + 1] = Z[:, j:K]
    Z[:, j] = col.astype(np.uint8)
    m[j + 1:K + 1] = m[j:K]
    m[j] = size
    return np.insert(Zk, j, col, axis=1), G2, H2, new, K + 1


def _weighted_gram(Y, Z, K, w):
    """(Zk, G, H): the first K columns of Z as floats, G = Zk'W Zk and H = Zk'W Y (W = diag w)."""
    Zk = Z[:, :K].astype(np.float64)
    Zw = Zk * w[:, None]
    return Zk, Zw.T @ Zk, Zw.T @ Y


def _complement_moves(Y, Z, m, K, w, v_x, s2a, alpha, rng) -> int:
    """Metropolis moves replacing each feature k by its complement 1 - z_k (in place); returns the count.

    With the baseline (column 0 of Z, all ones), z_k and 1 - z_k span the same space, so the
    two allocations explain the data almost equally well and differ only through the priors;
    the row sweep cannot move between them (every cell would have to flip at once), so
    chains would stay in the orientation they started with. The proposal is an involution
    (symmetric); the collapsed likelihood is updated from Z'WZ and Z'WY by replacing column
    k: O(N K + N D + K^3 + K^2 D) per proposal. A feature held by every cell is outside the
    sampler's space with the baseline, so is its (empty) complement. (XOR moves with a second,
    random feature as well were tried and are not used: ``docs/latent_features.md``.)
    """
    n = Y.shape[0]
    if K < 2:
        return 0
    Zk, G, H = _weighted_gram(Y, Z, K, w)
    c_ratio = v_x / s2a
    # K is unchanged by the move: the likelihood without its K term (the ratio is the same)
    current = _gram_log_likelihood(G, H, c_ratio, v_x, k_term=False)
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
        new = _gram_log_likelihood(G2, H2, c_ratio, v_x, k_term=False)
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


def _noise_scale_draw(rng, w, s2x: float, nu: float, ax: float, bx: float) -> float:
    """c for the move (w, sigma_x^2) -> (c w, c sigma_x^2) of the Student-t noise; w (N,) > 0.

    Cell i's noise variance is sigma_x^2 / w_i, so the move leaves the likelihood unchanged and
    only the priors (w_i ~ Gamma(nu / 2, nu / 2), sigma_x^2 ~ InvGamma(ax, bx)) weigh c. The
    group move of Liu and Wu (1999) draws c from pi(c w, c sigma_x^2) c^(N + 1) dc / c, i.e.
    c^(N nu / 2 - ax - 1) exp(-c nu sum(w) / 2 - bx / (c sigma_x^2)): a generalised inverse
    Gaussian. Why: the Gibbs steps sigma_x^2 | w and w | sigma_x^2 creep along that direction
    (measured in ``docs/latent_features.md``, "Noise-scale moves").
    """
    a = nu * float(np.sum(w))
    b = 2.0 * bx / s2x
    y = geninvgauss.rvs(0.5 * w.size * nu - ax, math.sqrt(a * b), random_state=rng)
    return math.sqrt(b / a) * float(y)
