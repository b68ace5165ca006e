"""The SLURM memory request of every rule at bench_scale's sizes, against the peak each rule takes.

Run (after a bench_scale run left its work directory, every rule's output in it):
    PYTHONPATH=. .venv/bin/python -m benchmarks.slurm_requests --workdir /tmp/scale50k \
        [--measure <clone to run the jobs with>] [--old-repo <a clone sizing jobs by per_input_mb>] [--out FILE]

1. The requests at the work directory's size are the workflow's own: for each rule, a dry run
   ``snakemake -n --forcerun <rule> --until <rule>`` (its inputs exist, so its ``mem_mb`` is
   evaluated, as SLURM would get it) with this repository's Snakefile, and with ``--old-repo``'s.
2. The requests at 200,000 cells x 30,000 genes are computed from the same inputs' sizes
   (scontrast._workflow.input_sizes) scaled to that size: X and every layer to the X recorded
   in benchmarks/results/bench_scale_200k.txt (the same non-zeros in X and the counts), the rest
   (obs, var, uns, the deltas' entries: a few MB) by the ratio of cells; then the new request is
   scontrast._workflow.memory_request_mb with the rule's MEMORY entry, the old one per_input_mb x X +
   everything else (per_input_mb parsed from --old-repo's rule files).
3. The peaks: those bench_scale recorded at both sizes (Snakemake's benchmark files: RSS sampled
   every second for 30 s, then every 30 s, so a longer job's peak can be missed), and with
   ``--measure`` each rule rerun alone in the work directory, its exact peak RSS (the kernel's
   high-water mark of the job's processes, ``wait4``; the snakemake process counts too, about
   0.25 GB, which the small rules' peaks are).

With ``--at-size`` (and ``--measure``): each rule's own request at the work directory's size (e.g. a
200k one) against its exact peak there, nothing scaled; with a replicate declared (``bench_scale
--donors``) the pseudobulk rules too.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import h5py
import yaml

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
MB = 2**20
NODE_MB = 14000  # what a 16 GB node leaves a job, with room
RULES = ["preprocess", "sparda", "quadro", "cpca", "pcpca", "latent_features", "fangs", "collect", "summary",
         "preprocess_figure", "sparda_figure", "quadro_figure", "cpca_figure", "pcpca_figure", "fangs_figure"]


def _rules(work: Path) -> list[str]:
    """The rules of ``work``'s workflow in an order where each rerun finds its inputs up to date: with a
    replicate declared (bench_scale --donors) pseudobulk goes before collect (which would otherwise
    rerun it, as preprocess's rerun made it outdated, and count its peak as collect's), its figure last."""
    cfg = yaml.safe_load((work / "config.yaml").read_text())
    if not any(ds.get("replicate") is not None for ds in cfg["datasets"].values()):
        return list(RULES)
    rules = list(RULES)
    rules.insert(rules.index("collect"), "pseudobulk")
    return rules + ["pseudobulk_figure"]


def recorded_peaks(path: Path) -> tuple[dict[str, float], float, int]:
    """{rule: peak MB}, X's CSR MB and the cells of a bench_scale report."""
    text = path.read_text()
    x_mb = float(re.search(r"X as CSR \(float32 values, int32 indices\): (\d+) MB", text).group(1))
    cells = int(re.search(r"benchmark: (\d+) cells", text).group(1))
    peaks = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[-1].startswith("X)") and parts[0].replace("_", "").isalpha():
            peaks[parts[0]] = float(parts[3])
    return peaks, x_mb, cells


def _snakemake(repo: Path, work: Path, *args: str, env=None) -> subprocess.CompletedProcess:
    exe = str(Path(sys.executable).parent / "snakemake")
    return subprocess.run([exe, "-s", str(repo / "Snakefile"), "-d", str(work), "--configfile",
                           str(work / "config.yaml"), *args], capture_output=True, text=True, env=env)


def dry_run(repo: Path, work: Path, rule: str) -> tuple[int, list[str]]:
    """(mem_mb, input paths) of ``rule``'s job as the workflow at ``repo`` would submit it."""
    proc = _snakemake(repo, work, "-n", "--forcerun", rule, "--until", rule)
    if proc.returncode != 0:
        raise RuntimeError(f"{rule}: dry run failed\n{proc.stderr[-2000:]}")
    text = proc.stdout + proc.stderr
    block = re.search(rf"(?:local)?rule {rule}:\n(.*?)(?:\n\n|\Z)", text, re.S).group(1)
    inputs = re.search(r"input: (.*)", block).group(1).split(", ")
    return int(re.search(r"mem_mb=(\d+)", block).group(1)), inputs


