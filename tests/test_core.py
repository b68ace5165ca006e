"""scontrast.core: the checks, the random_state normaliser and the BLAS-thread control every layer uses."""

from __future__ import annotations

import logging
import os
import stat

import numpy as np
import pytest
import scipy.sparse as sp
from threadpoolctl import threadpool_info

from scontrast import core, io
from scontrast.core import ScontrastError


def test_check_matrix_keeps_sparse_sparse_and_refuses_bad_values():
    A = sp.random(5, 4, density=0.5, random_state=0, format="csc")
    out = core.check_matrix(A, "X")
    assert sp.isspmatrix_csr(out) and out.dtype == np.float64 and (out != A).nnz == 0
    assert core.check_matrix([[1, 2], [3, 4]]).dtype == np.float64
    bad = np.ones((3, 2))
    bad[1, 1] = np.nan
    with pytest.raises(ScontrastError, match=r"^X: contains 1 NaN or infinite values$"):
        core.check_matrix(bad, "X")
    assert np.isnan(core.check_matrix(bad, "X", allow_nan=True)).sum() == 1
    bad[0, 0] = np.inf
    with pytest.raises(ScontrastError, match=r"^X: contains 1 infinite values$"):
        core.check_matrix(bad, "X", allow_nan=True)
    with pytest.raises(ScontrastError, match=r"^Y: complex values are not supported$"):
        core.check_matrix(np.ones((2, 2)) * 1j, "Y")
    with pytest.raises(ScontrastError, match=r"^X: expected a 2-d matrix"):
        core.check_matrix(np.ones(3), "X")
    with pytest.raises(ScontrastError, match=r"^X: needs at least 2 cells, got 1$"):
        core.check_matrix(np.ones((1, 3)), "X", min_rows=2)
    with pytest.raises(ScontrastError, match=r"^X: expected a numeric matrix"):
        core.check_matrix([["a", "b"]], "X")
    with pytest.raises(ScontrastError, match=r"^X: sparse input is not supported"):
        core.check_matrix(A, "X", accept_sparse=False)


def test_check_pair_needs_the_same_genes():
    with pytest.raises(ScontrastError, match=r"^Y: has 3 genes, X has 2$"):
        core.check_pair(np.ones((2, 2)), np.ones((2, 3)))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: core.check_int(1.5, "k", 1), r"^k: expected an integer >= 1, got 1.5$"),
        (lambda: core.check_int(True, "k"), r"^k: expected an integer, got True$"),
        (lambda: core.check_int(11, "k", 1, 10), r"^k: expected an integer in \[1, 10\], got 11$"),
        (lambda: core.check_real(0.0, "a", 0, strict_min=True), r"^a: expected a finite number > 0, got 0.0$"),
        (lambda: core.check_real(3, "a", maximum=2), r"^a: expected a finite number <= 2, got 3$"),
        (lambda: core.check_real(float("nan"), "a"), r"^a: expected a finite number, got nan$"),
        (lambda: core.check_real(None, "a", 0, 1), r"^a: expected a finite number >= 0 and <= 1, got None$"),
        (lambda: core.check_option("mx", "rule", ["max", "1se"]), r"^rule: expected one of \['max', '1se'\]"),
        (lambda: core.check_option(1, "flag", [True, False]), r"^flag: expected one of \[True, False\], got 1$"),
    ],
)
def test_checks_refuse_with_one_line(call, message):
    with pytest.raises(ScontrastError, match=message):
        call()


def test_checks_accept_good_values():
    assert core.check_int(np.int64(3), "k", 1) == 3 and core.check_int(None, "k", allow_none=True) is None
    assert core.check_real(2, "a", 0, 2) == 2.0 and core.check_real(None, "a", allow_none=True) is None
    assert core.check_option("1se", "rule", ["max", "1se"]) == "1se"


