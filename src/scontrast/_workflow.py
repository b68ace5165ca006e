"""What every rule script shares: logging to the rule's log and one-line errors.

A script is::

    from scontrast._workflow import run_rule

    def main(smk):
        ...

    run_rule(snakemake, main)  # noqa: F821

``run_rule`` sends Python logging and warnings to ``snakemake.log[0]`` and first
deletes the temporary files an earlier, killed job left beside its outputs. When
``main`` raises, the full traceback goes to the log and one line naming the rule,
the dataset and the problem goes to stderr and the log's end. Then:

- a method (``METHOD_RULES``) that says it cannot run on the dataset
  (:class:`scontrast.io.CannotRun`: e.g. a background identical to the target), or
  whose input records that another method did not run (:class:`scontrast.io.MethodFailed`):
  its delta records that and why (:func:`scontrast.io.failure_delta`) and the job
  succeeds, so that ``collect`` still merges the other methods' results and lists this
  one under ``uns['scontrast']['failed']``; the method's figure rule then fails with the
  reason, and the run's exit status with it;
- any other failure (an input problem, :class:`scontrast.ScontrastError`, that the user
  fixes in the data or config it names; a bug; a lack of memory): every output already
  written is removed and the process exits with status 1. A recorded failure is a
  result, kept until its inputs or parameters change; a crash is retried by the next run.
"""

from __future__ import annotations

import logging
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

__all__ = ["run_rule", "METHOD_RULES"]

#: Rules whose output ``h5ad`` is a method's delta: a failure there can be recorded in it.
METHOD_RULES = ("sparda", "cpca", "pcpca", "quadro", "fangs", "pseudobulk")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _remove_outputs(smk: Any) -> None:
    for out in smk.output:
        p = Path(out)
        if p.is_file():
            p.unlink()


def _recordable(smk: Any, exc: BaseException) -> bool:
    """Whether ``exc`` is a method that cannot run on the dataset rather than an input problem."""
    from .io import CannotRun

    if smk.rule not in METHOD_RULES or not hasattr(smk.output, "h5ad") or not hasattr(smk.input, "h5ad"):
        return False
    return isinstance(exc, CannotRun)


def _record_failure(smk: Any, message: str) -> bool:
    """Write the method's delta as a failure record; False (and nothing left) if that fails too."""
    from . import io

    try:
        io.write_h5ad(io.failure_delta(smk.input.h5ad, smk.rule, message), smk.output.h5ad)
    except Exception:  # the job then fails as any other
        logging.getLogger("scontrast").exception("could not record the failure")
        _remove_outputs(smk)
        return False
    return True


def run_rule(smk: Any, main: Callable[[Any], None]) -> None:
    """Run ``main(smk)`` with the rule's logging and error conventions."""
    log_path = Path(smk.log[0]) if len(smk.log) else None
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="w"))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s",
                        handlers=handlers, force=True)
    logging.captureWarnings(True)
    log = logging.getLogger(f"scontrast.{smk.rule}")
    where = ", ".join(f"{k}={v}" for k, v in smk.wildcards.items())
    log.info("rule %s (%s) starting", smk.rule, where)
    from .io import remove_orphans

    for out in smk.output:
        for orphan in remove_orphans(out):
            log.info("removed %s, left by a killed job", orphan)
    try:
        main(smk)
    except Exception as exc:  # every failure becomes one line plus the logged traceback
        if log_path is not None:
            with log_path.open("a") as fh:
                fh.write(traceback.format_exc())
        _remove_outputs(smk)
        recorded = _recordable(smk, exc) and _record_failure(smk, _one_line(exc))
        if recorded:
            message = (f"scontrast {smk.rule} [{where}]: did not run: {_one_line(exc)} (recorded in "
                       f"{smk.output.h5ad}; collect keeps the other methods' results)")
        else:
            message = f"scontrast {smk.rule} [{where}]: {_one_line(exc)}"
        print(message, file=sys.stderr)
        if log_path is not None:
            with log_path.open("a") as fh:
                fh.write(message + "\n")
        sys.exit(0 if recorded else 1)
    log.info("rule %s (%s) done", smk.rule, where)
