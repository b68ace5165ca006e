"""PCPCA's input checks and its contrast-strength rule.

Contrast strength: ``gamma_prime`` defaults to 0.5; ``gamma`` (default None) given instead
replaces it (gamma' = gamma m / n). Setting both to values other than their defaults
(``gamma`` not None and ``gamma_prime`` neither 0.5 nor None) is an error, as is setting both
to None.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..core import ScontrastError, check_matrix, check_pair, check_real

# The default contrast strength on the covariance scale (see "Contrast strength" above).
_GAMMA_PRIME_DEFAULT = 0.5
_SOLVERS = ("auto", "closed_form", "lbfgs")
_EIGEN_SOLVERS = ("auto", "dense", "arpack")
_ON_INADMISSIBLE = ("error", "clip")


def _check_groups(X, Y, k):
    """Check a target/background pair for PCPCA.

    :func:`scontrast.core.check_pair` (NaN allowed: missing values, at least 2 cells per
    group), plus what PCPCA needs: no NaN in sparse input (see :func:`_check_cells`) and
    k below the number of genes.

    Returns
    -------
    X : (n, D), Y : (m, D), float64 (dense ndarray or CSR); has_nan : bool
    """
    X, Y = check_pair(X, Y, min_rows=2, allow_nan=True)
    (X, xnan), (Y, ynan) = _check_cells(X, "X"), _check_cells(Y, "Y")
    if k >= X.shape[1]:
        raise ScontrastError(f"n_components: must be below the number of genes {X.shape[1]}, got {k}")
    return X, Y, xnan or ynan


def _check_cells(A, name):
    """Cells x genes for PCPCA: NaN marks a missing value in dense input only.

    A sparse zero cannot be told from a missing value, so sparse input must not hold NaN.

    Returns
    -------
    A : (N, D) float64 ndarray or CSR; has_nan : bool
    """
    A = check_matrix(A, name, allow_nan=True)
    if sp.issparse(A):
        if np.isnan(A.data).any():
            raise ScontrastError(f"{name}: sparse input contains NaN; pass a dense array to mark missing values")
        return A, False
    return A, bool(np.isnan(A).any())


def _contrast_strength(gamma, gamma_prime):
    """The contrast-strength rule: ``(value, name)`` of the one that sets gamma (raises where it is broken).

    ``gamma_prime`` (default 0.5) sets it unless ``gamma`` is given; a given ``gamma``
    replaces ``gamma_prime`` only when that is at its default or None.
    """
    gamma = check_real(gamma, "gamma", 0.0, allow_none=True)
    gamma_prime = check_real(gamma_prime, "gamma_prime", 0.0, allow_none=True)
    if gamma is None:
        if gamma_prime is None:
            raise ScontrastError("gamma, gamma_prime: set one of the two; both are None")
        return gamma_prime, "gamma_prime"
    if gamma_prime is not None and gamma_prime != _GAMMA_PRIME_DEFAULT:
        raise ScontrastError(
            f"gamma, gamma_prime: set one of the two, not both (got gamma={gamma:g}, gamma_prime={gamma_prime:g}; "
            f"gamma replaces gamma_prime only at its default {_GAMMA_PRIME_DEFAULT} or None)"
        )
    return gamma, "gamma"
