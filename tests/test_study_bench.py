"""A small fast run of benchmarks/bench_study.py (its full runs: benchmarks/results/bench_study.txt)."""

import re

import pytest

from benchmarks import bench_study
from scontrast.study import run_study


def test_bench_study_calibration_runs_every_design_with_its_floor(capsys):
    bench_study.main(["--calibration", "1", "--cells", "15"])
    out = capsys.readouterr().out
    floors = dict(re.findall(r"^(6v6|4v4|6 paired|4 paired): .*p floor ([0-9.]+);", out, flags=re.M))
    # C(12, 6) = 924 and C(8, 4) = 70 unpaired labellings, 2^6 and 2^4 sign flips, each with its mirror
    assert floors == {"6v6": "0.00216", "4v4": "0.0286", "6 paired": "0.0312", "4 paired": "0.125"}
    assert len(re.findall(r"any split padj<0.05 in [01]/1 = ", out)) == 4


def test_bench_study_workflow_sums_each_rules_benchmark_files(tmp_path):
    """Per rule: the jobs of every split and of the study itself, their wall and CPU seconds summed, the largest peak."""
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    files = {"results/study/B/benchmarks/sparda.tsv": (10.0, 300.0, 4.0),
             "results/study/NK/benchmarks/sparda.tsv": (20.0, 500.0, 6.5),
             "results/study/benchmarks/study.tsv": (3.0, 200.0, 2.0)}
    for rel, (s, rss, cpu) in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(header + f"{s}\t0:00:{int(s):02d}\t{rss}\t1\t1\t1\t0\t0\t50\t{cpu}\n")
    rows = bench_study.read_benchmarks(tmp_path)
    assert sorted((r["rule"], r["split"]) for r in rows) == [("sparda", "B"), ("sparda", "NK"), ("study", "")]
    rules = bench_study.per_rule(rows)
    assert rules["sparda"] == {"jobs": 2, "s": 30.0, "cpu": 10.5, "rss": 500.0}
    assert rules["study"] == {"jobs": 1, "s": 3.0, "cpu": 2.0, "rss": 200.0}


RESULTS = """# python -m benchmarks.bench_study --calibration 50 --baselines 5 --designs 6v6 4v4 --seed 600
# bench_study --calibration 50 --baselines 5 --designs 6v6 4v4 --seed 600: x86_64, 2 cores, load 1.0

## Calibration: nothing planted, 50 studies per design (80 cells per type, donor and condition)
6v6: any split padj<0.05 in 2/50 = 0.040 [0.005, 0.137]; global p<0.05 in 3/50 = 0.060 [0.013, 0.165]; p floor 0.00216; 1.5 s/study
    same studies, first 5: pseudobulk DESeq2 any gene padj<0.05 in 4/5 = 0.800 [0.284, 0.995]; Augur-style cell-level AUC separable in 1/5 = 0.200 [0.005, 0.716]
4v4: any split padj<0.05 in 0/50 = 0.000 [0.000, 0.071]; global p<0.05 in 1/50 = 0.020 [0.001, 0.106]; p floor 0.0286; 0.9 s/study
# python -m benchmarks.bench_study --calibration 10 --designs 6v6
6v6: any split padj<0.05 in 9/10 = 0.900 [0.555, 0.997]; global p<0.05 in 9/10 = 0.900 [0.555, 0.997]; p floor 0.00216; 1.5 s/study
# python -m benchmarks.bench_study --calibration 50 --designs 6v6 --seed 650  (x86_64, 2 cores, load 18.3)
6v6: any split padj<0.05 in 1/50 = 0.020 [0.001, 0.106]; global p<0.05 in 1/50 = 0.020 [0.001, 0.106]; p floor 0.00216; 10.2 s/study
# python -m benchmarks.bench_study --power 25 --designs 6v6 --seed 600
6v6: mean-shift type found 24/25 = 0.960 [0.796, 0.999], found and ranked first 23/25 = 0.920 [0.740, 0.990]; spread type found 5/25 = 0.200 [0.068, 0.407]; an unplanted type called 3/25 = 0.120 [0.025, 0.312]; 28.3 s/study
    before Benjamini-Hochberg: mean-shift type p<0.05 in 25/25 = 1.000 [0.863, 1.000]; spread type p<0.05 in 7/25 = 0.280 [0.121, 0.494]; global p<0.05 in 24/25 = 0.960 [0.796, 0.999]
    p floor 0.00216: Benjamini-Hochberg across the 7 splits reaches padj<0.05 only with at least 1 of them at the floor
"""  # noqa: E501 (lines as the benchmark prints them)


def test_bench_study_totals_sum_the_chosen_runs_per_part_and_design():
    runs = bench_study.read_runs(RESULTS)
    assert [(r["part"], r["design"], r["seed"]) for r in runs] == [
        ("calibration", "6v6", 600), ("calibration", "4v4", 600), ("calibration", "6v6", 0),
        ("calibration", "6v6", 650), ("power", "6v6", 600)]
    t = bench_study.totals(runs, [600, 650])
    # the seed-0 run is not among the chosen seeds; the baselines line belongs to 6v6 only
    assert {k: t["calibration", "6v6"][k] for k in ("any", "n", "global", "baselines", "deseq2", "augur")} == \
        {"any": 3, "n": 100, "global": 4, "baselines": 5, "deseq2": 4, "augur": 1}
    assert (t["calibration", "4v4"]["n"], t["calibration", "4v4"]["baselines"]) == (50, 0)
    assert {k: t["power", "6v6"][k] for k in bench_study.COUNTS["power"]} == \
        {"mean_found": 24, "n": 25, "mean_first": 23, "spread_found": 5, "unplanted": 3}
    assert {k: t["power", "6v6"][k] for k in ("raw", "mean_p", "spread_p", "global_p")} == \
        {"raw": 25, "mean_p": 25, "spread_p": 7, "global_p": 24}
    assert t["calibration", "6v6"]["raw"] == 0


