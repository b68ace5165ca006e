"""Sweetening (_sweetening.py): incremental bookkeeping equals recomputation; repairs an estimate."""

from __future__ import annotations

import numpy as np
import pytest

from scontrast.fangs._loss import _Packed, expected_loss, faro_loss
from scontrast.fangs._simulate import posterior_like_samples
from scontrast.fangs._sweetening import _sweeten, _Sweetener
from scontrast.feature_samples import check_samples

from ._helpers import rand_fa


@pytest.mark.parametrize("a", [0.5, 1.0, 1.5])
def test_incremental_flips_equal_recomputation(a):
    rng = np.random.default_rng(int(10 * a))
    truth, samples = posterior_like_samples(25, 4, 30, flip=0.1, rng=rng)
    samples += [rand_fa(rng, 25, int(rng.integers(0, 6)), 0.3) for _ in range(5)]  # off-mode samples, K_b = 0 too
    P = _Packed(check_samples(samples))
    state = _Sweetener(P, samples[0], a)
    for _ in range(250):
        i, j = int(rng.integers(25)), int(rng.integers(state.width))
        delta, pending = state.evaluate(i, j, early_stop=False)
        flipped = state.E.copy()
        flipped[i, j] ^= 1
        truth_loss = expected_loss(samples, flipped, a)
        assert state.loss() + delta / P.B == pytest.approx(truth_loss, abs=1e-9)
        quick, _ = state.evaluate(i, j, early_stop=True)
        assert (quick is None and truth_loss >= state.loss() - 1e-9) or quick == pytest.approx(delta)
        if rng.random() < 0.5:  # accept arbitrary flips so the estimate wanders (features born and dropped)
            state.commit(i, j, pending)
            assert state.loss() == pytest.approx(expected_loss(samples, state.estimate(), a), abs=1e-9)
            if not state.has_empty_column():  # what the search does when every column became a feature
                state = _Sweetener(P, state.estimate(), a, extra=2)
            Mp = np.zeros((P.B, state.width, state.width))  # the duals stay feasible and tight
            for b in range(P.B):
                Mp[b, :, :P.k[b]] = state.O[:, P.off[b]:P.off[b + 1]]
            assert np.all(state.du[:, :, None] + state.dw[:, None, :] >= Mp - 1e-9)
            rows = np.arange(state.width)
            assert np.allclose(np.take_along_axis(state.dw, state.match, 1) + state.du,
                               Mp[np.arange(P.B)[:, None], rows, state.match])
            assert np.allclose(state.du.sum(1) + state.dw.sum(1), state.v)


def test_sweetening_repairs_a_damaged_estimate():
    truth, samples = posterior_like_samples(40, 4, 60, flip=0.05, rng=11)
    P = _Packed(check_samples(samples))
    damaged = truth ^ (np.random.default_rng(0).random(truth.shape) < 0.1).astype(np.uint8)
    est, loss, iterations, accepted = _sweeten(P, damaged, 1.0, 3000, None, seed=0)
    assert iterations == 3000 and accepted >= 10
    assert loss == pytest.approx(expected_loss(samples, est))
    assert loss < expected_loss(samples, damaged) - 5
    assert faro_loss(est, truth) < faro_loss(damaged, truth)