def measure(repo: Path, work: Path, rule: str) -> tuple[float, float, float]:
    """Rerun ``rule`` alone with the code of ``repo``; (exact peak RSS MB of its processes, wall s, load before)."""
    load = os.getloadavg()[0]
    exe = str(Path(sys.executable).parent / "snakemake")
    env = {**os.environ, "PYTHONPATH": str(repo.resolve() / "src")}  # the jobs' scontrast: that of repo
    t0 = time.perf_counter()
    proc = subprocess.Popen([exe, "-s", str(repo / "Snakefile"), "-d", str(work), "--configfile",
                             str(work / "config.yaml"), "--cores", "2", "--forcerun", rule, "--until", rule],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{rule}: exit {proc.returncode}")
    return usage.ru_maxrss / 1024, time.perf_counter() - t0, load  # kB on Linux


def old_factors(repo: Path) -> dict[str, float]:
    """{rule: per_input_mb} of the old rule files (``mem_mb=mem_mb(per_input_mb=...)``)."""
    out = {}
    for smk in (repo / "workflow" / "rules").glob("*.smk"):
        for block in re.split(r"\nrule ", "\n" + smk.read_text()):
            name = re.match(r"(\w+):", block)
            per = re.search(r"mem_mb=mem_mb\(per_input_mb=([\d.]+)", block)
            if name and per:
                out[name.group(1)] = float(per.group(1))
    return out


def scaled(sizes: dict, matrix: float, rest: float) -> dict:
    """``sizes`` (scontrast._workflow.input_sizes) with X and the layers times ``matrix``, the rest times ``rest``."""
    if sizes["whole"]:
        return {**sizes, "total": sizes["total"] * matrix}
    layers = {k: v * matrix for k, v in sizes["layers"].items()}
    other = sizes["total"] - sizes["X"] - sum(sizes["layers"].values())
    return {"X": sizes["X"] * matrix, "layers": layers, "total": sizes["X"] * matrix + sum(layers.values()) + other * rest,
            "whole": False}


def new_request(rule: str, sizes: list[dict], cfg: dict) -> int:
    from scontrast._workflow import memory_request_mb, memory_spec
    from scontrast.merge_files import used_layers

    spec = memory_spec(rule)
    layers = used_layers({k: v for k, v in cfg.get(rule, {}).items() if k != "plot"}) if spec.layers == "config" \
        else spec.layers
    return memory_request_mb(sizes, spec.per_input_mb, x=spec.x, layers=layers)


def old_request(per_input_mb: float, sizes: list[dict], floor: float = 2000) -> int:
    """The request before: per_input_mb x X + everything else of the inputs (a7241b9's common.smk)."""
    x = sum(s["total"] if s["whole"] else s["X"] for s in sizes) / MB
    rest = sum(0 if s["whole"] else s["total"] - s["X"] for s in sizes) / MB
    return int(max(floor, per_input_mb * x + rest))


def _at_size(work: Path, repo: Path, say, lines: list, out: Path | None) -> int:
    """Each rule's request (dry run) against its exact peak (rerun alone with ``repo``'s code) at ``work``'s size."""
    from scontrast._workflow import input_sizes

    x = input_sizes(work / "scale.h5ad")["X"] / MB
    say(f"# {time.strftime('%Y-%m-%d %H:%M')}; {os.cpu_count()} CPUs; work directory {work} (X as CSR {x:.0f} MB); "
        f"each rule rerun alone with the code of {repo}")
    rows = []
    for rule in _rules(work):
        request, inputs = dry_run(REPO, work, rule)
        peak, wall, load = measure(repo, work, rule)
        rows.append((rule, request, peak))
        say(f"#   {rule}: inputs {', '.join(inputs)}; exact peak {peak:.0f} MB ({wall:.0f} s, load {load:.1f} before)")
    say()
    say(f"{'rule':<18}{'request':>9}{'peak':>8}{'request/peak':>14}{'peak/X':>8}  (MB)")
    for rule, request, peak in rows:
        say(f"{rule:<18}{request:>9}{peak:>8.0f}{request / peak:>14.2f}{peak / x:>8.2f}")
    under = [rule for rule, request, peak in rows if request < 1.5 * peak]
    over = [rule for rule, request, _ in rows if request > NODE_MB]
    say(f"requests under 1.5x the exact peak: {under or 'none'}; requests above {NODE_MB} MB: {over or 'none'}")
    if out:
        out.write_text("\n".join(lines) + "\n")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, required=True, help="a finished bench_scale work directory")
    p.add_argument("--old-repo", type=Path, default=None, help="a clone whose rules size jobs by per_input_mb, for its requests")
    p.add_argument("--measure", type=Path, default=None, metavar="REPO",
                   help="rerun each rule alone with the code of REPO (a clone) for its exact peak")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--at-size", action="store_true",
                   help="with --measure: each rule's request against its exact peak at the work directory's own size "
                        "(e.g. a 200k one), nothing scaled or compared with the recorded reports")
    args = p.parse_args(argv)
    from scontrast._workflow import input_sizes

    work = args.workdir.resolve()
    lines = []

    def say(text=""):
        print(text, flush=True)
        lines.append(text)

    if args.at_size:
        if args.measure is None:
            p.error("--at-size needs --measure")
        return _at_size(work, args.measure, say, lines, args.out)

    cfg = yaml.safe_load((work / "config.yaml").read_text())
    x50 = input_sizes(work / "scale.h5ad")["X"] / MB
    with h5py.File(work / "scale.h5ad", "r") as fh:
        cells50 = fh["obs"][fh["obs"].attrs.get("_index", "_index")].shape[0]
    peaks50, x50_rec, _ = recorded_peaks(RESULTS / "bench_scale_50k.txt")
    peaks200, x200, cells200 = recorded_peaks(RESULTS / "bench_scale_200k.txt")
    say(f"# {time.strftime('%Y-%m-%d %H:%M')}; {os.cpu_count()} CPUs; work directory {work} "
        f"(X as CSR {x50:.0f} MB; bench_scale_50k.txt's {x50_rec:.0f} MB); 200k: X {x200:.0f} MB "
        f"(bench_scale_200k.txt), {cells200} cells")
    old = old_factors(args.old_repo) if args.old_repo else {}
    rows = []
    for rule in RULES:
        new50, inputs = dry_run(REPO, work, rule)
        old50 = dry_run(args.old_repo, work, rule)[0] if args.old_repo else None
        sizes = [input_sizes(work / path) for path in inputs]
        sizes200 = [scaled(s, x200 / x50, cells200 / cells50) for s in sizes]
        new200 = new_request(rule, sizes200, cfg)
        old200 = old_request(old[rule], sizes200) if rule in old else None
        exact = measure(args.measure, work, rule) if args.measure else None
        rows.append((rule, old50, new50, old200, new200, exact))
        say(f"#   {rule}: inputs {', '.join(inputs)}; "
            + (f"exact peak {exact[0]:.0f} MB ({exact[1]:.0f} s, load {exact[2]:.1f} before)" if exact else ""))
    say()
    say(f"{'rule':<18}{'old 50k':>9}{'new 50k':>9}{'peak 50k':>10}{'new/peak':>9}"
        f"{'old 200k':>10}{'new 200k':>10}{'peak 200k':>10}{'new/peak':>9}  (MB; peak 50k: max of recorded and exact)")
    worst = {"under_1.5": [], "over_node": []}
    for rule, old50, new50, old200, new200, exact in rows:
        p50 = max(peaks50.get(rule, 0.0), exact[0] if exact else 0.0)
        p200 = peaks200.get(rule, float("nan"))
        say(f"{rule:<18}{old50 if old50 is not None else '-':>9}{new50:>9}{p50:>10.0f}{new50 / p50:>9.2f}"
            f"{old200 if old200 is not None else '-':>10}{new200:>10}{p200:>10.0f}{new200 / p200:>9.2f}")
        if new50 < 1.5 * p50 or new200 < 1.5 * p200:
            worst["under_1.5"].append(rule)
        if new200 > NODE_MB:
            worst["over_node"].append(rule)
    say(f"requests under 1.5x a measured peak: {worst['under_1.5'] or 'none'}; requests above {NODE_MB} MB at "
        f"200k: {worst['over_node'] or 'none'}")
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
