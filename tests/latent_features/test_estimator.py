"""LinearGaussianIBP: planted features, bookkeeping and reproducibility, parameter checks, threads."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from scontrast.core import ScontrastError
from scontrast.fangs import draws, expected_loss, fangs, faro_loss
from scontrast.latent_features._estimator import LinearGaussianIBP

from ._helpers import planted


@pytest.mark.parametrize("sigma_x, seed", [(0.25, 0), (0.4, 1)])
def test_recovers_planted_features_and_fangs_beats_draws(sigma_x, seed):
    Z, X = planted(seed=seed, sigma_x=sigma_x)
    # sigma_a sampled (it is fixed to one standard deviation of X by default, for standardised genes);
    # the model that simulated X: Gaussian noise, no baseline (the empty start as in the paper)
    model = LinearGaussianIBP(n_iter=400, burn_in=200, thin=4, sigma_a=None, intercept=False, noise_df=None,
                              init_features=0, random_state=0).fit(X)
    f = fangs(model.samples_, n_jobs=1, random_state=0)
    d = draws(model.samples_, n_jobs=1)
    to_truth = faro_loss(f.estimate, Z)
    print(f"sigma_x={sigma_x}: FARO loss of the FANGS estimate to the true Z {to_truth} ({Z.size} entries), "
          f"of the draws estimate {faro_loss(d.estimate, Z)}; expected loss FANGS {f.expected_loss:.3f} "
          f"vs draws {d.expected_loss:.3f}")
    assert f.n_features == 3
    assert f.expected_loss == pytest.approx(expected_loss(model.samples_, f.estimate))
    assert abs(model.sigma_x_[:, 200:].mean() - sigma_x) < 0.05  # noise level recovered (units of X), both chains
    assert np.all(np.isfinite(model.log_joint_))
    assert np.all(model.log_joint_[:, -100:].mean(axis=1) > model.log_joint_[:, 0])
    if sigma_x < 0.3:  # well separated: nearly exact, and the posterior is too sharp for FANGS to gain
        assert to_truth <= 0.01 * Z.size
        # never worse than the best sample (ties: equal up to the summation order's round-off)
        assert f.expected_loss <= d.expected_loss * (1.0 + 1e-12)
    else:  # noisier: the posterior spreads, FANGS beats the best single sample
        assert to_truth <= 0.04 * Z.size
        assert f.expected_loss < d.expected_loss


def test_bookkeeping_reproducibility_and_caps():
    Z, X = planted(n=60, d=4, seed=3)
    a = LinearGaussianIBP(n_iter=50, burn_in=10, thin=3, max_features=2, random_state=5).fit(X)
    b = LinearGaussianIBP(n_iter=50, burn_in=10, thin=3, max_features=2, random_state=5).fit(X)
    c = LinearGaussianIBP(n_iter=50, burn_in=10, thin=3, max_features=2, random_state=6).fit(X)
    kept = list(range(10, 50, 3))
    assert len(a.samples_) == 2 * len(kept) and list(a.sample_sweeps_) == kept + kept  # two chains, pooled
    assert list(a.sample_chains_) == [0] * len(kept) + [1] * len(kept)
    assert all(np.array_equal(s, t) for s, t in zip(a.samples_, b.samples_))
    np.testing.assert_array_equal(a.log_joint_, b.log_joint_)
    assert not np.array_equal(a.log_joint_, c.log_joint_)
    assert a.n_features_.max() <= 2 and all(s.shape[1] <= 2 for s in a.samples_)
    assert all(s.dtype == np.uint8 and s.shape[0] == 60 and s.any(axis=0).all() for s in a.samples_)
    for name in ("log_joint_", "n_features_", "alpha_", "sigma_x_", "sigma_a_"):
        assert getattr(a, name).shape == (2, 50)
    assert not np.array_equal(a.log_joint_[0], a.log_joint_[1])  # the chains have their own seeds
    # chains run in parallel threads give the same result
    par = LinearGaussianIBP(n_iter=50, burn_in=10, thin=3, max_features=2, n_jobs=2, random_state=5).fit(X)
    np.testing.assert_array_equal(par.log_joint_, a.log_joint_)
    assert all(np.array_equal(s, t) for s, t in zip(a.samples_, par.samples_))
    assert a.A_.shape == (a.Z_.shape[1], 4)
    # with sampled variances, scaling the data does not change the features found (hyperpriors act
    # on scaled data); a fixed sigma_a (the default) is in the units of X
    a = LinearGaussianIBP(n_iter=50, burn_in=10, thin=3, max_features=2, sigma_a=None, random_state=5).fit(X)
    big = LinearGaussianIBP(n_iter=50, burn_in=10, thin=3, max_features=2, sigma_a=None,
                            random_state=5).fit(X * 100.0)
    assert all(np.array_equal(s, t) for s, t in zip(a.samples_, big.samples_))
    assert big.sigma_x_ == pytest.approx(100.0 * a.sigma_x_)


def test_bad_inputs_raise():
    X = np.random.default_rng(0).normal(size=(10, 3))
    with pytest.raises(ScontrastError, match=r"^burn_in: expected fewer than n_iter = 10"):
        LinearGaussianIBP(n_iter=10, burn_in=10).fit(X)
    with pytest.raises(ScontrastError, match=r"^X: contains \d+ NaN"):
        LinearGaussianIBP(n_iter=10, burn_in=1).fit(np.where(X > 1, np.nan, X))
    with pytest.raises(ScontrastError, match=r"^X: expected a 2-d matrix"):
        LinearGaussianIBP(n_iter=10, burn_in=1).fit(X[:, 0])
    with pytest.raises(ScontrastError, match=r"^X: needs at least 2 cells"):
        LinearGaussianIBP(n_iter=10, burn_in=1).fit(X[:1])
    with pytest.raises(ScontrastError, match=r"^X: is constant"):
        LinearGaussianIBP(n_iter=10, burn_in=1).fit(np.ones((10, 3)))
    with pytest.raises(ScontrastError, match=r"^sigma_x: expected a finite number > 0"):
        LinearGaussianIBP(n_iter=10, burn_in=1, sigma_x=-1.0).fit(X)
    with pytest.raises(ScontrastError, match=r"^max_features: expected an integer >= 1"):
        LinearGaussianIBP(n_iter=10, burn_in=1, max_features=0).fit(X)
    with pytest.raises(ScontrastError, match=r"^thin: expected an integer"):
        LinearGaussianIBP(n_iter=10, burn_in=1, thin=1.5).fit(X)
    with pytest.raises(ScontrastError, match=r"^scale: expected True or False"):
        LinearGaussianIBP(n_iter=10, burn_in=1, scale="yes").fit(X)
    for bad in ((1.0, 0.0), (1.0,), "ab", (1.0, float("nan")), None):
        with pytest.raises(ScontrastError, match=r"^alpha_prior: expected a pair \(shape, rate\)"):
            LinearGaussianIBP(n_iter=10, burn_in=1, alpha_prior=bad).fit(X)
    with pytest.raises(ScontrastError, match=r"^X: sparse input is not supported"):
        import scipy.sparse as sp

        LinearGaussianIBP(n_iter=10, burn_in=1).fit(sp.csr_matrix(X))


def test_is_a_scikit_learn_estimator_with_checks_in_fit():
    X = np.random.default_rng(0).normal(size=(10, 3))
    model = LinearGaussianIBP(n_iter=20, burn_in=5, sigma_x=-1.0)  # stored as given, refused by fit
    assert model.get_params()["sigma_x"] == -1.0
    with pytest.raises(NotFittedError):
        model.traces()
    fitted = clone(model).set_params(sigma_x=None, random_state=np.random.default_rng(4)).fit(X)
    again = LinearGaussianIBP(n_iter=20, burn_in=5, random_state=np.random.default_rng(4)).fit(X)
    np.testing.assert_array_equal(fitted.traces()["log_joint"], again.traces()["log_joint"])
    assert set(fitted.traces()) == {"log_joint", "K", "alpha", "sigma_x", "sigma_a", "sweeps", "chains"}
    assert set(fitted.diagnostics()) == {"rhat_log_joint", "rhat_K", "ess_log_joint", "ess_K"}


def test_new_options_are_checked():
    X = np.random.default_rng(0).normal(size=(10, 3))
    with pytest.raises(ScontrastError, match=r"^noise: expected 'gene' or 'shared'"):
        LinearGaussianIBP(n_iter=10, burn_in=1, noise="cell").fit(X)
    with pytest.raises(ScontrastError, match=r"^intercept: expected True or False"):
        LinearGaussianIBP(n_iter=10, burn_in=1, intercept=1).fit(X)
    with pytest.raises(ScontrastError, match=r"^noise_df: expected a finite number > 0"):
        LinearGaussianIBP(n_iter=10, burn_in=1, noise_df=0.0).fit(X)
    with pytest.raises(ScontrastError, match=r"^init_features: expected an integer >= 0"):
        LinearGaussianIBP(n_iter=10, burn_in=1, init_features=-1).fit(X)
    with pytest.raises(ScontrastError, match=r"^complement_moves: expected True or False"):
        LinearGaussianIBP(n_iter=10, burn_in=1, complement_moves="no").fit(X)
    with pytest.raises(ScontrastError, match=r"^noise_scale_moves: expected True or False"):
        LinearGaussianIBP(n_iter=10, burn_in=1, noise_scale_moves=1).fit(X)
    with pytest.raises(ScontrastError, match=r"^death_moves: expected an integer >= 0"):
        LinearGaussianIBP(n_iter=10, burn_in=1, death_moves=-1).fit(X)


def test_parallel_chains_leave_the_warning_filters_as_they_were():
    """The chains' ICA starts silence FastICA inside catch_warnings, which swaps the process-wide
    filters: interleaved in two threads, that left 'ignore' installed and every later warning
    (R-hat, the K cap, other methods') was lost.  A warning raised after the fit must still arrive."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 8)) + (rng.random((300, 1)) < 0.3) * rng.standard_normal(8) * 2
    for seed in range(4):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            before = list(warnings.filters)
            LinearGaussianIBP(n_iter=20, burn_in=10, thin=2, n_chains=2, n_jobs=2, init_features=5,
                              random_state=seed).fit(X)
            assert warnings.filters == before
            warnings.warn("probe after the fit", UserWarning, stacklevel=1)
        assert any(str(w.message) == "probe after the fit" for w in caught)


def test_check_params_returns_nothing_and_the_settings_are_frozen():
    """``_check_params`` only checks; ``_settings`` resolves (n_jobs None: one per core, numbers as floats)."""
    import dataclasses

    model = LinearGaussianIBP(n_jobs=None, alpha=2, alpha_prior=[2, 3], n_iter=np.int64(40), burn_in=10)
    assert model._check_params() is None
    s = model._settings()
    assert s.n_jobs >= 1 and s.alpha == 2.0 and isinstance(s.alpha, float) and s.alpha_prior == (2.0, 3.0)
    assert type(s.n_iter) is int and s.n_iter == 40 and s.sigma_x is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.n_iter = 5


@pytest.mark.parametrize("key", ["split_merge_moves", "birth_death_moves", "move_scans", "likelihood_power"])
def test_removed_sampler_settings_are_refused_by_name(key):
    """The split-merge and birth-death moves and the coarsened posterior are not part of the sampler:
    a config block or a call that still sets one of their settings fails naming it."""
    from pathlib import Path

    import yaml
    from jsonschema import Draft202012Validator

    schema = yaml.safe_load((Path(__file__).resolve().parents[2] / "workflow" / "schemas"
                             / "latent_features.schema.yaml").read_text())
    errors = list(Draft202012Validator(schema).iter_errors({"method": "ibp", "ibp": {key: 1}}))
    assert len(errors) == 1 and f"'{key}' was unexpected" in errors[0].message
    with pytest.raises(TypeError, match=key):
        LinearGaussianIBP(**{key: 1})
