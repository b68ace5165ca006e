"""A small fast run of benchmarks/bench_study.py (its full runs: benchmarks/results/bench_study.txt)."""

import re

from benchmarks import bench_study


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
