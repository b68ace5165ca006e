"""The tightening: cardinality, and the batched ascent against the single one row by row."""


import numpy as np
import pytest

from scontrast.sparda._test import _Labellings
from scontrast.sparda._tighten import _tighten_rows, tighten

from ._helpers import _planted


def test_tightening_respects_cardinality():
    rng = np.random.default_rng(7)
    X, Y = _planted(100, 90, 10, [2, 5, 7], "mean", rng)
    t = tighten(X, Y, np.ones(10) / np.sqrt(10), 3, 0.0)
    assert np.count_nonzero(t["beta"]) == 3
    assert set(np.flatnonzero(t["beta"])) == {2, 5, 7}


@pytest.mark.parametrize("lam,k", [(0.0, None), (0.03, None), (0.0, 2)])
def test_batched_tightening_is_the_single_tightening_row_by_row(lam, k):
    rng = np.random.default_rng(32)
    X, Y = _planted(40, 35, 6, [0, 1], "var", rng, effect=2.0)
    Z = np.vstack([X, Y])
    Z -= Z.mean(axis=0)
    n = 40
    perms = np.vstack([np.arange(75)] + [rng.permutation(75) for _ in range(4)])
    B0 = rng.normal(size=(5, 6))
    J = _tighten_rows(_Labellings(Z, n), perms, B0, lam, k, 300)
    for p in range(5):
        one = tighten(Z[perms[p, :n]], Z[perms[p, n:]], B0[p], 6 if k is None else k, lam, tol=1e-6)
        # the same ascent; rounding can only flip a step accepted by a hair
        assert J[p] == pytest.approx(one["objective"], rel=1e-3)
        assert J[p] >= one["start_objective"] - 1e-12
