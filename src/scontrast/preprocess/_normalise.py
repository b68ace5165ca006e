"""Normalisation and highly variable genes: scanpy's results, in blocks of bounded memory for large sparse input."""

from __future__ import annotations

import warnings

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..core import ScontrastError, ScontrastWarning
from . import _counts  # PASS_ENTRIES read at call time: one setting for every pass

#: A target_sum below this share of the cells' median total (or below 1) is warned: log1p of so small
#: values is linear (log1p(x) ~ x), so the data is no longer on a log scale.
TARGET_SUM_LOW = 1e-3


def _check_target_sum(target_sum, totals: np.ndarray) -> None:
    """Warn when ``target_sum`` is implausibly small against the cells' totals (a typo like 1e-6 for 1e6)."""
    if target_sum is None or not totals.size:
        return
    median = float(np.median(totals))
    if target_sum < 1 or target_sum < TARGET_SUM_LOW * median:
        warnings.warn(f"target_sum={target_sum:g} scales every cell to that total, far below the cells' own (median "
                      f"{median:.4g}): every value is then at most {target_sum:g}, where log1p is nearly linear, so X "
                      "is not on a log scale; the usual value is 10000 (or null: the median total)", ScontrastWarning,
                      stacklevel=6)


def _normalise_and_flag(sc, out, *, counts, target_sum, n_top_genes, hvg_flavor, share=False) -> None:
    """Log-normalise ``out`` in place as ``counts`` requires (raw counts kept in a layer) and flag its HVGs.

    ``share``: the counts layer shares X's index arrays (see ``_beside``).
    """
    if counts == "raw":
        _check_target_sum(target_sum, out.obs["total_counts"].to_numpy())
        raw = out.X.copy() if not sp.issparse(out.X) else out.X.data.copy()  # sparse: the values only
        _normalize_total(sc, out, target_sum)
    if counts in ("raw", "tpm"):
        sc.pp.log1p(out)
        out.uns.pop("log1p", None)
        if out.X.dtype != np.float32:
            out.X = out.X.astype(np.float32)
    if counts == "raw":
        out.layers["counts"] = _beside(raw, out.X, share)

    n_hvg = min(n_top_genes, out.n_vars)
    if n_hvg >= out.n_vars:
        out.var["highly_variable"] = True
    elif hvg_flavor == "seurat" and sp.issparse(out.X) and out.X.nnz > HVG_BLOCK_ENTRIES:
        _seurat_hvg_in_blocks(out, n_hvg)
    else:
        sc.pp.highly_variable_genes(out, n_top_genes=n_hvg, flavor=hvg_flavor, subset=False)
        out.uns.pop("hvg", None)


def _normalize_total(sc, out: ad.AnnData, target_sum) -> None:
    """``sc.pp.normalize_total(out, target_sum=target_sum)``, bitwise, in place for a CSR matrix.

    scanpy divides the values by each row's factor repeated over its entries and then assigns
    the quotient: two temporary arrays as large as the values (the peak of preprocessing at
    50,000 cells). Here scanpy's own row sums and factors are computed as it does, and the values
    divided in place a piece of rows at a time: the same float operations on the same operands.
    Other matrices, and a scanpy whose internals are not those of the tested versions, take
    scanpy's function.
    """
    X = out.X
    try:
        import numba
        from scanpy.preprocessing._normalization import _normalize_csr
    except ImportError:
        _normalize_csr = None
    if _normalize_csr is None or not (sp.issparse(X) and X.format == "csr") or not np.issubdtype(X.dtype, np.floating):
        sc.pp.normalize_total(out, target_sum=target_sum)
        return
    # scanpy 1.11 _normalize_total_helper and axis_mul_or_truediv(op=truediv, allow_divide_by_zero=False)
    counts_per_cell, _ = _normalize_csr(X.indptr, X.indices, X.data, rows=X.shape[0], columns=X.shape[1],
                                        exclude_highly_expressed=False, max_fraction=0.05,
                                        n_threads=numba.get_num_threads())
    if target_sum is None:
        target_sum = np.median(counts_per_cell)
    counts_per_cell = counts_per_cell / target_sum
    scaling = counts_per_cell.copy() + (counts_per_cell == 0)
    data = X.data
    if scaling.dtype != data.dtype:  # not expected (scanpy's factors take the values' dtype): its own division
        sc.pp.normalize_total(out, target_sum=target_sum)
        return
    if not np.all(counts_per_cell > 0):
        warnings.warn("Some cells have zero counts", UserWarning, stacklevel=2)  # scanpy's (QC leaves none)
    per_row = np.diff(X.indptr)
    rows = np.searchsorted(X.indptr, np.arange(0, X.nnz, _counts.PASS_ENTRIES), side="right") - 1
    bounds = np.unique(np.r_[rows, X.shape[0]])
    for r0, r1 in zip(bounds[:-1], bounds[1:]):
        a, b = X.indptr[r0], X.indptr[r1]
        np.true_divide(data[a:b], np.repeat(scaling[r0:r1], per_row[r0:r1]), out=data[a:b])


