"""Labels, gene names, obs columns and the dataset's name are data: every figure draws them as they are.

Text with ``$`` reached matplotlib's mathtext parser: a group label ``$\\frac$`` made the QC figure
fail (and took ``preprocessed.h5ad`` with it), gene names with ``$...$`` broke the SPARDA figure,
and ``$x^2$`` was drawn as x squared. Every ``pl`` function is drawn here with such labels and
names, and every text it shows must be the data's own text, never mathtext (SPARDA's own
``W2$^2$`` aside).
"""

from __future__ import annotations

import io

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.text import Text

from conftest import make_counts
from scontrast import pl, tl
from scontrast.preprocess import preprocess

matplotlib.use("Agg")

# the differential genes get these names (gene0..gene4 differ between the groups)
GENES = ["$x^2$", "$", r"\frac", r"$\frac$", r"a\$b"]
TARGET, BACKGROUND, OTHER = "$x^2$ cells", r"$\frac$ ctrl", "$"
DATASET = r"$d$ \frac"
COLUMN = r"$\frac$ col"  # an obs column, its levels the gene names
NUMERIC = "$n$ genes"  # a numeric obs column
OWN_MATH = "W2$^2$"  # the one mathtext scontrast writes itself (SPARDA's title)


@pytest.fixture(scope="module")
def adata():
    a = make_counts(n_cells=150, n_genes=40)
    # every other gene too holds mathtext (g$_{7}$ would be drawn g with a subscript 7)
    a.var_names = GENES + [f"g$_{{{i}}}$" if n.startswith("gene") else n for i, n in enumerate(a.var_names)][len(GENES):]
    a.obs["condition"] = a.obs["condition"].cat.rename_categories(
        {"disease": TARGET, "healthy": BACKGROUND, "other": OTHER})
    a.obs[COLUMN] = pd.Categorical(np.array(GENES)[np.arange(a.n_obs) % len(GENES)])
    a.obs["donor"] = np.array(["$d1$", "$d2$", r"\d3", "d$4"])[np.arange(a.n_obs) % 4]
    out = preprocess(a, groupby="condition", target=[TARGET], background=[BACKGROUND], min_genes=1, min_cells=1,
                     n_top_genes=20, min_cells_per_group=5)
    out.uns["scontrast"]["preprocess"]["dataset"] = DATASET
    out.obs[NUMERIC] = np.asarray(out.X.sum(axis=1)).ravel()
    tl.sparda(out, genes="all", k=5, n_permutations=19, random_state=0)
    tl.cpca(out, genes="all", random_state=0)
    tl.pcpca(out, genes="all", random_state=0)
    tl.quadro(out, genes="all", n_genes=10, outer_cv=2, cv=2, n_features=5, random_state=0)
    tl.latent_features(out, method="ibp", genes="all", n_genes=8, n_iter=40, burn_in=20, thin=2, random_state=0)
    tl.fangs(out, n_init=2, n_iter=50, random_state=0)
    _pseudobulk_slots(out)
    return out


def _pseudobulk_slots(a) -> None:
    """What tl.pseudobulk writes, made up (DESeq2 itself is not the point): the named genes smallest p."""
    p = np.linspace(1e-6, 1.0, a.n_vars)
    a.var["pseudobulk_log2fc"] = np.linspace(2, -2, a.n_vars)
    a.var["pseudobulk_pvalue"] = p
    a.var["pseudobulk_padj"] = np.minimum(p * a.n_vars, 1.0)
    a.uns["pseudobulk"] = {"params": {"alpha": 0.05}, "design_formula": "~group", "n_significant": 5,
                           "design": "replicate: $donor$, 2 target / 2 background"}


def _drawn(fig) -> list[tuple[str, bool]]:
    """(text as drawn, whether as mathtext) of every visible text of the figure, once it is rendered."""
    fig.savefig(io.BytesIO(), format="png")  # draws every text: mathtext is parsed here
    out = []
    for t in fig.findobj(Text):
        if t.get_visible() and t.get_text():
            out.append(t._preprocess_math(t.get_text()))
    plt.close(fig)
    return out


def _check(fig, *expected: str) -> list[str]:
    """The figure draws without error, no text as mathtext (but OWN_MATH), each ``expected`` within a text."""
    drawn = _drawn(fig)
    assert not [s for s, math in drawn if math and OWN_MATH not in s], [s for s, m in drawn if m]
    texts = [s for s, _ in drawn]
    for want in expected:
        assert any(want in s for s in texts), (want, texts)
    return texts


