"""The two-task paths of the cPCA solvers (pairs of single-threaded tasks side by side)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from scontrast.core import blas_threads
from scontrast.cpca._basis import (
    _back_transform,
    _gram_of_halves,
    _gram_two_tasks,
    _split_block,
    _tridiagonal_split_eigh,
)
from scontrast.cpca._estimator import CPCA
from scontrast.cpca._moments import _covariance
from scontrast.cpca._threads import _resolve_threads

from ._helpers import assert_same_fit


def test_two_task_paths_match_the_reference_eigh(wide):
    """With two BLAS threads allowed, the covariance and gram solvers run pairs of single-threaded
    tasks side by side (halved products, the grid split in two); the answers are those of eigh."""
    from threadpoolctl import threadpool_limits

    X, Y, _ = wide
    full = CPCA(solver="full", random_state=0).fit(X, Y)
    with threadpool_limits(2):
        assert _resolve_threads(None) == 2
        with blas_threads(1):
            assert _resolve_threads(None) == 1  # the pairs' own setting: one thread per task
        assert_same_fit(full, CPCA(solver="covariance", random_state=0).fit(X, Y))
        assert_same_fit(full, CPCA(solver="gram", random_state=0).fit(sp.csr_matrix(X), Y))
        # the halved building blocks against direct products
        rng = np.random.default_rng(1)
        A = rng.normal(size=(40, 31))
        with blas_threads(1):
            G = _gram_two_tasks(A)
            np.testing.assert_allclose(G, A.T @ A, rtol=1e-12, atol=1e-12)
            assert np.array_equal(G, G.T)
            G12 = _gram_of_halves(A[:, :12], A[:, 12:])  # unequal blocks
            np.testing.assert_allclose(G12, A.T @ A, rtol=1e-12, atol=1e-12)
            assert np.array_equal(G12, G12.T)
            # C_Y's basis in parts: tridiagonal reduction, eigensolver of its two halves, then the
            # back-transformation of the two column blocks; in it C_Y is diagonal plus low rank
            S = A.T @ A + np.eye(31)
            top = np.linalg.eigvalsh(S).max()
            for rows, sizes in ((40, [31]), (16, [16, 15]), (8, [8, 8, 7, 8]), (5, [5, 5, 6, 5, 5, 5])):
                background, blocks, reflectors = _tridiagonal_split_eigh(S.copy(), rows=rows)
                assert [b.shape[0] for b in blocks] == sizes and background.beta.size == len(sizes) - 1
                halves = [_split_block(blocks, first) for first in (True, False)]
                assert halves[0].shape[1] == (sum(sizes[:len(sizes) // 2]) if len(sizes) > 1 else 15)
                Q = np.hstack([_back_transform(reflectors, half) for half in halves])
                np.testing.assert_allclose(Q.T @ Q, np.eye(31), atol=1e-13)
                np.testing.assert_allclose(Q.T @ S @ Q, background.dense(), atol=1e-12 * top)
                assert abs(background.norm - top) <= 1e-12 * top
            mean = A.mean(axis=0)
            np.testing.assert_allclose(_covariance(A, mean, np.ones(31), two_tasks=True), np.cov(A.T),
                                       rtol=1e-12, atol=1e-12)
        # tiny problems forced onto the dense solvers
        Xs, Ys = X[:, :3], Y[:, :3]
        for solver in ("covariance", "gram"):
            small = CPCA(solver=solver, n_components=1, alpha=[0.0, 2.0]).fit(Xs, Ys)
            ref = CPCA(solver="full", n_components=1, alpha=[0.0, 2.0]).fit(Xs, Ys)
            np.testing.assert_allclose(np.abs(np.sum(small.components_ * ref.components_, axis=2)), 1, atol=1e-10)
    assert _resolve_threads(None) == 1  # the module fixture's one thread is back


def test_two_task_covariance_path_with_a_singular_target_covariance(wide):
    """Fewer target cells than genes: C_X has no Cholesky factor, so the pipelines (two tasks and
    one thread) form Q' C_X Q from the products C_X Q; the answers are still those of the dense eigh."""
    from threadpoolctl import threadpool_limits

    X, Y, _ = wide
    X = X[:150]  # 150 cells, 300 genes
    full = CPCA(solver="full", random_state=0).fit(X, Y)
    assert_same_fit(full, CPCA(solver="covariance", random_state=0).fit(X, Y))  # the one-thread pipeline likewise
    with threadpool_limits(2):
        assert_same_fit(full, CPCA(solver="covariance", random_state=0).fit(X, Y))
        # the smallest problem the two-task pipeline takes (d = 4)
        small = CPCA(solver="covariance", n_components=1, alpha=[0.0, 2.0]).fit(X[:, :4], Y[:, :4])
    ref = CPCA(solver="full", n_components=1, alpha=[0.0, 2.0]).fit(X[:, :4], Y[:, :4])
    np.testing.assert_allclose(np.abs(np.sum(small.components_ * ref.components_, axis=2)), 1, atol=1e-10)


