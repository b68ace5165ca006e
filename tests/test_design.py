"""The replicate design (scontrast.design) and its declaration in preprocess."""

import itertools
import math

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from scontrast.core import ScontrastError
from scontrast.design import (
    REPLICATE_KEY,
    between_replicate_share,
    cell_labels,
    declare_design,
    grouped_folds,
    labelling_floor,
    replicate_labellings,
    replicate_mean_test,
    undeclared_design_columns,
)
from scontrast.preprocess import preprocess

# --------------------------------------------------------------------------- labellings


@pytest.mark.parametrize("r_t,r_b", [(2, 2), (3, 3), (4, 2), (2, 5)])
def test_unpaired_labellings_are_every_choice_of_target_replicates_once(r_t, r_b):
    obs = np.array([True] * r_t + [False] * r_b)[::-1]
    lab, exact = replicate_labellings(obs, paired=False, max_labellings=10_000)
    assert exact and lab.shape == (math.comb(r_t + r_b, r_t), r_t + r_b)
    np.testing.assert_array_equal(lab[0], obs)
    brute = {c for c in itertools.product([False, True], repeat=r_t + r_b) if sum(c) == r_t}
    assert {tuple(row) for row in lab} == brute and len({tuple(row) for row in lab}) == len(lab)


@pytest.mark.parametrize("R", [2, 4, 6])
def test_paired_labellings_are_every_set_of_swaps_once(R):
    lab, exact = replicate_labellings(np.ones(R, bool), paired=True, max_labellings=10_000)
    assert exact and lab.shape == (2 ** R, R) and not lab[0].any()
    assert {tuple(row) for row in lab} == set(itertools.product([False, True], repeat=R))


def test_sampled_labellings_keep_the_observed_first_and_the_group_sizes():
    obs = np.array([True] * 10 + [False] * 10)
    lab, exact = replicate_labellings(obs, paired=False, max_labellings=200, random_state=0)
    assert not exact and lab.shape == (200, 20)
    np.testing.assert_array_equal(lab[0], obs)
    assert (lab.sum(1) == 10).all()
    again, _ = replicate_labellings(obs, paired=False, max_labellings=200, random_state=0)
    np.testing.assert_array_equal(lab, again)
    lab, exact = replicate_labellings(np.ones(20, bool), paired=True, max_labellings=300, random_state=1)
    assert not exact and lab.shape == (300, 20) and not lab[0].any()
    assert abs(lab[1:].mean() - 0.5) < 0.05


def test_floors():
    lab, exact = replicate_labellings(np.array([1, 1, 1, 0, 0, 0], bool), paired=False)
    assert labelling_floor(lab, paired=False, exact=exact) == pytest.approx(2 / 20)  # 3 vs 3: the mirror ties
    assert labelling_floor(lab, paired=False, exact=exact, symmetric=False) == pytest.approx(1 / 20)
    lab, exact = replicate_labellings(np.array([1, 1, 1, 1, 0, 0], bool), paired=False)
    assert labelling_floor(lab, paired=False, exact=exact) == pytest.approx(1 / 15)   # no mirror with 4 vs 2
    lab, exact = replicate_labellings(np.ones(6, bool), paired=True)
    assert labelling_floor(lab, paired=True, exact=exact) == pytest.approx(2 / 64)
    lab, exact = replicate_labellings(np.ones(12, bool), paired=True, max_labellings=1000, random_state=0)
    assert labelling_floor(lab, paired=True, exact=exact) == pytest.approx(1 / 1000)


def test_cell_labels_follow_the_replicates():
    rep = np.array([0, 0, 1, 1, 2, 2])
    is_target = np.array([1, 0, 1, 0, 1, 0], bool)
    swapped = cell_labels(np.array([False, True, False]), rep, is_target, paired=True)
    np.testing.assert_array_equal(swapped, [1, 0, 0, 1, 1, 0])
    unpaired = cell_labels(np.array([True, False, True]), rep, is_target, paired=False)
    np.testing.assert_array_equal(unpaired, [1, 1, 0, 0, 1, 1])


