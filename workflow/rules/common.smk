# Helpers shared by all rules: config validation, dataset lookup, per-rule parameters, resources,
# and the guard against two runs writing the same working directory.
import copy
import os
import re
import socket
import sys
import time
import uuid
from pathlib import Path

import yaml

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.utils import validate

from scontrast._workflow import dataset_name_problem, input_file_problem


def validated(data, schema, where="config"):
    """``snakemake.utils.validate`` (fills defaults) with a one-line error naming the key."""
    try:
        validate(data, schema)
    except WorkflowError as exc:
        cause = exc.__context__  # the jsonschema ValidationError
        if not hasattr(cause, "absolute_path"):
            raise
        key = ".".join(str(p) for p in cause.absolute_path)
        raise WorkflowError(f"{where}{'.' + key if key else ''}: {cause.message}") from None


# beside this file, so that a Snakefile elsewhere can include the workflow
SCHEMAS = Path(str(workflow.current_basedir)).parent / "schemas"


def _defaults(props):
    """The defaults of a schema's properties, nested objects (a method's ``plot`` block) included."""
    out = {}
    for key, spec in props.items():
        if "default" in spec:
            out[key] = copy.deepcopy(spec["default"])
        if spec.get("type") == "object" and "properties" in spec:
            out[key] = {**_defaults(spec["properties"]), **out.get(key, {})}
    return out


def with_defaults(block, schema_file):
    """``block`` with the defaults of ``schema_file`` filled in (one level of nested objects too).

    ``validate`` fills defaults of the top-level schema only, not inside the per-method
    schemas it reaches through ``$ref``.
    """
    out = _defaults(yaml.safe_load((SCHEMAS / schema_file).read_text())["properties"])
    for key, value in block.items():
        out[key] = {**out[key], **value} if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


# What the schema's name pattern does not see: YAML reads `2020:` as an integer (the pattern checks
# strings), and a name too long to be a folder fails only when its first job makes results/<name>/.
for _name in (config.get("datasets") or {}) if isinstance(config.get("datasets"), dict) else ():
    if dataset_name_problem(_name) is not None:
        raise WorkflowError(f"config.datasets: {dataset_name_problem(_name)}")
validated(config, "../schemas/config.schema.yaml")
for _key, _spec in yaml.safe_load((SCHEMAS / "config.schema.yaml").read_text())["properties"].items():
    if "$ref" in _spec:
        config[_key] = with_defaults(config.get(_key, {}), _spec["$ref"])

DATASETS = list(config["datasets"])
for _name in DATASETS:  # what the schema cannot say: paired needs a replicate (else refused by the first job)
    if config["datasets"][_name].get("paired") and config["datasets"][_name].get("replicate") is None:
        raise WorkflowError(f"config.datasets.{_name}: paired: true needs a replicate column (replicate: <obs column "
                            "naming each cell's donor, patient or sample>)")


def checked_input(path, key):
    """``path``, if it is an existing, regular, readable file; else a one-line error naming ``key``.

    Every input path of the config goes through it before any job: a missing file would surface
    as snakemake's MissingInputException block, and a FIFO would hang the run (a job's memory
    request reads its inputs' HDF5 sizes, and opening a FIFO waits for a writer).
    """
    problem = input_file_problem(path)
    if problem is not None:
        if str(path).startswith("~") and not os.path.exists(path):
            problem += " (a path beginning with '~' is not expanded: write the whole path)"
        raise WorkflowError(f"{key}: '{path}' {problem}")
    return path


def made_here(path):
    """Whether ``path`` is a result of this workflow (``results/<dataset>/...``): a dataset may
    read another's finished result, which does not exist until that dataset's rules have run."""
    parts = Path(os.path.normpath(path)).parts
    return len(parts) >= 3 and parts[0] == "results" and parts[1] in DATASETS


def _reads_results_of(name):
    """The dataset whose result dataset ``name`` reads (``path: results/<other>/...``), or None."""
    path = config["datasets"][name]["path"]
    return Path(os.path.normpath(path)).parts[1] if made_here(path) else None


for _name in DATASETS:  # a dataset reading its own result, or datasets reading each other's: a cycle
    _chain, _next = [_name], _reads_results_of(_name)
    while _next is not None and _next not in _chain:
        _chain.append(_next)
        _next = _reads_results_of(_next)
    if _next is not None:
        _loop = " -> ".join([*_chain[_chain.index(_next):], _next])
        raise WorkflowError(f"config.datasets.{_name}.path: '{config['datasets'][_name]['path']}' is a result of "
                            f"this workflow that depends on itself ({_loop}): a dataset cannot read its own result")


