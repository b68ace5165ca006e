"""SPARDA on real data: sparsity, orientation, p-values, calibration, time.

Run (from the repository root):
  .venv/bin/python -m benchmarks.bench_sparda_real [--splits N] [--shipped-only]
      real contrasts + type I error on random halves -> benchmarks/results/bench_sparda_real.txt
  .venv-bench/bin/python -m benchmarks.bench_sparda_real --power [--reps N] [--metrics edistance,mmd]
      two-sample power against pertpy's DistanceTest (needs pertpy, hyppo: the benchmark venv)
      -> benchmarks/results/bench_sparda_power.txt
  .venv/bin/python -m benchmarks.bench_sparda_real --variants [--reps N] [--kinds ...] [--perms 199]
      the screen of permute-test statistics (penalties, shape part, min-p) that chose the default
      -> benchmarks/results/bench_sparda_power.txt

Contrasts (each preprocessed by :func:`scontrast.preprocess`: the two groups only, QC,
log-normalisation of counts, 2,000 highly variable genes within them; SPARDA on those):

- ``data/pbmc68k_reduced.h5ad`` (shipped; log-normalised, 765 genes; ``obs['bulk_labels']``):
  two distinct types (CD14+ Monocyte vs CD19+ B), two close T-cell types (CD8+ Cytotoxic T vs
  CD8+/CD45RA+ Naive Cytotoxic), random halves of the Dendritic cells (null);
- ``data/wu2020_tcells_200.h5ad`` (shipped; raw counts; ``obs['source']``): tumour vs NAT T cells;
- ``data/pbmc3k_celltypes.h5ad`` (shipped; 10x PBMC 3k raw counts, 2,625 cells x 1,859 genes;
  ``obs['cell_type']``, see ``data/README.md``): B vs CD14 monocytes (distinct), CD4 T vs CD8 T
  (close), random halves of the CD4 T cells (null), and T cells vs all other cells (2,625 cells,
  the timing case).

Per contrast: genes selected, the lambda path and the rule's choice, the share of the selected
genes among the 100 genes of largest |Wilcoxon score| (scanpy ``rank_genes_groups``, target vs
background, on the same genes), sign agreement (share of sum |weight| whose sign is the sign of
the target-minus-background mean difference), p-value with its resolution, wall time and the
machine load.  Then the type I error on random halves of one population (many splits, the
default test), at the library defaults: all 240 pbmc68k Dendritic cells (120 vs 120: test='auto'
runs the split test) and 80 of them (40 vs 40: the re-optimised permutation test).
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PBMC68K = ROOT / "data" / "pbmc68k_reduced.h5ad"
WU2020 = ROOT / "data" / "wu2020_tcells_200.h5ad"
PBMC3K = ROOT / "data" / "pbmc3k_celltypes.h5ad"
#: QC of PBMC3K's 1,859 genes (config.yaml's pbmc_study: median 111 detected per cell; its 13 MT- genes weigh
#: more among them than among all genes): the defaults would remove ~90% of its cells
PBMC3K_QC = {"min_genes": 30, "max_pct_mito": 40}


def _print(*args):
    print(*args, flush=True)


def load(kind: str):
    """One dataset as an AnnData: ``'pbmc68k'``, ``'wu2020'`` or ``'pbmc3k'`` (with ``obs['cell_type']``)."""
    import anndata as ad

    if kind == "pbmc68k":
        return ad.read_h5ad(PBMC68K)
    if kind == "wu2020":
        return ad.read_h5ad(WU2020)
    if kind == "pbmc3k":
        return ad.read_h5ad(PBMC3K)
    raise ValueError(kind)


def contrast(adata, groupby: str, target, background, counts: str, **qc):
    """``scontrast.preprocess`` of one contrast (2,000 HVGs within the two groups; ``qc``: its QC thresholds)."""
    from scontrast import preprocess

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return preprocess(adata, groupby=groupby, target=target, background=background, counts=counts,
                          n_top_genes=2000, **qc)


def random_halves(adata, groupby: str, label: str, seed: int, n_cells: int | None = None):
    """The cells of one label (``n_cells`` of them at random, default all) split at random into two
    halves ``obs['half']`` ('a' / 'b')."""
    sub = adata[adata.obs[groupby] == label].copy()
    rng = np.random.default_rng(seed)
    if n_cells is not None:
        sub = sub[np.sort(rng.choice(sub.n_obs, n_cells, replace=False))].copy()
    half = np.where(rng.permutation(sub.n_obs) < sub.n_obs // 2, "a", "b")
    sub.obs["half"] = half
    return sub


def wilcoxon_top(adata, genes: np.ndarray, n_top: int = 100) -> set:
    """The ``n_top`` genes of largest |Wilcoxon score| (scanpy ``rank_genes_groups``, target vs background)."""
    import scanpy as sc

    from scontrast.core import TARGET_KEY

    sub = adata[:, genes].copy()
    sub.obs["grp"] = np.where(sub.obs[TARGET_KEY].to_numpy(dtype=bool), "target", "background")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sc.tl.rank_genes_groups(sub, "grp", groups=["target"], reference="background", method="wilcoxon",
                                n_genes=sub.n_vars)
    names = np.asarray(sub.uns["rank_genes_groups"]["names"]["target"]).astype(str)
    scores = np.asarray(sub.uns["rank_genes_groups"]["scores"]["target"], dtype=float)
    return set(names[np.argsort(-np.abs(scores), kind="stable")[:n_top]])


def evaluate(adata, name: str, **params) -> dict:
    """SPARDA (library defaults unless ``params``) on one preprocessed contrast, with the metrics."""
    from scontrast.sparda import SPARDA
    from scontrast.tl._common import group_matrices

    X, Y, mask = group_matrices(adata, genes="highly_variable", layer=None, key="scontrast_target", min_cells=2)
    genes = adata.var_names[mask].to_numpy().astype(str)
    load0 = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = SPARDA(random_state=0, **params).fit(X, Y)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    w = model.beta_ if model.beta_.ndim == 1 else model.beta_[0]
    sel = np.flatnonzero(w)
    diff = np.asarray(X.mean(axis=0)).ravel() - np.asarray(Y.mean(axis=0)).ravel()
    agree = float(np.abs(w[np.sign(w) == np.sign(diff)]).sum() / np.abs(w).sum())
    top = wilcoxon_top(adata, genes)
    overlap = float(np.mean([g in top for g in genes[sel]])) if sel.size else float("nan")
    cv = model.cv_results_
    test = model.test_ or {}
    out = dict(name=name, n=X.shape[0], m=Y.shape[0], d=X.shape[1], n_selected=int(sel.size), overlap=overlap,
               sign=agree, p=model.pvalue_, n_at_least=test.get("n_at_least"), n_perm=test.get("n_permutations"),
               method=test.get("method"),
               bound=test.get("bound"), wall=wall, cpu=cpu, load=(load0 + os.getloadavg()[0]) / 2,
               top_genes=", ".join(f"{genes[i]}({w[i]:+.2f})" for i in sel[np.argsort(-np.abs(w[sel]))][:8]),
               warnings=[str(c.message) for c in caught if "Scontrast" in type(c.message).__name__])
    if cv is not None:
        out["path"] = " ".join(f"{lam:.3g}:{s:.3g}/{k:.0f}" for lam, s, k in zip(cv["lam"], cv["score"], cv["n_selected"]))
        out["rule"] = f"{model.cv_rule} -> index {cv['best_index']} of {cv['lam'].size}, lam {model.lam_:.3g}; " \
                      f"reference (lam 0) {cv['reference_score']:.3g}/{cv['reference_n_selected']:.0f}"
    return out


def _report(r: dict) -> None:
    p = "nan" if r["p"] is None else (f"<= {r['p']:.2g}" if r["bound"] else f"{r['p']:.3g}")
    _print(f"-- {r['name']}: {r['n']} vs {r['m']} cells x {r['d']} genes")
    _print(f"   selected {r['n_selected']}, among Wilcoxon top 100: {r['overlap']:.0%}, sign agreement "
           f"{r['sign']:.0%}, p {p} ({r['method']} test, {r['n_at_least']} of {r['n_perm']} permutations as large), "
           f"{r['wall']:.1f} s wall, {r['cpu']:.1f} s CPU (load {r['load']:.1f})")
    if "path" in r:
        _print(f"   path lam:held-out W2^2/genes  {r['path']}")
        _print(f"   rule {r['rule']}")
    _print(f"   top weights {r['top_genes']}")
    for msg in r["warnings"]:
        _print(f"   warning: {msg}")


def contrasts(shipped_only: bool):
    """(name, preprocessed AnnData) of every contrast of the benchmark."""
    p68 = load("pbmc68k")
    yield "pbmc68k distinct: CD14+ Monocyte vs CD19+ B", contrast(p68, "bulk_labels", "CD14+ Monocyte", "CD19+ B",
                                                                  "normalized")
    yield "pbmc68k close: CD8+ Cytotoxic T vs CD8+/CD45RA+ Naive Cytotoxic", contrast(
        p68, "bulk_labels", "CD8+ Cytotoxic T", "CD8+/CD45RA+ Naive Cytotoxic", "normalized")
    yield "pbmc68k null: random halves of Dendritic", contrast(random_halves(p68, "bulk_labels", "Dendritic", 0),
                                                               "half", "a", "b", "normalized")
    yield "wu2020: Tumor vs NAT T cells", contrast(load("wu2020"), "source", "Tumor", "NAT", "raw")
    if shipped_only:
        return
    p3 = load("pbmc3k")
    yield "pbmc3k distinct: B vs CD14 Mono", contrast(p3, "cell_type", "B", "CD14 Mono", "raw", **PBMC3K_QC)
    yield "pbmc3k close: CD4 T vs CD8 T", contrast(p3, "cell_type", "CD4 T", "CD8 T", "raw", **PBMC3K_QC)
    yield "pbmc3k null: random halves of CD4 T", contrast(random_halves(p3, "cell_type", "CD4 T", 0), "half", "a",
                                                          "b", "raw", **PBMC3K_QC)
    t = p3.copy()
    t.obs["tcell"] = np.where(t.obs["cell_type"].isin(["CD4 T", "CD8 T"]), "T", "other")
    yield "pbmc3k timing: T cells vs all others", contrast(t, "tcell", "T", "other", "raw", **PBMC3K_QC)


def type_one_error(n_splits: int, label: str = "Dendritic", n_cells: int | None = None) -> None:
    """Default SPARDA test on ``n_splits`` random halves of one pbmc68k type (``n_cells`` of its cells
    at random, default all): share of p <= 0.05."""
    from scontrast.sparda import SPARDA
    from scontrast.tl._common import group_matrices

    if n_splits <= 0:
        return
    p68 = load("pbmc68k")
    pv, walls, methods = [], [], set()
    t0 = time.perf_counter()
    for seed in range(n_splits):
        a = contrast(random_halves(p68, "bulk_labels", label, 1000 + seed, n_cells), "half", "a", "b", "normalized")
        X, Y, _ = group_matrices(a, genes="highly_variable", layer=None, key="scontrast_target", min_cells=2)
        t = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = SPARDA(random_state=seed).fit(X, Y)
        pv.append(model.pvalue_)
        methods.add(f"{model.test_['method']} ({model.test_['n_permutations']} permutations)")
        walls.append(time.process_time() - t)
    pv = np.asarray(pv)
    from scipy.stats import kstest

    _print(f"\n== type I error: {n_splits} random halves of {'all' if n_cells is None else n_cells} pbmc68k {label} "
           f"cells ({X.shape[0]} vs {Y.shape[0]} cells x {X.shape[1]} genes), library defaults: "
           f"{', '.join(sorted(methods))} test ==")
    _print(f"p > 0.05 in {int(np.sum(pv > 0.05))} of {n_splits} (goal >= 90%); p <= 0.01 in {int(np.sum(pv <= 0.01))}; "
           f"KS test of uniformity p = {kstest(pv, 'uniform').pvalue:.3g}; deciles of p "
           f"{np.round(np.quantile(pv, np.linspace(0.1, 0.9, 9)), 2).tolist()}")
    _print(f"median {np.median(walls):.1f} CPU s per fit, total {time.perf_counter() - t0:.0f} s (load {os.getloadavg()[0]:.1f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=100, help="random halves for the type I error")
    ap.add_argument("--shipped-only", action="store_true", help="without the pbmc3k contrasts (the slowest)")
    ap.add_argument("--null-cells", default="all,80",
                    help="type I error runs: Dendritic cells split in halves, 'all' or a number (comma-separated)")
    ap.add_argument("--no-contrasts", action="store_true", help="only the type I error runs")
    args = ap.parse_args()
    import scontrast

    _print(f"scontrast {scontrast.__version__ if hasattr(scontrast, '__version__') else ''}; machine load "
           f"{os.getloadavg()}; {os.cpu_count()} cores; SPARDA library defaults, random_state 0")
    for name, a in ([] if args.no_contrasts else contrasts(args.shipped_only)):
        _report(evaluate(a, name))
    # all (120 vs 120 cells): the split test; 80 (40 vs 40): the re-optimised permutation test
    for cells in args.null_cells.split(","):
        type_one_error(args.splits, n_cells=None if cells == "all" else int(cells))




# --------------------------------------------------------------------------- #
# Two-sample power against pertpy's distance tests (run with the benchmark venv)
# --------------------------------------------------------------------------- #
def _import_pertpy():
    """pertpy 1.0.3 imports ``multipletests`` from where statsmodels 0.15 no longer has it."""
    try:
        import statsmodels.sandbox.stats.multicomp as multicomp
        import statsmodels.stats.multitest as multitest

        if not hasattr(multicomp, "multipletests"):
            multicomp.multipletests = multitest.multipletests
        import pertpy
    except ImportError as exc:
        raise SystemExit(f"--power needs pertpy (the benchmark venv, .venv-bench): {exc}") from exc
    return pertpy


def power_sample(kind: str, rng: np.random.Generator, n: int = 100, d: int = 30, k: int = 3):
    """Target ``X ~ N(0, I_d)``; background ``Y`` the same except in the first ``k`` genes.

    ``kind``: ``'variance'`` (their sd x 1.6), ``'correlation'`` (equicorrelation 0.7, N(0, 1)
    marginals unchanged) or ``'none'``.
    """
    X = rng.normal(size=(n, d))
    Y = rng.normal(size=(n, d))
    if kind == "variance":
        Y[:, :k] *= 1.6
    elif kind == "correlation":
        C = np.full((k, k), 0.7)
        np.fill_diagonal(C, 1.0)
        Y[:, :k] = rng.multivariate_normal(np.zeros(k), C, size=n)
    return X, Y


def pertpy_pvalues(X, Y, metrics, n_perms: int, seed: int) -> dict:
    """p-value of pertpy's ``DistanceTest`` for each metric, on the genes themselves (no PCA).

    The background group is named so that it sorts first and comes first in the cells, so
    pertpy's two orders of the groups (``unique()`` for the labels, sorted for the computation)
    agree.
    """
    import anndata as ad
    import pandas as pd

    pt = _import_pertpy()
    Z = np.vstack([Y, X])
    obs = pd.DataFrame({"grp": ["a_background"] * Y.shape[0] + ["b_target"] * X.shape[0]},
                       index=[str(i) for i in range(Z.shape[0])])
    adata = ad.AnnData(np.zeros((Z.shape[0], 1), dtype=np.float32), obs=obs)
    adata.obsm["X_genes"] = Z
    out = {}
    for metric in metrics:
        np.random.seed(seed)  # noqa: NPY002 (pertpy permutes with the global numpy RNG)
        test = pt.tl.DistanceTest(metric, n_perms=n_perms, obsm_key="X_genes")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tab = test(adata, groupby="grp", contrast="a_background", show_progressbar=False)
        out[metric] = float(tab.loc["b_target", "pvalue"])
    return out


def energy_pvalue(X, Y, n_perms: int, rng) -> float:
    """The E-test by hand (mean Euclidean distances), a check of pertpy's labelling."""
    from scipy.spatial.distance import cdist

    Z = np.vstack([X, Y])
    D = cdist(Z, Z)
    n = X.shape[0]

    def stat(idx):
        a, b = idx[:n], idx[n:]
        return 2 * D[np.ix_(a, b)].mean() - D[np.ix_(a, a)].mean() - D[np.ix_(b, b)].mean()

    obs = stat(np.arange(Z.shape[0]))
    null = np.array([stat(rng.permutation(Z.shape[0])) for _ in range(n_perms)])
    return float((1 + np.sum(null >= obs)) / (1 + n_perms))


