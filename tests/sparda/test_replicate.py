"""SPARDA's replicate-level test and folds (scontrast.sparda._replicate)."""

import itertools
import math

import numpy as np
import pytest

from scontrast.core import ScontrastError
from scontrast.sparda import SPARDA
from scontrast.sparda._replicate import Replicates, _distinct_labellings, replicate_folds


def _donors(n_donors, cells, genes, seed, effect=0.0, sd=1.0, paired=False):
    """Donors with their own gene means (sd ``sd``); the target cells' gene 0 shifted by ``effect``."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0, sd, size=(n_donors, genes))
    if paired:
        donor = np.tile(np.repeat(np.arange(n_donors), cells), 2)
        target = np.arange(donor.size) < n_donors * cells
    else:
        donor = np.repeat(np.arange(n_donors), cells)
        target = donor < n_donors // 2
    Z = means[donor] + rng.standard_normal((donor.size, genes))
    Z[target, 0] += effect
    names = np.array([f"d{i}" for i in donor])
    return Z[target], Z[~target], names[target], names[~target]


def test_replicates_are_validated_in_one_line():
    with pytest.raises(ScontrastError, match="'a' has cells in both groups; declare the design paired"):
        Replicates.from_labels(["a", "b", "c"], ["a", "d", "e"], 3, 3, False)
    with pytest.raises(ScontrastError, match="1 target and 2 background replicates"):
        Replicates.from_labels(["a", "a"], ["b", "c"], 2, 2, False)
    with pytest.raises(ScontrastError, match="'c' has no cell in one group of a paired design"):
        Replicates.from_labels(["a", "b", "c"], ["a", "b", "b"], 3, 3, True)
    with pytest.raises(ScontrastError, match=r"expected shapes \(3,\) and \(2,\)"):
        Replicates.from_labels(["a", "b", "c"], ["d"], 3, 2, False)


@pytest.mark.parametrize("r_t,r_b,paired,expected", [(3, 3, False, math.comb(6, 3) // 2), (4, 2, False, math.comb(6, 4)),
                                                      (5, 5, True, 2 ** 5 // 2)])
def test_each_labelling_and_its_mirror_is_evaluated_once(r_t, r_b, paired, expected):
    if paired:
        reps = Replicates.from_labels([f"p{i}" for i in range(r_t)], [f"p{i}" for i in range(r_b)], r_t, r_b, True)
    else:
        reps = Replicates.from_labels([f"t{i}" for i in range(r_t)], [f"b{i}" for i in range(r_b)], r_t, r_b, False)
    lab, exact, L = _distinct_labellings(reps, 10_000, np.random.default_rng(0))
    assert exact and L == expected == lab.shape[0]
    np.testing.assert_array_equal(lab[0], reps.target if not paired else np.zeros(r_t, bool))
    mirror = ~lab if (paired or r_t == r_b) else None
    rows = {tuple(r) for r in lab}
    assert len(rows) == L
    if mirror is not None:  # no labelling kept together with its mirror
        assert not rows & {tuple(r) for r in mirror}
        full = rows | {tuple(r) for r in mirror}
        brute = set(itertools.product([False, True], repeat=reps.target.size))
        if not paired:
            brute = {b for b in brute if sum(b) == r_t}
        assert full == brute


@pytest.mark.parametrize("paired", [False, True])
def test_folds_hold_out_whole_replicates(paired):
    X, Y, rx, ry = _donors(8, 10, 3, 0, paired=paired)
    reps = Replicates.from_labels(rx, ry, rx.size, ry.size, paired)
    folds = replicate_folds(reps, rx.size, 3, 0)
    assert len(folds) == 3
    seen_x, seen_y = np.zeros(rx.size, int), np.zeros(ry.size, int)
    for trx, tex, try_, tey in folds:
        assert not set(rx[trx]) & set(rx[tex]) and not set(ry[try_]) & set(ry[tey])
        if paired:
            assert set(rx[tex]) == set(ry[tey])
        seen_x[tex] += 1
        seen_y[tey] += 1
    assert (seen_x == 1).all() and (seen_y == 1).all()


def test_donor_differences_do_not_read_as_group_differences():
    """4 vs 4 donors, no group effect: the cell-level test rejects, the replicate test holds its level."""
    X, Y, rx, ry = _donors(8, 30, 10, 1)
    cells = SPARDA(lam=0.5, n_permutations=199, random_state=0).fit(X, Y)
    assert cells.test_["method"] == "permute" and cells.pvalue_ <= 0.01
    model = SPARDA(lam=0.5, random_state=0).fit(X, Y, rx, ry)
    t = model.test_
    assert t["method"] == "replicate" and t["unit"] == "replicate" and t["exact"]
    assert t["n_labellings"] == 35 and t["floor"] == pytest.approx(1 / 35)
    assert model.pvalue_ > 0.05
    assert model.pvalue_ == pytest.approx((1 + t["n_at_least"]) / 35)


def test_replicate_test_finds_a_shift_every_donor_shares():
    X, Y, rx, ry = _donors(12, 25, 8, 2, effect=2.5, sd=0.3)
    model = SPARDA(lam=0.5, random_state=0).fit(X, Y, rx, ry)
    # the location family at its floor, 1 / C(12, 6) * 2; the min-p of three families is at most 3 / 462 (the spread
    # and dispersion families' own most extreme relabellings tie the observed one's smallest part)
    assert model.test_["method"] == "replicate" and model.test_["parts"]["location"] == pytest.approx(1 / 462)
    assert model.pvalue_ <= 3 / 462 + 1e-12


def test_paired_floor_is_warned_and_cell_tests_with_replicates_are_warned():
    X, Y, rx, ry = _donors(4, 15, 5, 3, paired=True)
    with pytest.warns(Warning, match=r"only 8 distinct relabellings .* smallest possible p-value is 0.125"):
        model = SPARDA(lam=0.5, random_state=0).fit(X, Y, rx, ry, paired=True)
    assert model.test_["paired"] and model.test_["n_labellings"] == 8
    with pytest.warns(Warning, match="relabels cells although replicates are given"):
        SPARDA(lam=0.5, test="permute", n_permutations=19, random_state=0).fit(X, Y, rx, ry, paired=True)
    with pytest.raises(ScontrastError, match="test: 'replicate' needs each cell's replicate"):
        SPARDA(lam=0.5, test="replicate").fit(X, Y)


def test_calibrated_over_null_simulations():
    """Type I error of the replicate test under donor effects, over 40 simulated 4 vs 4 designs.

    Each exact p-value is a multiple of 1/35 and super-uniform under exchangeable donors; at
    0.1 the rejection count is Binomial(40, <= 0.1): P(X >= 10) < 0.01.
    """
    p = [SPARDA(lam=0.5, random_state=s).fit(*_donors(8, 12, 6, 100 + s)[:2], *_donors(8, 12, 6, 100 + s)[2:])
         .pvalue_ for s in range(40)]
    assert sum(v <= 0.1 for v in p) < 10


# --------------------------------------------------------------------------- test_max_cells
def test_test_max_cells_keeps_one_share_of_every_donor_and_group():
    # paired donors with unequal groups: every (donor, group) stratum keeps round(share x its cells), so a
    # donor's swap under the null exchanges the two quotas with the two strata (the test stays exact)
    rng = np.random.default_rng(5)
    cells_t, cells_b = np.array([40, 12, 30, 18]), np.array([10, 28, 30, 22])
    rx = np.repeat([f"d{i}" for i in range(4)], cells_t)
    ry = np.repeat([f"d{i}" for i in range(4)], cells_b)
    X, Y = rng.normal(size=(rx.size, 3)), rng.normal(size=(ry.size, 3))
    # the share applies to SPARDA's distributional parts (the donor test reads every cell once)
    model = SPARDA(lam=0.5, test_max_cells=48, test_distribution=True, random_state=0).fit(X, Y, rx, ry, paired=True)
    share = 96 / 190
    Xs, Ys, reps = model._test_cells(X, Y, model.replicates_, np.random.default_rng(1))
    names = reps.names[reps.index]
    kept_t = dict(zip(*np.unique(names[:Xs.shape[0]], return_counts=True)))
    kept_b = dict(zip(*np.unique(names[Xs.shape[0]:], return_counts=True)))
    assert kept_t == {f"d{i}": int(np.rint(c * share)) for i, c in enumerate(cells_t)}
    assert kept_b == {f"d{i}": int(np.rint(c * share)) for i, c in enumerate(cells_b)}
    rows = [int(np.flatnonzero((X == r).all(axis=1))[0]) for r in Xs]
    assert list(rx[rows]) == list(names[:Xs.shape[0]])  # the kept cells keep their own donors
    t = model.test_
    assert t["subsampled"] and t["test_max_cells"] == 48 and t["n_cells"].sum() == sum(kept_t.values()) + sum(
        kept_b.values())


def test_test_max_cells_at_or_above_half_the_cells_changes_nothing():
    X, Y, rx, ry = _donors(8, 30, 6, 4, effect=0.5)
    ref = SPARDA(lam=0.5, test_max_cells=None, random_state=0, test_distribution=True).fit(X, Y, rx, ry)
    same = SPARDA(lam=0.5, test_max_cells=120, random_state=0, test_distribution=True).fit(X, Y, rx, ry)
    assert not same.test_["subsampled"] and list(same.test_["n_cells"]) == [120, 120]
    np.testing.assert_array_equal(same.null_divergences_, ref.null_divergences_)
    assert same.pvalue_ == ref.pvalue_
    sub = SPARDA(lam=0.5, test_max_cells=60, random_state=0, test_distribution=True).fit(X, Y, rx, ry)
    assert sub.test_["subsampled"] and list(sub.test_["n_cells"]) == [60, 60]
    # the fit uses every cell whatever the test's subsample
    np.testing.assert_array_equal(sub.components_, ref.components_)


def test_test_max_cells_keeps_the_power_and_the_level():
    # a shift every donor shares is still found at the floor on a quarter of the cells ...
    X, Y, rx, ry = _donors(12, 40, 8, 2, effect=2.5, sd=0.3)
    model = SPARDA(lam=0.5, test_max_cells=120, random_state=0, test_distribution=True).fit(X, Y, rx, ry)
    assert model.test_["subsampled"] and model.pvalue_ == pytest.approx(1 / 462)
    # ... and with donor effects only, the subsampled test holds its level over 40 simulated 4 vs 4 designs
    # (each exact p-value super-uniform: at 0.1, P(Binomial(40, 0.1) >= 10) < 0.01)
    p = []
    for s in range(40):
        X, Y, rx, ry = _donors(8, 24, 6, 200 + s)
        fit = SPARDA(lam=0.5, test_max_cells=48, random_state=s, test_distribution=True).fit(X, Y, rx, ry)
        assert fit.test_["subsampled"]
        p.append(fit.pvalue_)
    assert sum(v <= 0.1 for v in p) < 10


# --------------------------------------------------------------------------- the location part
def _count_donors(n_donors, cells, genes, seed, shift=1.0):
    """Log-normalised Poisson cells of donors with their own gene levels (log-sd 0.3); target donors' gene 3 x shift."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.5, 3.0, genes)
    donor = np.repeat(np.arange(n_donors), cells)
    target = donor < n_donors // 2
    lam = base * np.exp(rng.normal(0, 0.3, size=(n_donors, genes)))[donor]
    lam[target, 3] *= shift
    Z = np.log1p(rng.poisson(lam))
    names = np.array([f"d{i}" for i in donor])
    return Z[target], Z[~target], names[target], names[~target]


