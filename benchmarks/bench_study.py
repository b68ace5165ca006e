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
3. ``--effect N [--effect-null M]``: the effect size of the CD14 Mono split with nothing planted
   (M studies) at 50 and at 500 cells per donor (its mean, spread, how often its donor interval
   covers 0, and whether its distribution is the same at both counts: the mean difference with its
   standard error, a two-sample Kolmogorov-Smirnov test), and with a mean shift of fold 1.5, 2 and
   3 (N studies each) at 50 and 500 cells per donor; beside it, on the same studies, the effect
   without the cells' noise removed and the effect on 50 cells per donor (``benchmarks/study_effect.py``).

4. ``--workflow N [N ...]``: the whole workflow on a study of about N cells (the 7 cell types, 6
   against 6 donors, a sex covariate and a 2x mean shift of 15 genes in CD14 Mono), every default
   method per split: the study is simulated from the shipped cells, written with a config into a
   temporary work directory, and ``snakemake --cores 2`` runs it there. Printed: the total wall
   time, and per rule the jobs, their summed wall and CPU seconds (snakemake's ``benchmark:``
   files: ``s`` and ``cpu_time``, the latter meaningful on a shared machine) and the largest peak
   memory (``max_rss``). With two sizes or more, each rule's CPU seconds per 1,000 cells and the
   growth between sizes. ``--types T`` keeps the largest T cell types only (CD14 Mono first): with
   ``--types 1`` one split at the size it has in a larger study (20,000 cells: one of the 10 splits
   of a 200,000-cell study). ``--finer K`` cuts the K largest types but CD14 Mono in two by k-means
   on their principal components first (``--finer 3``: 10 cell types). ``--keep DIR`` keeps the work directories under DIR.

5. ``--parts N_POWER N_NULL``: 6 vs 6, on the studies of ``--power`` and ``--calibration`` at the
   same seed, how the split test would do with each of its families alone (location, sd,
   dispersion, tail) and with two other combinations of them (Fisher's; the sum of squared standardised
   log-statistics) in place of min-p: the planted splits found, the unplanted ones called.

6. ``--summarise FILE --seeds S ...``: one totals line per part and design over the runs of a results
   file whose ``--seed`` is among S (their counts summed, with the Clopper-Pearson band; runs that
   share studies are refused).

``--cells C`` sets the cells of each type per donor and condition in parts 1 and 2 (default 80:
~8,000 cells over 7 types and 12 donors; 0 = the real cells shared out without replacement,
~2,600 cells). Usage (repository root): python -m benchmarks.bench_study [--calibration N]
[--power N] [--parts N_POWER N_NULL] [--effect N] [--workflow N ...] [--keep DIR] [--baselines K] [--cells C] [--seed S]
[--designs 6v6 4v4 '6 paired' '4 paired'] [--summarise FILE --seeds S ...]
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
from scipy import stats

from scontrast.core import ScontrastWarning
from scontrast.datasets import simulate_study
from scontrast.donor_test import set_pvalues, weighted_min_p
from scontrast.study import run_study

from .study_effect import effect

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


def bh_reach(floor: float, n_splits: int, alpha: float = ALPHA) -> int | None:
    """The fewest splits at the p-value ``floor`` (of ``n_splits``, the others at p = 1) that Benjamini-Hochberg
    (:func:`scontrast.study.bh_adjust`) brings below ``alpha``; None when all ``n_splits`` at the floor cannot."""
    from scontrast.study import bh_adjust

    for k in range(1, n_splits + 1):
        if bh_adjust(np.r_[np.full(k, floor), np.ones(n_splits - k)])[0] < alpha:
            return k
    return None


