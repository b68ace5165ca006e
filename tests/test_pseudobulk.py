"""The replicate-level pseudobulk reference (scontrast.pseudobulk, tl.pseudobulk, pl.pseudobulk)."""

import anndata as ad
import matplotlib
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from scontrast import pl, tl
from scontrast.core import CannotRun, ScontrastError
from scontrast.preprocess import preprocess
from scontrast.pseudobulk import deseq2, pseudobulk_counts
from scontrast.summary import summarise

matplotlib.use("Agg")


def test_counts_are_summed_per_replicate_and_group():
    rng = np.random.default_rng(0)
    X = rng.poisson(1.5, size=(40, 7))
    reps = rng.choice(["a", "b", "c"], size=40)
    tgt = rng.random(40) < 0.5
    summed, samples = pseudobulk_counts(sp.csr_matrix(X), tgt, reps, [f"g{i}" for i in range(7)])
    for name, row in samples.iterrows():
        cells = (reps == row["replicate"]) & (tgt == (row["group"] == "target"))
        np.testing.assert_array_equal(summed.loc[name].to_numpy(), X[cells].sum(0))
        assert row["n_cells"] == cells.sum()
    assert summed.to_numpy().sum() == X.sum() and list(summed.columns) == [f"g{i}" for i in range(7)]
    for block in (1, 7, 40):  # a few cells at a time, sparse float32 and dense: the same sums
        for counts in (sp.csr_matrix(X.astype(np.float32)), X):
            again, same = pseudobulk_counts(counts, tgt, reps, [f"g{i}" for i in range(7)], block=block)
            pd.testing.assert_frame_equal(again, summed)
            pd.testing.assert_frame_equal(same, samples)
    with pytest.raises(ScontrastError, match="not integers"):
        pseudobulk_counts(X + 0.5, tgt, reps)


def _donor_counts(n_donors=5, planted=(0, 1, 2), fold=3.0, seed=0, cells=40, genes=200):
    """Unpaired donors with their own gene effects (log-sd 0.3); the target donors' planted genes x fold."""
    rng = np.random.default_rng(seed)
    base = rng.gamma(2.0, 1.0, size=genes)
    rows, reps, tgt = [], [], []
    for d in range(2 * n_donors):
        is_t = d < n_donors
        mean = base * np.exp(rng.normal(0, 0.3, size=genes))
        if is_t:
            mean[list(planted)] *= fold
        rows.append(rng.poisson(mean, size=(cells, genes)))
        reps += [f"d{d}"] * cells
        tgt += [is_t] * cells
    return np.vstack(rows), np.array(reps), np.array(tgt)


def test_deseq2_finds_a_planted_shift_and_reads_donors_as_donors():
    X, reps, tgt = _donor_counts()
    summed, samples = pseudobulk_counts(X, tgt, reps, [f"g{i}" for i in range(X.shape[1])])
    res, design = deseq2(summed, samples, paired=False)
    assert design == "~group"
    found = set(res.index[res["padj"] < 0.05])
    assert {"g0", "g1", "g2"} <= found and len(found - {"g0", "g1", "g2"}) <= 2
    assert (res.loc[["g0", "g1", "g2"], "log2FoldChange"] > 1).all()
    X, reps, tgt = _donor_counts(fold=1.0, seed=1)  # donors differ, groups do not
    summed, samples = pseudobulk_counts(X, tgt, reps)
    res, _ = deseq2(summed, samples, paired=False)
    assert (res["padj"] < 0.05).sum() <= 2


def _adata(paired):
    X, reps, tgt = _donor_counts(n_donors=4, cells=30, genes=120, seed=2)
    if paired:  # each donor gives cells to both groups
        reps = np.array([f"d{int(r[1:]) % 4}" for r in reps])
    obs = pd.DataFrame({"cond": np.where(tgt, "T", "C"), "donor": reps}, index=[f"c{i}" for i in range(reps.size)])
    return ad.AnnData(X=sp.csr_matrix(X.astype(np.float32)), obs=obs, var=pd.DataFrame(index=[f"g{i}" for i in range(120)]))


KW = dict(groupby="cond", target=["T"], background=["C"], min_genes=1, min_cells=1, n_top_genes=60, max_pct_mito=100)


@pytest.mark.parametrize("paired", [False, True])
def test_front_end_slots_summary_and_figure(paired):
    adata = preprocess(_adata(paired), replicate="donor", paired=paired, **KW)
    adata.var["sparda_selected"] = np.isin(adata.var_names, ["g0", "g5"])
    tl.pseudobulk(adata)
    info = adata.uns["pseudobulk"]
    assert info["design_formula"] == ("~replicate + group" if paired else "~group")
    assert info["unit"] == "replicate" and len(info["pseudo_samples"]) == 8
    assert adata.var["pseudobulk_padj"].notna().sum() == info["n_tested"]
    assert "g0" in set(info["significant_genes"])
    table = summarise(adata)
    rows = dict(zip(table["item"], table["value"]))
    assert rows["unit of the tests"].startswith(f"replicate: donor, 4 target / 4 background ({'paired' if paired else 'unpaired'})")
    assert rows["SPARDA genes among pseudobulk's"].startswith("1 of 2 at padj < 0.05")
    fig = pl.pseudobulk(adata)
    assert "pseudobulk DESeq2" in fig.axes[0].get_title()
    matplotlib.pyplot.close(fig)


def test_front_end_refuses_without_a_replicate():
    adata = preprocess(_adata(False), **KW)
    with pytest.raises(CannotRun, match="no replicate declared"):
        tl.pseudobulk(adata)


def test_worker_processes_change_nothing_and_ties_at_p0_rank_by_the_statistic(monkeypatch):
    # genes are fitted independently: two PyDESeq2 workers give the same table to the bit
    X, reps, tgt = _donor_counts(genes=60)
    summed, samples = pseudobulk_counts(X, tgt, reps)
    one, _ = deseq2(summed, samples, paired=False)
    two, _ = deseq2(summed, samples, paired=False, n_jobs=2)
    pd.testing.assert_frame_equal(one, two, check_exact=True)
    with pytest.raises(ScontrastError, match="n_jobs"):
        deseq2(summed, samples, paired=False, n_jobs=0)
    # p-values that underflow to 0 tie: the top genes then follow the size of the Wald statistic
    adata = preprocess(_adata(False), replicate="donor", **KW)
    table = pd.DataFrame({"baseMean": 1.0, "log2FoldChange": 0.0, "lfcSE": 1.0, "stat": 0.0, "pvalue": 0.5, "padj": 0.9},
                         index=adata.var_names)
    table.loc[adata.var_names[[3, 1, 2]], ["pvalue", "padj"]] = 0.0
    table.loc[adata.var_names[[3, 1, 2]], "stat"] = [-9.0, 40.0, -25.0]
    monkeypatch.setattr("scontrast.tl._pseudobulk.deseq2", lambda *a, **k: (table, "~group"))
    tl.pseudobulk(adata)
    assert list(adata.uns["pseudobulk"]["top_genes"][:3]) == list(adata.var_names[[1, 2, 3]])
