"""QUADRO on real contrasts: balanced error and AUC against three baselines.

Data (log-normalised counts, 10,000 per cell, log1p; candidate genes = the dataset's
2,000 most dispersed genes by scanpy's seurat flavour, or all genes when fewer,
chosen without the labels):

- ``data/wu2020_tcells_200.h5ad`` (shipped; 200 T cells): CD8 (clusters 8.*) vs CD4
  (4.*) clusters; Tumor vs NAT; Blood vs Tumor.
- ``data/pbmc68k_reduced.h5ad`` (shipped; 700 cells, its log-normalised ``X``; 765 genes):
  CD14+ Monocyte vs CD19+ B; CD4+/CD25 T Reg vs CD8+ Cytotoxic T; CD56+ NK vs the rest (1:21);
  a co-expression-only contrast built from real cells (``coexpression_contrast``: the monocytes and
  B cells split in halves, every gene permuted on its own in one half: same gene-wise
  distributions, no co-expression), where only gene pairs can separate the halves.
- ``data/pbmc3k_celltypes.h5ad`` (shipped; 10x PBMC 3k raw counts after the scanpy tutorial's
  QC, 2,625 cells x 1,859 genes, its ``obs['cell_type']``: see ``data/README.md``): B vs CD14
  Mono; CD8 T vs CD4 T; NK vs every other cell; Dendritic vs CD14 Mono; random halves of the
  CD4 T cells (a null: AUC should be near 0.5).

Methods, all scored on the same 5 stratified outer folds (those of
``scontrast.quadro.cross_validated_scores`` for seed 0), target = the first group named:

- QUADRO: ``scontrast.tl.quadro`` with its defaults (nested CV; each fit keeps 50 of the
  candidate genes by their one-gene Rayleigh quotient on its training cells;
  class_weight balanced).
- logistic on 50 PCs: standardise the candidates, PCA(50), LogisticRegression
  (class_weight balanced, C = 1), all fitted on the training folds.
- L1-logistic on the same genes: the same fold-wise gene screen (50 genes), standardise,
  LogisticRegressionCV (L1, liblinear, class_weight balanced, C in logspace(-3, 1, 9), tol 1e-3,
  5 folds, balanced accuracy). scikit-learn's default 10 Cs reach C = 1e4, where liblinear's L1
  solver crawls on nearly separable cells (> 10 CPU-min on pbmc3k); C <= 10 on standardised
  genes costs well under a second and chose C = 0.1 there.
- Augur (pertpy 1.0.3, random forest, its defaults: 50 subsamples of 20 cells per group,
  3 folds), run with the repository's ``.venv-bench/bin/python`` in a subprocess on the same
  cells and candidate genes; Augur reports only its AUC (its own subsampled CV).

Goals: QUADRO's balanced error <= the PC logistic's + 0.02 on each real
contrast; AUC <= 0.6 on random halves.

``--seeds S ...`` repeats QUADRO and the PC logistic over other seeds (outer folds, QUADRO's
inner folds, PCA) for the contrasts of ``--only``: with a few dozen cells in the small group one
cell moves the balanced error by 1/(2 n_small), and one seed's folds say little.

Usage (from the repository root): python -m benchmarks.bench_quadro_real [--out FILE]
[--only NAME ...] [--no-augur] [--n-jobs N] [--seeds S ...] [--params JSON]
(``--params``: QUADRO parameters other than its defaults, e.g. '{"estimator": "sample"}', for trials)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
PBMC3K = ROOT / "data" / "pbmc3k_celltypes.h5ad"
BENCH_PYTHON = ROOT / ".venv-bench" / "bin" / "python"
OUTER_CV = 5
SEED = 0


def _lognorm(counts) -> sp.csr_matrix:
    X = sp.csr_matrix(counts, dtype=np.float64)
    total = np.asarray(X.sum(axis=1)).ravel()
    X = sp.diags(1e4 / np.maximum(total, 1.0)) @ X
    X.data = np.log1p(X.data)
    return X.tocsr()


def _candidates(logX, names, n_top=2000) -> tuple[np.ndarray, np.ndarray]:
    """(cells x candidate genes) dense log-expression and the gene names (label-free HVGs)."""
    import scanpy as sc

    a = ad.AnnData(logX.copy(), var=pd.DataFrame(index=names))
    if a.n_vars > n_top:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sc.pp.highly_variable_genes(a, n_top_genes=n_top, flavor="seurat")
        keep = a.var["highly_variable"].to_numpy()
    else:
        keep = np.ones(a.n_vars, dtype=bool)
    X = a.X[:, keep]
    return (X.toarray() if sp.issparse(X) else np.asarray(X)), np.asarray(names)[keep]


def wu2020() -> list[dict]:
    a = ad.read_h5ad(ROOT / "data" / "wu2020_tcells_200.h5ad")
    X, genes = _candidates(_lognorm(a.X), a.var_names)
    cl = a.obs["cluster_orig"].astype(str).to_numpy()
    src = a.obs["source"].astype(str).to_numpy()
    out = []
    for name, t, b in (("wu2020 CD8 vs CD4 clusters", np.char.startswith(cl.astype(str), "8."),
                        np.char.startswith(cl.astype(str), "4.")),
                       ("wu2020 Tumor vs NAT", src == "Tumor", src == "NAT"),
                       ("wu2020 Blood vs Tumor", src == "Blood", src == "Tumor")):
        out.append(_contrast(name, X, genes, t, b))
    return out


def pbmc68k() -> list[dict]:
    a = ad.read_h5ad(ROOT / "data" / "pbmc68k_reduced.h5ad")
    norm = a.raw.to_adata() if a.raw is not None else a  # the shipped file holds the log-normalised X
    X, genes = _candidates(sp.csr_matrix(norm.X, dtype=np.float64), norm.var_names)
    lab = a.obs["bulk_labels"].astype(str).to_numpy()
    return [
        _contrast("pbmc68k CD14 Mono vs B", X, genes, lab == "CD14+ Monocyte", lab == "CD19+ B"),
        _contrast("pbmc68k Treg vs CD8 cytotoxic", X, genes, lab == "CD4+/CD25 T Reg", lab == "CD8+ Cytotoxic T"),
        _contrast("pbmc68k NK vs rest (1:21)", X, genes, lab == "CD56+ NK", lab != "CD56+ NK"),
        coexpression_contrast("pbmc68k Mono+B mixture vs its gene-wise permutation (co-expression only)", X, genes,
                              (lab == "CD14+ Monocyte") | (lab == "CD19+ B")),
    ]


def coexpression_contrast(name, X, genes, cells) -> dict:
    """Real cells whose groups differ only in co-expression.

    The ``cells`` (a mixture of two cell types, so that the markers of one type rise and fall
    together) are split at random into halves; the target half is kept as it is, and in the
    background half every gene is permuted on its own across that half's cells. Each gene's
    distribution is then the same in both halves (up to sampling), the gene-gene correlations are
    gone from the background: only a rule with gene pairs can tell the halves apart.
    """
    rng = np.random.default_rng(SEED)
    idx = rng.permutation(np.flatnonzero(cells))
    target, background = idx[: idx.size // 2], idx[idx.size // 2:]
    B = X[background].copy()
    for j in range(B.shape[1]):
        B[:, j] = B[rng.permutation(B.shape[0]), j]
    return {"name": name, "X": np.vstack([X[target], B]), "genes": genes,
            "y": np.r_[np.ones(target.size, dtype=bool), np.zeros(background.size, dtype=bool)], "null": False}


def pbmc3k_labels(path):
    """(log-normalised cells x genes, gene names, k-means cell-type labels) of pbmc3k's raw counts.

    ``path``: 10x Genomics' raw-count pbmc3k .h5ad of all its genes (the recipe of
    ``data/pbmc3k_cd4_counts.h5ad``, see ``benchmarks.bench_donors.pbmc3k_cd4_counts``). QC as the scanpy tutorial (>= 200
    genes, < 5 % mitochondrial), k-means (12 clusters, 30 PCs of the scaled 2,000 HVGs, seed 0)
    named by marker means (IL7R/CCR7, CD8A/CD8B, MS4A1/CD79A, CD14/LYZ, FCGR3A/MS4A7,
    GNLY/NKG7, FCER1A/CST3, PPBP).
    """
    import scanpy as sc
    from sklearn.cluster import KMeans

    a = ad.read_h5ad(path)
    a.var_names_make_unique()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sc.pp.filter_cells(a, min_genes=200)
        sc.pp.filter_genes(a, min_cells=3)
        mito = np.asarray(a[:, a.var_names.str.startswith("MT-")].X.sum(axis=1)).ravel()
        a = a[mito / np.asarray(a.X.sum(axis=1)).ravel() < 0.05].copy()
        logX = _lognorm(a.X)
        b = ad.AnnData(logX.copy(), var=pd.DataFrame(index=a.var_names))
        sc.pp.highly_variable_genes(b, n_top_genes=2000, flavor="seurat")
        b = b[:, b.var["highly_variable"]].copy()
        sc.pp.scale(b, max_value=10)
        sc.pp.pca(b, n_comps=30, random_state=0)
    km = KMeans(12, n_init=10, random_state=0).fit(b.obsm["X_pca"]).labels_
    markers = {"CD4 T": ["IL7R", "CCR7"], "CD8 T": ["CD8A", "CD8B"], "B": ["MS4A1", "CD79A"],
               "CD14 Mono": ["CD14", "LYZ"], "FCGR3A Mono": ["FCGR3A", "MS4A7"], "NK": ["GNLY", "NKG7"],
               "DC": ["FCER1A", "CST3"], "Mk": ["PPBP"]}
    col = {g: i for i, g in enumerate(a.var_names)}
    means = np.array([[np.mean([logX[km == k][:, col[g]].mean() for g in gs]) for gs in markers.values()]
                      for k in range(12)])
    # z-score each marker set over clusters, then name each cluster by its top set
    z = (means - means.mean(axis=0)) / means.std(axis=0)
    names = np.array(list(markers))[np.argmax(z, axis=1)]
    return logX, np.asarray(a.var_names), names[km]


def pbmc3k() -> list[dict]:
    a = ad.read_h5ad(PBMC3K)
    X, genes = _candidates(_lognorm(a.X), np.asarray(a.var_names))
    lab = a.obs["cell_type"].astype(str).to_numpy()
    print(f"# pbmc3k cell types ({PBMC3K.name}): " +
          ", ".join(f"{k} {v}" for k, v in pd.Series(lab).value_counts().items()))
    cd4 = np.flatnonzero(lab == "CD4 T")
    half = np.zeros(lab.size, dtype=bool)
    half[np.random.default_rng(SEED).permutation(cd4)[: cd4.size // 2]] = True
    return [
        _contrast("pbmc3k B vs CD14 Mono", X, genes, lab == "B", lab == "CD14 Mono"),
        _contrast("pbmc3k CD8 T vs CD4 T", X, genes, lab == "CD8 T", lab == "CD4 T"),
        _contrast("pbmc3k NK vs rest", X, genes, lab == "NK", lab != "NK"),
        _contrast("pbmc3k Dendritic vs CD14 Mono", X, genes, lab == "Dendritic", lab == "CD14 Mono"),
        _contrast("pbmc3k CD4 T random halves (null)", X, genes, half, (lab == "CD4 T") & ~half, null=True),
    ]


def _contrast(name, X, genes, target, background, null=False) -> dict:
    used = target | background
    return {"name": name, "X": X[used], "genes": genes, "y": target[used], "null": null}


# ----------------------------------------------------------------------------- methods


def outer_folds(y, seed=SEED):
    """The outer folds of ``cross_validated_scores(..., random_state=seed)``."""
    from sklearn.model_selection import StratifiedKFold

    from scontrast.core import check_random_state, spawn_seed

    return list(StratifiedKFold(OUTER_CV, shuffle=True, random_state=spawn_seed(check_random_state(seed))).split(
        np.zeros(y.size), y))


def run_quadro(c: dict, n_jobs: int = 1, seed: int = SEED, params: dict | None = None) -> dict:
    from scontrast import tl
    from scontrast.core import TARGET_KEY

    a = ad.AnnData(c["X"], var=pd.DataFrame({"highly_variable": True}, index=c["genes"]))
    a.obs[TARGET_KEY] = c["y"]
    t, cpu = time.perf_counter(), time.process_time()
    tl.quadro(a, n_genes=None, outer_cv=OUTER_CV, random_state=seed, n_jobs=n_jobs, **(params or {}))
    sec, cpu = time.perf_counter() - t, time.process_time() - cpu
    q = a.uns["quadro"]
    return {"balanced_error": float(q["balanced_error"]), "auc": float(q["auc"]), "error": float(q["cv_error"]),
            "seconds": sec, "cpu": cpu, "n_pairs": len(q["interactions"]["weight"]), "lambda1": list(q["fold_lambda1"]),
            "pairs": [f"{i}:{j} {w:+.3g}" for i, j, w in zip(q["interactions"]["gene_i"], q["interactions"]["gene_j"],
                                                               q["interactions"]["weight"], strict=True)],
            "warnings": list(q["warnings"]), "score": a.obs["quadro_score"].to_numpy()}


def _scored(y, folds, make):
    from sklearn.metrics import roc_auc_score

    from scontrast.quadro import balanced_error

    dec = np.empty(y.size)
    pred = np.empty(y.size, dtype=bool)
    t = time.perf_counter()
    for tr, te in folds:
        m = make().fit(c_X[tr], y[tr])
        dec[te] = m.decision_function(c_X[te])
        pred[te] = m.predict(c_X[te])
    return {"balanced_error": balanced_error(y, pred), "auc": float(roc_auc_score(y, dec)),
            "error": float(np.mean(pred != y)), "seconds": time.perf_counter() - t}


c_X = None  # the current contrast's matrix (set by run_baselines)


def run_baselines(c: dict, seed: int = SEED, l1: bool = True) -> dict:
    from sklearn.decomposition import PCA
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from scontrast.quadro import RayleighScreen

    global c_X
    c_X = c["X"]
    y = c["y"]
    folds = outer_folds(y, seed)
    n_pc = min(50, c_X.shape[1], int(0.8 * y.size) - 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", FutureWarning)  # LogisticRegressionCV's 1.10 API notices
        pcs = _scored(y, folds, lambda: make_pipeline(
            StandardScaler(), PCA(n_pc, random_state=seed),
            LogisticRegression(class_weight="balanced", max_iter=5000)))
        if not l1:
            return {"logistic 50 PCs": pcs}
        cpu = time.process_time()
        lasso = _scored(y, folds, lambda: make_pipeline(
            RayleighScreen(k=50), StandardScaler(),
            LogisticRegressionCV(Cs=np.logspace(-3, 1, 9), cv=5, penalty="l1", solver="liblinear",
                                 class_weight="balanced", scoring="balanced_accuracy", tol=1e-3, max_iter=1000,
                                 random_state=seed)))
        lasso["cpu"] = time.process_time() - cpu
    return {"logistic 50 PCs": pcs, "L1-logistic same genes": lasso}


AUGUR_SCRIPT = r"""
import json, sys, warnings
warnings.filterwarnings("ignore")
import statsmodels.stats.multitest as mt, statsmodels.sandbox.stats.multicomp as mc
mc.multipletests = mt.multipletests  # pertpy 1.0.3 imports it from its old place
import anndata as ad, pertpy as pt
a = ad.read_h5ad(sys.argv[1])
ag = pt.tl.Augur("random_forest_classifier")
loaded = ag.load(a, label_col="label", cell_type_col="cell_type")
try:
    _, res = ag.predict(loaded, n_threads=1, random_state=0)
    how = "select_variance_features=True"
