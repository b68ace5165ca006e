"""scontrast.datasets.simulate_study: each planted property against its parameters."""

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from scontrast.core import ScontrastError
from scontrast.datasets import simulate_study

LEVEL = 20.0  # every input count: the simulated counts are then Poisson with a known mean


def flat_cells(n_per_type=300, n_genes=250):
    """Two cell types whose cells all hold LEVEL counts of every gene (the truth is then known)."""
    X = sp.csr_matrix(np.full((2 * n_per_type, n_genes), LEVEL, dtype=np.float32))
    obs = pd.DataFrame({"cell_type": ["A"] * n_per_type + ["B"] * n_per_type},
                       index=[f"c{i}" for i in range(2 * n_per_type)])
    return ad.AnnData(X=X, obs=obs, var=pd.DataFrame(index=[f"g{i}" for i in range(n_genes)]))


def _block(study, cell_type, condition, genes):
    rows = ((study.obs["cell_type"] == cell_type) & (study.obs["condition"] == condition)).to_numpy()
    return study[rows, list(genes)].X.toarray()


def test_same_seed_same_study_and_design():
    cells = flat_cells(60, 50)
    kw = dict(n_target=3, n_background=3, covariates={"sex": ["F", "M"]}, random_state=4,
              effects=[{"cell_type": "A", "kind": "mean", "n_genes": 5}])
    a, b = simulate_study(cells, **kw), simulate_study(cells, **kw)
    assert (a.X != b.X).nnz == 0 and a.obs.equals(b.obs)
    assert (simulate_study(cells, **{**kw, "random_state": 5}).X != a.X).nnz > 0
    donors = a.obs.groupby("donor", observed=True)
    assert (donors["condition"].nunique() == 1).all()  # unpaired: a donor is in one condition
    assert sorted(a.obs["condition"].unique()) == ["case", "control"]
    # sex is balanced within each condition (never confounded)
    per = a.obs.drop_duplicates("donor").groupby(["condition", "sex"], observed=True).size()
    assert per.max() - per.min() <= 1


def test_mean_shift_spread_and_substate_match_their_parameters():
    cells = flat_cells()
    effects = [{"cell_type": "A", "kind": "mean", "n_genes": 10, "fold": 3.0},
               {"cell_type": "A", "kind": "spread", "n_genes": 10, "log_sd": 0.8},
               {"cell_type": "B", "kind": "substate", "n_genes": 10, "fold": 5.0, "fraction": 0.3}]
    s = simulate_study(cells, n_target=4, n_background=4, donor_sd=0.0, cells_per_donor=200, effects=effects,
                       random_state=0)
    genes = [s.uns["simulation"]["effects"][str(i)]["genes"] for i in range(3)]
    assert len(set(np.concatenate(genes))) == 30  # distinct across effects
    n = 800  # cells per condition and type
    # mean shift: the target's mean is fold x LEVEL, the background's LEVEL (Poisson: se sqrt(mean / n))
    t, b = _block(s, "A", "case", genes[0]), _block(s, "A", "control", genes[0])
    assert abs(t.mean() / b.mean() - 3.0) < 6 * np.sqrt(3.0 / (LEVEL * n * 10)) * 3
    # spread: mean kept, variance LEVEL + LEVEL^2 (e^{s^2} - 1) against LEVEL
    t, b = _block(s, "A", "case", genes[1]), _block(s, "A", "control", genes[1])
    expected_var = LEVEL + LEVEL ** 2 * (np.exp(0.8 ** 2) - 1)
    assert abs(t.mean() / b.mean() - 1.0) < 6 * np.sqrt(expected_var / (n * 10)) / LEVEL
    assert 0.7 < t.var() / expected_var < 1.3 and 0.8 < b.var() / LEVEL < 1.2
    # the other genes of type A are untouched in the target
    rest = [g for g in s.var_names if g not in set(genes[0]) | set(genes[1])][:20]
    assert abs(_block(s, "A", "case", rest).mean() / LEVEL - 1) < 0.02
    # substate: a fraction 0.3 of type B's target cells carry 5x, the others 1x
    t = _block(s, "B", "case", genes[2]).mean(axis=1)
    share = float((t > 3 * LEVEL).mean())
    assert abs(share - 0.3) < 4 * np.sqrt(0.3 * 0.7 / n)
    assert (_block(s, "B", "control", genes[2]).mean(axis=1) < 3 * LEVEL).all()


def test_donor_factors_have_the_log_sd_asked():
    s = simulate_study(flat_cells(300, 400), n_target=2, n_background=2, donor_sd=0.3, cells_per_donor=300,
                       random_state=1)
    for donor in ["D01", "D03"]:
        means = s[s.obs["donor"] == donor].X.toarray().mean(axis=0)
        # each gene's factor, measured on 600 cells (Poisson error ~ 0.01 on the log scale)
        assert abs(np.log(means / LEVEL).std() - 0.3) < 0.05


def test_paired_donors_give_both_conditions():
    s = simulate_study(flat_cells(120, 30), n_target=4, paired=True, random_state=0)
    per = s.obs.groupby("donor", observed=True)["condition"].nunique()
    assert len(per) == 4 and (per == 2).all()


def test_bad_effects_are_named():
    with pytest.raises(ScontrastError, match=r"effects\[0\]: cell_type 'C' is absent"):
        simulate_study(flat_cells(20, 20), effects=[{"cell_type": "C"}])
    with pytest.raises(ScontrastError, match=r"effects\[0\]: kind"):
        simulate_study(flat_cells(20, 20), effects=[{"cell_type": "A", "kind": "shape"}])
