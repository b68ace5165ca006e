"""An opt-in co-expression family for the donor-level test (:func:`scontrast.donor_test.donor_test`).

A spread factor shared by several genes, or a sub-state with several genes up, raises those genes'
correlations within each donor. Two label-free features measure it, so a test over relabellings of
the donors stays exact:

- :func:`replicate_coexpression` -- per replicate the Fisher z of every pair of the genes of largest
  pooled variance, shape (R, P) or, paired, (R, 2, P);
- :func:`module_coexpression` -- each gene's mean z with its most co-expressed partners;
- :func:`pooled_variance` -- every gene's variance over all cells (the label-free gene choice).

They go through :func:`scontrast.donor_test.donor_test` like the default families
(``donor_test({..., "coexpression": z}, ...)``). Measured against the defaults in docs/sparda.md:
no gain, so not a default.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from . import donor_test as _dt
from .core import ScontrastError

__all__ = ["replicate_coexpression", "module_coexpression", "pooled_variance", "N_PAIR_GENES"]

# genes whose pairwise correlations make the opt-in co-expression family (n_pair_genes * (n_pair_genes - 1) / 2 pairs)
N_PAIR_GENES = 50
# |r| is clipped below 1 before the Fisher z (a replicate's two identical columns would give an infinite z)
_R_MAX = 1.0 - 1e-6


def pooled_variance(X) -> np.ndarray:
    """The variance of every gene over all cells pooled (every block, both groups), shape (G,); sparse stays sparse."""
    blocks = list(X) if isinstance(X, (list, tuple)) else [X]
    n = sum(b.shape[0] for b in blocks)
    s1 = sum(np.asarray(b.sum(axis=0), dtype=float).ravel() for b in blocks)
    s2 = sum(np.asarray((b.multiply(b) if sp.issparse(b) else np.square(b, dtype=float)).sum(axis=0),
                        dtype=float).ravel() for b in blocks)
    return np.maximum(s2 / n - (s1 / n) ** 2, 0.0)


def replicate_coexpression(X, replicate_index: np.ndarray, is_target: np.ndarray, n_replicates: int, *,
                           paired: bool, n_pair_genes: int = N_PAIR_GENES) -> tuple[np.ndarray, np.ndarray]:
    """The ``coexpression`` family: per replicate, the Fisher z of the correlation of every pair of the most variable genes.

    The genes are the ``n_pair_genes`` of largest variance over **all** cells pooled (both groups,
    every replicate): a choice that does not depend on the labels, so every relabelling of the
    replicates sees the same features and the donor test stays exact with this family. Per
    replicate (and group, paired), ``z = arctanh(r)`` of the Pearson correlation ``r`` of the
    log-normalised cells of each pair (``|r|`` clipped at ``1 - 1e-6``); a gene constant within a
    replicate has no correlation there, taken as ``r = 0``. A per-cell factor common to several genes
    (a spread change of a program) or a sub-state with several genes up in a share of the cells
    raises their correlations, which neither the pseudobulk nor a gene's own sd sees directly.

    Sparse input stays sparse: only the chosen genes' columns are densified, ``_dt._ROWS`` cells at a time.

    Parameters
    ----------
    X, replicate_index, is_target, n_replicates, paired
        As :func:`replicate_features`.
    n_pair_genes : int
        At most G genes are used (>= 2).

    Returns
    -------
    z : ndarray, shape (R, P) unpaired; (R, 2, P) paired, ``P = n (n - 1) / 2`` pairs in the order of
        ``numpy.triu_indices(n, 1)`` over the chosen genes
    genes : ndarray of int, shape (n,)
        The chosen genes (column indices, ascending).
    """
    blocks, strata, k = _dt._blocks_and_strata(X, replicate_index, is_target, n_replicates, paired,
                                           "replicate co-expression")
    G = blocks[0].shape[1]
    n = int(min(n_pair_genes, G))
    if n < 2:
        raise ScontrastError(f"replicate co-expression: n_pair_genes must be >= 2 with >= 2 genes, got {n_pair_genes} "
                             f"of {G} genes")
    genes = np.sort(np.argsort(-pooled_variance(blocks), kind="stable")[:n])
    counts = np.bincount(strata, minlength=k).astype(float)
    s1, s2 = np.zeros((k, n)), np.zeros((k, n, n))
    start = 0
    for b in blocks:
        for s in range(0, b.shape[0], _dt._ROWS):
            part = b[s:s + _dt._ROWS][:, genes]
            part = part.toarray() if sp.issparse(part) else np.asarray(part)
            part = np.asarray(part, dtype=float)
            rows = strata[start + s:start + s + part.shape[0]]
            for r in np.unique(rows):
                cells = part[rows == r]
                s1[r] += cells.sum(axis=0)
                s2[r] += cells.T @ cells
        start += b.shape[0]
    mean = s1 / counts[:, None]
    cov = s2 / counts[:, None, None] - mean[:, :, None] * mean[:, None, :]
    # a relative floor: a constant gene's variance is rounding error of the sums, not a correlation's scale
    var = np.diagonal(cov, axis1=1, axis2=2)
    floor = 1e-12 * np.maximum(np.diagonal(s2, axis1=1, axis2=2) / counts[:, None], 1e-300)
    sd = np.sqrt(np.where(var > floor, var, np.inf))
    r = cov / (sd[:, :, None] * sd[:, None, :])
    iu = np.triu_indices(n, 1)
    z = np.arctanh(np.clip(r[:, iu[0], iu[1]], -_R_MAX, _R_MAX))
    return (z.reshape(n_replicates, 2, -1) if paired else z), genes


def module_coexpression(z: np.ndarray, n_neighbours: int) -> np.ndarray:
    """Each gene's co-expression with its module: the mean Fisher z of its pairs with its ``n_neighbours`` partners.

    The partners of a gene are the genes whose pair with it has the largest mean z over **every**
    replicate (and group): a choice blind to the labels, so the test stays exact. Averaging a
    gene's few strongest pairs per replicate gains over the single pairs when several genes change
    their co-expression together (a program's shared per-cell factor, a sub-state).

    Parameters
    ----------
    z : ndarray, shape (R, P) or (R, 2, P)
        :func:`replicate_coexpression`'s pairs, ``P = n (n - 1) / 2`` in ``numpy.triu_indices(n, 1)`` order.
    n_neighbours : int
        1 <= n_neighbours < n.

    Returns
    -------
    ndarray, shape (R, n) or (R, 2, n)
    """
    z = np.asarray(z, dtype=float)
    P = z.shape[-1]
    n = int(round((1 + np.sqrt(1 + 8 * P)) / 2))
    if n * (n - 1) // 2 != P or not 1 <= n_neighbours < n:
        raise ScontrastError(f"module co-expression: {P} pairs of genes and {n_neighbours} neighbours (need "
                             f"n (n - 1) / 2 pairs and 1 <= neighbours < n)")
    i, j = np.triu_indices(n, 1)
    flat = z.reshape(-1, P)
    full = np.zeros((flat.shape[0], n, n))
    full[:, i, j] = flat
    full[:, j, i] = flat
    strength = full.mean(axis=0)
    np.fill_diagonal(strength, -np.inf)
    partners = np.argsort(-strength, axis=1, kind="stable")[:, :n_neighbours]        # (n, m)
    out = np.take_along_axis(full, np.broadcast_to(partners, (flat.shape[0],) + partners.shape), axis=2).mean(axis=2)
    return out.reshape(z.shape[:-1] + (n,))
