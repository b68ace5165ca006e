"""Input checks and a scale test shared by the robust estimators, the moments and the screen."""

from __future__ import annotations

import numpy as np

from ..core import ScontrastError, check_matrix, dense


def _matrix(X, name: str, min_rows: int = 1) -> np.ndarray:
    """``X`` checked by :func:`scontrast.core.check_matrix` and made dense (the moments need all entries)."""
    return dense(check_matrix(X, name, min_rows=min_rows))


def _two_classes(X1, X2) -> tuple[np.ndarray, np.ndarray]:
    """The samples of class 1 and of class 2 as dense matrices of at least 2 rows and the same columns."""
    X1 = _matrix(X1, "X1", min_rows=2)
    X2 = _matrix(X2, "X2", min_rows=2)
    if X1.shape[1] != X2.shape[1]:
        raise ScontrastError(f"X2: has {X2.shape[1]} columns, X1 has {X1.shape[1]}")
    return X1, X2


def _not_tiny(v: np.ndarray) -> np.ndarray:
    """Where ``v`` exceeds 1e-12 of its largest entry: the spreads that are not rounding noise of a constant."""
    return v > 1e-12 * max(float(v.max()), np.finfo(float).tiny)
