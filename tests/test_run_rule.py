"""scontrast._workflow.run_rule: one-line errors, nothing partial left, recorded method failures, orphans."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from conftest import make_counts, rule_object
from scontrast import io
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
