"""Donors and samples: do p-values, errors and enrichments hold at the level of the replicate?

Five parts; every number is printed with the machine load.

1. ``--splits``: donor-split nulls on the shipped wu2020 T cells. The T cells of one tissue (NAT,
   then Tumor) of the patients with >= 4 such cells are split into two sets of patients (every
   split into halves, or ``--max-splits`` of them evenly spaced): no condition differs, only the
   donors. Each split is run as a user would, with the library defaults, twice: with
   ``replicate: patient`` declared and without (today's behaviour). Reported per split and in
   total: SPARDA's p (replicate test / cell-level permute test), QUADRO's cross-validated AUC
   (folds holding out patients / cells), the pseudobulk DESeq2 genes at padj < 0.05 (declared
   only), the cell-level E-test users run from pertpy (computed by hand on 30 PCs, 199
   permutations; pertpy 1.0.3's own labels its p-values in the wrong order, see ANCHORS.md) and,
   with ``--fangs``, whether FANGS calls any feature enriched.
2. ``--paired``: Tumor vs NAT paired by patient (6 patients with >= 3 cells in both): SPARDA's
   replicate test and its genes next to PyDESeq2's ``~patient + source`` pseudobulk.
3. ``--sim N``: pseudo-donors of real cells (pbmc3k CD4 T cells, raw counts, the shipped
   ``data/pbmc3k_cd4_counts.h5ad``: a panel of their 300 most variable genes among those seen
   in >= 20% of the cells, see data/README.md): ``--donors`` (6) donors per group,
   each ``--cells`` (60) cells drawn from the pool, every donor's genes scaled by exp(N(0, 0.3^2))
   (Poisson resampling of the counts), and, in the target donors, a planted effect in 5 genes
   shared by every donor: ``none`` (type I error), ``mean`` (counts x 2: a mean shift), or
   ``spread`` (a per-cell factor exp(N(0, 0.8^2) - 0.32) common to the 5 genes: their spread
   and co-expression change, their mean does not). Reported: the share of simulations where
   SPARDA's replicate test (p <= 0.05), PyDESeq2 pseudobulk (a planted gene at padj < 0.05, or
   for ``none`` any gene) and the cell-level E-test (p <= 0.05) reject. SPARDA runs with
   ``k=5`` here, which skips the lambda cross-validation: the test's statistic does not depend
   on the chosen lambda, only the reported genes do.

4. ``--matched N_NULL N_POWER [--quadro]``: on the same simulated data sets as 3, pseudobulk
   DESeq2's power at the padj threshold that rejects 5% of the null simulations (its own "any
   gene at padj < 0.05" rejects more), and QUADRO's cross-validated AUC under the null with folds
   holding out donors and over cells (about 80 s per null data set on a loaded 2-core machine).
5. ``--sim-enrichment N``: FANGS's feature enrichment when donors' prevalences differ and the
   groups do not (4 vs 4, 6 vs 6 and 6 paired donors): replicate-level against cell-level test.

6. ``--compare N_NULL N_POWER [--designs 6v6 4v4 paired] [--scenarios ...]``: SPARDA's replicate
   test (location, divergence and shape parts, min-p) against its two distributional parts alone,
   its location part alone, pseudobulk DESeq2 and limma-trend (each at padj < 0.05 and at the
   smallest-padj threshold matched to 5% of the design's null data sets) and the cell-level E-test,
   on the same pseudo-donor data sets drawn from the shipped ``data/pbmc3k_cd4_counts.h5ad``
   (:func:`simulate_design`: 6 vs 6, 4 vs 4 or 6 paired donors of ``--cells`` cells; no effect, a 2x
   mean shift, a spread change with the mean kept, a sub-state in 10-30% of the target cells, or a
   mixture of the three); two other combinations of the same parts are printed beside them.
   ``--sparda-splits``: the replicate test alone on the wu2020 donor splits of 1 (library defaults).
   ``--timing``: seconds of the replicate test at 6 vs 6 donors, 2,000 genes, 5,000 cells.

Usage (from the repository root): python -m benchmarks.bench_donors [--splits] [--paired]
[--sim N] [--scenarios none mean spread] [--max-splits K] [--fangs] [--matched N_NULL N_POWER]
[--quadro] [--sim-enrichment N] [--compare N_NULL N_POWER] [--designs ...] [--sparda-splits]
[--timing] [--seed S]
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import sys
import time
import warnings
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

REPO = Path(__file__).resolve().parents[1]
WU2020 = REPO / "data" / "wu2020_tcells_200.h5ad"
PBMC3K_CD4 = REPO / "data" / "pbmc3k_cd4_counts.h5ad"
PRE = dict(min_genes=20, n_top_genes=1000)  # the demo config's wu2020 settings


def say(*args):
    print(*args, flush=True)


def quiet():
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)


# --------------------------------------------------------------------------- the E-test users run


def etest(adata: ad.AnnData, n_perm: int = 199, seed: int = 0) -> float:
    """Energy-distance permutation test over cells on 30 PCs of the HVGs (pertpy's E-test, by hand)."""
    from scipy.spatial.distance import cdist
    from sklearn.decomposition import PCA

    X = adata.X[:, adata.var["highly_variable"].to_numpy()]
    X = X.toarray() if sp.issparse(X) else np.asarray(X)
    pcs = PCA(min(30, X.shape[1], X.shape[0] - 1), random_state=0).fit_transform(X)
    D = cdist(pcs, pcs)
    t = adata.obs["scontrast_target"].to_numpy()

    def stat(lab):
        return 2 * D[np.ix_(lab, ~lab)].mean() - D[np.ix_(lab, lab)].mean() - D[np.ix_(~lab, ~lab)].mean()

    rng = np.random.default_rng(seed)
    obs = stat(t)
    null = [stat(rng.permutation(t)) for _ in range(n_perm)]
    return (1 + sum(v >= obs for v in null)) / (1 + n_perm)


# --------------------------------------------------------------------------- 1. donor splits


def patient_splits(patients: list[str], max_splits: int) -> list[tuple[str, ...]]:
    """Every split of the patients into halves (first half's patients), each unordered split once."""
    R = len(patients)
    half = R // 2
    combos = [c for c in itertools.combinations(patients, half) if R % 2 or patients[0] in c]
    if len(combos) > max_splits:
        combos = [combos[i] for i in np.linspace(0, len(combos) - 1, max_splits).round().astype(int)]
    return combos


def run_split(cells: ad.AnnData, first: tuple[str, ...], declared: bool, fangs: bool) -> dict:
    from scontrast import tl
    from scontrast.preprocess import preprocess

    a = cells.copy()
    a.obs["half"] = np.where(a.obs["patient"].astype(str).isin(first), "A", "B")
    out = {}
    pp = preprocess(a, groupby="half", target=["A"], background=["B"], replicate="patient" if declared else None, **PRE)
    tl.sparda(pp, random_state=0)
    out["sparda_p"] = float(pp.uns["sparda"]["pvalue"])
    out["sparda_test"] = str(pp.uns["sparda"]["test"]["method"])
    tl.quadro(pp, random_state=0)
    out["quadro_auc"] = float(pp.uns["quadro"]["auc"])
    out["etest_p"] = etest(pp)
    if declared:
        tl.pseudobulk(pp)
        out["pseudobulk_genes"] = int(pp.uns["pseudobulk"]["n_significant"])
    if fangs:
        tl.latent_features(pp, random_state=0)
        tl.fangs(pp, random_state=0)
        out["fangs_enriched"] = int(np.sum(pp.uns["fangs"].get("feature_enriched", [])))
        out["fangs_max_diff"] = float(np.max(np.abs(pp.uns["fangs"].get("feature_difference", [0.0]))))
    return out


def donor_splits(max_splits: int, fangs: bool, sources=("NAT", "Tumor")) -> None:
    raw = ad.read_h5ad(WU2020)
    for source in sources:
        cells = raw[raw.obs["source"] == source].copy()
        counts = cells.obs["patient"].astype(str).value_counts()
        patients = sorted(counts.index[counts >= 4])
        cells = cells[cells.obs["patient"].astype(str).isin(patients)].copy()
        splits = patient_splits(patients, max_splits)
        say(f"\n## {source} T cells of {len(patients)} patients with >= 4 cells ({cells.n_obs} cells): "
            f"{len(splits)} splits {len(patients) // 2} vs {len(patients) - len(patients) // 2} by patient "
            f"(load {os.getloadavg()[0]:.2f})")
        say("split (first half) | SPARDA p: replicate / cell | QUADRO AUC: patient folds / cell folds | E-test p (cells) "
            "| pseudobulk genes" + (" | FANGS enriched: declared / undeclared" if fangs else ""))
        rows = []
        t0 = time.time()
        for first in splits:
            dec = run_split(cells, first, True, fangs)
            und = run_split(cells, first, False, fangs)
            rows.append((dec, und))
            extra = f" | {dec['fangs_enriched']} / {und['fangs_enriched']}" if fangs else ""
            say(f"{'+'.join(first):40s} | {dec['sparda_p']:.3f} / {und['sparda_p']:.3f} | {dec['quadro_auc']:.2f} / "
                f"{und['quadro_auc']:.2f} | {und['etest_p']:.3f} | {dec['pseudobulk_genes']}{extra}")
        n = len(rows)
        rej_d = sum(d["sparda_p"] <= 0.05 for d, _ in rows)
        rej_u = sum(u["sparda_p"] <= 0.05 for _, u in rows)
        band = 0.05 + 2 * np.sqrt(0.05 * 0.95 / n)
        say(f"SPARDA p <= 0.05: declared {rej_d}/{n} ({rej_d / n:.2f}; nominal 0.05, binomial 2-sd band <= {band:.2f}), "
            f"undeclared {rej_u}/{n} ({rej_u / n:.2f})")
        # every split of the patients is one relabelling (a split and its mirror once): the exact floor
        say(f"  the replicate test's floor with these designs: 1/{len(patient_splits(patients, 10**9))} = "
            f"{1 / len(patient_splits(patients, 10**9)):.4f} (exact over the patients' relabellings)")
        auc_d = np.mean([d["quadro_auc"] for d, _ in rows])
        auc_u = np.mean([u["quadro_auc"] for _, u in rows])
        say(f"QUADRO mean AUC: patient folds {auc_d:.3f} (goal 0.5 +- 0.1), cell folds {auc_u:.3f}")
        say(f"E-test (cells) p <= 0.05: {sum(u['etest_p'] <= 0.05 for _, u in rows)}/{n}")
        say(f"pseudobulk DESeq2, splits with a gene at padj < 0.05: {sum(d['pseudobulk_genes'] > 0 for d, _ in rows)}/{n}")
        if fangs:
            say(f"FANGS, splits with an enriched feature: declared {sum(d['fangs_enriched'] > 0 for d, _ in rows)}/{n}, "
                f"undeclared {sum(u['fangs_enriched'] > 0 for _, u in rows)}/{n}")
        say(f"({time.time() - t0:.0f} s, load {os.getloadavg()[0]:.2f})")


# --------------------------------------------------------------------------- 2. paired Tumor vs NAT


def paired_tumour_vs_nat() -> None:
    from scontrast import tl
    from scontrast.preprocess import preprocess

    raw = ad.read_h5ad(WU2020)
    say(f"\n## Tumor vs NAT, paired by patient (load {os.getloadavg()[0]:.2f})")
    for declared in (True, False):
        pp = preprocess(raw, groupby="source", target=["Tumor"], background=["NAT"],
                        replicate="patient" if declared else None, paired=declared, **PRE)
        tl.sparda(pp, random_state=0)
        s = pp.uns["sparda"]
        genes = ", ".join(map(str, s["selected_genes"][:10]))
        say(f"{'declared (paired)' if declared else 'undeclared (cells)':20s}: {pp.n_obs} cells; SPARDA {s['test']['method']} "
            f"test p = {s['pvalue']:.4f}; genes: {genes}")
        if declared:
            t = s["test"]
            say(f"  {t['design']}: {t['n_labellings']} relabellings (exact: {bool(t['exact'])}), smallest possible p "
                f"{t['floor']:.4f}; parts: divergence p {t['divergence_pvalue']:.3f}, shape p {t['shape_pvalue']:.3f}")
            tl.pseudobulk(pp)
            pb = pp.uns["pseudobulk"]
            top = pp.var.sort_values("pseudobulk_pvalue").head(8)
            say(f"  PyDESeq2 {pb['design_formula']}: {pb['n_significant']} genes at padj < 0.05 of {pb['n_tested']} "
                f"tested; smallest p: " + ", ".join(f"{g} (p {r.pseudobulk_pvalue:.2g}, padj {r.pseudobulk_padj:.2g}, "
                                                     f"log2FC {r.pseudobulk_log2fc:+.2f})" for g, r in top.iterrows()))
            sel = [str(g) for g in s["selected_genes"]]
            ranks = pp.var["pseudobulk_pvalue"].rank()
            say("  SPARDA's genes' pseudobulk p-value ranks: " + ", ".join(
                f"{g} {int(ranks[g]) if np.isfinite(ranks[g]) else 'untested'}" for g in sel[:10]))


# --------------------------------------------------------------------------- 3. pseudo-donor simulation


def pbmc3k_cd4_counts(raw_path) -> tuple[sp.csr_matrix, np.ndarray]:
    """Raw counts of the pbmc3k CD4 T cells (labels of bench_quadro_real) on their 300-gene panel, and its genes.

    ``raw_path``: 10x Genomics' raw pbmc3k matrix (.h5ad, all genes). The recipe of the shipped
    ``data/pbmc3k_cd4_counts.h5ad``, which the simulations read (:func:`shipped_cd4_pool`).
    """
    import scanpy as sc

    from benchmarks.bench_quadro_real import pbmc3k_labels

    _, names, lab = pbmc3k_labels(raw_path)
    a = ad.read_h5ad(raw_path)
    a.var_names_make_unique()
    sc.pp.filter_cells(a, min_genes=200)
    sc.pp.filter_genes(a, min_cells=3)
    mito = np.asarray(a[:, a.var_names.str.startswith("MT-")].X.sum(axis=1)).ravel()
    a = a[mito / np.asarray(a.X.sum(axis=1)).ravel() < 0.05].copy()
    assert a.n_obs == lab.size and np.array_equal(np.asarray(a.var_names), names)
    keep = lab == "CD4 T"
    C = sp.csr_matrix(a.X[keep])
    # the 300 most variable (log-normalised) of the genes seen in at least 20% of the cells: a panel
    # every method sees whole (SPARDA's 100 test genes are then chosen among them without labels)
    expressed = np.flatnonzero(np.asarray((C > 0).mean(axis=0)).ravel() >= 0.2)
    logc = np.log1p(C[:, expressed].multiply(1e4 / np.asarray(C.sum(axis=1))).toarray())
    panel = expressed[np.sort(np.argsort(-logc.var(axis=0))[:300])]
    return C[:, panel], names[panel]


def simulate(C: np.ndarray, genes: np.ndarray, scenario: str, donors: int, cells: int,
             rng: np.random.Generator) -> tuple[ad.AnnData, np.ndarray]:
    """Pseudo-donors of real cells (``C``: the pool's dense counts); the planted genes (indices) of the target donors."""
    mean = C.mean(axis=0)
    candidates = np.flatnonzero((mean > 2) & (mean < 30))   # well expressed: visible after log-normalisation
    planted = rng.choice(candidates, 5, replace=False)
    rows, donor, target = [], [], []
    for d in range(2 * donors):
        idx = rng.choice(C.shape[0], cells, replace=False)
        lam = C[idx] * np.exp(rng.normal(0, 0.3, size=C.shape[1]))[None, :]
        is_t = d < donors
        if is_t and scenario == "mean":
            lam[:, planted] *= 2.0
        elif is_t and scenario == "spread":
            lam[:, planted] *= np.exp(rng.normal(0, 0.8, size=(cells, 1)) - 0.32)
        rows.append(rng.poisson(lam))
        donor += [f"d{d}"] * cells
        target += [is_t] * cells
    obs = pd.DataFrame({"group": np.where(target, "T", "B"), "donor": donor}, index=[f"c{i}" for i in range(len(donor))])
    adata = ad.AnnData(sp.csr_matrix(np.vstack(rows).astype(np.float32)), obs=obs, var=pd.DataFrame(index=genes))
    return adata, planted


def simulation(n_sims: int, scenarios: list[str], donors: int, cells: int, seed: int) -> None:
    from scontrast import tl
    from scontrast.preprocess import preprocess

    dense_pool, genes = shipped_cd4_pool()
    say(f"\n## Pseudo-donor simulation: {donors} vs {donors} donors of {cells} pbmc3k CD4 T cells each "
        f"({dense_pool.shape[0]} in the pool, {genes.size} genes), donor log-sd 0.3, {n_sims} simulations per scenario "
        f"(load {os.getloadavg()[0]:.2f})")
    for scenario in scenarios:
        rng = np.random.default_rng([seed, ["none", "mean", "spread"].index(scenario)])
        hits = {"sparda": 0, "pseudobulk": 0, "etest": 0}
        ps = []
        t0 = time.time()
        for i in range(n_sims):
            if i and i % 50 == 0:
                say(f"  {scenario}: {i} simulations, SPARDA rejections so far {hits['sparda']} (load {os.getloadavg()[0]:.2f})")
            a, planted = simulate(dense_pool, genes, scenario, donors, cells, rng)
            pp = preprocess(a, groupby="group", target=["T"], background=["B"], replicate="donor", min_genes=0,
                            min_cells=1, max_pct_mito=100, n_top_genes=300, min_cells_per_group=2)
            tl.sparda(pp, k=5, random_state=int(rng.integers(2**31)))
            p = float(pp.uns["sparda"]["pvalue"])
            ps.append(p)
            hits["sparda"] += p <= 0.05
            tl.pseudobulk(pp)
            padj = pp.var["pseudobulk_padj"].to_numpy()
            names = set(genes[planted])
            sig = set(pp.var_names[np.nan_to_num(padj, nan=1.0) < 0.05])
            hits["pseudobulk"] += bool(sig) if scenario == "none" else bool(sig & names)
            hits["etest"] += etest(pp, seed=int(rng.integers(2**31))) <= 0.05
        what = "any gene" if scenario == "none" else "a planted gene"
        band = 0.05 + 2 * np.sqrt(0.05 * 0.95 / n_sims)
        say(f"{scenario:6s}: SPARDA replicate test p <= 0.05 in {hits['sparda']}/{n_sims} ({hits['sparda'] / n_sims:.3f}); "
            f"pseudobulk DESeq2 ({what} at padj < 0.05) {hits['pseudobulk']}/{n_sims} ({hits['pseudobulk'] / n_sims:.3f}); "
            f"cell-level E-test p <= 0.05 {hits['etest']}/{n_sims} ({hits['etest'] / n_sims:.3f})"
            + (f"; nominal 0.05, 2-sd band <= {band:.3f}" if scenario == "none" else "")
            + f"; median SPARDA p {np.median(ps):.3f} ({time.time() - t0:.0f} s, load {os.getloadavg()[0]:.2f})")


def _matched_progress(scenario: str, i: int, smallest: list, aucs: dict) -> None:
    """One line of interim results, so that a long run stopped early still says something."""
    v = np.array(smallest)
    line = f"  {scenario}: {i} simulations, pseudobulk smallest padj < 0.05 in {np.mean(v < 0.05):.3f}"
    if scenario == "none" and aucs["donor folds"]:
        line += f"; QUADRO null AUC (donor folds) mean {np.mean(aucs['donor folds']):.3f}"
    say(line + f" (load {os.getloadavg()[0]:.2f})")


def matched_baselines(n_null: int, n_power: int, donors: int, cells: int, seed: int, quadro: bool) -> None:
    """Pseudobulk DESeq2 at a type I error matched to 0.05, and QUADRO's AUC under the null.

    The same simulated data sets as :func:`simulation` (its random stream is replayed: one draw
    for SPARDA's seed and one for the E-test's after each data set), so the rows pair with its
    SPARDA results. Pseudobulk's "any gene at padj < 0.05" rejects the null more often than 5%
    (about 0.17 here): its power is also read at the padj threshold that rejects 5% of the null
    simulations (the smallest padj's 5% quantile). With ``quadro``, QUADRO's cross-validated AUC on
    each null data set, with folds holding out donors and with folds over cells.
    """
    from scontrast import tl
    from scontrast.preprocess import preprocess

    dense_pool, genes = shipped_cd4_pool()
    say(f"\n## Matched baselines on the pseudo-donor simulation ({donors} vs {donors} donors of {cells} cells; "
        f"load {os.getloadavg()[0]:.2f})")
    smallest = {}
    aucs = {"donor folds": [], "cell folds": []}
    t0 = time.time()
    for scenario, n_sims in (("none", n_null), ("mean", n_power)):
        rng = np.random.default_rng([seed, ["none", "mean", "spread"].index(scenario)])
        smallest[scenario] = []
        for i in range(n_sims):
            if i and i % 25 == 0:
                _matched_progress(scenario, i, smallest[scenario], aucs)
            a, planted = simulate(dense_pool, genes, scenario, donors, cells, rng)
            rng.integers(2**31)  # SPARDA's seed in simulation()
            pp = preprocess(a, groupby="group", target=["T"], background=["B"], replicate="donor", min_genes=0,
                            min_cells=1, max_pct_mito=100, n_top_genes=300, min_cells_per_group=2)
            tl.pseudobulk(pp)
            padj = np.nan_to_num(pp.var["pseudobulk_padj"].to_numpy(), nan=1.0)
            pick = np.ones(padj.size, bool) if scenario == "none" else np.isin(pp.var_names, genes[planted])
            smallest[scenario].append(float(padj[pick].min()))
            rng.integers(2**31)  # the E-test's seed in simulation()
            if quadro and scenario == "none":
                tl.quadro(pp, random_state=0)
                aucs["donor folds"].append(float(pp.uns["quadro"]["auc"]))
                del pp.uns["scontrast"]["design"]
                tl.quadro(pp, random_state=0)
                aucs["cell folds"].append(float(pp.uns["quadro"]["auc"]))
    null, power = np.array(smallest["none"]), np.array(smallest["mean"])
    cut = float(np.quantile(null, 0.05))
    say(f"pseudobulk DESeq2: null simulations with any gene at padj < 0.05: {np.mean(null < 0.05):.3f} ({n_null}); "
        f"mean shift, a planted gene at padj < 0.05: {np.mean(power < 0.05):.3f}; at the threshold matched to 5% of the "
        f"null (padj < {cut:.3g}): {np.mean(power < cut):.3f} ({n_power})")
    for how, v in aucs.items():
        if v:
            v = np.array(v)
            say(f"QUADRO AUC under the null, {how}: mean {v.mean():.3f}, sd {v.std(ddof=1):.3f}, 95% quantile "
                f"{np.quantile(v, 0.95):.3f}, share above 0.6 {np.mean(v > 0.6):.3f} ({v.size} simulations)")
    say(f"({time.time() - t0:.0f} s, load {os.getloadavg()[0]:.2f})")


# --------------------------------------------------------------------------- 6. the combined replicate test


DESIGNS = {"6v6": (6, False), "4v4": (4, False), "paired": (6, True)}
SCENARIOS = ("none", "mean", "spread", "substate", "mixture")


def shipped_cd4_pool() -> tuple[np.ndarray, np.ndarray]:
    """Raw counts of the pbmc3k CD4 T cells on their 300-gene panel, shipped in ``data/pbmc3k_cd4_counts.h5ad``
    (written by :func:`pbmc3k_cd4_counts`), dense, and the genes."""
    a = ad.read_h5ad(PBMC3K_CD4)
    return np.asarray(a.X.toarray(), dtype=float), np.asarray(a.var_names)


def _plant(lam: np.ndarray, genes: np.ndarray, kind: str, rng: np.random.Generator) -> None:
    """Plant one effect in a target sample's expected counts (cells x genes), in place."""
    if kind == "mean":       # 2x counts
        lam[:, genes] *= 2.0
    elif kind == "mean_weak":
        lam[:, genes] *= 1.5
    elif kind == "spread":   # a per-cell factor common to the genes, its mean 1: spread and co-expression change
        lam[:, genes] *= np.exp(rng.normal(0, 0.8, size=(lam.shape[0], 1)) - 0.32)
    elif kind == "spread_weak":
        lam[:, genes] *= np.exp(rng.normal(0, 0.6, size=(lam.shape[0], 1)) - 0.18)
    elif kind in ("substate", "substate_weak"):  # a new state: 4x counts in 10-30% (5-15%) of the cells
        hi = 0.3 if kind == "substate" else 0.15
        share = rng.uniform(hi / 3, hi)
        cells = rng.random(lam.shape[0]) < share
        lam[np.ix_(cells, genes)] *= 4.0


def simulate_design(C: np.ndarray, genes: np.ndarray, scenario: str, design: str, cells: int,
                    rng: np.random.Generator) -> tuple[ad.AnnData, np.ndarray]:
    """Pseudo-donors of real cells for one design; the planted genes (indices).

    Unpaired: every donor gives ``cells`` cells to one group, its genes scaled by exp(N(0, 0.3^2)).
    Paired: every donor gives ``cells`` cells to each group, both scaled by the donor's factor and
    each sample by its own exp(N(0, 0.1^2)). Effects in the target samples, 5 genes each: ``mean``
    (x2), ``spread`` (as :func:`simulate`), ``substate`` (4x counts of the genes in a share of the
    cells drawn per donor in [0.1, 0.3]), ``mixture`` (three sets of 5 genes: x1.5, a spread factor
    of sd 0.6, a sub-state in 5-15% of the cells).
    """
    donors, paired = DESIGNS[design]
    mean = C.mean(axis=0)
    candidates = np.flatnonzero((mean > 2) & (mean < 30))
    planted = rng.choice(candidates, 15 if scenario == "mixture" else 5, replace=False)
    rows, donor, target = [], [], []
    n_donors = donors if paired else 2 * donors
    for d in range(n_donors):
        factor = np.exp(rng.normal(0, 0.3, size=C.shape[1]))
        for is_t in ((True, False) if paired else (d < donors,)):
            idx = rng.choice(C.shape[0], cells, replace=False)
            own = factor * (np.exp(rng.normal(0, 0.1, size=C.shape[1])) if paired else 1.0)
            lam = C[idx] * own[None, :]
            if is_t and scenario == "mixture":
                for part, kind in enumerate(("mean_weak", "spread_weak", "substate_weak")):
                    _plant(lam, planted[5 * part:5 * part + 5], kind, rng)
            elif is_t and scenario != "none":
                _plant(lam, planted, scenario, rng)
            rows.append(rng.poisson(lam))
            donor += [f"d{d}"] * cells
            target += [is_t] * cells
    obs = pd.DataFrame({"group": np.where(target, "T", "B"), "donor": donor}, index=[f"c{i}" for i in range(len(donor))])
    adata = ad.AnnData(sp.csr_matrix(np.vstack(rows).astype(np.float32)), obs=obs, var=pd.DataFrame(index=genes))
    return adata, planted


def limma_trend_padj(pp: ad.AnnData) -> np.ndarray:
    """limma-trend on pseudobulk log-CPM: each gene's BH-adjusted moderated-t p-value, shape (G,).

    The counts of every (donor, group) summed, log2-CPM with a 0.5 offset (limma's ``cpm(log=TRUE)``
    default prior count), the moderated t of :func:`scontrast.donor_test.moderated_t` at the observed
    labelling (paired: the within-donor differences, i.e. ``~donor + group``), two-sided p-values on
    its ``d0 + df`` degrees of freedom, Benjamini-Hochberg.
    """
    from scipy.stats import false_discovery_control
    from scipy.stats import t as student_t

    from scontrast.donor_test import moderated_t, replicate_means

    design = pp.uns["scontrast"]["design"]
    paired = bool(design["paired"])
    t_mask = pp.obs["scontrast_target"].to_numpy(dtype=bool)
    names, index = np.unique(pp.obs["scontrast_replicate"].astype(str).to_numpy(), return_inverse=True)
    counts = pp.layers["counts"]
    # summed counts = cells x mean; log-CPM of each pseudo-sample
    n_cells = np.bincount(2 * index + ~t_mask, minlength=2 * names.size) if paired else np.bincount(index)
    means = replicate_means(counts, index, t_mask, names.size, paired=paired)
    summed = means * (n_cells.reshape(means.shape[:-1]) if paired else n_cells)[..., None]
    lib = summed.sum(axis=-1, keepdims=True)
    logcpm = np.log2((summed + 0.5) / (lib + 1.0) * 1e6)
    if paired:
        lab = np.zeros((1, names.size), dtype=bool)
    else:
        lab = np.isin(names, np.unique(pp.obs["scontrast_replicate"].astype(str).to_numpy()[t_mask]))[None, :]
    t, df = moderated_t(logcpm, lab, paired=paired)
    p = 2 * student_t.sf(np.abs(t[0]), df[0])
    return false_discovery_control(p)


def _smallest(padj: np.ndarray, pick: np.ndarray) -> float:
    v = np.nan_to_num(np.asarray(padj, dtype=float)[pick], nan=1.0)
    return float(v.min()) if v.size else 1.0


VARIANTS = ("weighted", "location+shape")


def _sparda_model(pp: ad.AnnData, seed: int):
    """SPARDA as ``tl.sparda(pp, k=5, test_distribution=True)`` fits it (the same matrices and replicates): the
    donor test's families and SPARDA's divergence and shape parts in one min-p; the estimator returned."""
    from scontrast.sparda import SPARDA
    from scontrast.tl._common import group_matrices
    from scontrast.tl._sparda import _replicates

    X, Y, _ = group_matrices(pp)
    return SPARDA(k=5, random_state=seed, test_distribution=True).fit(X, Y, **_replicates(pp, "scontrast_target"))


def _variants(T: np.ndarray) -> dict:
    """Other combinations of the same three parts over the same relabellings (each exact): min-p with the location
    part weighted 1/2 and the divergence and shape parts 1/4 each, and the location and shape parts alone."""
    from scontrast.donor_test import set_pvalues

    L = T.shape[0]
    P = set_pvalues(T)
    out = {}
    for name, w in (("weighted", np.array([0.5, 0.25, 0.25])), ("location+shape", np.array([0.5, 0.0, 0.5]))):
        with np.errstate(divide="ignore"):
            key = np.where(w > 0, P / np.where(w > 0, w, 1.0), np.inf).min(axis=1)
        out[name] = float(np.sum(key <= key[0]) / L)
    return out


def compare_one(adata: ad.AnnData, paired: bool, planted: np.ndarray, genes: np.ndarray, seed: int) -> dict:
    """Every test on one simulated data set: p-values (SPARDA: combined, distributional parts, location part; the
    E-test) and the smallest padj of pseudobulk DESeq2 and limma-trend (over every gene, and over the planted ones)."""
    from scontrast import tl
    from scontrast.preprocess import preprocess

    pp = preprocess(adata, groupby="group", target=["T"], background=["B"], replicate="donor", paired=paired,
                    min_genes=0, min_cells=1, max_pct_mito=100, n_top_genes=300, min_cells_per_group=2)
    out = {}
    t0 = time.perf_counter()
    model = _sparda_model(pp, seed)
    out["sparda_s"] = time.perf_counter() - t0
    out["combined"] = float(model.pvalue_)
    out["today"] = float(model.test_["distribution_pvalue"])
    out["location"] = float(model.test_["parts"]["location"])
    # the donor test's location family and SPARDA's divergence and shape parts (columns 0, 2, 3)
    out.update(_variants(model.part_statistics_[:, [0, 2, 3]]))
    pick = np.isin(pp.var_names, genes[planted])
    tl.pseudobulk(pp)
    padj = pp.var["pseudobulk_padj"].to_numpy()
    out["deseq2_any"], out["deseq2_planted"] = _smallest(padj, slice(None)), _smallest(padj, pick)
    lt = limma_trend_padj(pp)
    out["limma_any"], out["limma_planted"] = _smallest(lt, slice(None)), _smallest(lt, pick)
    out["etest"] = etest(pp, seed=seed)
    return out


def _compare_line(design: str, scenario: str, rows: list[dict], cut: dict, t0: float) -> str:
    """One design and scenario's rejections (and, for the null, the matched padj cuts it sets in ``cut``)."""
    n = len(rows)
    rej = {k: sum(r[k] <= 0.05 for r in rows) for k in ("combined", "today", "location", "etest") + VARIANTS}
    key = "any" if scenario == "none" else "planted"
    for m in ("deseq2", "limma"):
        v = np.array([r[f"{m}_{key}"] for r in rows])
        rej[m] = int(np.sum(v < 0.05))
        if scenario == "none":
            cut[m] = float(np.quantile(v, 0.05))
        rej[m + "_matched"] = int(np.sum(v < cut[m])) if m in cut else -1
    band = 0.05 + 2 * np.sqrt(0.05 * 0.95 / n)
    power = rej["combined"] / n

    def f(k):
        return "n/a" if rej[k] < 0 else f"{rej[k] / n:.3f}"

    return (f"{design:6s} {scenario:8s} ({n:3d}): combined {f('combined')} | today {f('today')} | location "
            f"{f('location')} | DESeq2 {f('deseq2')} / {f('deseq2_matched')} | limma-trend {f('limma')} / "
            f"{f('limma_matched')} | E-test {f('etest')} | variants: weighted min-p {f('weighted')}, location + "
            f"shape {f('location+shape')}"
            + (f"; nominal 0.05, 2-sd band <= {band:.3f}" if scenario == "none" else
               f"; binomial 2-sd of the combined {2 * np.sqrt(power * (1 - power) / n):.3f}")
            + (f"; matched padj cuts: DESeq2 {cut['deseq2']:.3g}, limma-trend {cut['limma']:.3g}"
               if scenario == "none" else "")
            + f"; SPARDA {np.median([r['sparda_s'] for r in rows]):.1f} s median ({time.time() - t0:.0f} s, "
            f"load {os.getloadavg()[0]:.2f})")


def compare_tests(n_null: int, n_power: int, designs: list[str], scenarios: list[str], cells: int, seed: int) -> None:
    """The combined replicate test against today's, pseudobulk DESeq2, limma-trend and the E-test, same data sets.

    For every design and scenario, ``n_null`` (``none``) or ``n_power`` simulated data sets
    (:func:`simulate_design`); a rejection is p <= 0.05 for SPARDA's tests and the E-test, and a
    padj < 0.05 of any gene (``none``) or of a planted gene (effects) for the pseudobulk tests; they
    are also read at the threshold of the smallest padj matched to 5% of the design's null data sets
    (the null scenario must run first in the same call). An interim line every 10 data sets.
    """
    pool, genes = shipped_cd4_pool()
    say(f"\n## The combined replicate test: pseudo-donors of {cells} cells of the shipped pbmc3k CD4 T cells "
        f"({pool.shape[0]} in the pool, {genes.size} genes), donor log-sd 0.3 (load {os.getloadavg()[0]:.2f})")
    say("rejections at 0.05: SPARDA combined (location + divergence + shape, min-p) | today's replicate test "
        "(divergence + shape) | its location part alone | DESeq2 padj < 0.05 / at the matched level | limma-trend "
        "padj < 0.05 / matched | cell-level E-test | other combinations of the same parts")
    for design in designs:
        cut = {}
        for scenario in scenarios:
            n_sims = n_null if scenario == "none" else n_power
            if n_sims == 0:
                continue
            rng = np.random.default_rng([seed, list(DESIGNS).index(design), SCENARIOS.index(scenario)])
            rows = []
            t0 = time.time()
            for i in range(n_sims):
                a, planted = simulate_design(pool, genes, scenario, design, cells, rng)
                rows.append(compare_one(a, DESIGNS[design][1], planted, genes, int(rng.integers(2**31))))
                if (i + 1) % 10 == 0 and i + 1 < n_sims:
                    say("  interim " + _compare_line(design, scenario, rows, dict(cut), t0))
            say(_compare_line(design, scenario, rows, cut, t0))


# --------------------------------------------------------------------------- 7. the donor test


# Variants of the donor test computed on every data set (families, top-k, weights); the shipped one is
# scontrast.donor_test's defaults. Chosen on one seed set (--seed 1), reported on another (--seed 2).
DONOR_VARIANTS = {
    "loc k1": (("location",), 1, None),
    "loc k5": (("location",), 5, None),
    "loc+spread k1": (("location", "spread"), 1, None),
    "loc+spread k5": (("location", "spread"), 5, None),
    "loc+spread k10": (("location", "spread"), 10, None),
    "loc+spread k1 w2:1": (("location", "spread"), 1, (2.0, 1.0)),
    "loc+spread+det k1": (("location", "spread", "detected"), 1, None),
    "spread k1": (("spread",), 1, None),
    # the opt-in co-expression family (scontrast.donor_coexpression.replicate_coexpression) of the 50 / 100 most variable genes
    "coex50 k10": (("coex50",), 10, None),
    "loc+coex50 k10": (("location", "coex50"), 10, None),
    "loc+spread+coex50 k10": (("location", "spread", "coex50"), 10, None),
    "loc+spread+coex50 k5": (("location", "spread", "coex50"), 5, None),
    # each gene's mean z with its n most co-expressed partners over every donor (module_coexpression)
    "mod50n3 k10": (("mod50n3",), 10, None),
    "mod50n5 k10": (("mod50n5",), 10, None),
    "loc+spread+mod50n3 k10": (("location", "spread", "mod50n3"), 10, None),
    "loc+spread+mod50n5 k10": (("location", "spread", "mod50n5"), 10, None),
    "loc+spread+mod100n5 k10": (("location", "spread", "mod100n5"), 10, None),
    "loc+mod50n5 k10": (("location", "mod50n5"), 10, None),
    "loc+spread+mod50n5 k5": (("location", "spread", "mod50n5"), 5, None),
    # the spread freed of the donors' mean differences (scontrast.donor_spread): per donor the spread minus its
    # spline on the location over the genes (rspread), per gene minus its line on the location over the donors
    # (gspread), log(1 + phi) beyond Poisson with each cell's scale from X (disp) or from its counts (dispc)
    "loc+rspread k10": (("location", "residual_spread"), 10, None),
    "loc+gspread k10": (("location", "gene_residual_spread"), 10, None),
    "loc+disp k10": (("location", "dispersion"), 10, None),
    "loc+dispc k10": (("location", "dispersion_counts"), 10, None),
    "loc+spread+disp k10": (("location", "spread", "dispersion"), 10, None),
    "rspread k10": (("residual_spread",), 10, None),
    "gspread k10": (("gene_residual_spread",), 10, None),
    "disp k10": (("dispersion",), 10, None),
    "dispc k10": (("dispersion_counts",), 10, None),
    # the share of a donor's cells above each gene's pooled 90th percentile (logit; scontrast.donor_spread.tail_share)
    "tail k10": (("tail",), 10, None),
    "loc+spread+disp+tail k10": (("location", "spread", "dispersion", "tail"), 10, None),
    "loc+disp+tail k10": (("location", "dispersion", "tail"), 10, None),
}
# the gene counts of the co-expression variants above
COEX_GENES = (50, 100)
# (genes, neighbours) of the module variants
MODULES = ((50, 3), (50, 5), (100, 5))


def donor_test_pvalues(pp: ad.AnnData, paired: bool) -> dict:
    """The donor test's p-value on a preprocessed data set (every cell, every gene of ``pp.X``), its families' own
    p-values, and every variant of :data:`DONOR_VARIANTS` on the same relabellings; the seconds it takes."""
    from scontrast.design import replicate_labellings
    from scontrast.donor_coexpression import module_coexpression, replicate_coexpression
    from scontrast.donor_test import (
        FAMILIES,
        donor_test,
        family_t,
        replicate_features,
        top_mean,
        trend_covariates,
        weighted_min_p,
    )

    t_mask = pp.obs["scontrast_target"].to_numpy(dtype=bool)
    names, index = np.unique(pp.obs["scontrast_replicate"].astype(str).to_numpy(), return_inverse=True)
    tor = np.isin(names, np.unique(names[index][t_mask]))
    t0 = time.perf_counter()
    lab, exact = replicate_labellings(tor, paired=paired, max_labellings=9999, random_state=0)
    feats = replicate_features(pp.X, index, t_mask, names.size, paired=paired)
    res = donor_test({f: feats[f] for f in FAMILIES}, lab, paired=paired, exact=exact)
    out = {"donor": res["pvalue"], "donor_s": time.perf_counter() - t0,
           **{f"donor_{f}": res["parts"][f] for f in FAMILIES}}
    # each cell's normalised value of one count, from its counts: the Poisson part of dispersion_counts
    counts = pp.layers["counts"]
    scale = np.asarray(pp.X.expm1().sum(axis=1) if sp.issparse(pp.X) else np.expm1(pp.X).sum(axis=1)).ravel() / \
        np.maximum(np.asarray(counts.sum(axis=1)).ravel(), 1.0)
    feats["dispersion_counts"] = replicate_features(pp.X, index, t_mask, names.size, paired=paired,
                                                    cell_scale_of=scale)["dispersion"]
    for n in COEX_GENES:
        feats[f"coex{n}"] = replicate_coexpression(pp.X, index, t_mask, names.size, paired=paired, n_pair_genes=n)[0]
    for n, m in MODULES:
        feats[f"mod{n}n{m}"] = module_coexpression(feats[f"coex{n}"], m)
    t = {}   # each family's moderated t under every labelling, once: the variants differ in top-k and weights only
    trend = trend_covariates(feats, paired=paired)   # as the donor test: every family trends on the genes' mean location
    for name, (fams, k, w) in DONOR_VARIANTS.items():
        cols = []
        for f in fams:
            if f not in t:
                t[f] = family_t(feats[f], lab, paired=paired, covariate=trend.get(f))[0]
            cols.append(top_mean(t[f], k))
        out["v " + name] = float(weighted_min_p(np.column_stack(cols), w)[0])
    return out


def donor_compare_one(adata: ad.AnnData, paired: bool, planted: np.ndarray, genes: np.ndarray, seed: int,
                      sparda: bool, etest_too: bool, deseq2: bool = True) -> dict:
    """The donor test (and its variants), pseudobulk DESeq2, limma-trend, optionally SPARDA's replicate test with its
    distributional parts (and the previous release's location + divergence + shape) and the E-test, on one data set."""
    from scontrast import tl
    from scontrast.donor_test import replicate_features
    from scontrast.preprocess import preprocess

    pp = preprocess(adata, groupby="group", target=["T"], background=["B"], replicate="donor", paired=paired,
                    min_genes=0, min_cells=1, max_pct_mito=100, n_top_genes=300, min_cells_per_group=2)
    out = donor_test_pvalues(pp, paired)
    if sparda:
        from scontrast.donor_test import family_t, min_p_combination
        from scontrast.sparda import SPARDA
        from scontrast.sparda._replicate import _distinct_labellings
        from scontrast.tl._common import group_matrices
        from scontrast.tl._sparda import _replicates

        X, Y, _ = group_matrices(pp)
        model = SPARDA(k=5, random_state=seed, test_distribution=True).fit(X, Y, **_replicates(pp, "scontrast_target"))
        out["sparda"] = float(model.pvalue_)
        # the replicate test of the previous release on the same relabellings: the largest moderated |t| of the
        # donors' pseudobulk (the location family at top-k 1), SPARDA's divergence and shape parts, min-p
        reps = model.replicates_
        lab = _distinct_labellings(reps, 10**4, np.random.default_rng(0))[0]
        n = X.shape[0]
        feats = replicate_features([X, Y], reps.index, np.arange(n + Y.shape[0]) < n, reps.names.size,
                                   paired=reps.paired)
        loc = np.abs(family_t(feats["location"], lab, paired=reps.paired)[0]).max(axis=1)
        dist = model.part_statistics_[:, -2:]
        out["sparda_old"] = float(min_p_combination(np.column_stack([loc, dist]))[0])
    pick = np.isin(pp.var_names, genes[planted])
    if deseq2:
        tl.pseudobulk(pp)
        padj = pp.var["pseudobulk_padj"].to_numpy()
        out["deseq2_any"], out["deseq2_planted"] = _smallest(padj, slice(None)), _smallest(padj, pick)
    lt = limma_trend_padj(pp)
    out["limma_any"], out["limma_planted"] = _smallest(lt, slice(None)), _smallest(lt, pick)
    if etest_too:
        out["etest"] = etest(pp, seed=seed)
    return out


def _binom_band(k: int, n: int) -> str:
    """Clopper-Pearson 95% interval of k / n."""
    from scipy.stats import beta

    lo = beta.ppf(0.025, k, n - k + 1) if k > 0 else 0.0
    hi = beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return f"{k}/{n} = {k / n:.3f} [{lo:.3f}, {hi:.3f}]"


def _donor_line(design: str, scenario: str, rows: list[dict], cut: dict) -> list[str]:
    n = len(rows)
    key = "any" if scenario == "none" else "planted"
    parts = [f"donor test {_binom_band(sum(r['donor'] <= 0.05 for r in rows), n)}",
             f"its location part {sum(r['donor_location'] <= 0.05 for r in rows) / n:.3f}",
             f"spread part {sum(r['donor_spread'] <= 0.05 for r in rows) / n:.3f}"]
    for family in ("dispersion", "tail"):
        if f"donor_{family}" in rows[0]:
            parts.append(f"{family} part {sum(r[f'donor_{family}'] <= 0.05 for r in rows) / n:.3f}")
    for m, label in (("deseq2", "DESeq2"), ("limma", "limma-trend")):
        v = np.array([r[f"{m}_{key}"] for r in rows if f"{m}_{key}" in r])
        if v.size == 0:
            continue
        if scenario == "none":
            cut[m] = float(np.quantile(v, 0.05))
        matched = f"{np.mean(v < cut[m]):.3f}" if m in cut else "n/a"
        first = f" (first {v.size})" if v.size < n else ""
        parts.append(f"{label}{first} padj<0.05 {np.mean(v < 0.05):.3f} / matched {matched}")
        if m == "deseq2" and v.size < n:
            on = [r for r in rows if f"{m}_{key}" in r]
            parts.append(f"donor test on the same {np.mean([r['donor'] <= 0.05 for r in on]):.3f}")
    sub = [r for r in rows if "sparda" in r]
    if sub:
        parts.append(f"first {len(sub)}: donor test + SPARDA's divergence and shape parts "
                     f"{sum(r['sparda'] <= 0.05 for r in sub)}/{len(sub)}, the previous replicate test (location max|t| + "
                     f"divergence + shape) {sum(r['sparda_old'] <= 0.05 for r in sub)}/{len(sub)}, the donor test "
                     f"{sum(r['donor'] <= 0.05 for r in sub)}/{len(sub)}")
    et = [r["etest"] for r in rows if "etest" in r]
    if et:
        parts.append(f"E-test (first {len(et)}) {np.mean(np.array(et) <= 0.05):.3f}")
    if scenario == "none" and cut:
        parts.append("matched padj cuts: " + ", ".join(f"{m} {v:.3g}" for m, v in cut.items()))
    parts.append(f"donor test {np.median([r['donor_s'] for r in rows]):.3f} s median")
    lines = [f"{design:6s} {scenario:8s} ({n:3d}): " + " | ".join(parts)]
    lines.append("    variants (p <= 0.05): " + ", ".join(
        f"{name} {np.mean([r['v ' + name] <= 0.05 for r in rows]):.3f}" for name in DONOR_VARIANTS))
    return lines


def donor_compare(n_null: int, n_power: int, designs: list[str], scenarios: list[str], cells: int, seed: int,
                  n_sparda: int, n_etest: int, n_deseq2: int) -> None:
    """The donor test against pseudobulk DESeq2 and limma-trend (at padj < 0.05 and at the level matched to 5% of
    the design's null data sets), SPARDA's combined replicate test on the first ``n_sparda`` data sets and the
    E-test on the first ``n_etest``, on the data sets of :func:`simulate_design` (the null scenario first)."""
    pool, genes = shipped_cd4_pool()
    from scontrast.donor_test import FAMILIES

    say(f"\n## The donor test ({' + '.join(FAMILIES)} families, top-10 mean t^2 each, min-p): pseudo-donors of {cells} cells of the "
        f"shipped pbmc3k CD4 T cells ({pool.shape[0]} in the pool, {genes.size} genes), donor log-sd 0.3, seed {seed} "
        f"(load {os.getloadavg()[0]:.2f})")
    say("rejections: p <= 0.05 (donor test, SPARDA, E-test; 95% Clopper-Pearson interval); pseudobulk: any gene "
        "(null) or a planted gene at padj < 0.05 / at the matched padj cut")
    for design in designs:
        cut = {}
        for scenario in scenarios:
            n_sims = n_null if scenario == "none" else n_power
            if n_sims == 0:
                continue
            rng = np.random.default_rng([seed, 100 + list(DESIGNS).index(design), SCENARIOS.index(scenario)])
            rows, t0 = [], time.time()
            for i in range(n_sims):
                a, planted = simulate_design(pool, genes, scenario, design, cells, rng)
                rows.append(donor_compare_one(a, DESIGNS[design][1], planted, genes, int(rng.integers(2**31)),
                                              i < n_sparda, i < n_etest, i < n_deseq2))
                if (i + 1) % 50 == 0 and i + 1 < n_sims:
                    say("  interim " + _donor_line(design, scenario, rows, dict(cut))[0])
            for line in _donor_line(design, scenario, rows, cut):
                say(line)
            say(f"  ({time.time() - t0:.0f} s, load {os.getloadavg()[0]:.2f})")


def location_scales(n_sims: int, scenario: str, seed: int) -> None:
    """The location part's power by the scale of the replicate summaries, 6 vs 6 pseudo-donors (no SPARDA fit).

    Max moderated |t| over the relabellings of: the replicates' mean of the log-normalised cells
    (``X``), ``log1p`` of their mean ``expm1`` (the library's pseudobulk), and log2-CPM of the
    summed counts; beside them the parametric moderated-t p-values of the last two, Bonferroni over
    the genes. Rejections at 0.05.
    """
    from scipy.stats import t as student_t

    from scontrast.design import replicate_labellings
    from scontrast.donor_test import moderated_t, replicate_means
    from scontrast.preprocess import preprocess

    pool, genes = shipped_cd4_pool()
    rng = np.random.default_rng([seed, 0, SCENARIOS.index(scenario)])
    p = {k: [] for k in ("mean of logs", "log of mean (pseudobulk)", "log-CPM of counts",
                         "log of mean, parametric Bonferroni", "log-CPM, parametric Bonferroni")}
    for _ in range(n_sims):
        a, _planted = simulate_design(pool, genes, scenario, "6v6", 60, rng)
        pp = preprocess(a, groupby="group", target=["T"], background=["B"], replicate="donor", min_genes=0,
                        min_cells=1, max_pct_mito=100, n_top_genes=300, min_cells_per_group=2)
        t_mask = pp.obs["scontrast_target"].to_numpy(bool)
        reps = pp.obs["scontrast_replicate"].astype(str).to_numpy()
        names, idx = np.unique(reps, return_inverse=True)
        lab, _ = replicate_labellings(np.isin(names, np.unique(reps[t_mask])), paired=False)
        lab = lab[lab[:, 0] == lab[0, 0]]
        summed = replicate_means(pp.layers["counts"], idx, t_mask, names.size, paired=False) * np.bincount(idx)[:, None]
        scales = {"mean of logs": replicate_means(pp.X, idx, t_mask, names.size, paired=False),
                  "log of mean (pseudobulk)": replicate_means(pp.X, idx, t_mask, names.size, paired=False,
                                                              pseudobulk=True),
                  "log-CPM of counts": np.log2((summed + 0.5) / (summed.sum(1, keepdims=True) + 1) * 1e6)}
        for name, M in scales.items():
            t, df = moderated_t(M, lab, paired=False)
            stat = np.abs(t).max(axis=1)
            p[name].append(float(np.mean(stat >= stat[0])))
            if name != "mean of logs":
                key = "log of mean, parametric Bonferroni" if name.startswith("log of") else "log-CPM, parametric Bonferroni"
                p[key].append(min(1.0, float((2 * student_t.sf(np.abs(t[0]), df[0])).min()) * t.shape[1]))
    say(f"\n## The location part by scale, 6 vs 6 pseudo-donors, {scenario}, {n_sims} simulations (load "
        f"{os.getloadavg()[0]:.2f}): rejections at 0.05")
    for name, v in p.items():
        say(f"{name:36s}: {np.mean(np.array(v) <= 0.05):.3f} (median p {np.median(v):.4f})")


def sparda_splits(sources: list[str], max_splits: int) -> None:
    """The replicate test alone (library defaults: the donor test) on the wu2020 donor splits, with its two parts."""
    from scontrast import tl
    from scontrast.preprocess import preprocess

    raw = ad.read_h5ad(WU2020)
    for source in sources:
        cells = raw[raw.obs["source"] == source].copy()
        counts = cells.obs["patient"].astype(str).value_counts()
        patients = sorted(counts.index[counts >= 4])
        cells = cells[cells.obs["patient"].astype(str).isin(patients)].copy()
        splits = patient_splits(patients, max_splits)
        say(f"\n## SPARDA's replicate test (the donor test) on {source} T cells of {len(patients)} patients "
            f"({cells.n_obs} cells): {len(splits)} splits by patient (load {os.getloadavg()[0]:.2f})")
        say("split (first half) | p | location part p | spread part p")
        rows = []
        t0 = time.time()
        for first in splits:
            a = cells.copy()
            a.obs["half"] = np.where(a.obs["patient"].astype(str).isin(first), "A", "B")
            pp = preprocess(a, groupby="half", target=["A"], background=["B"], replicate="patient", **PRE)
            tl.sparda(pp, random_state=0)
            t = pp.uns["sparda"]["test"]
            rows.append((float(pp.uns["sparda"]["pvalue"]), float(t["parts"]["location"]), float(t["parts"]["spread"])))
            say(f"{'+'.join(first):40s} | {rows[-1][0]:.3f} | {rows[-1][1]:.3f} | {rows[-1][2]:.3f}")
        v = np.array(rows)
        n = len(rows)
        k = int(np.sum(v[:, 0] <= 0.05))
        say(f"p <= 0.05 in {n} splits: the donor test {_binom_band(k, n)}, location part {int(np.sum(v[:, 1] <= 0.05))}, "
            f"spread part {int(np.sum(v[:, 2] <= 0.05))} (nominal 0.05: {0.05 * n:.1f}) ({time.time() - t0:.0f} s, load "
            f"{os.getloadavg()[0]:.2f})")


def timing(n_cells: int = 5000, n_genes: int = 2000, donors: int = 6, seed: int = 0, distribution: bool = False) -> None:
    """Seconds of SPARDA's replicate test (the donor test; with ``distribution`` also SPARDA's relabelled-refit
    parts) and of the donor test alone on every relabelling at 6 vs 6 donors, 2,000 genes, 5,000 cells."""
    from scontrast.design import replicate_labellings
    from scontrast.donor_test import FAMILIES, donor_test, replicate_features
    from scontrast.sparda import SPARDA

    rng = np.random.default_rng(seed)
    base = rng.gamma(0.3, 2.0, size=n_genes)
    donor = np.repeat(np.arange(2 * donors), n_cells // (2 * donors))
    lam = base[None, :] * np.exp(rng.normal(0, 0.3, size=(2 * donors, n_genes)))[donor]
    X = sp.csr_matrix(np.log1p(rng.poisson(lam)).astype(np.float32))
    is_t = donor < donors
    say(f"\n## Time of the replicate test: {donors} vs {donors} donors, {X.shape[1]} genes, {X.shape[0]} cells "
        f"(density {X.nnz / np.prod(X.shape):.2f}; load {os.getloadavg()[0]:.2f})")
    reps_x, reps_y = donor[is_t].astype(str), donor[~is_t].astype(str)
    fit_only = SPARDA(k=5, n_permutations=0, random_state=0)
    t0 = time.perf_counter()
    fit_only.fit(X[is_t], X[~is_t], replicates_x=reps_x, replicates_y=reps_y)
    t_fit = time.perf_counter() - t0
    for dist in ((False, True) if distribution else (False,)):
        model = SPARDA(k=5, test_distribution=dist, random_state=0)
        t0 = time.perf_counter()
        model.fit(X[is_t], X[~is_t], replicates_x=reps_x, replicates_y=reps_y)
        t_all = time.perf_counter() - t0
        say(f"test_distribution={dist}: fit and test {t_all:.1f} s, fit alone {t_fit:.1f} s: the test "
            f"{t_all - t_fit:.1f} s ({model.test_['n_labellings']} relabellings, p {model.pvalue_:.3g})")
    t0 = time.perf_counter()
    lab, exact = replicate_labellings(is_t[np.unique(donor, return_index=True)[1]], paired=False, max_labellings=9999)
    feats = replicate_features(X, donor, is_t, 2 * donors, paired=False)
    res = donor_test({f: feats[f] for f in FAMILIES}, lab, paired=False, exact=exact)
    say(f"the donor test alone (features of every donor from the cells, {', '.join(FAMILIES)}; moderated t of "
        f"{lab.shape[0]} relabellings x {n_genes} genes per family; min-p): {time.perf_counter() - t0:.2f} s "
        f"(p {res['pvalue']:.3g})")


# --------------------------------------------------------------------------- 4. enrichment under donor effects


def enrichment_simulation(n_sims: int, seed: int) -> None:
    """Type I error of FANGS's feature enrichment when donors, not groups, differ.

    The enrichment acts on a feature allocation (cells x features, binary); under the null each
    donor has its own prevalence of each feature (logit-normal around a base, sd 0.5 on the logit
    scale) and the groups share the distribution of donors. Reported for three designs: the share of
    simulations with any feature at q < 0.05, by the replicate-level test (declared) and by the
    cell-level Fisher test (undeclared).
    """
    from scontrast.fangs import feature_enrichment, replicate_feature_enrichment

    say(f"\n## Feature enrichment under donor effects: {n_sims} simulations per design, 8 features, donor "
        f"logit-sd 0.5, 20-80 cells per donor and group (load {os.getloadavg()[0]:.2f})")
    band = 0.05 + 2 * np.sqrt(0.05 * 0.95 / n_sims)
    for r_t, r_b, paired in ((4, 4, False), (6, 6, False), (6, 6, True)):
        rng = np.random.default_rng([seed, r_t, r_b, paired])
        hits = {"replicate": 0, "cell": 0}
        for _ in range(n_sims):
            base = rng.uniform(-2.0, 0.5, size=8)
            rows, target, donor = [], [], []
            n_donors = r_t if paired else r_t + r_b
            for d in range(n_donors):
                logit = base + rng.normal(0.0, 0.5, size=8)
                for is_t in ((True, False) if paired else (d < r_t,)):
                    cells = int(rng.integers(20, 81))
                    # paired: the donor's two samples share its prevalence (the donor effect), plus a little of their own
                    own = logit + (rng.normal(0.0, 0.2, size=8) if paired else 0.0)
                    rows.append(rng.random((cells, 8)) < 1.0 / (1.0 + np.exp(-own)))
                    target += [is_t] * cells
                    donor += [f"d{d}"] * cells
            E, t, reps = np.vstack(rows), np.array(target), np.array(donor)
            rep = replicate_feature_enrichment(E, t, reps, paired=paired, random_state=int(rng.integers(2**31)))
            hits["replicate"] += bool((rep["qvalue"] < 0.05).any())
            hits["cell"] += bool((feature_enrichment(E, t)["qvalue"] < 0.05).any())
        design = f"{r_t} paired donors" if paired else f"{r_t} vs {r_b} donors"
        say(f"{design:16s}: any feature at q < 0.05: replicate-level {hits['replicate']}/{n_sims} "
            f"({hits['replicate'] / n_sims:.3f}; nominal 0.05, 2-sd band <= {band:.3f}), cell-level {hits['cell']}/{n_sims} "
            f"({hits['cell'] / n_sims:.3f})")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", action="store_true")
    parser.add_argument("--paired", action="store_true")
    parser.add_argument("--sim", type=int, default=0)
    parser.add_argument("--scenarios", nargs="+", default=["none", "mean", "spread"])
    parser.add_argument("--donors", type=int, default=6)
    parser.add_argument("--cells", type=int, default=60)
    parser.add_argument("--max-splits", type=int, default=35)
    parser.add_argument("--fangs", action="store_true")
    parser.add_argument("--matched", nargs=2, type=int, metavar=("N_NULL", "N_POWER"),
                        help="pseudobulk at a matched type I error (and QUADRO's null AUC with --quadro)")
    parser.add_argument("--quadro", action="store_true")
    parser.add_argument("--sim-enrichment", type=int, default=0, help="simulations per design of the enrichment part")
    parser.add_argument("--sources", nargs="+", default=["NAT", "Tumor"], help="tissues of the donor splits")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compare", nargs=2, type=int, metavar=("N_NULL", "N_POWER"),
                        help="the combined replicate test against the others on the same simulated data sets")
    parser.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    parser.add_argument("--sparda-splits", action="store_true", help="the replicate test alone on the wu2020 splits")
    parser.add_argument("--timing", action="store_true")
    parser.add_argument("--with-distribution", action="store_true", help="--timing: also with test_distribution")
    parser.add_argument("--donor-test", nargs=2, type=int, metavar=("N_NULL", "N_POWER"),
                        help="the donor test against the pseudobulk tests on the --compare data sets")
    parser.add_argument("--n-sparda", type=int, default=0, help="--donor-test: SPARDA's combined test on this many")
    parser.add_argument("--n-etest", type=int, default=0, help="--donor-test: the E-test on this many")
    parser.add_argument("--n-deseq2", type=int, default=10**9, help="--donor-test: pseudobulk DESeq2 on this many")
    parser.add_argument("--location-scales", type=int, default=0, metavar="N",
                        help="the location part's power by the scale of the replicate summaries (first --scenarios)")
    args = parser.parse_args(argv)
    quiet()
    say(f"# bench_donors {' '.join(sys.argv[1:])}; {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.2f}")
    if args.paired:
        paired_tumour_vs_nat()
    if args.splits:
        donor_splits(args.max_splits, args.fangs, args.sources)
    if args.matched:
        matched_baselines(*args.matched, args.donors, args.cells, args.seed, args.quadro)
    if args.sim_enrichment:
        enrichment_simulation(args.sim_enrichment, args.seed)
    if args.sim:
        simulation(args.sim, args.scenarios, args.donors, args.cells, args.seed)
    if args.timing:
        timing(distribution=args.with_distribution)
    if args.location_scales:
        location_scales(args.location_scales, args.scenarios[0], args.seed)
    if args.sparda_splits:
        sparda_splits(args.sources, args.max_splits)
    if args.compare:
        compare_tests(*args.compare, args.designs, args.scenarios, args.cells, args.seed)
    if args.donor_test:
        donor_compare(*args.donor_test, args.designs, args.scenarios, args.cells, args.seed, args.n_sparda,
                      args.n_etest, args.n_deseq2)


if __name__ == "__main__":
    main()