@pytest.mark.parametrize("distribution", [False, True])
def test_each_relabelling_of_the_data_gets_the_p_value_the_set_gave_it(distribution):
    """Exactness of the combined test: the statistics of every relabelling are one fixed function of (cells,
    labels), so refitting on the data relabelled by labelling l gives l the p-value that the observed fit's set of
    relabellings gave it (the set is the same, only which member is observed changes). Under the null the observed
    labelling is any of them with equal probability: its p-value is uniform on the grid."""
    from scontrast.donor_test import FAMILIES, min_p_combination

    X, Y, rx, ry = _count_donors(8, 12, 15, 11)
    model = SPARDA(k=3, random_state=0, test_distribution=distribution).fit(X, Y, rx, ry)
    lab, exact, L = _distinct_labellings(model.replicates_, 10_000, np.random.default_rng(0))
    assert exact and L == 35 and model.part_statistics_.shape == (35, len(FAMILIES) + 2 * distribution)
    # 4 vs 4 donors, 35 distinct relabellings: a part at its floor could not reach 0.05 in a min-p of several, so
    # the location family alone makes the p-value (the design decides it, not the data)
    assert model.test_["combined"] == ["location"]
    set_p = min_p_combination(model.part_statistics_[:, :1])
    assert model.pvalue_ == pytest.approx(set_p[0])
    np.testing.assert_allclose(np.sort(set_p), np.arange(1, 36) / 35)  # no ties: uniform on the grid
    Z, names = np.vstack([X, Y]), np.concatenate([rx, ry])
    for row in (4, 20):
        chosen = model.replicates_.names[lab[row]]
        t = np.isin(names, chosen)
        again = SPARDA(k=3, random_state=0, test_distribution=distribution).fit(Z[t], Z[~t], names[t], names[~t])
        assert again.pvalue_ == pytest.approx(set_p[row])


