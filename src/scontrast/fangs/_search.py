"""The FANGS search: aligned-mean initial candidates, then parallel sweetenings; and ``FangsResult``.

FANGS is a function, not an estimator: :func:`fangs` returns a :class:`FangsResult`,
and its signature holds the one default of every FANGS parameter (``scontrast.tl.fangs``
and the workflow's ``fangs`` block forward theirs to it). Parameters are checked first, with
``scontrast.core``'s checks (``ScontrastError``, one line ``"<name>: <problem>"``), and
``random_state`` goes through ``core.check_random_state``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from joblib import Parallel, delayed

from ..bounds import check_count, check_memory
from ..core import ScontrastError, check_random_state, check_real, one_blas_thread, progress
from ..feature_samples import check_samples
from ._checks import _check_a, _check_n_jobs
from ._loss import _CHUNK, _expected, _match, _match_values, _Packed
from ._sweetening import _sweeten


@dataclass
class FangsResult:
    """A point estimate of a feature allocation and how it was found.

    Attributes
    ----------
    estimate : ndarray (N, K) uint8
        The estimate, without empty columns.
    expected_loss : float
        Its Monte Carlo expected FARO loss over the samples.
    a : float
    method : str
        ``'fangs'`` or ``'draws'``.
    timings : dict
        Wall-clock seconds per phase (``'initialization'``, ``'sweetening'``,
        ``'total'``; ``'total'`` only for draws).
    index : int
        For draws, the index of the chosen sample; for FANGS, the sample used
        as the baseline of the returned candidate.
    details : dict
        Diagnostics. FANGS: ``baselines`` (n_init,), ``initial_losses``
        (2 n_init,: per baseline, its thresholded aligned mean then the
        baseline itself), ``sweetened_from`` (indices into
        ``initial_losses``), ``sweetened_losses``, ``iterations`` and
        ``accepted`` flips per sweetening, ``n_jobs``. Draws:
        ``expected_losses`` (B,), every sample's expected loss.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.fangs import fangs
    >>> rng = np.random.default_rng(0)
    >>> truth = (rng.random((30, 2)) < 0.5).astype(np.uint8)
    >>> result = fangs([truth ^ (rng.random(truth.shape) < 0.05) for _ in range(10)], random_state=0)
    >>> type(result).__name__, result.method, result.estimate.dtype, bool(result.expected_loss >= 0)
    ('FangsResult', 'fangs', dtype('uint8'), True)
    """

    estimate: np.ndarray
    expected_loss: float
    a: float
    method: str
    timings: dict = field(default_factory=dict)
    index: int = -1
    details: dict = field(default_factory=dict)

    @property
    def n_features(self) -> int:
        return int(self.estimate.shape[1])



def _run_tasks(jobs: int, tasks: list, desc: str | None = None) -> list:
    """Results of joblib ``delayed`` tasks, in order: in this thread if ``jobs == 1``, else in ``jobs`` threads.

    With ``desc`` the tasks done are logged as they finish (:func:`scontrast.core.progress`).
    """
    if jobs == 1:
        results = (f(*args, **kwargs) for f, args, kwargs in tasks)
    else:
        # threads: the heavy parts (BLAS products, the compiled assignment kernels) release the
        # GIL, and threads need no worker start-up or data copies
        results = Parallel(n_jobs=jobs, prefer="threads", return_as="generator")(tasks)
    if desc is not None:
        results = progress(results, total=len(tasks), desc=desc, logger="scontrast.fangs")
    return list(results)


# --------------------------------------------------------------------------- initialisation


def _initial_candidate(P: _Packed, c: int, a: float) -> tuple[np.ndarray, float, float]:
    """Align every sample to baseline ``c``, threshold the mean at a/2.

    Returns ``(estimate (N, K), its expected loss, the baseline's own expected
    loss)``. The baseline's loss is a by-product of the alignment (the same
    B assignments), so it is kept as a candidate as well.
    """
    base = P.sample(c)
    kc = base.shape[1]
    width = max(kc, P.kmax)
    v, assign = _match(base, P)
    # target[l] = column of the aligned matrix that sample column l moves to:
    # the baseline column it is assigned to, or else (sample columns left
    # over when K_b > K_c) kc, kc + 1, ... in their order within the sample.
    target = np.full(P.S.shape[1], -1, dtype=np.intp)
    bb, rr = np.nonzero(assign >= 0)
    target[P.off[bb] + assign[bb, rr]] = rr
    spare = np.flatnonzero(target < 0)
    if spare.size:
        owner = np.searchsorted(P.off, spare, side="right") - 1
        first = np.searchsorted(owner, owner, side="left")  # owner is sorted
        target[spare] = kc + np.arange(spare.size) - first
    # Sum the aligned samples column by column: S @ G with G the (L, width) one-hot of target.
    counts = np.zeros((P.n, width))
    for start in range(0, P.S.shape[1], _CHUNK):
        stop = min(start + _CHUNK, P.S.shape[1])
        G = np.zeros((stop - start, width), dtype=np.float32)
        G[np.arange(stop - start), target[start:stop]] = 1.0
        counts += P.S[:, start:stop].astype(np.float32) @ G
    # Entrywise, 1 costs a (1 - p) and 0 costs (2 - a) p: choose 1 when p > a / 2.
    est = (counts / P.B > a / 2.0).astype(np.uint8)
    est = np.ascontiguousarray(est[:, est.any(axis=0)])
    base_loss = _expected(float(P.nnz[c]), v, P, a)
    return est, _expected(float(est.sum()), _match_values(est, P), P, a), base_loss


def _distinct_starts(P: _Packed, baselines: np.ndarray, init: list, n_sweet: int) -> tuple[list, list, list]:
    """The ``n_sweet`` candidates with the lowest expected loss, distinct up to column order.

    ``init`` holds ``_initial_candidate``'s result per baseline. Returns ``(losses, origin,
    chosen)``: per baseline its aligned mean's loss then its own (``2 n_init``), the baseline
    of each, and ``(index into losses, starting estimate)`` per sweetening.
    """
    cands, losses, origin = [], [], []
    for c, (est, loss, base_loss) in zip(baselines, init):
        cands += [est, None]
        losses += [loss, base_loss]
        origin += [int(c), int(c)]
    order = np.argsort(np.array(losses), kind="stable")
    chosen = []
    seen = set()
    for idx in order:  # distinct starting points only (equal up to the order of the columns)
        start = cands[idx] if cands[idx] is not None else P.sample(origin[idx])
        start = start[:, start.any(axis=0)]
        key = tuple(sorted(bytes(col) for col in start.T))
        if key in seen:
            continue
        seen.add(key)
        chosen.append((idx, np.ascontiguousarray(start)))
        if len(chosen) == n_sweet:
            break
    return losses, origin, chosen


# --------------------------------------------------------------------------- FANGS


def _check_params(a, n_init, n_sweet, n_iter, max_seconds, n_jobs, random_state) -> tuple:
    """The checked parameters of :func:`fangs`, before any data check: ``(a, n_init, n_sweet,
    n_iter, max_seconds, threads, Generator)``."""
    a = _check_a(a)
    n_init = check_count(n_init, "n_init", 1, "fangs")
    n_sweet = check_count(n_sweet, "n_sweet", 1, "fangs")
    n_iter = check_count(n_iter, "n_iter", 0, "fangs", allow_none=True)
    max_seconds = check_real(max_seconds, "max_seconds", 0.0, strict_min=True, allow_none=True)
    if n_iter is None and max_seconds is None:
        raise ScontrastError("n_iter: None (no cap on the flips) needs a time limit, max_seconds")
    rng = check_random_state(random_state)
    return a, n_init, n_sweet, n_iter, max_seconds, _check_n_jobs(n_jobs), rng


@one_blas_thread
def fangs(samples, a: float = 1.0, n_init: int = 16, n_sweet: int = 4, n_iter: int | None = 1000,
          max_seconds: float | None = None, n_jobs: int | None = 1, random_state=None) -> FangsResult:
    """FANGS: a feature allocation minimising the expected FARO loss.

    1. Initialisation: ``n_init`` baselines drawn without replacement (with
       replacement if B < n_init) among the B samples; every sample is aligned
       to each baseline (maximum-overlap assignment), the aligned samples are
       averaged and the mean thresholded at a/2 (empty columns dropped). The
       baselines themselves are candidates too: their expected loss comes with
       the alignment at no extra assignment.
    2. The ``n_sweet`` distinct candidates (up to column order) with the
       lowest expected loss are sweetened: ``n_iter`` times, one entry is
       chosen uniformly (row uniform; column uniform among the features plus
       one empty column, so a feature can be born) and flipped, and the flip
       is kept only if the expected loss falls. A flip updates only the
       changed column's overlaps; bounds from the previous assignments and
       their duals settle most samples, and only the others are re-solved
       (see ``_Sweetener``).
    3. The sweetened candidate with the lowest expected loss is returned.

    Both phases run in ``n_jobs`` threads, one task per baseline and per
    sweetening (the BLAS products and the compiled assignment kernels release
    the GIL); the baselines and each sweetening's seed are drawn from
    ``random_state`` up front, so the result does not depend on ``n_jobs``
    (it does on ``max_seconds``, which stops the sweetening by the clock).

    Parameters
    ----------
    samples : sequence of (N, K_b) binary matrices, K_b may vary
    a : float in (0, 2)
        Cost of estimate 1 / sample 0; estimate 0 / sample 1 costs 2 - a.
    n_init : int
        Number of baselines.
    n_sweet : int
        Number of candidates sweetened.
    n_iter : int >= 0 or None
        Flips tried per sweetening (0 = no sweetening). None = no cap: the
        sweetening runs until ``max_seconds``, which is then required.
    max_seconds : float > 0 or None
        Time budget of the whole call: what is left after the
        initialisation is shared out between the sweetenings (each round of
        ``n_jobs`` concurrent sweetenings gets an equal part). None = no
        limit (the result then does not depend on the machine's speed).
    n_jobs : int or None
        Threads (-1 = all cores); the result does not depend on it.
    random_state : None, int >= 0 or numpy Generator
        Draws the baselines and one seed per sweetening.

    Returns
    -------
    FangsResult

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.fangs import fangs
    >>> rng = np.random.default_rng(0)
    >>> truth = (rng.random((30, 2)) < 0.5).astype(np.uint8)
    >>> samples = [truth ^ (rng.random(truth.shape) < 0.05) for _ in range(20)]  # noisy draws around it
    >>> result = fangs(samples, random_state=0)
    >>> result.estimate.shape
    (30, 2)
    >>> bool((result.estimate == truth).mean() > 0.9)
    True
    """
    t0 = time.perf_counter()
    a, n_init, n_sweet, n_iter, max_seconds, jobs, rng = _check_params(
        a, n_init, n_sweet, n_iter, max_seconds, n_jobs, random_state)
    P = _Packed(check_samples(samples))
    # every baseline's candidate (cells x K bytes) is held until the best are chosen
    check_memory(float(n_init) * P.n * max(P.kmax, 1), "n_init", n_init,
                 f"the baselines' candidates ({n_init} x {P.n} cells x up to {P.kmax} features)")
    baselines = rng.choice(P.B, size=n_init, replace=P.B < n_init)
    seeds = rng.integers(2**63 - 1, size=n_sweet)  # one per sweetening, drawn up front: independent of n_jobs
    init = _run_tasks(jobs, [delayed(_initial_candidate)(P, int(c), a) for c in baselines], desc="fangs: baselines")
    t1 = time.perf_counter()
    losses, origin, chosen = _distinct_starts(P, baselines, init, n_sweet)
    seconds = None
    if max_seconds is not None:
        rounds = -(-len(chosen) // jobs)
        seconds = max(0.0, float(max_seconds) - (time.perf_counter() - t0)) / rounds
    sweet = _run_tasks(jobs, [delayed(_sweeten)(P, start, a, n_iter, seconds, int(s))
                              for (_, start), s in zip(chosen, seeds)], desc="fangs: sweetenings")
    t2 = time.perf_counter()
    final = np.array([r[1] for r in sweet])
    best = int(np.argmin(final))
    details = {
        "baselines": np.asarray(baselines),
        "initial_losses": np.array(losses),
        "sweetened_from": np.array([idx for idx, _ in chosen]),
        "sweetened_losses": final,
        "iterations": np.array([r[2] for r in sweet]),
        "accepted": np.array([r[3] for r in sweet]),
        "n_jobs": int(jobs),
    }
    return FangsResult(estimate=sweet[best][0], expected_loss=float(final[best]), a=a, method="fangs",
                       timings={"initialization": t1 - t0, "sweetening": t2 - t1,
                                "total": time.perf_counter() - t0},
                       index=origin[chosen[best][0]], details=details)
