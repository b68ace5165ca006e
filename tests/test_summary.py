"""The summary a reader opens first: a verdict built from the numbers, one row per fact, genes for every method."""

from __future__ import annotations

import anndata as ad
import numpy as np
import pandas as pd
import pytest

from conftest import make_counts
from scontrast import tl
from scontrast.preprocess import preprocess
from scontrast.summary import add_verdict, overview_html, quadro_terms, summarise, top_loadings, verdict, verdict_record


def _cells(n=12) -> ad.AnnData:
    a = ad.AnnData(np.zeros((n, 4), dtype=np.float32), obs=pd.DataFrame(index=[f"c{i}" for i in range(n)]),
                   var=pd.DataFrame(index=["A", "B", "C", "D"]))
    a.obs["scontrast_target"] = np.arange(n) % 2 == 0
    return a


def _paired(a: ad.AnnData, n: int = 6) -> ad.AnnData:
    reps = np.array([f"P{i}" for i in range(n)], dtype=object)
    a.uns["scontrast"] = {"design": {"unit": "replicate", "replicate": "patient", "paired": True,
                                     "target_replicates": reps, "background_replicates": reps,
                                     "summary": f"replicate: patient, {n} target / {n} background (paired)"}}
    return a


def _sparda_test(a: ad.AnnData, p: float, floor: float, **extra) -> ad.AnnData:
    a.uns["sparda"] = {"pvalue": p, "test": {"method": "replicate", "unit": "replicate", "pvalue": p, "floor": floor,
                                            "exact": True, "n_labellings": int(round(1 / floor)), **extra}}
    a.var["sparda_weight"] = [0.0, 0.8, -0.5, 0.1]
    return a


def test_verdict_no_difference_at_the_donor_level():
    """wu2020's numbers: p 0.094 over 6 pairs (floor 1/32), pseudobulk 0 genes, QUADRO AUC 0.70 on held-out donors."""
    a = _sparda_test(_paired(_cells()), 3 / 32, 1 / 32)
    a.uns["pseudobulk"] = {"n_significant": 0, "significant_genes": np.array([], dtype=str), "params": {"alpha": 0.05}}
    a.uns["quadro"] = {"cv_auc": 0.7026, "unit": "replicate"}
    text = verdict(a)
    assert text.startswith("no difference shown at the donor level (SPARDA p = 0.094 per patient, 6 patients, paired; "
                           "the smallest possible p is 0.031)"), text
    assert "pseudobulk finds 0 genes at padj < 0.05" in text and "AUC 0.70 on held-out donors" in text
    assert "genes:" not in text  # no gene is offered as the difference when none is shown


def test_verdict_difference_names_the_genes_and_the_parts():
    a = _sparda_test(_paired(_cells()), 1 / 32, 1 / 32, parts={"location": 0.03125, "divergence": 0.2})
    a.uns["pseudobulk"] = {"n_significant": 2, "significant_genes": np.array(["B", "D"]), "params": {"alpha": 0.1}}
    text = verdict(a)
    assert text.startswith("differs at the donor level (SPARDA p = 0.031 per patient, 6 patients, paired; "
                           "parts: location 0.031, divergence 0.2); genes: B (+), C (-), D (+)"), text
    assert "pseudobulk finds 2 genes at padj < 0.1 (B, D)" in text


def test_verdict_when_the_design_cannot_reach_the_level():
    """4 pairs: 16 relabellings, floor 0.0625 > 0.05, whatever the data; the floor key may be named pvalue_floor."""
    a = _paired(_cells(), 4)
    a.uns["sparda"] = {"test": {"unit": "replicate", "pvalue": 0.0625, "pvalue_floor": 0.0625}}
    text = verdict(a)
    assert text.startswith("no difference can be shown: with 4 patients, paired the smallest possible p is 0.062"), text


def test_verdict_of_cells_and_of_nothing():
    a = _cells()
    a.uns["sparda"] = {"pvalue": 1e-4, "test": {"method": "split", "pvalue": 1e-4, "n_permutations": 9999,
                                                "bound": True, "exact": False}}
    a.var["sparda_weight"] = [0.0, 0.0, -0.5, 0.0]
    a.uns["quadro"] = {"cv_auc": 0.55, "unit": "cell"}
    text = verdict(a)
    assert text.startswith("differs with cells as the unit (SPARDA p <= 0.0001 per cell; no replicate declared); "
                           "genes: C (-)"), text
    assert "not separable with AUC 0.55 on held-out cells" in text
    assert verdict(_cells()) == "no test ran on this contrast"


