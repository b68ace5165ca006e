"""The state of one or two moving columns given the others, shared by the compiled whole-feature moves.

Split-merge and birth-death (``_split_merge``, ``_moves``) move the cells of one or two columns
(a, b) while the other columns o stay: with G = Z'WZ + (v_x / s2a) I, Gi = G_oo^-1 and
P = Gi Z_o'WY fixed during a move, the collapsed likelihood of a and b needs only the scalars of
their Schur complement (``st``, layout in ``_likelihood``) and the vectors u = Gi g, R, updated in
O(|o| (|o| + D)) when a cell joins or leaves a column (``_sm_apply``).
"""

from __future__ import annotations

import numba
import numpy as np

from ._likelihood import _NA, _NAB, _NB, _QAA, _QAB, _QBB, _TAA, _TAB, _TBB


@numba.njit(cache=True, nogil=True)
def _sm_prepare(Y, Z, r, others, ko, Gi, P, zo, e):
    """Cell r's other columns zo (ko,), its residual e = y_r - P' zo (D,); returns (zo' Gi zo, e'e)."""
    beta = 0.0
    for a in range(ko):
        zo[a] = Z[r, others[a]]
    for a in range(ko):
        if zo[a] != 0.0:
            for b in range(ko):
                if zo[b] != 0.0:
                    beta += Gi[a, b]
    eps = 0.0
    for d in range(Y.shape[1]):
        acc = Y[r, d]
        for a in range(ko):
            if zo[a] != 0.0:
                acc -= P[a, d]
        e[d] = acc
        eps += acc * acc
    return beta, eps


@numba.njit(cache=True, nogil=True)
def _sm_cache(Y, Z, cells, n, others, ko, Gi, P, ZO, E, BE, EP):
    """Rows t < n of ZO, E, BE, EP: ``_sm_prepare`` of cell cells[t] (fixed during a move)."""
    for t in range(n):
        BE[t], EP[t] = _sm_prepare(Y, Z, cells[t], others, ko, Gi, P, ZO[t], E[t])


@numba.njit(cache=True, nogil=True)
def _gram(Y, Z, K, w, Gf, Hf):
    """Gf[:K, :K] = Z'WZ and Hf[:K] = Z'WY over the first K columns."""
    N, D = Y.shape
    for a in range(K):
        for b in range(K):
            Gf[a, b] = 0.0
        for d in range(D):
            Hf[a, d] = 0.0
    for r in range(N):
        wr = w[r]
        for a in range(K):
            if Z[r, a]:
                for b in range(K):
                    if Z[r, b]:
                        Gf[a, b] += wr
                for d in range(D):
                    Hf[a, d] += wr * Y[r, d]


@numba.njit(cache=True, nogil=True)
def _others_posterior(Gf, Hf, others, ko, c_ratio):
    """(G_oo^-1, G_oo^-1 H_o) of the other columns, from the full Z'WZ and Z'WY."""
    D = Hf.shape[1]
    if ko == 0:
        return np.zeros((0, 0)), np.zeros((0, D))
    G = np.empty((ko, ko))
    H = np.empty((ko, D))
    for a in range(ko):
        for b in range(ko):
            G[a, b] = Gf[others[a], others[b]]
        G[a, a] += c_ratio
        for d in range(D):
            H[a, d] = Hf[others[a], d]
    Gi = np.linalg.inv(G)
    return Gi, Gi @ H


@numba.njit(cache=True, nogil=True)
def _sm_dots(ua, ub, Ra, Rb, zo, e, ko, out):
    """out = (zo'ua, zo'ub, e'Ra, e'Rb): what adding the prepared cell to a or b needs."""
    al_a = 0.0
    al_b = 0.0
    for a in range(ko):
        if zo[a] != 0.0:
            al_a += ua[a]
            al_b += ub[a]
    rho_a = 0.0
    rho_b = 0.0
    for d in range(e.shape[0]):
        rho_a += Ra[d] * e[d]
        rho_b += Rb[d] * e[d]
    out[0] = al_a
    out[1] = al_b
    out[2] = rho_a
    out[3] = rho_b


