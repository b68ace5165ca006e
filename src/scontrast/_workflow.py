"""What every rule script shares: logging to the rule's log and one-line errors.

A script is::

    from scontrast._workflow import run_rule

    def main(smk):
        ...

    run_rule(snakemake, main)  # noqa: F821

``run_rule`` sends Python logging and warnings to ``snakemake.log[0]``; when
``main`` raises, the full traceback goes to the log, one line naming the rule,
the dataset and the problem goes to stderr, any output already written is
removed, and the process exits with status 1.
"""

from __future__ import annotations

import logging
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

__all__ = ["run_rule"]


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _remove_outputs(smk: Any) -> None:
    for out in smk.output:
        p = Path(out)
        if p.is_file():
            p.unlink()


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
    try:
        main(smk)
    except Exception as exc:  # every failure becomes one line plus the logged traceback
        if log_path is not None:
            with log_path.open("a") as fh:
                fh.write(traceback.format_exc())
        _remove_outputs(smk)
        message = f"scontrast {smk.rule} [{where}]: {_one_line(exc)}"
        print(message, file=sys.stderr)
        if log_path is not None:
            with log_path.open("a") as fh:
                fh.write(message + "\n")
        sys.exit(1)
    log.info("rule %s (%s) done", smk.rule, where)
