"""The compiled assignment (scontrast/_assignment.py) against scipy, with its duals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from scontrast._assignment import _lap_max


def test_compiled_assignment_matches_scipy_and_gives_optimal_duals():
    rng = np.random.default_rng(4)
    for _ in range(400):
        nr, nc = (int(x) for x in rng.integers(1, 12, size=2))
        M = rng.integers(0, 30, size=(nr, nc)).astype(float)
        n = max(nr, nc)
        assign, du, dw = np.empty(nr, dtype=np.int64), np.empty(n), np.empty(n)
        val = _lap_max(M, nr, nc, assign, du, dw)
        r, c = linear_sum_assignment(M, maximize=True)
        assert val == M[r, c].sum()
        assert len(set(assign)) == nr and assign.max() < n
        real = assign < nc
        assert M[np.flatnonzero(real), assign[real]].sum() == val
        # duals of the zero-padded square problem: feasible, tight on the assignment, same optimum
        Mp = np.zeros((n, n))
        Mp[:nr, :nc] = M
        assert np.all(du[:, None] + dw[None, :] >= Mp - 1e-9)
        assert np.allclose(du[np.arange(nr)] + dw[assign], Mp[np.arange(nr), assign])
        assert du.sum() + dw.sum() == pytest.approx(val)
        assert np.allclose(du, np.round(du)) and np.allclose(dw, np.round(dw))  # integer data, integer duals
