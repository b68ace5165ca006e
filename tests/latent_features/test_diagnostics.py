"""Split R-hat, effective sample size and the convergence warnings of fit."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from scontrast.core import ScontrastError, ScontrastWarning
from scontrast.latent_features._diagnostics import effective_sample_size, split_rhat
from scontrast.latent_features._estimator import LinearGaussianIBP

from ._helpers import planted


def test_split_rhat_and_ess_on_known_chains():
    """iid chains: R-hat near 1, ESS near the draws; AR(1): ESS near T (1 - rho) / (1 + rho); offsets: R-hat >> 1."""
    rhats, ess_iid, ess_ar = [], [], []
    rho = 0.8
    for seed in range(20):
        rng = np.random.default_rng(seed)
        iid = rng.normal(size=(4, 1000))
        rhats.append(split_rhat(iid))
        ess_iid.append(effective_sample_size(iid))
        ar = np.empty((4, 4000))
        ar[:, 0] = rng.normal(size=4) / math.sqrt(1 - rho**2)
        for t in range(1, ar.shape[1]):
            ar[:, t] = rho * ar[:, t - 1] + rng.normal(size=4)
        ess_ar.append(effective_sample_size(ar))
    # R-hat - 1 of iid chains is O(1/T): 8 halves x 500 draws stay within 1.01
    assert max(rhats) < 1.01 and min(rhats) > 0.995
    assert np.mean(ess_iid) == pytest.approx(4000, rel=0.05)
    assert np.mean(ess_ar) == pytest.approx(16000 * (1 - rho) / (1 + rho), rel=0.1)
    rng = np.random.default_rng(0)
    apart = rng.normal(size=(2, 500)) + np.array([[0.0], [3.0]])  # two chains in different places
    assert split_rhat(apart) > 2.0 and effective_sample_size(apart) < 50
    drift = np.linspace(0, 5, 500)[None, :] + rng.normal(size=(2, 500))  # a trend within each chain: halves differ
    assert split_rhat(drift) > 1.5
    assert split_rhat(np.ones((2, 10))) == 1.0 and split_rhat(np.array([[1.0] * 10, [2.0] * 10])) == math.inf
    with pytest.raises(ScontrastError, match=r"^chains: expected \(chains, draws\) with at least 4 draws"):
        split_rhat(np.ones((2, 3)))


def test_warnings_for_unconverged_chains_and_the_cap():
    Z, X = planted(n=80, d=6, seed=2)
    with pytest.warns(ScontrastWarning, match=r"^posterior samples reach the cap max_features = 1 "):
        LinearGaussianIBP(n_iter=40, burn_in=20, max_features=1, random_state=0).fit(X)
    # four sweeps kept from chains started empty: far from the posterior, the halves disagree (from the
    # default ICA start these chains are already there after 4 sweeps)
    with pytest.warns(ScontrastWarning, match=r"^split R-hat of the log joint is [\d.]+ > 1.1 over 2 chains"):
        model = LinearGaussianIBP(n_iter=8, burn_in=4, thin=1, init_features=0, random_state=0).fit(X)
    assert model.rhat_log_joint_ > 1.1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a converged run warns about nothing
        good = LinearGaussianIBP(n_iter=400, burn_in=200, random_state=0).fit(X)
    assert good.rhat_log_joint_ <= 1.1 and good.rhat_K_ <= 1.1 and good.ess_log_joint_ > 20
