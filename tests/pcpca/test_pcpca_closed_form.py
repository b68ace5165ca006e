"""The admissible range of gamma (max_gamma) against the reference package's bound and the closed form."""

from __future__ import annotations

import numpy as np
import pytest
from pcpca_helpers import two_groups

from scontrast.pcpca._closed_form import max_gamma
from scontrast.pcpca._estimator import PCPCA

Ref = pytest.importorskip("pcpca").PCPCA


@pytest.fixture(scope="module")
def pair():
    return two_groups()


def test_reference_accepts_an_inadmissible_gamma_that_we_reject():
    """Target variance dominated by one direction, background by another: the reference bound
    (sum of target eigenvalues from index k, not k+1) admits a gamma' where sigma^2 < 0."""
    rng = np.random.default_rng(3)
    n = m = 400
    X = rng.normal(size=(n, 3)) * np.sqrt([10.0, 1.0, 1.0])
    Y = rng.normal(size=(m, 3)) * np.sqrt([0.1, 0.1, 2.0])
    X, Y = X - X.mean(0), Y - Y.mean(0)
    bound = max_gamma(X, Y, 1)
    ref_bound = Ref(n_components=1).get_gamma_bound(X.T, Y.T)  # gamma' units, as its covariances are
    assert ref_bound > 1.0 > bound * m / n  # the reference would allow any gamma' < 1
    gamma = 0.5 * (bound + 1.0)
    ref = Ref(n_components=1, gamma=gamma)
    ref.fit(X.T, Y.T)
    assert ref.sigma2_mle < 0  # invalid answer, silently returned
    with pytest.raises(ValueError, match=r"need gamma < "):
        PCPCA(1, gamma=gamma).fit(X, Y)
    # The corrected (index k+1) Weyl bound is sufficient, hence below the exact bound.
    mu = np.sort(np.linalg.eigvalsh(X.T @ X / n))[::-1]
    rho = np.linalg.eigvalsh(Y.T @ Y / m).max()
    assert mu[1:].sum() / (2 * rho) <= bound * m / n


def test_max_gamma_is_the_end_of_the_admissible_range(pair):
    X, Y = pair
    bound = max_gamma(X, Y, 2)
    assert 0 < bound < len(X) / len(Y)  # here sigma^2 > 0 binds, not n - gamma m > 0
    PCPCA(2, gamma=0.999 * bound).fit(X, Y)
    with pytest.raises(ValueError, match=f"need gamma < {bound:.6g}"):
        PCPCA(2, gamma=1.001 * bound).fit(X, Y)
    # Brute force: every gamma on a grid below the bound is admissible, every one above is not.
    for g in np.linspace(0.0, 1.5 * bound, 31):
        if g < bound:
            model = PCPCA(2, gamma=g).fit(X, Y)
            assert model.sigma2_ > 0 and np.all(np.isfinite(model.W_))
        else:
            with pytest.raises(ValueError, match="not admissible"):
                PCPCA(2, gamma=g).fit(X, Y)


def test_max_gamma_when_n_minus_gamma_m_binds():
    """A background with little variance: sigma^2 stays positive, so the bound is n/m."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(90, 6)) * 2.0
    Y = rng.normal(size=(60, 6)) * 0.1
    assert max_gamma(X, Y, 2) == pytest.approx(90 / 60)
    PCPCA(2, gamma_prime=0.999).fit(X, Y)
    with pytest.raises(ValueError, match=r"n - gamma\*m"):
        PCPCA(2, gamma_prime=1.0).fit(X, Y)


def test_no_admissible_gamma_when_target_has_rank_k():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 1)) @ rng.normal(size=(1, 5))
    Y = rng.normal(size=(30, 5))
    with pytest.raises(ValueError, match="no gamma is admissible"):
        max_gamma(X, Y, 1)
