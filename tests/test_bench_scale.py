"""The scale benchmark's simulator and report on tiny sizes (the full run is benchmarks/bench_scale.py)."""

import numpy as np
import scipy.sparse as sp

from benchmarks.bench_scale import read_benchmarks, report, simulate_counts


def test_simulated_counts_are_sparse_reproducible_two_group_counts():
    a = simulate_counts(400, 500, seed=3, block=150)
    assert sp.isspmatrix_csr(a.X) and a.X.dtype == np.float32 and a.shape == (400, 500)
    assert np.array_equal(a.X.data, np.round(a.X.data)) and a.X.data.min() > 0  # stored entries: positive integers
    assert 0.02 < a.X.nnz / (400 * 500) < 0.5
    assert list(a.obs["group"].value_counts().sort_index()) == [200, 200]
    assert a.var_names.str.startswith("MT-").sum() == 15
    b = simulate_counts(400, 500, seed=3, block=150)
    assert (a.X != b.X).nnz == 0  # the seed fixes the data
    # the target half differs from the background in some genes' means (the 200 DE genes)
    t = a.obs["group"].to_numpy() == "target"
    mean_t, mean_b = (np.asarray(a.X[m].mean(axis=0)).ravel() for m in (t, ~t))
    assert np.abs(np.log1p(mean_t) - np.log1p(mean_b)).max() > 0.5


def test_report_reads_benchmark_files(tmp_path, capsys):
    bench = tmp_path / "results" / "scale" / "benchmarks"
    bench.mkdir(parents=True)
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    (bench / "preprocess.tsv").write_text(header + "12.5\t0:00:12\t900.0\t1\t1\t1\t1\t1\t1\t1\n")
    (bench / "cpca.tsv").write_text(header + "3.0\t0:00:03\t9000.0\t1\t1\t1\t1\t1\t1\t1\n")
    rows = dict((r, (s, m)) for r, s, m in read_benchmarks(tmp_path, "scale"))
    assert rows == {"preprocess": (12.5, 900.0), "cpca": (3.0, 9000.0)}
    assert report(tmp_path, (1000, 100), 5000) == 9000.0
    assert "OVER the 8 GB limit" in capsys.readouterr().out
