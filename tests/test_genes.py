"""The gene table: every method's number per gene, the genes most methods name first, group means from X in blocks."""

from __future__ import annotations

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from scontrast.tables import gene_table, gene_table_html, group_means


def _annotated() -> ad.AnnData:
    """Five genes with made-up results of every method (values chosen so that the order is known)."""
    rng = np.random.default_rng(0)
    X = rng.poisson(2.0, size=(30, 5)).astype(np.float32)
    a = ad.AnnData(X, obs=pd.DataFrame(index=[f"c{i}" for i in range(30)]),
                   var=pd.DataFrame(index=["A", "B", "C", "D", "E"]))
    a.obs["scontrast_target"] = np.arange(30) < 12
    a.var["sparda_weight"] = [0.0, 0.6, -0.8, 0.0, 0.0]
    a.var["sparda_selected"] = [False, True, True, False, False]
    a.var["sparda_marginal_w2"] = [0.1, 0.5, 0.9, 0.3, 0.2]
    a.var["pseudobulk_log2fc"] = [1.0, 2.0, -1.5, 0.1, np.nan]
    a.var["pseudobulk_pvalue"] = [0.2, 1e-4, 1e-3, 0.9, np.nan]
    a.var["pseudobulk_padj"] = [0.5, 1e-3, 0.004, 0.9, np.nan]
    a.varm["cPCs"] = np.arange(10, dtype=float).reshape(5, 2)
    a.uns["quadro"] = {"linear": {"gene": np.array(["C"]), "weight": np.array([0.25])},
                       "squared": {"gene": np.array(["E"]), "weight": np.array([0.1])},
                       "interactions": {"gene_i": np.array(["B"]), "gene_j": np.array(["D"]), "weight": np.array([-0.3])}}
    a.uns["fangs"] = {"n_features": 1, "feature_top_genes": np.array(["C, A"])}
    return a


def test_rows_sorted_by_the_methods_naming_them():
    """C: SPARDA, pseudobulk, QUADRO, FANGS (4); B: SPARDA, pseudobulk, QUADRO's pair (3); then A (FANGS),
    D (QUADRO's pair) and E (QUADRO's spread), named once each, in the order of pseudobulk's p (E has none)."""
    t = gene_table(_annotated())
    assert t["gene"].tolist() == ["C", "B", "A", "D", "E"], t
    assert t["n_methods"].tolist() == [4, 3, 1, 1, 1]
    row = t.set_index("gene")
    # QUADRO's terms signed toward the target (-2 delta), pairs listed on both genes
    assert row.loc["C", "quadro_mean_term"] == pytest.approx(-0.5)
    assert row.loc["B", "quadro_pairs"] == "D (-0.3)" and row.loc["D", "quadro_pairs"] == "B (-0.3)"
    assert row.loc["C", "fangs_features"] == "F1" and pd.isna(row.loc["B", "fangs_features"])
    np.testing.assert_array_equal(row.loc[list("ABCDE"), "cpca_cPC2"].to_numpy(), [1, 3, 5, 7, 9])
    a = _annotated()
    X = a.X
    is_t = a.obs["scontrast_target"].to_numpy()
    np.testing.assert_allclose(row.loc[list("ABCDE"), "mean_target"].to_numpy(), X[is_t].mean(0), rtol=1e-6)
    np.testing.assert_allclose(row.loc[list("ABCDE"), "mean_background"].to_numpy(), X[~is_t].mean(0), rtol=1e-6)
    page = gene_table_html(t, "<t>", n_rows=2)
    assert "&lt;t&gt;" in page and ">C<" in page and ">B<" in page and ">A<" not in page


@pytest.mark.parametrize("sparse", [True, False])
def test_group_means_read_in_blocks(tmp_path, sparse):
    """Blocks of 7 cells (not dividing 50): the same means as numpy over the whole matrix, sparse or dense X."""
    rng = np.random.default_rng(1)
    dense = (rng.random((50, 6)) * (rng.random((50, 6)) < 0.4)).astype(np.float32)
    a = ad.AnnData(sp.csr_matrix(dense) if sparse else dense)
    path = tmp_path / "x.h5ad"
    a.write_h5ad(path)
    is_t = rng.random(50) < 0.3
    t, b = group_means(path, is_t, chunk_cells=7)
    np.testing.assert_allclose(t, dense[is_t].mean(0), rtol=1e-6)
    np.testing.assert_allclose(b, dense[~is_t].mean(0), rtol=1e-6)
    with pytest.raises(ValueError, match="49 values for 50 cells"):
        group_means(path, is_t[:49])
