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

A job of a run whose main snakemake process was killed keeps running. So that it never
overwrites what a later run of the directory writes, each job started by the workflow records
itself (pid, host, the run's token) in ``.snakemake/scontrast_jobs/`` while it runs: a new run
refuses to start while such a job is alive on its host (``workflow/rules/common.smk``), and a
job whose run has been replaced (a job on another host, say) moves no output into place and
removes nothing (:func:`scontrast._runs.check_current_run`).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, NamedTuple

from ._paths import input_file_problem  # re-exported: workflow/rules/common.smk checks inputs with it

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


def _remove_empty_folders(smk: Any) -> None:
    """After a failed ``preprocess``: the folders snakemake made for it, if they are empty.

    A bad input then leaves no ``results/<dataset>/`` (nor its ``benchmarks/``) behind, only its
    log. Only for the first rule of a dataset: no other job of the dataset runs beside it, so no
    folder another job is about to write into is removed. ``rmdir`` removes empty folders only.
    """
    if smk.rule != "preprocess":
        return
    for out in smk.output:
        folder = Path(out).parent
        for empty in (folder / "benchmarks", folder / "figures", folder):
            try:
                empty.rmdir()
            except OSError:  # absent or not empty: kept
                pass


def _proc_start(pid: int) -> str:
    """When process ``pid`` started (clock ticks since boot; Linux), '' if unknown: tells a reused pid."""
    try:
        stat = Path(os.sep, "proc", str(pid), "stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]  # field 22, starttime, counting from the state (field 3)


def _record_job(smk: Any, where: str) -> Path | None:
    """Record this job in ``.snakemake/scontrast_jobs/`` while it runs; None outside a workflow run.

    One line: ``pid, host, start ticks, run token, rule, wildcards, start time`` (tab-separated),
    which the workflow's ``onstart`` reads to refuse a run while an earlier run's job is alive.
    """
    from ._runs import RUN_FILE_ENV, RUN_TOKEN_ENV

    token, run_file = os.environ.get(RUN_TOKEN_ENV), os.environ.get(RUN_FILE_ENV)
    if not token or not run_file:
        return None
    folder = Path(run_file).parent / "scontrast_jobs"
    folder.mkdir(parents=True, exist_ok=True)
    pid, host = os.getpid(), socket.gethostname()
    record = folder / f"{host}.{pid}"
    fields = [str(pid), host, _proc_start(pid), token, str(smk.rule), where, time.strftime("%Y-%m-%d %H:%M:%S")]
    record.write_text("\t".join(f.replace("\t", " ") for f in fields) + "\n")
    return record


def _stale(smk: Any, where: str, log_path: Path | None, exc: BaseException) -> None:
    """End a job of a replaced run: one line, exit status 1, and nothing removed (the outputs are the new run's)."""
    message = f"scontrast {smk.rule} [{where}]: {_one_line(exc)}"
    print(message, file=sys.stderr)
    if log_path is not None:
        with log_path.open("a") as fh:
            fh.write(message + "\n")
    sys.exit(1)


def _recordable(smk: Any, exc: BaseException) -> bool:
    """Whether ``exc`` is a method that cannot run on the dataset rather than an input problem."""
    from .io import CannotRun

    if smk.rule not in METHOD_RULES or not hasattr(smk.output, "h5ad") or not hasattr(smk.input, "h5ad"):
        return False
    return isinstance(exc, CannotRun)


def _record_failure(smk: Any, message: str) -> bool:
    """Write the method's delta as a failure record; False (and nothing left) if that fails too."""
    from . import io
    from ._runs import StaleJob

    try:
        io.write_h5ad(io.failure_delta(smk.input.h5ad, smk.rule, message), smk.output.h5ad)
    except StaleJob:
        return False  # replaced in the meantime: what is in place is the new run's
    except Exception:  # the job then fails as any other
        logging.getLogger("scontrast").exception("could not record the failure")
        _remove_outputs(smk)
        return False
    return True


#: The files a reader takes as a contrast's answer (``results/<dataset>/``), downstream of every job of
#: :data:`ANSWERED_BY`: such a job runs because its inputs or parameters changed, so when it fails they
#: answer another input or configuration than the current one, and are removed with its outputs.
ANSWER_FILES = ("scontrast.h5ad", "summary.tsv", "summary.html", "genes.tsv", "overview.html")
ANSWERED_BY = ("preprocess", "latent_features", "collect", *METHOD_RULES)


def _remove_stale_answer(smk: Any) -> list[str]:
    """Remove the dataset's :data:`ANSWER_FILES` after a failed job of :data:`ANSWERED_BY`; the names removed."""
    if smk.rule not in ANSWERED_BY or not len(smk.output):
        return []
    folder = Path(smk.output[0]).parent  # results/<dataset> (a study's split: results/<study>/<split>)
    gone = []
    for name in ANSWER_FILES:
        if (folder / name).is_file():
            (folder / name).unlink()
            gone.append(name)
    return gone


def _made_here_hint(smk: Any, text: str) -> str:
    """``text``, and what to do when it names an input that an earlier job of the workflow made (a truncated
    result: every rerun would fail on it until it is made again)."""
    made = [p for p in dict.fromkeys(str(p) for p in smk.input) if Path(p).parts[:1] == ("results",)]
    for path in made:
        if path in text:
            return f"{text}; '{path}' is a result of an earlier job: delete it (or rerun with --forcerun {path})"
    for path in made:  # a reader's error that names no file (h5py's "truncated file: eof = ..."): which one
        if path.endswith(".h5ad") and not _opens_as_hdf5(path):
            return (f"input '{path}' cannot be read ({text}); it is a result of an earlier job: delete it (or rerun "
                    f"with --forcerun {path})")
    return text


def _opens_as_hdf5(path: str) -> bool:
    import h5py

    try:
        with h5py.File(path, "r"):
            return True
    except Exception:  # h5py raises OSError, and others on a damaged file
        return False


def _for_terminal(record: logging.LogRecord) -> bool:
    """Warnings and errors, and the INFO lines marked for the terminal (a long step's progress)."""
    from .core import TERMINAL

    return record.levelno >= logging.WARNING or bool(getattr(record, TERMINAL, False))


def run_rule(smk: Any, main: Callable[[Any], None]) -> None:
    """Run ``main(smk)`` with the rule's logging and error conventions."""
    from ._runs import StaleJob, check_current_run

    log_path = Path(smk.log[0]) if len(smk.log) else None
    where = ", ".join(f"{k}={v}" for k, v in smk.wildcards.items())
    try:  # a job of a replaced run that starts late (a queued cluster job) touches nothing
        check_current_run()
    except StaleJob as exc:
        _stale(smk, where, None, exc)
    # the terminal shows the lines of jobs that run side by side: each names its dataset (the log is the dataset's
    # own); of the INFO lines only a long step's progress (core.TERMINAL), the rest is in the log
    terminal = logging.StreamHandler(sys.stderr)
    terminal.addFilter(_for_terminal)
    terminal.setFormatter(logging.Formatter(f"%(asctime)s %(name)s [{where.replace('%', '%%')}] %(levelname)s "
                                            "%(message)s"))
    handlers: list[logging.Handler] = [terminal]
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="w"))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s",
                        handlers=handlers, force=True)
    logging.captureWarnings(True)
    log = logging.getLogger(f"scontrast.{smk.rule}")
    log.info("rule %s (%s) starting", smk.rule, where)
    record = _record_job(smk, where)
    try:
        _run(smk, main, log, log_path, where)
    finally:
        if record is not None:
            record.unlink(missing_ok=True)