def test_verdict_record_holds_the_verdict_and_its_numbers(tmp_path):
    """uns['scontrast']['verdict']: the summary's verdict row and the numbers it is read from, through an h5ad."""
    a = _sparda_test(_paired(_cells()), 3 / 32, 1 / 32)
    a.uns["pseudobulk"] = {"n_significant": 0, "significant_genes": np.array([], dtype=str), "params": {"alpha": 0.05}}
    a.uns["quadro"] = {"cv_auc": 0.7026, "unit": "replicate"}
    add_verdict(a)
    a.write_h5ad(tmp_path / "a.h5ad")
    rec = ad.read_h5ad(tmp_path / "a.h5ad").uns["scontrast"]["verdict"]
    assert rec["text"] == verdict(a)  # summarise's first row
    assert rec["call"] == "no difference shown" and rec["alpha"] == 0.05 and rec["sparda_unit"] == "replicate"
    assert rec["sparda_pvalue"] == 3 / 32 and rec["sparda_pvalue_floor"] == 1 / 32 and "sparda_genes" not in rec
    assert rec["n_target_replicates"] == rec["n_background_replicates"] == 6 and rec["paired"]
    assert rec["pseudobulk_n_significant"] == 0 and rec["quadro_cv_auc"] == 0.7026 and rec["quadro_unit"] == "replicate"
    assert "design" in a.uns["scontrast"]  # the design stays beside the verdict

    b = _sparda_test(_paired(_cells()), 1 / 32, 1 / 32)
    assert verdict_record(b)["call"] == "differs" and verdict_record(b)["sparda_genes"] == ["B (+)", "C (-)", "D (+)"]
    c = _paired(_cells(), 4)
    c.uns["sparda"] = {"test": {"unit": "replicate", "pvalue": 0.0625, "pvalue_floor": 0.0625}}
    assert verdict_record(c)["call"] == "no difference can be shown"
    assert verdict_record(_cells()) == {"text": "no test ran on this contrast", "alpha": 0.05, "call": "no test"}


@pytest.fixture(scope="module")
def fitted():
    """A small contrast of cells (no replicate) through SPARDA, cPCA and QUADRO."""
    a = make_counts(n_cells=120, n_genes=30)
    out = preprocess(a, groupby="condition", target=["disease"], background=["healthy"], min_genes=1, min_cells=1,
                     n_top_genes=20, min_cells_per_group=5)
    tl.sparda(out, genes="all", k=3, n_permutations=9, random_state=0)
    tl.cpca(out, genes="all", random_state=0)
    return out


def test_a_p_value_at_its_floor_is_a_finding(fitted):
    """Nine permutations, none as large: p <= 0.1 is a bound only more permutations can resolve, so the advice
    is given; at a floor below 0.05 the same fact is stated without advice. Never a warning row."""
    table = summarise(fitted)
    assert table["item"].iloc[0] == "verdict"
    found = table.loc[table["item"] == "p-value at its floor", "value"].tolist()
    assert found == ["p <= 0.1: none of 9 permutations reached the observed statistic (raise n_permutations: at 9 "
                     "the bound cannot reach 0.05)"], table.to_string()
    assert not table.loc[table["item"] == "warning", "value"].str.contains("floor").any()
    b = fitted.copy()
    b.uns["sparda"] = {**b.uns["sparda"], "pvalue": 1e-4,
                       "test": {**b.uns["sparda"]["test"], "pvalue": 1e-4, "n_permutations": 9999}}
    found = summarise(b).query("item == 'p-value at its floor'")["value"].tolist()
    assert found == ["p <= 0.0001: none of 9999 permutations reached the observed statistic"]


def test_dropped_replicates_are_one_row():
    a = _paired(_cells(), 6)
    a.uns["scontrast"]["design"]["dropped"] = np.array(
        ["Colon1: no target cell (paired design)", "Colon2: no background cell (paired design)",
         "Endo2: 15 target / 2 background cells, fewer than min_cells_per_replicate=3 in a group",
         "Lung3: 2 target / 16 background cells, fewer than min_cells_per_replicate=3 in a group"], dtype=object)
    a.uns["scontrast"]["preprocess"] = {"warnings": np.array(
        ["mito_prefix 'MT-' matches no gene"] + [f"replicate '{r}' of obs column 'patient' dropped: why" for r in
                                                  ("Colon1", "Colon2", "Endo2", "Lung3")], dtype=object)}
    table = summarise(a)
    assert table.query("item == 'warning'")["value"].tolist() == ["mito_prefix 'MT-' matches no gene"]
    assert table.query("item == 'replicates dropped'")["value"].tolist() == [
        "4 of 10 patients dropped: Colon1 (no target cell); Colon2 (no background cell); Endo2, Lung3 (fewer than "
        "min_cells_per_replicate=3 in a group); 6 kept"]


