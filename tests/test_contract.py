"""Every estimator honours the scikit-learn contract.

Parameters stored untouched in ``__init__`` (``clone``, ``get_params``, ``set_params``
work), validation in ``fit``, ``NotFittedError`` before fit, ``random_state`` as None, an
int or a ``numpy.random.Generator``, reproducible for a given seed, one error type
(``ScontrastError``, a ``ValueError``) with one message style for bad parameters.
The generic checks of ``sklearn.utils.estimator_checks`` that do not assume ``fit(X, y)``
with a label vector run on all of them; QUADRO, a classifier, passes ``check_estimator``
whole (tests/quadro/test_estimator.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import (
    check_get_params_invariance,
    check_no_attributes_set_in_init,
    check_parameters_default_constructible,
    check_set_params,
)

from scontrast.core import ScontrastError
from scontrast.cpca import CPCA, KernelCPCA
from scontrast.latent_features import LinearGaussianIBP
from scontrast.pcpca import PCPCA
from scontrast.quadro import QUADRO
from scontrast.sparda import SPARDA


def _two_groups(seed=0, n=40, m=36, d=6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, 0] *= 2.5
    return X, rng.normal(size=(m, d))


def _labelled(seed=0):
    X, Y = _two_groups(seed)
    return np.vstack([X, Y]), np.r_[np.ones(len(X), bool), np.zeros(len(Y), bool)]


# name -> (small, fast estimator, fit arguments, callables that need a fitted model)
CASES = {
    "SPARDA": (lambda **kw: SPARDA(lam=0.05, n_permutations=0, relax_max_iter=5, **kw), _two_groups,
               lambda m, X: m.transform(X)),
    "CPCA": (lambda **kw: CPCA(alpha="auto", n_alphas=6, **kw), _two_groups, lambda m, X: m.transform(X)),
    "KernelCPCA": (lambda **kw: KernelCPCA(alpha=[1.0, 2.0], **kw), _two_groups, lambda m, X: m.transform(X)),
    "PCPCA": (lambda **kw: PCPCA(**kw), _two_groups, lambda m, X: m.transform(X)),
    "QUADRO": (lambda **kw: QUADRO(lambda1=0.1, lambda2=0.1, **kw), _labelled, lambda m, X: m.predict(X)),
    "LinearGaussianIBP": (lambda **kw: LinearGaussianIBP(n_iter=30, burn_in=10, thin=1, **kw),
                          lambda seed=0: (_two_groups(seed)[0],), lambda m, X: m.traces()["log_joint"]),
}


@pytest.fixture(params=sorted(CASES))
def case(request):
    return request.param, *CASES[request.param]


def test_is_a_scikit_learn_estimator(case):
    name, make, _, _ = case
    est = make()
    assert isinstance(est, BaseEstimator)
    check_parameters_default_constructible(name, est)
    check_no_attributes_set_in_init(name, est)
    check_get_params_invariance(name, est)
    check_set_params(name, est)
    twin = clone(est)
    assert twin.get_params() == est.get_params() and twin is not est


def test_not_fitted_error_before_fit(case):
    _, make, data, fitted_call = case
    with pytest.raises(NotFittedError):
        fitted_call(make(), data()[0])


def test_random_state_accepts_none_int_and_generator_and_is_reproducible(case):
    _, make, data, fitted_call = case
    args = data()
    make(random_state=None).fit(*args)
    a = fitted_call(make(random_state=3).fit(*args), args[0])
    b = fitted_call(make(random_state=3).fit(*args), args[0])
    c = fitted_call(make(random_state=np.random.default_rng(3)).fit(*args), args[0])
    d = fitted_call(make(random_state=np.random.default_rng(3)).fit(*args), args[0])
    for u, v in ((a, b), (c, d)):
        np.testing.assert_array_equal(np.asarray(u, dtype=float), np.asarray(v, dtype=float))


def test_bad_random_state_is_one_line(case):
    _, make, data, _ = case
    with pytest.raises(ScontrastError, match=r"^random_state: expected"):
        make(random_state="seven").fit(*data())
    with pytest.raises(ScontrastError, match=r"^random_state: expected"):
        make(random_state=-1).fit(*data())


def test_parameters_are_checked_in_fit_not_init(case):
    """A bad value is stored as given and refused by ``fit`` (as scikit-learn does)."""
    name, make, data, _ = case
    est = make()
    first = sorted(est.get_params())[0]
    est.set_params(**{first: "not a value"})
    assert est.get_params()[first] == "not a value"
    with pytest.raises(ValueError):
        est.fit(*data())