def power(cells, n, seed, cells_per_donor, designs=DESIGNS):
    print(f"\n## Power: 2x mean shift of 15 genes in CD14 Mono, spread change of 10 genes in B, {n} studies "
          f"({cells_per_donor or 'shared-out'} cells per type, donor and condition)")
    for name, n_t, n_b, paired in designs:
        t0 = time.time()
        mean_found = mean_first = spread_found = false_calls = mean_p = spread_p = glob = 0
        for i in range(n):
            res = study(simulate(cells, seed + 1000 + i, n_t, n_b, paired, cells_per_donor, POWER_EFFECTS), paired,
                        seed + i)
            t = res.table.set_index("value")
            mean_found += t.loc["CD14 Mono", "padj"] < ALPHA
            mean_first += (t.loc["CD14 Mono", "rank"] == 1) and t.loc["CD14 Mono", "padj"] < ALPHA
            spread_found += t.loc["B", "padj"] < ALPHA
            false_calls += bool((t.drop(["CD14 Mono", "B"])["padj"] < ALPHA).any())
            # before Benjamini-Hochberg: what a design whose floor keeps padj from 0.05 still sees
            mean_p += t.loc["CD14 Mono", "pvalue"] < ALPHA
            spread_p += t.loc["B", "pvalue"] < ALPHA
            glob += res.global_pvalue < ALPHA
        print(f"{name}: mean-shift type found {band(mean_found, n)}, found and ranked first {band(mean_first, n)}; "
              f"spread type found {band(spread_found, n)}; an unplanted type called {band(false_calls, n)}; "
              f"{(time.time() - t0) / n:.1f} s/study")
        print(f"    before Benjamini-Hochberg: mean-shift type p<0.05 in {band(mean_p, n)}; spread type p<0.05 in "
              f"{band(spread_p, n)}; global p<0.05 in {band(glob, n)}")
        floor, k = t["pvalue_floor"].min(), bh_reach(t["pvalue_floor"].min(), len(t))
        print(f"    p floor {floor:.3g}: Benjamini-Hochberg across the {len(t)} splits reaches padj<0.05 "
              + (f"only with at least {k} of them at the floor" if k else "with none of them"))


# How the parts of a split's test could be combined, every rule a fixed function of the split's statistics over the
# shared relabellings (an exact test each): the shipped min-p, each family alone, and two rules that add the families
# up (Fisher's sum of -log p; the sum of the squared positive standardised log-statistics).
def _standardised_log(T: np.ndarray) -> np.ndarray:
    ok = np.isfinite(T).all(axis=1)
    logs = np.log(np.where(ok[:, None], T, 1.0))
    z = (logs - logs[ok].mean(axis=0)) / logs[ok].std(axis=0)
    z[~ok] = -np.inf
    return z


RULES = {
    "min-p (shipped)": lambda T: 1.0 - weighted_min_p(T),
    "location alone": lambda T: T[:, 0],
    "sd alone": lambda T: T[:, 1],
    "dispersion alone": lambda T: T[:, 2],
    "tail alone": lambda T: T[:, 3],
    "Fisher": lambda T: -np.log(set_pvalues(T)).sum(axis=1),
    "sum of squared z": lambda T: (np.maximum(_standardised_log(T), 0.0) ** 2).sum(axis=1),
}


def split_family_statistics(sim, seed: int, paired: bool = False) -> dict[str, np.ndarray]:
    """Per split (cell type) of a simulated study, its families' statistics (L, 4) over the study's relabellings:
    the columns :func:`scontrast.study._test.combine_parts` combines (the library's own pieces, so a rule here
    is the study test with another combination)."""
    from scontrast.study._study import _kinds, _split_data, _test_features, _tested
    from scontrast.study._test import part_statistics, study_labellings

    obs = sim.obs
    cells = pd.DataFrame({"donor": obs["donor"].astype(str).to_numpy(),
                          "is_target": (obs["condition"] == "case").to_numpy(),
                          "split": obs["cell_type"].astype(str).to_numpy()}, index=np.arange(sim.n_obs))
    donors = sorted(cells["donor"].unique())
    target = cells.groupby("donor")["is_target"].first().reindex(donors).to_numpy(bool)
    lab, _ = study_labellings(np.zeros(len(donors), bool) if paired else target, paired=paired,
                              random_state=np.random.default_rng(seed))
    out = {}
    for ct in sorted(cells["split"].unique()):
        s = _split_data(sim, None, cells[cells["split"] == ct], ct, ct, donors, paired=paired, n_genes=300)
        out[ct] = part_statistics(_test_features(s, paired), lab[:, [donors.index(d) for d in s.donors]],
                                  paired=paired, top_k=10, kinds=_kinds(s), tested=_tested(s))
    return out


