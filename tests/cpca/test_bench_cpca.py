"""The building blocks of benchmarks/bench_cpca.py run on tiny sizes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from benchmarks import bench_cpca


def test_benchmark_core_runs_on_tiny_sizes():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = bench_cpca.speed_rows(dims=(40,), n=150, repeats=1)
    assert rows and rows[0]["d"] == 40 and rows[0]["ratio"] > 0
    # the comparison the benchmark prints holds here too: contrastive's alphas, and its subspaces up to rounding
    # (measured sine 1e-13 on this data: the eigen-gaps are wide, so 1e-8 leaves room for any BLAS)
    assert rows[0]["same_alphas"] is True and rows[0]["max_sin"] < 1e-8
    sparse = bench_cpca.sparse_row(n_cells=200, n_genes=300)
    assert sparse["seconds"] > 0 and sparse["max_residual"] < 1e-6
    for two_tasks in (False, True):
        stages = bench_cpca.stage_times(d=40, n=150, two_tasks=two_tasks)
        assert len(stages) == 6 and all(v >= 0 for v in stages.values())
    X, Y, _ = bench_cpca.synthetic(150, 150, 40)
    seconds, sequential = bench_cpca.critical_path(X, Y, repeats=1)
    assert 0 < sequential <= seconds
    floor = bench_cpca.floor_times(d=40, n=150)
    parts = list(floor.values())
    assert all(v > 0 for v in parts)
    # the bound: both covariances + the cheapest reduction + half the congruence and products
    assert floor["lower bound on two cores (see docstring)"] == pytest.approx(
        parts[1] + min(parts[2], parts[3], parts[6]) + (parts[4] + parts[5]) / 2)


def test_thread_rows_report_the_threads_the_fit_used():
    """The benchmark's threads table: the resolved count and the BLAS's setting inside the solver
    follow the limit (one thread per task with two), and every limit gives the same alphas."""
    X, Y, _ = bench_cpca.synthetic(200, 200, 136)  # the covariance solver (d above the full solver's 128)
    rows = list(bench_cpca.thread_rows(X, Y, limits=(1, 2, 3), repeats=1))
    assert [r["n_threads"] for r in rows] == [1, 2, 3]
    assert [r["blas_inside"] for r in rows] == [[1], [1], [3]]
    assert all(r["wall_s"] > 0 and r["cpu_s"] > 0 for r in rows)
    for r in rows[1:]:
        np.testing.assert_array_equal(r["alphas"], rows[0]["alphas"])
