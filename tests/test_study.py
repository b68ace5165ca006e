"""scontrast.study: labellings, exact p-values, global min-p, design check, effect, the whole study."""

import base64
import math
import warnings

import anndata as ad
import matplotlib.text
import numpy as np
import pandas as pd
import pytest

from conftest import REPO
from scontrast.core import ScontrastError, ScontrastWarning
from scontrast.datasets import simulate_study
from scontrast.study import _study as study_module
from scontrast.study import (
    count_labellings,
    design_table,
    jackknife_interval,
    plot_ranking,
    run_study,
    split_folders,
    study_labellings,
    subset_mask,
)
from scontrast.study._study import PART_COLUMNS, rank_and_say
from scontrast.study._table import study_html
from scontrast.study._test import min_p, rank_pvalues


@pytest.fixture(scope="module")
def cells():
    return ad.read_h5ad(REPO / "data" / "pbmc3k_celltypes.h5ad")


def _study(sim, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScontrastWarning)
        return run_study(sim, groupby="condition", target=["case"], background=["control"], replicate="donor",
                         split_by="cell_type", **kw)


def test_block_labellings_keep_each_blocks_target_count_and_are_all_listed():
    target = np.array([1, 1, 0, 0, 1, 0, 1, 0, 0], bool)
    blocks = np.array(list("aaaabbbbb"))
    labs, exact = study_labellings(target, paired=False, blocks=blocks, max_labellings=1000)
    n, mirror = count_labellings(target, paired=False, blocks=blocks)
    assert exact and labs.shape == (n, 9) and n == math.comb(4, 2) * math.comb(5, 2)
    assert not mirror  # block b has 2 of 5 target: no complement keeps it
    assert np.array_equal(labs[0], target) and len({r.tobytes() for r in labs}) == n
    assert (labs[:, :4].sum(1) == 2).all() and (labs[:, 4:].sum(1) == 2).all()
    sampled, exact = study_labellings(target, paired=False, blocks=blocks, max_labellings=20, random_state=0)
    assert not exact and (sampled[:, :4].sum(1) == 2).all() and (sampled[:, 4:].sum(1) == 2).all()


def test_rank_pvalues_and_min_p_against_brute_force():
    rng = np.random.default_rng(0)
    stats = np.round(rng.normal(size=(40, 3)), 1)  # ties on purpose
    P = np.column_stack([rank_pvalues(stats[:, j]) for j in range(3)])
    brute = np.array([[np.mean(stats[:, j] >= stats[i, j]) for j in range(3)] for i in range(40)])
    assert np.allclose(P, brute)
    assert min_p(P) == np.mean(brute.min(1) <= brute[0].min())


def test_exact_pvalue_is_uniform_over_relabellings_in_a_null_design():
    """Every relabelling's p-value, in turn taken as the observed one: their distribution is exactly
    the discrete uniform one the test promises (P(p <= a) <= a)."""
    stats = np.random.default_rng(1).normal(size=70)  # C(8, 4) labellings, continuous statistic
    p = rank_pvalues(stats)
    for a in (0.05, 0.1, 0.5):
        assert np.mean(p <= a) <= a + 1e-12


def test_split_folders_are_safe_and_distinct():
    folders = split_folders(["CD14+ Mono", "CD14- Mono", "B/plasma", "b plasma", ""])
    assert all(f and "/" not in f and " " not in f for f in folders.values())
    assert len({f.lower() for f in folders.values()}) == 5


def test_subset_value_absent_lists_the_values_present():
    obs = pd.DataFrame({"tissue": ["blood", "lung", "blood"]})
    assert subset_mask(obs, {"tissue": ["lung"]}).tolist() == [False, True, False]
    with pytest.raises(ScontrastError, match=r"tissue has no cell with value\(s\) \['liver'\]; values present: "
                                             r"\['blood', 'lung'\]"):
        subset_mask(obs, {"tissue": ["liver"]})


