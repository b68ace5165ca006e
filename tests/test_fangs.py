"""FARO loss and FANGS: brute force, metric properties, incremental bookkeeping, search quality."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from benchmarks import bench_fangs
from scontrast.core import ScontrastError
from scontrast.fangs import (
    _lap_max,
    _Packed,
    _sweeten,
    _Sweetener,
    check_samples,
    draws,
    expected_loss,
    fangs,
    faro_cost_matrix,
    faro_loss,
    feature_support,
)


def rand_fa(rng, n, k, p=0.4):
    return (rng.random((n, k)) < p).astype(np.uint8)


def hamming_literal(E, S, a):
    """Generalised Hamming distance counted entry by entry (no matrix algebra)."""
    cost = 0.0
    for i in range(E.shape[0]):
        for j in range(E.shape[1]):
            if E[i, j] == 1 and S[i, j] == 0:
                cost += a
            elif E[i, j] == 0 and S[i, j] == 1:
                cost += 2 - a
    return cost


def brute_force(E, S, a):
    """Pad with zero columns, then the minimum over every column permutation of the sample."""
    k = max(E.shape[1], S.shape[1])
    E = np.pad(E, ((0, 0), (0, k - E.shape[1])))
    S = np.pad(S, ((0, 0), (0, k - S.shape[1])))
    if k <= 4:  # literal: permute the matrix and count
        return min(hamming_literal(E, S[:, list(p)], a) for p in itertools.permutations(range(k)))
    # cost matrix by explicit loops, then all K! alignments vectorised
    C = np.array([[hamming_literal(E[:, [j]], S[:, [l]], a) for l in range(k)] for j in range(k)])
    perms = np.array(list(itertools.permutations(range(k))))
    return float(C[np.arange(k), perms].sum(axis=1).min())


# --------------------------------------------------------------------------- the loss


@pytest.mark.parametrize("a", [0.5, 1.0, 1.5])
def test_faro_loss_equals_brute_force(a):
    rng = np.random.default_rng(int(a * 10))
    for trial in range(60):
        n = int(rng.integers(1, 15))
        k1, k2 = (int(x) for x in rng.integers(0, 8, size=2))
        if trial < 6:  # make sure the largest case K = 7 is covered on both sides
            k1, k2 = 7, int(rng.integers(0, 8))
        E, S = rand_fa(rng, n, k1, rng.uniform(0.1, 0.7)), rand_fa(rng, n, k2, rng.uniform(0.1, 0.7))
        assert faro_loss(E, S, a) == pytest.approx(brute_force(E, S, a)), (trial, E, S)


def test_faro_loss_known_answer():
    E = np.array([[1, 0], [1, 1], [0, 1]])
    S = np.array([[0, 1], [1, 1], [1, 0]])  # S's columns swapped and row 3 of feature 1 off
    # aligned: E col 0 <-> S col 1 (equal), E col 1 <-> S col 0: E (0,1,1) vs S (0,1,1)? S col 0 = (0,1,1)
    assert faro_loss(E, S) == 0.0
    S2 = np.array([[0, 1], [1, 1], [0, 0]])
    # best alignment leaves one entry estimate 1 / sample 0: cost a
    assert faro_loss(E, S2, a=0.5) == pytest.approx(0.5)
    assert faro_loss(S2, E, a=0.5) == pytest.approx(1.5)
    C = faro_cost_matrix(E, S2, a=1.0)
    assert C.shape == (2, 2)
    assert C[1, 0] == pytest.approx(1.0) and C[0, 1] == pytest.approx(0.0)


def test_padding_and_column_order_do_not_matter():
    rng = np.random.default_rng(1)
    Z = rand_fa(rng, 30, 5)
    assert faro_loss(Z, Z[:, rng.permutation(5)]) == 0.0
    assert faro_loss(Z, np.hstack([Z, np.zeros((30, 3), np.uint8)])) == 0.0
    assert faro_loss(np.zeros((30, 0)), Z, a=1.0) == pytest.approx(Z.sum())
    assert faro_loss(Z, np.zeros((30, 0)), a=0.5) == pytest.approx(0.5 * Z.sum())


def test_metric_at_a_equal_one():
    rng = np.random.default_rng(2)
    fas = [rand_fa(rng, 12, int(rng.integers(0, 6)), rng.uniform(0.2, 0.6)) for _ in range(25)]
    for A, B in itertools.combinations(fas, 2):
        assert faro_loss(A, B) == pytest.approx(faro_loss(B, A))
    n_triples = 0
    for A, B, C in itertools.permutations(fas[:14], 3):
        assert faro_loss(A, B) + faro_loss(B, C) >= faro_loss(A, C) - 1e-9
        n_triples += 1
    assert n_triples == 14 * 13 * 12
    # identity of indiscernibles: positive unless equal up to columns
    for A, B in itertools.combinations(fas[:10], 2):
        same = sorted(map(bytes, A[:, A.any(0)].T)) == sorted(map(bytes, B[:, B.any(0)].T))
        assert (faro_loss(A, B) == 0) == same


@pytest.mark.parametrize("a", [0.5, 1.5])
def test_not_symmetric_when_a_differs_from_one(a):
    rng = np.random.default_rng(3)
    fas = [rand_fa(rng, 10, int(rng.integers(1, 5)), rng.uniform(0.1, 0.7)) for _ in range(15)]
    asymmetric = 0
    for A, B in itertools.combinations(fas, 2):
        # the optimal alignment does not depend on a, so L(A,B) - L(B,A) = (a - b)(|A| - |B|)
        diff = faro_loss(A, B, a) - faro_loss(B, A, a)
        assert diff == pytest.approx((a - (2 - a)) * (int(A.sum()) - int(B.sum())))
        asymmetric += abs(diff) > 1e-9
    assert asymmetric > 50
    for A, B, C in itertools.permutations(fas[:8], 3):  # still a quasi-metric
        assert faro_loss(A, B, a) + faro_loss(B, C, a) >= faro_loss(A, C, a) - 1e-9


def test_compiled_assignment_matches_scipy_and_gives_optimal_duals():
    rng = np.random.default_rng(4)
    for _ in range(400):
        nr, nc = (int(x) for x in rng.integers(1, 12, size=2))
        M = rng.integers(0, 30, size=(nr, nc)).astype(float)
        n = max(nr, nc)
        assign, du, dw = np.empty(nr, dtype=np.int64), np.empty(n), np.empty(n)
        val = _lap_max(M, nr, nc, assign, du, dw)
        r, c = linear_sum_assignment(M, maximize=True)
        assert val == M[r, c].sum()
        assert len(set(assign)) == nr and assign.max() < n
        real = assign < nc
        assert M[np.flatnonzero(real), assign[real]].sum() == val
        # duals of the zero-padded square problem: feasible, tight on the assignment, same optimum
        Mp = np.zeros((n, n))
        Mp[:nr, :nc] = M
        assert np.all(du[:, None] + dw[None, :] >= Mp - 1e-9)
        assert np.allclose(du[np.arange(nr)] + dw[assign], Mp[np.arange(nr), assign])
        assert du.sum() + dw.sum() == pytest.approx(val)
        assert np.allclose(du, np.round(du)) and np.allclose(dw, np.round(dw))  # integer data, integer duals


# --------------------------------------------------------------------------- validation


def test_bad_inputs_raise_naming_the_problem():
    good = np.zeros((5, 2), np.uint8)
    with pytest.raises(ScontrastError, match=r"^samples\[1\]: has 4 rows"):
        check_samples([good, np.zeros((4, 2))])
    with pytest.raises(ScontrastError, match=r"^samples\[1\]: is not binary"):
        check_samples([good, np.full((5, 1), 0.5)])
    with pytest.raises(ScontrastError, match=r"^samples\[0\]: is not binary.*2"):
        expected_loss([np.array([[2, 0]])], np.zeros((1, 1)))
    with pytest.raises(ScontrastError, match="^samples: is empty"):
        fangs([])
    with pytest.raises(ScontrastError, match=r"^samples\[0\]: expected a 2-d"):
        check_samples([np.zeros(5)])
    with pytest.raises(ScontrastError, match="^estimate: has 3 rows"):
        expected_loss([good], np.zeros((3, 1)))
    with pytest.raises(ScontrastError, match="^sample: has 6 rows"):
        faro_loss(good, np.zeros((6, 1)))
    with pytest.raises(ScontrastError, match="^estimate: is not binary"):
        faro_loss(np.array([[np.nan]]), np.zeros((1, 1)))
    for a in (0, 2, -1, 2.5, True, "1"):
        with pytest.raises(ScontrastError, match=r"^a: expected a finite number > 0\.0 and < 2\.0"):
            faro_loss(good, good, a=a)
    with pytest.raises(ScontrastError, match="^n_init: expected an integer >= 1"):
        fangs([good], n_init=0)
    with pytest.raises(ScontrastError, match="^n_sweet: expected an integer >= 1"):
        fangs([good], n_sweet=2.0)
    with pytest.raises(ScontrastError, match="^n_iter: expected an integer >= 0 or None"):
        fangs([good], n_iter=-1)
    with pytest.raises(ScontrastError, match="^max_seconds: expected a finite number > 0"):
        fangs([good], max_seconds=-1)
    with pytest.raises(ScontrastError, match=r"^n_iter: None \(no cap on the flips\) needs a time limit"):
        fangs([good], n_iter=None)
    with pytest.raises(ScontrastError, match="^n_jobs: expected a nonzero integer"):
        fangs([good], n_jobs=0)
    with pytest.raises(ScontrastError, match="^n_jobs: expected"):
        draws([good], n_jobs=0)
    for bad in ("seven", -1, 1.5):
        with pytest.raises(ScontrastError, match="^random_state: expected"):
            fangs([good], random_state=bad)


def test_random_state_none_int_and_generator():
    _, samples = bench_fangs.posterior_like_samples(30, 3, 20, flip=0.1, rng=12)
    fangs(samples, n_iter=50, random_state=None)
    by_int = fangs(samples, n_iter=50, random_state=5)
    by_gen = fangs(samples, n_iter=50, random_state=np.random.default_rng(5))
    # an int seeds a Generator: the same draws, the same estimate
    np.testing.assert_array_equal(by_int.details["baselines"], by_gen.details["baselines"])
    np.testing.assert_array_equal(by_int.estimate, by_gen.estimate)


def test_default_n_iter_is_one_thousand_flips_per_sweetening():
    _, samples = bench_fangs.posterior_like_samples(30, 3, 20, flip=0.1, rng=13)
    f = fangs(samples, n_sweet=2, random_state=0)
    np.testing.assert_array_equal(f.details["iterations"], [1000, 1000])
    assert fangs(samples, n_iter=0, n_sweet=1, random_state=0).details["accepted"][0] == 0


# --------------------------------------------------------------------------- expected loss, sweetening


def test_expected_loss_is_the_mean_loss():
    rng = np.random.default_rng(5)
    samples = [rand_fa(rng, 20, int(rng.integers(0, 6))) for _ in range(15)]
    est = rand_fa(rng, 20, 3)
    for a in (0.5, 1.0, 1.5):
        assert expected_loss(samples, est, a) == pytest.approx(np.mean([faro_loss(est, s, a) for s in samples]))


@pytest.mark.parametrize("a", [0.5, 1.0, 1.5])
def test_incremental_flips_equal_recomputation(a):
    rng = np.random.default_rng(int(10 * a))
    truth, samples = bench_fangs.posterior_like_samples(25, 4, 30, flip=0.1, rng=rng)
    samples += [rand_fa(rng, 25, int(rng.integers(0, 6)), 0.3) for _ in range(5)]  # off-mode samples, K_b = 0 too
    P = _Packed(check_samples(samples))
    state = _Sweetener(P, samples[0], a)
    for _step in range(250):
        i, j = int(rng.integers(25)), int(rng.integers(state.width))
        delta, pending = state.evaluate(i, j, early_stop=False)
        flipped = state.E.copy()
        flipped[i, j] ^= 1
        truth_loss = expected_loss(samples, flipped, a)
        assert state.loss() + delta / P.B == pytest.approx(truth_loss, abs=1e-9)
        quick, _ = state.evaluate(i, j, early_stop=True)
        assert (quick is None and truth_loss >= state.loss() - 1e-9) or quick == pytest.approx(delta)
        if rng.random() < 0.5:  # accept arbitrary flips so the estimate wanders (features born and dropped)
            state.commit(i, j, pending)
            assert state.loss() == pytest.approx(expected_loss(samples, state.estimate(), a), abs=1e-9)
            if not state.has_empty_column():  # what the search does when every column became a feature
                state = _Sweetener(P, state.estimate(), a, extra=2)
            Mp = np.zeros((P.B, state.width, state.width))  # the duals stay feasible and tight
            for b in range(P.B):
                Mp[b, :, :P.k[b]] = state.O[:, P.off[b]:P.off[b + 1]]
            assert np.all(state.du[:, :, None] + state.dw[:, None, :] >= Mp - 1e-9)
            rows = np.arange(state.width)
            assert np.allclose(np.take_along_axis(state.dw, state.match, 1) + state.du,
                               Mp[np.arange(P.B)[:, None], rows, state.match])
            assert np.allclose(state.du.sum(1) + state.dw.sum(1), state.v)


# --------------------------------------------------------------------------- search


def brute_draws(samples, a):
    losses = [expected_loss(samples, s, a) for s in samples]
    return int(np.argmin(losses)), min(losses)


@pytest.mark.parametrize("a", [0.7, 1.0, 1.3])
def test_draws_is_the_best_sample(a):
    rng = np.random.default_rng(6)
    _, samples = bench_fangs.posterior_like_samples(20, 3, 25, flip=0.1, rng=rng)
    d = draws(samples, a=a, n_jobs=1)
    idx, loss = brute_draws(samples, a)
    assert d.expected_loss == pytest.approx(loss)
    assert d.index == idx
    assert d.details["expected_losses"].shape == (25,)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fangs_beats_or_equals_draws(seed):
    truth, samples = bench_fangs.posterior_like_samples(60, 5, 60, flip=0.08, rng=seed)
    f = fangs(samples, n_iter=400, n_jobs=1, random_state=seed)
    d = draws(samples, n_jobs=1)
    assert f.expected_loss == pytest.approx(expected_loss(samples, f.estimate))
    assert f.expected_loss <= d.expected_loss + 1e-9
    assert f.expected_loss <= np.min(f.details["initial_losses"]) + 1e-9
    assert faro_loss(f.estimate, truth) <= faro_loss(d.estimate, truth)
    assert set(f.timings) == {"initialization", "sweetening", "total"}
    assert f.estimate.dtype == np.uint8 and f.estimate.any(axis=0).all()


def test_fangs_finds_the_truth_when_samples_scatter_around_it():
    truth, samples = bench_fangs.posterior_like_samples(40, 4, 80, flip=0.05, rng=7)
    f = fangs(samples, n_jobs=1, random_state=0)
    assert faro_loss(f.estimate, truth) == 0.0
    assert f.expected_loss < draws(samples, n_jobs=1).expected_loss


def test_sweetening_repairs_a_damaged_estimate():
    truth, samples = bench_fangs.posterior_like_samples(40, 4, 60, flip=0.05, rng=11)
    P = _Packed(check_samples(samples))
    damaged = truth ^ (np.random.default_rng(0).random(truth.shape) < 0.1).astype(np.uint8)
    est, loss, iterations, accepted = _sweeten(P, damaged, 1.0, 3000, None, seed=0)
    assert iterations == 3000 and accepted >= 10
    assert loss == pytest.approx(expected_loss(samples, est))
    assert loss < expected_loss(samples, damaged) - 5
    assert faro_loss(est, truth) < faro_loss(damaged, truth)


def test_a_tunes_sparsity():
    _, samples = bench_fangs.posterior_like_samples(40, 5, 50, flip=0.2, rng=8)
    dense = fangs(samples, a=0.4, n_iter=300, n_jobs=1, random_state=0).estimate.sum()
    middle = fangs(samples, a=1.0, n_iter=300, n_jobs=1, random_state=0).estimate.sum()
    sparse = fangs(samples, a=1.6, n_iter=300, n_jobs=1, random_state=0).estimate.sum()
    assert dense > middle > sparse


def test_reproducible_and_independent_of_n_jobs():
    _, samples = bench_fangs.posterior_like_samples(50, 5, 40, flip=0.1, rng=9)
    one = fangs(samples, n_iter=300, n_jobs=1, random_state=3)
    again = fangs(samples, n_iter=300, n_jobs=1, random_state=3)
    two = fangs(samples, n_iter=300, n_jobs=2, random_state=3)
    assert np.array_equal(one.estimate, again.estimate) and np.array_equal(one.estimate, two.estimate)
    assert one.expected_loss == two.expected_loss
    np.testing.assert_array_equal(one.details["accepted"], two.details["accepted"])
    assert draws(samples, n_jobs=2).index == draws(samples, n_jobs=1).index


def test_max_seconds_stops_the_sweetening():
    _, samples = bench_fangs.posterior_like_samples(100, 6, 60, flip=0.1, rng=10)
    f = fangs(samples, n_iter=None, max_seconds=1.0, n_jobs=1, random_state=0)
    assert f.timings["total"] < 6.0
    assert f.details["iterations"].min() > 0


def test_edge_cases():
    empty = [np.zeros((6, 0), np.uint8)] * 3
    f = fangs(empty, n_jobs=1, random_state=0)
    assert f.estimate.shape == (6, 0) and f.expected_loss == 0.0
    one = [np.ones((6, 1), np.uint8)]
    assert fangs(one, n_jobs=1, random_state=0).expected_loss == 0.0
    assert draws(one, n_jobs=1).index == 0
    # n_init larger than B draws baselines with replacement
    assert fangs(one * 3, n_init=16, n_jobs=1, random_state=0).n_features == 1


def test_benchmark_core_runs_on_tiny_sizes():
    rows = bench_fangs.table1(range(2, 5), n=10, reps=2, brute_max_k=4)
    assert all(r["agree"] for r in rows)
    rows = bench_fangs.table3([(15, 2, 10)], n_jobs=1, n_iter=50)
    assert rows[0]["fangs_loss"] <= rows[0]["draws_loss"] + 1e-9
    text = "\n".join(bench_fangs._fmt_table1(bench_fangs.table1([2], n=5, reps=1)) +
                     bench_fangs._fmt_table3(rows, "t"))
    assert "assignment" in text and "FANGS" in text


# --------------------------------------------------------------------------- support of a feature per chain


def jaccard(a, b):
    union = int((a | b).sum())
    return int((a & b).sum()) / union if union else 0.0


def support_brute_force(samples, E, groups):
    """Per sample, every one-to-one alignment of E's columns to the sample's (zero columns
    padding the shorter side) with the largest total overlap; None when that optimum is not
    unique in the Jaccard indices it gives (ties broken differently would change the score)."""
    k = E.shape[1]
    scores = []
    for S in samples:
        w = max(k, S.shape[1])
        Sp = np.pad(S, ((0, 0), (0, w - S.shape[1])))
        best, values = -1, set()
        for perm in itertools.permutations(range(w), k):
            total = sum(int((E[:, j] & Sp[:, perm[j]]).sum()) for j in range(k))
            jac = tuple(jaccard(E[:, j].astype(bool), Sp[:, perm[j]].astype(bool)) if perm[j] < S.shape[1] else 0.0
                        for j in range(k))
            if total > best:
                best, values = total, {jac}
            elif total == best:
                values.add(jac)
        if len(values) != 1:
            return None
        scores.append(values.pop())
    scores = np.array(scores)
    return np.stack([scores[np.asarray(groups) == g].mean(axis=0) for g in np.unique(groups)], axis=1)


def test_feature_support_known_answer():
    """Chain 0 holds both features exactly; chain 1 holds the first and, in place of the second, a
    feature sharing 2 of its 5 cells (plus 4 others), or nothing."""
    n = 30
    E = np.zeros((n, 2), dtype=np.uint8)
    E[:10, 0] = 1
    E[10:15, 1] = 1
    other = np.zeros((n, 1), dtype=np.uint8)
    other[[10, 11, 20, 21, 22, 23], 0] = 1
    chain0 = [E.copy(), E[:, ::-1].copy()]  # column order does not matter
    chain1 = [np.hstack([E[:, :1], other]), E[:, :1].copy()]
    support, labels = feature_support(chain0 + chain1, E, [7, 7, 3, 3])
    assert list(labels) == [3, 7]
    np.testing.assert_allclose(support, [[1.0, 1.0], [0.5 * 2 / 9, 1.0]])
    one, lab = feature_support(chain0 + chain1, E)  # one group: the mean over all samples
    assert list(lab) == [0]
    np.testing.assert_allclose(one[:, 0], [1.0, (1 + 1 + 2 / 9 + 0) / 4])
    empty, _ = feature_support([np.zeros((n, 0), np.uint8)] * 2, E)
    np.testing.assert_array_equal(empty, np.zeros((2, 1)))
    assert feature_support(chain0, E[:, :0])[0].shape == (0, 1)
    with pytest.raises(ScontrastError, match=r"^groups: has shape \(3,\) but there are 4 samples"):
        feature_support(chain0 + chain1, E, [0, 0, 1])
    with pytest.raises(ScontrastError, match=r"^estimate: has 29 rows"):
        feature_support(chain0, E[:-1])


@pytest.mark.parametrize("seed", range(4))
def test_feature_support_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    n, checked = 9, 0
    for _ in range(40):
        E = rand_fa(rng, n, int(rng.integers(1, 4)), 0.4)
        samples = [rand_fa(rng, n, int(rng.integers(0, 4)), 0.4) for _ in range(4)]
        groups = [0, 1, 0, 1]
        brute = support_brute_force(samples, E, groups)
        if brute is None:
            continue
        np.testing.assert_allclose(feature_support(samples, E, groups)[0], brute, atol=1e-12)
        checked += 1
    assert checked >= 5
