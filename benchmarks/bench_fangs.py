"""Benchmarks of the FARO loss, FANGS and the linear-Gaussian IBP sampler.

Tables, after Dahl, Johnson and Andros:

1. Time to compute one FARO loss: the linear assignment (scipy's
   Jonker-Volgenant) versus enumerating every column permutation, K = 2..10
   (paper's Table 1). The enumeration is vectorised (all permutations'
   costs summed from the K x K cost matrix in numpy chunks), i.e. a fast
   brute force; it is skipped above ``--brute-max-k``.
2. FANGS versus the draws method (paper's Table 3): expected FARO loss and
   wall time on posterior-like sample sets of increasing N, K and B.
3. The Gibbs sampler on simulated linear-Gaussian IBP data, 2,000 cells x
   10 dims x 1,000 sweeps: wall time, then FANGS vs draws on its samples and
   the FARO loss of both estimates to the true Z.

Run from the repository root: ``.venv/bin/python -m benchmarks.bench_fangs [--quick] [--n-jobs J]``;
the output is also written to ``benchmarks/results/bench_fangs[_quick].txt``.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import linear_sum_assignment

from scontrast.fangs import draws, expected_loss, fangs, faro_cost_matrix, faro_loss
from scontrast.fangs._simulate import posterior_like_samples
from scontrast.latent_features import LinearGaussianIBP, simulate_linear_gaussian

RESULTS = Path(__file__).resolve().parent / "results"


def enumerate_min(C, chunk=200_000):
    """min over all K! permutations p of sum_j C[j, p[j]] (vectorised per chunk)."""
    k = C.shape[0]
    if k == 0:
        return 0.0
    best = math.inf
    rows = np.arange(k)
    perms = itertools.permutations(range(k))
    while True:
        block = np.array(list(itertools.islice(perms, chunk)), dtype=np.intp)
        if block.size == 0:
            return best
        best = min(best, float(C[rows, block].sum(axis=1).min()))


def brute_force_faro(estimate, sample, a=1.0):
    """FARO loss by enumerating all K! column permutations."""
    return enumerate_min(faro_cost_matrix(estimate, sample, a))


def table1(ks=range(2, 11), n=100, reps=20, brute_max_k=10, rng=0):
    """Mean seconds per FARO loss: assignment vs enumeration of the K! alignments.

    Both minimise over the same K x K cost matrix; ``faro_s`` is the whole
    ``faro_loss`` call (input checks and the cost matrix included).
    """
    rng = np.random.default_rng(rng)
    rows = []
    for k in ks:
        pairs = [((rng.random((n, k)) < 0.5).astype(np.uint8), (rng.random((n, k)) < 0.5).astype(np.uint8))
                 for _ in range(reps)]
        costs = [faro_cost_matrix(e, s) for e, s in pairs]
        t = time.perf_counter()
        lap = []
        for C in costs:
            r, c = linear_sum_assignment(C)
            lap.append(C[r, c].sum())
        t_lap = (time.perf_counter() - t) / reps
        t = time.perf_counter()
        full = [faro_loss(e, s) for e, s in pairs]
        t_faro = (time.perf_counter() - t) / reps
        t_brute, agree = float("nan"), None
        if k <= brute_max_k:
            n_brute = max(1, min(reps, int(2e6 // math.factorial(k))))  # a few seconds at most per K
            t = time.perf_counter()
            brute = [enumerate_min(C) for C in costs[:n_brute]]
            t_brute = (time.perf_counter() - t) / n_brute
            agree = bool(np.allclose(brute, lap[:n_brute]) and np.allclose(full, lap))
        rows.append({"K": k, "permutations": math.factorial(k), "assignment_s": t_lap, "faro_s": t_faro,
                     "brute_force_s": t_brute, "agree": agree})
    return rows


def table3(configs, n_jobs=-1, n_iter=1000, flip=0.05, rng=0):
    """FANGS vs draws on posterior-like sample sets. configs: (N, K, B) tuples."""
    rows = []
    for i, (n, k, b) in enumerate(configs):
        truth, samples = posterior_like_samples(n, k, b, flip=flip, rng=np.random.default_rng([rng, i]))
        t = time.perf_counter()
        f = fangs(samples, n_iter=n_iter, n_jobs=n_jobs, random_state=rng)
        t_f = time.perf_counter() - t
        t = time.perf_counter()
        d = draws(samples, n_jobs=n_jobs)
        t_d = time.perf_counter() - t
        rows.append({"N": n, "K": k, "B": b, "K_range": (min(s.shape[1] for s in samples),
                                                        max(s.shape[1] for s in samples)),
                     "fangs_loss": f.expected_loss, "draws_loss": d.expected_loss,
                     "fangs_s": t_f, "draws_s": t_d, "fangs_K": f.n_features,
                     "fangs_to_truth": faro_loss(f.estimate, truth), "draws_to_truth": faro_loss(d.estimate, truth),
                     "truth_loss": expected_loss(samples, truth), "init_loss": float(f.details["initial_losses"].min()),
                     "init_s": f.timings["initialization"], "sweet_s": f.timings["sweetening"]})
    return rows


def sampler_run(n=2000, d=10, k=5, sweeps=1000, burn_in=500, thin=5, n_jobs=-1, rng=0, block_moves=4):
    """Time the Gibbs sampler on simulated data and summarise its samples."""
    gen = np.random.default_rng(rng)
    Z = (gen.random((n, k)) < gen.uniform(0.15, 0.5, size=k)).astype(np.uint8)
    X, _ = simulate_linear_gaussian(Z, d, sigma_x=0.5, sigma_a=1.0, random_state=gen)
    model = LinearGaussianIBP(n_iter=sweeps, burn_in=burn_in, thin=thin, block_moves=block_moves, n_chains=1,
                              random_state=rng)
    t = time.perf_counter()
    model.fit(X)
    t_fit = time.perf_counter() - t
    f = fangs(model.samples_, n_jobs=n_jobs, random_state=rng)
    dr = draws(model.samples_, n_jobs=n_jobs)
    ks = [s.shape[1] for s in model.samples_]
    return {"N": n, "D": d, "K_true": k, "sweeps": sweeps, "fit_s": t_fit, "sampling_s": model.timings_["sampling"],
            "compile_s": model.timings_["compile"], "B": len(ks), "K_range": (min(ks), max(ks)),
            "sigma_x_mean": float(model.sigma_x_[:, burn_in:].mean()),
            "fangs_loss": f.expected_loss, "draws_loss": dr.expected_loss, "fangs_s": f.timings["total"],
            "init_s": f.timings["initialization"], "sweet_s": f.timings["sweetening"],
            "init_loss": float(f.details["initial_losses"].min()), "block_moves": block_moves,
            "draws_s": dr.timings["total"], "fangs_K": f.n_features,
            "fangs_to_truth": faro_loss(f.estimate, Z), "draws_to_truth": faro_loss(dr.estimate, Z),
            "truth_loss": expected_loss(model.samples_, Z)}


def _fmt_table1(rows):
    out = ["Table 1 style: seconds per FARO loss, N = 100 items, density 0.5, a = 1; minimum over the",
           "K x K cost matrix by linear assignment (scipy) vs by enumerating the K! alignments (numpy,",
           "vectorised); faro_loss = the whole call (checks + cost matrix + assignment)",
           f"{'K':>3} {'K!':>10} {'assignment (s)':>15} {'enumeration (s)':>16} {'ratio':>10} "
           f"{'faro_loss (s)':>14}  agree"]
    for r in rows:
        ratio = r["brute_force_s"] / r["assignment_s"] if np.isfinite(r["brute_force_s"]) else float("nan")
        brute = f"{r['brute_force_s']:16.3e}" if np.isfinite(r["brute_force_s"]) else f"{'skipped':>16}"
        out.append(f"{r['K']:>3} {r['permutations']:>10} {r['assignment_s']:15.3e} {brute} {ratio:10.1f} "
                   f"{r['faro_s']:14.3e}  {r['agree']}")
    return out


def _fmt_table3(rows, title):
    out = [title,
           f"{'N':>5} {'K':>3} {'B':>5} {'K_b':>7} | {'E[loss] FANGS':>13} {'(init)':>9} {'draws':>9} {'ratio':>6} | "
           f"{'time FANGS':>10} {'(init':>7} {'sweet)':>7} {'draws':>8} | {'K^':>3} "
           f"{'FARO to truth: FANGS':>20} {'draws':>6} {'E[loss] truth':>13}"]
    for r in rows:
        out.append(f"{r['N']:>5} {r['K' if 'K' in r else 'K_true']:>3} {r['B']:>5} "
                   f"{r['K_range'][0]:>3}-{r['K_range'][1]:<3} | {r['fangs_loss']:13.2f} {r['init_loss']:9.2f} "
                   f"{r['draws_loss']:9.2f} "
                   f"{r['fangs_loss'] / r['draws_loss'] if r['draws_loss'] else float('nan'):6.3f} | "
                   f"{r['fangs_s']:10.2f} {r.get('init_s', float('nan')):7.2f} {r.get('sweet_s', float('nan')):7.2f} "
                   f"{r['draws_s']:8.2f} | {r['fangs_K']:>3} {r['fangs_to_truth']:20.0f} {r['draws_to_truth']:6.0f} "
                   f"{r['truth_loss']:13.2f}")
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (seconds)")
    parser.add_argument("--n-jobs", type=int, default=-1, help="threads (-1 = all cores)")
    parser.add_argument("--brute-max-k", type=int, default=10, help="largest K enumerated by brute force")
    args = parser.parse_args(argv)
    lines = [f"bench_fangs{' --quick' if args.quick else ''}: {time.strftime('%Y-%m-%d %H:%M')}, "
             f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, n_jobs={args.n_jobs}, "
             f"python {sys.version.split()[0]}, numpy {np.__version__}"]

    def emit(block):
        for ln in block:
            print(ln, flush=True)
        lines.extend(block)

    # Compile (or load from numba's cache) the kernels first, so that no row pays for it.
    warm_truth, warm = posterior_like_samples(10, 2, 5, rng=0)
    fangs(warm, n_iter=5, n_jobs=1, random_state=0)
    draws(warm, n_jobs=1)
    LinearGaussianIBP(n_iter=3, burn_in=1, random_state=0).fit(np.random.default_rng(0).normal(size=(5, 2)))

    title3 = "Table 3 style: FANGS (n_init=16, n_sweet=4, n_iter={}) vs draws, posterior-like samples (flip {})"
    if args.quick:
        emit(_fmt_table1(table1(range(2, 8), reps=5, brute_max_k=min(7, args.brute_max_k))))
        emit([""])
        emit(_fmt_table3(table3([(30, 3, 50), (100, 6, 100)], n_jobs=args.n_jobs, n_iter=300),
                         title3.format(300, 0.05)))
        emit([""])
        emit(_fmt_table3(table3([(100, 6, 100)], n_jobs=args.n_jobs, n_iter=300, flip=0.15),
                         title3.format(300, 0.15)))
        emit([""])
        runs = [sampler_run(n=300, d=5, k=3, sweeps=200, burn_in=100, n_jobs=args.n_jobs)]
    else:
        emit(_fmt_table1(table1(range(2, 11), reps=20, brute_max_k=args.brute_max_k)))
        emit([""])
        configs = [(50, 4, 100), (100, 6, 200), (200, 8, 500), (500, 12, 500), (1000, 16, 1000), (2000, 24, 1000)]
        emit(_fmt_table3(table3(configs, n_jobs=args.n_jobs), title3.format(1000, 0.05)))
        emit([""])
        emit(_fmt_table3(table3(configs[:5], n_jobs=args.n_jobs, flip=0.15), title3.format(1000, 0.15)))
        emit([""])
        runs = [sampler_run(n=2000, d=10, k=5, sweeps=1000, burn_in=500, n_jobs=args.n_jobs),
                sampler_run(n=2000, d=10, k=5, sweeps=1000, burn_in=500, n_jobs=args.n_jobs, block_moves=0)]
    for s in runs:
        emit([f"Gibbs sampler (accelerated collapsed, linear-Gaussian IBP, block_moves={s['block_moves']}): "
              f"N={s['N']} cells x D={s['D']} dims, {s['sweeps']} sweeps, true K={s['K_true']}, sigma_x=0.5",
              f"  sampling {s['sampling_s']:.1f} s, {s['B']} samples kept, K in {s['K_range']}, "
              f"posterior mean sigma_x {s['sigma_x_mean']:.3f}"])
        emit(_fmt_table3([s], "  FANGS vs draws on the sampler's samples"))
    text = "\n".join(lines) + "\n"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"bench_fangs{'_quick' if args.quick else ''}.txt").write_text(text)
    return text


if __name__ == "__main__":
    main()
