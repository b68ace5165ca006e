"""The estimator: ``LinearGaussianIBP``, a Gibbs sampler for the linear-Gaussian IBP latent feature model.

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
the O(N K^2) of recomputing the marginal likelihood (``_row_sweep``):

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
  (``noise_scale_moves``, ``_moves._noise_scale_draw``).

* ``death_moves`` Metropolis-Hastings proposals to remove a feature, or to add one
  on a uniformly random set of cells of a uniformly random size
  (``_moves._death_or_random_birth``): that proposal matches the IBP prior's count of cell
  sets, so the acceptance of removing feature j (m_j cells, K features) is
  p(X | Z without j) / p(X | Z) x K m_j / (alpha (N - 1)): a feature without support
  in the likelihood goes in a few sweeps, where the row sweep would shed its cells by
  drift alone (``docs/latent_features.md``, "Death moves").

The row sweep is compiled with numba; its random numbers come from numba's
generator, seeded with an int drawn from ``random_state`` (``core.spawn_seed``)
at the start of ``fit``, so a fit is reproducible for a given seed.

Posterior samples are written in the format of :mod:`scontrast.feature_samples`.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ..bounds import check_count, check_memory
from ..core import (
    ScontrastError,
    check_bool,
    check_int,
    check_matrix,
    check_random_state,
    check_real,
    one_blas_thread,
    spawn_seed,
)
from ..design import stratified_subsample
from ._chain import _ChainSettings, _run_chain, _warm_up
from ._diagnostics import _convergence_warnings, effective_sample_size, split_rhat


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


def _check_memory(p: _ChainSettings, n: int, d: int) -> None:
    """Refuse, before any chain starts, settings whose chains would hold more than the memory budget.

    Per chain: the kept samples (cells x up to ``max_features`` bytes each), Z, the K x K and
    K x D work arrays and the per-sweep traces; all chains are held at the end.
    """
    kept = -(-(p.n_iter - p.burn_in) // p.thin)
    kcap = p.max_features + 1
    per_chain = kept * n * p.max_features + n * kcap + 8 * (kcap * kcap + 3 * kcap * d) + 40 * p.n_iter
    check_memory(p.n_chains * per_chain, "max_features", p.max_features,
                 f"the chains' samples and state ({p.n_chains} chains x {kept} kept samples x {n} cells x up to "
                 f"{p.max_features} features; n_iter, burn_in and thin set the samples kept)")


def _subsample(n: int, max_cells, strata, rng) -> np.ndarray:
    """The rows the chains run on (ascending): all ``n``, or ``max_cells`` of them stratified by ``strata``.

    Each stratum gives cells in proportion to its size (largest remainders for the rounding,
    at least one cell of every stratum), drawn without replacement from ``rng``.
    """
    if max_cells is None or n <= max_cells:
        return np.arange(n)
    labels = np.zeros(n, dtype=np.int64) if strata is None else np.unique(np.asarray(strata), return_inverse=True)[1]
    if labels.shape != (n,):
        raise ScontrastError(f"strata: expected one label per cell ({n}), got shape {np.shape(strata)}")
    return stratified_subsample(n, max_cells, labels, rng)


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
        Metropolis-Hastings proposals per sweep (from a fifth of the burn-in on; see
        ``_moves._death_or_random_birth``) to remove a
        feature or add one whose cells are a uniformly random set of a uniformly random size. That birth proposal matches
        the IBP prior's count of cell sets, so a feature the likelihood does not support (a
        start of noise, or a feature left neutral) is removed in a few sweeps, where the row
        sweep sheds its cells one by one by drift alone (hundreds of sweeps, at a different
        time in each chain); random births are almost never accepted. Exact.
    max_cells : int >= 2 or None
        The chains run on at most this many cells (None = all): with more, on a subsample of
        ``max_cells`` cells drawn without replacement within each stratum (``fit``'s ``strata``:
        the groups and replicates) in proportion to its size, and every other cell gets its
        features in each kept sample from the model given that sample's loadings, noise and
        feature counts (``_extend``: the IBP's prior odds for one more cell times its likelihood
        ratio, 3 Gibbs scans with its Student-t weight). A sweep costs cells x K^2 x D, the
        extension cells x K x D per kept sample: 50,000 cells in about a tenth of the time.
        The chains, their diagnostics and the loadings are the subsample's; a feature held by
        too few cells to show in the subsample is not found (``docs/latent_features.md``,
        "Subsample"). Below ``max_cells`` cells nothing changes.
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
        the log priors of the sampled hyperparameters; X in scaled units).
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
    death_accepted_ : ndarray (n_chains,)
        Accepted proposals of ``death_moves``, per chain.
    scale_ : float
    fitted_cells_ : ndarray (S,) int
        The cells (rows of X) the chains ran on: all N, or the subsample of ``max_cells``.
    timings_ : dict
        Seconds spent compiling/warming up and sampling (wall clock, all chains).

    A split R-hat above 1.1 or a retained sample whose K reaches
    ``max_features`` is a ``ScontrastWarning`` from ``fit``.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.latent_features import LinearGaussianIBP
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 8))
    >>> X[rng.random(60) < 0.5, :3] += 3.0                  # one programme of features 0-2
    >>> model = LinearGaussianIBP(n_iter=60, burn_in=30, random_state=0).fit(X)
    >>> model.Z_.shape[0]                                   # one row of binary features per cell
    60
    """

    def __init__(self, n_iter: int = 1000, burn_in: int = 500, thin: int = 5, n_chains: int = 2,
                 alpha: float | None = None, sigma_x: float | None = None, sigma_a: float | None = 1.0,
                 max_features: int = 30, max_new: int = 3, block_moves: int = 4, scale: bool = True,
                 intercept: bool = True, noise: str = "shared", noise_df: float | None = 4.0, init_features: int = 5,
                 complement_moves: bool = True, noise_scale_moves: bool = True, death_moves: int = 5,
                 max_cells: int | None = 5000,
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
        self.max_cells = max_cells
        self.alpha_prior = alpha_prior
        self.sigma_x_prior = sigma_x_prior
        self.sigma_a_prior = sigma_a_prior
        self.n_jobs = n_jobs
        self.random_state = random_state

    def _check_params(self) -> None:
        """Check the hyper-parameters (``ScontrastError`` naming the first bad one)."""
        n_iter = check_count(self.n_iter, "n_iter", 1, "latent_features", key="ibp.n_iter")
        burn_in = check_count(self.burn_in, "burn_in", 0, "latent_features", key="ibp.burn_in")
        if burn_in >= n_iter:
            raise ScontrastError(f"burn_in: expected fewer than n_iter = {n_iter} sweeps, got {burn_in}")
        check_count(self.thin, "thin", 1, "latent_features", key="ibp.thin")
        check_count(self.n_chains, "n_chains", 1, "latent_features", key="ibp.n_chains")
        check_count(self.max_features, "max_features", 1, "latent_features", key="ibp.max_features")
        check_count(self.max_new, "max_new", 1, "latent_features", key="ibp.max_new")
        check_count(self.block_moves, "block_moves", 0, "latent_features", key="ibp.block_moves")
        check_count(self.init_features, "init_features", 0, "latent_features", key="ibp.init_features")
        check_bool(self.complement_moves, "complement_moves")
        check_bool(self.noise_scale_moves, "noise_scale_moves")
        check_count(self.death_moves, "death_moves", 0, "latent_features", key="ibp.death_moves")
        if not (self.n_jobs is None or self.n_jobs == -1):
            check_int(self.n_jobs, "n_jobs", 1)
        for name in ("alpha", "sigma_x", "sigma_a", "noise_df"):
            check_real(getattr(self, name), name, 0.0, strict_min=True, allow_none=True)
        for name in ("scale", "intercept"):
            check_bool(getattr(self, name), name)
        if self.noise not in ("gene", "shared"):
            raise ScontrastError(f"noise: expected 'gene' or 'shared', got {self.noise!r}")
        for name in ("alpha_prior", "sigma_x_prior", "sigma_a_prior"):
            _check_prior(getattr(self, name), name)
        check_count(self.max_cells, "max_cells", 2, "latent_features", key="ibp.max_cells", allow_none=True)

    def _settings(self) -> _ChainSettings:
        """The checked hyper-parameters as the chains' frozen settings (n_jobs None or -1: one per core)."""
        def real(value):
            return None if value is None else float(value)

        return _ChainSettings(
            n_iter=int(self.n_iter), burn_in=int(self.burn_in), thin=int(self.thin), n_chains=int(self.n_chains),
            max_features=int(self.max_features), max_new=int(self.max_new), block_moves=int(self.block_moves),
            init_features=int(self.init_features),
            complement_moves=bool(self.complement_moves), noise_scale_moves=bool(self.noise_scale_moves),
            death_moves=int(self.death_moves),
            n_jobs=(os.cpu_count() or 1) if self.n_jobs is None or self.n_jobs == -1 else int(self.n_jobs),
            alpha=real(self.alpha), sigma_x=real(self.sigma_x), sigma_a=real(self.sigma_a),
            noise_df=real(self.noise_df), intercept=bool(self.intercept), noise=self.noise,
            alpha_prior=_check_prior(self.alpha_prior, "alpha_prior"),
            sigma_x_prior=_check_prior(self.sigma_x_prior, "sigma_x_prior"),
            sigma_a_prior=_check_prior(self.sigma_a_prior, "sigma_a_prior"))

    @one_blas_thread  # the K x K algebra is tiny: BLAS threads only cost time (a lot on busy cores)
    def fit(self, X, y=None, strata=None):
        """Run the chains on X, shape (N cells, D dims), N >= 2; ``y`` is ignored. Returns self.

        ``strata`` (N,): each cell's stratum (group, replicate) for the subsample when N exceeds
        ``max_cells`` (None = one stratum).
        """
        self._check_params()
        p = self._settings()
        X = check_matrix(X, "X", min_rows=2, accept_sparse=False)
        _check_memory(p, *X.shape)
        rng = check_random_state(self.random_state)
        scale = float(X.std()) if self.scale else 1.0
        if not scale > 0:
            raise ScontrastError("X: is constant, there is nothing for latent features to explain")
        Xs = np.ascontiguousarray(X / scale)
        seeds = [spawn_seed(rng) for _ in range(p.n_chains)]
        # after the chains' seeds: a fit below max_cells draws exactly what it drew before the option
        rows = _subsample(X.shape[0], self.max_cells, strata, rng)
        others = None
        if rows.size < X.shape[0]:
            rest = np.setdiff1d(np.arange(X.shape[0]), rows)
            others = (np.ascontiguousarray(Xs[rest]), rows, rest)
            Xs = np.ascontiguousarray(Xs[rows])
        t0 = time.perf_counter()
        _warm_up()
        t_compile = time.perf_counter() - t0
        t1 = time.perf_counter()
        jobs = min(p.n_jobs, p.n_chains)
        if jobs > 1:
            with ThreadPoolExecutor(jobs) as pool:
                chains = list(pool.map(lambda c: _run_chain(Xs, scale, p, seeds[c], c + 1, others),
                                       range(len(seeds))))
        else:
            chains = [_run_chain(Xs, scale, p, s, c + 1, others) for c, s in enumerate(seeds)]
        t2 = time.perf_counter()
        self._collect(chains)
        self.scale_ = scale
        self.fitted_cells_ = rows
        self.timings_ = {"compile": t_compile, "sampling": t2 - t1}
        self._diagnose(p)
        _convergence_warnings(self.rhat_log_joint_, self.rhat_K_, self.samples_, p.n_chains, p.max_features)
        return self

    def _collect(self, chains) -> None:
        """The fitted attributes from the chains' results (pooled samples, stacked traces, first chain's state)."""
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
        self.death_accepted_ = np.array([c["death_accepted"] for c in chains], dtype=np.int64)

    def _diagnose(self, p: _ChainSettings) -> None:
        """Split R-hat and ESS of the log joint and of K over the sweeps after burn-in (NaN with fewer than 4)."""
        kept = slice(p.burn_in, None)
        if p.n_iter - p.burn_in >= 4:
            self.rhat_log_joint_ = split_rhat(self.log_joint_[:, kept])
            self.rhat_K_ = split_rhat(self.n_features_[:, kept])
            self.ess_log_joint_ = effective_sample_size(self.log_joint_[:, kept])
            self.ess_K_ = effective_sample_size(self.n_features_[:, kept])
        else:
            self.rhat_log_joint_ = self.rhat_K_ = self.ess_log_joint_ = self.ess_K_ = float("nan")

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