def parts(cells, n_power: int, n_null: int, seed: int, cells_per_donor):
    """6 vs 6: every rule of :data:`RULES` on the same studies as ``--power`` and ``--calibration`` at this seed."""
    from scontrast.study import bh_adjust
    from scontrast.study._test import rank_pvalues

    print(f"\n## Combining the parts, 6 vs 6: {n_power} power studies (as --power) and {n_null} null studies (as "
          f"--calibration), {cells_per_donor} cells per type, donor and condition; found = padj < 0.05; first = the "
          f"smallest p of the study (ties included)")
    counts = {r: dict.fromkeys(("mean", "first", "spread", "spread_p", "unplanted", "null"), 0) for r in RULES}
    for kind, n, offset in (("power", n_power, 1000), ("null", n_null, 0)):
        for i in range(n):
            sim = simulate(cells, seed + offset + i, 6, 6, False, cells_per_donor,
                           POWER_EFFECTS if kind == "power" else ())
            stats = split_family_statistics(sim, seed + i)
            types = sorted(stats)
            for rule, combine in RULES.items():
                P = np.column_stack([rank_pvalues(combine(stats[c])) for c in types])
                called = bh_adjust(P[0]) < ALPHA
                c = counts[rule]
                if kind == "null":
                    c["null"] += bool(called.any())
                    continue
                m, b = types.index("CD14 Mono"), types.index("B")
                c["mean"] += called[m]
                c["first"] += called[m] and P[0, m] <= P[0].min()
                c["spread"] += called[b]
                c["spread_p"] += P[0, b] < ALPHA
                c["unplanted"] += bool(np.delete(called, [m, b]).any())
    for rule, c in counts.items():
        print(f"{rule}: " + (f"mean-shift type found {band(c['mean'], n_power)}, found and first "
                             f"{band(c['first'], n_power)}; spread type found {band(c['spread'], n_power)}, p<0.05 "
                             f"{band(c['spread_p'], n_power)}; an unplanted type called {band(c['unplanted'], n_power)}"
                             if n_power else "")
              + (f"; null studies with a split called {band(c['null'], n_null)}" if n_null else ""))


_RUN = re.compile(r"^# python -m benchmarks\.bench_study (.*)$")
_DESIGN = r"^(6v6|4v4|6 paired|4 paired): "
_CALIBRATION = re.compile(_DESIGN + r"any split padj<0.05 in (\d+)/(\d+) .*global p<0.05 in (\d+)/(\d+) ")
_BASELINES = re.compile(r"^\s+same studies, first (\d+): .*DESeq2 any gene padj<0.05 in (\d+)/(\d+) .*"
                        r"separable in (\d+)/(\d+) ")
_POWER = re.compile(_DESIGN + r"mean-shift type found (\d+)/(\d+) .*found and ranked first (\d+)/\d+ .*"
                    r"spread type found (\d+)/\d+ .*an unplanted type called (\d+)/\d+ ")
_POWER_RAW = re.compile(r"^\s+before Benjamini-Hochberg: mean-shift type p<0.05 in (\d+)/\d+ .*"
                        r"spread type p<0.05 in (\d+)/\d+ .*global p<0.05 in (\d+)/\d+ ")
# the counts each part sums, in the order of its regular expression's groups after the design
COUNTS = {"calibration": ("any", "n", "global", "n_global"),
          "power": ("mean_found", "n", "mean_first", "spread_found", "unplanted")}


def read_runs(text: str) -> list[dict]:
    """One record per design line of the results file: part, design, the run's seed, n and its counts.

    A run starts at a ``# python -m benchmarks.bench_study <flags>`` line (its ``--seed``, default 0);
    a baselines line adds ``baselines`` (studies), ``deseq2`` and ``augur`` to the design line above it, a
    power run's "before Benjamini-Hochberg" line ``raw`` (studies), ``mean_p``, ``spread_p`` and ``global_p``.
    """
    runs, seed, last = [], None, None
    for line in text.splitlines():
        if m := _RUN.match(line):
            s = re.search(r"--seed (\d+)", m.group(1))
            seed, last = (int(s.group(1)) if s else 0), None
        elif seed is not None and (m := _CALIBRATION.match(line) or _POWER.match(line)):
            part = "calibration" if m.re is _CALIBRATION else "power"
            last = {"part": part, "design": m.group(1), "seed": seed,
                    **{k: int(v) for k, v in zip(COUNTS[part], m.groups()[1:])}}
            runs.append(last)
        elif last is not None and (m := _BASELINES.match(line)):
            last.update(baselines=int(m.group(1)), deseq2=int(m.group(2)), augur=int(m.group(4)))
        elif last is not None and (m := _POWER_RAW.match(line)):
            last.update(raw=last["n"], mean_p=int(m.group(1)), spread_p=int(m.group(2)), global_p=int(m.group(3)))
    return runs