def test_bench_study_totals_refuse_runs_that_share_studies():
    shifted = RESULTS.replace("--seed 650", "--seed 640")
    with pytest.raises(ValueError, match="calibration 6v6: the run at seed 640 shares studies"):
        bench_study.totals(bench_study.read_runs(shifted), [600, 640])
    # with latest, the run written last counts: the seed-640 run's 6v6 (its 50 studies), the seed-600 one's skipped
    t = bench_study.totals(bench_study.read_runs(shifted), [600, 640], latest=True)
    assert t["calibration", "6v6"]["seeds"] == [640] and t["calibration", "6v6"]["n"] == 50
    assert t["calibration", "4v4"]["seeds"] == [600]


def test_bench_study_bh_reach_counts_the_splits_needed_at_the_floor():
    # 7 splits: 6v6 (2/924) alone; 6 paired (2/64): 5 x 7/5 x 1/32 = 0.044 (4 give 0.055); 4 paired (1/8): never
    assert bench_study.bh_reach(2 / 924, 7) == 1
    assert bench_study.bh_reach(2 / 64, 7) == 5
    assert bench_study.bh_reach(1 / 8, 7) is None
    # 4v4 (2/70): 4 at the floor give 7/4 x 2/70 = 0.05, which rounding puts just below it
    assert bench_study.bh_reach(2 / 70, 7) == 4
    # of 2 splits, only both together: one alone gives 2 x 2/70 = 0.057
    assert bench_study.bh_reach(2 / 70, 2) == 2


def test_bench_study_parts_shipped_rule_is_the_study_tests_p_value():
    """--parts rebuilds each split's family statistics from the library's pieces: its min-p rule must give the very
    p-values run_study reports, or its comparison of rules would be about another test."""
    import anndata as ad

    from scontrast.study._test import rank_pvalues

    cells = ad.read_h5ad(bench_study.CELLS)
    sim = bench_study.simulate(cells, 3, 6, 6, False, 15, bench_study.POWER_EFFECTS)  # 6 vs 6: all 4 parts
    table = bench_study.study(sim, False, 3).table.set_index("value")
    stats = bench_study.split_family_statistics(sim, 3)
    assert set(stats) == set(table.index)
    for ct, T in stats.items():
        assert T.shape == (924, 4)
        p = rank_pvalues(bench_study.RULES["min-p (shipped)"](T))[0]
        assert p == pytest.approx(table.loc[ct, "pvalue"], rel=1e-12)


def test_bench_study_parts_prints_every_rule(capsys):
    bench_study.main(["--parts", "1", "1", "--cells", "15", "--seed", "4"])
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if re.match(r"^[^#].*: mean-shift type found", ln)]
    assert [ln.split(":")[0] for ln in lines] == list(bench_study.RULES)
    assert all("null studies with a split called" in ln for ln in lines)


def test_bench_study_effect_variants_are_run_studys_effects():
    """--effect prepares the split without the test's relabellings: its shipped and "50 cells" variants must be
    run_study's effect without and with effect_cells=50, the latter reading every cell when a donor has only 50."""
    import anndata as ad

    from benchmarks import study_effect

    cells = ad.read_h5ad(bench_study.CELLS)
    mono = cells[(cells.obs["cell_type"] == study_effect.SPLIT).to_numpy()].copy()
    planted = [{"cell_type": study_effect.SPLIT, "kind": "mean", "n_genes": 15, "fold": 2.0}]
    for cpd in (50, 80):
        sim = bench_study.simulate(mono, 11, 6, 6, False, cpd, planted)
        got = study_effect.split_effects(sim, 3)
        for variant, effect_cells in (("shipped", None), ("50 cells", 50)):
            row = run_study(sim, groupby="condition", target=["case"], background=["control"], replicate="donor",
                            split_by="cell_type", effect_cells=effect_cells, random_state=3).table.iloc[0]
            assert got[variant] == tuple(row[["effect", "effect_low", "effect_high"]]), (cpd, variant)
        assert (got["50 cells"] == got["shipped"]) == (cpd == 50)
        # no noise removed: the within-group distance is larger, so the same (planted, positive) shift reads smaller
        assert got["uncorrected"][0] < got["shipped"][0]


def test_bench_study_effect_prints_every_variant_and_fold(capsys):
    bench_study.main(["--effect", "2", "--effect-null", "3", "--seed", "5"])
    out = capsys.readouterr().out
    rows = re.findall(r"^(\d+) cells/donor, fold ([\d.]+), ([\w ]+): mean ", out, flags=re.M)
    from benchmarks import study_effect

    assert sorted(rows) == sorted((str(c), str(f), v) for f in study_effect.FOLDS for c in study_effect.COUNTS
                                  for v in study_effect.VARIANTS)
    assert re.findall(r"^([\w ]+): nothing planted, 50 against 500", out, flags=re.M) == list(study_effect.VARIANTS)