def test_donor_test_finds_a_mean_shift_and_is_recorded():
    X, Y, rx, ry = _count_donors(12, 30, 40, 12, shift=4.0)
    model = SPARDA(k=3, random_state=0).fit(X, Y, rx, ry)
    t = model.test_
    assert set(t["parts"]) == {"location", "spread", "dispersion", "tail"} and "distribution_pvalue" not in t
    assert t["parts"]["location"] <= 0.01 and model.pvalue_ <= 0.05
    assert int(t["location_genes"][0]) == 3 and t["location_t"][0] > 0
    # the genes' max-T adjusted p-values (the share of labellings whose largest |t| reaches the gene's): the
    # planted gene's at the floor, the others' larger, in the order of their |t|
    assert t["location_adjusted_pvalue"][0] <= 2 * t["floor"] and np.median(t["location_adjusted_pvalue"]) > 0.2
    assert np.all(np.diff(t["location_adjusted_pvalue"]) >= 0) and t["top_k"] == 10
    assert len(t["location_genes"]) == 10 and np.all(np.diff(np.abs(t["location_t"])) <= 0)
    assert len(t["spread_genes"]) == 10
    # with SPARDA's distributional parts: the same donor-test parts, two more parts in the min-p
    both = SPARDA(k=3, test_distribution=True, random_state=0).fit(X, Y, rx, ry)
    assert list(both.test_["parts"]) == ["location", "spread", "dispersion", "tail", "divergence", "shape"]
    np.testing.assert_array_equal(both.part_statistics_[:, :4], model.part_statistics_)
    assert both.test_["parts"]["location"] == t["parts"]["location"] and 0 < both.test_["distribution_pvalue"] <= 1
    with pytest.raises(ScontrastError, match="test_distribution: expected True or False"):
        SPARDA(test_distribution="yes").fit(X, Y, rx, ry)


def test_combined_test_reproduces_bit_for_bit_under_a_seed():
    X, Y, rx, ry = _donors(6, 15, 8, 13, paired=True)
    a = SPARDA(lam=0.5, random_state=3).fit(X, Y, rx, ry, paired=True)
    b = SPARDA(lam=0.5, random_state=3).fit(X, Y, rx, ry, paired=True)
    assert a.pvalue_ == b.pvalue_ and a.test_["parts"] == b.test_["parts"]
    np.testing.assert_array_equal(a.part_statistics_, b.part_statistics_)
    np.testing.assert_array_equal(a.test_["location_t"], b.test_["location_t"])