def test_a_lambda_at_the_sparse_end_is_a_finding_row():
    """Read from the recorded path (the fit logs it at INFO, not as a warning); the path's other end is not one."""
    a = _cells()
    a.var["sparda_weight"] = [0.0, 0.0, 0.9, 0.0]
    a.uns["sparda"] = {"lam": 0.5, "n_selected": 1, "warnings": np.array([], dtype=object),
                       "lambda_path": {"lam": np.array([0.5, 0.2, 0.1]), "best_index": 0, "rule": "fraction",
                                       "chosen_n_selected": 1.0}}
    table = summarise(a)
    assert table.query("item == 'lambda at the sparse end'")["value"].tolist() == [
        "cv_rule='fraction' chose the largest lambda of the path (0.5, 1 gene(s)), its sparse end: the best single "
        "genes carry the difference"]
    assert "warning" not in table["item"].tolist()
    a.uns["sparda"]["lambda_path"]["best_index"] = 1
    assert "lambda at the sparse end" not in summarise(a)["item"].tolist()


def test_no_feature_is_one_sentence():
    a = _cells()
    a.uns["fangs"] = {"n_features": 0, "warnings": np.array([], dtype=object)}
    a.uns["latent_features"] = {"stability": np.array([0.53, 0.45, np.nan]), "params": {"stability": 0.8},
                                "warnings": np.array(["latent_features: no feature is stable over 40 resamples"])}
    table = summarise(a)
    assert table.query("method == 'fangs'")["value"].tolist() == [
        "no recurring programme: no binary feature recurs across the resampled fits (stability 0.53, 0.45 for "
        "K = 1, 2, ...; a feature needs 0.8)"]
    assert "warning" not in table["item"].tolist()


def test_genes_of_cpca_and_quadro_with_their_signs(fitted):
    """cPCA's rows name each component's largest loadings with their signs; QUADRO's terms are signed toward
    the target: Q = z'Omega z - 2 delta'z, so a gene of delta -0.2 pushes a cell with more of it to the target."""
    L = np.zeros((4, 2))
    L[:, 0] = [0.1, -0.9, 0.3, 0.0]
    L[:, 1] = [0.0, 0.0, 0.0, 0.5]
    assert top_loadings(L, ["A", "B", "C", "D"], 2) == [[("B", -0.9), ("C", 0.3)], [("D", 0.5)]]
    table = summarise(fitted)
    row = table.query("method == 'cpca' and item.str.startswith('top genes per component')")["value"].tolist()
    W = fitted.varm["cPCs"][:, 0]
    best = int(np.argmax(np.abs(W)))
    assert len(row) == 1 and row[0].startswith(f"cPC1: {fitted.var_names[best]} ({W[best]:+.2f})"), row
    q = {"linear": {"gene": np.array(["A", "B"]), "weight": np.array([-0.2, 0.05])},
         "squared": {"gene": np.array(["C"]), "weight": np.array([0.3])},
         "interactions": {"gene_i": np.array(["A"]), "gene_j": np.array(["D"]), "weight": np.array([-0.1])}}
    assert quadro_terms(q) == {"linear": [("A", 0.4), ("B", -0.1)], "spread": [("C", 0.3)], "pairs": [("A x D", -0.1)]}


def test_overview_escapes_and_embeds(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(1, 1))
    fig.savefig(tmp_path / "f.png")
    plt.close(fig)
    table = pd.DataFrame([("verdict", "verdict", "differs <b>"), ("preprocess", "warning", "w & v"),
                          ("data", "contrast", "x")], columns=["method", "item", "value"])
    genes = pd.DataFrame({"gene": ["<G>"], "n_methods": [1], "sparda_weight": [0.5]})
    page = overview_html("<d>", table, genes, [(str(tmp_path / "f.png"), "a legend")])
    assert "differs &lt;b&gt;" in page and "&lt;d&gt;" in page and "&lt;G&gt;" in page and "w &amp; v" in page
    assert page.count("data:image/png;base64,") == 1 and "a legend" in page
    assert "most methods naming them first" in page


def test_overview_says_when_no_method_names_a_gene():
    table = pd.DataFrame([("verdict", "verdict", "no difference shown")], columns=["method", "item", "value"])
    genes = pd.DataFrame({"gene": ["A", "B"], "n_methods": [0, 0], "sparda_weight": [-0.0, 0.25]})
    page = overview_html("d", table, genes)
    assert "no method names a gene here" in page and "most methods naming" not in page
    assert ">-0<" not in page and ">0<" in page and ">0.25<" in page


def test_replicate_test_parts_read_in_the_families_order_whatever_the_dicts_order():
    """A written file gives uns dicts back alphabetically; the verdict and the summary list the donor test's
    families in their own order (location, spread, dispersion), then SPARDA's distributional parts."""
    from scontrast.summary import _parts_text
    from scontrast.tl._sparda import ordered_parts

    read_back = {"dispersion": 0.5, "distribution": 0.25, "location": 0.125, "spread": 1.0}
    assert ordered_parts(read_back) == ["location", "spread", "dispersion", "distribution"]
    assert _parts_text({"parts": read_back}) == "; parts: location 0.12, spread 1, dispersion 0.5, distribution 0.25"