# --------------------------------------------------------------------------- declaring the design


def _cells(spec):
    """spec: {replicate: (n_target, n_background)} -> (replicate labels, is_target)."""
    rep, tgt = [], []
    for r, (nt, nb) in spec.items():
        rep += [r] * (nt + nb)
        tgt += [True] * nt + [False] * nb
    return np.array(rep, dtype=object), np.array(tgt)


def test_unpaired_replicate_in_both_groups_is_refused_in_one_line():
    rep, tgt = _cells({"a": (5, 0), "b": (5, 0), "c": (0, 5), "d": (2, 4)})
    with pytest.raises(ScontrastError, match=r"^replicate 'd' of obs column 'donor' has cells in both groups.*paired: true"
                       ) as err:
        declare_design(rep, tgt, column="donor")
    assert "\n" not in str(err.value)


def test_paired_replicates_missing_a_group_or_small_are_dropped_with_reasons():
    rep, tgt = _cells({"a": (5, 5), "b": (5, 5), "c": (5, 0), "d": (2, 6), "e": (4, 4)})
    d = declare_design(rep, tgt, column="patient", paired=True, min_cells=3)
    assert d.target_replicates == d.background_replicates == ("a", "b", "e")
    assert set(d.dropped) == {"c", "d"} and "no background cell" in d.dropped["c"] and "2 target" in d.dropped["d"]
    assert d.keep.sum() == 28 and set(d.replicates[d.keep]) == {"a", "b", "e"} and (d.replicates[~d.keep] == "").all()
    assert d.summary() == "replicate: patient, 3 target / 3 background (paired)"


def test_too_few_replicates_left_is_refused():
    rep, tgt = _cells({"a": (5, 0), "b": (5, 0), "c": (0, 5), "d": (0, 2)})
    with pytest.raises(ScontrastError, match=r"1 background replicates remain after dropping d.*at least 2"):
        declare_design(rep, tgt, column="donor", min_cells=3)


def test_cells_without_a_replicate_are_left_out():
    rep, tgt = _cells({"a": (5, 0), "b": (5, 0), "c": (0, 5), "d": (0, 5)})
    rep[0] = None
    rep[12] = np.nan
    d = declare_design(rep, tgt, column="donor")
    assert d.keep.sum() == 18 and not d.keep[0] and not d.keep[12]


# --------------------------------------------------------------------------- folds


@pytest.mark.parametrize("paired", [False, True])
def test_grouped_folds_never_split_a_replicate(paired):
    rng = np.random.default_rng(0)
    if paired:
        rep, y = _cells({f"p{i}": (int(rng.integers(3, 20)), int(rng.integers(3, 20))) for i in range(7)})
    else:
        rep, y = _cells({**{f"t{i}": (int(rng.integers(3, 20)), 0) for i in range(5)},
                         **{f"b{i}": (0, int(rng.integers(3, 20))) for i in range(4)}})
    folds = grouped_folds(y, rep, n_splits=5, random_state=0)
    seen = np.zeros(y.size, int)
    for train, test in folds:
        assert not set(rep[train]) & set(rep[test])
        assert set(y[test]) == {True, False} if paired else True
        seen[test] += 1
    assert (seen == 1).all()
    assert len(folds) == (5 if paired else 4)  # unpaired: at most the smaller class's 4 replicates


def test_grouped_folds_need_two_replicates_per_class():
    rep, y = _cells({"a": (5, 0), "b": (0, 5), "c": (0, 5)})
    with pytest.raises(ScontrastError, match="a class has 1 replicate"):
        grouped_folds(y, rep, n_splits=3)


# --------------------------------------------------------------------------- replicate-level tests


