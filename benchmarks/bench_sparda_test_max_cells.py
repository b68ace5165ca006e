"""SPARDA's replicate test on every cell against ``test_max_cells`` subsamples.

    PYTHONPATH=src .venv/bin/python -m benchmarks.bench_sparda_test_max_cells [--seeds 4] [--cells 1500]
        [--caps 5000 2500 1000] [--out FILE]

Paired donors (8 x 1,500 cells per group, 20 genes) with their own gene means (sd 0.3); the
target's gene 0 is shifted by ``effect`` plus each donor's own N(0, 0.3) response. For each
effect and seed, the replicate test's p-value (128 relabellings, floor 1/128) with every cell and
with caps 5000 (the default: 10,000 of the 24,000 cells), 2500 and 1000, and the seconds each took.
Committed output: benchmarks/results/bench_sparda_test_max_cells.txt.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from scontrast.sparda import SPARDA

CAPS = (5000, 2500, 1000)


def paired_donors(seed: int, effect: float, donors: int = 8, cells: int = 1500, genes: int = 20,
                  sd: float = 0.3, spread: float = 0.3):
    """Target and background cells (donors x cells each, ``genes``) and their donors' names."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0, sd, (donors, genes))
    shift = effect + rng.normal(0, spread, donors)
    donor = np.tile(np.repeat(np.arange(donors), cells), 2)
    target = np.arange(donor.size) < donors * cells
    Z = means[donor] + rng.standard_normal((donor.size, genes))
    Z[target, 0] += shift[donor[target]]
    names = np.array([f"d{i}" for i in donor])
    return Z[target], Z[~target], names[target], names[~target]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--cells", type=int, default=1500, help="cells per donor and group")
    p.add_argument("--caps", type=int, nargs="+", default=list(CAPS), help="test_max_cells values beside every cell")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    lines = []
    for effect in (0.0, 0.15, 0.3):
        for seed in range(args.seeds):
            X, Y, rx, ry = paired_donors(seed, effect, cells=args.cells)
            row = []
            for cap in [None, *args.caps]:
                t0 = time.perf_counter()
                model = SPARDA(lam=0.5, test_max_cells=cap, random_state=seed).fit(X, Y, rx, ry, paired=True)
                row.append(f"{model.pvalue_:.3f} ({time.perf_counter() - t0:.0f} s)")
            caps = " / ".join(str(c) for c in args.caps)
            lines.append(f"effect {effect} seed {seed}: all cells / {caps}: " + " | ".join(row))
            print(lines[-1], flush=True)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
