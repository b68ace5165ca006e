"""The scale benchmark's simulator and report on tiny sizes (the full run is benchmarks/bench_scale.py)."""

import os
import time

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from scipy import stats

from benchmarks.bench_scale import LoadSampler, gene_parameters, nb_block, read_benchmarks, report, scale_config, simulate_counts
from tests.conftest import REPO

# the shipped raw-count file stands in for the 10x PBMC reference (not in the repository)
REFERENCE = REPO / "data" / "wu2020_tcells_200.h5ad"


@pytest.fixture(scope="module")
def reference():
    return gene_parameters(REFERENCE)


def test_gene_parameters_are_the_references_shares_and_dispersions(reference):
    share, phi = reference["share"], reference["phi"]
    assert share.size == phi.size == reference["mito"].size and share.size > 1000
    assert np.isclose(share.sum(), 1.0) and (share > 0).all()  # counted genes only; shares of every cell's total
    assert ((phi >= 0.01) & (phi <= 50)).all()
    assert reference["library"].size == 200 and (reference["library"] > 0).all()


def test_nb_block_draws_negative_binomial_counts():
    # one gene, many cells of known mean and shape: P(0) and the mean and variance of NB(m, r)
    rng = np.random.default_rng(1)
    n, m, r = 200_000, 2.5, 0.7
    X = nb_block(rng, np.full(n, m), np.ones((n, 1)), np.array([r]))
    x = X.toarray().ravel()
    ref = stats.nbinom(r, r / (r + m))
    assert abs((x == 0).mean() - ref.pmf(0)) < 4 * np.sqrt(ref.pmf(0) * (1 - ref.pmf(0)) / n)
    assert abs(x.mean() - m) < 4 * np.sqrt(ref.var() / n)
    assert abs(x.var() / ref.var() - 1) < 0.05
    assert stats.chisquare(np.bincount(x.astype(int), minlength=6)[:6],
                           ref.pmf(np.arange(6)) * n * (np.bincount(x.astype(int), minlength=6)[:6].sum()
                                                        / (ref.pmf(np.arange(6)) * n).sum())).pvalue > 1e-4
    # tiny means (most zeros skipped without a logarithm) keep their rate
    Y = nb_block(rng, np.full(n, 1e-3), np.ones((n, 3)), np.array([0.5, 2.0, 50.0]))
    assert abs(Y.sum() / (3 * n) - 1e-3) < 4 * np.sqrt(1e-3 * 3 / (3 * n))


def test_simulated_counts_are_sparse_reproducible_two_group_counts(reference):
    a = simulate_counts(400, 500, seed=3, block=150, reference=reference, median_umis=5000)
    assert sp.isspmatrix_csr(a.X) and a.X.dtype == np.float32 and a.shape == (400, 500)
    a.X.check_format(full_check=True)
    assert np.array_equal(a.X.data, np.round(a.X.data)) and a.X.data.min() > 0  # stored entries: positive integers
    assert 0.02 < a.X.nnz / (400 * 500) < 0.6
    assert list(a.obs["group"].value_counts().sort_index()) == [200, 200]
    b = simulate_counts(400, 500, seed=3, block=150, reference=reference, median_umis=5000)
    assert (a.X != b.X).nnz == 0  # the seed fixes the data, whatever the block size
    c = simulate_counts(400, 500, seed=3, block=400, reference=reference, median_umis=5000)
    assert c.X.nnz > 0
    # library sizes follow the requested depth (the genes drawn are a subset of the reference's)
    lib = np.asarray(a.X.sum(axis=1)).ravel()
    assert 0.5 * 5000 < np.median(lib) < 1.5 * 5000
    # the target half differs from the background in some genes' means (the DE genes)
    t = a.obs["group"].to_numpy() == "target"
    mean_t, mean_b = (np.asarray(a.X[m].mean(axis=0)).ravel() for m in (t, ~t))
    assert np.abs(np.log1p(mean_t) - np.log1p(mean_b)).max() > 0.5


def test_simulated_genes_follow_the_reference_expression():
    # a reference with a known MT- gene and known shares: the simulated genes keep their order of expression
    ref = {"share": np.array([0.5, 0.3, 0.15, 0.05]), "phi": np.full(4, 0.1), "mito": np.array([True, False, False, False]),
           "library": np.full(50, 1000.0)}
    a = simulate_counts(2000, 4, seed=0, reference=ref, median_umis=1000, n_de=0, n_program=0)
    assert a.var_names.str.startswith("MT-").sum() == 1
    means = np.asarray(a.X.mean(axis=0)).ravel()
    mt = np.flatnonzero(a.var_names.str.startswith("MT-"))[0]
    assert means[mt] == means.max() and abs(means.sum() - 1000) < 30


