"""The SPARDA benchmark's building blocks on tiny sizes (so the script cannot rot)."""

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from benchmarks import bench_sparda as bench


def test_kernel_statistics_match_their_definitions():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(12, 3)), rng.normal(size=(9, 3)) + 0.5
    A = bench._label_vectors(12, 9, 0, rng)
    Z = np.vstack([X, Y])
    D = cdist(Z, Z)
    energy = 2 * cdist(X, Y).mean() - cdist(X, X).mean() - cdist(Y, Y).mean()
    assert -(A[:, 0] @ D @ A[:, 0]) == pytest.approx(energy)
    p_mmd, p_energy = bench.kernel_tests(X, Y, 19, rng)
    assert 0 < p_mmd <= 1 and 0 < p_energy <= 1
    p_ks, p_bart = bench.per_gene_tests(X, Y)
    assert 0 <= p_ks <= 1 and 0 <= p_bart <= 1


def test_madelon_paths_and_summary_tiny():
    X, Y, Z, y = bench.madelon(0, n_per_class=60, d=30)
    assert X.shape[1] == Y.shape[1] == 30 and X.shape[0] + Y.shape[0] == 120  # flip_y unbalances slightly
    path = bench.path_marginal_w2(X, Y, 25)
    assert path[-1][1] == 25 and path[-1][2] + path[-1][3] == 25
    sp_path = bench.path_sparda(X, Y, [2.0, 0.5], 200, 0)
    assert len(sp_path) == 2 and all(p[1] == p[2] + p[3] for p in sp_path)
    k_path = bench.path_sparda_k(X, Y, [2, 4], 200, 0)
    assert [p[1] for p in k_path] == [2, 4]  # the cardinality bound is the support size
    multi = bench.path_sparda(X, Y, [0.5], 200, 0, n_directions=3)
    assert 1 <= multi[0][7] <= 3 and multi[0][1] >= sp_path[1][1]
    zero_fp, at20, fp_all = bench._summary(path)
    assert 0 <= zero_fp <= 20 and 0 <= at20 <= 20


def test_power_replicate_tiny():
    out = bench.one_replicate("correlation", 4, 40, 4, 0, {"sd": 1.6, "rho": 0.7},
                              dict(n_lambdas=2, relax_max_iter=5))
    assert set(bench.METHODS) <= set(out)
    assert all(0 < out[m] <= 1 for m in bench.METHODS)
    X, Y = bench.two_sample("correlation", 5, 2000, np.random.default_rng(1), {"rho": 0.7})
    # identical N(0,1) marginals, correlation 0.7 among the first 3 coordinates of Y only
    np.testing.assert_allclose(Y.std(0), 1.0, atol=0.05)
    assert np.corrcoef(Y[:, :3].T)[0, 1] == pytest.approx(0.7, abs=0.05)
    assert abs(np.corrcoef(X[:, :3].T)[0, 1]) < 0.07


def test_single_cell_like_is_sparse_and_planted():
    X, Y = bench.single_cell_like(200, 50, 0)
    assert X.shape == (100, 50) and Y.shape == (100, 50) and X.format == "csr"
    assert X[:, :10].mean() > Y[:, :10].mean()


def test_stability_path_and_rank_tiny():
    X, Y, _, _ = bench.madelon(0, n_per_class=60, d=30)
    top = float(np.max(bench.marginal_wasserstein2(X, Y)))
    stab = bench.stability_frequencies(X, Y, (0.1, 0.3), top, 4, 0, 1)
    (f1, w1, _), (f3, _, _) = stab[0.1], stab[0.3]
    assert f1.shape == w1.shape == (30,) and np.all((f1 >= 0) & (f1 <= 1))
    assert f3.sum() <= f1.sum()  # a larger penalty selects fewer genes per fit
    path = bench.path_stability(f1)
    assert [p[0] for p in path] == list(bench.STABILITY_PIS)
    assert all(p[1] == p[2] + p[3] for p in path) and [p[1] for p in path] == sorted(p[1] for p in path)
    # ties with the best noise gene count against the relevant genes, never broken by column index
    f, w = np.zeros(30), np.zeros(30)
    assert bench.first_noise_rank(f, w) == 0
    f[:5], w[:5] = 1.0, 0.3
    f[[5, 25]], w[[5, 25]] = 0.5, 0.2
    assert bench.first_noise_rank(f, w) == 5
    w[5] = 0.25
    assert bench.first_noise_rank(f, w) == 6


