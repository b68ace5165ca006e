"""Compiled maximum-overlap assignments: the Hungarian method and its per-sample block solvers.

Compiled with numba (``nogil``) so that the search calls them without Python overhead and from
several threads; the tests check them against scipy's ``linear_sum_assignment``.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _load_block(O, off, b, block):
    """``block[:W, :K_b]`` = sample b's columns ``off[b]:off[b+1]`` of the overlaps O (W, L)."""
    kb = off[b + 1] - off[b]
    for k in range(O.shape[0]):
        for c in range(kb):
            block[k, c] = O[k, off[b] + c]


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
        _load_block(O, off, b, block)
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
        _load_block(O, off, b, block)
        v[b] = _lap_max(block, W, kb, assign, du[b], dw[b])
        for k in range(W):
            match[b, k] = assign[k]
