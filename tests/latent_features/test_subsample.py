"""max_cells: the chains on a stratified subsample, every other cell's features drawn per kept sample."""

from __future__ import annotations

import warnings

import anndata as ad
import numpy as np
import pandas as pd
import pytest

from scontrast import tl
from scontrast.latent_features._estimator import LinearGaussianIBP, _subsample
from scontrast.latent_features._extend import extend
from scontrast.latent_features._row_sweep import _seed_numba

FAST = dict(n_iter=60, burn_in=30, thin=3, n_chains=2, random_state=0)


def test_subsample_is_stratified_and_drawn_only_above_max_cells():
    rng = np.random.default_rng(0)
    strata = np.repeat(["a", "b", "c"], [600, 300, 100])
    rows = _subsample(1000, 200, strata, rng)
    assert rows.size == 200 and np.all(np.diff(rows) > 0)
    assert [int(np.sum(strata[rows] == s)) for s in "abc"] == [120, 60, 20]  # in proportion
    tiny = np.r_[np.zeros(999, int), 1]  # a stratum of one cell is still represented
    assert 999 in _subsample(1000, 10, tiny, np.random.default_rng(1))
    state = np.random.default_rng(5)
    before = state.bit_generator.state
    assert np.array_equal(_subsample(1000, 1000, strata, state), np.arange(1000))
    assert state.bit_generator.state == before  # below max_cells: no draw, so the fit is what it was


def test_extended_row_draws_the_exact_conditional():
    # one feature, Gaussian noise: one Gibbs scan draws z from its exact conditional
    A = np.array([[0.5, -0.2, 0.1], [1.0, 0.5, -1.0]])  # baseline, then the feature
    x = np.array([0.9, 0.1, -0.4])
    Y = np.tile(x, (20000, 1))
    m = np.array([100, 30])
    _seed_numba(3)
    state = (np.zeros((20000, 2), dtype=np.uint8), np.ones(20000))
    z = extend(Y, A, 2, 1, m, 100, 0.8, None, 1, state, block_moves=0)
    pi = 30 / 101
    r0 = x - A[0]
    lo = np.log(pi / (1 - pi)) + (r0 @ A[1] - 0.5 * A[1] @ A[1]) / 0.8
    assert abs(z.mean() - 1 / (1 + np.exp(-lo))) < 4 * np.sqrt(0.25 / 20000)
    assert np.array_equal(state[0][:, 1], z[:, 0])  # each row's state is kept for its next draw


def test_extended_rows_are_drawn_like_the_chains_own():
    # two features that explain the same direction: the posterior of (z1, z2) given x is bimodal;
    # single flips from one mode cannot reach the other, the block moves can. Over many scans the
    # rows' joint frequencies match the exact conditional (4 states enumerated)
    A = np.array([[0.0, 0.0], [1.0, 1.0], [1.0, 0.8]])
    x = np.array([1.0, 0.95])
    n = 4000
    Y = np.tile(x, (n, 1))
    m = np.array([500, 200, 200])
    _seed_numba(7)
    state = (np.zeros((n, 3), dtype=np.uint8), np.ones(n))
    counts = np.zeros(4)
    for _ in range(30):
        z = extend(Y, A, 3, 1, m, 500, 0.05, None, 1, state, block_moves=4)
        counts += np.bincount(z[:, 0] * 2 + z[:, 1], minlength=4)
    pi = 200 / 501
    logp = np.array([np.log(1 - pi) * (2 - a - b) + np.log(pi) * (a + b) - 0.5 * np.sum((x - a * A[1] - b * A[2]) ** 2) / 0.05
                     for a in (0, 1) for b in (0, 1)])
    exact = np.exp(logp - logp.max()) / np.exp(logp - logp.max()).sum()
    assert np.abs(counts / counts.sum() - exact).max() < 0.02, (counts / counts.sum(), exact)


def _planted(n=900, seed=0):
    """Two well separated features on 40 dims (noise sd 0.5), and the truth."""
    rng = np.random.default_rng(seed)
    Z = (rng.random((n, 2)) < [0.4, 0.3]).astype(np.uint8)
    A = np.zeros((2, 40))
    A[0, :20], A[1, 20:] = 2.0, -2.0
    return Z @ A + rng.normal(0, 0.5, (n, 40)), Z


def test_below_max_cells_nothing_changes():
    X, _ = _planted(300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = LinearGaussianIBP(**FAST, max_cells=None).fit(X)
        b = LinearGaussianIBP(**FAST, max_cells=300).fit(X, strata=np.arange(300) % 2)
    assert all(np.array_equal(x, y) for x, y in zip(a.samples_, b.samples_, strict=True))
    assert np.array_equal(a.log_joint_, b.log_joint_) and np.array_equal(b.fitted_cells_, np.arange(300))


def test_cells_outside_the_subsample_get_their_planted_features():
    X, Z = _planted(900)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = LinearGaussianIBP(**FAST, max_cells=300).fit(X, strata=Z[:, 0])
    rows = model.fitted_cells_
    assert rows.size == 300 and all(s.shape[0] == 900 for s in model.samples_)
    others = np.setdiff1d(np.arange(900), rows)
    last = model.samples_[-1].astype(float)
    # each planted feature is a column of the sample; on the cells the chains never saw it is right
    for k in range(2):
        best = max(range(last.shape[1]), key=lambda j: abs(np.corrcoef(last[:, j], Z[:, k])[0, 1]))
        agree = np.mean(last[others, best] == Z[others, k])
        assert max(agree, 1 - agree) > 0.97
    # every sample has a row per cell, and the subsample's rows hold the chain's final state in Z_
    assert model.Z_.shape[0] == 900


def test_front_end_records_the_subsample():
    X, Z = _planted(600)
    obs = pd.DataFrame({"scontrast_target": Z[:, 0].astype(bool)}, index=[f"c{i}" for i in range(600)])
    a = ad.AnnData(X=X.astype(np.float32), obs=obs,
                   var=pd.DataFrame({"highly_variable": True}, index=[f"g{j}" for j in range(40)]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        small = tl.latent_features(a, method="ibp", n_genes=40, **FAST, copy=True)
        sub = tl.latent_features(a, method="ibp", n_genes=40, max_cells=200, **FAST, copy=True)
    assert "subsample" not in small.uns["latent_features"]
    info = sub.uns["latent_features"]["subsample"]
    assert info["n_cells"] == 200 and info["of"] == 600
    assert sub.uns["latent_features"]["params"]["max_cells"] == 200
    assert sub.uns["latent_features"]["samples"].shape[0] == 600


def test_strata_of_the_wrong_length_are_refused():
    from scontrast.core import ScontrastError

    X, _ = _planted(50)
    with pytest.raises(ScontrastError, match="strata: expected one label per cell"):
        LinearGaussianIBP(**FAST, max_cells=20).fit(X, strata=np.zeros(5))
