"""The GIL-free LAPACK calls of the 'covariance' solver (scontrast.cpca._lapack)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from scipy.linalg import lapack

from scontrast.core import blas_threads
from scontrast.cpca import _lapack


def _spd(d, seed=0):
    A = np.random.default_rng(seed).normal(size=(2 * d, d))
    return A.T @ A / (2 * d)


@pytest.mark.parametrize("d", [2, 7, 130])
def test_bitwise_the_results_of_scipy_linalg_lapack(d):
    """Same routines of the same library, same workspaces: the same bits as scipy's wrappers."""
    C = _spd(d)
    ref_packed, ref_diag, ref_off, ref_tau, info = lapack.dsytrd(
        C.copy().T, lower=1, lwork=int(lapack.dsytrd_lwork(d, lower=1)[0]))
    assert info == 0
    packed = C.copy().T
    diag, off, tau = _lapack.dsytrd_lower(packed)
    for ours, ref in ((packed, ref_packed), (diag, ref_diag), (off, ref_off), (tau, ref_tau)):
        assert np.array_equal(ours, ref)

    lam, S = _lapack.dstevd(diag, off)
    ref_lam, ref_S, info = lapack.dstevd(diag, off, compute_v=1)
    assert info == 0 and np.array_equal(lam, ref_lam) and np.array_equal(S, ref_S)
    assert np.array_equal(diag, ref_diag) and np.array_equal(off, ref_off)  # inputs untouched

    V = packed[1:, :-1]  # a strided view: leading dimension d, not d - 1
    block = np.asfortranarray(S[1:, : max(1, d // 2)])
    lwork = int(lapack.dormqr("L", "N", V, tau, block.copy(order="F"), lwork=-1)[1][0])
    ref = lapack.dormqr("L", "N", V, tau, block.copy(order="F"), lwork=max(lwork, 1))[0]
    out = np.full((d, block.shape[1]), np.nan, order="F")  # out[1:] is a view, leading dimension d
    out[1:] = block
    _lapack.dormqr(V, tau, out[1:])
    assert np.array_equal(out[1:], ref)


def test_one_by_one():
    """(scipy's dstevd wrapper refuses an empty off-diagonal; LAPACK takes d = 1.)"""
    packed = np.array([[4.0]], order="F")
    diag, off, tau = _lapack.dsytrd_lower(packed)
    assert diag.tolist() == [4.0] and off.size == tau.size == 0
    lam, S = _lapack.dstevd(diag, off)
    assert lam.tolist() == [4.0] and S.tolist() == [[1.0]]

def test_the_eigendecomposition_it_gives_is_that_of_the_matrix():
    d = 60
    C = _spd(d, seed=3)
    packed = C.copy().T
    diag, off, tau = _lapack.dsytrd_lower(packed)
    lam, S = _lapack.dstevd(diag, off)
    Q = np.empty((d, d), order="F")
    Q[0], Q[1:] = S[0], S[1:]
    _lapack.dormqr(packed[1:, :-1], tau, Q[1:])
    np.testing.assert_allclose(lam, np.linalg.eigvalsh(C), rtol=1e-12)
    np.testing.assert_allclose(Q.T @ Q, np.eye(d), atol=1e-13)
    np.testing.assert_allclose(Q @ np.diag(lam) @ Q.T, C, atol=1e-13 * lam.max())


def test_the_gil_is_released_during_the_call():
    """A Python thread keeps running while dsytrd runs: the longest pause between its steps within
    the call is a small part of the call. scipy's own wrapper holds the GIL for the whole call,
    so there the other thread stands still for about all of it (the reason for this module).
    The best of three calls, so that a thread the OS deschedules for a while on a busy machine
    does not decide it."""
    C = _spd(1200, seed=1)
    stamps, stop = [], threading.Event()

    def stamp():
        while not stop.is_set():
            stamps.append(time.perf_counter())

    def longest_pause(call):
        start = time.perf_counter()
        call()
        end = time.perf_counter()
        inside = [t for t in stamps if start < t < end]
        return float(np.diff([start, *inside, end]).max()) / (end - start)

    worker = threading.Thread(target=stamp)
    worker.start()
    try:
        with blas_threads(1):
            pause = min(longest_pause(lambda: _lapack.dsytrd_lower(C.copy().T)) for _ in range(3))
    finally:
        stop.set()
        worker.join()
    assert pause < 0.5


def test_inputs_lapack_cannot_read_are_refused():
    C = _spd(5)
    with pytest.raises(ValueError, match="dsytrd A"):
        _lapack.dsytrd_lower(C.astype(np.float32).T)
    with pytest.raises(ValueError, match="dsytrd A"):
        _lapack.dsytrd_lower(np.asfortranarray(C[:, :4]))
    with pytest.raises(ValueError, match="dormqr C"):
        _lapack.dormqr(np.asfortranarray(C), np.zeros(4), np.ascontiguousarray(C[:, :3]))
    frozen = np.asfortranarray(C)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="dormqr C"):
        _lapack.dormqr(np.asfortranarray(C), np.zeros(4), frozen)


def test_a_lapack_failure_is_an_error():
    with pytest.raises(np.linalg.LinAlgError, match="dstevd"):
        _lapack.dstevd(np.array([1.0, np.nan, 2.0]), np.array([0.5, 0.5]))