def test_replicate_mean_test_matches_brute_force():
    rng = np.random.default_rng(3)
    values = rng.random((7, 4))
    groups = np.array([1, 1, 1, 0, 0, 0, 0], bool)
    diff, p, floor = replicate_mean_test(values, groups, paired=False)
    stats = []
    for chosen in itertools.combinations(range(7), 3):
        t = np.zeros(7, bool)
        t[list(chosen)] = True
        stats.append(values[t].mean(0) - values[~t].mean(0))
    stats = np.array(stats)
    obs = values[groups].mean(0) - values[~groups].mean(0)
    np.testing.assert_allclose(diff, obs, rtol=1e-12)
    np.testing.assert_allclose(p, (np.abs(stats) >= np.abs(obs) - 1e-12).mean(0))
    assert floor == pytest.approx(1 / 35)

    pairs = rng.random((6, 2, 3))
    diff, p, floor = replicate_mean_test(pairs, np.ones(6, bool), paired=True)
    d = pairs[:, 0] - pairs[:, 1]
    flips = np.array([[(-1) ** b for b in bits] for bits in itertools.product([0, 1], repeat=6)])
    stats = flips @ d / 6
    np.testing.assert_allclose(diff, d.mean(0), rtol=1e-12)
    np.testing.assert_allclose(p, (np.abs(stats) >= np.abs(d.mean(0)) - 1e-12).mean(0))
    assert floor == pytest.approx(2 / 64)


def test_replicate_mean_test_is_calibrated_under_donor_effects():
    """Cells of a donor share the donor's prevalence: a cell-level test rejects often, the replicate one at its level."""
    from scipy.stats import fisher_exact

    rng = np.random.default_rng(0)
    reject_rep = reject_cell = 0
    n_sim = 300
    for _ in range(n_sim):
        prev = rng.beta(2, 5, size=10)                    # 5 vs 5 donors, no group effect
        cells = [rng.random(int(rng.integers(30, 80))) < p for p in prev]
        groups = np.array([True] * 5 + [False] * 5)
        _, p, _ = replicate_mean_test(np.array([c.mean() for c in cells])[:, None], groups, paired=False)
        reject_rep += p[0] <= 0.05
        a = sum(c.sum() for c, g in zip(cells, groups) if g)
        n_a = sum(c.size for c, g in zip(cells, groups) if g)
        b = sum(c.sum() for c, g in zip(cells, groups) if not g)
        n_b = sum(c.size for c, g in zip(cells, groups) if not g)
        reject_cell += fisher_exact([[a, n_a - a], [b, n_b - b]])[1] <= 0.05
    # binomial band: 300 draws at 0.05 -> sd 0.0126; 0.05 + 3 sd = 0.088
    assert reject_rep / n_sim <= 0.088
    assert reject_cell / n_sim > 0.3


def test_between_replicate_share_known_answers():
    rep = np.repeat(["a", "b", "c"], 4)
    only_between = np.repeat([0.0, 1.0, 2.0], 4)
    only_within = np.tile([1.0, -1.0, 2.0, -2.0], 3)
    share = between_replicate_share(np.c_[only_between, only_within, only_between + only_within], rep)
    np.testing.assert_allclose(share[:2], [1.0, 0.0], atol=1e-12)
    total = ((only_between - 1) ** 2).sum() + (only_within ** 2).sum()
    np.testing.assert_allclose(share[2], ((only_between - 1) ** 2).sum() / total, rtol=1e-12)
    assert np.isnan(between_replicate_share(np.ones(12), rep)[0])


# --------------------------------------------------------------------------- preprocess


def test_undeclared_design_columns_by_name_and_values():
    obs = pd.DataFrame({
        "patient_id": ["p1", "p2", "p3", "p4"] * 3,
        "Sample": ["s1"] * 12,                      # one value only
        "orig.ident": ["x", "x", "y", "y"] * 3,
        "donors": ["d1", "d2", "d3"] * 4,
        "condition": ["a", "a", "b", "b"] * 3,               # not named like a replicate
        "subjectivity": ["q", "q", "r", "r"] * 3,            # a word that merely contains one
    })
    is_target = np.array([True, False] * 6)
    assert undeclared_design_columns(obs, is_target) == ["patient_id", "orig.ident", "donors"]
    assert undeclared_design_columns(obs, is_target, exclude={"patient_id"}) == ["orig.ident", "donors"]


