"""FARO loss and the FANGS search for a Bayes estimate of a feature allocation.

A feature allocation of N items is a binary N x K matrix whose columns
(features) are unordered. Dahl, Johnson and Andros ("Comparison and Bayesian
estimation of feature allocations") compare two allocations with the FARO
loss and summarise posterior samples Z_1..Z_B with FANGS, a search that
minimises the Monte Carlo expected FARO loss.

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
``a``. The search below uses this form; ``faro_loss`` builds ``C`` itself.

FANGS is a function, not an estimator: :func:`fangs` returns a :class:`FangsResult`,
and its signature holds the one default of every FANGS parameter (``scontrast.tl.fangs``
and the workflow's ``fangs`` block forward theirs to it). Parameters are checked with
``scontrast.core``'s checks (``ScontrastError``, one line ``"<name>: <problem>"``) and
``random_state`` goes through ``core.check_random_state``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numba
import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from scipy.optimize import linear_sum_assignment

from .core import ScontrastError, check_int, check_random_state, check_real, one_blas_thread
from .feature_samples import _as_binary, check_samples

__all__ = [
    "FangsResult",
    "faro_cost_matrix",
    "faro_loss",
    "expected_loss",
    "draws",
    "fangs",
    "check_samples",
    "feature_enrichment",
    "feature_loadings",
    "feature_support",
]

# Column chunk of the overlap products: bounds the float32 temporaries to
# N x _CHUNK values whatever the number of samples.
_CHUNK = 4096


# --------------------------------------------------------------------------- validation


def _check_a(a) -> float:
    """The FARO cost ``a``, in the open interval (0, 2)."""
    return check_real(a, "a", 0.0, 2.0, strict_min=True, strict_max=True)


def _check_n_jobs(n_jobs) -> int:
    """joblib's ``n_jobs`` (a nonzero integer or None) -> the number of threads."""
    if n_jobs is not None and check_int(n_jobs, "n_jobs") == 0:
        raise ScontrastError("n_jobs: expected a nonzero integer or None, got 0")
    return effective_n_jobs(n_jobs)


# --------------------------------------------------------------------------- the loss


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
    """
    C = faro_cost_matrix(estimate, sample, a)
    if C.size == 0:
        return 0.0
    rows, cols = linear_sum_assignment(C)
    return float(C[rows, cols].sum())


# --------------------------------------------------------------------------- packed samples


class _Packed:
    """All samples side by side: ``S`` (N, L) with L = sum K_b, sample b in
    columns ``off[b]:off[b+1]``; ``nnz[b]`` = number of ones of sample b;
    ``rowany`` (N, B) = does row i of sample b hold a one."""

    def __init__(self, samples: list[np.ndarray]):
        self.n = samples[0].shape[0]
        self.B = len(samples)
        self.k = np.array([s.shape[1] for s in samples], dtype=np.intp)
        self.off = np.concatenate([[0], np.cumsum(self.k)]).astype(np.intp)
        self.S = (np.ascontiguousarray(np.concatenate(samples, axis=1)) if self.off[-1]
                  else np.zeros((self.n, 0), np.uint8))
        self.nnz = np.array([int(s.sum()) for s in samples], dtype=np.float64)
        self.nnz_col = self.S.sum(axis=0, dtype=np.float64)
        self.rowany = np.stack([s.any(axis=1) for s in samples], axis=1)
        self.kmax = int(self.k.max())

    def sample(self, b: int) -> np.ndarray:
        return self.S[:, self.off[b]:self.off[b + 1]]


def _overlaps(E: np.ndarray, S: np.ndarray) -> np.ndarray:
    """``E.T @ S`` for uint8 matrices, exact, as float64.

    E (N, K), S (N, L) -> (K, L). float32 products are exact for counts
    below 2**24 items; chunks bound the temporaries.
    """
    n = E.shape[0]
    if n >= 2**24:
        raise ScontrastError(f"samples: at most 2**24 items (rows) are supported, got {n}")
    out = np.empty((E.shape[1], S.shape[1]), dtype=np.float64)
    Ef = E.astype(np.float32)
    for start in range(0, S.shape[1], _CHUNK):
        stop = min(start + _CHUNK, S.shape[1])
        out[:, start:stop] = Ef.T @ S[:, start:stop].astype(np.float32)
    return out


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
    O = _overlaps(E, S)
    v = np.empty(off.size - 1)
    assign = np.empty((off.size - 1, E.shape[1]), dtype=np.int64)
    _solve_blocks(O, off, v, assign)
    return v, assign


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
    """
    a = _check_a(a)
    S = check_samples(samples)
    E = _as_binary(estimate, "estimate", n_rows=S[0].shape[0])
    P = _Packed(S)
    # scipy here, the compiled solver in the search: each checks the other in the tests.
    O = _overlaps(E, P.S)
    v = np.array([_max_overlap(O[:, P.off[b]:P.off[b + 1]])[0] for b in range(P.B)])
    return _expected(float(E.sum()), v, P, a)


