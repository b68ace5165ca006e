"""Blocks (a dataset entry's ``block:``) in SPARDA's replicate test and FANGS's replicate enrichment.

Each relabels replicates only within their block: no donor changes group across blocks, and the
floor is that of the blocked labellings (checked against brute force: every subset of donors).
"""

import itertools

import anndata as ad
import numpy as np
import pandas as pd
import pytest

from scontrast.core import ScontrastError
from scontrast.design import REPLICATE_KEY
from scontrast.fangs import replicate_feature_enrichment
from scontrast.sparda import SPARDA
from scontrast.sparda._replicate import Replicates, _distinct_labellings
from scontrast.tl._fangs import fangs
from scontrast.tl._sparda import sparda

# 8 donors: 4 target (t0-t3), 4 background (b0-b3); sites A (t0, t1, b0) and B (t2, t3, b1, b2, b3)
TARGET = ["t0", "t1", "t2", "t3"]
BACKGROUND = ["b0", "b1", "b2", "b3"]
SITE = {"t0": "A", "t1": "A", "b0": "A", "t2": "B", "t3": "B", "b1": "B", "b2": "B", "b3": "B"}


def _brute(target: np.ndarray, blocks: np.ndarray) -> set[tuple]:
    """Every unpaired labelling (R,) keeping each block's number of target replicates."""
    return {bits for bits in itertools.product([False, True], repeat=target.size)
            if all(np.array(bits)[blocks == b].sum() == target[blocks == b].sum() for b in np.unique(blocks))}


def _cells(n_per_donor=12, genes=6, seed=0, shift=0.0):
    """Target cells X, background cells Y, their donors and sites; the target's gene 0 shifted by ``shift``."""
    rng = np.random.default_rng(seed)
    rx, ry = np.repeat(TARGET, n_per_donor), np.repeat(BACKGROUND, n_per_donor)
    X, Y = rng.normal(size=(rx.size, genes)), rng.normal(size=(ry.size, genes))
    X[:, 0] += shift
    return X, Y, rx, ry


def test_sparda_labellings_stay_within_blocks_and_are_all_listed():
    X, Y, rx, ry = _cells()
    bx, by = [SITE[d] for d in rx], [SITE[d] for d in ry]
    reps = Replicates.from_labels(rx, ry, rx.size, ry.size, False, bx, by)
    assert list(reps.blocks) == [SITE[n] for n in reps.names] and "within 2 blocks" in reps.summary()
    lab, exact, L = _distinct_labellings(reps, 10_000, np.random.default_rng(0))
    brute = _brute(reps.target, reps.blocks)
    # site A: 2 of 3 target (3 ways), site B: 2 of 5 (10 ways); no mirror (site A is unbalanced)
    assert exact and L == lab.shape[0] == len(brute) == 3 * 10
    assert {tuple(r) for r in lab} == brute


def test_sparda_halves_the_blocked_labellings_with_their_mirrors():
    X, Y, rx, ry = _cells()
    balanced = {"t0": "A", "b0": "A", "t1": "A", "b1": "A", "t2": "B", "b2": "B", "t3": "B", "b3": "B"}
    reps = Replicates.from_labels(rx, ry, rx.size, ry.size, False, [balanced[d] for d in rx],
                                  [balanced[d] for d in ry])
    lab, exact, L = _distinct_labellings(reps, 10_000, np.random.default_rng(0))
    rows = {tuple(r) for r in lab}
    assert exact and L == 6 * 6 // 2 and not rows & {tuple(~r) for r in lab}
    assert rows | {tuple(~r) for r in lab} == _brute(reps.target, reps.blocks)


def test_sparda_replicate_test_floor_follows_the_blocks():
    X, Y, rx, ry = _cells(shift=3.0)
    model = SPARDA(lam=0.5, random_state=0).fit(X, Y, rx, ry, blocks_x=[SITE[d] for d in rx],
                                                blocks_y=[SITE[d] for d in ry])
    t = model.test_
    assert t["method"] == "replicate" and t["exact"] and t["n_labellings"] == 30
    assert t["floor"] == pytest.approx(1 / 30) and model.pvalue_ == pytest.approx((1 + t["n_at_least"]) / 30)
    assert "relabelled within 2 blocks" in t["design"]
    unblocked = SPARDA(lam=0.5, random_state=0).fit(X, Y, rx, ry)
    assert unblocked.test_["n_labellings"] == 35  # C(8, 4) / 2


