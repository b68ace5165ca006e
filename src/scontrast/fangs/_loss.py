"""The FARO loss between feature allocations and its Monte Carlo posterior expectation.

A feature allocation of N items is a binary N x K matrix whose columns
(features) are unordered. Dahl, Johnson and Andros ("Comparison and Bayesian
estimation of feature allocations") compare two allocations with the FARO loss.

Direction of the loss (fixed here and everywhere in scontrast):
``faro_loss(estimate, sample, a)`` charges ``a`` for each entry where the
*estimate* has 1 and the *sample* has 0, and ``b = 2 - a`` for each entry
where the estimate has 0 and the sample has 1. Small ``a`` therefore favours
dense estimates, large ``a`` sparse ones.

The column-cost matrix of the assignment is, with ``O = estimate.T @ sample``
(column overlaps), ``n = estimate.sum(0)`` and ``m = sample.sum(0)``::

    C = a * (n[:, None] - O) + b * (m[None, :] - O) = a n 1' + b 1 m' - 2 O

because a + b = 2. Every permutation picks each ``n_j`` and each ``m_l`` once,
so the FARO loss equals ``a |estimate| + b |sample| - 2 max_perm sum O``: the
optimal alignment is the maximum-overlap assignment and does not depend on
``a``. The search uses this form (``_Packed``, ``_match``, ``_expected``);
``faro_loss`` builds ``C`` itself.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from .._matching import _CHUNK, _assign_blocks, _overlaps, _Packed  # noqa: F401  (the search imports them from here)
from ..core import one_blas_thread
from ..feature_samples import _as_binary, check_samples
from ._checks import _check_a


def faro_cost_matrix(estimate, sample, a: float = 1.0) -> np.ndarray:
    """Column-cost matrix of the FARO alignment.

    Parameters
    ----------
    estimate : array-like (N, K1), binary
    sample : array-like (N, K2), binary
    a : float in (0, 2)
        Cost of an entry where the estimate has 1 and the sample 0; ``2 - a``
        is the cost of an entry where the estimate has 0 and the sample 1.

    Returns
    -------
    ndarray (K, K), K = max(K1, K2)
        ``C[j, l]`` is the generalised Hamming distance between column j of
        the estimate and column l of the sample, the smaller matrix padded with
        zero columns.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.fangs import faro_cost_matrix
    >>> estimate = np.array([[1, 0], [1, 1], [0, 1]], np.uint8)
    >>> faro_cost_matrix(estimate, estimate).tolist()       # aligning a feature with itself costs nothing
    [[0.0, 2.0], [2.0, 0.0]]
    """
    a = _check_a(a)
    E = _as_binary(estimate, "estimate").astype(np.float64)
    S = _as_binary(sample, "sample", n_rows=E.shape[0]).astype(np.float64)
    k = max(E.shape[1], S.shape[1])
    E = np.pad(E, ((0, 0), (0, k - E.shape[1])))
    S = np.pad(S, ((0, 0), (0, k - S.shape[1])))
    b = 2.0 - a
    # a * #(E=1, S=0) + b * #(E=0, S=1) column pair by column pair.
    return a * (E.T @ (1.0 - S)) + b * ((1.0 - E).T @ S)


def faro_loss(estimate, sample, a: float = 1.0) -> float:
    """FARO loss of ``estimate`` against ``sample``.

    The generalised Hamming distance (``a`` per entry estimate 1 / sample 0,
    ``2 - a`` per entry estimate 0 / sample 1) minimised over the column
    permutations of the zero-padded matrices, found as a linear assignment
    (scipy's Jonker-Volgenant ``linear_sum_assignment``) on the K x K cost
    matrix. A metric when ``a = 1``; a quasi-metric (not symmetric) otherwise.

    Parameters
    ----------
    estimate : array-like (N, K1), binary
    sample : array-like (N, K2), binary
    a : float in (0, 2)

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.fangs import faro_loss
    >>> estimate = np.array([[1, 0], [1, 1], [0, 1]], np.uint8)   # 3 cells x 2 features
    >>> faro_loss(estimate, estimate[:, ::-1])                    # features are matched, not taken in order
    0.0
    >>> faro_loss(estimate, np.array([[1, 0], [1, 1], [0, 0]], np.uint8))  # one entry the sample lacks (a = 1)
    1.0
    """
    C = faro_cost_matrix(estimate, sample, a)
    if C.size == 0:
        return 0.0
    rows, cols = linear_sum_assignment(C)
    return float(C[rows, cols].sum())


# --------------------------------------------------------------------------- packed samples


def _max_overlap(M: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Maximum-overlap assignment of a non-negative (K1, K2) overlap matrix.

    Rectangular problems are solved directly: with non-negative entries this
    is the same optimum as padding the smaller side with zero columns.
    """
    if M.shape[0] == 0 or M.shape[1] == 0:
        empty = np.zeros(0, dtype=np.intp)
        return 0.0, empty, empty
    rows, cols = linear_sum_assignment(M, maximize=True)
    return float(M[rows, cols].sum()), rows, cols


def _match(E: np.ndarray, P: _Packed, S=None, off=None) -> tuple[np.ndarray, np.ndarray]:
    """Maximum-overlap assignment of ``E`` (N, K) to every sample.

    Returns ``(v (B,), assign (B, K))``: the optimum per sample and the
    sample column given to each column of E (-1 = none). ``S``/``off``
    default to all samples of ``P``.
    """
    S = P.S if S is None else S
    off = P.off if off is None else off
    return _assign_blocks(_overlaps(E, S), off)


def _match_values(E: np.ndarray, P: _Packed) -> np.ndarray:
    """(B,) maximum total overlap between ``E`` (N, K) and each sample."""
    return _match(E, P)[0]


def _expected(nE: float, v: np.ndarray, P: _Packed, a: float) -> float:
    """Mean FARO loss from |E|, the match values and the sample sizes."""
    return float(np.mean(a * nE + (2.0 - a) * P.nnz - 2.0 * v))


@one_blas_thread
def expected_loss(samples, estimate, a: float = 1.0) -> float:
    """Monte Carlo posterior expected FARO loss of ``estimate``.

    Parameters
    ----------
    samples : sequence of (N, K_b) binary matrices
    estimate : array-like (N, K), binary
    a : float in (0, 2)

    Returns
    -------
    float
        ``mean_b faro_loss(estimate, samples[b], a)``.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.fangs import expected_loss
    >>> Z = np.array([[1, 0], [1, 1], [0, 1]], dtype=np.uint8)
    >>> expected_loss([Z, Z], Z)                               # an estimate equal to every sample loses nothing
    0.0
    >>> bool(expected_loss([Z, Z], Z[:, :1]) > 0)
    True
    """
    a = _check_a(a)
    S = check_samples(samples)
    E = _as_binary(estimate, "estimate", n_rows=S[0].shape[0])
    P = _Packed(S)
    # scipy here, the compiled solver in the search: each checks the other in the tests.
    O = _overlaps(E, P.S)
    v = np.array([_max_overlap(O[:, P.off[b]:P.off[b + 1]])[0] for b in range(P.B)])
    return _expected(float(E.sum()), v, P, a)
