"""The draws method: the posterior sample with the lowest expected FARO loss."""

from __future__ import annotations

import time

import numpy as np
from joblib import delayed

from ..core import one_blas_thread
from ..feature_samples import check_samples
from ._checks import _check_a, _check_n_jobs
from ._loss import _match, _Packed
from ._search import FangsResult, _run_tasks


def _draws_rows(P: _Packed, rows: np.ndarray) -> list[np.ndarray]:
    """Match values of samples ``rows`` against every later sample.

    Returns, for each c in ``rows``, the (B - c - 1,) values V[c, c+1:]: the
    match value is symmetric, so the upper triangle is enough.
    """
    out = []
    for c in rows:
        start = P.off[c + 1]
        out.append(_match(P.sample(c), P, S=P.S[:, start:], off=P.off[c + 1:] - start)[0])
    return out


def _check_params(a, n_jobs) -> tuple[float, int]:
    """The checked parameters of :func:`draws`, before any data check: ``(a, threads)``."""
    return _check_a(a), _check_n_jobs(n_jobs)


@one_blas_thread
def draws(samples, a: float = 1.0, n_jobs: int | None = 1) -> FangsResult:
    """The draws method: the sample with the lowest expected FARO loss.

    Parameters
    ----------
    samples : sequence of (N, K_b) binary matrices
    a : float in (0, 2)
    n_jobs : int or None
        Threads (-1 = all cores). The result does not depend on it.

    Returns
    -------
    FangsResult
        ``index`` is the chosen sample; ``details['expected_losses']`` holds
        every sample's expected loss (B,).

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.fangs import draws
    >>> truth = np.array([[1, 0], [1, 1], [0, 1], [0, 0]], dtype=np.uint8)
    >>> samples = [truth, truth, truth[:, :1]]                 # two samples agree, one lost a feature
    >>> result = draws(samples)
    >>> result.index in (0, 1), result.estimate.shape        # the best single sample is one of the two
    (True, (4, 2))
    """
    t0 = time.perf_counter()
    a, jobs = _check_params(a, n_jobs)
    P = _Packed(check_samples(samples))
    B = P.B
    n_tasks = max(1, min(B, 4 * jobs))
    # Interleave the rows so that tasks get similar shares of the triangle.
    chunks = [np.arange(t, B, n_tasks) for t in range(n_tasks)]
    parts = _run_tasks(jobs, [delayed(_draws_rows)(P, rows) for rows in chunks])
    V = np.zeros((B, B))
    for rows, vals in zip(chunks, parts):
        for c, row in zip(rows, vals):
            V[c, c + 1:] = row
    V = V + V.T
    V[np.diag_indices(B)] = P.nnz  # a sample matches itself fully
    losses = a * P.nnz + (2.0 - a) * P.nnz.mean() - 2.0 * V.mean(axis=1)
    best = int(np.argmin(losses))
    est = P.sample(best)
    est = np.ascontiguousarray(est[:, est.any(axis=0)])
    return FangsResult(estimate=est, expected_loss=float(losses[best]), a=a, method="draws",
                       timings={"total": time.perf_counter() - t0}, index=best,
                       details={"expected_losses": losses})