def power(reps: int, metrics=("edistance", "mmd", "wasserstein"), n_perms: int = 199,
          kinds=("variance", "correlation", "none"), first: int = 0) -> None:
    """Rejections at 0.05 of SPARDA (library defaults) and pertpy's tests, d = 30, n = m = 100.

    The SPARDA time is that of the whole default fit (lambda by cross-validation, the
    direction, and the test), CPU seconds of one process with one BLAS thread.  Replicates
    ``first, ..., first + reps - 1`` (each its own seed).
    """
    from scontrast.sparda import SPARDA

    defaults = SPARDA().get_params()
    _print(f"\n== two-sample power at 0.05: d = 30, n = m = 100, {reps} replicates (seeds from {first}); SPARDA "
           f"library defaults "
           f"(test={defaults['test']!r}, n_permutations={defaults['n_permutations']}); pertpy DistanceTest "
           f"{list(metrics)} on the 30 genes, {n_perms} permutations; E-test by hand as a check ==")
    for kind in kinds:
        rej = {"sparda": 0, "energy (by hand)": 0, **{m: 0 for m in metrics}}
        secs = {key: 0.0 for key in rej}
        walls, tests = [], set()
        found = 0
        for r in range(first, first + reps):
            rng = np.random.default_rng(10_000 * ("variance", "correlation", "none").index(kind) + r)
            X, Y = power_sample(kind, rng)
            t, w = time.process_time(), time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = SPARDA(random_state=r).fit(X, Y)
            secs["sparda"] += time.process_time() - t
            walls.append(time.perf_counter() - w)
            tests.add(f"{model.test_['method']} ({model.test_['n_permutations']} permutations)")
            rej["sparda"] += model.pvalue_ <= 0.05
            found += set(range(3)) <= set(model.selected_)
            t = time.process_time()
            rej["energy (by hand)"] += energy_pvalue(X, Y, n_perms, rng) <= 0.05
            secs["energy (by hand)"] += time.process_time() - t
            for metric in metrics:
                t = time.process_time()
                rej[metric] += pertpy_pvalues(X, Y, [metric], n_perms, r)[metric] <= 0.05
                secs[metric] += time.process_time() - t
            if (r + 1 - first) % 10 == 0:
                _print(f"   {kind}: {r + 1 - first} replicates, rejections so far {rej}")
        _print(f"-- {kind}: " + ", ".join(f"{key} {rej[key]}/{reps} ({secs[key] / reps:.2f} CPU s/test)" for key in rej)
               + f"; SPARDA test {', '.join(sorted(tests))}, median wall {np.median(walls):.2f} s; selected all 3 "
               f"changed genes in {found}/{reps}; load {os.getloadavg()[0]:.1f}")