def test_side_by_side_records_the_tasks_cpu_times():
    from scontrast.cpca import _threads

    def spin():
        a = np.random.default_rng(0).normal(size=(200, 200))
        for _ in range(20):
            a = a @ a.T / 200
        return 1

    assert _threads._side_by_side(lambda: 1, lambda: 2) == (1, 2)
    _threads._CPU_RECORD = pairs = []
    try:
        assert _threads._side_by_side(spin, lambda: 2) == (1, 2)
    finally:
        _threads._CPU_RECORD = None
    assert len(pairs) == 1 and pairs[0][0] > 0 and pairs[0][1] >= 0
    _threads._side_by_side(lambda: 1, lambda: 2)
    assert len(pairs) == 1  # recording is off again


def test_n_jobs_follows_scikit_learn():
    """None: the BLAS's current setting; -1: every core (joblib's count); a positive number: itself."""
    from joblib import cpu_count
    from threadpoolctl import threadpool_limits

    from scontrast.core import ScontrastError

    with threadpool_limits(3):
        assert _resolve_threads(None) == 3
    assert _resolve_threads(None) == 1  # the module fixture's setting
    assert _resolve_threads(-1) == cpu_count()
    assert _resolve_threads(5) == 5
    for bad in (0, 1.5, True, "2"):
        with pytest.raises(ScontrastError, match="n_jobs"):
            CPCA(n_jobs=bad).fit(np.eye(3), np.eye(3))


@pytest.mark.parametrize(("limit", "n_jobs", "blas_inside", "tasks"),
                         [(8, None, 8, 1), (1, 8, 8, 1), (2, None, 1, 2), (8, 1, 1, 1)])
def test_the_thread_count_reaches_the_blas(wide, monkeypatch, limit, n_jobs, blas_inside, tasks):
    """The fit's thread count is what the BLAS runs with inside the solver (threadpoolctl's own
    reading there), or, with two, one thread in each of two tasks; it is recorded in n_threads_.
    The answers are those of the dense eigh whatever the count."""
    import threading

    from threadpoolctl import threadpool_info, threadpool_limits

    from scontrast.cpca import _solve

    seen, original = [], _solve._tridiagonal_split_eigh

    def spy(*args, **kwargs):
        seen.append((threading.get_ident(), min(lib["num_threads"] for lib in threadpool_info()
                                                if lib["user_api"] == "blas")))
        return original(*args, **kwargs)

    monkeypatch.setattr(_solve, "_tridiagonal_split_eigh", spy)
    X, Y, _ = wide
    X, Y = X[:, :40], Y[:, :40]  # small: eight BLAS threads on a two-core machine spin at every call
    full = CPCA(solver="full", random_state=0).fit(X, Y)
    with threadpool_limits(limit):
        model = CPCA(solver="covariance", random_state=0, n_jobs=n_jobs).fit(X, Y)
        assert min(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas") == limit
    assert model.n_threads_ == (limit if n_jobs is None else n_jobs)
    assert [blas for _, blas in seen] == [blas_inside]
    # the background's reduction runs on the pool's worker thread in the two-task pipeline
    assert (seen[0][0] != threading.get_ident()) == (tasks == 2)
    assert_same_fit(full, model)
