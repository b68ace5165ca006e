"""Latent features + FANGS on real contrasts: gene programmes, enrichment, convergence, time.

Run (from the repository root):  .venv/bin/python -m benchmarks.bench_latent_real [--quick] [--shipped-only]
[--planted-only] [--timing-only] [--moves [--moves-variants V ...]] [--embedding]
[--growth [--growth-iter N] [--growth-budget CPU_S] [--growth-sizes N ...] [--growth-variants V ...]]
Output is printed; the committed copy of a ``--shipped-only`` run is benchmarks/results/bench_latent_real.txt.

Planted benchmark first (:func:`planted_programmes`): 3,000 cells x 60 genes, 4 overlapping
gene programmes of 15 genes (gene sets 0-14, 10-24, 20-34, 30-44; 15 genes carry none), each
raising its genes by ``effect`` (1.0) noise standard deviations; programmes 1 and 2 are enriched
in the target (prevalence 0.5 vs 0.15 and 0.4 vs 0.1), 3 and 4 are not (0.3 in both). Goals:
each programme recovered by a FANGS feature whose top genes (loading above half the feature's
largest) have Jaccard >= 0.7 with its gene set, exactly the enriched ones flagged (BH q <= 0.05),
split R-hat <= 1.1, at the defaults.

Contrasts (each preprocessed by :func:`scontrast.preprocess`, as the workflow does: the two
groups only, QC, log-normalisation, 2,000 highly variable genes within them), loaded with the
SPARDA benchmark's loaders (``benchmarks.bench_sparda_real``):

- ``data/pbmc3k_celltypes.h5ad`` (shipped; 10x PBMC 3k raw counts, 1,859 genes, its
  ``obs['cell_type']``; QC ``bench_sparda_real.PBMC3K_QC``): B vs CD14 monocytes (two distinct
  types), random halves of the CD4 T cells (null), T cells vs all other cells (the timing case
  at the workflow's scale);
- ``data/pbmc68k_reduced.h5ad`` (shipped): CD14+ Monocyte vs CD19+ B (distinct), random halves
  of the Dendritic cells (null);
- ``data/wu2020_tcells_200.h5ad`` (shipped): the workflow's tumour vs NAT contrast.

Per contrast, with the IBP sampler at its defaults (``tl.latent_features(method="ibp")``, the library's default
method being the ensemble of ``benchmarks.bench_latent_ensemble``; then ``tl.fangs``; threads = 2):
chains x sweeps, split R-hat of the log joint and of K, ESS, the posterior K range against the
cap, the FANGS K, and per feature its prevalence in target and background, BH q-value and top
genes; the largest prevalence difference and the number of enriched features (FDR 0.05); wall
time of each step with the machine load (``os.getloadavg()``). Goals: distinct types
-> a feature with prevalence difference >= 0.3 and q <= 0.05; random halves -> no feature with
difference > 0.15 and none significant; K below the cap; R-hat <= 1.1; both steps <= 60 s on
3,000 cells.

``--moves [--moves-variants V ...]`` (:func:`moves_benchmark`; committed output of ``--moves --moves-variants
default gibbs-only --shipped-only``: benchmarks/results/bench_latent_defaults.txt):
the split R-hat of every contrast but the timing one over seeds, at the defaults and without the
noise-scale and death moves of ``LinearGaussianIBP`` (accepted death moves, each chain's mean log
joint and K, wall and CPU seconds with the load).

``--growth`` (:func:`growth_benchmark`): does the posterior number of features grow with the
number of cells? The timing contrast (pbmc3k T cells vs all other cells) and its 50-gene matrix
(``gene_matrix`` of the full contrast, so the genes and their standardisation are the same at
every N); stratified subsamples (both groups in the full contrast's proportion, seed = N) of
N = 250, 500, 1,000 and all cells;
``LinearGaussianIBP(...).fit`` on the rows of that matrix at the defaults, 2 chains in 2 threads,
seed 0. A 100-sweep pilot at the largest N sets n_iter (1,000 when the whole mode fits
``--growth-budget`` CPU seconds, default 2,400, else the largest multiple of 100 that does;
burn_in = n_iter / 2; ``--growth-iter`` fixes it). Per run: each chain's mean K over the kept
sweeps, final K and largest K (and whether it touched the cap), K after 10, 25, 50, 75 and 100%
of the sweeps and the mean K of the second minus the first half of the kept sweeps (is K still
rising?), mean log joint over the kept
sweeps, split R-hat of the log joint and of K, wall / CPU seconds and the load; then one line per
N: mean posterior K (both chains). ``--growth-sizes`` runs a part.

``--embedding`` (:func:`embedding_benchmark`, committed output benchmarks/results/bench_latent_embedding.txt):
the IBP sampler on a PCA embedding instead of genes (``use_rep``): per contrast but the timing one,
``sc.pp.pca`` of the preprocessed log expression of its 2,000 HVGs (centred, genes not scaled,
20 components, random_state 0), each component divided by its standard deviation (so the
default sigma_a = 1 is in units of one component sd, as it is in gene z-scores), the first 10
or all 20 columns (``n_dims``) explained at otherwise default settings, seeds 0-2: the same
numbers per run as the contrasts' table (R-hat, chains' K, FANGS K, largest |prevalence difference|,
features with q <= 0.05), plus the top genes of the feature of largest |prevalence
difference| through its loadings mapped back to genes (sum over components of loading x
component sd x PC gene weights). ``--pca-units`` keeps the components in PCA units instead (the
sampler's own ``scale`` then divides the whole matrix by its overall sd, so PC1 weighs most);
``--noise gene`` gives every component its own noise variance (committed output: the three sections of
bench_latent_embedding.txt, with ``--shipped-only``).
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

from benchmarks.bench_sparda_real import PBMC3K_QC, contrast, load, random_halves
from scontrast.latent_features._simulate import planted_programmes, programme_recovery


def _print(*args):
    print(*args, flush=True)


def run_one(name: str, adata, n_jobs: int = 2, n_genes: int | None = None, **params) -> dict:
    """tl.latent_features (method 'ibp') + tl.fangs on one preprocessed contrast; prints and returns the numbers."""
    from scontrast import tl

    load0 = os.getloadavg()[0]
    c0 = time.process_time()
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tl.latent_features(adata, method="ibp", random_state=0, n_jobs=n_jobs,
                           **({} if n_genes is None else {"n_genes": n_genes}), **params)
        t1 = time.perf_counter()
        tl.fangs(adata, random_state=0, n_jobs=n_jobs)
    t2 = time.perf_counter()
    cpu = time.process_time() - c0
    lf, f = adata.uns["latent_features"], adata.uns["fangs"]
    k = np.asarray(lf["n_features"])
    diff = np.asarray(f.get("feature_difference", []), dtype=float)
    q = np.asarray(f.get("feature_qvalue", []), dtype=float)
    out = {"name": name, "cells": adata.n_obs, "t_latent": t1 - t0, "t_fangs": t2 - t1,
           "rhat_lj": float(lf["rhat_log_joint"]), "rhat_K": float(lf["rhat_K"]), "ess": float(lf["ess_log_joint"]),
           "k_min": int(k.min()), "k_max": int(k.max()), "cap": int(lf["params"]["max_features"]),
           "K": int(f["n_features"]), "max_diff": float(np.max(np.abs(diff), initial=0.0)),
           "n_sig": int(np.sum(q <= 0.05)),
           "best": bool(np.any((np.abs(diff) >= 0.3) & (q <= 0.05)))}
    held = np.asarray(f.get("feature_chain_support", np.ones((out["K"], 1))), dtype=float).min(axis=1, initial=1.0)
    out["n_held"] = int(np.sum(held >= 0.5))
    out["best_held"] = bool(np.any((np.abs(diff) >= 0.3) & (q <= 0.05) & (held >= 0.5)))
    _print(f"\n== {name}: {adata.n_obs} cells ({int(adata.obs['scontrast_target'].sum())} target), "
           f"{lf['n_dims_used']} genes, {np.asarray(lf['log_joint']).shape[0]} chains x {lf['params']['n_iter']} "
           f"sweeps (burn-in {lf['params']['burn_in']})")
    _print(f"  split R-hat log joint {out['rhat_lj']:.3f}, K {out['rhat_K']:.3f}; ESS log joint {out['ess']:.0f}; "
           f"posterior K {out['k_min']}-{out['k_max']} (cap {out['cap']}); FANGS K = {out['K']}")
    _print(f"  time: latent_features {out['t_latent']:.1f} s + fangs {out['t_fangs']:.1f} s = "
           f"{out['t_latent'] + out['t_fangs']:.1f} s wall, {cpu:.1f} s CPU of all threads "
           f"(load {load0:.2f} -> {os.getloadavg()[0]:.2f})")
    for w in list(lf["warnings"]) + list(f["warnings"]):
        _print(f"  WARNING: {w}")
    genes = np.asarray(f.get("feature_top_genes", [""] * out["K"]), dtype=object)
    for j in range(out["K"]):
        _print(f"  F{j + 1}: target {f['feature_prevalence_target'][j]:.2f} background "
               f"{f['feature_prevalence_background'][j]:.2f} q {f['feature_qvalue'][j]:.2g}  held "
               + "/".join(f"{v:.2f}" for v in np.asarray(f["feature_chain_support"])[j])
               + f"  {', '.join(str(genes[j]).split(', ')[:6])}")
    _print(f"  largest |prevalence difference| {out['max_diff']:.2f}; features with q <= 0.05: {out['n_sig']}; "
           f"a feature with |difference| >= 0.3 and q <= 0.05: {out['best']} (and held >= 0.5 by every chain: "
           f"{out['best_held']}); features held >= 0.5 by every chain: {out['n_held']} of {out['K']}")
    return out


def planted_benchmark(n_cells: int = 3000, n_genes: int = 60, seeds=(0, 1, 2), **params) -> list[dict]:
    """tl.latent_features + tl.fangs at the defaults on :func:`planted_programmes`, several seeds."""
    out = []
    for seed in seeds:
        adata, sets, enriched = planted_programmes(n_cells, n_genes, seed=seed)
        r = run_one(f"planted seed {seed}", adata, n_genes=n_genes, **params)
        rec = programme_recovery(adata, sets, enriched)
        converged = r["rhat_lj"] <= 1.1 and r["rhat_K"] <= 1.1
        _print(f"  planted: Jaccard per programme {np.round(rec['jaccard'], 2).tolist()}, flagged "
               f"{rec['flagged'].tolist()} (truth {enriched.tolist()}), other features flagged "
               f"{rec['extra_flagged']}; programmes and flags: {rec['exact']}; both split R-hat <= 1.1: {converged}; "
               f"goal met: {rec['exact'] and converged}")
        out.append({**r, **rec, "exact": rec["exact"] and converged})
    return out


def contrasts(shipped_only: bool):
    """(name, preprocessed AnnData, kind) with kind 'distinct', 'null' or 'other'."""
    d68 = load("pbmc68k")
    yield "pbmc68k CD14+ Mono vs CD19+ B", contrast(d68, "bulk_labels", ["CD14+ Monocyte"], ["CD19+ B"],
                                                      "normalized"), "distinct"
    h = random_halves(d68, "bulk_labels", "Dendritic", 0)
    yield "pbmc68k Dendritic random halves", contrast(h, "half", ["a"], ["b"], "normalized"), "null"
    wu = load("wu2020")
    yield "wu2020 Tumor vs NAT", contrast(wu, "source", ["Tumor"], ["NAT"], "raw"), "other"
    if shipped_only:
        return
    p3 = load("pbmc3k")
    yield "pbmc3k B vs CD14 Mono", contrast(p3, "cell_type", ["B"], ["CD14 Mono"], "raw", **PBMC3K_QC), "distinct"
    h = random_halves(p3, "cell_type", "CD4 T", 0)
    yield "pbmc3k CD4 T random halves", contrast(h, "half", ["a"], ["b"], "raw", **PBMC3K_QC), "null"
    p3.obs["is_t"] = np.where(p3.obs["cell_type"].isin(["CD4 T", "CD8 T"]), "T", "non-T")
    yield "pbmc3k T vs all other cells", contrast(p3, "is_t", ["T"], ["non-T"], "raw", **PBMC3K_QC), "timing"


MOVES = {"default": {}, "gibbs-only": {"noise_scale_moves": False, "death_moves": 0}}  # without the noise-scale and death moves


def moves_benchmark(shipped_only: bool, seeds=(0, 1, 2), pbmc3k_seeds=(0, 1), variants=tuple(MOVES), **params) -> None:
    """Split R-hat per contrast and seed at the defaults and without the noise-scale and death moves.

    LinearGaussianIBP on each contrast's gene matrix (as tl.latent_features builds it), 2 chains in
    2 threads; per run: split R-hat of the log joint / K, each chain's mean log joint and K after
    burn-in (which mode it sits in), the moves accepted per chain, wall and CPU seconds, load.
    pbmc3k's two contrasts get fewer seeds (time); its timing contrast is skipped.
    """
    from scontrast.latent_features import LinearGaussianIBP
    from scontrast.tl._latent_features import gene_matrix

    for name, a, kind in contrasts(shipped_only):
        if kind == "timing":
            continue
        X, _ = gene_matrix(a)
        for vname, extra in ((v, MOVES[v]) for v in variants):
            for seed in (pbmc3k_seeds if name.startswith("pbmc3k") else seeds):
                load0 = os.getloadavg()[0]
                c0, t0 = time.process_time(), time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m = LinearGaussianIBP(random_state=seed, n_jobs=2, **extra, **params).fit(X)
                kept = slice(m.burn_in, None)
                ok = m.rhat_log_joint_ <= 1.1 and m.rhat_K_ <= 1.1
                _print(f"{name:32s} {vname:14s} seed {seed}: R-hat {m.rhat_log_joint_:.2f} / {m.rhat_K_:.2f} "
                       f"{'ok ' if ok else 'BAD'}; chains' log joint {np.round(m.log_joint_[:, kept].mean(1)).astype(int).tolist()}"
                       f" K {np.round(m.n_features_[:, kept].mean(1), 1).tolist()}; accepted death "
                       f"{m.death_accepted_.tolist()}; "
                       f"{time.perf_counter() - t0:.1f} s wall {time.process_time() - c0:.1f} s CPU "
                       f"(load {load0:.1f})")


EMBEDDING_KEY = "X_pca_unit"


def pca_embedding(adata, n_comps: int = 20, key: str = EMBEDDING_KEY, unit_sd: bool = True) -> np.ndarray:
    """PCA of the HVGs' log expression in ``obsm[key]``, each component scaled to unit sd (else in
    PCA units); returns the (n_vars, n_comps) gene weights of the stored columns (PC gene weights
    x the factor each column was divided by)."""
    import scanpy as sc

    a = adata.copy()
    sc.pp.pca(a, n_comps=n_comps, mask_var="highly_variable", random_state=0)
    emb = np.asarray(a.obsm["X_pca"], dtype=np.float64)
    sd = emb.std(axis=0) if unit_sd else np.ones(emb.shape[1])
    adata.obsm[key] = emb / sd
    return np.asarray(a.varm["PCs"], dtype=np.float64) * sd


def embedding_benchmark(shipped_only: bool, dims=(10, 20), seeds=(0, 1, 2), unit_sd: bool = True,
                        **params) -> None:
    """Split R-hat and the biology per contrast, embedding size and seed with ``use_rep`` (a PCA).

    tl.latent_features (``use_rep`` = :func:`pca_embedding`, ``n_dims`` = 10 or 20, chains' seed =
    the seed) + tl.fangs on each contrast but the timing one (2 threads); per run: split R-hat,
    the chains' K, FANGS K, the largest |prevalence difference|, the features with q <= 0.05, and
    the top genes of the feature of largest |prevalence difference|.
    """
    from scontrast import tl

    for name, a, kind in contrasts(shipped_only):
        if kind == "timing":
            continue
        weights = pca_embedding(a, max(dims), unit_sd=unit_sd)
        for n_dims in dims:
            for seed in seeds:
                b = a.copy()
                load0 = os.getloadavg()[0]
                c0, t0 = time.process_time(), time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    tl.latent_features(b, method="ibp", use_rep=EMBEDDING_KEY, n_dims=n_dims, random_state=seed,
                                       n_jobs=2, **params)
                    tl.fangs(b, random_state=seed, n_jobs=2)
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                lf, f = b.uns["latent_features"], b.uns["fangs"]
                k = np.asarray(lf["K"])[:, lf["params"]["burn_in"]:]
                diff = np.asarray(f.get("feature_difference", []), dtype=float)
                q = np.asarray(f.get("feature_qvalue", []), dtype=float)
                ok = lf["rhat_log_joint"] <= 1.1 and lf["rhat_K"] <= 1.1 and k.max() < lf["params"]["max_features"]
                best = bool(np.any((np.abs(diff) >= 0.3) & (q <= 0.05)))
                goal = {"distinct": f"goal (|diff| >= 0.3, q <= 0.05) {'met' if best else 'NOT met'}",
                        "null": "goal (none > 0.15, none significant) "
                                + ("met" if np.abs(diff).max(initial=0.0) <= 0.15 and not np.any(q <= 0.05)
                                   else "NOT met")}.get(kind, f"|diff| >= 0.3 and q <= 0.05: {best}")
                top = ""
                if diff.size:
                    j = int(np.argmax(np.abs(diff)))
                    g = np.asarray(f["loadings"], dtype=np.float64)[j] @ weights[:, :n_dims].T
                    top = (f"; F{j + 1} (diff {diff[j]:+.2f}) top genes "
                           f"{', '.join(b.var_names[np.argsort(-g)[:5]].astype(str))}")
                units = "" if unit_sd else " (PCA units)"
                _print(f"{name:32s} {kind:8s} PCA {n_dims}{units} seed {seed}: R-hat {lf['rhat_log_joint']:.2f} / "
                       f"{lf['rhat_K']:.2f} {'ok ' if ok else 'BAD'}; chains' K {np.round(k.mean(1), 1).tolist()} "
                       f"max {int(k.max())}; FANGS K {int(f['n_features'])}, max |diff| "
                       f"{np.abs(diff).max(initial=0.0):.2f}, q <= 0.05: {int(np.sum(q <= 0.05))}; {goal}; "
                       f"{wall:.1f} s wall {cpu:.1f} s CPU (load {load0:.1f}){top}")


GROWTH_SIZES = (250, 500, 1000, 2698)
GROWTH_VARIANTS = {"default": {}}


def stratified_subsample(target: np.ndarray, n: int, seed: int) -> np.ndarray:
    """Sorted indices of ``n`` cells drawn without replacement, each group (``target`` bool) in its
    proportion (the target gets round(n x its fraction)); all cells when n >= their number."""
    target = np.asarray(target, dtype=bool)
    if n >= target.size:
        return np.arange(target.size)
    rng = np.random.default_rng(seed)
    n_t = int(round(n * target.mean()))
    idx_t, idx_b = np.flatnonzero(target), np.flatnonzero(~target)
    return np.sort(np.concatenate([rng.choice(idx_t, n_t, replace=False), rng.choice(idx_b, n - n_t, replace=False)]))


def _growth_fit(X, n_iter: int, burn_in: int, **extra) -> dict:
    """One LinearGaussianIBP fit (2 chains, 2 threads, seed 0) with its numbers."""
    from scontrast.latent_features import LinearGaussianIBP

    load0 = os.getloadavg()[0]
    c0, t0 = time.process_time(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = LinearGaussianIBP(n_iter=n_iter, burn_in=burn_in, n_chains=2, n_jobs=2, random_state=0, **extra).fit(X)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    kept = slice(burn_in, None)
    K = np.asarray(m.n_features_)
    marks = [max(1, round(n_iter * f)) for f in (0.1, 0.25, 0.5, 0.75, 1.0)]
    half = K[:, kept]
    return {"model": m, "wall": wall, "cpu": cpu, "load": (load0, os.getloadavg()[0]),
            "k_mean": K[:, kept].mean(1), "k_final": K[:, -1], "k_max": K.max(1),
            "k_marks": (marks, K[:, [s - 1 for s in marks]]),
            "k_drift": half[:, half.shape[1] // 2:].mean(1) - half[:, :half.shape[1] // 2].mean(1),
            "cap": int(m.max_features), "lj_mean": np.asarray(m.log_joint_)[:, kept].mean(1),
            "rhat_lj": float(m.rhat_log_joint_), "rhat_K": float(m.rhat_K_)}


def growth_benchmark(sizes=GROWTH_SIZES, n_iter: int | None = None, budget_cpu: float = 2400.0,
                     variants=tuple(GROWTH_VARIANTS)) -> list[dict]:
    """Posterior K against the number of cells N, at the defaults.

    See the module docstring (``--growth``). ``n_iter`` None: a 100-sweep pilot at the largest N
    gives the CPU seconds per sweep, taken as proportional to N to
    estimate the whole mode; n_iter = 1,000 if it fits ``budget_cpu`` (pilot included), else the
    largest multiple of 100 that does (at least 200). burn_in = n_iter // 2. ``variants``: the
    keys of ``GROWTH_VARIANTS`` to run.
    """
    from scontrast.latent_features import LinearGaussianIBP
    from scontrast.tl._latent_features import gene_matrix

    name, a = next((name, a) for name, a, kind in contrasts(False) if kind == "timing")
    X_full, genes = gene_matrix(a)
    target = a.obs["scontrast_target"].to_numpy(dtype=bool)
    sizes = sorted({min(int(n), a.n_obs) for n in sizes})
    _print(f"\n== growth: {name}, {a.n_obs} cells ({int(target.sum())} target), {X_full.shape[1]} genes "
           f"(gene_matrix of the full contrast); N = {sizes}; variants "
           f"{ {v: GROWTH_VARIANTS[v] for v in variants} }")
    spent = 0.0
    if n_iter is None:
        idx = stratified_subsample(target, sizes[-1], sizes[-1])
        per_sweep = {}
        for vname in variants:
            r = _growth_fit(X_full[idx], 100, 50, **GROWTH_VARIANTS[vname])
            spent += r["cpu"]
            per_sweep[vname] = r["cpu"] / 100
            _print(f"  pilot N = {sizes[-1]} {vname}: 100 sweeps {r['wall']:.1f} s wall {r['cpu']:.1f} s CPU "
                   f"(load {r['load'][0]:.2f} -> {r['load'][1]:.2f}); K after 100 sweeps {r['k_final'].tolist()}")
        per_iter = sum(per_sweep.values()) * sum(sizes) / sizes[-1]
        fit = int((budget_cpu - spent) / per_iter // 100 * 100)
        n_iter = max(200, min(1000, fit))
        _print(f"  estimated {per_iter:.2f} CPU s per sweep of every run (linear in N), {spent:.0f} s spent on the "
               f"pilot of a {budget_cpu:.0f} s budget: n_iter = {n_iter}"
               f"{'' if n_iter == 1000 else ' (scaled DOWN from the default 1000 to fit the budget)'}")
    burn_in = n_iter // 2
    _print(f"  n_iter {n_iter}, burn_in {burn_in} (kept sweeps {n_iter - burn_in}); cap: default "
           f"{LinearGaussianIBP().max_features}")
    rows = []
    for n in sizes:
        idx = stratified_subsample(target, n, n)
        X = X_full[idx]
        row = {"N": n, "target": int(target[idx].sum())}
        for vname in variants:
            r = _growth_fit(X, n_iter, burn_in, **GROWTH_VARIANTS[vname])
            spent += r["cpu"]
            row[vname] = r
            touched = (r["k_max"] >= r["cap"]).tolist()
            _print(f"  N {n:5d} ({row['target']} target) {vname:8s}: chains' mean K {np.round(r['k_mean'], 1).tolist()}"
                   f" final K {r['k_final'].tolist()} max K {r['k_max'].tolist()} touched cap {r['cap']}: {touched}; "
                   f"mean log joint {np.round(r['lj_mean']).astype(int).tolist()}; split R-hat log joint "
                   f"{r['rhat_lj']:.2f} K {r['rhat_K']:.2f}; {r['wall']:.1f} s wall {r['cpu']:.1f} s CPU (load {r['load'][0]:.2f} -> "
                   f"{r['load'][1]:.2f})")
            marks, km = r["k_marks"]
            _print(f"        K after sweep {marks}: " + "; ".join(f"chain {c + 1} {km[c].tolist()}" for c in range(len(km)))
                   + f"; mean K in the 2nd - 1st half of the kept sweeps {np.round(r['k_drift'], 1).tolist()}")
        rows.append(row)
    if set(variants) != set(GROWTH_VARIANTS):
        return rows
    _print(f"\n== posterior K against N ({n_iter} sweeps, burn-in {burn_in}; mean over both chains' kept sweeps; "
           f"{spent:.0f} s CPU in all)")
    _print(f"  {'N':>5s}  {'K':>5s}  {'max K':>5s}  {'drift':>5s}  {'R-hat lj':>8s}")
    for row in rows:
        d = row["default"]
        _print(f"  {row['N']:5d}  {d['k_mean'].mean():5.1f}  {int(d['k_max'].max()):5d}  {d['k_drift'].mean():5.1f}  "
               f"{d['rhat_lj']:8.2f}")
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shipped-only", action="store_true", help="without the pbmc3k contrasts (the slowest)")
    ap.add_argument("--quick", action="store_true", help="200 sweeps (100 burn-in): a smoke run, not the evidence")
    ap.add_argument("--planted-only", action="store_true", help="only the planted benchmark")
    ap.add_argument("--timing-only", action="store_true", help="only the 3,000-cell timing contrast (pbmc3k)")
    ap.add_argument("--moves", action="store_true",
                    help="only R-hat over seeds, the defaults against the Gibbs steps alone (moves_benchmark)")
    ap.add_argument("--moves-variants", nargs="+", choices=list(MOVES), default=list(MOVES),
                    help="with --moves: the sampler settings to compare (default all)")
    ap.add_argument("--embedding", action="store_true",
                    help="only the sampler on a 10- / 20-component PCA embedding (embedding_benchmark)")
    ap.add_argument("--growth", action="store_true",
                    help="only posterior K against the number of cells on pbmc3k T vs all (growth_benchmark)")
    ap.add_argument("--growth-iter", type=int, default=None,
                    help="with --growth: sweeps per chain (default: from a 100-sweep pilot and --growth-budget)")
    ap.add_argument("--growth-sizes", type=int, nargs="+", default=list(GROWTH_SIZES),
                    help="with --growth: the numbers of cells (default 250 500 1000 2698)")
    ap.add_argument("--growth-variants", nargs="+", choices=list(GROWTH_VARIANTS), default=list(GROWTH_VARIANTS),
                    help="with --growth: the sampler settings to run")
    ap.add_argument("--growth-budget", type=float, default=2400.0,
                    help="with --growth: CPU seconds the whole mode may take (default 2400)")
    ap.add_argument("--pca-units", action="store_true", help="with --embedding: components not scaled to unit sd")
    ap.add_argument("--noise", choices=["shared", "gene"], default=None,
                    help="with --embedding: the sampler's noise model (default: the library's)")
    args = ap.parse_args(argv)
    params = {"n_iter": 200, "burn_in": 100} if args.quick else {}
    _print(f"bench_latent_real: method ibp, library defaults{' (QUICK: ' + str(params) + ')' if params else ''}"
           f"{'; PCA units' if args.pca_units else ''}{'; noise ' + args.noise if args.noise else ''}; "
           f"load {os.getloadavg()}, {os.cpu_count()} cores")
    if args.growth:
        growth_benchmark(args.growth_sizes, n_iter=args.growth_iter or params.get("n_iter"),
                         budget_cpu=args.growth_budget, variants=args.growth_variants)
        return
    if args.moves:
        moves_benchmark(args.shipped_only, variants=args.moves_variants, **params)
        return
    if args.embedding:
        extra = {} if args.noise is None else {"noise": args.noise}
        embedding_benchmark(args.shipped_only, unit_sd=not args.pca_units, **params, **extra)
        return
    if args.timing_only:
        for name, a, kind in contrasts(False):
            if kind == "timing":
                r = run_one(name, a, **params)
                _print(f"  {r['cells']} cells in {r['t_latent'] + r['t_fangs']:.1f} s <= 60 s: "
                       f"{r['t_latent'] + r['t_fangs'] <= 60}")
        return
    planted = planted_benchmark(**params)
    _print(f"\n== planted: goal met in {sum(p['exact'] for p in planted)} of {len(planted)} seeds; split R-hat "
           f"log joint {[round(p['rhat_lj'], 3) for p in planted]}, K {[round(p['rhat_K'], 3) for p in planted]}")
    if args.planted_only:
        return
    results = [(kind, run_one(name, a, **params)) for name, a, kind in contrasts(args.shipped_only)]
    _print("\n== goals")
    for kind, r in results:
        conv = r["rhat_lj"] <= 1.1 and r["rhat_K"] <= 1.1 and r["k_max"] < r["cap"]
        line = f"  {r['name']}: R-hat <= 1.1 and K below cap: {conv}"
        if kind == "distinct":
            line += f"; feature with |diff| >= 0.3 and q <= 0.05: {r['best']}"
        if kind == "null":
            line += f"; max |diff| {r['max_diff']:.2f} <= 0.15 and none significant: " \
                    f"{r['max_diff'] <= 0.15 and r['n_sig'] == 0}"
        if kind == "timing":
            tot = r["t_latent"] + r["t_fangs"]
            line += f"; {r['cells']} cells in {tot:.1f} s <= 60 s: {tot <= 60}"
        _print(line)


if __name__ == "__main__":
    main()
