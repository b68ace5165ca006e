"""The workflow on a real single-node SLURM cluster, through workflow/profiles/slurm.

A cluster (munge, MariaDB, slurmdbd, slurmctld, slurmd; see tests/cluster/slurm.py) is started in
a temporary directory for this module and stopped at its end. The default target of
tests/data/tiny_config.yaml (whatever methods it lists) runs twice: locally, and with the SLURM
profile plus a stand-in for the user's own profile (account and partition). The tests check that
every job of the local run went through sbatch with its rule's resources (sacct), that the
outputs are the same, that the SLURM logs land under logs/slurm, and that a job that fails for
lack of memory is resubmitted with more. Each SLURM job costs tens of seconds of polling, hence the
tiny config.

When SLURM cannot start here (no root, packages missing, a daemon failing) the module is skipped
with the failing step and its stderr; set SCONTRAST_REQUIRE_SLURM=1 to make that a failure
instead (for machines where `bash .ci/install_slurm.sh` is known to work).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import yaml

from cluster.slurm import RUN_LINK, ClusterUnavailable, SlurmCluster, process_alive
from conftest import REPO

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
PROFILE = REPO / "workflow" / "profiles" / "slurm"
RETRY_SNAKEFILE = Path(__file__).parent / "cluster" / "retry.smk"
# Same machine, same code, same seed, same thread counts: results should agree to the last bit;
# the tolerance only forgives a different summation order inside BLAS.
RTOL, ATOL = 1e-9, 1e-12
# uns entries that measure the run rather than the data (wall-clock timings).
VOLATILE_UNS = re.compile(r"^(timings?|elapsed\w*|wall_?time\w*|\w+_seconds)$")
# Polling: the profile keeps the plugin's defaults (40 s before the first check), fine on a real
# cluster; here jobs take seconds, so check early and often.
FAST_POLL = ("--slurm-init-seconds-before-status-checks", "2", "--seconds-between-status-checks", "2")
# A run that polls a broken sacct waits forever: stop it well inside CI's limit.
SLURM_RUN_TIMEOUT = 1200

pytestmark = pytest.mark.workflow


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def cluster():
    root = Path(tempfile.mkdtemp(prefix="scontrast-slurm-"))
    cl = SlurmCluster(root)
    try:
        cl.start()
    except ClusterUnavailable as exc:
        shutil.rmtree(root, ignore_errors=True)
        if os.environ.get("SCONTRAST_REQUIRE_SLURM") == "1":
            pytest.fail(f"SCONTRAST_REQUIRE_SLURM=1 but {exc}", pytrace=False)
        pytest.skip(str(exc))
    pids = cl.pids()
    ports = dict(cl.ports)
    try:
        yield cl
    finally:
        cl.stop()
        logs = {p.name: p.read_text(errors="replace")[-3000:] for p in (root / "log").glob("*")}
        shutil.rmtree(root, ignore_errors=True)
        # Stopping must leave nothing behind, so that the next run starts clean.
        alive = {name: pid for name, pid in pids.items() if process_alive(pid) and str(root) in _proc_text(pid)}
        busy = [port for port in ports.values() if not _port_free(port)]
        assert not alive and not busy and not RUN_LINK.is_symlink(), (
            f"cluster not fully stopped: alive={alive} busy ports={busy} "
            f"{RUN_LINK} left={RUN_LINK.is_symlink()}\n{logs}")


@pytest.fixture(scope="module")
def user_profile(cluster, tmp_path_factory):
    """What a user keeps in their own profile: account and partition of their cluster."""
    d = tmp_path_factory.mktemp("user_profile")
    (d / "config.yaml").write_text(yaml.safe_dump(
        {"default-resources": [f"slurm_account={cluster.account}", f"slurm_partition={cluster.partition}"]}))
    return d


@pytest.fixture(scope="module")
def runs(cluster, user_profile, tmp_path_factory):
    """The tiny config's default target, locally and on SLURM (at the same time: the SLURM run
    mostly waits for its polls)."""
    cfg = yaml.safe_load((REPO / "tests" / "data" / "tiny_config.yaml").read_text())
    for ds in cfg["datasets"].values():
        ds["path"] = str(REPO / ds["path"])
    local, remote = tmp_path_factory.mktemp("local"), tmp_path_factory.mktemp("slurm")
    for d in (local, remote):
        (d / "config.yaml").write_text(yaml.safe_dump(cfg))
    snakefile = ["-s", str(REPO / "Snakefile")]
    # --quiet host: the job announcements the test compares (the default profile is quiet on them)
    local_proc = subprocess.Popen([SNAKEMAKE, *snakefile, "-d", str(local), "--configfile", str(local / "config.yaml"),
                                   "--cores", "2", "--quiet", "host"], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
    try:
        slurm = slurm_snakemake(cluster, user_profile, remote, *snakefile, "--configfile", str(remote / "config.yaml"))
    finally:
        local_out = local_proc.communicate(timeout=1800)[0]
    assert local_proc.returncode == 0, f"local run failed:\n{local_out[-6000:]}"
    return {"local": local, "slurm": remote, "local_out": local_out, "slurm_out": slurm}


# --------------------------------------------------------------------------- helpers
def _proc_text(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace") + \
            Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def slurm_snakemake(cluster, user_profile, workdir: Path, *args: str) -> str:
    """snakemake with the workflow's SLURM profile and the user's profile; returns its output."""
    cmd = [SNAKEMAKE, "-d", str(workdir), "--workflow-profile", str(PROFILE), "--profile", str(user_profile),
           *FAST_POLL, *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=SLURM_RUN_TIMEOUT, env=cluster.env,
                              cwd=workdir)
    except subprocess.TimeoutExpired as exc:
        partial = "".join(x.decode(errors="replace") if isinstance(x, bytes) else x or ""
                          for x in (exc.stdout, exc.stderr))
        squeue = cluster.squeue().stdout
        raise AssertionError(f"snakemake --executor slurm still running after {SLURM_RUN_TIMEOUT} s; "
                             f"queue:\n{squeue}\n{partial[-6000:]}") from None
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise AssertionError(f"snakemake --executor slurm failed:\n{out[-8000:]}")
    return out


def job_blocks(output: str) -> list[dict]:
    """The job announcements of a snakemake log, in order: rule, jobid, wildcards, threads,
    resources, and the line where the announcement starts."""
    blocks, cur = [], None
    for i, line in enumerate(output.splitlines()):
        m = re.match(r"^(local)?rule (\w+):$", line)
        if m:
            cur = {"local": bool(m.group(1)), "rule": m.group(2), "wildcards": "", "threads": 1,
                   "resources": {}, "line": i}
            blocks.append(cur)
            continue
        if cur is None or not line.startswith(" "):
            cur = None  # an announcement is the indented lines under its "rule ...:" line
            continue
        key, _, value = line.strip().partition(": ")
        if key == "jobid":
            cur["jobid"] = int(value)
        elif key == "wildcards":
            cur["wildcards"] = value
        elif key == "threads":
            cur["threads"] = int(value)
        elif key == "resources":
            cur["resources"] = dict(kv.split("=", 1) for kv in value.split(", ") if "=" in kv)
    return blocks


def submissions(output: str) -> dict[str, dict]:
    """SLURM job id -> the announcement of the Snakemake job (attempt) it was submitted for."""
    blocks = job_blocks(output)
    subs = {}
    for i, line in enumerate(output.splitlines()):
        m = re.match(r"^Job (\d+) has been submitted with SLURM jobid (\d+) \(log: (.+)\)\.$", line)
        if m:
            # the latest announcement of that Snakemake job before its submission: this attempt's
            job = [b for b in blocks if b["line"] < i and b.get("jobid") == int(m.group(1))][-1]
            subs[m.group(2)] = {**job, "slurm_log": Path(m.group(3))}
    return subs


def sacct_jobs(cluster, run_id: str) -> dict[str, dict]:
    fields = ["JobIDRaw", "JobName", "State", "ReqMem", "Timelimit", "ReqCPUS", "Comment"]
    out = cluster.sacct("-X", "-P", "-n", f"--name={run_id}", f"--format={','.join(fields)}").stdout
    rows = [dict(zip(fields, line.split("|"))) for line in out.splitlines() if line.strip()]
    return {r["JobIDRaw"]: r for r in rows}


def run_id(output: str) -> str:
    m = re.search(r"SLURM run ID: (\S+)", output)
    assert m, f"no SLURM run ID in the output:\n{output[-3000:]}"
    return m.group(1)


def slurm_minutes(limit: str) -> int:
    """sacct Timelimit ([D-]HH:MM:SS) in minutes."""
    days, _, hms = limit.rpartition("-")
    h, m, s = (int(x) for x in hms.split(":"))
    return (int(days) if days else 0) * 1440 + h * 60 + m + (s > 0)


def wildcard_values(wildcards: str) -> str:
    """'dataset=wu2020, x=1' -> 'wu2020_1', as the plugin writes them into --comment."""
    return "_".join(kv.split("=", 1)[1] for kv in wildcards.split(", ") if kv).replace("/", "_")


def assert_same(a, b, where: str) -> None:
    """Equal values: arrays, sparse matrices, frames, scalars, strings; nested dicts recursively."""
    if isinstance(a, dict) or isinstance(b, dict):
        assert isinstance(a, dict) and isinstance(b, dict), f"{where}: {type(a)} vs {type(b)}"
        ka = {k for k in a if not VOLATILE_UNS.match(str(k))}
        kb = {k for k in b if not VOLATILE_UNS.match(str(k))}
        assert ka == kb, f"{where}: keys differ: {sorted(ka ^ kb)}"
        for k in sorted(ka):
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif a is None or b is None:
        assert a is None and b is None, f"{where}: {type(a)} vs {type(b)}"
    elif isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=RTOL, atol=ATOL, obj=where)
    elif sp.issparse(a) or sp.issparse(b):
        assert sp.issparse(a) and sp.issparse(b) and a.shape == b.shape, f"{where}: sparsity or shape differ"
        assert_same(a.toarray(), b.toarray(), where)
    else:
        xa, xb = np.asarray(a), np.asarray(b)
        assert xa.shape == xb.shape, f"{where}: shape {xa.shape} vs {xb.shape}"
        if np.issubdtype(xa.dtype, np.inexact) or np.issubdtype(xb.dtype, np.inexact):
            np.testing.assert_allclose(xa, xb, rtol=RTOL, atol=ATOL, equal_nan=True, err_msg=where)
        else:
            np.testing.assert_array_equal(xa, xb, err_msg=where)


def assert_same_anndata(a: ad.AnnData, b: ad.AnnData, where: str) -> None:
    assert a.obs_names.equals(b.obs_names), f"{where}: cells differ"
    assert a.var_names.equals(b.var_names), f"{where}: genes differ"
    assert_same(a.X, b.X, f"{where}.X")
    assert_same(a.obs, b.obs, f"{where}.obs")
    assert_same(a.var, b.var, f"{where}.var")
    for slot in ("obsm", "varm", "layers", "obsp", "varp"):
        assert_same(dict(getattr(a, slot)), dict(getattr(b, slot)), f"{where}.{slot}")
    assert_same(dict(a.uns), dict(b.uns), f"{where}.uns")


# --------------------------------------------------------------------------- tests
def test_every_job_went_through_sbatch_with_its_rule_resources(runs, cluster):
    out = runs["slurm_out"]
    # Only the target rule, which does nothing, may run on the submit host.
    ran_here = {b["rule"] for b in job_blocks(out) if b["local"]}
    assert ran_here <= {"all"}, f"rules run outside SLURM: {ran_here}"
    # In a local run every job is announced as 'localrule'.
    local_jobs = Counter((b["rule"], b["wildcards"]) for b in job_blocks(runs["local_out"])
                         if b["rule"] not in ran_here)
    assert {"preprocess", "collect"} <= {rule for rule, _ in local_jobs}
    subs = submissions(out)
    assert Counter((s["rule"], s["wildcards"]) for s in subs.values()) == local_jobs, out[-4000:]

    acct = sacct_jobs(cluster, run_id(out))
    assert set(acct) == set(subs), f"sacct lists {sorted(acct)}, snakemake submitted {sorted(subs)}"
    for sid, job in subs.items():
        row, res = acct[sid], job["resources"]
        what = f"SLURM job {sid} ({job['rule']} {job['wildcards']})"
        assert row["State"] == "COMPLETED", f"{what}: {row}"
        assert row["Comment"] == f"rule_{job['rule']}_wildcards_{wildcard_values(job['wildcards'])}", what
        assert row["ReqMem"] == f"{res['mem_mb']}M", f"{what}: rule asked for {res['mem_mb']} MB, sacct {row}"
        assert slurm_minutes(row["Timelimit"]) == int(res["runtime"]), f"{what}: {row}"
        assert int(row["ReqCPUS"]) == job["threads"], f"{what}: {row}"


def test_outputs_equal_the_local_run(runs):
    local, slurm = runs["local"], runs["slurm"]
    files = sorted(p.relative_to(local) for p in (local / "results").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(slurm) for p in (slurm / "results").rglob("*") if p.is_file())
    h5ads = [f for f in files if f.suffix == ".h5ad"]
    assert {f.name for f in h5ads} >= {"preprocessed.h5ad", "scontrast.h5ad"}
    for f in h5ads:
        assert_same_anndata(ad.read_h5ad(local / f), ad.read_h5ad(slurm / f), str(f))


def test_slurm_logs_are_kept_under_logs_slurm(runs):
    subs = submissions(runs["slurm_out"])
    logdir = runs["slurm"] / "logs" / "slurm"
    for sid, job in subs.items():
        log = job["slurm_log"]
        assert log.parent.parent.parent == logdir and log.name == f"{sid}.log", log
        assert log.is_file() and f"rule {job['rule']}:" in log.read_text(), log
    # the rules' own logs stay where the local run puts them
    assert sorted(p.relative_to(runs["slurm"]) for p in (runs["slurm"] / "logs").rglob("*.log")
                  if logdir not in p.parents) == \
        sorted(p.relative_to(runs["local"]) for p in (runs["local"] / "logs").rglob("*.log"))


def test_failed_job_is_resubmitted_with_more_memory(cluster, user_profile, tmp_path):
    out = slurm_snakemake(cluster, user_profile, tmp_path, "-s", str(RETRY_SNAKEFILE))
    assert (tmp_path / "granted_mb.txt").read_text().strip() == "400"
    subs = submissions(out)
    acct = sacct_jobs(cluster, run_id(out))
    attempts = sorted(acct.values(), key=lambda r: int(r["JobIDRaw"]))
    assert [(r["State"], r["ReqMem"]) for r in attempts] == [("FAILED", "200M"), ("COMPLETED", "400M")], attempts
    assert set(subs) == set(acct)
    # the failed attempt's SLURM log is kept for the user
    failed = subs[attempts[0]["JobIDRaw"]]["slurm_log"]
    assert failed.is_file() and "needs_memory" in failed.read_text()
