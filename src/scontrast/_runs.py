"""The workflow's run tokens: a job of a replaced run moves no output into place.

A job of a run whose main snakemake process was killed keeps running; a later run of the same
directory (after ``--unlock``) reruns it, possibly with other parameters, and the old job's result
must never land on the new one's. The workflow's ``onstart`` (``workflow/rules/common.smk``) sets
:data:`RUN_TOKEN_ENV` and :data:`RUN_FILE_ENV` for every job of a run;
:func:`scontrast.core.move_into_place` calls :func:`check_current_run` only when the token is set,
so writes outside the workflow never read these files. This module imports nothing of scontrast.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["RUN_TOKEN_ENV", "RUN_FILE_ENV", "StaleJob", "check_current_run"]

#: Set by the workflow's ``onstart`` for every job of a run (jobs inherit the environment, also
#: through ``sbatch --export=ALL``): that run's token, and the file holding the token of the run
#: of the directory that is current (``.snakemake/scontrast_live_run``, 4th field).
RUN_TOKEN_ENV = "SCONTRAST_RUN_TOKEN"
RUN_FILE_ENV = "SCONTRAST_RUN_FILE"


class StaleJob(RuntimeError):
    """This process is a job of a workflow run that a later run of the same directory replaced."""


def check_current_run() -> None:
    """Raise :class:`StaleJob` if this process is a job of a run that is no longer the directory's run.

    A job keeps running when only the main snakemake process of its run is killed; a later run
    (after ``--unlock``) then reruns it, possibly with other parameters, and the old job's
    result must never land on the new one's. Outside the workflow (no token in the
    environment) every write is allowed.
    """
    token = os.environ.get(RUN_TOKEN_ENV)
    if not token:
        return
    run_file = Path(os.environ.get(RUN_FILE_ENV) or os.path.join(".snakemake", "scontrast_live_run"))
    try:
        fields = run_file.read_text().strip().split("\t")
    except OSError:
        fields = []
    if len(fields) < 4 or fields[3] != token:
        raise StaleJob(
            "this job belongs to an earlier run of this directory, which a later run replaced (its main "
            "snakemake process was killed): its result is discarded, not moved into place"
        )