def test_random_state_normaliser():
    a, b = core.check_random_state(5), core.check_random_state(5)
    assert a.integers(10**9) == b.integers(10**9)
    g = np.random.default_rng(1)
    assert core.check_random_state(g) is g  # shared, advancing state (scikit-learn's semantics)
    assert isinstance(core.check_random_state(None), np.random.Generator)
    assert isinstance(core.check_random_state(np.random.RandomState(0)), np.random.Generator)
    assert core.check_random_state(2**40).integers(10) >= 0  # seeds beyond 32 bits are fine
    for bad in (-1, 1.5, "0", True):
        with pytest.raises(ScontrastError, match="^random_state: expected"):
            core.check_random_state(bad)
    assert 0 <= core.spawn_seed(core.check_random_state(0)) < 2**31 - 1


def _blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_blas_threads_limits_and_restores():
    before = _blas_threads()
    with core.blas_threads(1):
        assert set(_blas_threads()) <= {1}
    assert _blas_threads() == before

    @core.one_blas_thread
    def inside():
        return _blas_threads()

    assert set(inside()) <= {1} and _blas_threads() == before
    with core.blas_threads(None):
        assert _blas_threads() == before


def test_outputs_honour_the_umask(tmp_path):
    """Results are readable as any file the user writes (mkstemp alone would make them 0600)."""
    import anndata as ad
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    old = os.umask(0o022)
    try:
        io.write_h5ad(ad.AnnData(np.ones((2, 2))), tmp_path / "a.h5ad")
        io.save_figure(plt.figure(), tmp_path / "f.png")
    finally:
        os.umask(old)
    for name in ("a.h5ad", "f.png"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644, name


def test_progress_logs_each_tenth_with_a_rate(caplog):
    with caplog.at_level(logging.INFO, logger="scontrast.x"):
        out = list(core.progress(range(20), desc="permutations", logger="scontrast.x", after=0))
    assert out == list(range(20))
    lines = [r.getMessage() for r in caplog.records if r.name == "scontrast.x"]
    assert [ln.split(" (")[0] for ln in lines] == [f"permutations: {i}/20" for i in range(2, 21, 2)]
    assert all("/s, about" in ln for ln in lines)


def test_startup_benchmark_covers_every_rule():
    """benchmarks/bench_startup.py times the imports of every rule's script (its small version: the list)."""
    import re

    from benchmarks.bench_startup import RULES
    from conftest import REPO

    rules = set(re.findall(r"^rule (\w+):", "\n".join(p.read_text() for p in (REPO / "workflow/rules").glob("*.smk")),
                           flags=re.M))
    named = {r for r in RULES if not r.startswith(("python", "<"))} | {r for r in rules if r.endswith("_figure")}
    assert rules <= named, rules - named


def test_samples_file_honours_the_umask(tmp_path):
    from scontrast.feature_samples import save_samples

    old = os.umask(0o022)
    try:
        save_samples(tmp_path / "s.npz", [np.ones((3, 1), dtype=np.uint8)])
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "s.npz").stat().st_mode) == 0o644


def test_check_pair_matches_dataframes_by_gene_name():
    import pandas as pd

    X = pd.DataFrame([[1.0, 2.0, 3.0]], columns=["a", "b", "c"])
    Y = pd.DataFrame([[30.0, 10.0, 20.0]], columns=["c", "a", "b"])
    _, Yc = core.check_pair(X, Y)
    np.testing.assert_array_equal(Yc, [[10.0, 20.0, 30.0]])  # put in X's gene order, not taken by position
    with pytest.raises(ScontrastError, match=r"^Y: its genes \(columns\) are not X's, e.g. \['d'\]"):
        core.check_pair(X, pd.DataFrame([[1.0, 2.0, 3.0]], columns=["a", "b", "d"]))


def test_silenced_warnings_from_many_threads_leaves_the_filters_whole():
    """Plain catch_warnings in racing threads can leave 'ignore' installed for the whole process;
    silenced_warnings must ignore inside the block and restore the filters exactly."""
    import threading
    import time
    import warnings

    from scontrast.core import silenced_warnings

    start = threading.Barrier(8)

    def work():
        start.wait()
        for _ in range(50):
            with silenced_warnings():
                time.sleep(0.0005)  # work that releases the GIL (as FastICA does): the threads interleave
                warnings.warn("inside", UserWarning, stacklevel=1)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        before = list(warnings.filters)
        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert warnings.filters == before
        warnings.warn("after", UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["after"]