def _adata(spec, seed=0):
    rep, tgt = _cells(spec)
    rng = np.random.default_rng(seed)
    X = sp.csr_matrix(rng.poisson(2.0, size=(rep.size, 60)).astype(np.float32))
    obs = pd.DataFrame({"cond": np.where(tgt, "T", "C"), "donor": rep}, index=[f"c{i}" for i in range(rep.size)])
    return ad.AnnData(X=X, obs=obs, var=pd.DataFrame(index=[f"g{j}" for j in range(60)]))


KW = dict(groupby="cond", target=["T"], background=["C"], min_genes=1, min_cells=1, n_top_genes=30)


def test_preprocess_records_the_design_and_drops_what_it_names():
    adata = _adata({"a": (12, 12), "b": (12, 12), "c": (12, 0), "d": (2, 12), "e": (12, 12)})
    out = preprocess(adata, replicate="donor", paired=True, **KW)
    messages = list(out.uns["scontrast"]["preprocess"]["warnings"])
    assert any("replicate 'c' of obs column 'donor' dropped: no background cell" in m for m in messages)
    assert any("replicate 'd' of obs column 'donor' dropped" in m for m in messages)
    assert not any(m.startswith("QC removed") for m in messages)  # dropped replicates are not QC losses
    design = out.uns["scontrast"]["design"]
    assert design["replicate"] == "donor" and design["paired"] and design["unit"] == "replicate"
    assert list(design["target_replicates"]) == ["a", "b", "e"]
    assert list(out.obs[REPLICATE_KEY].cat.categories) == ["a", "b", "e"] and out.n_obs == 72
    assert sp.issparse(out.X)
    reasons = out.uns["scontrast"]["preprocess"]["qc_removed"]["reason"]
    assert (reasons == "replicate").sum() == 26


def test_preprocess_without_replicate_warns_about_a_donor_column_once():
    adata = _adata({"a": (12, 12), "b": (12, 12), "e": (12, 12)})
    out = preprocess(adata, **KW)
    warned = [m for m in out.uns["scontrast"]["preprocess"]["warnings"] if "looks like donors" in m]
    assert len(warned) == 1
    assert "obs column 'donor' looks like donors or samples (3 values in the target group, 3 in the background)" in warned[0]
    assert "declare replicate: donor" in warned[0]
    assert out.uns["scontrast"]["design"]["unit"] == "cell"
    assert REPLICATE_KEY not in out.obs
    plain = ad.AnnData(X=adata.X, obs=adata.obs[["cond"]], var=adata.var)  # no donor-like column: no warning
    assert not any("looks like donors" in m for m in preprocess(plain, **KW).uns["scontrast"]["preprocess"]["warnings"])


def test_preprocess_refusals():
    adata = _adata({"a": (12, 0), "b": (12, 0), "c": (0, 12), "d": (4, 12)})
    with pytest.raises(ScontrastError, match="replicate 'd' of obs column 'donor' has cells in both groups"):
        preprocess(adata, replicate="donor", **KW)
    with pytest.raises(ScontrastError, match=r"obs column 'nope' \(replicate\) is absent"):
        preprocess(adata, replicate="nope", **KW)
    with pytest.raises(ScontrastError, match="paired: true needs a replicate column"):
        preprocess(adata, paired=True, **KW)


# --------------------------------------------------------------------------- blocks
def _brute_blocked(target, blocks):
    """Every labelling (R,) that keeps each block's number of target replicates: all 2^R subsets, filtered."""
    blocks = np.asarray(blocks)
    keep = []
    for bits in itertools.product([False, True], repeat=target.size):
        b = np.array(bits)
        if all(b[blocks == k].sum() == target[blocks == k].sum() for k in np.unique(blocks)):
            keep.append(bits)
    return set(keep)


