"""Three LAPACK routines of the 'covariance' solver, called without holding Python's GIL.

``scipy.linalg.lapack``'s wrappers of dsytrd, dstevd and dormqr hold the GIL for the whole
call (tens of milliseconds at d = 1,000), so the task running beside one of them in
:func:`scontrast.cpca._threads._side_by_side` stalls at its next Python step until the call
returns: the tridiagonal reduction of C_Y and the formation of C_X, meant to overlap, would run
one after the other. Here the same routines of the same library are reached through the
function pointers that ``scipy.linalg.cython_lapack`` exports (as numba does) and called
through ctypes, which releases the GIL for the length of a foreign call. Same routine, same
inputs, same workspace sizes: the results are bitwise those of ``scipy.linalg.lapack``.

A foreign call trusts its signature, so the pointers are used only when, at import, each
capsule's C signature (Cython records it as the capsule's name) is exactly the one these
calls pass (every argument a pointer, ``int`` the 32-bit integer of an LP64 LAPACK, ``d`` a
double) and ``ctypes.c_int`` is 32 bits wide. Otherwise (another scipy's signatures, an ILP64
build, no ``ctypes.pythonapi``) the same functions call ``scipy.linalg.lapack``'s wrappers:
the same results, with the GIL held. ``GIL_FREE`` says which.

Matrices are column-major float64, as LAPACK reads them; the functions check what they rely on.
"""

from __future__ import annotations

import ctypes

import numpy as np
from scipy.linalg import lapack as _scipy_lapack

_P = ctypes.c_void_p

# The C signatures the calls below pass, in Cython's spelling (``d`` is cython_lapack's double).
_SIGNATURES = {
    "dsytrd": "void (char *, int *, d *, int *, d *, d *, d *, d *, int *, int *)",
    "dstevd": "void (char *, int *, d *, d *, d *, int *, d *, int *, int *, int *, int *)",
    "dormqr": "void (char *, char *, int *, int *, int *, d *, int *, d *, d *, int *, d *, int *, int *)",
}
# how Cython names cython_lapack's ``ctypedef double d`` in a capsule's signature
_DOUBLE_TYPEDEF = "__pyx_t_5scipy_6linalg_13cython_lapack_d"


def _capsule_signature(capsule) -> str:
    """The C signature Cython stores as the name of an exported function's capsule."""
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return get_name(capsule).decode()


def _capsule_pointer(capsule) -> int:
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get_pointer(capsule, _capsule_signature(capsule).encode())


def _routines() -> dict | None:
    """The three routines as ctypes functions (GIL released when called), or None when a
    capsule's signature is not the expected one or C's int is not 32 bits wide."""
    try:
        import scipy.linalg.cython_lapack as cython_lapack

        capsules = cython_lapack.__pyx_capi__
        if ctypes.sizeof(ctypes.c_int) != 4:
            return None
        out = {}
        for name, expected in _SIGNATURES.items():
            capsule = capsules[name]
            if _capsule_signature(capsule).replace(_DOUBLE_TYPEDEF, "d") != expected:
                return None
            out[name] = ctypes.CFUNCTYPE(None, *([_P] * expected.count("*")))(_capsule_pointer(capsule))
        return out
    except (ImportError, AttributeError, KeyError, TypeError, ValueError, UnicodeDecodeError):
        return None


_ROUTINES = _routines()
GIL_FREE = _ROUTINES is not None


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
    if not GIL_FREE:
        lwork = int(_scipy_lapack.dsytrd_lwork(d, lower=1)[0])
        c, diag, off, tau, info = _scipy_lapack.dsytrd(A, lower=1, lwork=max(lwork, 1), overwrite_a=1)
        _check(ctypes.c_int(info), "dsytrd")
        if not np.shares_memory(c, A):  # a view with a larger leading dimension was copied
            A[...] = c
        return diag, off, tau
    diag, off, tau = np.empty(d), np.empty(max(d - 1, 0)), np.empty(max(d - 1, 0))
    info, query = ctypes.c_int(0), np.empty(1)
    args = (_char(b"L"), _int(d), _ptr(A), _int(lda), _ptr(diag), _ptr(off), _ptr(tau))
    _ROUTINES["dsytrd"](*args, _ptr(query), _int(-1), ctypes.byref(info))
    _check(info, "dsytrd")
    work = np.empty(max(int(query[0]), 1))
    _ROUTINES["dsytrd"](*args, _ptr(work), _int(work.size), ctypes.byref(info))
    _check(info, "dsytrd")
    return diag, off, tau


def dstevd(diag: np.ndarray, off: np.ndarray):
    """Every eigenpair of the symmetric tridiagonal matrix with diagonal (d,) and off-diagonal
    (d - 1,), by divide and conquer. Returns the eigenvalues (d,) ascending and the eigenvectors
    S (d, d), Fortran order; the inputs are not changed."""
    d = diag.size
    if not GIL_FREE and d > 1:  # (scipy's wrapper refuses an empty off-diagonal; d = 1 is below)
        lam, S, info = _scipy_lapack.dstevd(diag, off, compute_v=1)
        _check(ctypes.c_int(info), "dstevd")
        return lam, np.asfortranarray(S)
    if not GIL_FREE:
        return np.array(diag, dtype=np.float64), np.ones((d, d), order="F")
    lam = np.array(diag, dtype=np.float64)
    e = np.zeros(max(d, 1))
    e[:d - 1] = off
    S = np.empty((d, d), order="F")
    # the workspace sizes LAPACK documents for eigenvectors (those scipy.linalg.lapack.dstevd uses)
    work = np.empty(max(1 + 4 * d + d * d, 1))
    iwork = np.empty(max(3 + 5 * d, 1), dtype=np.intc)
    info = ctypes.c_int(0)
    _ROUTINES["dstevd"](_char(b"V"), _int(d), _ptr(lam), _ptr(e), _ptr(S), _int(max(d, 1)), _ptr(work), _int(work.size),
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
    if not GIL_FREE:
        lwork = int(_scipy_lapack.dormqr(side, "N", V, tau, C, lwork=-1)[1][0])
        out, _, info = _scipy_lapack.dormqr(side, "N", V, tau, C, lwork=max(lwork, 1), overwrite_c=1)
        _check(ctypes.c_int(info), "dormqr")
        if not np.shares_memory(out, C):  # a view with a larger leading dimension was copied
            C[...] = out
        return C
    info, query = ctypes.c_int(0), np.empty(1)
    args = (_char(side.encode()), _char(b"N"), _int(r), _int(c), _int(k), _ptr(V), _int(lda), _ptr(tau),
            _ptr(C), _int(ldc))
    _ROUTINES["dormqr"](*args, _ptr(query), _int(-1), ctypes.byref(info))
    _check(info, "dormqr")
    work = np.empty(max(int(query[0]), 1))
    _ROUTINES["dormqr"](*args, _ptr(work), _int(work.size), ctypes.byref(info))
    _check(info, "dormqr")
    return C