def file_identity(path: str | os.PathLike) -> str:
    """What tells one version of a file from another without reading it: size, mtime (ns) and inode.

    A file replaced by ``mv`` keeps the moved file's mtime, which can be older than a result made
    from the file it replaced; its inode (or size) still differs. ``os.stat`` only: never opens it.
    """
    status = os.stat(path)
    return f"size {status.st_size}, mtime_ns {status.st_mtime_ns}, inode {status.st_ino}"


def _input_identities(smk: Any, log: logging.Logger) -> dict[str, str]:
    """Each input file's :func:`file_identity` as the job starts (logged): checked again when it ends."""
    read = {}
    for path in dict.fromkeys(str(p) for p in smk.input):
        try:
            read[path] = file_identity(path)
        except OSError:
            continue  # the job's own reading names the problem
        log.info("input %s: %s", path, read[path])
    return read


def _check_unchanged(read: dict[str, str]) -> None:
    """Fail the job (its outputs removed) if an input was replaced or rewritten while the job read it."""
    from .core import ScontrastError

    for path, before in read.items():
        try:
            now = file_identity(path)
        except OSError:
            now = "gone"
        if now != before:
            raise ScontrastError(f"input '{path}' changed while this job read it ({before}; now {now}): its result "
                                 "could mix two versions and is discarded; rerun once the file is complete")