def _beside(raw, X, share: bool):
    """The raw counts as a matrix: ``raw`` itself when dense; for sparse ``X``, the values ``raw`` on
    ``X``'s sparsity pattern (normalising and log1p keep every stored entry). ``share``: its index
    arrays are ``X``'s own (a third less memory; only for a result written and dropped, as an
    in-place change of one matrix's pattern would corrupt the other), else copies."""
    if not sp.issparse(X):
        return raw
    if X.nnz != raw.size:  # not expected: the pattern is no longer the counts'
        raise ScontrastError(f"normalisation changed the stored entries ({raw.size} counts, {X.nnz} values)")
    indices, indptr = (X.indices, X.indptr) if share else (X.indices.copy(), X.indptr.copy())
    kind = sp.csr_matrix if X.format == "csr" else sp.csc_matrix
    return kind((raw, indices, indptr), shape=X.shape)


#: a sparse matrix with more stored entries than this has its HVG statistics computed a block of
#: genes at a time (scanpy copies the whole matrix twice); the same numbers either way
HVG_BLOCK_ENTRIES = 2**24


def _seurat_hvg_in_blocks(out: ad.AnnData, n_top_genes: int) -> None:
    """``sc.pp.highly_variable_genes(out, n_top_genes, flavor='seurat')``, bitwise, one block of genes at a time.

    Scanpy makes two copies of the whole log matrix (``expm1`` of a copy) for each gene's mean
    and variance; these are computed here on blocks of about an eighth of the stored entries
    with scanpy's own routine (a gene's sums run over the same cells in the same order), and
    the rest is scanpy's (binning by mean, normalised dispersions, the top genes). Falls back
    to scanpy's function when its internals are not those of the tested versions.
    """
    import scanpy as sc

    try:
        from scanpy.preprocessing._highly_variable_genes import _get_disp_stats, _get_mean_bins, _subset_genes
        from scanpy.preprocessing._utils import _get_mean_var
    except ImportError:  # another scanpy: its own function, at its own memory cost
        sc.pp.highly_variable_genes(out, n_top_genes=n_top_genes, flavor="seurat", subset=False)
        out.uns.pop("hvg", None)
        return
    X = out.X
    mean, var = np.empty(X.shape[1]), np.empty(X.shape[1])
    for cols in _entry_blocks(_entries_per_gene(X), max(X.nnz // 8, 1)):
        block = X[:, cols[0]: cols[-1] + 1]
        mean[cols], var[cols] = _get_mean_var(np.expm1(block))
    # what scanpy's seurat flavour does with them (scanpy 1.11 _highly_variable_genes_single_batch)
    mean[mean == 0] = 1e-12
    dispersion = var / mean
    dispersion[dispersion == 0] = np.nan
    dispersion = np.log(dispersion)
    mean = np.log1p(mean)
    df = pd.DataFrame({"means": mean, "dispersions": dispersion})
    df["mean_bin"] = _get_mean_bins(df["means"], "seurat", 20)
    stats = _get_disp_stats(df, "seurat")
    df["dispersions_norm"] = (df["dispersions"] - stats["avg"]) / stats["dev"]
    df["highly_variable"] = _subset_genes(out, mean=mean, dispersion_norm=df["dispersions_norm"].to_numpy(),
                                          cutoff=n_top_genes)
    df.index = out.var_names
    out.var["highly_variable"] = df["highly_variable"]
    out.var["means"] = df["means"]
    out.var["dispersions"] = df["dispersions"]
    out.var["dispersions_norm"] = df["dispersions_norm"].astype(np.float32, copy=False)


def _entries_per_gene(X) -> np.ndarray:
    """Stored entries of each column of a CSR or CSC matrix (bincount in pieces: no int64 copy of the indices)."""
    if X.format == "csc":
        return np.diff(X.indptr)
    step = max(1, X.nnz // 8)
    out = np.zeros(X.shape[1], dtype=np.int64)
    for start in range(0, X.nnz, step):
        out += np.bincount(X.indices[start: start + step], minlength=X.shape[1])
    return out


def _entry_blocks(per_gene: np.ndarray, most: int) -> list[np.ndarray]:
    """Consecutive blocks of genes holding at most ``most`` stored entries each (one gene alone may hold more)."""
    blocks, start, held = [], 0, 0
    for j, n in enumerate(per_gene):
        if j > start and held + n > most:
            blocks.append(np.arange(start, j))
            start, held = j, 0
        held += int(n)
    blocks.append(np.arange(start, per_gene.size))
    return blocks