# --------------------------------------------------------------------------- #
# The screen of permute-test statistics that chose the default (run with --variants)
# --------------------------------------------------------------------------- #
# name: (shape part only, penalty 'l1sq' = lam ||beta||_1^2 or 'l1' = lam ||beta||_1, multiple of lam0)
VARIANTS = {
    "full_l1sq_.5": (False, "l1sq", 0.5),  # the previous statistic
    "shape_l1sq_.5": (True, "l1sq", 0.5),
    "shape_l1sq_.25": (True, "l1sq", 0.25),
    "full_l1_1": (False, "l1", 1.0),
    "shape_l1_1": (True, "l1", 1.0),
    "shape_l1_.5": (True, "l1", 0.5),
}
# min-p pairs (the first is the default since this screen: the full divergence and its shape part)
COMBOS = {"minp(full_l1sq_.5,shape_l1sq_.5)": ("full_l1sq_.5", "shape_l1sq_.5"),
          "minp(full_l1sq_.5,shape_l1_1)": ("full_l1sq_.5", "shape_l1_1"),
          "minp(full_l1sq_.5,shape_l1sq_.25)": ("full_l1sq_.5", "shape_l1sq_.25")}


def variant_pvalues(X, Y, n_perms: int, rng) -> dict:
    """p-value of every statistic of ``VARIANTS`` and ``COMBOS`` on the same labellings.

    Genes scaled to unit pooled sd; ``lam0`` (full and centred marginal W2) from 20 random
    relabellings; starts, tightening (50 steps) and min-p as in ``SPARDA._permute_test``,
    except that min-p ties count against the observed labelling here.
    """
    from scontrast.sparda._test import _label_starts, _Labellings, _set_pvalues
    from scontrast.sparda._tighten import _tighten_rows
    from scontrast.sparda._wasserstein import marginal_wasserstein2

    Z = np.vstack([X, Y])
    Z = Z / Z.std(axis=0)
    Z = Z - Z.mean(axis=0)
    n, N = X.shape[0], Z.shape[0]
    canon = Z[np.lexsort(Z.T[::-1])]
    l0 = np.zeros(2)
    for _ in range(20):
        p = rng.permutation(N)
        a, b = canon[p[:n]], canon[p[n:]]
        l0 += [marginal_wasserstein2(a, b).max(), marginal_wasserstein2(a - a.mean(0), b - b.mean(0)).max()]
    l0 /= 20
    perms = rng.permuted(np.broadcast_to(np.arange(N), (n_perms + 1, N)), axis=1)
    perms[0] = np.arange(N)
    stats = {v: np.empty(n_perms + 1) for v in VARIANTS}
    fs = {c: _Labellings(Z, n, c) for c in (False, True)}
    for s in range(0, n_perms + 1, 128):
        e = min(s + 128, n_perms + 1)
        pp = perms[s:e]
        starts = _label_starts(Z, n, pp)
        for v, (centre, kind, mult) in VARIANTS.items():
            lam = mult * l0[int(centre)]
            power = 2 if kind == "l1sq" else 1
            stats[v][s:e] = np.max([_tighten_rows(fs[centre], pp, B0, lam, None, 50, power=power) for B0 in starts],
                                   axis=0)
    ranks = {v: _set_pvalues(t[:, None])[:, 0] for v, t in stats.items()}
    out = {v: float(r[0]) for v, r in ranks.items()}
    for name, (a, b) in COMBOS.items():
        mp = np.minimum(ranks[a], ranks[b])
        out[name] = float((1 + np.sum(mp[1:] <= mp[0])) / (n_perms + 1))
    return out


