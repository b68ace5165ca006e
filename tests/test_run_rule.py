"""scontrast._workflow.run_rule: one-line errors, nothing partial left, recorded method failures, orphans."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from conftest import make_counts, rule_object
from scontrast import io
from scontrast._runs import RUN_FILE_ENV, RUN_TOKEN_ENV
from scontrast._workflow import run_rule
from scontrast.core import ScontrastError


@pytest.fixture(autouse=True)
def _restore_logging():
    yield
    logging.captureWarnings(False)
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()


@pytest.fixture
def base(tmp_path):
    path = tmp_path / "preprocessed.h5ad"
    io.write_h5ad(make_counts(), path)
    return path


def _run(smk, main) -> int:
    with pytest.raises(SystemExit) as ended:
        run_rule(smk, main)
    return ended.value.code


def _method(rule, base, tmp_path):
    return rule_object({"h5ad": str(base), "deltas": []}, {"h5ad": str(tmp_path / f"{rule}.h5ad")}, {},
                       tmp_path / f"{rule}.log", rule)


def _writes_then_raises(exc):
    """A rule's main that wrote part of its output, then failed."""
    def main(smk):
        Path(smk.output.h5ad).write_text("partial")
        raise exc
    return main


def test_input_problem_fails_with_one_line_and_leaves_nothing(base, tmp_path, capsys):
    smk = _method("quadro", base, tmp_path)
    code = _run(smk, _writes_then_raises(ScontrastError("groupby: obs['batch'] holds 1 labels")))
    assert code == 1
    line = "scontrast quadro [dataset=toy]: groupby: obs['batch'] holds 1 labels"
    assert capsys.readouterr().err.strip().splitlines()[-1] == line
    assert not (tmp_path / "quadro.h5ad").exists()
    log = (tmp_path / "quadro.log").read_text()
    assert "Traceback" in log and log.rstrip().splitlines()[-1] == line


def test_method_that_cannot_run_records_why_and_succeeds(base, tmp_path, capsys):
    smk = _method("quadro", base, tmp_path)
    code = _run(smk, _writes_then_raises(io.CannotRun("moments: the two classes have identical moments")))
    assert code == 0
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("scontrast quadro [dataset=toy]: did not run: moments: the two classes have identical")
    assert "recorded in" in err and "quadro.h5ad" in err
    delta = io.read_h5ad(tmp_path / "quadro.h5ad")
    assert dict(delta.uns[io.FAILURE_KEY]) == {"method": "quadro",
                                               "message": "moments: the two classes have identical moments"}
    assert delta.obs_names.equals(make_counts().obs_names) and delta.X is None
    merged = io.read_merged(base, tmp_path / "quadro.h5ad", failures="record")
    assert "quadro" in merged.uns["scontrast"]["failed"]


def test_upstream_failure_is_recorded_downstream(base, tmp_path, capsys):
    io.write_h5ad(io.failure_delta(base, "sparda", "no contrast"), tmp_path / "sparda.h5ad")

    def main(smk):
        io.read_merged(smk.input.h5ad, tmp_path / "sparda.h5ad")

    assert _run(_method("quadro", base, tmp_path), main) == 0
    assert "records that sparda did not run on this dataset: no contrast" in capsys.readouterr().err
    assert "sparda did not run" in io.read_h5ad(tmp_path / "quadro.h5ad").uns[io.FAILURE_KEY]["message"]


@pytest.mark.parametrize("rule, exc", [("quadro", ZeroDivisionError("division by zero")),  # a bug: not hidden
                                       ("quadro", MemoryError()),
                                       ("quadro_figure", io.MethodFailed("quadro did not run")),  # not a method
                                       ("collect", io.CannotRun("x"))])
def test_other_failures_fail_the_job(base, tmp_path, rule, exc):
    smk = _method(rule, base, tmp_path)
    assert _run(smk, _writes_then_raises(exc)) == 1
    assert not (tmp_path / f"{rule}.h5ad").exists()


