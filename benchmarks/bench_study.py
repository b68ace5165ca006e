"""Studies: calibration, power and the effect size of scontrast.study on simulated studies.

Every study is simulated by :func:`scontrast.datasets.simulate_study` from the shipped annotated
pbmc3k cells (``data/pbmc3k_celltypes.h5ad``: 2,625 real PBMCs, 7 cell types), with per-donor
log-normal gene factors of log-sd 0.3, and analysed by :func:`scontrast.study.run_study` (the
library, not snakemake). Parts:

1. ``--calibration N``: nothing planted, N studies each of 6 vs 6 and 4 vs 4 donors, unpaired and
   paired (6 and 4 donors giving both conditions): the share of studies with any split at
   padj < 0.05, with its 95% Clopper-Pearson band, and the share with global p < 0.05. Side by
   side on the first ``--baselines`` studies of each: pseudobulk DESeq2 per cell type (any gene at
   padj < 0.05, the scontrast pseudobulk code) and an Augur-style cell-level AUC (logistic
   regression on 20 PCs, 3-fold cross-validation over cells; "separable" when the AUC beats all
   19 of its cell-label permutations).
2. ``--power N``: a 2x mean shift of 15 genes in CD14 Mono and a spread change of 10 genes (per-cell
   log-normal factor, log-sd 1, mean kept) in B, 6 vs 6 and 4 vs 4 donors: how often each planted
   split is found (padj < 0.05), the mean-shift split ranked first, and any unplanted split called.
3. ``--effect N``: the effect size with nothing planted at 50 and at 500 cells per donor (its
   mean, spread, and how often its donor interval covers 0), and with a mean shift of fold 1.5, 2
   and 3 at 50 and 500 cells per donor.

``--cells C`` sets the cells of each type per donor and condition in parts 1 and 2 (default 80:
~8,000 cells over 7 types and 12 donors; 0 = the real cells shared out without replacement,
~2,600 cells). Usage (repository root): python -m benchmarks.bench_study [--calibration N]
[--power N] [--effect N] [--baselines K] [--cells C] [--seed S] [--designs 6v6 4v4 '6 paired' '4 paired']
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings

import anndata as ad
import numpy as np
from scipy import stats

from scontrast.core import ScontrastWarning
from scontrast.datasets import simulate_study
from scontrast.study import run_study

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CELLS = os.path.join(REPO, "data", "pbmc3k_celltypes.h5ad")
ALPHA = 0.05
DESIGNS = [("6v6", 6, 6, False), ("4v4", 4, 4, False), ("6 paired", 6, 6, True), ("4 paired", 4, 4, True)]
POWER_EFFECTS = [{"cell_type": "CD14 Mono", "kind": "mean", "n_genes": 15, "fold": 2.0},
                 {"cell_type": "B", "kind": "spread", "n_genes": 10, "log_sd": 1.0}]


def band(k: int, n: int) -> str:
    """k/n with its 95% Clopper-Pearson interval."""
    ci = stats.binomtest(k, n).proportion_ci()
    return f"{k}/{n} = {k / n:.3f} [{ci.low:.3f}, {ci.high:.3f}]"


def simulate(cells, seed, n_t, n_b, paired, cells_per_donor, effects=()):
    return simulate_study(cells, n_target=n_t, n_background=n_b, paired=paired, effects=list(effects),
                          cells_per_donor=cells_per_donor or None, random_state=seed)


def study(sim, paired, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScontrastWarning)
        return run_study(sim, groupby="condition", target=["case"], background=["control"], replicate="donor",
                         split_by="cell_type", paired=paired, random_state=seed)


def pseudobulk_any(sim, paired) -> bool:
    """Any gene at padj < 0.05 in any cell type: PyDESeq2 on counts summed per donor (scontrast.pseudobulk)."""
    from scontrast.pseudobulk import deseq2, pseudobulk_counts

    for ct in sim.obs["cell_type"].cat.categories:
        sub = sim[sim.obs["cell_type"] == ct]
        summed, samples = pseudobulk_counts(sub.X, (sub.obs["condition"] == "case").to_numpy(),
                                            sub.obs["donor"].astype(str).to_numpy(), sub.var_names)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res, _ = deseq2(summed, samples, paired=paired)
        if (res["padj"] < ALPHA).any():
            return True
    return False


def _cv_auc(Z, labels) -> float:
    """3-fold cross-validated AUC over cells of a logistic regression on ``Z`` (cells x PCs)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import cross_val_predict

    score = cross_val_predict(LogisticRegression(max_iter=200), Z, labels, cv=3, method="decision_function")
    return roc_auc_score(labels, score)