def test_sparda_blocks_are_checked_in_one_line():
    X, Y, rx, ry = _cells()
    bx = [SITE[d] for d in rx]
    bad = [SITE[d] for d in ry]
    bad[0] = "A" if bad[0] == "B" else "B"  # one cell of a donor in the other site
    with pytest.raises(ScontrastError, match=r"blocks: replicate 'b0' is in 2 blocks"):
        SPARDA(lam=0.5).fit(X, Y, rx, ry, blocks_x=bx, blocks_y=bad)
    with pytest.raises(ScontrastError, match="give both"):
        SPARDA(lam=0.5).fit(X, Y, rx, ry, blocks_x=bx)
    with pytest.raises(ScontrastError, match="give replicates_x and replicates_y too"):
        SPARDA(lam=0.5).fit(X, Y, blocks_x=bx, blocks_y=bx[:Y.shape[0]])


def _declared(X, Y, rx, ry) -> ad.AnnData:
    """Cells with a declared unpaired donor design and a site column, as preprocess records them."""
    donors = np.concatenate([rx, ry])
    obs = pd.DataFrame({"scontrast_target": np.arange(donors.size) < rx.size, REPLICATE_KEY: pd.Categorical(donors),
                        "site": pd.Categorical([SITE[d] for d in donors])},
                       index=[f"c{i}" for i in range(donors.size)])
    adata = ad.AnnData(np.vstack([X, Y]).astype(np.float32), obs=obs,
                       var=pd.DataFrame(index=[f"g{i}" for i in range(X.shape[1])]))
    adata.uns["scontrast"] = {"design": {"replicate": "donor", "paired": False, "unit": "replicate",
                                         "summary": "replicate: donor (unpaired)"}}
    return adata


def test_tl_sparda_records_the_blocks():
    adata = _declared(*_cells(shift=3.0))
    sparda(adata, genes="all", lam=0.5, block="site", random_state=0)
    test = adata.uns["sparda"]["test"]
    assert list(test["blocks"]) == ["A", "B"] and test["n_labellings"] == 30
    assert adata.uns["sparda"]["params"]["block"] == "site"
    plain = _declared(*_cells(shift=3.0))
    sparda(plain, genes="all", lam=0.5, random_state=0)
    assert "blocks" not in plain.uns["sparda"]["test"] and "block" not in plain.uns["sparda"]["params"]
    with pytest.raises(ScontrastError, match="block 'batch': no such obs column"):
        sparda(_declared(*_cells()), genes="all", lam=0.5, block="batch")
    cells = _declared(*_cells())
    del cells.uns["scontrast"]
    with pytest.raises(ScontrastError, match="block 'site': blocks group replicates, and no replicate is declared"):
        sparda(cells, genes="all", lam=0.5, block="site")


def test_fangs_enrichment_floor_follows_the_blocks():
    """A feature of every target cell: p at the blocked floor, which equals brute force (30 labellings, no mirror)."""
    X, Y, rx, ry = _cells(n_per_donor=5)
    donors = np.concatenate([rx, ry])
    is_target = np.arange(donors.size) < rx.size
    estimate = is_target[:, None].astype(np.uint8)
    sites = np.array([SITE[d] for d in donors])
    res = replicate_feature_enrichment(estimate, is_target, donors, paired=False, blocks=sites)
    names = np.unique(donors)
    labellings = _brute(np.isin(names, TARGET), np.array([SITE[n] for n in names]))
    assert res["pvalue_floor"] == pytest.approx(1 / len(labellings)) == pytest.approx(1 / 30)
    assert res["pvalue"][0] == pytest.approx(res["pvalue_floor"])
    assert list(res["replicate_blocks"]) == [SITE[n] for n in names]
    plain = replicate_feature_enrichment(estimate, is_target, donors, paired=False)
    assert plain["pvalue_floor"] == pytest.approx(2 / 70) and "replicate_blocks" not in plain


def test_tl_fangs_enrichment_within_blocks():
    adata = _declared(*_cells(n_per_donor=5))
    t = adata.obs["scontrast_target"].to_numpy()
    samples = [np.column_stack([t, ~t]).astype(np.uint8) for _ in range(10)]
    fangs(adata, samples=samples, draws=False, block="site", random_state=0)
    f = adata.uns["fangs"]
    assert f["feature_pvalue_floor"] == pytest.approx(1 / 30) and "within the blocks of 'site'" in f["feature_test"]
    assert dict(zip(f["feature_replicate_names"], f["feature_replicate_blocks"])) == SITE