def test_orphans_of_a_killed_job_are_removed_at_the_next_start(base, tmp_path):
    orphan = tmp_path / ".cpca.h5ad.a1b2c3d4.tmp"
    orphan.write_text("half of an h5ad")
    foreign = tmp_path / ".preprocessed.h5ad.a1b2c3d4.tmp"  # another rule's: not this job's to touch
    foreign.write_text("x")

    def main(smk):
        io.write_h5ad(make_counts(), smk.output.h5ad)

    run_rule(_method("cpca", base, tmp_path), main)
    assert not orphan.exists() and foreign.exists()
    assert "left by a killed job" in (tmp_path / "cpca.log").read_text()


def _runs_of(tmp_path, monkeypatch, job_token: str, current_token: str) -> Path:
    """The environment of a workflow job started by run ``job_token``; ``current_token``: the directory's run now."""
    run_file = tmp_path / ".snakemake" / "scontrast_live_run"
    run_file.parent.mkdir()
    run_file.write_text(f"1\thost\t2026-01-01 00:00:00\t{current_token}\n")
    monkeypatch.setenv(RUN_TOKEN_ENV, job_token)
    monkeypatch.setenv(RUN_FILE_ENV, str(run_file))
    return run_file


def test_a_job_of_a_replaced_run_moves_nothing_into_place_and_removes_nothing(base, tmp_path, monkeypatch, capsys):
    """A job that outlived its run (its main snakemake process killed; a cluster job, say) finishes
    after a later run wrote its result: that result stays, the old job's is discarded."""
    _runs_of(tmp_path, monkeypatch, job_token="new", current_token="new")
    out = tmp_path / "sparda.h5ad"
    io.write_h5ad(make_counts(seed=1), out)  # the later run's job wrote its result
    monkeypatch.setenv(RUN_TOKEN_ENV, "old")  # this job belongs to the run it replaced
    before = out.read_bytes()

    def main(smk):
        io.write_h5ad(make_counts(seed=2), smk.output.h5ad)

    smk = _method("sparda", base, tmp_path)
    assert _run(smk, main) == 1
    assert out.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".sparda.h5ad.")]  # no temporary file left
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("scontrast sparda [dataset=toy]: this job belongs to an earlier run of this directory")
    assert "discarded" in line
    # a method that cannot run does not replace the new result with a failure record either
    assert _run(smk, _writes_then_raises(io.CannotRun("no contrast"))) == 1
    assert out.read_bytes() == before


def test_a_replaced_runs_job_that_starts_late_touches_nothing(base, tmp_path, monkeypatch):
    """A queued job of a replaced run neither truncates the log nor removes the new job's temporary files."""
    _runs_of(tmp_path, monkeypatch, job_token="old", current_token="new")
    (tmp_path / "cpca.log").write_text("the new run's job is writing this\n")
    writing = tmp_path / ".cpca.h5ad.a1b2c3d4.tmp"
    writing.write_text("the new run's job is writing this")
    ran = []
    assert _run(_method("cpca", base, tmp_path), lambda smk: ran.append(1)) == 1
    assert ran == [] and writing.exists()
    assert (tmp_path / "cpca.log").read_text() == "the new run's job is writing this\n"


def test_a_job_of_the_current_run_records_itself_while_it_runs(base, tmp_path, monkeypatch):
    run_file = _runs_of(tmp_path, monkeypatch, job_token="tok", current_token="tok")
    seen = []

    def main(smk):
        seen.extend(p.read_text().split("\t") for p in (run_file.parent / "scontrast_jobs").iterdir())
        io.write_h5ad(make_counts(), smk.output.h5ad)

    run_rule(_method("cpca", base, tmp_path), main)
    assert (tmp_path / "cpca.h5ad").exists()
    (record,) = seen
    assert record[0] == str(os.getpid()) and record[3] == "tok" and record[4] == "cpca"
    assert record[2].isdigit()  # the process's start time: a reused pid is not taken for the job
    assert not list((run_file.parent / "scontrast_jobs").iterdir())  # gone once the job ends
