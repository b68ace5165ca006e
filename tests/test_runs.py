"""Runs of the workflow as a whole: one live run per directory, memory requests from the data read."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

from conftest import REPO, make_counts
from scontrast._workflow import MEMORY

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
LIVE_RUN = Path(".snakemake") / "scontrast_live_run"

pytestmark = pytest.mark.workflow


def _command(workdir: Path, cfg: dict, *args: str) -> list[str]:
    (workdir / "config.yaml").write_text(yaml.safe_dump(cfg))
    # --quiet host: each job's block with its resources, which the default profile keeps off the terminal
    return [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--configfile",
            str(workdir / "config.yaml"), "--quiet", "host", *args]


def _config(path: Path) -> dict:
    return {"datasets": {"toy": {"path": str(path), "groupby": "condition", "target": ["disease"],
                                 "background": ["healthy"], "counts": "raw",
                                 "preprocess": {"min_genes": 1, "min_cells": 1, "n_top_genes": 20,
                                                "min_cells_per_group": 5}}},
            "methods": ["cpca"]}


def _held_command(workdir: Path, cfg: dict, *args: str) -> list[str]:
    """A run of the workflow that also builds ``held``, a job that waits until the test writes ``release``.

    The Snakefile includes the real one, so the run's start and end hooks are the workflow's own;
    the run stays live, whatever the machine's load, until the test lets it go or kills it.
    """
    (workdir / "Snakefile").write_text(
        f"include: {str(REPO / 'Snakefile')!r}\n\n"
        "rule held:\n"
        "    output: 'held'\n"
        "    shell: 'while [ ! -e release ]; do sleep 0.1; done; touch {output}'\n"
    )
    (workdir / "config.yaml").write_text(yaml.safe_dump(cfg))
    return [SNAKEMAKE, "-s", str(workdir / "Snakefile"), "-d", str(workdir), "--configfile",
            str(workdir / "config.yaml"), *args]


def test_a_second_run_stops_while_the_first_is_live(tmp_path):
    """`--unlock` during a live run removes snakemake's lock; the workflow still refuses a second run."""
    make_counts().write_h5ad(tmp_path / "toy.h5ad")
    cmd = _held_command(tmp_path, _config(tmp_path / "toy.h5ad"), "--cores", "1")
    first = subprocess.Popen([*cmd, "held"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    live = tmp_path / LIVE_RUN
    try:
        _wait_for(lambda: live.exists() or first.poll() is not None)
        assert live.exists(), "the first run never reached its jobs"
        assert live.read_text().split("\t")[0] == str(first.pid)
        assert subprocess.run([*cmd, "--unlock"], capture_output=True, timeout=300).returncode == 0
        second = subprocess.run([*cmd, "held"], capture_output=True, text=True, timeout=600)
        assert first.poll() is None  # held until the test writes `release`, which it never does
        output = second.stdout + second.stderr
        assert second.returncode != 0
        assert f"another snakemake run of this directory is live (pid {first.pid} on" in output
        assert "never --unlock a live run" in output
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    # the killed run leaves its pid behind; a dead pid does not stop the resume, which then cleans up
    assert live.exists()
    (tmp_path / "release").touch()
    subprocess.run([*cmd, "--unlock"], capture_output=True, timeout=300)
    third = subprocess.run([*cmd, "held", "all"], capture_output=True, text=True, timeout=900)
    assert third.returncode == 0, third.stderr[-3000:]
    assert (tmp_path / "results/toy/scontrast.h5ad").exists()
    assert not live.exists()


def test_memory_request_follows_the_uncompressed_matrix(tmp_path):
    """A well-compressed X asks for memory by what it takes once read, not by its size on disk."""
    path = tmp_path / "zeros.h5ad"
    shape = (8000, 20000)  # float32: 610 MiB once read (a request above the 2000 MB floor), a few MB on disk
    with h5py.File(path, "w") as fh:
        ds = fh.create_dataset("X", shape=shape, dtype="f4", chunks=(500, shape[1]), compression="gzip")
        for start in range(0, shape[0], 500):
            ds[start:start + 500] = np.zeros((500, shape[1]), dtype="f4")
    assert path.stat().st_size < 2**20
    proc = subprocess.run(_command(tmp_path, _config(path), "-n", "results/toy/preprocessed.h5ad"),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    mem = [int(m) for m in re.findall(r"mem_mb=(\d+)", proc.stdout + proc.stderr)]
    per_input_mb = MEMORY["preprocess"].per_input_mb
    expected = per_input_mb * np.prod(shape) * 4 / 2**20  # MB of X once read x the rule's factor (above the floor)
    assert mem and all(abs(m - expected) <= 2 for m in mem), (mem, expected)


def _zeros(fh: h5py.File, name: str, shape, dtype) -> int:
    """A gzip dataset of zeros (MBs once read, KBs on disk); its bytes once read."""
    ds = fh.create_dataset(name, shape=shape, dtype=dtype, chunks=(500, shape[1]), compression="gzip")
    for start in range(0, shape[0], 500):
        ds[start:start + 500] = np.zeros((min(500, shape[0] - start), shape[1]), dtype=dtype)
    return int(np.prod(shape)) * np.dtype(dtype).itemsize


def _requests(output: str) -> dict[str, int]:
    """{rule: mem_mb} of a dry run's jobs."""
    out = {}
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", output):
        rule = re.match(r"(?:local)?rule (\w+):", block)
        mem = re.search(r"mem_mb=(\d+)", block)
        if rule and mem:
            out[rule.group(1)] = int(mem.group(1))
    return out


def test_memory_requests_count_only_the_layers_a_rule_reads(tmp_path):
    """preprocessed.h5ad's counts layer, never read by the methods' scripts (read_merged with
    used_layers of their config), does not count in their requests; a method whose config names
    the layer counts it; preprocess counts every layer of the raw input, which it reads whole."""
    shape, mb = (10000, 20000), 2**20
    raw = tmp_path / "raw.h5ad"
    with h5py.File(raw, "w") as fh:
        raw_mb = (_zeros(fh, "X", shape, "f4") + _zeros(fh, "layers/spliced", shape, "f4")) / mb
    (tmp_path / "results" / "toy").mkdir(parents=True)
    with h5py.File(tmp_path / "results" / "toy" / "preprocessed.h5ad", "w") as fh:
        x_mb = _zeros(fh, "X", shape, "f4") / mb  # 763 MB: every request above the floor
        counts_mb = _zeros(fh, "layers/counts", shape, "f8") / mb  # 1526 MB: as large as X, or larger
    cfg = {**_config(raw), "methods": ["sparda", "cpca", "quadro"], "quadro": {"layer": "counts"}}
    targets = [f"results/toy/{m}.h5ad" for m in cfg["methods"]]
    proc = subprocess.run(_command(tmp_path, cfg, "-n", *targets, "--rerun-triggers", "mtime"),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    mem = _requests(proc.stdout + proc.stderr)
    assert set(mem) == {"sparda", "cpca", "quadro"}, (mem, proc.stdout[-3000:])  # preprocessed.h5ad is up to date
    for rule in ("sparda", "cpca"):  # X only (the annotations: none here)
        expected = MEMORY[rule].per_input_mb * x_mb
        assert abs(mem[rule] - expected) <= 2, (rule, mem[rule], expected)
        assert mem[rule] < MEMORY[rule].per_input_mb * x_mb + counts_mb  # what the old request added
    expected = MEMORY["quadro"].per_input_mb * (x_mb + counts_mb)  # its config reads the counts
    assert abs(mem["quadro"] - expected) <= 2, (mem["quadro"], expected)

    proc = subprocess.run(_command(tmp_path, cfg, "-n", "results/toy/preprocessed.h5ad", "--forcerun", "preprocess"),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    mem = _requests(proc.stdout + proc.stderr)
    expected = MEMORY["preprocess"].per_input_mb * raw_mb  # X and the raw input's layer
    assert abs(mem["preprocess"] - expected) <= 2, (mem, expected)


def _wait_for(condition, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.1)


def _script_jobs(workdir: Path, rule: str) -> list[int]:
    """Pids of the processes running ``rule``'s script in ``workdir`` (Linux /proc)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.path.realpath(proc / "cwd")
        except (OSError, ValueError):
            continue
        if proc.name.isdigit() and cwd == os.path.realpath(workdir) and f".{rule}.py" in cmdline \
                and "python" in cmdline and "/bin/sh" not in cmdline:
            pids.append(int(proc.name))
    return pids


def test_a_job_that_outlived_its_run_never_overwrites_the_next_runs_result(tmp_path):
    """Kill only the main snakemake process while SPARDA runs (its job keeps running), change a
    parameter, unlock, rerun: the run refuses while the old job is alive, naming it; once it is
    gone, the rerun's merged file holds the new parameter's result."""
    import anndata as ad

    make_counts().write_h5ad(tmp_path / "toy.h5ad")
    cfg = {**_config(tmp_path / "toy.h5ad"), "methods": ["sparda"]}
    # slow enough to be caught running before it ends (it is then stopped, and killed below)
    cfg["sparda"] = {"n_permutations": 100000, "test": "permute"}
    cmd = _command(tmp_path, cfg, "--cores", "1")
    first = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    orphans: list[int] = []
    try:
        records = tmp_path / ".snakemake" / "scontrast_jobs"
        # running, and past the point where it records itself (its imports can take seconds)
        _wait_for(lambda: (bool(_script_jobs(tmp_path, "sparda")) and any(records.glob("*")))
                  or first.poll() is not None)
        orphans = _script_jobs(tmp_path, "sparda")
        assert len(orphans) == 1, "the sparda job was never seen running"
        assert [r.name for r in records.glob("*")] == [f"{socket.gethostname()}.{orphans[0]}"]
        os.kill(first.pid, signal.SIGKILL)  # the main process only: its job goes on
        first.wait()
        # stopped, the job stays alive (and unfinished) until the test kills it, however fast the machine
        os.kill(orphans[0], signal.SIGSTOP)

        cfg["sparda"]["n_permutations"] = 19
        assert subprocess.run(_command(tmp_path, cfg, "--unlock"), capture_output=True, timeout=300).returncode == 0
        second = subprocess.run(_command(tmp_path, cfg, "--cores", "1"), capture_output=True, text=True, timeout=300)
        output = second.stdout + second.stderr
        assert Path(f"/proc/{orphans[0]}").exists(), "the old job ended before the rerun: nothing was tested"
        assert second.returncode != 0, "a run started while a job of the killed run was still going"
        assert ("a job of an earlier run of this directory is still running (rule sparda [dataset=toy], "
                f"pid {orphans[0]}, started") in output, output[-3000:]
        assert f"(kill {orphans[0]}), then rerun" in output
        assert not (tmp_path / "results/toy/scontrast.h5ad").exists()
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
        for pid in orphans:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    _wait_for(lambda: not any(Path(f"/proc/{pid}").exists() for pid in orphans), 30)
    third = subprocess.run(_command(tmp_path, cfg, "--cores", "1"), capture_output=True, text=True, timeout=300)
    assert third.returncode == 0, third.stderr[-3000:]
    merged = ad.read_h5ad(tmp_path / "results/toy/scontrast.h5ad")
    assert merged.uns["sparda"]["params"]["n_permutations"] == 19
    assert not list((tmp_path / ".snakemake" / "scontrast_jobs").glob("*"))  # the killed job's record went too
