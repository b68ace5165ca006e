"""What the values of X are: raw counts, depth-normalised or log-normalised, checked in passes of bounded memory."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from ..core import ScontrastError, ScontrastWarning
from ..io import check_finite

_F32_MAX = float(np.finfo(np.float32).max)
_F32_EXACT = 2**24  # every integer up to this is exact in float32
_F64_EXACT = 2**53
_LOG_SCALE_MAX = 50.0  # no log-normalised value exceeds this (log1p(1e6 * 1) ~ 13.8, log2(1e6) ~ 20)


def _values(X) -> np.ndarray:
    return X.data if sp.issparse(X) else np.asarray(X)


def _check_range(values: np.ndarray, name: str) -> None:
    """Finite values held in float32 must fit float32: refuse values beyond its range with one line."""
    if not values.size:
        return
    top = max(float(values.max()), -float(values.min()))  # no copy of a large matrix
    if top > _F32_MAX:
        raise ScontrastError(f"{name} has values up to {top:.3g}, beyond the float32 range ({_F32_MAX:.3g}) the data "
                             "are held in")


#: stored values handled at a time by the whole-matrix passes (integer check, detected genes,
#: normalisation): their temporaries stay a small fraction of the matrix (2**24: 64 MB of float32)
PASS_ENTRIES = 2**24


def _pieces(n: int, step: int | None = None):
    """``(start, stop)`` of consecutive pieces of ``range(n)`` holding at most ``step`` (``PASS_ENTRIES``) each."""
    step = max(1, step or PASS_ENTRIES)
    return ((a, min(a + step, n)) for a in range(0, n, step))


def _is_integer(values: np.ndarray) -> bool:
    if np.issubdtype(values.dtype, np.integer) or np.issubdtype(values.dtype, np.bool_):
        return True
    # a piece at a time: np.round of the whole array is a second copy of the values
    flat = values.reshape(-1)
    return all(np.array_equal(flat[a:b], np.round(flat[a:b])) for a, b in _pieces(flat.size))


def validate_counts(X, name: str = "X", layers: Sequence[str] = ()) -> None:
    """Raise unless ``X`` looks like raw counts: finite, non-negative integers.

    Advice fits the values: non-integer values on a log scale point to ``counts: normalized``,
    larger ones (TPM, CPM, FPKM) to ``counts: tpm``, and a ``counts`` layer to ``layer: counts``.
    """
    check_finite(X, name)
    values = _values(X)
    if values.size and values.min() < 0:
        raise ScontrastError(f"{name} has negative values but counts: raw was declared")
    if values.size and not _is_integer(values):
        top = float(values.max())
        fractional = values[values != np.round(values)]
        if fractional.size < 0.01 * values.size:  # counts with a few stray values, not another scale
            raise ScontrastError(f"{name} has non-integer values but counts: raw was declared ({fractional.size} of "
                                 f"{values.size} stored values, e.g. {fractional[0]:.4g}; raw counts are integers)")
        if top > _LOG_SCALE_MAX:
            advice = f"values up to {top:.4g} look depth-normalised (TPM, CPM, FPKM): declare counts: tpm"
        else:
            advice = f"values up to {top:.4g} look log-normalised: declare counts: normalized"
        if "counts" in layers:
            advice += ", or read the raw counts with layer: counts"
        raise ScontrastError(f"{name} has non-integer values but counts: raw was declared ({advice})")
    # compared as Python floats: numpy would cast the limit to the data's dtype (float16: inf, with
    # an "overflow encountered in cast" warning that says nothing true about the data)
    if values.size and float(values.max()) > _F64_EXACT:
        raise ScontrastError(f"{name} holds counts up to {values.max():.4g}, more than 2**53: they cannot be kept "
                             "exactly as floating-point numbers")


def _validate_normalized(X, name: str = "X") -> None:
    check_finite(X, name)
    values = _values(X)
    if values.size and values.min() < 0:
        raise ScontrastError(
            f"{name} has negative values: give log-normalised (not scaled) expression, e.g. adata.raw or a layer"
        )
    if values.size and _is_integer(values) and values.max() > 30:
        raise ScontrastError(
            f"{name} holds integers up to {values.max():g}: it looks like raw counts, declare counts: raw"
        )
    if values.size and values.max() > _LOG_SCALE_MAX:
        raise ScontrastError(
            f"{name} has values up to {values.max():.4g}, not a log scale, but counts: normalized was declared "
            "(log-normalised values stay below 50): depth-normalised values (TPM, CPM, FPKM) are counts: tpm"
        )


def _validate_tpm(X, name: str = "X") -> None:
    check_finite(X, name)
    values = _values(X)
    if values.size and values.min() < 0:
        raise ScontrastError(f"{name} has negative values but counts: tpm was declared (TPM, CPM, FPKM are >= 0)")
    if values.size and values.max() <= _LOG_SCALE_MAX and not _is_integer(values):
        raise ScontrastError(
            f"{name} has values up to {values.max():.4g}, a log scale, but counts: tpm was declared: "
            "log-normalised values are counts: normalized"
        )
    if values.size and _is_integer(values) and values.max() > 30:
        warnings.warn(f"{name} holds only integers (up to {values.max():g}) but counts: tpm was declared: if these "
                      "are raw counts declare counts: raw (tpm skips the depth normalisation)", ScontrastWarning,
                      stacklevel=3)


# Slots the workflow's steps write; an input that already holds them (a finished scontrast.h5ad
# fed back in) must not carry them into the new results. Exact names, or prefixes ending in '*'.