def variants(reps: int, n_perms: int, kinds, first: int = 0) -> None:
    """Rejections at 0.05 of every screened statistic, the power benchmark's settings and seeds."""
    _print(f"\n== permute-test statistics screened: d = 30, n = m = 100, {reps} replicates (seeds from {first}), "
           f"{n_perms} permutations ==")
    for kind in kinds:
        rej = {}
        t0 = time.process_time()
        for r in range(first, first + reps):
            rng = np.random.default_rng(10_000 * ("variance", "correlation", "none").index(kind) + r)
            X, Y = power_sample(kind, rng)
            for key, p in variant_pvalues(X, Y, n_perms, np.random.default_rng(r + 777)).items():
                rej[key] = rej.get(key, 0) + int(p <= 0.05)
        _print(f"-- {kind}: {reps} replicates, rejections {rej}; {(time.process_time() - t0) / reps:.2f} CPU s per "
               f"replicate (all statistics); load {os.getloadavg()[0]:.1f}")


def main_power() -> None:
    ap = argparse.ArgumentParser(description="SPARDA power against pertpy's distance tests")
    ap.add_argument("--power", action="store_true")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--metrics", default="edistance", help="pertpy metrics (wasserstein: ~10 s per test)")
    ap.add_argument("--kinds", default="variance,correlation,none", help="settings run (comma-separated)")
    ap.add_argument("--first", type=int, default=0, help="first replicate (seed offset)")
    ap.add_argument("--variants", action="store_true",
                    help="instead, the screen of permute-test statistics (no pertpy needed)")
    ap.add_argument("--perms", type=int, default=199, help="permutations of the --variants screen")
    args = ap.parse_args()
    _print(f"machine load {os.getloadavg()}; {os.cpu_count()} cores")
    if args.variants:
        variants(args.reps, args.perms, args.kinds.split(","), args.first)
        return
    power(args.reps, tuple(m for m in args.metrics.split(",") if m), kinds=tuple(args.kinds.split(",")),
          first=args.first)


if __name__ == "__main__":
    import sys

    main_power() if "--power" in sys.argv or "--variants" in sys.argv else main()
