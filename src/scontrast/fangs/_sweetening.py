"""Sweetening: greedy one-entry flips of an estimate, each kept only if the expected FARO loss falls.

``_Sweetener`` keeps every sample's assignment and duals so that a flip is evaluated
incrementally (bounds settle most samples; the others are re-solved by the compiled
Hungarian method); the compiled kernels here evaluate, commit and run the proposals.
"""

from __future__ import annotations

import logging
import time

import numba
import numpy as np

from .._assignment import _lap_max, _load_block, _solve_square
from ._loss import _expected, _match_values, _overlaps, _Packed

_LOG = logging.getLogger("scontrast.fangs")
_LOG_SECONDS = 30.0  # a progress line at least this often in a long sweetening (as scontrast.core.progress)


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
            _load_block(O, off, b, block)
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
    last_line = time.perf_counter()
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
        if time.perf_counter() - last_line >= _LOG_SECONDS:  # a long sweetening says how far it is
            last_line = time.perf_counter()
            _LOG.info("fangs: sweetening (seed %d): %d/%s flips tried, %d kept", seed, done,
                      "no cap" if n_iter is None else n_iter, accepted)
    est = state.estimate()
    # Recompute from scratch: the returned value never rests on the incremental bookkeeping.
    loss = _expected(float(est.sum()), _match_values(est, P), P, a)
    return est, loss, done, accepted
