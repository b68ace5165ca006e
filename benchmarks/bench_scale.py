"""Scale benchmark: the whole workflow on 50,000 cells x 20,000 genes of sparse NB counts.

Run:  .venv/bin/python benchmarks/bench_scale.py [--cells 50000] [--genes 20000] [--workdir DIR]
Output is printed; the committed copy of a full run is benchmarks/results/bench_scale.txt.

1. Simulates UMI counts in blocks of cells (never a dense cells x genes array): gene means
   log-normal, cell size factors log-normal, negative-binomial counts (dispersion 0.2 + 1/mu
   style over-dispersion via a gamma-Poisson mixture), 3% of genes "MT-" genes; the target
   half has 200 genes with log fold changes and a 40-gene co-expression program the
   background lacks (a covariance difference with no mean shift).
2. Writes the .h5ad (CSR, float32) and a config that runs every method on it, runs
   ``snakemake --cores 2`` in a work directory, and prints each rule's wall time and peak
   memory from its ``benchmark:`` file (max_rss), against the 8 GB limit, and the extra
   memory a dense copy of X would need (a rule that densified X in float64 alone would pass
   the limit: 7.6 GB at 50,000 x 20,000).

``--report-only`` re-reads the benchmark files of a finished work directory.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp
import yaml

REPO = Path(__file__).resolve().parents[1]
LIMIT_MB = 8 * 1024


def simulate_counts(n_cells: int, n_genes: int, seed: int = 0, block: int = 2000) -> ad.AnnData:
    """Sparse negative-binomial UMI counts of two groups.

    Returns
    -------
    AnnData, X : csr_matrix (n_cells, n_genes) float32 counts; obs['group'] in
    {'target', 'background'} (first half target); var_names 'MT-...' for 3% of genes.
    """
    rng = np.random.default_rng(seed)
    log_mu = rng.normal(-3.0, 1.6, n_genes)
    de = rng.choice(n_genes, 200, replace=False)
    lfc = np.zeros(n_genes)
    lfc[de] = rng.normal(0.0, 1.0, de.size)
    program = rng.choice(np.setdiff1d(np.arange(n_genes), de), 40, replace=False)
    inv_disp = 5.0  # gamma shape of the gamma-Poisson mixture: NB with dispersion 1/5
    n_target = n_cells // 2
    blocks = []
    for start in range(0, n_cells, block):
        stop = min(start + block, n_cells)
        is_t = np.arange(start, stop) < n_target
        size = rng.lognormal(0.0, 0.4, stop - start)[:, None]
        mu = size * np.exp(log_mu + np.where(is_t[:, None], lfc, 0.0))
        # the program: one shared log-normal factor per target cell on 40 genes (variance, not mean:
        # the factor has mean 1 on the natural scale)
        factor = np.exp(rng.normal(-0.5, 1.0, (stop - start, 1)))
        mu[:, program] *= np.where(is_t[:, None], factor, 1.0)
        lam = rng.gamma(inv_disp, mu / inv_disp)
        counts = rng.poisson(lam).astype(np.float32)
        blocks.append(sp.csr_matrix(counts))
    X = sp.vstack(blocks, format="csr")
    names = [f"MT-G{i}" if i < int(0.03 * n_genes) else f"G{i}" for i in range(n_genes)]
    obs = pd.DataFrame({"group": pd.Categorical(np.where(np.arange(n_cells) < n_target, "target", "background"))},
                       index=[f"cell{i}" for i in range(n_cells)])
    return ad.AnnData(X=X, obs=obs, var=pd.DataFrame(index=names))


def scale_config(h5ad: Path) -> dict:
    """Every method on the simulated data, with the shipped config's parameters."""
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg["datasets"] = {"scale": {"path": str(h5ad), "groupby": "group", "target": ["target"],
                                 "background": ["background"], "counts": "raw"}}
    return cfg


