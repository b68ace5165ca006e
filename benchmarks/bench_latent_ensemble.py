"""Latent features by the resampled ensemble: do two seeds agree, is K bounded in N, what do they mean?

Run (from the repository root):  .venv/bin/python -m benchmarks.bench_latent_ensemble [--part P ...] [--shipped-only]
Parts: ``agreement``, ``planted``, ``growth`` (all by default). Output is printed; the committed copy of a full
run is benchmarks/results/bench_latent_ensemble.txt.

Everything runs at the library defaults of ``tl.latent_features`` (method ``'ensemble'``) and ``tl.fangs``,
2 threads, as the workflow's rules do.

- ``agreement``: the contrasts of ``benchmarks.bench_latent_real`` but its timing one (pbmc68k CD14+ Mono vs
  CD19+ B, pbmc68k Dendritic random halves, wu2020 Tumor vs NAT: seeds 0, 1, 2; pbmc3k B vs CD14 Mono and CD4 T
  random halves (``data/pbmc3k_celltypes.h5ad``): seeds 0, 1), 13 contrast-seed runs.
  Each run is repeated with seed + 100 and the two answers compared: the findings (FANGS features
  held at >= 0.8 by both ensemble halves, ``uns['fangs']['feature_supported']``) of each matched in the other
  with Jaccard >= 0.8 (``fangs.feature_support``), and the FARO loss between the two FANGS estimates (a = 1)
  per cell <= 0.05. Per run: chosen K, stability per K, the FANGS features (prevalence in target and
  background, q, support per half, top genes), the largest |prevalence difference|, wall time of both steps
  and the load.
- ``planted``: ``bench_latent_real.planted_programmes`` (3,000 cells, 4 overlapping programmes, 2 enriched),
  seeds 0-2: gene-set Jaccard of each programme's best feature (>= 0.7) and the flagged features
  (exactly the enriched ones), with ``bench_latent_real.programme_recovery``; time on 3,000 cells.
- ``growth``: pbmc3k T cells vs all other cells, its 50-gene matrix (``gene_matrix`` of the whole contrast);
  N = 1,000 (stratified subsample), all 2,698, and 10,000 and 50,000 by tiling the cells (each copy
  jittered by N(0, 0.05^2) per entry of the z-scores, so that no two rows are equal): the chosen K at each N
  (goal: K at 50k <= 1.5 x K at 1k) and the time of ``tl.latent_features`` + ``tl.fangs`` on the AnnData
  holding that matrix (goal: <= 3 min at 50,000 cells).
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

from benchmarks.bench_latent_real import contrasts, planted_programmes, programme_recovery

AGREEMENT_SEEDS = {"shipped": (0, 1, 2), "pbmc3k": (0, 1)}
SECOND_SEED = 100


def _print(*args):
    print(*args, flush=True)


def run(adata, seed: int, n_genes: int | None = None):
    """tl.latent_features + tl.fangs at the defaults on a copy of ``adata``: (the copy, seconds, load before)."""
    from scontrast import tl

    a = adata.copy()
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tl.latent_features(a, random_state=seed, n_jobs=2, **({} if n_genes is None else {"n_genes": n_genes}))
        tl.fangs(a, random_state=seed, n_jobs=2)
    return a, time.perf_counter() - t0, load0


def describe(name: str, a, seconds: float, load0: float) -> None:
    """Print one run: K, stability, each FANGS feature."""
    lf, f = a.uns["latent_features"], a.uns["fangs"]
    stab = np.asarray(lf["stability"], dtype=float)
    _print(f"  {name}: chosen K {int(lf['n_features_chosen'])}; stability per K "
           f"{', '.join(f'{v:.2f}' for v in stab[np.isfinite(stab)])}; FANGS K {int(f['n_features'])}; "
           f"{seconds:.1f} s (load {load0:.2f} -> {os.getloadavg()[0]:.2f})")
    for w in list(lf["warnings"]) + list(f["warnings"]):
        _print(f"    WARNING: {w}")
    genes = np.asarray(f.get("feature_top_genes", [""] * int(f["n_features"])), dtype=object)
    support = np.asarray(f["feature_chain_support"])
    for j in range(int(f["n_features"])):
        tag = "finding" if bool(np.asarray(f["feature_supported"])[j]) else "UNSUPPORTED"
        _print(f"    F{j + 1} ({tag}): target {f['feature_prevalence_target'][j]:.2f} background "
               f"{f['feature_prevalence_background'][j]:.2f} q {f['feature_qvalue'][j]:.2g} held "
               + "/".join(f"{v:.2f}" for v in support[j]) + f"  {', '.join(str(genes[j]).split(', ')[:6])}")


def _estimate(a) -> np.ndarray:
    """FANGS' estimate (cells x K); with K = 0 ``tl.fangs`` writes no ``obsm`` entry."""
    if "fangs_features" in a.obsm:
        return np.asarray(a.obsm["fangs_features"])
    return np.zeros((a.n_obs, 0), dtype=np.uint8)


