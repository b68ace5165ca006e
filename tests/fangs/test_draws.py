"""The draws method (_draws.py): the best sample, by brute force."""

from __future__ import annotations

import numpy as np
import pytest

from scontrast.fangs._draws import draws
from scontrast.fangs._loss import expected_loss
from scontrast.fangs._simulate import posterior_like_samples


def brute_draws(samples, a):
    losses = [expected_loss(samples, s, a) for s in samples]
    return int(np.argmin(losses)), min(losses)


@pytest.mark.parametrize("a", [0.7, 1.0, 1.3])
def test_draws_is_the_best_sample(a):
    rng = np.random.default_rng(6)
    _, samples = posterior_like_samples(20, 3, 25, flip=0.1, rng=rng)
    d = draws(samples, a=a, n_jobs=1)
    idx, loss = brute_draws(samples, a)
    assert d.expected_loss == pytest.approx(loss)
    assert d.index == idx
    assert d.details["expected_losses"].shape == (25,)
