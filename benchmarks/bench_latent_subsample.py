"""What ``latent_features.max_cells`` (the chains on a stratified subsample) changes on real contrasts.

Run (from the repository root):  .venv/bin/python -m benchmarks.bench_latent_subsample [--fraction 0.33]
Output is printed; the committed copy is benchmarks/results/bench_latent_subsample.txt.

The default ``max_cells`` (5,000) is above every real contrast at hand, so the effect is measured
by setting it to a third of each contrast's cells: ``tl.latent_features`` + ``tl.fangs`` at the
defaults (seed 0, 2 threads) on all cells and with ``max_cells`` = ``fraction`` x cells, on the
real contrasts of ``benchmarks.bench_latent_real`` (pbmc68k, wu2020 and pbmc3k, all shipped in
``data/``) and its planted programmes (3,000 cells). Per contrast: time, split
R-hat, FANGS K, enriched features, largest prevalence difference (``bench_latent_real.run_one``),
and per feature of the full run its best match in the subsample run: the share of cells on which
the two agree (a feature or its complement) and the Jaccard index of their top genes.
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.bench_latent_real import _print, contrasts, planted_programmes, programme_recovery, run_one


def _top_genes(adata) -> list[set]:
    genes = np.asarray(adata.uns["fangs"].get("feature_top_genes", []), dtype=object)
    return [set(str(g).split(", ")) for g in genes]


def matches(full, sub) -> list[tuple[float, float]]:
    """For each FANGS feature of ``full``: (cells agreeing with its best match in ``sub``, top-gene Jaccard)."""
    F, S = (np.asarray(x.obsm["fangs_features"], dtype=bool) if "fangs_features" in x.obsm
            else np.zeros((x.n_obs, 0), dtype=bool) for x in (full, sub))
    gf, gs = _top_genes(full), _top_genes(sub)
    out = []
    for j in range(F.shape[1]):
        if S.shape[1] == 0:
            out.append((float("nan"), 0.0))
            continue
        agree = np.array([max(np.mean(F[:, j] == S[:, k]), np.mean(F[:, j] != S[:, k])) for k in range(S.shape[1])])
        k = int(np.argmax(agree))
        jac = len(gf[j] & gs[k]) / max(len(gf[j] | gs[k]), 1) if j < len(gf) and k < len(gs) else float("nan")
        out.append((float(agree[k]), float(jac)))
    return out


def compare(name: str, adata, fraction: float) -> None:
    max_cells = max(50, int(fraction * adata.n_obs))
    full_a, sub_a = adata.copy(), adata.copy()
    full = run_one(f"{name}: all cells", full_a)
    sub = run_one(f"{name}: max_cells={max_cells}", sub_a, max_cells=max_cells)
    _print(f"  subsample recorded in uns: {dict(sub_a.uns['latent_features'].get('subsample', {}))}")
    _print(f"  -> time {full['t_latent']:.1f} s -> {sub['t_latent']:.1f} s; FANGS K {full['K']} -> {sub['K']}; "
           f"enriched {full['n_sig']} -> {sub['n_sig']}; largest |difference| {full['max_diff']:.2f} -> "
           f"{sub['max_diff']:.2f}; R-hat {full['rhat_lj']:.3f} -> {sub['rhat_lj']:.3f}")
    for j, (agree, jac) in enumerate(matches(full_a, sub_a)):
        _print(f"  full F{j + 1}: best subsample feature agrees on {agree:.1%} of cells, top genes Jaccard {jac:.2f}")


def _refit(adata, max_cells) -> None:
    """tl.latent_features with the IBP sampler (the method ``max_cells`` subsamples) + tl.fangs, seed 0, 2 threads."""
    import warnings

    from scontrast import tl

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tl.latent_features(adata, method="ibp", random_state=0, n_jobs=2, max_cells=max_cells)
        tl.fangs(adata, random_state=0, n_jobs=2)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fraction", type=float, default=1 / 3)
    p.add_argument("--shipped-only", action="store_true")
    args = p.parse_args(argv)
    a, sets, enriched = planted_programmes(3000)
    for max_cells in (None, int(args.fraction * 3000)):
        b = a.copy()
        _refit(b, max_cells)
        rec = programme_recovery(b, sets, enriched)
        _print(f"\n== planted programmes, max_cells={max_cells}: Jaccard {np.round(rec['jaccard'], 2).tolist()}, "
               f"flagged {rec['flagged'].tolist()} (enriched {enriched.tolist()}), extra flagged {rec['extra_flagged']}")
    for name, adata, kind in contrasts(args.shipped_only):
        compare(f"{name} ({kind})", adata, args.fraction)


if __name__ == "__main__":
    main()