for _name in DATASETS:
    # another dataset's result is checked when it exists already (a FIFO there hung the run); else its rule makes it
    if not made_here(config["datasets"][_name]["path"]) or os.path.lexists(config["datasets"][_name]["path"]):
        checked_input(config["datasets"][_name]["path"], f"config.datasets.{_name}.path")
    if config["fangs"].get("samples") and "fangs" in config["methods"]:  # rule fangs checks it when asked
        checked_input(config["fangs"]["samples"].replace("{dataset}", _name), "config.fangs.samples")


# Studies (docs/studies.md): an entry with split_by becomes one contrast per testable value of that
# column, named <study>/<folder>, its split in its subset; the design check (obs only, before any
# job) decides which values can be tested, the others are rows of the study table with their reason.
STUDIES = {}
for _name in [d for d in DATASETS if config["datasets"][d].get("split_by")]:
    from scontrast.core import ScontrastError
    from scontrast.study._workflow import expand_study, study_design

    _entry = config["datasets"][_name]
    try:
        _design, _ = study_design(_entry, {**config["preprocess"], **_entry.get("preprocess", {})})
    except ScontrastError as exc:
        raise WorkflowError(f"config.datasets.{_name}: {exc}") from None
    STUDIES[_name] = expand_study(_name, _entry, _design)
    config["datasets"].update(STUDIES[_name])
DATASETS = [d for d in DATASETS if d not in STUDIES] + [s for splits in STUDIES.values() for s in splits]


# every split of every study (a dataset wildcard value)
SPLITS = {s for splits in STUDIES.values() for s in splits}


def method_threads(n):
    """A method rule's threads: ``n`` for a contrast of its own; 1 for a split of a study. A study's splits
    fill the cores side by side, while a method's job at a split's size is mostly single-threaded (reading,
    fitting small matrices): with ``n`` threads each, one core would idle beside it (benchmarks/bench_study.py
    --workflow). ``--set-threads`` overrides it."""
    return lambda wildcards: 1 if wildcards.dataset in SPLITS else n


def study_preprocess(wildcards):
    """A study's preprocess block: the global one with the entry's overrides (its min cells decide testability)."""
    entry = config["datasets"][wildcards.study]
    return {**config["preprocess"], **entry.get("preprocess", {})}


def study_deltas(wildcards):
    """The per-split deltas a study table reads: SPARDA's p-value, pseudobulk's genes (rule study)."""
    return [
        getattr(rules, m).output.h5ad.format(dataset=split)
        for split in STUDIES[wildcards.study]
        for m in ("sparda", "pseudobulk")
        if m in config["methods"] and runs(m, split)
    ]


def study_outputs():
    """Every study's design check, table and figure (rule all)."""
    return [
        path.format(study=s)
        for s in STUDIES
        for path in ("results/{study}/design.tsv", "results/{study}/study.tsv", "results/{study}/figures/study.png")
    ]


def relabel_block(wildcards):
    """``{'block': <obs column>}`` of an entry with a block and a replicate, else {} (the rule's params unchanged):
    SPARDA's replicate test and FANGS's replicate enrichment relabel donors only within blocks."""
    ds = config["datasets"][wildcards.dataset]
    return {"block": ds["block"]} if ds.get("block") and ds.get("replicate") else {}


def pseudobulk_design(wildcards):
    """``{'covariates': [...]}`` of an entry with covariates or a block, else {} (rule pseudobulk's params unchanged)."""
    ds = config["datasets"][wildcards.dataset]
    extra = [*(ds.get("covariates") or []), *([ds["block"]] if ds.get("block") else [])]
    return {"covariates": extra} if extra else {}


wildcard_constraints:
    dataset="|".join(re.escape(d) for d in DATASETS),
    study="|".join(re.escape(s) for s in STUDIES) or "no^study",


def input_identity(path):
    """A dataset's input as a parameter of the preprocess rule (scontrast._workflow.file_identity gives size, mtime,
    inode; stat only): a file replaced since its result was made (``mv`` keeps an older mtime, which
    snakemake's mtime check misses) reruns the contrast. Another dataset's result: snakemake's own check."""
    if made_here(path):
        return "made by this workflow"
    from scontrast._workflow import file_identity

    return file_identity(path)


def reported(*groups):
    """The inputs of rule all, flattened; in ``snakemake --report`` only those that exist.

    The report takes every result of the jobs it is asked for, and one that does not exist (a dataset
    whose run failed) stopped the whole report. It is built from what exists, and what is left out is
    named on the terminal (its dataset's log says why).
    """
    paths = [p for group in groups for p in ([group] if isinstance(group, str) else group)]
    if "--report" not in sys.argv:
        return paths
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        folders = sorted({str(Path(p).parent) for p in missing})
        logger.warning(f"scontrast report: {len(missing)} result(s) do not exist (a failed or unfinished run) and are "
                       f"left out of the report: {', '.join(folders)}; see logs/ for why")
    return [p for p in paths if os.path.exists(p)]


