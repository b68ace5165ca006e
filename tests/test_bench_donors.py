"""A small fast run of benchmarks/bench_donors.py --compare: the simulator, the limma-trend reference, one data set."""

import numpy as np
import pytest

from benchmarks import bench_donors as bd


@pytest.fixture(scope="module")
def pool():
    return bd.shipped_cd4_pool()


@pytest.mark.parametrize("design", ["4v4", "paired"])
def test_simulated_designs_have_their_donors_and_effects(pool, design):
    C, genes = pool
    assert C.shape == (1352, 300) and np.all(C == np.rint(C))
    rng = np.random.default_rng(0)
    a, planted = bd.simulate_design(C, genes, "mean", design, 30, rng)
    donors, paired = bd.DESIGNS[design]
    per_donor = a.obs.groupby("donor", observed=True)["group"].agg(lambda g: "".join(sorted(set(g))))
    assert per_donor.size == (donors if paired else 2 * donors)
    assert set(per_donor) == ({"BT"} if paired else {"B", "T"})
    X = a.X.toarray()
    t = (a.obs["group"] == "T").to_numpy()
    # a 2x mean shift of the planted genes: their target / background mean ratio is far above the others'
    ratio = X[t].mean(axis=0) / np.maximum(X[~t].mean(axis=0), 1e-9)
    assert np.median(ratio[planted]) > 1.5 > np.median(np.delete(ratio, planted))


def test_compare_one_runs_every_test_and_limma_finds_a_planted_shift(pool):
    C, genes = pool
    rng = np.random.default_rng(1)
    a, planted = bd.simulate_design(C, genes, "mean", "6v6", 30, rng)
    out = bd.compare_one(a, False, planted, genes, 0)
    assert set(out) >= {"combined", "today", "location", "deseq2_any", "deseq2_planted", "limma_any", "limma_planted",
                        "etest", "weighted", "location+shape"}
    # 6 vs 6 donors: 462 relabellings; every SPARDA p-value is a multiple of 1/462
    for k in ("combined", "today", "location", "weighted", "location+shape"):
        assert 0 < out[k] <= 1 and out[k] * 462 == pytest.approx(round(out[k] * 462))
    assert out["limma_planted"] < 0.05 and out["deseq2_planted"] < 0.05
    assert out["limma_any"] <= out["limma_planted"]


def test_donor_compare_one_runs_the_donor_test_its_variants_and_the_baselines(pool):
    C, genes = pool
    rng = np.random.default_rng(2)
    a, planted = bd.simulate_design(C, genes, "mean", "6v6", 30, rng)
    out = bd.donor_compare_one(a, False, planted, genes, 0, sparda=False, etest_too=False, deseq2=False)
    assert {"donor", "donor_location", "donor_spread", "limma_planted"} <= set(out) and "deseq2_any" not in out
    assert {f"v {name}" for name in bd.DONOR_VARIANTS} <= set(out)
    # 6 vs 6 donors, every labelling listed (924, a labelling and its mirror tie): p-values are multiples of 1/924
    for k in ("donor", "donor_location", "donor_spread"):
        assert 0 < out[k] <= 1 and out[k] * 924 == pytest.approx(round(out[k] * 924))
    # the default is the variant "loc+spread+disp k10"; a 2x shift of 5 genes at 30 cells a donor is found by it
    assert out["donor"] == out["v loc+spread+disp+tail k10"] and out["donor_location"] <= 0.05
    assert 0 < out["donor_dispersion"] <= 1 and out["donor_dispersion"] * 924 == pytest.approx(round(out["donor_dispersion"] * 924))