except Exception as exc:  # the loess variance filter needs enough genes
    _, res = ag.predict(loaded, n_threads=1, random_state=0, select_variance_features=False)
    how = f"select_variance_features=False ({type(exc).__name__})"
print(json.dumps({"auc": float(res["summary_metrics"]["pair"]["mean_augur_score"]), "how": how}))
"""


def run_augur(c: dict) -> dict:
    if not BENCH_PYTHON.exists():
        return {"auc": float("nan"), "note": f"{BENCH_PYTHON} absent"}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pair.h5ad"
        a = ad.AnnData(c["X"].astype(np.float32), var=pd.DataFrame(index=c["genes"]))
        a.obs["label"] = pd.Categorical(np.where(c["y"], "target", "background"), categories=["background", "target"])
        a.obs["cell_type"] = "pair"
        a.write_h5ad(path)
        t = time.perf_counter()
        run = subprocess.run([str(BENCH_PYTHON), "-c", AUGUR_SCRIPT, str(path)], capture_output=True, text=True,
                             timeout=3600, env={**os.environ, "OMP_NUM_THREADS": "1"})
        sec = time.perf_counter() - t
    if run.returncode != 0:
        return {"auc": float("nan"), "note": run.stderr.strip().splitlines()[-1][:200] if run.stderr else "failed"}
    out = json.loads(run.stdout.strip().splitlines()[-1])
    return {"auc": out["auc"], "note": out["how"], "seconds": sec}


# ----------------------------------------------------------------------------- report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_quadro_real.txt"))
    parser.add_argument("--only", nargs="*", default=None, help="substrings of the contrast names to run")
    parser.add_argument("--no-augur", action="store_true")
    parser.add_argument("--n-jobs", type=int, default=2, help="QUADRO's n_jobs (the workflow rule's threads: 2)")
    parser.add_argument("--params", default="{}",
                        help="JSON dict of QUADRO parameters other than the defaults (e.g. '{\"estimator\": \"sample\"}')")
    parser.add_argument("--seeds", type=int, nargs="*", default=None,
                        help="instead of the table: QUADRO and the PC logistic over these seeds")
    args = parser.parse_args(argv)
    params = json.loads(args.params)
    lines = []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    say(f"# bench_quadro_real, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"load average {os.getloadavg()[0]:.2f} at start, QUADRO n_jobs={args.n_jobs}"
        + (f", QUADRO parameters {params}" if params else ""))
    contrasts = wu2020() + pbmc68k() + pbmc3k()
    if args.only:
        contrasts = [c for c in contrasts if any(s in c["name"] for s in args.only)]
    if args.seeds is not None:
        for c in contrasts:
            n1 = int(c["y"].sum())
            say(f"\n## {c['name']} ({n1} vs {c['y'].size - n1} cells): balanced error by seed (one cell of the "
                f"smaller group = {1 / (2 * min(n1, c['y'].size - n1)):.3f})")
            say(f"{'seed':>4}{'QUADRO':>9}{'logistic 50 PCs':>17}{'QUADRO CPU s':>14}{'load':>6}  fold lambda1")
            qs, ps = [], []
            for seed in args.seeds:
                q = run_quadro(c, args.n_jobs, seed, params)
                p = run_baselines(c, seed, l1=False)["logistic 50 PCs"]
                qs.append(q["balanced_error"])
                ps.append(p["balanced_error"])
                say(f"{seed:>4}{q['balanced_error']:>9.3f}{p['balanced_error']:>17.3f}{q['cpu']:>14.1f}"
                    f"{os.getloadavg()[0]:>6.1f}  {', '.join(f'{v:.3g}' for v in q['lambda1'])}")
            diff = np.array(qs) - np.array(ps)
            say(f"mean{np.mean(qs):>9.3f}{np.mean(ps):>17.3f}   QUADRO - logistic {diff.mean():+.3f} "
                f"(se over seeds {diff.std(ddof=1) / np.sqrt(diff.size):.3f}); goal <= +0.02")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text("\n".join(lines) + "\n")
        return
    rows = []
    for c in contrasts:
        n1, n0 = int(c["y"].sum()), int((~c["y"]).sum())
        say(f"\n## {c['name']}: {n1} target vs {n0} background cells (1:{max(n1, n0) / min(n1, n0):.1f}), "
            f"{c['X'].shape[1]} candidate genes; majority baseline: error {min(n1, n0) / (n1 + n0):.3f}, "
            "balanced error 0.5")
        load0 = os.getloadavg()[0]
        q = run_quadro(c, args.n_jobs, params=params)
        base = run_baselines(c)
        aug = {"auc": float("nan"), "note": "not run (--no-augur)"} if args.no_augur else run_augur(c)
        say(f"{'method':<26}{'bal. error':>11}{'AUC':>8}{'error':>8}{'seconds':>9}")
        say(f"{'QUADRO':<26}{q['balanced_error']:>11.3f}{q['auc']:>8.3f}{q['error']:>8.3f}{q['seconds']:>9.1f}"
            f"   (CPU {q['cpu']:.1f} s; load {load0:.2f} -> {os.getloadavg()[0]:.2f}; {q['n_pairs']} gene pairs in the final model; "
            f"fold lambda1 {', '.join(f'{v:.3g}' for v in q['lambda1'])})")
        for name, r in base.items():
            say(f"{name:<26}{r['balanced_error']:>11.3f}{r['auc']:>8.3f}{r['error']:>8.3f}{r['seconds']:>9.1f}"
                + (f"   (CPU {r['cpu']:.1f} s)" if "cpu" in r else ""))
        say(f"{'Augur (random forest)':<26}{'':>11}{aug['auc']:>8.3f}{'':>8}{aug.get('seconds', float('nan')):>9.1f}"
            f"   ({aug['note']})")
        if q["pairs"]:
            say(f"  QUADRO gene pairs (final model): {'; '.join(q['pairs'][:10])}")
        for w in q["warnings"]:
            say(f"  QUADRO warning: {w}")
        ref = base["logistic 50 PCs"]["balanced_error"]
        if c["null"]:
            goal = f"null: QUADRO AUC {q['auc']:.3f} <= 0.6: {'met' if q['auc'] <= 0.6 else 'NOT met'}"
        else:
            ok = q["balanced_error"] <= ref + 0.02
            goal = (f"QUADRO balanced error {q['balanced_error']:.3f} <= PC logistic {ref:.3f} + 0.02: "
                    f"{'met' if ok else 'NOT met'}")
        say("goal: " + goal)
        rows.append((c["name"], q, base, aug))
    say("\n# summary: balanced error (AUC)")
    say(f"{'contrast':<36}{'QUADRO':>16}{'logistic 50 PCs':>18}{'L1-logistic':>16}{'Augur AUC':>11}"
        f"{'QUADRO s':>10}{'CPU s':>8}")
    for name, q, base, aug in rows:
        p, l1 = base["logistic 50 PCs"], base["L1-logistic same genes"]
        say(f"{name:<36}{q['balanced_error']:>8.3f} ({q['auc']:.3f}){p['balanced_error']:>10.3f} ({p['auc']:.3f})"
            f"{l1['balanced_error']:>8.3f} ({l1['auc']:.3f}){aug['auc']:>11.3f}{q['seconds']:>10.1f}{q['cpu']:>8.1f}")
    say(f"# load average at the end {os.getloadavg()[0]:.2f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
