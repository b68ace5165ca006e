"""The two-task paths of the cPCA solvers (pairs of single-threaded tasks side by side)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from scontrast.core import blas_threads
from scontrast.cpca._eigen import _congruence_two_tasks, _gram_two_tasks
from scontrast.cpca._estimator import CPCA
from scontrast.cpca._moments import _covariance
from scontrast.cpca._threads import _two_tasks

from ._helpers import assert_same_fit


def test_two_task_paths_match_the_reference_eigh(wide):
    """With two BLAS threads allowed, the covariance and gram solvers run pairs of single-threaded
    tasks side by side (halved products, the grid split in two); the answers are those of eigh."""
    from threadpoolctl import threadpool_limits

    X, Y, _ = wide
    full = CPCA(solver="full", random_state=0).fit(X, Y)
    with threadpool_limits(2):
        assert _two_tasks()
        with blas_threads(1):
            assert not _two_tasks()  # the pairs' own setting: one thread per task
        assert_same_fit(full, CPCA(solver="covariance", random_state=0).fit(X, Y))
        assert_same_fit(full, CPCA(solver="gram", random_state=0).fit(sp.csr_matrix(X), Y))
        # the halved building blocks against direct products
        rng = np.random.default_rng(1)
        A = rng.normal(size=(40, 31))
        with blas_threads(1):
            G = _gram_two_tasks(A)
            np.testing.assert_allclose(G, A.T @ A, rtol=1e-12, atol=1e-12)
            assert np.array_equal(G, G.T)
            S = A.T @ A + np.eye(31)
            Q = np.linalg.qr(rng.normal(size=(31, 31)))[0]
            for L in (np.linalg.cholesky(S), None):
                np.testing.assert_allclose(_congruence_two_tasks(S, Q, L), Q.T @ S @ Q, rtol=1e-10, atol=1e-10)
            mean = A.mean(axis=0)
            np.testing.assert_allclose(_covariance(A, mean, np.ones(31), two_tasks=True), np.cov(A.T),
                                       rtol=1e-12, atol=1e-12)
        # tiny problems forced onto the dense solvers
        Xs, Ys = X[:, :3], Y[:, :3]
        for solver in ("covariance", "gram"):
            small = CPCA(solver=solver, n_components=1, alpha=[0.0, 2.0]).fit(Xs, Ys)
            ref = CPCA(solver="full", n_components=1, alpha=[0.0, 2.0]).fit(Xs, Ys)
            np.testing.assert_allclose(np.abs(np.sum(small.components_ * ref.components_, axis=2)), 1, atol=1e-10)
    assert not _two_tasks()  # the module fixture's one thread is back