def totals(runs: list[dict], seeds: list[int], latest: bool = False) -> dict[tuple[str, str], dict]:
    """Per (part, design): the counts of the runs at ``seeds`` summed, and those seeds.

    Raises ValueError when two of them share studies (a run at seed s of n studies uses s .. s + n - 1);
    with ``latest``, the run written last counts and the earlier ones on the same studies are skipped.
    """
    out: dict[tuple[str, str], dict] = {}
    for r in (r for r in (runs[::-1] if latest else runs) if r["seed"] in seeds):
        key = (r["part"], r["design"])
        acc = out.setdefault(key, {"seeds": [], "ranges": []})
        lo, hi = r["seed"], r["seed"] + r["n"]
        if any(lo < b and a < hi for a, b in acc["ranges"]):
            if latest:
                continue
            raise ValueError(f"{r['part']} {r['design']}: the run at seed {lo} shares studies with another run")
        acc["seeds"].append(lo)
        acc["ranges"].append((lo, hi))
        for k in (*COUNTS[r["part"]], "baselines", "deseq2", "augur", "raw", "mean_p", "spread_p", "global_p"):
            acc[k] = acc.get(k, 0) + r.get(k, 0)
    return out


def summarise(path: str, seeds: list[int], latest: bool = False) -> None:
    """Print one totals line per part and design over the runs of ``path`` at ``seeds`` (``latest``: see totals)."""
    for (part, design), t in totals(read_runs(Path(path).read_text()), seeds, latest).items():
        head = f"# totals over seeds {', '.join(map(str, sorted(t['seeds'])))}, {part} {design}: "
        if part == "calibration":
            line = f"any split padj<0.05 in {band(t['any'], t['n'])}; global p<0.05 in {band(t['global'], t['n'])}"
            if t["baselines"]:
                line += (f"; same studies, {t['baselines']}: pseudobulk DESeq2 any gene padj<0.05 in "
                         f"{band(t['deseq2'], t['baselines'])}, Augur-style separable in {band(t['augur'], t['baselines'])}")
        else:
            line = (f"mean-shift type found {band(t['mean_found'], t['n'])}, found and ranked first "
                    f"{band(t['mean_first'], t['n'])}; spread type found {band(t['spread_found'], t['n'])}; "
                    f"an unplanted type called {band(t['unplanted'], t['n'])}")
            if t["raw"]:
                line += (f"; before Benjamini-Hochberg, {t['raw']}: mean-shift type p<0.05 in "
                         f"{band(t['mean_p'], t['raw'])}, spread type in {band(t['spread_p'], t['raw'])}, global p<0.05 "
                         f"in {band(t['global_p'], t['raw'])}")
        print(head + line)


WORKFLOW_EFFECTS = [{"cell_type": "CD14 Mono", "kind": "mean", "n_genes": 15, "fold": 2.0}]


def workflow_config(h5ad: Path) -> dict:
    """The shipped config with one study entry on ``h5ad`` (every default method per split)."""
    import yaml

    cfg = yaml.safe_load(Path(REPO, "config.yaml").read_text())
    demo = cfg["datasets"]["pbmc_study"]
    cfg["datasets"] = {"study": {"path": str(h5ad), "groupby": "condition", "target": ["case"],
                                 "background": ["control"], "counts": "raw", "replicate": "donor",
                                 "split_by": "cell_type", "covariates": ["sex"], "preprocess": demo["preprocess"]}}
    return cfg


def read_benchmarks(work: Path, study: str = "study") -> list[dict]:
    """One row per job of the study (its splits' and its own): rule, split, wall s, CPU s, max_rss MB."""
    rows = []
    for f in sorted(Path(work, "results", study).glob("**/benchmarks/*.tsv")):
        with f.open() as fh:
            rec = next(csv.DictReader(fh, delimiter="\t"))
        num = {k: float(rec[k]) if rec.get(k) not in (None, "", "-", "NA") else float("nan")
               for k in ("s", "cpu_time", "max_rss")}
        split = f.parent.parent.relative_to(Path(work, "results", study)).as_posix()
        rows.append({"rule": f.stem, "split": split if split != "." else "", **num})
    return rows


def per_rule(rows: list[dict]) -> dict[str, dict]:
    """Per rule: jobs, summed wall and CPU seconds, largest peak memory (MB)."""
    out = {}
    for r in rows:
        a = out.setdefault(r["rule"], {"jobs": 0, "s": 0.0, "cpu": 0.0, "rss": 0.0})
        a["jobs"] += 1
        a["s"] += r["s"]
        a["cpu"] += np.nan_to_num(r["cpu_time"])
        a["rss"] = max(a["rss"], np.nan_to_num(r["max_rss"]))
    return out