def dataset_cfg(wildcards):
    """The config entry of one dataset (one contrast)."""
    return config["datasets"][wildcards.dataset]


def preprocess_params(name):
    """Global preprocess block with the dataset's own overrides, validated."""
    merged = copy.deepcopy(config["preprocess"])
    merged.update(config["datasets"][name].get("preprocess", {}))
    block = {"preprocess": merged}
    validated(block, "../schemas/preprocess_block.schema.yaml", where=f"config datasets.{name}")
    return with_defaults(block["preprocess"], "preprocess.schema.yaml")


# Resolved once at parse time, so that a config error fails before any job runs.
PREPROCESS = {name: preprocess_params(name) for name in DATASETS}


def model_params(method):
    """A method's config block without its figure settings: what the method's job fits with.

    The figure settings (the block's ``plot`` entry) go to the method's figure rule only,
    so changing a colour redraws the figure and never refits the model.
    """
    return {k: v for k, v in config[method].items() if k != "plot"}


def plot_params(method):
    """The ``plot`` entry of a method's config block (keyword arguments of ``scontrast.pl.<method>``)."""
    return dict(config[method].get("plot", {}))


def runs(method, dataset):
    """Whether a configured method runs on a dataset: pseudobulk needs a replicate and raw counts."""
    if method not in (config["datasets"][dataset].get("methods") or config["methods"]):
        return False  # an entry's own methods list (a study's splits)
    if method == "pseudobulk":
        ds = config["datasets"][dataset]
        return ds.get("replicate") is not None and ds.get("counts", "raw") == "raw"
    return True


def key_figures(dataset):
    """The methods whose figure the landing page shows for ``dataset`` (at most two; their legends: KEY_FIGURES in summary.smk)."""
    shown = [m for m in ("sparda", "pseudobulk", "quadro") if m in config["methods"] and runs(m, dataset)]
    return shown[:2]


def fangs_deltas():
    """The deltas FANGS's result is read from: its own, after the sampler's when it summarises those."""
    own = [rules.fangs.output.h5ad]
    return own if config["fangs"].get("samples") else [rules.latent_features.output.h5ad, *own]


def method_outputs(wildcards):
    """Delta files of the configured methods that run on the dataset, merged by the collect rule.

    FANGS's result is its delta and, when it summarises rule latent_features's samples, that
    rule's delta (the samples and their convergence diagnostics): ``fangs_deltas`` (fangs.smk).
    """
    return [
        path.format(dataset=wildcards.dataset)
        for m in config["methods"]
        if runs(m, wildcards.dataset)
        for path in (fangs_deltas() if m == "fangs" else [getattr(rules, m).output.h5ad])
    ]


def figure_outputs():
    """Every dataset's QC figure and the figures of its configured methods (one ``<name>_figure`` rule each).

    Figures are never outputs of the job whose result they draw, which a figure that fails to
    draw would take with it.
    """
    return [
        getattr(rules, f"{m}_figure").output.figure.format(dataset=d)
        for d in DATASETS
        for m in ["preprocess", *config["methods"]]
        if m == "preprocess" or runs(m, d)
    ]


def mem_mb(rule, floor=2000):
    """Memory request (MB) of ``rule``: its ``per_input_mb`` per MB of the matrices it reads, the rest of its inputs once.

    Sized from what the job reads (scontrast._workflow: MEMORY, memory_request_mb): of its base
    input (``h5ad=``) ``X`` and the layers it reads (a method's: ``used_layers`` of its config
    block, as its script reads them), never the others (preprocessed.h5ad's counts); its other
    inputs whole. ``per_input_mb`` is at least 1.5x the rule's measured peak per MB of those
    matrices (benchmarks/results/slurm_requests.txt). Sizes are those of the uncompressed data
    (scontrast.io.hdf5_sizes), not the size on disk: a well-compressed input (or one crafted to
    decompress far beyond its size) would otherwise get a request far below what reading it
    takes. Doubled on each retry (profiles set retries).
    """
    from scontrast._workflow import memory_spec

    spec = memory_spec(rule)

    def _mem(wildcards, input, attempt):
        from scontrast._workflow import input_sizes, memory_request_mb

        paths = list(input)
        base = getattr(input, "h5ad", None)
        if base in paths:  # the base first
            paths.remove(base)
            paths.insert(0, base)
        layers = spec.layers
        if layers == "config":
            from scontrast.merge_files import used_layers

            layers = used_layers(model_params(rule))
        sizes = [input_sizes(path) for path in paths]
        return memory_request_mb(sizes, spec.per_input_mb, floor=floor, x=spec.x, layers=layers, attempt=attempt)

    return _mem


