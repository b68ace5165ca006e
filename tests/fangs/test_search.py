"""The FANGS search (_search.py): seeds, defaults, quality against draws and the truth, threads, clock."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import bench_fangs
from scontrast.fangs._draws import draws
from scontrast.fangs._loss import expected_loss, faro_loss
from scontrast.fangs._search import fangs
from scontrast.fangs._simulate import posterior_like_samples


def test_random_state_none_int_and_generator():
    _, samples = posterior_like_samples(30, 3, 20, flip=0.1, rng=12)
    fangs(samples, n_iter=50, random_state=None)
    by_int = fangs(samples, n_iter=50, random_state=5)
    by_gen = fangs(samples, n_iter=50, random_state=np.random.default_rng(5))
    # an int seeds a Generator: the same draws, the same estimate
    np.testing.assert_array_equal(by_int.details["baselines"], by_gen.details["baselines"])
    np.testing.assert_array_equal(by_int.estimate, by_gen.estimate)


def test_default_n_iter_is_one_thousand_flips_per_sweetening():
    _, samples = posterior_like_samples(30, 3, 20, flip=0.1, rng=13)
    f = fangs(samples, n_sweet=2, random_state=0)
    np.testing.assert_array_equal(f.details["iterations"], [1000, 1000])
    assert fangs(samples, n_iter=0, n_sweet=1, random_state=0).details["accepted"][0] == 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fangs_beats_or_equals_draws(seed):
    truth, samples = posterior_like_samples(60, 5, 60, flip=0.08, rng=seed)
    f = fangs(samples, n_iter=400, n_jobs=1, random_state=seed)
    d = draws(samples, n_jobs=1)
    assert f.expected_loss == pytest.approx(expected_loss(samples, f.estimate))
    assert f.expected_loss <= d.expected_loss + 1e-9
    assert f.expected_loss <= np.min(f.details["initial_losses"]) + 1e-9
    assert faro_loss(f.estimate, truth) <= faro_loss(d.estimate, truth)
    assert set(f.timings) == {"initialization", "sweetening", "total"}
    assert f.estimate.dtype == np.uint8 and f.estimate.any(axis=0).all()


def test_fangs_finds_the_truth_when_samples_scatter_around_it():
    truth, samples = posterior_like_samples(40, 4, 80, flip=0.05, rng=7)
    f = fangs(samples, n_jobs=1, random_state=0)
    assert faro_loss(f.estimate, truth) == 0.0
    assert f.expected_loss < draws(samples, n_jobs=1).expected_loss


def test_a_tunes_sparsity():
    _, samples = posterior_like_samples(40, 5, 50, flip=0.2, rng=8)
    dense = fangs(samples, a=0.4, n_iter=300, n_jobs=1, random_state=0).estimate.sum()
    middle = fangs(samples, a=1.0, n_iter=300, n_jobs=1, random_state=0).estimate.sum()
    sparse = fangs(samples, a=1.6, n_iter=300, n_jobs=1, random_state=0).estimate.sum()
    assert dense > middle > sparse


def test_reproducible_and_independent_of_n_jobs():
    _, samples = posterior_like_samples(50, 5, 40, flip=0.1, rng=9)
    one = fangs(samples, n_iter=300, n_jobs=1, random_state=3)
    again = fangs(samples, n_iter=300, n_jobs=1, random_state=3)
    two = fangs(samples, n_iter=300, n_jobs=2, random_state=3)
    assert np.array_equal(one.estimate, again.estimate) and np.array_equal(one.estimate, two.estimate)
    assert one.expected_loss == two.expected_loss
    np.testing.assert_array_equal(one.details["accepted"], two.details["accepted"])
    assert draws(samples, n_jobs=2).index == draws(samples, n_jobs=1).index


class _ReadingClock:
    """A ``time`` stand-in whose ``perf_counter`` advances by ``tick`` at every reading.

    A time budget then becomes a number of readings, the same on any machine; a search that
    ignored its budget would read it without end, so past ``limit`` readings it fails.
    """

    def __init__(self, tick: float, limit: int):
        self.tick, self.limit, self.readings, self.now = tick, limit, 0, 0.0

    def perf_counter(self) -> float:
        self.readings += 1
        assert self.readings <= self.limit, "the sweetening went on past its time budget"
        self.now += self.tick
        return self.now


def test_max_seconds_stops_the_sweetening(monkeypatch):
    from scontrast.fangs import _search, _sweetening

    _, samples = posterior_like_samples(100, 6, 60, flip=0.1, rng=10)
    clock = _ReadingClock(tick=1e-3, limit=100_000)
    monkeypatch.setattr(_search, "time", clock)
    monkeypatch.setattr(_sweetening, "time", clock)
    f = fangs(samples, n_iter=None, max_seconds=1.0, n_jobs=1, random_state=0)
    # the whole search kept to its second of clock readings, give or take the final few
    assert f.timings["total"] <= 1.0 + 10 * clock.tick
    assert clock.readings <= 1.0 / clock.tick + 10
    # every sweetening ran, and only within its share: at most one chunk of 32 proposals per reading
    iterations = f.details["iterations"]
    assert iterations.min() > 0 and iterations.sum() <= 32 * clock.readings
    # the budget, not a cap on the flips, stopped them: n_iter=None has none
    assert iterations.min() >= 32 * (1.0 / clock.tick / len(iterations) - 10) * 128 / 129


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
