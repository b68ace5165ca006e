"""The GIL-free LAPACK calls of the 'covariance' solver (scontrast.cpca._lapack)."""

from __future__ import annotations

import sys
import threading
from functools import partial

import numpy as np
import pytest
from scipy.linalg import lapack

from scontrast.core import blas_threads
from scontrast.cpca import _lapack


def _spd(d, seed=0):
    A = np.random.default_rng(seed).normal(size=(2 * d, d))
    return A.T @ A / (2 * d)


@pytest.fixture(params=[True, False], ids=["pointers", "fallback"])
def gil_free(request, monkeypatch):
    """Both paths: the ctypes pointers (where this scipy's signatures allow them) and the fallback."""
    if request.param and not _lapack.GIL_FREE:
        pytest.skip("this scipy's cython_lapack signatures differ: the fallback is in use")
    monkeypatch.setattr(_lapack, "GIL_FREE", request.param)
    return request.param


@pytest.mark.parametrize("d", [2, 7, 130])
def test_bitwise_the_results_of_scipy_linalg_lapack(d, gil_free):
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


def test_one_by_one(gil_free):
    """(scipy's dstevd wrapper refuses an empty off-diagonal; LAPACK takes d = 1.)"""
    packed = np.array([[4.0]], order="F")
    diag, off, tau = _lapack.dsytrd_lower(packed)
    assert diag.tolist() == [4.0] and off.size == tau.size == 0
    lam, S = _lapack.dstevd(diag, off)
    assert lam.tolist() == [4.0] and S.tolist() == [[1.0]]

def test_the_eigendecomposition_it_gives_is_that_of_the_matrix(gil_free):
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
    """Another Python thread runs while dsytrd runs. Python hands the GIL over only when its
    holder releases it (the switch interval is set out of reach here), so a counting thread
    advances during the call only if the call releases the GIL: with scipy's own wrapper (the
    fallback) it cannot advance at all. No clock decides it."""
    if not _lapack.GIL_FREE:
        pytest.skip("this scipy's cython_lapack signatures differ: the scipy.linalg.lapack fallback is in use")
    C = _spd(600, seed=1)
    count, stop = [0], threading.Event()

    def counter():
        while not stop.is_set():
            count[0] += 1
            stop.wait(1e-4)  # releases the GIL, so the main thread gets it back

    def advance(call):
        before = count[0]
        call()
        return count[0] - before

    interval = sys.getswitchinterval()
    worker = threading.Thread(target=counter)
    worker.start()
    try:
        sys.setswitchinterval(100.0)
        with blas_threads(1):
            lwork = int(lapack.dsytrd_lwork(600, lower=1)[0])
            # the copies first: numpy releases the GIL while it copies
            ours = max(advance(partial(_lapack.dsytrd_lower, C.copy().T)) for _ in range(5))
            held = max(advance(partial(lapack.dsytrd, C.copy().T, lower=1, lwork=lwork, overwrite_a=1))
                       for _ in range(3))
    finally:
        sys.setswitchinterval(interval)
        stop.set()
        worker.join()
    assert ours > 0 and held == 0


def test_pointers_only_with_the_expected_signatures(monkeypatch):
    """The ctypes pointers are used only when every capsule's C signature is the one the calls
    pass; an ILP64 integer or a changed argument list turns them off (the scipy wrappers then)."""
    import scipy.linalg.cython_lapack as cython_lapack

    found = {name: _lapack._capsule_signature(cython_lapack.__pyx_capi__[name]).replace(_lapack._DOUBLE_TYPEDEF, "d")
             for name in _lapack._SIGNATURES}
    assert _lapack.GIL_FREE == (found == _lapack._SIGNATURES) == (_lapack._routines() is not None)
    original = _lapack._capsule_signature
    for change in (("int *", "int64_t *"), ("char *, int *", "char *, int *, int *")):
        monkeypatch.setattr(_lapack, "_capsule_signature", lambda c, a=change: original(c).replace(*a, 1))
        assert _lapack._routines() is None
    monkeypatch.setattr(_lapack, "_capsule_signature", original)
    monkeypatch.setattr(_lapack.ctypes, "sizeof", lambda t: 8)
    assert _lapack._routines() is None


def test_inputs_lapack_cannot_read_are_refused(gil_free):
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


def test_a_lapack_failure_is_an_error(gil_free):
    with pytest.raises(np.linalg.LinAlgError, match="dstevd"):
        _lapack.dstevd(np.array([1.0, np.nan, 2.0]), np.array([0.5, 0.5]))