def runtime_min(per_input_mb=0.1, floor=10):
    """Wall-time request (minutes) from the input size on disk, longer on each retry.

    The sizes come from ``os.stat``, not ``input.size_mb``: snakemake 9 makes that an awaitable
    where it builds the report, which then printed "coroutine ... was never awaited" once per
    job. A missing input raises FileNotFoundError: "not known yet", as for ``mem_mb``.
    """

    def _runtime(wildcards, input, attempt):
        size_mb = sum(os.stat(path).st_size for path in input) / 2**20
        return int(max(floor, per_input_mb * size_mb) * attempt)

    return _runtime


# --------------------------------------------------------------------------- one live run at a time
# snakemake's lock stops a second run while the first is live, but `snakemake --unlock` removes
# it whether or not that run is still going. The main snakemake process of a run therefore leaves
# its pid and a token of the run here; a run that starts while that process is alive (same host)
# stops before any job. Its jobs keep running when only the main process is killed: each job
# records itself in JOBS while it runs (scontrast._workflow.run_rule), and a run that starts while
# one of them is alive stops too; a job whose run's token is no longer the one here (a job on
# another host that outlived its run) moves nothing into place (scontrast._runs.check_current_run).
LIVE_RUN = Path(".snakemake") / "scontrast_live_run"
JOBS = LIVE_RUN.parent / "scontrast_jobs"
RUN_TOKEN_ENV, RUN_FILE_ENV = "SCONTRAST_RUN_TOKEN", "SCONTRAST_RUN_FILE"  # as in scontrast._runs


def _proc_start(pid):
    """When process ``pid`` started (clock ticks since boot; Linux), '' if it is gone or unknown."""
    try:
        stat = Path(os.sep, "proc", str(pid), "stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def _live_run():
    """The (pid, host, start) of another live snakemake run of this directory, or None."""
    try:
        pid_text, host, started = LIVE_RUN.read_text().strip().split("\t")[:3]
        pid = int(pid_text)
    except (OSError, ValueError):
        return None
    if pid == os.getpid():
        return None
    if host != socket.gethostname():
        return (pid, host, started)  # cannot look at another host's processes: assume it may be live
    proc = Path(os.sep, "proc", str(pid))  # Linux; elsewhere the run is taken as gone
    try:
        cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        cwd = os.path.realpath(proc / "cwd")
    except OSError:
        return None  # gone (killed runs leave the file behind)
    if "snakemake" not in cmdline or cwd != os.path.realpath("."):
        return None  # the pid was reused by another program
    return (pid, host, started)


def _orphan_jobs():
    """Jobs of earlier runs of this directory still alive on this host: [(pid, rule, wildcards, start)].

    A record (pid, host, start ticks, token, rule, wildcards, start time; one tab-separated
    line) whose process is gone, or whose pid now belongs to another process, is deleted. Jobs
    on other hosts cannot be looked at; if one outlived its run, its result is discarded.
    """
    alive = []
    for record in sorted(JOBS.iterdir()) if JOBS.is_dir() else []:
        try:
            pid_text, host, ticks, _token, rule, where, started = record.read_text().rstrip("\n").split("\t")[:7]
            pid = int(pid_text)
        except (OSError, ValueError):
            continue
        if host != socket.gethostname():
            continue
        if ticks and _proc_start(pid) == ticks:
            alive.append((pid, rule, where, started))
        else:
            record.unlink(missing_ok=True)
    return alive


onstart:
    other = _live_run()
    if other is not None:
        pid, host, started = other
        raise WorkflowError(
            f"another snakemake run of this directory is live (pid {pid} on {host}, started {started}); "
            "two runs would write the same files: wait for it or stop it, and never --unlock a live run "
            f"(if it is truly gone, delete {LIVE_RUN})"
        )
    orphans = _orphan_jobs()
    if orphans:
        pid, rule, where, started = orphans[0]
        more = f" and {len(orphans) - 1} other job(s)" if len(orphans) > 1 else ""
        raise WorkflowError(
            f"a job of an earlier run of this directory is still running (rule {rule} [{where}], pid {pid}, "
            f"started {started}{more}; its main snakemake process was killed) and would overwrite this run's "
            f"results: wait for it to end or stop it (kill {' '.join(str(o[0]) for o in orphans)}), then rerun"
        )
    token = uuid.uuid4().hex
    LIVE_RUN.parent.mkdir(exist_ok=True)
    LIVE_RUN.write_text(
        f"{os.getpid()}\t{socket.gethostname()}\t{time.strftime('%Y-%m-%d %H:%M:%S')}\t{token}\n"
    )
    os.environ[RUN_TOKEN_ENV] = token  # every job of this run inherits it
    os.environ[RUN_FILE_ENV] = str(LIVE_RUN.resolve())


def _run_ended():
    try:
        if LIVE_RUN.read_text().split("\t")[0] == str(os.getpid()):
            LIVE_RUN.unlink()
    except OSError:
        pass


onsuccess:
    _run_ended()


onerror:
    _run_ended()