@pytest.mark.parametrize("target,blocks", [
    ([1, 0, 1, 0, 1, 1, 0, 0], list("aabbcccc")),      # balanced blocks: every labelling has its mirror
    ([1, 1, 0, 0, 1, 0, 0, 1, 0], list("aaaabbbbb")),  # block b holds 2 of 5 target: no mirror
    ([1, 1, 1, 0, 0, 0], list("xyxyxy")),              # blocks interleaved with the groups
])
def test_blocked_labellings_never_move_a_replicate_across_blocks(target, blocks):
    target = np.array(target, bool)
    lab, exact = replicate_labellings(target, paired=False, blocks=blocks, max_labellings=10_000)
    assert exact and np.array_equal(lab[0], target)
    rows = [tuple(r) for r in lab]
    assert len(set(rows)) == len(rows)                  # each once
    assert set(rows) == _brute_blocked(target, blocks)  # and every one of them
    for k in set(blocks):
        cols = np.array(blocks) == k
        assert (lab[:, cols].sum(axis=1) == target[cols].sum()).all()
    # sampled: every draw keeps the blocks' target counts too, and the same seed draws the same labellings
    sampled, exact = replicate_labellings(target, paired=False, blocks=blocks, max_labellings=3, random_state=0)
    assert not exact and {tuple(r) for r in sampled} <= _brute_blocked(target, blocks)
    again, _ = replicate_labellings(target, paired=False, blocks=blocks, max_labellings=3, random_state=0)
    assert np.array_equal(sampled, again)


def test_blocks_change_nothing_when_paired_or_absent():
    target = np.array([1, 1, 1, 0, 0, 0], bool)
    plain, _ = replicate_labellings(target, paired=False)
    one_block, _ = replicate_labellings(target, paired=False, blocks=["s"] * 6)
    assert np.array_equal(plain, one_block)
    paired, _ = replicate_labellings(np.ones(4, bool), paired=True)
    paired_blocks, _ = replicate_labellings(np.ones(4, bool), paired=True, blocks=list("aabb"))
    assert np.array_equal(paired, paired_blocks)
    with pytest.raises(ScontrastError, match=r"blocks: expected one block per replicate \(6\), got 5"):
        replicate_labellings(target, paired=False, blocks=list("aabbc"))
    with pytest.raises(ScontrastError, match="blocks: a replicate has no block"):
        replicate_labellings(target, paired=False, blocks=["a", "a", None, "b", "b", "b"])


@pytest.mark.parametrize("target,blocks", [
    ([1, 0, 1, 0, 1, 1, 0, 0], list("aabbcccc")),
    ([1, 1, 0, 0, 1, 0, 0, 1, 0], list("aaaabbbbb")),
    ([1, 1, 0, 0, 0, 1], list("aaabbb")),             # 3 vs 3 overall, but 2 of 3 and 1 of 3 per block: no mirror
])
def test_blocked_floor_equals_brute_force(target, blocks):
    """The smallest p-value of a statistic symmetric in the groups over the blocked labellings, by brute force."""
    target = np.array(target, bool)
    rng = np.random.default_rng(0)
    values = rng.normal(size=(target.size, 1))  # generic values: no ties but the mirror's
    lab, exact = replicate_labellings(target, paired=False, blocks=blocks, max_labellings=10_000)
    t = lab.astype(float)
    stat = np.abs((t @ values) / t.sum(1, keepdims=True) - ((1 - t) @ values) / (1 - t).sum(1, keepdims=True))[:, 0]
    brute = min(np.mean(stat >= s - 1e-12) for s in stat)
    assert labelling_floor(lab, paired=False, exact=exact, blocks=blocks) == pytest.approx(brute)
    # the permutation test over the same labellings reaches that floor at the most extreme labelling
    best = lab[np.argmax(stat)]
    _, p, floor = replicate_mean_test(values, best, paired=False, blocks=blocks)
    assert floor == pytest.approx(brute) and p[0] == pytest.approx(brute)