def augur_any(sim, rng, n_perm=19) -> bool:
    """Any cell type 'separable' by a cell-level classifier: its 3-fold AUC above all of its label permutations."""
    from sklearn.decomposition import PCA

    for ct in sim.obs["cell_type"].cat.categories:
        sub = sim[sim.obs["cell_type"] == ct]
        X = sub.X.toarray()
        X = np.log1p(X / np.maximum(X.sum(1, keepdims=True), 1) * 1e4)
        Z = PCA(n_components=min(20, X.shape[0] - 1), random_state=0).fit_transform(X)
        y = (sub.obs["condition"] == "case").to_numpy()

        observed = _cv_auc(Z, y)
        if all(observed > _cv_auc(Z, rng.permutation(y)) for _ in range(n_perm)):
            return True
    return False


def calibration(cells, n, seed, cells_per_donor, baselines, rng, designs=DESIGNS):
    print(f"\n## Calibration: nothing planted, {n} studies per design ({cells_per_donor or 'shared-out'} cells "
          "per type, donor and condition)")
    for name, n_t, n_b, paired in designs:
        t0 = time.time()
        any_call = glob = pb = au = 0
        for i in range(n):
            sim = simulate(cells, seed + i, n_t, n_b, paired, cells_per_donor)
            res = study(sim, paired, seed + i)
            any_call += bool((res.table["padj"] < ALPHA).any())
            glob += res.global_pvalue < ALPHA
            if i < baselines:
                pb += pseudobulk_any(sim, paired)
                au += augur_any(sim, rng)
        floor = res.table["pvalue_floor"].iloc[0]
        print(f"{name}: any split padj<0.05 in {band(any_call, n)}; global p<0.05 in {band(glob, n)}; "
              f"p floor {floor:.3g}; {(time.time() - t0) / n:.1f} s/study")
        if baselines:
            print(f"    same studies, first {baselines}: pseudobulk DESeq2 any gene padj<0.05 in {band(pb, baselines)}; "
                  f"Augur-style cell-level AUC separable in {band(au, baselines)}")


def power(cells, n, seed, cells_per_donor, designs=DESIGNS):
    print(f"\n## Power: 2x mean shift of 15 genes in CD14 Mono, spread change of 10 genes in B, {n} studies "
          f"({cells_per_donor or 'shared-out'} cells per type, donor and condition)")
    for name, n_t, n_b, paired in designs:
        t0 = time.time()
        mean_found = mean_first = spread_found = false_calls = 0
        for i in range(n):
            res = study(simulate(cells, seed + 1000 + i, n_t, n_b, paired, cells_per_donor, POWER_EFFECTS), paired,
                        seed + i)
            t = res.table.set_index("value")
            mean_found += t.loc["CD14 Mono", "padj"] < ALPHA
            mean_first += (t.loc["CD14 Mono", "rank"] == 1) and t.loc["CD14 Mono", "padj"] < ALPHA
            spread_found += t.loc["B", "padj"] < ALPHA
            false_calls += bool((t.drop(["CD14 Mono", "B"])["padj"] < ALPHA).any())
        print(f"{name}: mean-shift type found {band(mean_found, n)}, found and ranked first {band(mean_first, n)}; "
              f"spread type found {band(spread_found, n)}; an unplanted type called {band(false_calls, n)}; "
              f"{(time.time() - t0) / n:.1f} s/study")


def effect(cells, n, seed):
    print(f"\n## Effect size (6 vs 6 donors, CD14 Mono split, {n} studies per row)")
    for cpd in (50, 500):
        for fold in (1.0, 1.5, 2.0, 3.0):
            eff = [] if fold == 1.0 else [{"cell_type": "CD14 Mono", "kind": "mean", "n_genes": 15, "fold": fold}]
            values, covered = [], 0
            for i in range(n):
                sim = simulate(cells, seed + 2000 + i, 6, 6, False, cpd, eff)
                sim = sim[(sim.obs["cell_type"] == "CD14 Mono").to_numpy()].copy()
                row = study(sim, False, seed + i).table.iloc[0]
                values.append(row["effect"])
                covered += row["effect_low"] <= 0 <= row["effect_high"]
            v = np.array(values)
            print(f"{cpd} cells/donor, fold {fold}: effect mean {v.mean():.3f} sd {v.std(ddof=1):.3f}; "
                  f"interval covers 0 in {band(covered, n)}")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--calibration", type=int, default=0)
    ap.add_argument("--power", type=int, default=0)
    ap.add_argument("--effect", type=int, default=0)
    ap.add_argument("--baselines", type=int, default=0)
    ap.add_argument("--cells", type=int, default=80)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--designs", nargs="+", default=[d[0] for d in DESIGNS],
                    help="among '6v6', '4v4', '6 paired', '4 paired'")
    args = ap.parse_args(argv)
    cells = ad.read_h5ad(CELLS)
    print(f"# bench_study {' '.join(sys.argv[1:] if argv is None else argv)}: {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    rng = np.random.default_rng(args.seed)
    designs = [d for d in DESIGNS if d[0] in args.designs]
    if args.calibration:
        calibration(cells, args.calibration, args.seed, args.cells, args.baselines, rng, designs)
    if args.power:
        power(cells, args.power, args.seed, args.cells, designs)
    if args.effect:
        effect(cells, args.effect, args.seed)


if __name__ == "__main__":
    main()
