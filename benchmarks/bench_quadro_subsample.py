"""What ``quadro.max_cells`` (each fit on a stratified subsample) changes, and what it saves.

Run (from the repository root), one setting per process so that the peak memory is its own:
    .venv/bin/python -m benchmarks.bench_quadro_subsample H5AD MAX_CELLS [--save DIR] [--compare DIR/None.npz]
    .venv/bin/python -m benchmarks.bench_quadro_subsample --real FRACTION
``H5AD`` is a preprocessed contrast (``results/<dataset>/preprocessed.h5ad``; X only is read, as the rule
does), ``MAX_CELLS`` an integer or ``None``. Prints ``tl.quadro``'s wall and CPU time (all threads),
the process's peak RSS and its ratio to the CSR size of X, the load, and the answer: cross-validated
AUC and balanced error, the final model's genes and lambdas; ``--save`` keeps the held-out scores and
genes, ``--compare`` a saved run's to set against (score correlation, genes in common).
The workflow's settings (config.yaml's quadro block, seed 0, 2 threads). ``--real``: the real pbmc3k
contrasts of ``benchmarks.bench_quadro_real`` (at most 2,700 cells, below the default max_cells) with all
cells and with max_cells = FRACTION x cells, the same effect at the same ratio as 10,000 of 40,000
training cells. Committed output: benchmarks/results/bench_quadro_subsample.txt.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]


def _csr_mb(X) -> float:
    return (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 2**20


def real(fraction: float) -> None:
    """pbmc3k contrasts with all cells and with max_cells = fraction x cells (bench_quadro_real's settings)."""
    from benchmarks.bench_quadro_real import pbmc3k, run_quadro

    for c in pbmc3k():
        n = int(c["y"].size)
        full = run_quadro(c, n_jobs=2, params={"max_cells": None})
        sub = run_quadro(c, n_jobs=2, params={"max_cells": max(50, int(fraction * n))})
        r = np.corrcoef(full["score"], sub["score"])[0, 1]
        same = np.mean((full["score"] > 0) == (sub["score"] > 0))
        print(f"{c['name']} ({n} cells, {int(c['y'].sum())} target): max_cells None -> {max(50, int(fraction * n))}: "
              f"AUC {full['auc']:.3f} -> {sub['auc']:.3f}, balanced error {full['balanced_error']:.3f} -> "
              f"{sub['balanced_error']:.3f}, pairs {full['n_pairs']} -> {sub['n_pairs']}, CPU {full['cpu']:.1f} -> "
              f"{sub['cpu']:.1f} s; held-out scores correlate {r:.3f}, same call on {same:.1%} of cells", flush=True)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("h5ad", nargs="?")
    p.add_argument("max_cells", nargs="?")
    p.add_argument("--real", type=float, default=None, metavar="FRACTION")
    p.add_argument("--save", type=Path, default=None)
    p.add_argument("--compare", type=Path, default=None)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    if args.real is not None:
        real(args.real)
        return
    from scontrast import tl
    from scontrast.merge_files import read_merged, used_layers

    cfg = {k: v for k, v in yaml.safe_load((REPO / "config.yaml").read_text())["quadro"].items() if k != "plot"}
    cfg["max_cells"] = None if args.max_cells == "None" else int(args.max_cells)
    adata = read_merged(args.h5ad, layers=used_layers(cfg))
    load0, t0, c0 = os.getloadavg()[0], time.perf_counter(), time.process_time()
    tl.quadro(adata, **cfg, random_state=0, n_jobs=args.threads)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    q = adata.uns["quadro"]
    genes = [str(g) for g in q["genes"]]
    print(f"{Path(args.h5ad).name} {adata.n_obs} cells, max_cells={args.max_cells}: wall {wall:.1f} s, CPU {cpu:.1f} s, "
          f"peak RSS {peak:.0f} MB = {peak / _csr_mb(adata.X):.2f}x X's CSR ({_csr_mb(adata.X):.0f} MB), "
          f"load {load0:.1f} -> {os.getloadavg()[0]:.1f}")
    print(f"  AUC {q['auc']:.4f}, balanced error {q['balanced_error']:.4f}, lambda1 {q['lambda1']:.3g}, "
          f"lambda2 {q['lambda2']:.3g}, outer lambdas {list(np.round(q['fold_lambda1'], 3))}, {len(genes)} genes, "
          f"{len(q['interactions']['weight'])} pairs; subsample {dict(q.get('subsample', {}))}")
    score = adata.obs["quadro_score"].to_numpy()
    if args.compare is not None:
        ref = np.load(args.compare, allow_pickle=False)
        common = len(set(genes) & set(ref["genes"].tolist()))
        r = np.corrcoef(score, ref["score"])[0, 1]
        agree = np.mean((score > 0) == (ref["score"] > 0))
        print(f"  vs {args.compare.name}: held-out scores correlate {r:.4f}, same call on {agree:.2%} of cells; "
              f"final genes in common {common} of {len(genes)} / {len(ref['genes'])}")
    if args.save is not None:
        args.save.mkdir(parents=True, exist_ok=True)
        np.savez(args.save / f"{args.max_cells}.npz", score=score, genes=np.array(genes, dtype=str))


if __name__ == "__main__":
    main()