def _run(smk: Any, main: Callable[[Any], None], log: logging.Logger, log_path: Path | None, where: str) -> None:
    from ._runs import StaleJob, check_current_run
    from .io import remove_orphans

    for out in smk.output:
        for orphan in remove_orphans(out):
            log.info("removed %s, left by a killed job", orphan)
    read = _input_identities(smk, log)
    try:
        main(smk)
        _check_unchanged(read)
    except Exception as exc:  # every failure becomes one line plus the logged traceback
        if log_path is not None:
            with log_path.open("a") as fh:
                fh.write(traceback.format_exc())
        try:
            check_current_run()
        except StaleJob as stale:  # the outputs in place are the new run's: remove nothing
            _stale(smk, where, log_path, stale)
        _remove_outputs(smk)
        recorded = _recordable(smk, exc) and _record_failure(smk, _one_line(exc))
        if recorded:
            message = (f"scontrast {smk.rule} [{where}]: did not run: {_one_line(exc)} (recorded in "
                       f"{smk.output.h5ad}; collect keeps the other methods' results)")
        else:
            gone = _remove_stale_answer(smk)
            _remove_empty_folders(smk)
            message = f"scontrast {smk.rule} [{where}]: {_made_here_hint(smk, _one_line(exc))}"
            if gone:
                message += f" (the earlier {', '.join(gone)} of this dataset were removed: they answer another input " \
                           "or configuration)"
        print(message, file=sys.stderr)
        if log_path is not None:
            with log_path.open("a") as fh:
                fh.write(message + "\n")
        sys.exit(0 if recorded else 1)
    log.info("rule %s (%s) done", smk.rule, where)


# ------------------------------------------------------------------ inputs and names, checked at config time
#: The longest dataset name: a name is a folder of every result (``results/<name>/``,
#: ``logs/<name>/``), and most file systems hold at most 255 bytes in one name (NAME_MAX); the
#: margin of 14 is what a writer adds to a name for its temporary sibling (``.<name>.<8 random>.tmp``,
#: :func:`scontrast.core.temporary_beside`). Names are ASCII (the config schema's pattern): bytes = characters.
MAX_DATASET_NAME = 255 - 14

class ProgressLines(logging.Filter):
    """Drops snakemake's lines per job and per report file, which no ``--quiet`` category covers.

    The scheduler's "Select jobs to execute..." and "Execute 2 jobs..." (two per finished job: a
    hundred jobs made some two hundred lines) and the report's "Adding summary.tsv (3.92 KB)." and
    "Loading script code for rule sparda" (one per file and rule: a hundred lines for the demo's
    report). The Snakefile adds this filter to snakemake's logger when the run is quiet on
    progress (the default profile), so the terminal keeps warnings, failures and the run's end.
    """

    _REPORT = re.compile(r"^(Adding .+ \([0-9.]+ [KMGT]?i?B\)\.|Loading (script|wrapper) code for rule \S+)$")

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message == "Select jobs to execute..." or self._REPORT.match(message):
            return False
        return str(getattr(getattr(record, "event", None), "value", "")) != "job_started"


