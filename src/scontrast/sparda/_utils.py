"""Small pieces shared by the files of the package: the sign of a direction, gene moments and scaling."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def _orient(beta: np.ndarray) -> np.ndarray:
    """A deterministic sign for an intermediate direction: the largest-magnitude weight is positive.

    ``D(beta) = D(-beta)``; the fitted directions are then oriented on the data by
    :func:`orient_to_target`, this only keeps the intermediate results reproducible.
    """
    r = int(np.argmax(np.abs(beta)))
    return -beta if beta[r] < 0 else beta


def orient_to_target(beta: np.ndarray, mean_difference: np.ndarray) -> np.ndarray:
    """Sign of a direction such that the target cells project higher on average.

    ``D(beta) = D(-beta)``, so the sign is a convention; this one makes a positive
    weight mean "contributes to the target side": ``(mean(X) - mean(Y)) @ beta >= 0``
    with ``X`` the target cells.  When the mean projections are equal (to rounding;
    a pure change of spread or correlation), the largest-magnitude weight is made
    positive instead.

    Parameters
    ----------
    beta : ndarray, shape (d,)
    mean_difference : ndarray, shape (d,)
        Target mean minus background mean of every gene (in the coordinates of ``beta``).

    Returns
    -------
    ndarray, shape (d,)

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.sparda import orient_to_target
    >>> orient_to_target(np.array([1.0, -1.0]), np.array([-2.0, 0.0])).tolist()   # flipped: target projects higher
    [-1.0, 1.0]
    """
    shift = float(mean_difference @ beta)
    scale = float(np.abs(mean_difference) @ np.abs(beta))
    if abs(shift) <= 1e-9 * scale or scale == 0.0:
        return _orient(beta)
    return -beta if shift < 0 else beta



def _column_moments(X, Y) -> tuple[np.ndarray, np.ndarray]:
    """Pooled mean and standard deviation of every gene (sparse-safe), shape (d,) each."""
    N = X.shape[0] + Y.shape[0]
    s1 = np.asarray(X.sum(axis=0)).ravel() + np.asarray(Y.sum(axis=0)).ravel()
    sq = (X.multiply(X) if sp.issparse(X) else X * X).sum(axis=0)
    sq2 = (Y.multiply(Y) if sp.issparse(Y) else Y * Y).sum(axis=0)
    s2 = np.asarray(sq).ravel() + np.asarray(sq2).ravel()
    mean = s1 / N
    var = np.maximum(s2 / N - mean * mean, 0.0)
    return mean, np.sqrt(var)


def _scale_columns(A, s: np.ndarray):
    """``A * s`` column-wise, keeping sparse input sparse (CSR)."""
    return sp.csr_matrix(A.multiply(s[None, :])) if sp.issparse(A) else A * s



def _pooled(X, Y):
    """Target then background cells in one matrix (CSR when either group is sparse)."""
    return sp.vstack([X, Y], format="csr") if sp.issparse(X) or sp.issparse(Y) else np.vstack([X, Y])