def finer_types(cells, n_split: int):
    """The ``n_split`` largest cell types but CD14 Mono (where the workflow's effect is planted) each cut in two
    subtypes, ``'<type> 1'`` and ``'<type> 2'``: k-means (k = 2, seeded) on 20 principal components of their
    log-normalised counts, the finer annotation a user's sub-clustering gives. Returns a copy."""
    import scanpy as sc
    from sklearn.cluster import KMeans

    cells = cells.copy()
    labels = cells.obs["cell_type"].astype(str).to_numpy().astype(object)
    sizes = cells.obs["cell_type"].value_counts()
    for ct in [c for c in sizes.index if c != "CD14 Mono"][:n_split]:
        sub = cells[labels == ct].copy()
        sc.pp.normalize_total(sub, target_sum=1e4)
        sc.pp.log1p(sub)
        sc.pp.pca(sub, n_comps=20, random_state=0)
        part = KMeans(2, n_init=10, random_state=0).fit_predict(sub.obsm["X_pca"])
        labels[labels == ct] = [f"{ct} {k + 1}" for k in part]
    cells.obs["cell_type"] = pd.Categorical(labels.astype(str))
    return cells


def run_workflow(cells, n_cells: int, seed: int, keep: str | None, n_types: int = 0, n_finer: int = 0) -> dict:
    """Simulate a study of about ``n_cells`` cells, run snakemake on it; print and return its numbers.

    ``n_types``: only the largest ``n_types`` cell types (CD14 Mono among them, where the effect is
    planted), e.g. 1 for one split of a larger study at its own size; 0 = every type.
    ``n_finer``: that many of the largest types cut in two first (:func:`finer_types`; 3: 10 types).
    """
    if n_finer:
        cells = finer_types(cells, n_finer)
    if n_types:
        keep_types = list(dict.fromkeys(["CD14 Mono", *cells.obs["cell_type"].value_counts().index]))[:n_types]
        cells = cells[cells.obs["cell_type"].isin(keep_types).to_numpy()].copy()
        cells.obs["cell_type"] = cells.obs["cell_type"].astype(str).astype("category")
    types = cells.obs["cell_type"].nunique()
    per = max(1, round(n_cells / (types * 12)))
    sim = simulate_study(cells, n_target=6, n_background=6, cells_per_donor=per, covariates={"sex": ["F", "M"]},
                         effects=WORKFLOW_EFFECTS, random_state=seed)
    work = Path(keep, f"study_{n_cells}_{types}") if keep else Path(tempfile.mkdtemp(prefix="bench_study_"))
    work.mkdir(parents=True, exist_ok=True)
    import yaml

    sim.write_h5ad(work / "study.h5ad")
    (work / "config.yaml").write_text(yaml.safe_dump(workflow_config(work / "study.h5ad"), sort_keys=False))
    snakemake = str(Path(sys.executable).parent / "snakemake")
    cmd = [snakemake, "-s", str(Path(REPO, "Snakefile")), "-d", str(work), "--configfile", str(work / "config.yaml"),
           "--cores", "2"]
    print(f"\n## Workflow: {sim.n_obs} cells x {sim.n_vars} genes, {types} cell types x 12 donors (6 vs 6), "
          f"{per} cells per type and donor; every default method per split; snakemake --cores 2 (load "
          f"{os.getloadavg()[0]:.1f} at start)")
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # exact: snakemake and every job it waited for (user + system), whatever the load
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    (work / "snakemake.log").write_text(proc.stdout + proc.stderr)
    rows = read_benchmarks(work)
    rules = per_rule(rows)
    print(f"exit {proc.returncode}; {len(rows)} jobs in {wall / 60:.1f} min wall (load {os.getloadavg()[0]:.1f} at "
          f"end); CPU of the whole run (snakemake and every job, getrusage) {cpu / 60:.1f} min, i.e. at least "
          f"{cpu / 120:.1f} min on 2 cores; summed over the jobs' benchmark files {sum(r['s'] for r in rows) / 60:.1f} "
          f"min wall, {sum(np.nan_to_num(r['cpu_time']) for r in rows) / 60:.1f} min CPU (sampled: every 0.5 s for a "
          "job's first 15 s, then every 30 s, so a long job's last seconds are missed)")
    print(f"{'rule':<18}{'jobs':>5}{'wall s':>9}{'CPU s':>9}{'CPU s/job':>10}{'peak MB':>9}")
    for rule, a in sorted(rules.items(), key=lambda kv: -kv[1]["cpu"]):
        print(f"{rule:<18}{a['jobs']:>5}{a['s']:>9.1f}{a['cpu']:>9.1f}{a['cpu'] / a['jobs']:>10.1f}{a['rss']:>9.0f}")
    if proc.returncode != 0:
        print(proc.stderr[-3000:])
    study_table(work)
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    return {"cells": sim.n_obs, "wall": wall, "cpu": cpu, "rules": rules}