def test_real_data_close_t_cells_sparse_oriented_resolved():
    """The real-data benchmark's close contrast (shipped pbmc68k) at the library defaults."""
    from benchmarks import bench_sparda_real

    a = bench_sparda_real.contrast(bench_sparda_real.load("pbmc68k"), "bulk_labels", "CD8+ Cytotoxic T",
                                   "CD8+/CD45RA+ Naive Cytotoxic", "normalized")
    r = bench_sparda_real.evaluate(a, "close")
    # the goals: a parsimonious set, mostly among the top-100 Wilcoxon genes, weights
    # pointing to the side where the gene is higher, and p resolved below 0.001
    assert 3 <= r["n_selected"] <= 50
    assert r["overlap"] >= 0.6 and r["sign"] >= 0.8
    # 96 cells: test="auto" runs the re-optimised permutation test (999 labellings)
    assert r["method"] == "permute" and r["n_perm"] == 999
    assert r["p"] <= 0.001 and r["bound"] == (r["n_at_least"] == 0)


def test_power_sample_changes_only_what_it_says():
    from benchmarks import bench_sparda_real

    rng = np.random.default_rng(0)
    X, Y = bench_sparda_real.power_sample("correlation", rng, n=4000)
    assert X.shape == Y.shape == (4000, 30)
    # marginals unchanged, correlation 0.7 among the first 3 genes of the background only
    np.testing.assert_allclose(Y.std(axis=0), 1.0, atol=0.05)
    cy, cx = np.corrcoef(Y[:, :3].T), np.corrcoef(X[:, :3].T)
    assert np.all(np.abs(cy[np.triu_indices(3, 1)] - 0.7) < 0.05)
    assert np.all(np.abs(cx[np.triu_indices(3, 1)]) < 0.06)
    X, Y = bench_sparda_real.power_sample("variance", rng, n=4000)
    np.testing.assert_allclose(Y[:, :3].std(axis=0), 1.6, rtol=0.05)
    np.testing.assert_allclose(Y[:, 3:].std(axis=0), 1.0, atol=0.05)


def test_energy_test_by_hand_rejects_a_shift_and_not_the_null():
    from benchmarks import bench_sparda_real

    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(40, 3)), rng.normal(size=(40, 3)) + 1.0
    assert bench_sparda_real.energy_pvalue(X, Y, 99, rng) == pytest.approx(0.01)
    p = [bench_sparda_real.energy_pvalue(rng.normal(size=(20, 3)), rng.normal(size=(20, 3)), 49, rng)
         for _ in range(20)]
    assert 0.3 < np.mean(p) < 0.7


def test_test_max_cells_benchmark_runs_small(tmp_path):
    """bench_sparda_test_max_cells at 40 cells per donor and group (640 cells): every row holds exact replicate
    p-values (multiples of 1/128, 8 paired donors); a cap of half the cells or more subsamples nothing (the
    same p-value as every cell), a cap of 100 tests 200 cells."""
    from benchmarks.bench_sparda_test_max_cells import main

    out = tmp_path / "out.txt"
    assert main(["--seeds", "1", "--cells", "40", "--caps", "320", "100", "--out", str(out)]) == 0
    rows = out.read_text().splitlines()
    assert len(rows) == 3 and all(": all cells / 320 / 100: " in row for row in rows)
    for row in rows:
        p = [float(part.split()[0]) for part in row.rsplit(": ", 1)[1].split(" | ")]
        assert len(p) == 3 and all(abs(v * 128 - round(v * 128)) < 0.07 and 0 < v <= 1 for v in p)
        assert p[0] == p[1]
