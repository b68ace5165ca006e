"""Split-merge Metropolis-Hastings moves on the features, compiled (``split_merge_moves``).

After Meeds, Ghahramani, Neal and Roweis (2007) with the restricted Gibbs proposals of Jain and
Neal (2004), the loadings integrated out (``_column_state``, ``_likelihood._pair_gain``).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ._column_state import (
    _gram,
    _move_last_column,
    _move_workspace,
    _other_columns,
    _others_posterior,
    _reset_state,
    _shuffle,
    _sm_apply,
    _sm_cache,
    _sm_dots,
    _sm_scalars,
)
from ._likelihood import _NA, _QAA, _TAA, _column_gain, _pair_gain


@numba.njit(cache=True, nogil=True)
def _sm_scan(Y, w, cells, nc, ca, cb, ko, Gi, st, ua, ub, Ra, Rb, counts, N, c_ratio, v_x,
             forced, fa, fb, ZO, E, BE, EP, dots, new, lw):
    """One restricted Gibbs scan of the cells (a alone, b alone or both); returns the log probability of
    the options taken. forced: take the options (fa, fb) instead of drawing them (a merge's reverse)."""
    D = Y.shape[1]
    logq = 0.0
    for t in range(nc):
        wr = w[cells[t]]
        zo = ZO[t]
        e = E[t]
        beta = BE[t]
        eps = EP[t]
        _sm_dots(ua, ub, Ra, Rb, zo, e, ko, dots)
        _sm_apply(st, ua, ub, Ra, Rb, Gi, zo, e, ko, ca[t] == 1, cb[t] == 1, -wr, dots, beta, eps)
        counts[0] -= ca[t]
        counts[1] -= cb[t]
        _sm_dots(ua, ub, Ra, Rb, zo, e, ko, dots)
        top = -np.inf
        for o in range(3):
            in_a = o != 1
            in_b = o != 0
            _sm_scalars(st, new, in_a, in_b, wr, dots, beta, eps)
            ma = counts[0] + (1 if in_a else 0)
            mb = counts[1] + (1 if in_b else 0)
            # the IBP prior of the two columns (the others' part does not change)
            lw[o] = (_pair_gain(new, c_ratio, v_x, D) + math.lgamma(N - ma + 1.0) + math.lgamma(ma)
                     + math.lgamma(N - mb + 1.0) + math.lgamma(mb))
            if lw[o] > top:
                top = lw[o]
        tot = 0.0
        for o in range(3):
            lw[o] = math.exp(lw[o] - top)
            tot += lw[o]
        if forced:
            opt = 2 if (fa[t] and fb[t]) else (0 if fa[t] else 1)
        else:
            u = np.random.random() * tot  # noqa: NPY002
            opt = 0
            cum = lw[0]
            while cum < u and opt < 2:
                opt += 1
                cum += lw[opt]
        logq += math.log(lw[opt] / tot)
        ca[t] = 0 if opt == 1 else 1
        cb[t] = 0 if opt == 0 else 1
        counts[0] += ca[t]
        counts[1] += cb[t]
        _sm_apply(st, ua, ub, Ra, Rb, Gi, zo, e, ko, ca[t] == 1, cb[t] == 1, wr, dots, beta, eps)
    return logq


@numba.njit(cache=True, nogil=True)
def _pick_pair(Z, K, n_fixed, fi, fj):
    """Two cells i != j at random and one IBP feature of each: (i, j, k1, k2), k1 = -1 when either
    cell holds none."""
    N = Z.shape[0]
    i = np.random.randint(N)  # noqa: NPY002
    j = np.random.randint(N - 1)  # noqa: NPY002
    if j >= i:
        j += 1
    ni = 0
    nj = 0
    for k in range(n_fixed, K):
        if Z[i, k]:
            fi[ni] = k
            ni += 1
        if Z[j, k]:
            fj[nj] = k
            nj += 1
    if ni == 0 or nj == 0:
        return i, j, -1, -1
    k1 = fi[np.random.randint(ni)]  # noqa: NPY002
    k2 = fj[np.random.randint(nj)]  # noqa: NPY002
    return i, j, k1, k2


@numba.njit(cache=True, nogil=True)
def _merged_gain(w, cells, n, ko, Gi, st, ua, ub, Ra, Rb, ZO, E, BE, EP, dots, c_ratio, v_x, D):
    """The collapsed likelihood gain of the merged column: all n prepared cells in a (b empty)."""
    _reset_state(st, ua, ub, Ra, Rb, ko)
    for t in range(n):
        _sm_dots(ua, ub, Ra, Rb, ZO[t], E[t], ko, dots)
        _sm_apply(st, ua, ub, Ra, Rb, Gi, ZO[t], E[t], ko, True, False, w[cells[t]], dots, BE[t], EP[t])
    return _column_gain(st[_NA], st[_TAA], st[_QAA], c_ratio, v_x, D)


@numba.njit(cache=True, nogil=True)
def _launch(Z, w, cells, nc, k1, k2, split, ko, Gi, st, ua, ub, Ra, Rb, counts, ca, cb, fa, fb,
            ZO, E, BE, EP, dots):
    """The launch state: i (cells[nc]) in a, j (cells[nc + 1]) in b, the other cells in a alone, b
    alone or both at random; for a merge, fa, fb = the cells' current columns k1, k2."""
    _reset_state(st, ua, ub, Ra, Rb, ko)
    counts[0] = 1
    counts[1] = 1
    for t in range(nc + 2):
        r = cells[t]
        if t == nc:
            in_a, in_b = True, False
        elif t == nc + 1:
            in_a, in_b = False, True
        else:
            o = np.random.randint(3)  # noqa: NPY002
            in_a = o != 1
            in_b = o != 0
            ca[t] = 1 if in_a else 0
            cb[t] = 1 if in_b else 0
            counts[0] += ca[t]
            counts[1] += cb[t]
            if not split:
                fa[t] = Z[r, k1]
                fb[t] = Z[r, k2]
        _sm_dots(ua, ub, Ra, Rb, ZO[t], E[t], ko, dots)
        _sm_apply(st, ua, ub, Ra, Rb, Gi, ZO[t], E[t], ko, in_a, in_b, w[r], dots, BE[t], EP[t])


@numba.njit(cache=True, nogil=True)
def _split_prior(alpha, N, ma, mb, mc):
    """log of the IBP prior ratio of the split (a, b) to the merged column c."""
    return (math.log(alpha) + math.lgamma(N - ma + 1.0) + math.lgamma(ma) + math.lgamma(N - mb + 1.0)
            + math.lgamma(mb) - math.lgamma(N + 1.0) - math.lgamma(N - mc + 1.0) - math.lgamma(mc))


@numba.njit(cache=True, nogil=True)
def _apply_split_or_merge(Z, m, K, i, j, k1, k2, split, cells, nc, ca, cb, ma, mb, mc):
    """Write an accepted split (k1 -> k1, K) or merge (k1, k2 -> k1) into Z and m; returns the new K."""
    if split:
        Z[i, K] = 0
        Z[j, k1] = 0
        Z[j, K] = 1
        for t in range(nc):
            Z[cells[t], k1] = ca[t]
            Z[cells[t], K] = cb[t]
        m[k1] = ma
        m[K] = mb
        return K + 1
    for t in range(nc):
        Z[cells[t], k1] = 1
    Z[j, k1] = 1
    m[k1] = mc
    _move_last_column(Z, m, k2, K)
    return K - 1


@numba.njit(cache=True, nogil=True)
def _split_merge(Y, Z, m, K, w, v_x, s2a, alpha, n_fixed, kcap, n_moves, n_scans):
    """Split-merge Metropolis-Hastings moves on the features (in place); returns (new K, accepted).

    Pick two cells i != j at random and one feature of each (uniformly among their IBP
    features). The same feature c: propose to split it into a (holding i, not j) and b (holding
    j, not i); two features k1 of i and k2 of j (i not in k2, j not in k1): propose their union
    c (the reverse). The cells of c but i and j start (the launch state) in a alone, b alone or
    both at random, then ``n_scans`` restricted Gibbs scans (in a random order, each cell drawn
    from its conditional among the three given the others, under the collapsed likelihood and
    the IBP prior) lead to a last scan, which is the split proposal; for a merge, the
    probability that the last scan from an independent launch gives the current a and b is the
    reverse proposal's.

    On the multisets of columns (the IBP's left-ordered classes) the choice probabilities,
    the multiplicities of identical columns and the number of each cell's features cancel,
    so a split is accepted with probability
    min(1, alpha (N - m_a)! (m_a - 1)! (N - m_b)! (m_b - 1)! / (N! (N - m_c)! (m_c - 1)!)
    x p(Y | split) / p(Y | merged) / q(last scan)), a merge with the inverse. The loadings
    (and the baseline) are integrated out as in the row sweep: given the other columns o,
    with G = Z'WZ + (v_x / s2a) I, Gi = G_oo^-1 and P = Gi Z_o'WY (fixed during the move),
    log p(Y | Z) = const + |n| D / 2 log(v_x / s2a) - D / 2 log|S| + tr(S^-1 R R') / (2 v_x),
    S = G_nn - G_no Gi G_on and R = Z_n'W(Y - Z_o P) for the moving columns n, updated in
    O(|o| (|o| + D)) when a cell joins or leaves a or b.
    """
    N, D = Y.shape
    c_ratio = v_x / s2a
    acc_count = 0
    (others, cells, ca, cb, fa, fb, Ra, Rb, ua, ub, st, new, dots, ZO, E, BE, EP, Gf, Hf) = _move_workspace(N, D, kcap)
    fi = np.empty(kcap, np.int64)
    fj = np.empty(kcap, np.int64)
    lw = np.empty(3)
    counts = np.zeros(2, np.int64)
    _gram(Y, Z, K, w, Gf, Hf)
    for _ in range(n_moves):
        i, j, k1, k2 = _pick_pair(Z, K, n_fixed, fi, fj)
        if k1 < 0:
            continue
        split = k1 == k2
        if split:
            if K >= kcap:
                continue
        elif Z[i, k2] or Z[j, k1]:
            continue  # not the merge of a split (which puts i in a only, j in b only)
        nc = 0
        for r in range(N):
            if r != i and r != j and (Z[r, k1] or Z[r, k2]):
                cells[nc] = r
                nc += 1
        mc = nc + 2
        if not split and n_fixed and mc == N:
            continue  # the union would be held by every cell: excluded with the baseline
        # the other columns (baseline included): G_oo^-1 and P
        ko = _other_columns(K, k1, k2, others)
        Gi, P = _others_posterior(Gf, Hf, others, ko, c_ratio)
        _shuffle(cells, nc)
        cells[nc] = i
        cells[nc + 1] = j
        _sm_cache(Y, Z, cells, nc + 2, others, ko, Gi, P, ZO, E, BE, EP)
        ll_merged = _merged_gain(w, cells, nc + 2, ko, Gi, st, ua, ub, Ra, Rb, ZO, E, BE, EP, dots, c_ratio, v_x, D)
        # launch: i in a, j in b, the others at random; then the intermediate scans
        _launch(Z, w, cells, nc, k1, k2, split, ko, Gi, st, ua, ub, Ra, Rb, counts, ca, cb, fa, fb,
                ZO, E, BE, EP, dots)
        for __ in range(n_scans):
            _sm_scan(Y, w, cells, nc, ca, cb, ko, Gi, st, ua, ub, Ra, Rb, counts, N, c_ratio, v_x,
                     False, fa, fb, ZO, E, BE, EP, dots, new, lw)
        log_q = _sm_scan(Y, w, cells, nc, ca, cb, ko, Gi, st, ua, ub, Ra, Rb, counts, N, c_ratio,
                         v_x, not split, fa, fb, ZO, E, BE, EP, dots, new, lw)
        ll_split = _pair_gain(st, c_ratio, v_x, D)
        ma = counts[0]
        mb = counts[1]
        lr = _split_prior(alpha, N, ma, mb, mc) + ll_split - ll_merged - log_q  # log acceptance ratio of the split
        if not split:
            lr = -lr
        if lr >= 0.0 or np.random.random() < math.exp(lr):  # noqa: NPY002
            acc_count += 1
            K = _apply_split_or_merge(Z, m, K, i, j, k1, k2, split, cells, nc, ca, cb, ma, mb, mc)
            _gram(Y, Z, K, w, Gf, Hf)
    return K, acc_count