def _obs(n_donors=8, cells=20, **cols):
    donors = np.repeat([f"d{i}" for i in range(n_donors)], cells)
    cond = np.where(np.repeat(np.arange(n_donors) < n_donors // 2, cells), "case", "control")
    obs = pd.DataFrame({"donor": donors, "condition": cond, "ct": np.tile(["T", "B"], n_donors * cells // 2)})
    for k, v in cols.items():
        obs[k] = np.repeat(v, cells)
    return obs


def test_design_check_refuses_a_confounding_covariate_and_warns_on_a_strong_one():
    kw = dict(groupby="condition", target=["case"], background=["control"], replicate="donor", split_by="ct")
    with pytest.raises(ScontrastError, match="covariate 'batch' determines the condition"):
        design_table(_obs(batch=["x"] * 4 + ["y"] * 4), covariates=["batch"], **kw)
    with pytest.warns(ScontrastWarning, match="covariate 'sex' is strongly associated"):
        design_table(_obs(sex=list("FFFMMMMF")), covariates=["sex"], **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScontrastWarning)
        table = design_table(_obs(sex=list("FMFMFMFM")), covariates=["sex"], **kw)
    assert table["testable"].all() and (table["n_labellings"] == 70).all()
    assert np.allclose(table["pvalue_floor"], 2 / 70)
    assert table["verdict"].str.contains("only together with others").all()  # 2/70 > 0.05 / 2


def test_design_check_names_dropped_donors_and_untestable_splits():
    obs = _obs()
    obs = obs[~((obs["donor"].isin(["d1", "d2", "d3"])) & (obs["ct"] == "B"))]  # B keeps one target donor
    obs = obs[~((obs["donor"] == "d5") & (obs["ct"] == "T") & (obs.groupby("donor").cumcount() > 3))]
    table = design_table(obs, groupby="condition", target=["case"], background=["control"], replicate="donor",
                         split_by="ct", min_cells_per_replicate=3)
    b = table[(table["value"] == "B") & (table["group"] == "target")].iloc[0]
    assert not b["testable"] and b["verdict"] == "not testable: 1 donor(s) in target (2 needed)"
    t = table[(table["value"] == "T") & (table["group"] == "background")].iloc[0]
    assert t["donors_dropped"] == "d5 (2 cells in background < 3)" and t["n_donors"] == 3


def test_null_effect_interval_covers_zero_and_planted_effect_grows(cells):
    rng = np.random.default_rng(0)
    U, F = 12, 40
    donor, is_target = np.arange(U), np.arange(U) < 6
    covered = 0
    for _ in range(50):  # null: every donor alike; the interval covers 0 in >= 90% of them
        prof = rng.normal(size=(U, F))
        _, low, high = jackknife_interval(prof, np.zeros((U, F)), is_target, donor)
        covered += low <= 0 <= high
    assert covered >= 40  # expected ~47.5: 40 is 2.9 binomial sd below
    prof = rng.normal(size=(U, F))
    small = jackknife_interval(prof + 0.5 * is_target[:, None], np.zeros((U, F)), is_target, donor)[0]
    large = jackknife_interval(prof + 1.0 * is_target[:, None], np.zeros((U, F)), is_target, donor)[0]
    assert 0 < small < large


def test_study_finds_the_planted_type_and_skips_the_untestable(cells, tmp_path):
    sim = simulate_study(cells, n_target=6, n_background=6, cells_per_donor=60, random_state=3,
                         effects=[{"cell_type": "CD14 Mono", "kind": "mean", "n_genes": 30, "fold": 3.0}])
    sim = sim[~((sim.obs["cell_type"] == "Dendritic") & sim.obs["donor"].isin(["D01", "D02", "D03", "D04", "D05"]))]
    res = _study(sim, subset={"cell_type": ["CD14 Mono", "B", "NK", "Dendritic"]})
    table = res.table.set_index("value")
    assert table.loc["CD14 Mono", "rank"] == 1 and table.loc["CD14 Mono", "padj"] < 0.05
    others = table.loc[["B", "NK"]]
    assert table.loc["CD14 Mono", "effect"] > others["effect"].max()
    assert ((others["effect_low"] <= 0) & (others["effect_high"] >= 0)).all()  # no effect: 0 covered
    assert table.loc["Dendritic", "status"] == "skipped: 1 donor(s) in target (2 needed)"
    assert list(table.index) == ["CD14 Mono", "B", "NK", "Dendritic"] or table.index[-1] == "Dendritic"
    assert res.exact and res.n_labellings == 924 and res.global_pvalue <= table.loc["CD14 Mono", "pvalue"] * 3
    parts = table.loc[["CD14 Mono", "B", "NK"], PART_COLUMNS]
    assert ((parts >= 2 / 924 - 1e-12) & (parts <= 1)).all().all() and parts.loc["CD14 Mono", "pvalue_location"] < 0.01
    planted = set(sim.uns["simulation"]["effects"]["0"]["genes"])
    top = [g.split(" (")[0] for g in table.loc["CD14 Mono", "top_genes"].split(", ")]
    assert sum(g in planted for g in top) >= 3
    fig = plot_ranking(res.table, res.global_pvalue)
    ax = fig.axes[0]
    ticks = dict(zip([t.get_text().split(" (")[0] for t in ax.get_yticklabels()], ax.get_yticks()))
    assert ticks["CD14 Mono"] == max(ticks.values())  # rank 1 drawn on top
    assert [t.get_text().split(" (")[0] for t in fig.axes[0].get_yticklabels()][0] == "CD14 Mono"  # top
    fig.canvas.draw()  # every label inside the figure, none over another
    boxes = [t.get_window_extent() for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text().strip()]
    assert all(b.x0 >= 0 and b.y0 >= 0 and b.x1 <= fig.bbox.width and b.y1 <= fig.bbox.height for b in boxes)
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    # the report's first block: a fragment of the page (no document of its own), the ranking figure inline
    # above the ranked splits' key columns, the whole table and the design check one click away
    fig.savefig(tmp_path / "study.png")
    page = study_html("demo <study>", res.table, res.global_pvalue, res.findings, res.design,
                      figure=tmp_path / "study.png")
    assert not page.lstrip().startswith("<html") and "<body" not in page and "Study demo &lt;study&gt;" in page
    first, whole, design = page.split("<details>")
    shown = first.split('src="data:image/png;base64,')[1].split('"')[0]
    assert base64.b64decode(shown) == (tmp_path / "study.png").read_bytes() and first.index(shown) < first.index("<table")
    assert "CD14 Mono" in first and "n_target_cells" not in first and "n_target_cells" in whole
    assert first.index("CD14 Mono") < first.index("Dendritic")  # in rank order
    assert "cells_per_donor_min" in design


def test_splits_tied_at_the_floor_rank_by_their_parts_then_effect():
    """Two splits at the same p (the floor) are ordered by their parts' p-values sorted, compared in turn (the test's own
    order of relabellings), before the effect; the findings name each called split's strongest family."""
    row = {"status": "tested", "pvalue": 2 / 924, "padj": 0.0076, "driven_by": "", "pvalue_floor": 2 / 924}
    table = pd.DataFrame([{**row, "value": "Mono", "effect": 0.05, **dict(zip(PART_COLUMNS, [0.0022, 0.004, 0.6, 0.5]))},
                          {**row, "value": "B", "effect": 0.09, **dict(zip(PART_COLUMNS, [0.3, 0.0022, 0.01, 0.9]))},
                          {**row, "value": "NK", "effect": 0.20, **dict(zip(PART_COLUMNS, [0.3, 0.0022, 0.01, 0.9]))}])
    ranked, findings = rank_and_say(table, 0.01, alpha=0.05, n_labellings=924, exact=True)
    assert ranked["value"].tolist() == ["Mono", "NK", "B"]  # Mono's second part is smaller; NK and B tie: effect
    assert "Mono (strongest: location), NK (strongest: spread), B (strongest: spread)" in findings[0]


def test_driven_by_names_the_donors_whose_removal_alone_ends_the_call(cells, monkeypatch):
    """A donor is named when the split's p-value without it, Benjamini-Hochberg redone with the other splits' p-values,
    is no longer called: not merely when it moves above the called splits' largest p-value."""
    sim = simulate_study(cells, n_target=3, n_background=3, cells_per_donor=15, random_state=2)
    split = study_module._split_data(sim, None, pd.DataFrame({
        "donor": sim.obs["donor"].astype(str).to_numpy(), "is_target": (sim.obs["condition"] == "case").to_numpy()},
        index=np.arange(sim.n_obs))[sim.obs["cell_type"].to_numpy() == "B"], "B", "B", sorted(sim.obs["donor"].unique()),
        paired=False, n_genes=50)
    # without D01 its p is 0.03, without D02 0.04, else 0.001; the study's p-values are 0.002 and (this split) 0.01
    without = {"D01": 0.03, "D02": 0.04}
    monkeypatch.setattr(study_module, "_split_test", lambda s, labs, **kw: (
        np.array([next((v for d, v in without.items() if d not in s.donors), 0.001)]), np.zeros(4)))
    named = study_module._driven_by(split, np.array([0.002, 0.01, 0.5]), 1, alpha=0.05, paired=False,
                                    blocks_of_donor=None, top_k=10, max_labellings=100, rng=np.random.default_rng(0))
    assert named == "D02"  # 0.03 stays called (padj 0.045), 0.04 does not (0.06)


@pytest.mark.parametrize("paired", [False, True])
def test_top_genes_name_a_gene_once_with_what_changed(paired):
    """A gene whose mean and spread both move tops both families: named once, '(mean and sd)'."""
    from scontrast.study._study import _Split, _top_genes

    rng = np.random.default_rng(0)
    G, n = 40, 8
    genes = np.array([f"g{i}" for i in range(G)])
    if paired:  # every donor gives a target and a background unit; the target's g0 up in mean and sd
        units = pd.DataFrame({"donor": np.repeat(np.arange(n), 2), "is_target": np.tile([True, False], n)})
    else:
        units = pd.DataFrame({"donor": np.arange(n), "is_target": np.arange(n) < n // 2})
    feats = rng.normal(scale=0.1, size=(len(units), 2 * G))
    feats[units["is_target"].to_numpy(), 0] += 2.0  # g0's log-CPM
    feats[units["is_target"].to_numpy(), G] += 1.5  # g0's sd
    feats[units["is_target"].to_numpy(), G + 3] += 1.0  # g3's sd only
    disp = rng.normal(scale=0.1, size=(len(units), G))  # the dispersions: no change
    tail = rng.normal(scale=0.1, size=(len(units), G))  # the upper tails: no change
    split = _Split("A", "A", list(range(n)), np.arange(n) < n // 2 if not paired else np.zeros(n, bool), units,
                   feats, np.zeros_like(feats), genes, disp, tail, np.ones(G, bool))
    names = _top_genes(split, paired, k=3).split(", ")
    assert names[:2] == ["g0 (mean and sd)", "g3 (sd)"] and len(names) == 3
    assert len({name.split(" (")[0] for name in names}) == 3  # distinct genes


def test_study_reproduces_with_a_seed(cells):
    sim = simulate_study(cells, n_target=4, n_background=4, cells_per_donor=20, random_state=1)
    a = _study(sim, subset={"cell_type": ["B", "NK"]})
    b = _study(sim, subset={"cell_type": ["B", "NK"]})
    assert a.table.equals(b.table) and a.global_pvalue == b.global_pvalue
    # 4 v 4 donors: 70 relabellings, floor 2/70 above 0.05/2: said in plain words
    assert (a.table["pvalue_floor"] == 2 / 70).all()
    assert all("only together with other splits" in n or a.table["padj"].min() < 0.05 for n in a.table["note"])


def _pseudobulk_data(paired=False):
    """8 donors, gene g0 4x in the target, gene g1 4x in males; 3 of 4 target donors male, 1 of 4 background."""
    rng = np.random.default_rng(0)
    donors = [f"d{i}" for i in range(8)]
    sex = dict(zip(donors, list("MMMFMFFF")))
    rows, obs = [], []
    for i, d in enumerate(donors):
        for grp in (["case", "control"] if paired else ["case" if i < 4 else "control"]):
            mu = np.full(50, 20.0) * np.exp(rng.normal(0, 0.1, 50))
            mu[0] *= 4.0 if grp == "case" else 1.0
            mu[1] *= 4.0 if sex[d] == "M" else 1.0
            rows.append(rng.poisson(mu, size=(30, 50)))
            obs += [(d, grp, sex[d])] * 30
    obs = pd.DataFrame(obs, columns=["donor", "condition", "sex"])
    return np.vstack(rows).astype(float), obs


def test_pseudobulk_covariate_takes_a_confounded_gene_out_of_the_group_effect():
    from scontrast.pseudobulk import deseq2, pseudobulk_counts, sample_covariates

    counts, obs = _pseudobulk_data()
    is_target = (obs["condition"] == "case").to_numpy()
    summed, samples = pseudobulk_counts(counts, is_target, obs["donor"], [f"g{i}" for i in range(50)])
    plain, f0 = deseq2(summed, samples, paired=False)
    cov = sample_covariates(obs, ["sex"], is_target, obs["donor"], samples)
    adjusted, f1 = deseq2(summed, samples, paired=False, covariates=cov)
    assert f0 == "~group" and f1 == "~sex + group"
    assert plain.loc["g0", "padj"] < 0.05 and adjusted.loc["g0", "padj"] < 0.05
    # g1 follows sex: unadjusted its group fold is log2(3.25 / 1.75) = 0.89 (3 of 4 target donors male); adjusted ~0
    assert abs(plain.loc["g1", "log2FoldChange"] - 0.89) < 0.3 and abs(adjusted.loc["g1", "log2FoldChange"]) < 0.3
    assert abs(adjusted.loc["g0", "log2FoldChange"] - 2.0) < 0.3  # log2(4): the condition's own gene is kept
    # paired: sex is a donor-level covariate, absorbed by the replicate term
    counts, obs = _pseudobulk_data(paired=True)
    is_target = (obs["condition"] == "case").to_numpy()
    summed, samples = pseudobulk_counts(counts, is_target, obs["donor"], [f"g{i}" for i in range(50)])
    cov = sample_covariates(obs, ["sex"], is_target, obs["donor"], samples)
    assert deseq2(summed, samples, paired=True, covariates=cov)[1] == "~replicate + group"


def test_shape_families_read_only_the_measurable_genes():
    """The sd, dispersion and tail families' top t^2 come from the tested genes alone (their trend from all), and a
    shape the test does not read is not named among the top genes."""
    from scontrast.study._study import _Split, _top_genes
    from scontrast.study._test import _family_t, part_statistics

    rng = np.random.default_rng(3)
    G, n = 30, 12
    feats = rng.normal(scale=0.2, size=(n, 4 * G))
    is_target = np.arange(n) < n // 2
    feats[is_target, 2 * G + 5] += 3.0  # gene 5's dispersion: a large change, in a gene the filter drops
    tested = np.ones(4 * G, bool)
    tested[[G + 5, 2 * G + 5, 3 * G + 5]] = False
    kinds = np.repeat([0, 1, 2, 3], G)
    labs, _ = study_labellings(is_target, paired=False)
    T = part_statistics(feats, labs, paired=False, top_k=3, kinds=kinds, tested=tested)
    t = _family_t(feats, labs, kinds, paired=False)
    disp = np.delete(t[:, 2 * G:3 * G], 5, axis=1)
    assert np.allclose(T[:, 2], np.sort(disp ** 2, axis=1)[:, -3:].mean(axis=1))
    every = part_statistics(feats, labs, paired=False, top_k=3, kinds=kinds)
    assert every[0, 2] > 3 * T[0, 2]  # read, gene 5 would dominate the family
    assert np.array_equal(every[:, 0], T[:, 0])  # the location reads every gene

    units = pd.DataFrame({"donor": np.arange(n), "is_target": is_target})
    two = np.hstack([feats[:, :G], feats[:, 2 * G:3 * G]])  # gene 5's "sd" column carries the change
    split = _Split("A", "A", list(range(n)), is_target, units, two, np.zeros_like(two),
                   np.array([f"g{i}" for i in range(G)]), feats[:, 2 * G:3 * G], feats[:, 3 * G:], np.arange(G) != 5)
    assert not any(name.startswith("g5 (") for name in _top_genes(split, False, k=3).split(", "))  # its mean may be
    split.shape_genes = np.ones(G, bool)
    assert _top_genes(split, False, k=3).split(", ")[0].startswith("g5 (")  # read, its shape leads


def test_unit_subsample_keeps_at_most_n_cells_of_each_unit_without_replacement():
    from scontrast.study import unit_subsample

    unit = np.repeat(np.array(["a", "b", "c"]), [40, 7, 12])[np.random.default_rng(1).permutation(59)]
    kept = unit_subsample(unit, 10, np.random.default_rng(0))
    assert np.unique(kept).size == kept.size and np.all(np.diff(kept) > 0)
    assert dict(zip(*np.unique(unit[kept], return_counts=True), strict=True)) == {"a": 10, "b": 7, "c": 10}
    assert not np.array_equal(kept, unit_subsample(unit, 10, np.random.default_rng(1)))


def test_effect_cells_reads_that_many_cells_per_donor_for_the_effect_only(cells):
    sim = simulate_study(cells, n_target=4, n_background=4, cells_per_donor=30, random_state=2,
                         effects=[{"cell_type": "B", "kind": "mean", "n_genes": 15, "fold": 3.0}])
    sub = {"cell_type": ["B", "NK"]}
    full = _study(sim, subset=sub, random_state=5).table.set_index("value")
    few = _study(sim, subset=sub, effect_cells=10, random_state=5)
    assert few.params["effect_cells"] == 10
    assert "each split's effect reads at most 10 cells of each donor (effect_cells)" in few.findings[-1]
    few = few.table.set_index("value")
    effect_columns = ["effect", "effect_low", "effect_high"]
    # the test and everything but the effect are as without the option: its cells are drawn from their own stream
    assert full.drop(columns=effect_columns).equals(few.drop(columns=effect_columns))
    assert (full["effect"] != few["effect"]).all()
    again = _study(sim, subset=sub, effect_cells=10, random_state=5).table.set_index("value")
    assert again[effect_columns].equals(few[effect_columns])
    # at least as many as any donor has: every cell, the effect of the default
    every = _study(sim, subset=sub, effect_cells=30, random_state=5).table.set_index("value")
    assert every[effect_columns].equals(full[effect_columns])


@pytest.mark.parametrize("bad", [0, 1, 2.5, True, "50"])
def test_effect_cells_refuses_what_is_not_a_number_of_cells(cells, bad):
    sim = simulate_study(cells, n_target=4, n_background=4, cells_per_donor=20, random_state=1)
    with pytest.raises(ScontrastError, match=r"^effect_cells: .* is not a number of cells of at least 2"):
        _study(sim, subset={"cell_type": ["B"]}, effect_cells=bad)
