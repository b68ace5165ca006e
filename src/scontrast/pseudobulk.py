"""Pseudobulk differential expression at the replicate level (PyDESeq2): the reference beside SPARDA.

When replicates (donors, samples) are declared and the data are raw counts, the counts of each
replicate's cells are summed per group into one pseudo-sample, and DESeq2's negative binomial
GLM (PyDESeq2) compares the groups: ``~group`` for an unpaired design, ``~replicate + group``
when each replicate gives cells to both groups. This is the test users trust for multi-donor
designs (Squair et al. 2021); it sees changes of mean only, where SPARDA also sees changes of
spread and co-expression, so the two are reported side by side.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp

from .bounds import check_count
from .core import ScontrastError, blas_threads, check_int, check_real, silenced_warnings

__all__ = ["pseudobulk_counts", "deseq2", "sample_covariates"]


def pseudobulk_counts(counts, is_target, replicates, gene_names=None, block: int = 8192) -> tuple[pd.DataFrame,
                                                                                                  pd.DataFrame]:
    """Sum the counts of each (replicate, group), ``block`` cells at a time.

    Parameters
    ----------
    counts : ndarray or sparse matrix, shape (N, G)
        Raw counts (non-negative integers).
    is_target : array-like of bool, shape (N,)
    replicates : array-like, shape (N,)
        Each cell's replicate.
    gene_names : sequence of str, shape (G,), optional
    block : int
        Cells summed at once: the float64 sums never need a float64 copy of a float32 layer
        (at 50,000 cells x 20,000 genes that copy was as large as the layer itself).

    Returns
    -------
    summed : DataFrame, shape (S, G)
        Integer counts per pseudo-sample ``'<replicate>|<target|background>'``.
    samples : DataFrame, shape (S, 3)
        Columns ``replicate``, ``group`` ('target' / 'background') and ``n_cells``.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.pseudobulk import pseudobulk_counts
    >>> counts = np.ones((6, 2))
    >>> is_target = np.array([True, True, True, False, False, False])
    >>> summed, samples = pseudobulk_counts(counts, is_target, np.array(["d1", "d1", "d2", "d1", "d2", "d2"]),
    ...                                     gene_names=["g0", "g1"])
    >>> summed.loc["d1|target"].tolist(), int(samples.loc["d1|target", "n_cells"])
    ([2, 2], 2)
    """
    is_target = np.asarray(is_target, dtype=bool)
    replicates = np.asarray(replicates).astype(str)
    group = np.where(is_target, "target", "background")
    keys = pd.Series([f"{r}|{g}" for r, g in zip(replicates, group)])
    codes, names = pd.factorize(keys, sort=True)
    counts = counts if sp.issparse(counts) else np.asarray(counts)
    summed = np.zeros((names.size, counts.shape[1]))
    for start in range(0, codes.size, block):
        part = codes[start:start + block]
        indicator = sp.csr_matrix((np.ones(part.size), (part, np.arange(part.size))), shape=(names.size, part.size))
        step = indicator @ counts[start:start + block]
        summed += step.toarray() if sp.issparse(step) else step
    if summed.size and (summed < 0).any():
        raise ScontrastError("counts: negative values; pseudobulk needs raw counts")
    rounded = np.rint(summed)
    if not np.allclose(rounded, summed, rtol=0, atol=1e-6):
        raise ScontrastError("counts: not integers; pseudobulk needs raw counts (layers['counts'] of raw input)")
    columns = None if gene_names is None else pd.Index(np.asarray(gene_names).astype(str))
    summed = pd.DataFrame(rounded.astype(np.int64), index=names, columns=columns)
    samples = pd.DataFrame({
        "replicate": [n.rsplit("|", 1)[0] for n in names],
        "group": [n.rsplit("|", 1)[1] for n in names],
        "n_cells": np.bincount(codes, minlength=names.size),
    }, index=names)
    return summed, samples


def sample_covariates(obs: pd.DataFrame, columns, is_target, replicates, samples: pd.DataFrame) -> pd.DataFrame:
    """The value of each covariate in each pseudo-sample (S, len(columns)), from the cells' ``obs``.

    A covariate must be constant within a pseudo-sample (a donor-level covariate: sex, age,
    batch); one that is not is a one-line error naming it. Numeric columns with more than two
    values stay numeric (a slope in the design), others become categories.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from scontrast.pseudobulk import pseudobulk_counts, sample_covariates
    >>> is_target = np.repeat([True, False], 6)
    >>> donors = np.tile(np.repeat(["d1", "d2", "d3"], 2), 2)
    >>> _, samples = pseudobulk_counts(np.ones((12, 2)), is_target, donors, gene_names=["g0", "g1"])
    >>> obs = pd.DataFrame({"sex": np.tile(np.repeat(["F", "M", "F"], 2), 2)})   # one value per donor
    >>> sample_covariates(obs, ["sex"], is_target, donors, samples)["sex"].tolist()
    ['F', 'F', 'M', 'M', 'F', 'F']
    """
    group = np.where(np.asarray(is_target, dtype=bool), "target", "background")
    keys = pd.Series([f"{r}|{g}" for r, g in zip(np.asarray(replicates).astype(str), group)], index=obs.index)
    out = pd.DataFrame(index=samples.index)
    for col in columns:
        if col not in obs:
            raise ScontrastError(f"covariate '{col}' is not an obs column; have {list(obs.columns)[:20]}")
        values = obs[col]
        per = values.groupby(keys.to_numpy()).nunique(dropna=False)
        if (per > 1).any():
            raise ScontrastError(f"covariate '{col}' varies within pseudo-sample {per.index[per > 1][0]}: a pseudobulk "
                                 "covariate must be one value per replicate and group")
        first = values.groupby(keys.to_numpy()).first().reindex(samples.index)
        numeric = pd.api.types.is_numeric_dtype(values) and values.nunique() > 2
        out[col] = first.astype(float) if numeric else first.astype(str)
    return out


def deseq2(summed: pd.DataFrame, samples: pd.DataFrame, *, paired: bool, min_total_count: int = 10,
           alpha: float = 0.05, n_jobs: int = 1, covariates: pd.DataFrame | None = None) -> tuple[pd.DataFrame, str]:
    """PyDESeq2's Wald test of target vs background on pseudobulk counts.

    Parameters
    ----------
    summed, samples
        From :func:`pseudobulk_counts`.
    paired : bool
        Design ``~replicate + group`` (paired) or ``~group``.
    min_total_count : int
        Genes with fewer counts over all pseudo-samples are not tested (their rows are NaN).
    alpha : float
        Target FDR of DESeq2's independent filtering.
    n_jobs : int
        Worker processes of PyDESeq2's per-gene fits (its ``n_cpus``; the genes are fitted
        independently, so the results do not depend on it).
    covariates : DataFrame (S, C), optional
        Per pseudo-sample covariates (:func:`sample_covariates`): the design becomes
        ``~covariates (+ replicate when paired) + group``. A covariate that takes one value, or
        (paired) that the replicate determines, adds nothing to the design and is left out.
        None (default): ``~group`` or ``~replicate + group`` as without covariates.

    Returns
    -------
    results : DataFrame, one row per gene of ``summed`` (same order)
        ``baseMean``, ``log2FoldChange`` (target over background), ``lfcSE``, ``stat``,
        ``pvalue``, ``padj``; NaN for untested genes.
    design : str
        The formula used.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.pseudobulk import deseq2, pseudobulk_counts
    >>> rng = np.random.default_rng(0)
    >>> counts = rng.poisson(5.0, size=(120, 100)).astype(float)
    >>> is_target = np.repeat([True, False], 60)
    >>> counts[is_target, :5] = rng.poisson(20.0, size=(60, 5))    # genes g0-g4 four times higher in the target
    >>> donors = np.tile(np.repeat(["d1", "d2", "d3"], 20), 2)     # each donor gives cells to both groups
    >>> summed, samples = pseudobulk_counts(counts, is_target, donors, gene_names=[f"g{i}" for i in range(100)])
    >>> res, formula = deseq2(summed, samples, paired=True)
    >>> formula, sorted(res.nsmallest(5, "padj").index)
    ('~replicate + group', ['g0', 'g1', 'g2', 'g3', 'g4'])
    """
    from pydeseq2.dds import DeseqDataSet
    from pydeseq2.default_inference import DefaultInference
    from pydeseq2.ds import DeseqStats

    check_count(min_total_count, "min_total_count", 0, "pseudobulk")
    check_real(alpha, "alpha", 0, 1, strict_min=True, strict_max=True)
    check_int(n_jobs, "n_jobs", 1)
    for grp in ("target", "background"):
        if (samples["group"] == grp).sum() < 2:
            raise ScontrastError(f"pseudobulk: {int((samples['group'] == grp).sum())} {grp} pseudo-sample(s); DESeq2 "
                                 "needs at least 2 replicates per group")
    tested = summed.columns[summed.sum(axis=0).to_numpy() >= min_total_count]
    if tested.size == 0:
        raise ScontrastError(f"pseudobulk: no gene has min_total_count={min_total_count} counts over the pseudo-samples")
    design = "~replicate + group" if paired else "~group"
    metadata = samples[["replicate", "group"]].astype(str)
    if covariates is not None and covariates.shape[1]:
        used = [c for c in covariates.columns if _adds_to_design(covariates[c], samples["replicate"], paired)]
        if used:
            clash = [c for c in used if c in ("replicate", "group")]
            if clash:
                raise ScontrastError(f"covariate '{clash[0]}' has the name of a design term; rename the obs column")
            metadata = pd.concat([metadata, covariates[used]], axis=1)
            design = "~" + " + ".join([*used, *(["replicate"] if paired else []), "group"])
    inference = DefaultInference(n_cpus=int(n_jobs))
    # every per-gene fit is a (samples x terms) system of a few rows: BLAS threads only spin on
    # them (a study's pseudobulk job spent 1.5 CPU s per wall second with them, 1.0 without)
    with silenced_warnings(), blas_threads(1):
        # poscounts size factors: with sparse single-cell genes every gene may have a zero sample,
        # where DESeq2's default ratio estimator has no geometric mean to divide by
        dds = DeseqDataSet(counts=summed[tested], metadata=metadata, design=design, refit_cooks=True,
                           size_factors_fit_type="poscounts", inference=inference, quiet=True)
        dds.deseq2()
        stats = DeseqStats(dds, contrast=["group", "target", "background"], alpha=alpha, inference=inference, quiet=True)
        stats.summary()
    res = stats.results_df.reindex(summed.columns)
    return res[["baseMean", "log2FoldChange", "lfcSE", "stat", "pvalue", "padj"]], design


def _adds_to_design(values: pd.Series, replicate: pd.Series, paired: bool) -> bool:
    """Whether a covariate is estimable beside the other terms: it varies, and (paired) not only between replicates."""
    if values.nunique() < 2:
        return False
    return not (paired and (values.groupby(replicate.to_numpy()).nunique() == 1).all())