def quiet_progress_lines(logger: logging.Logger) -> None:
    """Add :class:`ProgressLines` to ``logger`` once."""
    if not any(isinstance(f, ProgressLines) for f in logger.filters):
        logger.addFilter(ProgressLines())


def dataset_name_problem(name: object) -> str | None:
    """Why ``name`` cannot name a dataset (the ``{dataset}`` wildcard, a folder of results), or None.

    The schema checks the characters (``[A-Za-z0-9][A-Za-z0-9_.-]*``); this checks what it
    cannot: the type (YAML reads ``2020:`` as an integer) and the length (:data:`MAX_DATASET_NAME`).
    """
    if not isinstance(name, str):
        return (f"dataset name {name!r} is not a string (YAML reads it as {type(name).__name__}); "
                f"quote it: '{name}':")
    if len(name.encode()) > MAX_DATASET_NAME:
        return (f"dataset name '{name[:20]}...' is {len(name.encode())} characters long, more than "
                f"{MAX_DATASET_NAME}: it names the folders results/<name>/ and logs/<name>/, and a file "
                "system holds at most 255 bytes in one name")
    return None


# ----------------------------------------------------------------------------- memory requests
class MemorySpec(NamedTuple):
    """How a rule's memory request is sized (:func:`memory_request_mb`).

    ``per_input_mb`` per MB of the matrices the rule reads: of its base file ``X`` when ``x``,
    and ``layers``: ``"all"``, a tuple of names (``()``: none) or ``"config"`` (those its config
    block makes its script read: ``merge_files.used_layers``).
    """

    per_input_mb: float
    x: bool = True
    layers: str | tuple = "all"


#: Each rule's request. ``per_input_mb`` is at least 1.5x the largest peak RSS measured for the
#: rule per MB of the matrices it reads, at 50,000 cells x 20,000 genes (exact, and bench_scale's
#: sampled) and 200,000 x 30,000 (sampled): benchmarks/results/slurm_requests.txt has the peaks, the
#: requests at both sizes, and how they were computed. X below: its CSR size.
MEMORY = {
    "preprocess": MemorySpec(3.5),  # the raw input, whole (read_h5ad): peak 2.26x X at 50k (exact)
    # X and the layer the config names (none by default); preprocessed.h5ad's counts are not read
    "sparda": MemorySpec(3.75, layers="config"),  # 2.47x X at 50k (sampled; 2.29x exact)
    "quadro": MemorySpec(3.85, layers="config"),  # 2.53x (exact; 2.43x in another run)
    "cpca": MemorySpec(3, layers="config"),  # 1.88x (exact)
    "pcpca": MemorySpec(3, layers="config"),  # 1.68x (exact)
    "latent_features": MemorySpec(3, layers="config"),  # 1.65x (exact)
    "fangs": MemorySpec(2.5, layers=()),  # X only (read_merged(layers=())), the samples whole: 1.49x (exact)
    # the counts layer only (read_annotations(layers=('counts',))), summed a block of cells at a time, and
    # PyDESeq2 in one process (threads: 1), the request kept for two worker processes (set-threads): 1.96x the
    # layer with them (sampled, 50k with 8 donors; the largest
    # process alone 1.56x exact; 2.23x when the layer is summed whole)
    "pseudobulk": MemorySpec(3.25, x=False, layers=("counts",)),
    # every <method>_figure and preprocess_figure: io.read_for_figure, the annotations and the deltas, no
    # matrix of the base (anndata's backed read would load every layer, 1.24x the counts layer;
    # preprocess_figure reads the genes' moments from X a block of cells at a time): the floor
    "figure": MemorySpec(2, x=False, layers=()),
    # the base's matrices are copied as bytes (collect) or not read (summary): the annotations, the floor
    "collect": MemorySpec(1, x=False, layers=()),
    "summary": MemorySpec(1, x=False, layers=()),
}


