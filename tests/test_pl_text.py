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
    # the five differential genes are the weights' tick labels, each with its weight
    assert all(any(t.startswith(f"{g} (") and t.endswith(")") for t in texts) for g in GENES), texts


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


# --- no text over another text, none out of its figure (every figure the workflow draws) ---------------

def _boxes(fig) -> list[tuple[str, str, object, object]]:
    """(owner, text, its box in pixels, the axes box it must stay in or None) of every text drawn.

    Titles, axis labels, the tick labels in view, texts and annotations in the axes, legends, the
    figure's title and texts; the figure is drawn first, so the boxes are the rendered ones.
    """
    if not hasattr(fig.canvas, "get_renderer"):  # a Figure made without pyplot (QUADRO's) gets a canvas to draw on
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(fig)
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    out, seen = [], set()

    def add(owner, text, within=None):
        if text is not None and id(text) not in seen and text.get_visible() and text.get_text().strip():
            seen.add(id(text))  # the figure's title is one of its texts too
            # a text's own box (an annotation's leader line may cross other texts' boxes)
            out.append((owner, text.get_text(), Text.get_window_extent(text, r), within))

    add("figure", fig._suptitle)
    for t in fig.texts:
        add("figure", t)
    for leg in fig.legends:
        add("figure legend", leg.get_title())
        for t in leg.get_texts():
            add("figure legend", t)
    for i, ax in enumerate(fig.get_axes()):
        if not ax.get_visible():
            continue
        for t in (ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label):
            add(f"axes {i}", t)
        for axis, (lo, hi) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            lo, hi = min(lo, hi), max(lo, hi)
            span = 1e-9 * max(abs(lo), abs(hi), 1.0)
            for loc, t in zip(axis.get_ticklocs(), axis.get_ticklabels()):
                if lo - span <= loc <= hi + span:
                    add(f"axes {i} ticks", t)
        frame = ax.get_window_extent(r)
        for t in ax.texts:  # texts and annotations drawn in the data's place stay inside the axes
            add(f"axes {i} text", t, frame)
        leg = ax.get_legend()
        if leg is not None:
            add(f"axes {i} legend", leg.get_title())
            for t in leg.get_texts():
                add(f"axes {i} legend", t)
    return out


def assert_text_apart(fig, name: str) -> None:
    """No drawn text overlaps another (by more than half a pixel) or leaves the figure; no text or
    annotation of an axes leaves that axes."""
    boxes = _boxes(fig)
    page = fig.bbox
    for owner, text, box, within in boxes:
        assert page.x0 - 0.5 <= box.x0 and box.x1 <= page.x1 + 0.5 and page.y0 - 0.5 <= box.y0 and \
            box.y1 <= page.y1 + 0.5, f"{name}: {text!r} ({owner}) leaves the figure"
        if within is not None:
            assert within.x0 - 0.5 <= box.x0 and box.x1 <= within.x1 + 0.5 and within.y0 - 0.5 <= box.y0 and \
                box.y1 <= within.y1 + 0.5, f"{name}: {text!r} ({owner}) leaves its axes"
    for i, (owner, text, box, _) in enumerate(boxes):
        shrunk = box.padded(-0.5)
        for other_owner, other, other_box, _ in boxes[i + 1:]:
            assert not shrunk.overlaps(other_box.padded(-0.5)), \
                f"{name}: {text!r} ({owner}) overlaps {other!r} ({other_owner})"
    plt.close(fig)


@pytest.fixture(scope="module")
def donors():
    """Paired donors declared: the figures show the donors (SPARDA's per-donor panel, cPCA/PCPCA colours)."""
    a = make_counts(n_cells=160, n_genes=40, seed=1)
    a.obs["donor"] = np.array([f"D{i}" for i in range(4)])[np.arange(a.n_obs) % 4]
    a.obs.loc[a.obs_names[:3], "donor"] = "D9"  # too few cells: dropped by the design, kept apart in the QC figure
    out = preprocess(a, groupby="condition", target=["disease"], background=["healthy"], min_genes=1, min_cells=1,
                     n_top_genes=20, min_cells_per_group=5, replicate="donor", paired=True)
    out.uns["scontrast"]["preprocess"]["dataset"] = "donors"
    tl.sparda(out, genes="all", k=1, n_permutations=9, random_state=0)  # one gene: no one-bar wall
    tl.cpca(out, genes="all", random_state=0)
    tl.pcpca(out, genes="all", random_state=0)
    _pseudobulk_slots(out)
    return out


def _all_figures(adata):
    yield "preprocess", pl.preprocess(adata)
    yield "sparda", pl.sparda(adata)
    yield "cpca", pl.cpca(adata)
    yield "pcpca", pl.pcpca(adata)
    if "quadro" in adata.uns:
        yield "quadro", pl.quadro(adata)
    if "fangs" in adata.uns:
        yield "fangs", pl.fangs(adata)
    yield "pseudobulk", pl.pseudobulk(adata, n_labels=10)


def test_no_text_overlaps_in_any_figure(adata):
    for name, fig in _all_figures(adata):
        assert_text_apart(fig, name)


def test_no_text_overlaps_with_donors_declared(donors):
    """SPARDA with one gene and its donors, cPCA/PCPCA coloured by donor, the QC figure's design drop."""
    assert int(donors.var["sparda_selected"].sum()) == 1
    figures = dict(_all_figures(donors))
    sparda_fig = figures["sparda"]
    assert any(ax.get_title() == "each donor's mean (paired)" for ax in sparda_fig.axes)
    legend = [t.get_text() for t in figures["cpca"].legends[0].get_texts()]
    assert any(t.startswith("D0 (") for t in legend), legend  # the target cells coloured by donor
    ticks = " ".join(t.get_text() for t in figures["preprocess"].axes[0].get_xticklabels())
    assert "dropped\n(replicate)" in ticks, ticks  # the dropped donor's cells are not "removed by QC"
    for name, fig in figures.items():
        assert_text_apart(fig, name)


def test_no_feature_figure_is_one_sentence(adata):
    """FANGS with K = 0: one sentence in a small figure, no empty panel."""
    empty = adata.copy()
    del empty.obsm["fangs_features"]
    empty.uns["fangs"] = {**empty.uns["fangs"], "n_features": 0}
    fig = pl.fangs(empty)
    assert fig.get_axes() == [] and fig.get_figheight() <= 2.5
    assert any("K = 0" in t.get_text() for t in fig.texts)
    assert_text_apart(fig, "fangs K = 0")


def test_volcano_labels_apart_when_the_points_crowd(adata):
    """Twenty names on points a few pixels apart: each drawn where it covers no other, or counted as not named."""
    crowded = adata.copy()
    crowded.var["pseudobulk_log2fc"] = np.r_[np.full(20, 1.0) + np.arange(20) * 1e-3,
                                             np.zeros(crowded.n_vars - 20)]
    crowded.var["pseudobulk_pvalue"] = np.r_[np.full(20, 1e-5) * (1 + np.arange(20) * 1e-3),
                                             np.full(crowded.n_vars - 20, 0.5)]
    fig = pl.pseudobulk(crowded, n_labels=20)
    named = [t.get_text() for t in fig.axes[0].texts]
    missed = 20 - len(named)
    assert missed == 0 or f"({missed} of the 20 smallest p not named: no room)" in fig.axes[0].get_title()
    assert len(named) >= 10, named
    assert_text_apart(fig, "crowded volcano")