# --------------------------------------------------------------------------- results


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


# --------------------------------------------------------------------------- draws


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


def _n_tasks(n_jobs, n_items: int) -> tuple[int, int]:
    jobs = _check_n_jobs(n_jobs)
    return jobs, max(1, min(n_items, 4 * jobs))


def _parallel(jobs: int):
    # Threads: the heavy parts (BLAS products, the compiled assignment kernels)
    # release the GIL, and threads need no worker start-up or data copies.
    return Parallel(n_jobs=jobs, prefer="threads")


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
    """
    t0 = time.perf_counter()
    a = _check_a(a)
    P = _Packed(check_samples(samples))
    B = P.B
    jobs, n_tasks = _n_tasks(n_jobs, B)
    # Interleave the rows so that tasks get similar shares of the triangle.
    chunks = [np.arange(t, B, n_tasks) for t in range(n_tasks)]
    if jobs == 1:
        parts = [_draws_rows(P, rows) for rows in chunks]
    else:
        parts = _parallel(jobs)(delayed(_draws_rows)(P, rows) for rows in chunks)
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


# --------------------------------------------------------------------------- FANGS: initialisation


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


# --------------------------------------------------------------------------- FANGS: sweetening


@numba.njit(cache=True, nogil=True)
def _lap_max(M, nr, nc, assign, du, dw):
    """Maximum-weight assignment of the block M[:nr, :nc], zero-padded to n x n.

    The shortest-augmenting-path Hungarian method (O(n^3), n = max(nr, nc))
    on the costs -M, compiled so that the search can call it without Python
    overhead and from several threads (no GIL). Writes ``assign[r]`` = the
    column of row r (>= nc: a padding column) for r < nr, and optimal duals
    ``du[:n]``, ``dw[:n]`` with du[r] + dw[c] >= M[r, c] (0 outside the
    block), equality on the assignment. Returns the optimum. Checked against
    scipy in the tests.
    """
    n = max(nr, nc)
    u = np.zeros(n + 1)
    w = np.zeros(n + 1)
    p = np.zeros(n + 1, np.int64)
    way = np.zeros(n + 1, np.int64)
    minv = np.empty(n + 1)
    used = np.empty(n + 1, np.bool_)
    for i in range(1, n + 1):
        p[0] = i
        j0 = 0
        minv[:] = np.inf
        used[:] = False
        while True:
            used[j0] = True
            i0 = p[j0]
            delta = np.inf
            j1 = 0
            for jj in range(1, n + 1):
                if not used[jj]:
                    c = -M[i0 - 1, jj - 1] if (i0 <= nr and jj <= nc) else 0.0
                    cur = c - u[i0] - w[jj]
                    if cur < minv[jj]:
                        minv[jj] = cur
                        way[jj] = j0
                    if minv[jj] < delta:
                        delta = minv[jj]
                        j1 = jj
            for jj in range(n + 1):
                if used[jj]:
                    u[p[jj]] += delta
                    w[jj] -= delta
                else:
                    minv[jj] -= delta
            j0 = j1
            if p[j0] == 0:
                break
        while True:
            j1 = way[j0]
            p[j0] = p[j1]
            j0 = j1
            if j0 == 0:
                break
    total = 0.0
    for jj in range(1, n + 1):
        r = p[jj] - 1
        if r < nr:
            assign[r] = jj - 1
            if jj <= nc:
                total += M[r, jj - 1]
    for k in range(n):
        du[k] = -u[k + 1]
        dw[k] = -w[k + 1]
    return total


@numba.njit(cache=True, nogil=True)
def _solve_blocks(O, off, v_out, assign_out):
    """Assignment of the rows of O (W, L) to each sample's columns off[b]:off[b+1].

    Fills ``v_out[b]`` (the optimum) and ``assign_out[b]`` (W,) (column within
    the sample of each row, -1 = none).
    """
    W = O.shape[0]
    B = off.shape[0] - 1
    kmax = 0
    for b in range(B):
        kmax = max(kmax, off[b + 1] - off[b])
    n = max(W, kmax)
    block = np.empty((W, kmax))
    assign = np.empty(W, np.int64)
    du = np.empty(n)
    dw = np.empty(n)
    for b in range(B):
        kb = off[b + 1] - off[b]
        if kb == 0 or W == 0:
            v_out[b] = 0.0
            assign_out[b, :] = -1
            continue
        for k in range(W):
            for c in range(kb):
                block[k, c] = O[k, off[b] + c]
        v_out[b] = _lap_max(block, W, kb, assign, du, dw)
        for k in range(W):
            assign_out[b, k] = assign[k] if assign[k] < kb else -1


@numba.njit(cache=True, nogil=True)
def _solve_square(O, off, v, match, du, dw):
    """Square (W x W, samples padded with zero columns) assignments and duals; needs W >= every K_b."""
    W = O.shape[0]
    B = off.shape[0] - 1
    block = np.empty((W, W))
    assign = np.empty(W, np.int64)
    for b in range(B):
        kb = off[b + 1] - off[b]
        for k in range(W):
            for c in range(kb):
                block[k, c] = O[k, off[b] + c]
        v[b] = _lap_max(block, W, kb, assign, du[b], dw[b])
        for k in range(W):
            match[b, k] = assign[k]


@numba.njit(cache=True, nogil=True)
def _evaluate_flip(i, j, E, S, off, O, v, match, du, dw, rowany_i, a, early_stop,
                   dv, solved, new_match, new_du, new_dw, block, assign):
    """Summed change of the FARO loss over the samples if E[i, j] flips. See ``_Sweetener``.

    Fills ``dv`` (B,) with each sample's change of optimum and ``solved``
    (B,) with 1 where the sample was re-solved (its new assignment and duals
    then in ``new_match[b]``, ``new_du[b]``, ``new_dw[b]``). Returns NaN when
    the bounds prove that the flip cannot lower the loss (with ``early_stop``).
    """
    B = v.shape[0]
    W = O.shape[0]
    d = 1 - 2 * int(E[i, j])
    upper = 0.0
    n_open = 0
    for b in range(B):
        kb = off[b + 1] - off[b]
        lj = match[b, j]
        mt = 0.0
        if lj < kb:
            mt = float(S[i, off[b] + lj])
        hi = 0.0
        if d == 1:
            lo = mt
            if rowany_i[b]:
                hi = 1.0
        else:
            lo = -mt
        dv[b] = lo
        upper += hi
        solved[b] = 0
        if lo != hi:
            # dv leaves its keep-the-assignment end only through an optimal
            # assignment sending j to a column with r = 1 (on) or r = 0 (off):
            # impossible when every such column has reduced cost >= 1.
            tight = False
            for c in range(W):
                r = 0
                if c < kb:
                    r = S[i, off[b] + c]
                if (d == 1 and r == 1) or (d == -1 and r == 0):
                    m = O[j, off[b] + c] if c < kb else 0.0
                    if du[b, j] + dw[b, c] - m < 0.5:
                        tight = True
                        break
            if tight:
                solved[b] = 1
                n_open += 1
            else:
                upper -= 1.0
    need = d * a * B / 2.0
    if early_stop and upper <= need:
        return np.nan
    if n_open > 0:
        for b in range(B):
            if solved[b] == 0:
                continue
            kb = off[b + 1] - off[b]
            for k in range(W):
                for c in range(kb):
                    block[k, c] = O[k, off[b] + c]
            for c in range(kb):
                block[j, c] += d * S[i, off[b] + c]
            val = _lap_max(block, W, kb, assign, new_du[b], new_dw[b])
            for k in range(W):
                new_match[b, k] = assign[k]
            hi = 0.0
            if d == 1 and rowany_i[b]:
                hi = 1.0
            dv[b] = val - v[b]
            upper += dv[b] - hi
            if early_stop and upper <= need:
                return np.nan
    return d * a * B - 2.0 * dv.sum()


@numba.njit(cache=True, nogil=True)
def _commit_flip(i, j, E, colsum, S, O, v, match, du, dw, dv, solved, new_match, new_du, new_dw):
    """Apply the flip of E[i, j] evaluated by ``_evaluate_flip``."""
    B = v.shape[0]
    W = O.shape[0]
    d = 1 - 2 * int(E[i, j])
    for b in range(B):
        v[b] += dv[b]
        if solved[b]:
            for k in range(W):
                match[b, k] = new_match[b, k]
                du[b, k] = new_du[b, k]
                dw[b, k] = new_dw[b, k]
        else:
            # the old assignment stays optimal; shifting row j's dual by dv
            # keeps the duals feasible and tight for the changed row
            du[b, j] += dv[b]
    for c in range(O.shape[1]):
        O[j, c] += d * S[i, c]
    E[i, j] = 1 - E[i, j]
    colsum[j] += d


@numba.njit(cache=True, nogil=True)
def _sweeten_steps(E, colsum, S, off, O, v, match, du, dw, rowany, a, rows, us, start, stop):
    """Proposals start..stop-1 of a sweetening; returns (next proposal, flips accepted).

    Proposal t flips E[rows[t], j] with j the int(us[t] * (K + 1))-th of the
    K non-empty columns followed by the first empty one. Stops early (before
    using up a proposal) when no empty column is left, so the caller can
    widen E.
    """
    B = v.shape[0]
    W = O.shape[0]
    dv = np.empty(B)
    solved = np.empty(B, np.int8)
    new_match = np.empty((B, W), np.int64)
    new_du = np.empty((B, W))
    new_dw = np.empty((B, W))
    block = np.empty((W, W))
    assign = np.empty(W, np.int64)
    accepted = 0
    t = start
    while t < stop:
        n_used = 0
        empty = -1
        for c in range(W):
            if colsum[c] > 0:
                n_used += 1
            elif empty < 0:
                empty = c
        if empty < 0:
            break
        pick = int(us[t] * (n_used + 1))
        j = empty
        seen = 0
        for c in range(W):
            if colsum[c] > 0:
                if seen == pick:
                    j = c
                    break
                seen += 1
        i = rows[t]
        t += 1
        delta = _evaluate_flip(i, j, E, S, off, O, v, match, du, dw, rowany[i], a, True,
                               dv, solved, new_match, new_du, new_dw, block, assign)
        if not np.isnan(delta) and delta < 0:
            _commit_flip(i, j, E, colsum, S, O, v, match, du, dw, dv, solved, new_match, new_du, new_dw)
            accepted += 1
    return t, accepted


class _Sweetener:
    """Incremental expected FARO loss of an estimate under one-entry flips.

    The working estimate E (N, W) has W > every K_b and at least one empty
    column (a flip there starts a new feature; empty columns change no loss).
    Every sample is padded with zero columns to W, so each alignment is a
    W x W assignment. State per sample b:

    * ``O`` (W, L): overlaps of E's columns with every sample column
      (``E.T @ S``); a flip of E[i, j] changes only row j, by +-S[i, :].
    * ``v[b]``: the maximum total overlap (the expected loss is
      ``mean(a |E| + (2 - a) |S_b| - 2 v_b)``); ``match[b]`` (W,): an optimal
      assignment (columns >= K_b are padding); ``du[b]``, ``dw[b]`` (W,):
      optimal integer duals, du[k] + dw[l] >= O_b[k, l].

    A flip changes v_b by an integer dv_b, bracketed without solving: with
    r = S_b[i, :] and l* = match_b[j], turning E[i, j] on gives
    r[l*] <= dv_b <= max(r), turning it off -r[l*] <= dv_b <= 0. An open
    bracket leaves its keep-the-assignment end only if some optimal
    assignment sends j to a column l with r[l] = 1 (on) or r[l] = 0 (off);
    such an assignment is worth at most v_b minus the reduced cost
    du[j] + dw[l] - O_b[j, l], so when all those reduced costs are >= 1 the
    bracket closes (and shifting du[j] by dv_b keeps the duals optimal).
    Only the remaining samples are re-solved (compiled Hungarian method,
    ``_lap_max``), and the evaluation stops as soon as the bounds show the
    flip cannot lower the expected loss.
    """

    def __init__(self, P: _Packed, E: np.ndarray, a: float, extra: int = 1):
        self.P, self.a = P, a
        E = E[:, E.any(axis=0)]
        width = max(E.shape[1], P.kmax) + extra
        self.E = np.ascontiguousarray(np.pad(E, ((0, 0), (0, width - E.shape[1]))), dtype=np.uint8)
        self.colsum = self.E.sum(axis=0).astype(np.int64)
        self.O = _overlaps(self.E, P.S)
        self.v = np.empty(P.B)
        self.match = np.empty((P.B, width), dtype=np.int64)
        self.du = np.empty((P.B, width))
        self.dw = np.empty((P.B, width))
        _solve_square(self.O, P.off, self.v, self.match, self.du, self.dw)

    @property
    def width(self) -> int:
        return self.E.shape[1]

    def loss(self) -> float:
        return _expected(float(self.colsum.sum()), self.v, self.P, self.a)

    def estimate(self) -> np.ndarray:
        return np.ascontiguousarray(self.E[:, self.colsum > 0])

    def has_empty_column(self) -> bool:
        return bool((self.colsum == 0).any())

    def evaluate(self, i: int, j: int, early_stop: bool = True):
        """Change of the summed loss if E[i, j] were flipped.

        Returns ``(delta, pending)``: ``delta`` = B x (new - old expected
        loss), or None when the bounds prove that the flip cannot lower the
        loss (only with ``early_stop``); ``pending`` = what ``commit`` needs.
        """
        B, W = self.P.B, self.width
        dv = np.empty(B)
        solved = np.empty(B, dtype=np.int8)
        new = (np.empty((B, W), dtype=np.int64), np.empty((B, W)), np.empty((B, W)))
        delta = _evaluate_flip(i, j, self.E, self.P.S, self.P.off, self.O, self.v, self.match, self.du, self.dw,
                               self.P.rowany[i], self.a, early_stop, dv, solved, *new, np.empty((W, W)),
                               np.empty(W, dtype=np.int64))
        if np.isnan(delta):
            return None, None
        return float(delta), (dv, solved, new)

    def commit(self, i: int, j: int, pending) -> None:
        """Apply the flip of E[i, j] evaluated by ``evaluate``."""
        dv, solved, new = pending
        _commit_flip(i, j, self.E, self.colsum, self.P.S, self.O, self.v, self.match, self.du, self.dw,
                     dv, solved, *new)

    def steps(self, rows: np.ndarray, us: np.ndarray, start: int, stop: int) -> tuple[int, int]:
        """Run proposals start..stop-1 (compiled); returns (next proposal, flips accepted)."""
        return _sweeten_steps(self.E, self.colsum, self.P.S, self.P.off, self.O, self.v, self.match, self.du,
                              self.dw, self.P.rowany, self.a, rows, us, start, stop)


def _sweeten(P: _Packed, E0: np.ndarray, a: float, n_iter: int | None, seconds: float | None,
             seed: int) -> tuple[np.ndarray, float, int, int]:
    """Greedy one-entry flips from ``E0``; keep a flip only if the expected loss falls.

    Returns ``(estimate, expected loss, proposals made, flips accepted)``.
    The proposals (row, column draw) come from ``seed`` in blocks, so the
    result does not depend on timing unless ``seconds`` cuts it short.
    """
    deadline = None if seconds is None else time.perf_counter() + seconds
    rng = np.random.default_rng(seed)
    state = _Sweetener(P, E0, a)
    done, accepted, block = 0, 0, 4096
    # Without a clock the whole run is one compiled call; with one, short calls between checks.
    chunk = block if deadline is None else 32
    while n_iter is None or done < n_iter:
        size = block if n_iter is None else min(block, n_iter - done)
        rows = rng.integers(P.n, size=size)
        us = rng.random(size)
        t = 0
        while t < size:
            if deadline is not None and time.perf_counter() >= deadline:
                break
            if not state.has_empty_column():  # every column is a feature: widen E
                state = _Sweetener(P, state.estimate(), a, extra=4)
            t, acc = state.steps(rows, us, t, min(size, t + chunk))
            accepted += acc
        done += t
        if t < size:
            break
    est = state.estimate()
    # Recompute from scratch: the returned value never rests on the incremental bookkeeping.
    loss = _expected(float(est.sum()), _match_values(est, P), P, a)
    return est, loss, done, accepted


# --------------------------------------------------------------------------- FANGS


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
    """
    t0 = time.perf_counter()
    a = _check_a(a)
    n_init = check_int(n_init, "n_init", 1)
    n_sweet = check_int(n_sweet, "n_sweet", 1)
    n_iter = check_int(n_iter, "n_iter", 0, allow_none=True)
    max_seconds = check_real(max_seconds, "max_seconds", 0.0, strict_min=True, allow_none=True)
    if n_iter is None and max_seconds is None:
        raise ScontrastError("n_iter: None (no cap on the flips) needs a time limit, max_seconds")
    P = _Packed(check_samples(samples))
    rng = check_random_state(random_state)
    baselines = rng.choice(P.B, size=n_init, replace=P.B < n_init)
    seeds = rng.integers(2**63 - 1, size=n_sweet)  # one per sweetening, drawn up front: independent of n_jobs
    jobs = _check_n_jobs(n_jobs)

    run = (lambda tasks: [f(*args) for f, args, _ in tasks]) if jobs == 1 else \
        (lambda tasks: _parallel(jobs)(tasks))

    init = run([delayed(_initial_candidate)(P, int(c), a) for c in baselines])
    t1 = time.perf_counter()
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
    seconds = None
    if max_seconds is not None:
        rounds = -(-len(chosen) // jobs)
        seconds = max(0.0, float(max_seconds) - (time.perf_counter() - t0)) / rounds
    sweet = run([delayed(_sweeten)(P, start, a, n_iter, seconds, int(s))
                 for (_, start), s in zip(chosen, seeds)])
    t2 = time.perf_counter()
    final = np.array([r[1] for r in sweet])
    best = int(np.argmin(final))
    est = sweet[best][0]
    details = {
        "baselines": np.asarray(baselines),
        "initial_losses": np.array(losses),
        "sweetened_from": np.array([idx for idx, _ in chosen]),
        "sweetened_losses": final,
        "iterations": np.array([r[2] for r in sweet]),
        "accepted": np.array([r[3] for r in sweet]),
        "n_jobs": int(jobs),
    }
    return FangsResult(estimate=est, expected_loss=float(final[best]), a=a, method="fangs",
                       timings={"initialization": t1 - t0, "sweetening": t2 - t1,
                                "total": time.perf_counter() - t0},
                       index=origin[chosen[best][0]], details=details)



# --------------------------------------------------------------------------- reading an estimate


def feature_enrichment(estimate, is_target) -> dict[str, np.ndarray]:
    """Prevalence of each feature in the target and background cells and Fisher's exact test.

    estimate (N, K) binary, is_target (N,) bool with cells in both groups. Returns
    (K,) arrays ``n_target``, ``n_background`` (cells holding the feature),
    ``prevalence_target``, ``prevalence_background``, ``difference`` (target minus
    background), ``odds_ratio``, ``pvalue`` (two-sided Fisher's exact test of the 2 x 2
    table holds/lacks x target/background) and ``qvalue`` (Benjamini-Hochberg over the
    K features). The test treats the allocation as given: it is calibrated when the
    features were found blind to the groups (``tl.latent_features`` fits all cells
    together and, by default, chooses its genes without the labels).
    """
    from scipy.stats import false_discovery_control, fisher_exact

    E = _as_binary(estimate, "estimate")
    t = np.asarray(is_target, dtype=bool)
    if t.shape != (E.shape[0],):
        raise ScontrastError(f"is_target: has shape {t.shape} but the estimate has {E.shape[0]} rows")
    n_t, n_b = int(t.sum()), int((~t).sum())
    if min(n_t, n_b) == 0:
        raise ScontrastError(f"is_target: {n_t} target and {n_b} background cells; both groups are needed")
    ht = E[t].sum(axis=0).astype(np.int64)
    hb = E[~t].sum(axis=0).astype(np.int64)
    odds = np.empty(E.shape[1])
    p = np.empty(E.shape[1])
    for k in range(E.shape[1]):
        res = fisher_exact([[ht[k], n_t - ht[k]], [hb[k], n_b - hb[k]]])
        odds[k], p[k] = float(res.statistic), float(res.pvalue)
    q = false_discovery_control(p) if p.size else p.copy()
    return {"n_target": ht, "n_background": hb, "prevalence_target": ht / n_t, "prevalence_background": hb / n_b,
            "difference": ht / n_t - hb / n_b, "odds_ratio": odds, "pvalue": p, "qvalue": np.asarray(q, dtype=float)}


def feature_support(samples, estimate, groups=None) -> tuple[np.ndarray, np.ndarray]:
    """How closely each feature of an estimate recurs in the samples, per group of samples (e.g. chain).

    samples: B binary (N, K_b) matrices; estimate (N, K) binary; groups (B,) labels of the
    samples (None = one group). In every sample the estimate's features are matched one-to-one
    to the sample's by maximum overlap (the alignment of the FARO loss, the same for every
    ``a``); a feature's score in that sample is the Jaccard index of its cells and its match's
    (0 when it has no match). Returns ``(support (K, G) float64, labels (G,))``: the mean score
    over each group's samples, groups in sorted order. A feature near 1 in every chain is one
    all chains hold; near 1 in one chain and low in another, one chain's mode only.
    """
    S = check_samples(samples)
    E = _as_binary(estimate, "estimate", n_rows=S[0].shape[0])
    g = np.zeros(len(S), dtype=np.int64) if groups is None else np.asarray(groups)
    if g.shape != (len(S),):
        raise ScontrastError(f"groups: has shape {g.shape} but there are {len(S)} samples")
    labels, index = np.unique(g, return_inverse=True)
    P = _Packed(S)
    if P.S.shape[1] == 0 or E.shape[1] == 0:
        return np.zeros((E.shape[1], labels.size)), labels
    O = _overlaps(E, P.S)
    v = np.empty(len(S))
    assign = np.empty((len(S), E.shape[1]), dtype=np.int64)
    _solve_blocks(O, P.off, v, assign)
    matched = assign >= 0
    cols = np.where(matched, P.off[:-1, None] + assign, 0)  # (B, K) column of each match in P.S
    o = O[np.arange(E.shape[1])[None, :], cols]
    union = E.sum(axis=0, dtype=np.float64)[None, :] + P.nnz_col[cols] - o
    score = np.where(matched & (union > 0), o / np.where(union > 0, union, 1.0), 0.0)
    support = np.stack([score[index == j].mean(axis=0) for j in range(labels.size)], axis=1)
    return support.reshape(E.shape[1], labels.size), labels


def feature_loadings(X, estimate, sigma_x: float, sigma_a: float, intercept: bool = False) -> np.ndarray:
    """Posterior mean of the loadings given an allocation: (K, D).

    For the linear-Gaussian model X = Z A + E (E ~ N(0, sigma_x^2), A ~ N(0, sigma_a^2)),
    A | Z, X has mean (Z'Z + (sigma_x / sigma_a)^2 I)^-1 Z'X per column; here Z is the
    estimate (N, K) and X (N, D) the matrix the sampler explained, so row k is the
    change feature k makes to each column (gene), in X's units. With ``intercept`` the
    model has a baseline shared by all cells (a column of ones with the same prior, as in
    ``LinearGaussianIBP(intercept=True)``): row k is then the change from the baseline.
    """
    E = _as_binary(estimate, "estimate").astype(np.float64)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] != E.shape[0]:
        raise ScontrastError(f"X: expected {E.shape[0]} rows (the estimate's), got shape {X.shape}")
    sigma_x = check_real(sigma_x, "sigma_x", 0.0, strict_min=True)
    sigma_a = check_real(sigma_a, "sigma_a", 0.0, strict_min=True)
    k = E.shape[1]
    if k == 0:
        return np.zeros((0, X.shape[1]))
    if intercept:
        E = np.hstack([np.ones((E.shape[0], 1)), E])
    P = E.T @ E + (sigma_x / sigma_a) ** 2 * np.eye(E.shape[1])
    return np.linalg.solve(P, E.T @ X)[E.shape[1] - k:]