def findings(a) -> np.ndarray:
    """The FANGS estimate's supported features (cells x findings)."""
    f = a.uns["fangs"]
    return _estimate(a)[:, np.asarray(f["feature_supported"], dtype=bool)]


def agreement(a, b) -> dict:
    """Findings of each matched in the other (Jaccard), FARO loss per cell between the two estimates."""
    from scontrast.fangs import faro_loss, feature_support

    fa, fb = findings(a), findings(b)
    ea, eb = _estimate(a), _estimate(b)
    ab = feature_support([eb], fa)[0][:, 0] if fa.shape[1] else np.zeros(0)
    ba = feature_support([ea], fb)[0][:, 0] if fb.shape[1] else np.zeros(0)
    loss = faro_loss(ea, eb) / ea.shape[0]
    ok = bool((ab >= 0.8).all() and (ba >= 0.8).all() and loss <= 0.05)
    return {"ab": ab, "ba": ba, "loss": loss, "ok": ok}


def max_difference(a) -> tuple[float, int]:
    f = a.uns["fangs"]
    diff = np.asarray(f.get("feature_difference", []), dtype=float)
    q = np.asarray(f.get("feature_qvalue", []), dtype=float)
    return float(np.max(np.abs(diff), initial=0.0)), int(np.sum(q <= 0.05))


def agreement_part(shipped_only: bool) -> list[dict]:
    _print("\n# agreement: every contrast-seed run against the same run at seed + 100")
    rows = []
    for name, adata, kind in contrasts(shipped_only):
        if kind == "timing":
            continue
        seeds = AGREEMENT_SEEDS["pbmc3k" if name.startswith("pbmc3k") else "shipped"]
        _print(f"\n== {name} ({kind}): {adata.n_obs} cells ({int(adata.obs['scontrast_target'].sum())} target)")
        for seed in seeds:
            a, ta, la = run(adata, seed)
            b, tb, lb = run(adata, seed + SECOND_SEED)
            describe(f"seed {seed}", a, ta, la)
            describe(f"seed {seed + SECOND_SEED}", b, tb, lb)
            ag = agreement(a, b)
            diff, n_sig = max_difference(a)
            held = np.asarray(a.uns["fangs"]["feature_chain_support"]).min(axis=1, initial=1.0)
            findings_held = bool((held[np.asarray(a.uns["fangs"]["feature_supported"], bool)] >= 0.8).all())
            _print(f"  agreement seed {seed} vs {seed + SECOND_SEED}: findings matched a->b "
                   f"{np.round(ag['ab'], 2).tolist()} b->a {np.round(ag['ba'], 2).tolist()}; FARO loss / cells "
                   f"{ag['loss']:.4f}; agree: {ag['ok']}; largest |difference| {diff:.2f}, q <= 0.05: {n_sig}")
            rows.append({"name": name, "kind": kind, "seed": seed, "ok": ag["ok"], "diff": diff, "n_sig": n_sig,
                         "K": int(a.uns["fangs"]["n_features"]), "findings": int(findings(a).shape[1]),
                         "held": findings_held, "seconds": ta})
    _print("\n# agreement summary (13 runs with pbmc3k)")
    for r in rows:
        meaning = ""
        if r["kind"] == "null":
            meaning = f"; null: largest |difference| {r['diff']:.2f} (<= 0.1: {r['diff'] <= 0.1}), enriched {r['n_sig']}"
        elif r["kind"] == "distinct":
            meaning = f"; distinct: largest |difference| {r['diff']:.2f} (>= 0.3: {r['diff'] >= 0.3})"
        _print(f"  {r['name']} seed {r['seed']}: K {r['K']}, findings {r['findings']} (all held >= 0.8 by both "
               f"halves: {r['held']}); two seeds agree: {r['ok']}{meaning}; {r['seconds']:.1f} s")
    _print(f"  runs agreeing: {sum(r['ok'] for r in rows)} of {len(rows)}")
    return rows