def read_benchmarks(workdir: Path, dataset: str) -> list[tuple[str, float, float]]:
    """(rule, wall s, max_rss MB) of every benchmark file of the dataset, in run order."""
    rows = []
    for f in (workdir / "results" / dataset / "benchmarks").glob("*.tsv"):
        with f.open() as fh:
            rec = next(csv.DictReader(fh, delimiter="\t"))
        rss = float(rec["max_rss"]) if rec["max_rss"] not in ("-", "NA", "") else float("nan")
        rows.append((f.stem, float(rec["s"]), rss, f.stat().st_mtime))
    return [r[:3] for r in sorted(rows, key=lambda r: r[3])]


def report(work: Path, shape: tuple[int, int], nnz: int) -> float:
    """Print each rule's wall time and peak memory; returns the largest peak (MB)."""
    csr_mb = nnz * 8 / 2**20  # float32 values + int32 column indices
    print(f"X in memory as CSR: {csr_mb:.0f} MB; a dense copy would add {shape[0] * shape[1] * 4 / 2**20:.0f} MB "
          f"(float32) or {shape[0] * shape[1] * 8 / 2**20:.0f} MB (float64)")
    print(f"{'rule':<18}{'wall s':>10}{'peak MB':>10}{'peak / CSR X':>14}   under 8 GB")
    worst = 0.0
    for rule, s, rss in read_benchmarks(work, "scale"):
        worst = max(worst, rss)
        print(f"{rule:<18}{s:>10.1f}{rss:>10.0f}{rss / csr_mb:>14.1f}   {rss < LIMIT_MB}")
    print(f"largest peak: {worst:.0f} MB ({'under' if worst < LIMIT_MB else 'OVER'} the 8 GB limit)")
    return worst


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cells", type=int, default=50_000)
    p.add_argument("--genes", type=int, default=20_000)
    p.add_argument("--workdir", type=Path, default=Path("/tmp/scontrast_scale"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--report-only", action="store_true", help="re-read a finished work directory")
    args = p.parse_args(argv)
    work = args.workdir
    if args.report_only:
        X = ad.read_h5ad(work / "scale.h5ad", backed="r").X
        report(work, X.shape, X.nnz if hasattr(X, "nnz") else int(X.group["data"].shape[0]))
        return 0
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)

    t0 = time.perf_counter()
    adata = simulate_counts(args.cells, args.genes, seed=args.seed)
    h5ad = work / "scale.h5ad"
    adata.write_h5ad(h5ad)
    nnz, shape = adata.X.nnz, adata.shape
    del adata
    dense_mb = shape[0] * shape[1] * 4 / 2**20
    print(f"scontrast scale benchmark: {shape[0]} cells x {shape[1]} genes, density {nnz / (shape[0] * shape[1]):.3f}, "
          f"{h5ad.stat().st_size / 2**20:.0f} MB on disk; simulated and written in {time.perf_counter() - t0:.0f} s")
    print(f"dense float32 copy of X would take {dense_mb:.0f} MB; memory limit {LIMIT_MB} MB; "
          f"{os.cpu_count()} CPUs, load average at start {os.getloadavg()[0]:.1f}")

    (work / "config.yaml").write_text(yaml.safe_dump(scale_config(h5ad)))
    snakemake = str(Path(sys.executable).parent / "snakemake")
    t0 = time.perf_counter()
    proc = subprocess.run([snakemake, "-s", str(REPO / "Snakefile"), "-d", str(work), "--configfile",
                           str(work / "config.yaml"), "--cores", "2"], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    (work / "snakemake.log").write_text(proc.stdout + proc.stderr)
    print(f"snakemake --cores 2: exit {proc.returncode} after {wall / 60:.1f} min "
          f"(load average at end {os.getloadavg()[0]:.1f})")
    report(work, shape, nnz)
    if proc.returncode != 0:
        print(proc.stderr[-4000:])
    summary = work / "results" / "scale" / "summary.tsv"
    if summary.exists():
        print("\nsummary.tsv:\n" + summary.read_text())
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
