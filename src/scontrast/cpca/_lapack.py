"""Three LAPACK routines of the 'covariance' solver, called without holding Python's GIL.

``scipy.linalg.lapack``'s wrappers of dsytrd, dstevd and dormqr hold the GIL for the whole
call (tens of milliseconds at d = 1,000), so the task running beside one of them in
:func:`scontrast.cpca._threads._side_by_side` stalls at its next Python step until the call
returns: the tridiagonal reduction of C_Y and the formation of C_X, meant to overlap, ran one
after the other. Here the same routines of the same library are reached through the function
pointers that ``scipy.linalg.cython_lapack`` exports (as numba does) and called through
ctypes, which releases the GIL for the length of a foreign call. Same routine, same inputs,
same workspace sizes: the results are bitwise those of ``scipy.linalg.lapack``.

Matrices are column-major float64, as LAPACK reads them; the functions check what they rely on.
"""

from __future__ import annotations

import ctypes

import numpy as np
import scipy.linalg.cython_lapack as _cython_lapack

_P = ctypes.c_void_p


def _capsule_pointer(capsule) -> int:
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get_pointer(capsule, get_name(capsule))


def _routine(name: str, n_args: int):
    """The LAPACK routine ``name`` (every argument a pointer, as in Fortran), GIL released when called."""
    return ctypes.CFUNCTYPE(None, *([_P] * n_args))(_capsule_pointer(_cython_lapack.__pyx_capi__[name]))


_DSYTRD = _routine("dsytrd", 10)
_DSTEVD = _routine("dstevd", 11)
_DORMQR = _routine("dormqr", 13)


def _int(value: int):
    return ctypes.byref(ctypes.c_int(int(value)))


def _char(value: bytes):
    return ctypes.byref(ctypes.c_char(value))


def _ptr(a: np.ndarray):
    return a.ctypes.data_as(_P)


def _leading_dimension(a: np.ndarray, name: str) -> int:
    """LAPACK's leading dimension of a column-major float64 matrix (r, c), possibly a view
    (unit row stride, columns a fixed number of elements apart)."""
    r, c = a.shape
    col = a.strides[1] if c > 1 else 8 * max(r, 1)
    if a.dtype != np.float64 or (r > 1 and a.strides[0] != 8) or col % 8 or col // 8 < r:
        raise ValueError(f"{name}: a column-major float64 array is required")
    return max(col // 8, 1)


def _check(info: ctypes.c_int, routine: str) -> None:
    if info.value != 0:
        raise np.linalg.LinAlgError(f"LAPACK {routine} failed (info = {info.value})")


def dsytrd_lower(A: np.ndarray):
    """Householder tridiagonalisation ``A = H T H'`` of a symmetric A (d, d) from its lower triangle.

    A (Fortran order) is overwritten: its strict lower part below the subdiagonal holds the
    reflectors, as LAPACK's dsytrd leaves them. Returns the diagonal (d,), the off-diagonal
    (d - 1,) of T and the reflectors' scalars tau (d - 1,).
    """
    d = A.shape[0]
    if A.shape != (d, d) or not A.flags.writeable:
        raise ValueError("dsytrd A: a writeable square array is required")
    lda = _leading_dimension(A, "dsytrd A")
    diag, off, tau = np.empty(d), np.empty(max(d - 1, 0)), np.empty(max(d - 1, 0))
    info, query = ctypes.c_int(0), np.empty(1)
    args = (_char(b"L"), _int(d), _ptr(A), _int(lda), _ptr(diag), _ptr(off), _ptr(tau))
    _DSYTRD(*args, _ptr(query), _int(-1), ctypes.byref(info))
    _check(info, "dsytrd")
    work = np.empty(max(int(query[0]), 1))
    _DSYTRD(*args, _ptr(work), _int(work.size), ctypes.byref(info))
    _check(info, "dsytrd")
    return diag, off, tau


def dstevd(diag: np.ndarray, off: np.ndarray):
    """Every eigenpair of the symmetric tridiagonal matrix with diagonal (d,) and off-diagonal
    (d - 1,), by divide and conquer. Returns the eigenvalues (d,) ascending and the eigenvectors
    S (d, d), Fortran order; the inputs are not changed."""
    d = diag.size
    lam = np.array(diag, dtype=np.float64)
    e = np.zeros(max(d, 1))
    e[:d - 1] = off
    S = np.empty((d, d), order="F")
    # the workspace sizes LAPACK documents for eigenvectors (those scipy.linalg.lapack.dstevd uses)
    work = np.empty(max(1 + 4 * d + d * d, 1))
    iwork = np.empty(max(3 + 5 * d, 1), dtype=np.intc)
    info = ctypes.c_int(0)
    _DSTEVD(_char(b"V"), _int(d), _ptr(lam), _ptr(e), _ptr(S), _int(max(d, 1)), _ptr(work), _int(work.size),
            _ptr(iwork), _int(iwork.size), ctypes.byref(info))
    _check(info, "dstevd")
    return lam, S


def dormqr(V: np.ndarray, tau: np.ndarray, C: np.ndarray, side: str = "L") -> np.ndarray:
    """``H C`` (side 'L') or ``C H`` (side 'R') in place, H the product of the reflectors (V's
    columns below the diagonal, tau), C (r, c).

    V (r or c, k) and C are column-major, possibly views into larger Fortran-ordered arrays
    (their leading dimensions are the parents'). Returns C.
    """
    if side not in ("L", "R"):
        raise ValueError(f"dormqr side: 'L' or 'R', got {side!r}")
    if not C.flags.writeable:
        raise ValueError("dormqr C: a writeable array is required")
    ldc, lda = _leading_dimension(C, "dormqr C"), _leading_dimension(V, "dormqr V")
    r, c = C.shape
    if V.shape[0] != (r if side == "L" else c):
        raise ValueError(f"dormqr V: {V.shape[0]} rows, C has {r} rows and {c} columns (side {side})")
    k = tau.size
    tau = np.ascontiguousarray(tau, dtype=np.float64)
    info, query = ctypes.c_int(0), np.empty(1)
    args = (_char(side.encode()), _char(b"N"), _int(r), _int(c), _int(k), _ptr(V), _int(lda), _ptr(tau),
            _ptr(C), _int(ldc))
    _DORMQR(*args, _ptr(query), _int(-1), ctypes.byref(info))
    _check(info, "dormqr")
    work = np.empty(max(int(query[0]), 1))
    _DORMQR(*args, _ptr(work), _int(work.size), ctypes.byref(info))
    _check(info, "dormqr")
    return C
