"""Runs of the workflow as a whole: one live run per directory, memory requests from the data read."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

from conftest import REPO, make_counts

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
LIVE_RUN = Path(".snakemake") / "scontrast_live_run"

pytestmark = pytest.mark.workflow


def _command(workdir: Path, cfg: dict, *args: str) -> list[str]:
    (workdir / "config.yaml").write_text(yaml.safe_dump(cfg))
    return [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--configfile",
            str(workdir / "config.yaml"), *args]


def _config(path: Path) -> dict:
    return {"datasets": {"toy": {"path": str(path), "groupby": "condition", "target": ["disease"],
                                 "background": ["healthy"], "counts": "raw",
                                 "preprocess": {"min_genes": 1, "min_cells": 1, "n_top_genes": 20,
                                                "min_cells_per_group": 5}}},
            "methods": ["cpca"]}


def test_a_second_run_stops_while_the_first_is_live(tmp_path):
    """`--unlock` during a live run removes snakemake's lock; the workflow still refuses a second run."""
    make_counts().write_h5ad(tmp_path / "toy.h5ad")
    cmd = _command(tmp_path, _config(tmp_path / "toy.h5ad"), "--cores", "1")
    first = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    live = tmp_path / LIVE_RUN
    try:
        deadline = time.monotonic() + 300
        while not live.exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert live.exists(), "the first run never reached its jobs"
        assert live.read_text().split("\t")[0] == str(first.pid)
        assert subprocess.run([*cmd, "--unlock"], capture_output=True, timeout=300).returncode == 0
        second = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert first.poll() is None, "the first run ended before the second one started: nothing to detect"
        output = second.stdout + second.stderr
        assert second.returncode != 0
        assert f"another snakemake run of this directory is live (pid {first.pid} on" in output
        assert "never --unlock a live run" in output
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    # the killed run leaves its pid behind; a dead pid does not stop the resume, which then cleans up
    assert live.exists()
    subprocess.run([*cmd, "--unlock"], capture_output=True, timeout=300)
    third = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert third.returncode == 0, third.stderr[-3000:]
    assert (tmp_path / "results/toy/scontrast.h5ad").exists()
    assert not live.exists()


def test_memory_request_follows_the_uncompressed_matrix(tmp_path):
    """A well-compressed X asks for memory by what it takes once read, not by its size on disk."""
    path = tmp_path / "zeros.h5ad"
    shape = (4000, 15000)  # float32: 228.9 MiB once read, a few hundred KB on disk
    with h5py.File(path, "w") as fh:
        ds = fh.create_dataset("X", shape=shape, dtype="f4", chunks=(500, shape[1]), compression="gzip")
        for start in range(0, shape[0], 500):
            ds[start:start + 500] = np.zeros((500, shape[1]), dtype="f4")
    assert path.stat().st_size < 2**20
    proc = subprocess.run(_command(tmp_path, _config(path), "-n", "results/toy/preprocessed.h5ad"),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    mem = [int(m) for m in re.findall(r"mem_mb=(\d+)", proc.stdout + proc.stderr)]
    expected = 12 * np.prod(shape) * 4 / 2**20  # rule preprocess: mem_mb(per_input_mb=12), floor 2000
    assert mem and all(abs(m - expected) <= 2 for m in mem), (mem, expected)
