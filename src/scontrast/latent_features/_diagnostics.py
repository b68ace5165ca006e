"""Convergence diagnostics of the chains: split R-hat, effective sample size, and the warnings of ``fit``."""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..core import ScontrastError, ScontrastWarning


def split_rhat(chains) -> float:
    """Split R-hat (Gelman et al., Bayesian Data Analysis 3rd ed., section 11.4) of a scalar trace.

    chains (M, T): M chains of T draws after burn-in, T >= 4. Each chain is cut into
    halves and R-hat = sqrt(var+ / W) over the 2M halves, var+ = (n - 1) / n W + B / n.
    Near 1 when the chains (and their halves) agree; above 1.1 is the usual alarm.
    A trace constant within every half gives 1.0 when all halves agree, inf otherwise.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.latent_features import split_rhat
    >>> rng = np.random.default_rng(0)
    >>> chains = rng.normal(size=(4, 200))                   # 4 chains that agree
    >>> bool(split_rhat(chains) < 1.1)
    True
    >>> bool(split_rhat(chains + 3.0 * np.arange(4)[:, None]) > 1.1)   # 4 chains in different modes
    True
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

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.latent_features import effective_sample_size
    >>> chains = np.random.default_rng(0).normal(size=(4, 200))   # independent draws: about 800
    >>> bool(400 < effective_sample_size(chains) <= 1600)
    True
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



def _convergence_warnings(rhat_log_joint, rhat_K, samples, n_chains: int, max_features: int) -> None:
    """``ScontrastWarning`` for a split R-hat above 1.1 or samples that reach ``max_features``.

    Called from ``LinearGaussianIBP.fit`` (the stack level points at fit's caller).
    """
    for name, value in (("log joint", rhat_log_joint), ("K", rhat_K)):
        if value > 1.1:
            warnings.warn(f"split R-hat of the {name} is {value:.3f} > 1.1 over "
                          f"{n_chains} chains: the chains disagree (not converged, or stuck in different modes: "
                          "compare the chains in the trace figure; more sweeps or fewer genes may help)",
                          ScontrastWarning, stacklevel=3)
    k_max = max((s.shape[1] for s in samples), default=0)
    if k_max >= max_features:
        warnings.warn(f"posterior samples reach the cap max_features = {max_features} "
                      "features: K is truncated (raise max_features or explain a smaller, standardised matrix)",
                      ScontrastWarning, stacklevel=3)
