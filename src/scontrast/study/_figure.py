"""The study figure: splits ranked, their effect with its donor interval, the called ones marked."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["plot_ranking"]


def plot_ranking(table: pd.DataFrame, global_pvalue: float | None = None, *, alpha: float = 0.05, ax=None):
    """Horizontal ranking of the splits of a study table (``STUDY_COLUMNS``).

    Tested splits top to bottom by rank: the effect (0 = no difference) with its jackknife
    interval, filled and starred when padj < ``alpha``, labelled with p and padj; skipped splits
    listed below with their reason. Returns the Figure.

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> from scontrast.datasets import simulate_study
    >>> from scontrast.study import plot_ranking, run_study
    >>> rng = np.random.default_rng(0)
    >>> obs = pd.DataFrame({"cell_type": np.repeat(["B", "T"], 60)}, index=[f"c{i}" for i in range(120)])
    >>> cells = ad.AnnData(rng.poisson(3.0, size=(120, 50)).astype(np.float32), obs=obs,
    ...                    var=pd.DataFrame(index=[f"g{i}" for i in range(50)]))
    >>> study = simulate_study(cells, n_target=4, n_background=4, cells_per_donor=15, gene_pool=20, random_state=0)
    >>> res = run_study(study, groupby="condition", target=["case"], background=["control"], replicate="donor",
    ...                 split_by="cell_type", n_genes=30)
    >>> fig = plot_ranking(res.table, res.global_pvalue)
    >>> type(fig).__name__
    'Figure'
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    tested = table[table["status"] == "tested"].sort_values("rank")
    skipped = table[table["status"] != "tested"]
    n = max(len(tested), 1)
    if ax is None:
        fig, ax = plt.subplots(figsize=(8, 1.2 + 0.45 * n + 0.25 * len(skipped)))
    else:
        fig = ax.figure
    y = np.arange(len(tested))[::-1]
    for yi, (_, row) in zip(y, tested.iterrows()):
        called = row["padj"] < alpha
        colour = "#c0392b" if called else "#7f8c8d"
        if np.isfinite(row["effect_low"]):
            ax.plot([row["effect_low"], row["effect_high"]], [yi, yi], color=colour, lw=2)
        ax.plot(row["effect"], yi, "o", color=colour, mfc=colour if called else "white", ms=8)
        ax.annotate(f"p={row['pvalue']:.2g}  padj={row['padj']:.2g}{'  *' if called else ''}",
                    (1.01, yi), xycoords=("axes fraction", "data"), va="center", fontsize=8, color=colour)
    ax.axvline(0, color="black", lw=0.8, ls="--")
    ax.set_yticks(y)
    ax.set_yticklabels([f"{r['value']} ({r['n_target_replicates']}v{r['n_background_replicates']})"
                        for _, r in tested.iterrows()])
    ax.set_ylim(-0.8, max(len(tested) - 0.2, 0.8))
    # two lines: on one the label was wider than the axes and ran past the split names
    ax.set_xlabel("effect (0 = no difference):\n(between-group - within-group donor distance) / within-group")
    title = "splits ranked by donor-level evidence, then effect"
    if global_pvalue is not None and np.isfinite(global_pvalue):
        title += f"; global p = {global_pvalue:.2g}"
    ax.set_title(title, fontsize=10)
    if len(skipped):
        text = "skipped: " + "; ".join(f"{r['value']} ({r['status'].removeprefix('skipped: ')})"
                                       for _, r in skipped.iterrows())
        fig.text(0.01, 0.01, text, fontsize=7, wrap=True, va="bottom")
    fig.tight_layout(rect=(0, 0.04 if len(skipped) else 0, 1, 1))  # the p-values right of the axes count in its bbox
    return fig
