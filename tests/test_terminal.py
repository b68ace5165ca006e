"""What a run prints on the terminal with the default profile: warnings and failures, not a block per job."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from scontrast._workflow import ProgressLines

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")

# The lines snakemake prints whatever the number of jobs (the profile, "Building DAG of jobs...", the shell,
# the conda note), and the lines allowed per job: the warnings and long steps' progress of some jobs. With
# snakemake's job blocks and progress lines (--quiet host) a job prints about 10; the quick start's count
# with the default profile is in docs/reliability.md.
FIXED_LINES = 12
LINES_PER_JOB = 0.25


def _record(msg: str, **extra) -> logging.LogRecord:
    record = logging.LogRecord("snakemake.logging", logging.INFO, __file__, 1, msg, None, None)
    record.__dict__.update(extra)
    return record


def test_the_scheduler_and_report_file_lines_are_dropped_and_nothing_else():
    from snakemake_interface_logger_plugins.common import LogEvent

    keep = ProgressLines().filter
    assert not keep(_record("Select jobs to execute..."))
    assert not keep(_record("Execute 2 jobs...", event=LogEvent.JOB_STARTED, jobs=[1, 2]))
    assert not keep(_record("Adding summary.tsv (3.92 KB)."))
    assert not keep(_record("Adding preprocess_qc.png (114.03 KB)."))
    assert not keep(_record("Loading script code for rule sparda_figure"))
    assert keep(_record("Creating report...")) and keep(_record("Report created."))
    assert keep(_record("Adding a note to the log"))  # the report's pattern only
    assert keep(_record("Building DAG of jobs..."))
    assert keep(_record("Nothing to be done (all requested files are present and up to date)."))
    assert keep(_record("Error in rule sparda:", event=LogEvent.JOB_ERROR))


def test_a_progress_line_reaches_the_terminal_once_its_loop_has_run_long(caplog, monkeypatch):
    """Every progress line goes to the job's log after PROGRESS_AFTER seconds; the terminal, shared by every job
    of a run, gets those of a loop that has run TERMINAL_AFTER seconds (a 20 s step prints none there)."""
    import numpy as np

    from scontrast import core

    clock = iter(np.arange(0.0, 1000.0, 0.5))  # each step half a second
    monkeypatch.setattr(core.time, "perf_counter", lambda: next(clock))
    with caplog.at_level(logging.INFO, logger="scontrast.x"):
        list(core.progress(range(40), desc="medium", logger="scontrast.x"))  # 20 s
        list(core.progress(range(100), desc="long", logger="scontrast.x"))  # 50 s
    medium = [r for r in caplog.records if r.getMessage().startswith("medium")]
    long = [r for r in caplog.records if r.getMessage().startswith("long")]
    assert medium and not [r for r in medium if getattr(r, core.TERMINAL)]
    shown = [int(r.getMessage().split(": ")[1].split("/")[0]) for r in long if getattr(r, core.TERMINAL)]
    hidden = [int(r.getMessage().split(": ")[1].split("/")[0]) for r in long if not getattr(r, core.TERMINAL)]
    assert shown[-1] == 100 and min(shown) * 0.5 >= core.TERMINAL_AFTER > max(hidden) * 0.5


def _config(tmp_path: Path) -> Path:
    cfg = yaml.safe_load((REPO / "tests" / "data" / "tiny_config.yaml").read_text())
    ds = cfg["datasets"]["wu2020"]
    ds["path"] = str(REPO / ds["path"])
    cfg["datasets"] = {"wu2020": ds}
    cfg["methods"] = ["sparda", "cpca"]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.workflow
def test_a_run_prints_a_few_lines_whatever_its_number_of_jobs(tmp_path):
    """The default profile's run prints at most FIXED_LINES + LINES_PER_JOB x jobs lines (snakemake's job blocks
    and progress lines printed about 10 per job); each warning line names its dataset."""
    config = _config(tmp_path)
    base = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "--configfile", str(config)]
    dry = subprocess.run([*base, "-n", "--quiet", "rules"], capture_output=True, text=True, timeout=600)
    assert dry.returncode == 0, dry.stderr[-3000:]
    total = re.search(r"^total\s+(\d+)", dry.stdout + dry.stderr, flags=re.MULTILINE)
    n_jobs = int(total.group(1))
    assert n_jobs >= 8, dry.stdout[-2000:]

    proc = subprocess.run(base, capture_output=True, text=True, timeout=1800)  # the profile as a user has it
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = (proc.stdout + proc.stderr).splitlines()
    assert len(lines) <= FIXED_LINES + LINES_PER_JOB * n_jobs, "\n".join(lines)
    assert not [ln for ln in lines if "Shell command" in ln or "Select jobs" in ln or re.match(r"Execute \d+ jobs", ln)]
    assert not [ln for ln in lines if re.match(r"\s*(local)?rule \w+:", ln) or "steps (" in ln]
    warned = [ln for ln in lines if " WARNING " in ln]
    assert all("[dataset=wu2020]" in ln for ln in warned), warned

    # the report of the README's second command: a few lines, not one per file and rule
    report = subprocess.run([*base, "--report", str(tmp_path / "report.html")], capture_output=True, text=True,
                            timeout=600)
    assert report.returncode == 0, report.stderr[-3000:]
    assert len((report.stdout + report.stderr).splitlines()) <= 6, report.stdout + report.stderr

    # the same run asked for snakemake's job blocks prints them: the count above is the profile's doing
    again = subprocess.run([*base, "--forcerun", "summary", "--quiet", "host"], capture_output=True, text=True,
                           timeout=1800)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "rule summary:" in again.stdout + again.stderr and "Select jobs to execute..." in again.stdout + again.stderr
