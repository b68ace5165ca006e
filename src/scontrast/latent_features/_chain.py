"""One chain of the sampler: its settings (a frozen dataclass), its start, and its sweeps.

``_run_chain`` runs a ``_Chain``: each sweep is the Z moves (row sweep, then the optional
whole-feature moves), the draw of the loadings A, of the noise (sigma_x^2 and the cells'
Student-t weights), of sigma_a^2 and alpha, and the log joint of the new state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core import progress, silenced_warnings, spawn_seed
from ._extend import extend
from ._likelihood import _log_gamma_pdf, _log_inv_gamma, collapsed_log_likelihood, ibp_log_prob
from ._moves import _complement_moves, _death_or_random_birth, _noise_scale_draw
from ._row_sweep import _seed_numba, _sweep_rows

_LOGGER = "scontrast.latent_features"
#: Gibbs scans drawing the features of a cell outside the chains' subsample per kept sample (``_extend``;
#: each cell starts from its previous draw), and at its first draw
OTHER_SCANS, OTHER_FIRST_SCANS = 3, 20


@dataclass(frozen=True)
class _ChainSettings:
    """The estimator's hyper-parameters, checked and resolved once (``LinearGaussianIBP._settings``)."""

    n_iter: int
    burn_in: int
    thin: int
    n_chains: int
    max_features: int
    max_new: int
    block_moves: int
    init_features: int
    complement_moves: bool
    noise_scale_moves: bool
    death_moves: int
    n_jobs: int
    alpha: float | None
    sigma_x: float | None
    sigma_a: float | None
    noise_df: float | None
    intercept: bool
    noise: str
    alpha_prior: tuple[float, float]
    sigma_x_prior: tuple[float, float]
    sigma_a_prior: tuple[float, float]


def _warm_up() -> None:
    """Compile (or load from numba's cache) the compiled kernels before the clock and the seed."""
    _sweep_rows(np.zeros((2, 1)), np.zeros((2, 1), np.uint8), np.zeros(1, np.int64), 0, 1.0, 1.0, 1.0, 1, 1, 1,
                np.zeros((1, 1)), np.zeros((1, 1)), np.zeros((1, 1)), 0, np.ones(2))


def _inv_gamma(rng, shape, rate):
    return 1.0 / rng.gamma(shape, 1.0 / rate)


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


def _run_chain(Xs, scale, p: _ChainSettings, seed, chain: int = 1, others=None) -> dict:
    """One chain on the scaled data; ``seed`` seeds its Generator (ICA start, draws) and numba's stream.

    numba's generator is per thread: it is seeded here, in the thread that runs the chain.
    ``others``: ``(Xs_others, rows, rows_others)`` when the chain runs on a subsample: the other
    cells' scaled data and where the subsample's and the other cells' rows go in every sample.
    """
    rng = np.random.default_rng(seed)
    _seed_numba(spawn_seed(rng))
    state = _Chain(Xs, scale, p, rng, others)
    for it in progress(range(p.n_iter), desc=f"latent_features: sweeps of chain {chain}", logger=_LOGGER):
        state.sweep(it)
    return state.result()


