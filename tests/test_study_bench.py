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