def test_simulated_donors_are_paired_and_vary_as_stated():
    # four donors of known log sd: each gives cells to both groups, and the spread of a gene's per-donor
    # log mean is the donors' variance (sampling noise is small at ~1,000 cells a donor and >= 20 counts a cell)
    ref = {"share": np.full(40, 1 / 40), "phi": np.full(40, 0.05), "mito": np.zeros(40, bool),
           "library": np.full(50, 1000.0)}
    spread, runs = {}, {}
    for sd in (0.0, 0.5):
        a = simulate_counts(4000, 40, seed=2, reference=ref, median_umis=1000, n_de=0, n_program=0, n_donors=4,
                            donor_sd=sd)
        donor = a.obs["donor"].to_numpy()
        assert list(a.obs["donor"].cat.categories) == ["D1", "D2", "D3", "D4"]
        assert (pd.crosstab(a.obs["donor"], a.obs["group"]).to_numpy() > 400).all()  # paired: both groups each
        logmean = np.log([np.asarray(a.X[donor == d].mean(axis=0)).ravel() for d in ["D1", "D2", "D3", "D4"]])
        spread[sd], runs[sd] = logmean.var(axis=0, ddof=1).mean(), a
    assert spread[0.0] < 0.01
    assert 0.12 < spread[0.5] < 0.45  # 0.25 expected; the mean of 40 three-df sample variances has sd ~0.03
    # the donors draw from their own stream: with no donor effect the counts are those of a run without donors
    plain = simulate_counts(4000, 40, seed=2, reference=ref, median_umis=1000, n_de=0, n_program=0)
    assert (plain.X != runs[0.0].X).nnz == 0 and "donor" not in plain.obs


def test_scale_config_declares_the_donors_as_a_paired_replicate(tmp_path):
    plain = scale_config(tmp_path / "scale.h5ad")["datasets"]["scale"]
    donors = scale_config(tmp_path / "scale.h5ad", donors=True)["datasets"]["scale"]
    assert "replicate" not in plain
    assert donors["replicate"] == "donor" and donors["paired"] is True and donors["counts"] == "raw"


def test_report_reads_benchmark_files(tmp_path, capsys):
    bench = tmp_path / "results" / "scale" / "benchmarks"
    bench.mkdir(parents=True)
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    (bench / "preprocess.tsv").write_text(header + "12.5\t0:00:12\t900.0\t1\t1\t1\t1\t1\t1\t20.0\n")
    (bench / "collect.tsv").write_text(header + "30.0\t0:00:30\t9000.0\t1\t1\t1\t1\t1\t1\tNA\n")
    now = time.time()
    os.utime(bench / "preprocess.tsv", (now - 100, now - 100))
    rows = read_benchmarks(tmp_path, "scale")
    assert [r["rule"] for r in rows] == ["preprocess", "collect"]  # run order
    assert (rows[0]["s"], rows[0]["cpu_s"], rows[0]["rss_mb"]) == (12.5, 20.0, 900.0)
    assert np.isnan(rows[1]["cpu_s"]) and abs(rows[0]["end"] - rows[0]["start"] - 12.5) < 1e-6
    loads = LoadSampler()
    loads.samples = [(now - 105, 1.0), (now - 95, 3.0), (now - 10, 5.0)]
    worst = report(tmp_path, (1000, 100), 1000.0, loads)
    assert worst == {"rss_mb": 9000.0, "ratio": 9.0, "s": 30.0}
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith(("preprocess", "collect"))}
    assert "met" in lines["preprocess"] and lines["preprocess"].split()[5] == "1.0"  # load while it ran
    assert "MISSED" in lines["collect"]  # 30 s > 15 s and 9x X > 3x X


def _measured_peaks(path):
    """{rule: peak MB} and X's CSR size (MB) from a committed bench_scale report."""
    import re

    text = path.read_text()
    x_mb = float(re.search(r"X as CSR \(float32 values, int32 indices\): (\d+) MB", text).group(1))
    peaks = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[-1].startswith("X)") and parts[0].replace("_", "").isalpha():
            peaks[parts[0]] = float(parts[3])
    return peaks, x_mb


def _modelled_request(rule: str, x_mb: float) -> int:
    """The request ``rule`` gets (common.smk: mem_mb) at a bench_scale size: the raw input holds X alone;
    preprocessed.h5ad holds X and the counts (the same non-zeros: as large as X); the annotations and
    the methods' deltas (a few MB) are left out."""
    from scontrast._workflow import memory_request_mb, memory_spec

    mb = 2**20
    spec = memory_spec(rule)
    base = {"X": x_mb * mb, "layers": {} if rule == "preprocess" else {"counts": x_mb * mb}, "whole": False}
    base["total"] = base["X"] + sum(base["layers"].values())
    layers = () if spec.layers == "config" else spec.layers  # the default configs name no layer
    return memory_request_mb([base], spec.per_input_mb, x=spec.x, layers=layers)


