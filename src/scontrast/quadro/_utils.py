"""Input checks and a scale test shared by the robust estimators, the moments and the screen."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..core import ScontrastError, check_matrix, dense

#: entries of the largest dense block a sparse matrix is turned into at a time (128 MB of float64)
BLOCK_ENTRIES = 2**24


def _matrix(X, name: str, min_rows: int = 1, keep_sparse: bool = False) -> np.ndarray:
    """``X`` checked by :func:`scontrast.core.check_matrix` and made dense (the moments need all entries).

    ``keep_sparse``: a sparse ``X`` stays CSR (the caller densifies what it needs, block by block).
    """
    X = check_matrix(X, name, min_rows=min_rows)
    return X if keep_sparse and sp.issparse(X) else dense(X)


def _two_classes(X1, X2, keep_sparse: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The samples of class 1 and of class 2 as matrices of at least 2 rows and the same columns.

    Dense, or CSR with ``keep_sparse`` when given sparse.
    """
    X1 = _matrix(X1, "X1", min_rows=2, keep_sparse=keep_sparse)
    X2 = _matrix(X2, "X2", min_rows=2, keep_sparse=keep_sparse)
    if X1.shape[1] != X2.shape[1]:
        raise ScontrastError(f"X2: has {X2.shape[1]} columns, X1 has {X1.shape[1]}")
    return X1, X2


def _not_tiny(v: np.ndarray) -> np.ndarray:
    """Where ``v`` exceeds 1e-12 of its largest entry: the spreads that are not rounding noise of a constant."""
    return v > 1e-12 * max(float(v.max()), np.finfo(float).tiny)


def _take(X, rows=None, cols=None) -> np.ndarray:
    """The dense block ``X[rows][:, cols]`` (None = all) of a dense or CSR matrix, shape (len rows, len cols).

    Of a sparse matrix only this block is ever dense: QUADRO's fits need the few kept genes of
    their cells, never every candidate gene at once. The block has the memory order numpy's
    indexing gives a dense ``X`` (``X[:, cols]`` is Fortran-ordered), so that the BLAS products
    on it, whose last bits depend on the order, are those of dense input.
    """
    if sp.issparse(X):
        M = X if cols is None else X[:, cols]
        return (M if rows is None else M[rows]).toarray(order="F" if rows is None and cols is not None else "C")
    if rows is None:
        return X if cols is None else X[:, cols]
    return X[rows] if cols is None else X[np.ix_(rows, cols)]


def _column_blocks(n_rows: int, n_cols: int) -> list[np.ndarray]:
    """Column indices in consecutive blocks of at most ~:data:`BLOCK_ENTRIES` entries, none of one column.

    A reduction over the rows of a one-column block sums in another order (numpy sums a
    contiguous axis pairwise) than over a wider one: every block has two columns or more, so
    the result is bitwise that of the whole matrix.
    """
    width = max(2, BLOCK_ENTRIES // max(n_rows, 1))
    n_blocks = max(1, min(-(-n_cols // width), n_cols // 2))
    return np.array_split(np.arange(n_cols), n_blocks)


def _stratified_rows(strata: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` rows drawn without replacement within each stratum in proportion to its size (ascending).

    ``strata`` (n,) int labels 0..s-1. The quotas are rounded by largest remainders (ties: the
    first stratum) with at least one row of every stratum, so that no stratum (a class, a
    replicate) is lost: with more strata than ``size`` more than ``size`` rows are returned.
    """
    sizes = np.bincount(strata)
    quota = sizes * (size / strata.size)
    take = np.minimum(np.maximum(np.floor(quota).astype(np.int64), 1), sizes)
    short = size - int(take.sum())
    if short > 0:
        room = np.flatnonzero(take < sizes)
        order = room[np.argsort(-(quota[room] - np.floor(quota[room])), kind="stable")]
        take[order[:short]] += 1
    picked = [rng.choice(np.flatnonzero(strata == s), int(t), replace=False) for s, t in enumerate(take) if t]
    return np.sort(np.concatenate(picked))
