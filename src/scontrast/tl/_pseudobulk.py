"""AnnData front end of the replicate-level pseudobulk reference (PyDESeq2)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import anndata as ad
import numpy as np

from ..core import CannotRun
from ..pseudobulk import deseq2, pseudobulk_counts, sample_covariates
from ._common import (
    TARGET_KEY,
    expression,
    fmt,
    record_params,
    renamed,
    replicate_design,
    result_warnings,
    target_mask,
)

log = logging.getLogger(__name__)

__all__ = ["pseudobulk", "summary_rows"]


def pseudobulk(
    adata: ad.AnnData,
    *,
    layer: str = "counts",
    groupby: str = TARGET_KEY,
    key_added: str = "pseudobulk",
    min_total_count: int = 10,
    alpha: float = 0.05,
    n_jobs: int = 1,
    covariates: Sequence[str] = (),
    copy: bool = False,
    key: str | None = None,
):
    """DESeq2 on counts summed per replicate and group: the donor-level mean test beside SPARDA.

    Parameters
    ----------
    adata
        Preprocessed cells with a declared replicate (``scontrast.preprocess(..., replicate=...)``)
        and raw counts in ``layers[layer]``.
    layer
        The raw counts (``'counts'``, which preprocessing keeps for raw input).
    groupby
        Boolean obs column of the target/background split.
    key_added
        Where the results go: ``var[f'{key_added}_log2fc']`` (and ``_pvalue``, ``_padj``) and
        ``uns[key_added]``.
    min_total_count
        Genes with fewer counts over all pseudo-samples are not tested (NaN in ``var``).
    alpha
        FDR level of DESeq2's independent filtering and of the genes counted as significant.
    n_jobs
        Worker processes of PyDESeq2's per-gene fits (the results do not depend on it).
    covariates
        Donor-level obs columns (sex, age, batch, a block) in the design:
        ``~covariates (+ replicate when paired) + group`` (one the replicate determines is left
        out of a paired design). Empty (default): ``~group`` or ``~replicate + group``.
    copy
        Return a copy instead of writing into ``adata``.
    key
        Deprecated name of ``groupby`` (a ``FutureWarning``; removed in the next release).

    Returns
    -------
    None (or the AnnData with ``copy=True``), with ``var['pseudobulk_log2fc']`` (target over
    background), ``var['pseudobulk_pvalue']``, ``var['pseudobulk_padj']`` and
    ``uns['pseudobulk']`` (params, design formula, pseudo-samples, significant genes).

    Raises
    ------
    CannotRun
        No replicate is declared, or the layer holds no raw counts.

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> import scontrast as sct
    >>> rng = np.random.default_rng(0)
    >>> counts = rng.poisson(5.0, size=(120, 200)).astype(np.float32)
    >>> counts[:60, :5] = rng.poisson(20.0, size=(60, 5))   # genes g0-g4 four times higher in the target
    >>> obs = pd.DataFrame({"condition": np.repeat(["disease", "healthy"], 60),
    ...                     "donor": np.tile(np.repeat(["d1", "d2", "d3"], 20), 2)}, index=[f"c{i}" for i in range(120)])
    >>> adata = ad.AnnData(counts, obs=obs, var=pd.DataFrame(index=[f"g{i}" for i in range(200)]))
    >>> pre = sct.preprocess(adata, groupby="condition", target=["disease"], background=["healthy"], counts="raw",
    ...                      replicate="donor", paired=True, min_genes=10, n_top_genes=50)
    >>> sct.tl.pseudobulk(pre)                              # each donor's counts summed per group, ~donor + group
    >>> sorted(pre.uns["pseudobulk"]["significant_genes"].tolist())
    ['g0', 'g1', 'g2', 'g3', 'g4']
    """
    groupby = renamed(groupby, key, new_name="groupby", old_name="key", default=TARGET_KEY, who="pseudobulk")
    adata = adata.copy() if copy else adata
    design = replicate_design(adata)
    if design is None:
        raise CannotRun("pseudobulk: no replicate declared (preprocess(..., replicate=<obs column>))")
    if layer not in adata.layers:
        raise CannotRun(f"pseudobulk: layer '{layer}' of raw counts is absent (raw-count input keeps it)")
    is_target = target_mask(adata, groupby)
    with result_warnings("pseudobulk") as warned:
        summed, samples = pseudobulk_counts(expression(adata, layer), is_target, design["replicates"], adata.var_names)
        extra = {}
        if covariates:  # absent, the call is exactly the one without covariates
            extra["covariates"] = sample_covariates(adata.obs, list(covariates), is_target, design["replicates"],
                                                    samples)
        res, formula = deseq2(summed, samples, paired=design["paired"], min_total_count=min_total_count, alpha=alpha,
                              n_jobs=n_jobs, **extra)
        n_sig = int((res["padj"] < alpha).sum())
        if n_sig == 0:
            log.info("pseudobulk: no gene at padj < %g over %s", alpha, design["summary"])
    adata.var[f"{key_added}_log2fc"] = res["log2FoldChange"].to_numpy(dtype=float)
    adata.var[f"{key_added}_pvalue"] = res["pvalue"].to_numpy(dtype=float)
    adata.var[f"{key_added}_padj"] = res["padj"].to_numpy(dtype=float)
    # by p-value, then by the size of the Wald statistic: strong genes' p-values underflow to 0 together
    order = np.lexsort((-np.abs(res["stat"].fillna(0.0).to_numpy()), res["pvalue"].fillna(np.inf).to_numpy()))
    significant = [str(adata.var_names[i]) for i in order if res["padj"].iloc[i] < alpha]
    record_params(
        adata, key_added, dict(layer=layer, groupby=groupby, key_added=key_added, min_total_count=min_total_count, alpha=alpha,
                                  **({"covariates": list(covariates)} if covariates else {})), None,
        warnings=warned, design_formula=formula, unit="replicate", design=design["summary"],
        pseudo_samples=np.asarray(samples.index, dtype=str), cells_per_sample=samples["n_cells"].to_numpy(),
        n_tested=int(res["pvalue"].notna().sum()), n_significant=n_sig,
        significant_genes=np.array(significant, dtype=str),
        top_genes=np.array([str(adata.var_names[i]) for i in order[:50]], dtype=str),
    )
    return adata if copy else None


def summary_rows(adata: ad.AnnData, n_top: int = 10) -> Iterator[tuple[str, str]]:
    """(item, value) rows of the summary for ``uns['pseudobulk']``, with SPARDA's overlap."""
    s = adata.uns["pseudobulk"]
    alpha = float(s["params"]["alpha"])
    yield "design (unit: replicate)", f"{s['design']}; DESeq2 {s['design_formula']}"
    yield f"genes at padj < {fmt(alpha)} (per replicate)", f"{int(s['n_significant'])} of {int(s['n_tested'])} tested"
    lfc = adata.var["pseudobulk_log2fc"] if "pseudobulk_log2fc" in adata.var else None
    top = list(np.asarray(s["top_genes"], dtype=str)[:n_top])
    shown = ", ".join(f"{g} ({lfc[g]:+.2f})" if lfc is not None else g for g in top)
    yield "top genes by p-value (log2 fold change)", shown
    if "sparda_selected" in adata.var:
        chosen = [str(g) for g in adata.var_names[adata.var["sparda_selected"].to_numpy(dtype=bool)]]
        sig = set(np.asarray(s["significant_genes"], dtype=str))
        in_top = [g for g in chosen if g in set(np.asarray(s["top_genes"], dtype=str))]
        yield "SPARDA genes among pseudobulk's", (
            f"{sum(g in sig for g in chosen)} of {len(chosen)} at padj < {fmt(alpha)}; {len(in_top)} in its top 50 by "
            f"p-value{' (' + ', '.join(in_top[:n_top]) + ')' if in_top else ''}")

