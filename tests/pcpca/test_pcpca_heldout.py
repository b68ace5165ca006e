"""Held-out log-likelihood of PCPCA against PPCA on the same split."""

from __future__ import annotations

import numpy as np
import pytest
from pcpca_helpers import two_groups
from sklearn.exceptions import NotFittedError

from scontrast.core import ScontrastError
from scontrast.pcpca._estimator import PCPCA
from scontrast.pcpca._heldout import heldout_loglik


@pytest.fixture(scope="module")
def pair():
    return two_groups()


def test_heldout_loglik_compares_with_ppca_on_the_same_split(pair):
    X, Y = pair
    model = PCPCA(2, gamma_prime=0.4).fit(X, Y)
    out = heldout_loglik(model, X, Y, 0.2, random_state=0)
    assert out["n_heldout"] == 30 and out["heldout_note"] == ""
    test = np.sort(np.random.default_rng(0).permutation(len(X))[:30])
    train = np.setdiff1d(np.arange(len(X)), test)
    pc = PCPCA(2, gamma_prime=0.4).fit(X[train], Y)
    pp = PCPCA(2, gamma_prime=0.0).fit(X[train], Y)
    assert out["heldout_loglik"] == pytest.approx(pc.score(X[test]), rel=1e-12)
    assert out["heldout_loglik_ppca"] == pytest.approx(pp.score(X[test]), rel=1e-12)
    assert heldout_loglik(model, X, Y, 0.2, random_state=np.random.default_rng(0)) == out
    skipped = heldout_loglik(model, X, Y, 0.0)
    assert skipped["n_heldout"] == 0 and np.isnan(skipped["heldout_loglik"]) and skipped["heldout_note"]
    tiny = heldout_loglik(model, X[:3], Y, 0.9)
    assert np.isnan(tiny["heldout_loglik_ppca"]) and "too small" in tiny["heldout_note"]
    with pytest.raises(ScontrastError, match=r"^holdout_fraction: expected"):
        heldout_loglik(model, X, Y, 1.0)
    with pytest.raises(NotFittedError):
        heldout_loglik(PCPCA(), X, Y)