class _Chain:
    """The state of one chain and its sweep, in named steps.

    With ``intercept`` the first column of the sampler's Z is all ones (outside the IBP,
    never resampled); with per-gene noise the rows are swept on the data divided by each
    gene's current noise standard deviation (the conjugate prior A[k, d] ~ N(0, s2a s2x[d])
    makes the whitened problem the homoscedastic one with unit noise).
    """

    def __init__(self, Xs, scale, p: _ChainSettings, rng, others=None):
        self.Xs, self.scale, self.p, self.rng, self.others = Xs, scale, p, rng, others
        self.others_state = None  # the other cells' features and weights between draws
        n, d = self.n, self.d = Xs.shape
        self.fixed_x = None if p.sigma_x is None else (p.sigma_x / scale) ** 2
        self.per_gene = p.noise == "gene" and self.fixed_x is None
        # per-gene noise: sigma_a is relative to each gene's noise, so it is not rescaled
        self.fixed_a = None if p.sigma_a is None else (p.sigma_a**2 if self.per_gene else (p.sigma_a / scale) ** 2)
        self.sample_alpha = p.alpha is None
        self.alpha = 1.0 if self.sample_alpha else p.alpha
        # Start at the model without features (noise = the data's variance, 1 after scaling): a
        # smaller start makes every cell open features at once and the chain must then shed them.
        if self.per_gene:
            self.s2x = np.maximum(np.mean(Xs * Xs, axis=0), 1e-12)
        else:
            self.s2x = np.full(d, float(np.mean(Xs * Xs)) if self.fixed_x is None else self.fixed_x)
        self.s2a = 1.0 if self.fixed_a is None else self.fixed_a
        self.n_fixed = 1 if p.intercept else 0
        self.kcap = p.max_features + self.n_fixed
        harmonic = float(np.sum(1.0 / np.arange(1, n + 1)))
        # With the baseline, features held by every cell are excluded: the IBP conditioned on
        # none (their number is Poisson(alpha / N)), so P(Z | alpha) gains a factor exp(alpha / N).
        self.harmonic_eff = harmonic - (1.0 / n if self.n_fixed else 0.0)
        self._start()
        self.work = (np.zeros((self.kcap, self.kcap)), np.zeros((self.kcap, d)), np.zeros((self.kcap, d)))
        self.log_joint = np.empty(p.n_iter)
        self.trace_k = np.empty(p.n_iter, dtype=np.int64)
        self.trace_alpha = np.empty(p.n_iter)
        self.trace_sx = np.empty(p.n_iter)
        self.trace_sa = np.empty(p.n_iter)
        self.sum_s2x = np.zeros(d)
        self.samples, self.sweeps = [], []
        self.w = np.ones(n)
        self.accepted = {"death": 0}

    def _start(self) -> None:
        """Z with the baseline column (if any) and the ICA start features; A at zero."""
        p, n = self.p, self.n
        self.Z = np.zeros((n, self.kcap), dtype=np.uint8)
        self.A = np.zeros((self.kcap, self.d))
        self.m = np.zeros(self.kcap, dtype=np.int64)
        if self.n_fixed:
            self.Z[:, 0] = 1
            self.m[0] = n
        self.K = self.n_fixed
        n_start = min(p.init_features, p.max_features, n - 1)
        if n_start > 0:
            # Start from features found by ICA (see _start_features): pruning surplus features
            # takes a few sweeps, growing a missing one from a single cell hundreds.
            self.K = _start_features(self.Xs / np.sqrt(self.s2x), self.Z, self.m, self.K, n_start,
                                     spawn_seed(self.rng))

    def sweep(self, it: int) -> None:
        """One sweep: Z, A, the noise, sigma_a^2 and alpha in turn; then the log joint and the traces."""
        if self.per_gene:
            Y = np.ascontiguousarray(self.Xs / np.sqrt(self.s2x))
            v_x = 1.0
        else:
            Y = self.Xs
            v_x = float(self.s2x[0])
        self._z_moves(it, Y, v_x, self.w)
        Zk = self.Z[:, :self.K].astype(np.float64)
        R = self._draw_loadings(Y, v_x, Zk, self.w)
        self._draw_noise(R)
        self._draw_scales()
        self._record(it, self._log_joint(Zk))

    def _z_moves(self, it, Y, v_x, w) -> None:
        """The row sweep, then the whole-feature moves that are switched on."""
        p, Z, m, kcap, n_fixed = self.p, self.Z, self.m, self.kcap, self.n_fixed
        s2a, alpha = float(self.s2a), float(self.alpha)
        K = int(_sweep_rows(Y, Z, m, self.K, v_x, s2a, alpha, kcap, p.max_new, p.block_moves, *self.work,
                            n_fixed, w))
        if n_fixed and p.complement_moves:
            _complement_moves(Y, Z, m, K, w, v_x, s2a, alpha, self.rng)
        # from a fifth of the burn-in on: in the first sweeps sigma_x is still near the data's variance
        # (the start), every feature looks weak, and a real one could go (docs/latent_features.md)
        if p.death_moves and it >= p.burn_in // 5:
            K, acc = _death_or_random_birth(Y, Z, m, K, w, v_x, s2a, alpha, n_fixed, kcap, p.death_moves,
                                            self.rng)
            self.accepted["death"] += acc
        self.K = K

    def _draw_loadings(self, Y, v_x, Zk, w):
        """A | Z, X; returns the residual Y - Z A."""
        K, A = self.K, self.A
        Zw = Zk * w[:, None]
        if K:
            # A | Z, X: each column N(mean, prec^-1), prec = Z'WZ / v_x + I / s2a (whitened units if per gene).
            prec = Zw.T @ Zk / v_x + np.eye(K) / self.s2a
            L = np.linalg.cholesky(prec)
            mean = np.linalg.solve(prec, Zw.T @ Y / v_x)
            A[:K] = mean + np.linalg.solve(L.T, self.rng.standard_normal((K, self.d)))
        return Y - Zk @ A[:K]

    def _draw_noise(self, R) -> None:
        """sigma_x^2 (per gene or shared) and the cells' Student-t weights."""
        p, rng, K, n, d = self.p, self.rng, self.K, self.n, self.d
        ax, bx = p.sigma_x_prior
        if self.per_gene:
            s2x = self.s2x
            # s2x[d] | A, Z, X: inverse gamma; the loadings' prior N(0, s2a s2x[d]) adds K terms
            rss_w = self.w @ (R * R) + np.sum(self.A[:K] ** 2, axis=0) / self.s2a  # in whitened units
            new = 1.0 / rng.gamma(ax + 0.5 * (n + K), 1.0 / (bx + 0.5 * rss_w * s2x))
            ratio = np.sqrt(s2x / new)
            self.A[:K] *= ratio  # the same loadings, whitened by the new noise (for s2a | A)
            R *= ratio
            self.s2x = new
        elif self.fixed_x is None:
            self.s2x[:] = _inv_gamma(rng, ax + 0.5 * n * d, bx + 0.5 * float(self.w @ np.sum(R * R, axis=1)))
        nu = p.noise_df
        if nu is not None:
            # Student-t noise as a scale mixture: w[i] | rest ~ Gamma((nu + D) / 2, (nu + r_i / v) / 2)
            r = np.sum(R * R, axis=1) / (1.0 if self.per_gene else float(self.s2x[0]))
            self.w = rng.gamma(0.5 * (nu + d), 1.0 / (0.5 * (nu + r)))
            if p.noise_scale_moves and self.fixed_x is None and not self.per_gene:
                c = _noise_scale_draw(rng, self.w, float(self.s2x[0]), nu, ax, bx)
                self.w *= c
                self.s2x *= c

    def _draw_scales(self) -> None:
        """sigma_a^2 and alpha from their conjugate posteriors, when sampled."""
        p, K, d = self.p, self.K, self.d
        ssa = float(np.sum(self.A[:K] ** 2))
        if self.fixed_a is None:
            aa, ba = p.sigma_a_prior
            self.s2a = _inv_gamma(self.rng, aa + 0.5 * K * d, ba + 0.5 * ssa)
        if self.sample_alpha:
            a_alpha, b_alpha = p.alpha_prior
            self.alpha = self.rng.gamma(a_alpha + K - self.n_fixed, 1.0 / (b_alpha + self.harmonic_eff))

    def _log_joint(self, Zk) -> float:
        """log p(X, [Z], hyperparameters), A integrated out.

        So that values are comparable across K; the cells' weights w enter as rows scaled by
        sqrt(w) (and the Jacobian D/2 sum log w).
        """
        p, n, d, s2x, s2a, alpha, w = self.p, self.n, self.d, self.s2x, self.s2a, self.alpha, self.w
        ax, bx = p.sigma_x_prior
        nu = p.noise_df
        sw = np.sqrt(w)[:, None]
        if self.per_gene:
            sx = np.sqrt(s2x)
            lj = (collapsed_log_likelihood(self.Xs / sx * sw, Zk * sw, 1.0, math.sqrt(s2a))
                  - n * float(np.sum(np.log(sx)))
                  + float(np.sum(ax * math.log(bx) - math.lgamma(ax) - (ax + 1.0) * np.log(s2x) - bx / s2x)))
        else:
            lj = collapsed_log_likelihood(self.Xs * sw, Zk * sw, math.sqrt(s2x[0]), math.sqrt(s2a))
            if self.fixed_x is None:
                lj += _log_inv_gamma(float(s2x[0]), ax, bx)
        if nu is not None:
            lj += 0.5 * d * float(np.sum(np.log(w))) + float(np.sum(
                0.5 * nu * math.log(0.5 * nu) - math.lgamma(0.5 * nu) + (0.5 * nu - 1.0) * np.log(w) - 0.5 * nu * w))
        lj += ibp_log_prob(self.Z[:, self.n_fixed:self.K], alpha) + (alpha / n if self.n_fixed else 0.0)
        if self.fixed_a is None:
            lj += _log_inv_gamma(s2a, *p.sigma_a_prior)
        if self.sample_alpha:
            lj += _log_gamma_pdf(alpha, *p.alpha_prior)
        return lj

    def _record(self, it, lj) -> None:
        """The traces of sweep ``it``; after burn-in, the running noise sum and every thin-th sample."""
        p, scale = self.p, self.scale
        self.log_joint[it] = lj
        self.trace_k[it] = self.K - self.n_fixed
        self.trace_alpha[it] = self.alpha
        self.trace_sx[it] = math.sqrt(float(np.mean(self.s2x))) * scale
        self.trace_sa[it] = math.sqrt(self.s2a) * (1.0 if self.per_gene else scale)
        if it >= p.burn_in:
            self.sum_s2x += self.s2x
            if (it - p.burn_in) % p.thin == 0:
                self.samples.append(self._all_rows())
                self.sweeps.append(it)

    def _all_rows(self) -> np.ndarray:
        """The current features of every cell (N, K) uint8: the chain's own, and without a subsample that is all.

        The cells outside the subsample (``others``) get theirs drawn given the current loadings
        (``_extend.extend``), in the rows ``others`` names.
        """
        own = self.Z[:, self.n_fixed:self.K].copy()
        if self.others is None:
            return own
        Xs_out, rows, rows_out = self.others
        p = self.p
        Y, v = (Xs_out / np.sqrt(self.s2x), 1.0) if self.per_gene else (Xs_out, float(self.s2x[0]))
        full = np.empty((rows.size + rows_out.size, own.shape[1]), dtype=np.uint8)
        full[rows] = own
        if self.others_state is None:  # the first draw: from no feature, with more scans
            self.others_state = (np.zeros((rows_out.size, self.kcap), dtype=np.uint8), np.ones(rows_out.size))
            scans = OTHER_FIRST_SCANS
        else:
            scans = OTHER_SCANS
        full[rows_out] = extend(Y, self.A, self.K, self.n_fixed, self.m, self.n, v, p.noise_df, scans,
                                self.others_state, p.block_moves)
        return full

    def result(self) -> dict:
        """What the estimator collects from the chain (loadings in the units of X)."""
        p, K, n_fixed, scale = self.p, self.K, self.n_fixed, self.scale
        # loadings in the units of X (whitened loadings times each gene's noise sd)
        unit = np.sqrt(self.s2x) * scale if self.per_gene else scale
        A_out = self.A[:K] * unit
        return {"samples": self.samples, "sweeps": np.asarray(self.sweeps, dtype=np.int64),
                "log_joint": self.log_joint, "K": self.trace_k, "alpha": self.trace_alpha,
                "sigma_x": self.trace_sx, "sigma_a": self.trace_sa,
                "sigma_x_genes": np.sqrt(self.sum_s2x / max(p.n_iter - p.burn_in, 1)) * scale,
                "Z": self._all_rows(), "A": A_out[n_fixed:].copy(),
                "death_accepted": self.accepted["death"],
                "intercept": A_out[0].copy() if n_fixed else np.zeros(self.d)}