@pytest.mark.parametrize("size", ["50k", "50k_donors", "200k", "200k_donors"])
def test_slurm_memory_requests_cover_the_measured_peaks(size):
    """Each rule's request at 50,000 and at 200,000 cells (mem_mb: per_input_mb x the matrices the rule
    reads + the rest of its inputs) is at least 1.5x the peak benchmarks/results/bench_scale_<size>.txt
    measured for it, and at 200,000 cells x 30,000 genes it fits a 16 GB node with room (<= 14,000 MB)."""
    peaks, x_mb = _measured_peaks(REPO / "benchmarks" / "results" / f"bench_scale_{size}.txt")
    assert {"preprocess", "sparda", "quadro", "latent_features", "fangs", "collect", "summary"} <= set(peaks)
    for rule, peak in peaks.items():
        request = _modelled_request(rule, x_mb)
        assert request >= 1.5 * peak, f"{rule}: requests {request:.0f} MB, measured peak {peak:.0f} MB"
        if size.startswith("200k"):
            assert request <= 14000, f"{rule}: requests {request} MB at 200,000 cells"


def _at_size_peaks(path) -> dict[str, float]:
    """{rule: exact peak MB} of a ``slurm_requests --at-size`` report."""
    exact = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and not line.startswith("#") and parts[1].isdigit():
            exact[parts[0]] = float(parts[2])
    return exact


def test_slurm_requests_cover_the_exact_peaks_with_donors():
    """At 50,000 x 20,000 with 8 paired donors declared (benchmarks/results/slurm_requests_50k_donors.txt: the
    donor-aware paths, pseudobulk included, each rule rerun alone) every request is at least 1.5x the exact peak."""
    exact = _at_size_peaks(REPO / "benchmarks" / "results" / "slurm_requests_50k_donors.txt")
    _, x_mb = _measured_peaks(REPO / "benchmarks" / "results" / "bench_scale_50k_donors.txt")
    assert {"preprocess", "sparda", "quadro", "fangs", "pseudobulk", "collect", "summary",
            "pseudobulk_figure"} <= set(exact)
    for rule, peak in exact.items():
        request = _modelled_request(rule, x_mb)
        assert request >= 1.5 * peak, f"{rule}: requests {request} MB, exact peak {peak:.0f} MB with donors"


def test_slurm_requests_cover_the_exact_peaks_at_200k():
    """The exact peaks at 200,000 x 30,000 (benchmarks/results/slurm_requests_200k.txt: each rule rerun
    alone, the kernel's high-water mark) are covered 1.5x by the requests the workflow makes now, every
    rule of the workflow is there, and each request fits a 16 GB node with room."""
    exact = _at_size_peaks(REPO / "benchmarks" / "results" / "slurm_requests_200k.txt")
    _, x_mb = _measured_peaks(REPO / "benchmarks" / "results" / "bench_scale_200k.txt")
    assert set(exact) == {"preprocess", "sparda", "quadro", "cpca", "pcpca", "latent_features", "fangs", "collect",
                          "summary", "preprocess_figure", "sparda_figure", "quadro_figure", "cpca_figure",
                          "pcpca_figure", "fangs_figure"}
    for rule, peak in exact.items():
        request = _modelled_request(rule, x_mb)
        assert 1.5 * peak <= request <= 14000, f"{rule}: requests {request} MB, exact peak {peak:.0f} MB"


def test_slurm_requests_cover_the_exact_peaks_at_50k():
    """benchmarks/results/slurm_requests.txt's 'peak 50k' (the larger of the sampled and the exact peak of
    each rule rerun alone) is covered 1.5x by the request the workflow makes now at 50,000 x 20,000."""
    path = REPO / "benchmarks" / "results" / "slurm_requests.txt"
    peaks = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 9 and not line.startswith("#") and parts[2].isdigit() and parts[3].isdigit():
            peaks[parts[0]] = float(parts[3])
    _, x_mb = _measured_peaks(REPO / "benchmarks" / "results" / "bench_scale_50k.txt")
    assert {"preprocess", "sparda", "quadro", "cpca", "fangs", "collect", "summary", "fangs_figure"} <= set(peaks)
    for rule, peak in peaks.items():
        request = _modelled_request(rule, x_mb)
        assert request >= 1.5 * peak, f"{rule}: requests {request} MB, peak {peak:.0f} MB at 50k"