@numba.njit(cache=True, nogil=True)
def _sm_scalars(st, new, in_a, in_b, x, dots, beta, eps):
    """new = the scalars after adding the prepared cell with weight x (negative: removing) to a and/or b."""
    for t in range(9):
        new[t] = st[t]
    al_a, al_b, rho_a, rho_b = dots[0], dots[1], dots[2], dots[3]
    if in_a:
        new[_NA] += x
        new[_TAA] += 2.0 * x * al_a + x * x * beta
        new[_QAA] += 2.0 * x * rho_a + x * x * eps
        new[_TAB] += x * al_b
        new[_QAB] += x * rho_b
    if in_b:
        new[_NB] += x
        new[_TBB] += 2.0 * x * al_b + x * x * beta
        new[_QBB] += 2.0 * x * rho_b + x * x * eps
        new[_TAB] += x * al_a
        new[_QAB] += x * rho_a
    if in_a and in_b:
        new[_NAB] += x
        new[_TAB] += x * x * beta
        new[_QAB] += x * x * eps


@numba.njit(cache=True, nogil=True)
def _sm_apply(st, ua, ub, Ra, Rb, Gi, zo, e, ko, in_a, in_b, x, dots, beta, eps):
    """Add the prepared cell with weight x to a and/or b (scalars and the vectors u = Gi g, R)."""
    _sm_scalars(st, st, in_a, in_b, x, dots, beta, eps)
    for a in range(ko):
        if zo[a] != 0.0:
            for b in range(ko):
                g = Gi[b, a] * x
                if in_a:
                    ua[b] += g
                if in_b:
                    ub[b] += g
    for d in range(e.shape[0]):
        if in_a:
            Ra[d] += x * e[d]
        if in_b:
            Rb[d] += x * e[d]



@numba.njit(cache=True, nogil=True)
def _reset_state(st, ua, ub, Ra, Rb, ko):
    """Both moving columns empty: zero scalars and vectors."""
    for t in range(9):
        st[t] = 0.0
    for a in range(ko):
        ua[a] = 0.0
        ub[a] = 0.0
    for d in range(Ra.shape[0]):
        Ra[d] = 0.0
        Rb[d] = 0.0


@numba.njit(cache=True, nogil=True)
def _other_columns(K, k1, k2, others):
    """others[:ko] = the columns 0..K-1 but k1 and k2 (-1: none); returns ko."""
    ko = 0
    for k in range(K):
        if k != k1 and k != k2:
            others[ko] = k
            ko += 1
    return ko


@numba.njit(cache=True, nogil=True)
def _shuffle(cells, n):
    """A uniform random order of cells[:n] (Fisher-Yates, in place)."""
    for t in range(n - 1, 0, -1):
        s = np.random.randint(t + 1)  # noqa: NPY002
        tmp = cells[t]
        cells[t] = cells[s]
        cells[s] = tmp


@numba.njit(cache=True, nogil=True)
def _move_last_column(Z, m, k, K):
    """Overwrite column k of Z and m with the last active one (K - 1), which is cleared."""
    last = K - 1
    for r in range(Z.shape[0]):
        Z[r, k] = Z[r, last]
        Z[r, last] = 0
    m[k] = m[last]
    m[last] = 0


@numba.njit(cache=True, nogil=True)
def _move_workspace(N, D, kcap):
    """The work arrays of a compiled whole-feature move (split-merge, birth-death), allocated once per call.

    Returns (others, cells, ca, cb, fa, fb, Ra, Rb, ua, ub, st, new, dots, ZO, E, BE, EP, Gf, Hf):
    the other columns; the moving cells, their memberships of a and b (current and forced); the
    vectors and scalars of the moving columns' state (and a trial copy ``new``); the prepared cells
    (``_sm_cache``); the full Z'WZ and Z'WY (``_gram``).
    """
    return (np.empty(kcap, np.int64), np.empty(N, np.int64), np.zeros(N, np.uint8), np.zeros(N, np.uint8),
            np.zeros(N, np.uint8), np.zeros(N, np.uint8), np.zeros(D), np.zeros(D), np.zeros(kcap),
            np.zeros(kcap), np.zeros(9), np.zeros(9), np.zeros(4), np.zeros((N, kcap)), np.zeros((N, D)),
            np.zeros(N), np.zeros(N), np.zeros((kcap, kcap)), np.zeros((kcap, D)))