def study_table(work: Path) -> None:
    """The study table's key columns of a finished work directory (the planted split should come first)."""
    table = Path(work, "results", "study", "study.tsv")
    if table.exists():
        import pandas as pd

        t = pd.read_csv(table, sep="\t", comment="#")
        print(t[[c for c in ("split", "status", "pvalue", "padj", "effect", "rank") if c in t]].to_string(index=False))


def scaling(runs: list[dict]) -> None:
    """Per rule: CPU seconds per 1,000 cells at each size and the growth between the two largest sizes."""
    if len(runs) < 2:
        return
    a, b = runs[-2], runs[-1]
    print(f"\n## Scaling, {a['cells']} -> {b['cells']} cells (x{b['cells'] / a['cells']:.1f}): CPU s per rule")
    for rule in sorted(set(a["rules"]) | set(b["rules"])):
        ca, cb = a["rules"].get(rule, {}).get("cpu", float("nan")), b["rules"].get(rule, {}).get("cpu", float("nan"))
        print(f"{rule:<18}{ca:>9.1f}{cb:>9.1f}  x{cb / ca if ca else float('nan'):.2f}")
    ta = sum(r["cpu"] for r in a["rules"].values())
    tb = sum(r["cpu"] for r in b["rules"].values())
    print(f"{'all':<18}{ta:>9.1f}{tb:>9.1f}  x{tb / ta:.2f}; wall {a['wall'] / 60:.1f} -> {b['wall'] / 60:.1f} min")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--calibration", type=int, default=0)
    ap.add_argument("--power", type=int, default=0)
    ap.add_argument("--effect", type=int, default=0)
    ap.add_argument("--effect-null", type=int, default=0, help="studies with nothing planted per cell count "
                    "(default: --effect)")
    ap.add_argument("--parts", type=int, nargs=2, default=None, metavar=("N_POWER", "N_NULL"),
                    help="6 vs 6: the families of the split test alone and other combinations of them")
    ap.add_argument("--baselines", type=int, default=0)
    ap.add_argument("--cells", type=int, default=80)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workflow", type=int, nargs="*", default=[], help="study sizes (cells) run by snakemake")
    ap.add_argument("--study-table", default=None, help="print the study table of a --keep work directory")
    ap.add_argument("--types", type=int, default=0, help="--workflow: only the largest T cell types (0 = all)")
    ap.add_argument("--finer", type=int, default=0, help="--workflow: cut that many of the largest types in two "
                    "(3: 10 cell types)")
    ap.add_argument("--keep", default=None, help="keep the --workflow work directories under this directory")
    ap.add_argument("--designs", nargs="+", default=[d[0] for d in DESIGNS],
                    help="among '6v6', '4v4', '6 paired', '4 paired'")
    ap.add_argument("--summarise", default=None, metavar="FILE", help="totals per part and design over the runs "
                    "of a results file at --seeds")
    ap.add_argument("--seeds", type=int, nargs="+", default=[], help="--summarise: the runs' --seed values")
    ap.add_argument("--latest", action="store_true", help="--summarise: of runs that share studies, the one written "
                    "last counts (a rerun of the same seeds)")
    args = ap.parse_args(argv)
    if args.summarise:
        summarise(args.summarise, args.seeds, args.latest)
        return
    cells = ad.read_h5ad(CELLS)
    print(f"# bench_study {' '.join(sys.argv[1:] if argv is None else argv)}: {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    rng = np.random.default_rng(args.seed)
    designs = [d for d in DESIGNS if d[0] in args.designs]
    if args.calibration:
        calibration(cells, args.calibration, args.seed, args.cells, args.baselines, rng, designs)
    if args.power:
        power(cells, args.power, args.seed, args.cells, designs)
    if args.parts:
        parts(cells, *args.parts, args.seed, args.cells)
    if args.effect:
        effect(cells, args.effect, args.seed, band, args.effect_null)
    if args.study_table:
        study_table(Path(args.study_table))
    if args.workflow:
        scaling([run_workflow(cells, n, args.seed, args.keep, args.types, args.finer) for n in args.workflow])


if __name__ == "__main__":
    main()