def planted_part(seeds=(0, 1, 2)) -> None:
    _print("\n# planted: 3,000 cells x 60 genes, 4 overlapping programmes, 1 and 2 enriched in the target")
    for seed in seeds:
        adata, sets, enriched = planted_programmes(3000, 60, seed=seed)
        a, t, load0 = run(adata, seed, n_genes=60)
        describe(f"planted seed {seed}", a, t, load0)
        rec = programme_recovery(a, sets, enriched)
        _print(f"  planted seed {seed}: Jaccard per programme {np.round(rec['jaccard'], 2).tolist()}, flagged "
               f"{rec['flagged'].tolist()} (truth {enriched.tolist()}), other features flagged {rec['extra_flagged']}; "
               f"goal met: {rec['exact']}; latent_features + fangs {t:.1f} s on 3,000 cells")


def _tiled(X: np.ndarray, target: np.ndarray, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rows: all of X repeated, then a random part, each copy after the first jittered by N(0, 0.05^2)."""
    reps = -(-n // X.shape[0])
    rows = np.concatenate([np.arange(X.shape[0])] * reps)[:n]
    out = X[rows] + np.where(np.arange(n)[:, None] >= X.shape[0], rng.normal(scale=0.05, size=(n, X.shape[1])), 0.0)
    return out, target[rows]


def growth_part(sizes=(1000, None, 10_000, 50_000)) -> None:
    import anndata as ad
    import pandas as pd

    from benchmarks.bench_latent_real import stratified_subsample
    from scontrast.tl._latent_features import gene_matrix

    name, full = next((n, a) for n, a, kind in contrasts(False) if kind == "timing")
    X, names = gene_matrix(full, "highly_variable", 50)
    target = full.obs["scontrast_target"].to_numpy(bool)
    _print(f"\n# growth: {name}, its {X.shape[1]}-gene matrix; K at each number of cells")
    ks = {}
    for n in sizes:
        n = X.shape[0] if n is None else n
        if n <= X.shape[0]:
            rows = np.arange(n) if n == X.shape[0] else stratified_subsample(target, n, seed=n)
            Xn, tn = X[rows], target[rows]
        else:
            Xn, tn = _tiled(X, target, n, np.random.default_rng(n))
        adata = ad.AnnData(X=Xn.astype(np.float32), obs=pd.DataFrame({"scontrast_target": tn},
                                                                     index=[f"c{i}" for i in range(n)]),
                           var=pd.DataFrame({"highly_variable": np.ones(X.shape[1], bool)}, index=names))
        a, t, load0 = run(adata, 0, n_genes=X.shape[1])
        describe(f"N = {n}", a, t, load0)
        ks[n] = int(a.uns["latent_features"]["n_features_chosen"])
        _print(f"  N = {n}: chosen K {ks[n]}, FANGS K {int(a.uns['fangs']['n_features'])}; latent_features + fangs "
               f"{t:.1f} s")
    lo, hi = min(ks), max(ks)
    _print(f"  K at {hi} cells / K at {lo} cells: {ks[hi]} / {ks[lo]} (goal <= 1.5x: {ks[hi] <= 1.5 * max(ks[lo], 1)})")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", nargs="+", choices=["agreement", "planted", "growth"],
                        default=["agreement", "planted", "growth"])
    parser.add_argument("--shipped-only", action="store_true")
    args = parser.parse_args(argv)
    _print(f"bench_latent_ensemble: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    if "planted" in args.part:
        planted_part()
    if "agreement" in args.part:
        agreement_part(args.shipped_only)
    if "growth" in args.part:
        growth_part()


if __name__ == "__main__":
    main()