def memory_spec(rule: str) -> MemorySpec:
    """:data:`MEMORY`'s entry of ``rule``, the figure rules (``<method>_figure``) sharing one."""
    if rule not in MEMORY and rule.endswith("_figure"):
        return MEMORY["figure"]
    return MEMORY[rule]


def input_sizes(path: str | os.PathLike) -> dict:
    """Bytes reading ``path`` takes, by part: ``{"X", "layers": {name: bytes}, "total", "whole"}``.

    An ``.h5ad``: :func:`scontrast.io.hdf5_sizes` (uncompressed). Any other file, and an ``.h5ad``
    that cannot be inspected (its job then fails with its own message), is ``"whole"``: its job
    reads all of it, a ``.npz`` (a samples file) by its members' uncompressed sizes, else by its
    size on disk. A missing file raises FileNotFoundError, which snakemake takes as "not known
    yet" and evaluates again when the job is ready to run.
    """
    import stat
    import zipfile

    status = os.stat(path)
    if not stat.S_ISREG(status.st_mode):  # never opened: a FIFO would block the main snakemake process
        raise ValueError(f"'{path}' {input_file_problem(path)}")
    on_disk = status.st_size
    whole = {"X": 0, "layers": {}, "total": on_disk, "whole": True}
    if str(path).endswith(".npz"):
        try:
            with zipfile.ZipFile(path) as zf:
                whole["total"] = max(on_disk, sum(info.file_size for info in zf.infolist()))
        except (OSError, zipfile.BadZipFile):
            pass
        return whole
    if not str(path).endswith(".h5ad"):
        return whole
    try:
        from .io import hdf5_sizes

        return {**hdf5_sizes(path), "whole": False}
    except Exception:
        return whole


def memory_request_mb(sizes: list[dict], per_input_mb: float, floor: float = 2000, x: bool = True,
                      layers="all", attempt: int = 1) -> int:
    """A job's memory request (MB) from its inputs' :func:`input_sizes`, the first its base file.

    ``per_input_mb`` per MB of the matrices the job reads, plus everything else it reads
    (obs, var, uns, obsm, ...) once; at least ``floor``, doubled on each retry (``attempt``).
    Of the base it reads ``X`` when ``x`` and the layers in ``layers`` (``"all"``, or the names
    it asks for: a method reads only ``merge_files.used_layers`` of its config), never the other
    layers, which count nothing: ``preprocessed.h5ad``'s counts, as large as ``X``, doubled the
    methods' requests. The other inputs (the deltas, a samples file) are read whole.
    """
    matrices = rest = 0.0
    for i, s in enumerate(sizes):
        if s.get("whole"):
            matrices += s["total"]
            continue
        every = sum(s["layers"].values())
        if i == 0:
            read = every if layers == "all" else sum(s["layers"].get(k, 0) for k in layers)
            matrices += (s["X"] if x else 0) + read
        else:
            matrices += s["X"] + every
        rest += s["total"] - s["X"] - every
    return int(max(floor, (per_input_mb * matrices + rest) / 2**20) * 2 ** (attempt - 1))


# ----------------------------------------------------------------------------- config files
def strict_yaml_load(path: str | os.PathLike):
    """The YAML (or JSON) document of ``path``; a one-line ``ValueError`` on a key given twice in one mapping.

    PyYAML and snakemake's loader keep the last of two equal keys in silence, so a dataset named
    twice (target and background swapped), two ``seed:`` lines or two method blocks would run the
    last one only. The error names the file, the key, its path in the document and both lines.
    """
    import yaml

    class _Strict(yaml.SafeLoader):
        pass

    def _mapping(loader, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults`: its keys may be overridden here
                continue
            key = loader.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the constructor's own error says so
                break
            line = key_node.start_mark.line + 1
            if first is not None:
                raise ValueError(f"config file '{path}': key {key!r} is given twice in one block (lines {first} and "
                                 f"{line}); YAML would keep the second in silence: remove or rename one")
            seen[key] = line
        return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)

    _Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
    with open(path, encoding="utf-8") as fh:
        return yaml.load(fh, Loader=_Strict)  # noqa: S506 (a SafeLoader subclass)