def test_literal_is_what_matplotlib_draws():
    from scontrast.pl._style import literal

    for s in [*GENES, TARGET, BACKGROUND, OTHER, DATASET, "plain", "a\\\\$b$", "$$"]:
        shown, math = Text(text=literal(s))._preprocess_math(literal(s))
        assert (shown, math) == (s, False)


def test_preprocess_figure(adata):
    _check(pl.preprocess(adata), f"{TARGET}\n", f"{BACKGROUND}\n", f"{DATASET}: quality control: {TARGET} vs {BACKGROUND}")


def test_sparda_figure(adata):
    texts = _check(pl.sparda(adata), f"{TARGET} (n=", f"{BACKGROUND} (n=", f"{DATASET}: SPARDA")
    assert set(GENES) <= set(texts)  # the five differential genes are the weights' tick labels


def test_cpca_figure(adata):
    _check(pl.cpca(adata), f"{TARGET} (", f"{BACKGROUND} (", f"{DATASET}: contrastive PCA of {TARGET}")
    texts = _check(pl.cpca(adata, color=COLUMN), f"target: {COLUMN}", f"{BACKGROUND} (")
    assert all(any(t.startswith(f"{g} (") for t in texts) for g in GENES)
    _check(pl.cpca(adata, color=NUMERIC), f"{NUMERIC} (target cells)")


def test_pcpca_figure(adata):
    texts = _check(pl.pcpca(adata), f"{TARGET} cells (n=", f"{BACKGROUND} cells (n=", "condition", f"{DATASET}: PCPCA")
    assert any(t.startswith(f"{TARGET} (") for t in texts)  # the groupby column's levels in the legend
    texts = _check(pl.pcpca(adata, color=COLUMN), COLUMN)
    assert all(any(t.startswith(f"{g} (") for t in texts) for g in GENES)
    _check(pl.pcpca(adata, color=NUMERIC), NUMERIC)


def test_quadro_figure(adata):
    _check(pl.quadro(adata), f"{TARGET} (n=", f"{BACKGROUND} (n=", f"({BACKGROUND} called {TARGET})",
           f"{DATASET}: QUADRO: {TARGET} vs {BACKGROUND}")


def test_quadro_figure_of_two_labels_of_a_column():
    """The classes named by obs values (groupby/labels), not by the preprocessing's groups."""
    a = make_counts(n_cells=90, n_genes=20)
    a.obs["condition"] = a.obs["condition"].cat.rename_categories({"disease": TARGET, "healthy": BACKGROUND})
    a.obs["tissue"] = pd.Categorical(np.where(np.arange(a.n_obs) % 2 == 0, "$t1$", r"\frac{t}"))
    out = preprocess(a, groupby="condition", target=[TARGET], background=[BACKGROUND], min_genes=1, min_cells=1,
                     n_top_genes=10, min_cells_per_group=5)
    tl.quadro(out, genes="all", groupby="tissue", labels=["$t1$", r"\frac{t}"], outer_cv=2, cv=2, n_features=3,
              random_state=0)
    _check(pl.quadro(out), "$t1$ (n=", r"\frac{t} (n=", r"QUADRO: \frac{t} vs $t1$")


def test_fangs_figure(adata):
    fig = pl.fangs(adata)
    texts = _check(fig, f"cells: {BACKGROUND} (", f"{DATASET}: binary features of the cells: {TARGET}")
    # the IBP sampler's chains (the ensemble's halves: tests/latent_features/test_ensemble.py)
    assert np.asarray(adata.uns["fangs"]["feature_chain_support"]).shape[1] > 1
    heatmap = " ".join(fig.get_axes()[0].get_title().split())
    assert "held: mean Jaccard with its match in each chain's samples" in heatmap, heatmap
    rows = [t for t in texts if t.startswith("F1")]
    genes = rows[0].split("\n")[1].split(", ")
    assert genes and set(genes) <= set(GENES) | {f"g$_{{{i}}}$" for i in range(40)}, rows  # its top genes, as named


def test_pseudobulk_figure(adata):
    texts = _check(pl.pseudobulk(adata, n_labels=5), f"higher in {TARGET}", f"higher in {BACKGROUND}",
                   "replicate: $donor$")
    assert set(GENES) <= set(texts)  # the five smallest p-values are named
