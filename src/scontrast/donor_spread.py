"""Spread families of the donor test freed of the donors' own mean differences.

The ``spread`` family of :func:`scontrast.donor_test.replicate_features` (the sd of a replicate's
log-normalised cells) follows the gene's mean at low counts: a donor whose factor raises a gene's
mean raises its spread too, so the donors' mean differences (log-sd 0.3 per gene in the
simulations) are noise in the spread family. Three label-free ways around it:

- :func:`residual_spread` -- per replicate (and group), the spread minus a smooth curve of the
  spread on the location fitted over all genes of that replicate (a natural spline, least squares);
- :func:`gene_residual_spread` -- per gene, the spread minus its least-squares line on the location
  over every replicate (and group);
- :func:`tail_share` -- per replicate and gene, the logit of the share of its cells above the
  gene's :data:`TAIL_QUANTILE` quantile over all cells pooled (label-free): a sub-state carried by
  a share of the cells moves the upper tail more than the mean or the variance;
- :func:`dispersion` -- per replicate and gene, ``log(1 + phi)`` with ``phi`` the squared
  coefficient of variation of the cells' expected expression beyond Poisson sampling
  (``(mean(e^2) - mean(k e)) / mean(e)^2 - 1``, ``e = expm1(x)``, ``k`` the ``e`` of one count of
  the cell): a per-cell log-normal factor of log-sd ``s`` adds ``s^2`` to it whatever the gene's
  mean, and a factor on the gene's mean (a donor's, a mean shift) leaves it unchanged. Each
  gene's ``e`` is first capped at its :data:`CAP_QUANTILE` quantile over all cells pooled
  (:func:`column_quantile`, label-free): a few cells of extreme counts would otherwise make most
  of a donor's second moment.

Each is computed from the replicates' features (or cells) without the group labels, and the same
for every relabelling: the donor test's statistic stays one fixed function of (features, labels)
and its permutation p-value stays exact.

numpy in, numpy out.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .core import ScontrastError

__all__ = ["residual_spread", "gene_residual_spread", "cell_scale", "checked_scale", "column_quantile",
           "dispersion_pieces", "dispersion", "unit_dispersion", "tail_piece", "tail_share", "unit_tail", "SPREAD_DF",
           "CAP_QUANTILE", "TAIL_QUANTILE"]

# columns of the natural spline of the spread on the location, per replicate (4: limma-trend's choice for >= 30 genes)
SPREAD_DF = 4
# dispersion caps each gene's e at this quantile of all cells pooled (label-free): a few cells of extreme counts
# would otherwise make most of a donor's second moment (chosen on bench_study's B split and bench_donors --seed 1)
CAP_QUANTILE = 0.99
# the tail family counts a replicate's cells above this quantile of the gene over all cells pooled (label-free)
TAIL_QUANTILE = 0.9


def _natural_spline_basis(x: np.ndarray, df: int) -> np.ndarray:
    """A basis of the natural cubic splines in ``x`` with ``df`` columns (the intercept included).

    Knots at the ends and at ``df - 2`` inner quantiles of ``x``, the space ``splines::ns(x, df,
    intercept=TRUE)`` spans (ESL 5.2.1's truncated-power form). Fewer distinct values, or quantiles
    that coincide (many tied values, as a family of discrete shares gives): fewer columns.
    """
    x = np.asarray(x, dtype=float)
    df = int(min(df, np.unique(x).size))
    knots = np.unique(np.quantile(x, np.linspace(0, 1, df))) if df > 2 else np.zeros(0)
    if knots.size <= 2:
        return np.column_stack([np.ones_like(x), x][:max(df, 1)])
    df = knots.size
    scale = max(knots[-1] - knots[0], 1e-300)
    u, kn = (x - knots[0]) / scale, (knots - knots[0]) / scale

    def d(k):
        return (np.maximum(u - kn[k], 0) ** 3 - np.maximum(u - kn[-1], 0) ** 3) / (kn[-1] - kn[k])

    cols = [np.ones_like(u), u] + [d(k) - d(df - 2) for k in range(df - 2)]
    return np.column_stack(cols)


def _rows_of(location: np.ndarray, spread: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``location`` and ``spread`` (same shape, last axis the genes) as (units, G) float arrays."""
    loc, sd = np.asarray(location, dtype=float), np.asarray(spread, dtype=float)
    if loc.shape != sd.shape or loc.ndim < 2:
        raise ScontrastError(f"{what}: location {loc.shape} and spread {sd.shape} must share one shape (..., G)")
    return loc.reshape(-1, loc.shape[-1]), sd.reshape(-1, sd.shape[-1])


def residual_spread(location: np.ndarray, spread: np.ndarray, *, df: int = SPREAD_DF) -> np.ndarray:
    """Per replicate (and group), the spread minus its natural-spline curve on the location over the genes.

    Parameters
    ----------
    location, spread : ndarray, shape (R, G) or (R, 2, G)
        :func:`scontrast.donor_test.replicate_features`'s ``location`` and ``spread``.
    df : int
        Columns of the spline basis (the intercept included; fewer when a replicate has fewer
        distinct locations).

    Returns
    -------
    ndarray, the shape of ``spread``
    """
    loc, sd = _rows_of(location, spread, "residual spread")
    out = np.empty_like(sd)
    for i in range(sd.shape[0]):
        B = _natural_spline_basis(loc[i], df)
        coef, *_ = np.linalg.lstsq(B, sd[i], rcond=None)
        out[i] = sd[i] - B @ coef
    return out.reshape(np.shape(spread))


def gene_residual_spread(location: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """Per gene, the spread minus its least-squares line on the location over every replicate (and group).

    Parameters
    ----------
    location, spread : ndarray, shape (R, G) or (R, 2, G)

    Returns
    -------
    ndarray, the shape of ``spread``
    """
    loc, sd = _rows_of(location, spread, "gene residual spread")
    lc, sc = loc - loc.mean(axis=0), sd - sd.mean(axis=0)
    sxx = (lc * lc).sum(axis=0)
    # a gene whose location does not vary over the replicates keeps its centred spread
    slope = np.divide((lc * sc).sum(axis=0), sxx, out=np.zeros_like(sxx), where=sxx > 1e-12 * (1 + sxx.max()))
    return (sc - lc * slope).reshape(np.shape(spread))


def cell_scale(part) -> np.ndarray:
    """Each cell's smallest non-zero ``expm1(x)`` (shape (n,)): the normalised value of one count when ``x`` is
    ``log1p`` of counts scaled per cell and the cell has a gene at one count; 1 for a cell without any count.

    Parameters
    ----------
    part : ndarray or sparse matrix, shape (n, G), log-normalised
    """
    if sp.issparse(part):
        csr = sp.csr_matrix(part)
        csr.eliminate_zeros()
        lens = np.diff(csr.indptr)
        out = np.ones(csr.shape[0])
        has = lens > 0
        if has.any():
            out[has] = np.minimum.reduceat(np.expm1(csr.data), csr.indptr[:-1][has])
        return out
    e = np.expm1(np.asarray(part, dtype=float))
    e = np.where(e > 0, e, np.inf)
    out = e.min(axis=1)
    return np.where(np.isfinite(out), out, 1.0)


def checked_scale(cell_scale_of, n_cells: int) -> np.ndarray | None:
    """``cell_scale_of`` as a float array of ``n_cells`` positive values (None stays None); a one-line error else."""
    if cell_scale_of is None:
        return None
    scale = np.asarray(cell_scale_of, dtype=float).ravel()
    if scale.size != n_cells or not np.all(scale > 0):
        raise ScontrastError(f"cell_scale_of: {n_cells} positive values expected (one per cell), got {scale.size} "
                             f"with minimum {scale.min(initial=np.inf):.3g}")
    return scale


def column_quantile(X, q: float) -> np.ndarray:
    """The ``q``-quantile of ``expm1(x)`` of every gene over all cells pooled, zeros included (``np.quantile``'s
    linear interpolation), shape (G,); sparse input stays sparse.

    Parameters
    ----------
    X : ndarray or sparse matrix, shape (N, G), or a list of them (row blocks), log-normalised (``x >= 0``)
    q : float in [0, 1]
    """
    blocks = list(X) if isinstance(X, (list, tuple)) else [X]
    if not all(sp.issparse(b) for b in blocks):
        e = np.expm1(np.vstack([b.toarray() if sp.issparse(b) else np.asarray(b, dtype=float) for b in blocks]))
        return np.quantile(e, q, axis=0)
    csc = sp.vstack(blocks, format="csc").astype(float)
    csc.eliminate_zeros()
    n, out = csc.shape[0], np.zeros(csc.shape[1])
    pos = q * (n - 1)
    lo, frac = int(np.floor(pos)), pos - np.floor(pos)
    for j in range(csc.shape[1]):
        data = csc.data[csc.indptr[j]:csc.indptr[j + 1]]
        if data.size == 0:
            continue
        # the sorted column: n - nnz zeros, then the non-zero values in order
        full = np.concatenate([[0.0], np.sort(np.expm1(data))])
        below, above = (full[max(i - (n - data.size) + 1, 0)] for i in (lo, min(lo + 1, n - 1)))
        out[j] = below + frac * (above - below)
    return out


def dispersion_pieces(e, scale: np.ndarray, cap: np.ndarray) -> dict:
    """The cells' pieces :func:`dispersion` averages: ``ec = min(e, cap)``, ``ec^2`` and ``k ec``.

    Parameters
    ----------
    e : ndarray or sparse matrix, shape (n, G), ``expm1`` of log-normalised cells (non-negative)
    scale : ndarray, shape (n,), each cell's ``k`` (:func:`cell_scale`)
    cap : ndarray, shape (G,) (:func:`column_quantile`)
    """
    if sp.issparse(e):
        ec = sp.csr_matrix(e, dtype=float, copy=True)
        ec.data = np.minimum(ec.data, np.asarray(cap, dtype=float)[ec.indices])
        sq = ec.power(2)
    else:
        ec = np.minimum(np.asarray(e, dtype=float), cap)
        sq = ec * ec
    return {"ec": ec, "ec2": sq, "kec": sp.diags(np.asarray(scale, dtype=float)) @ ec}


def unit_dispersion(e: np.ndarray, scale: np.ndarray, unit: np.ndarray, units: list,
                    q: float = CAP_QUANTILE) -> np.ndarray:
    """:func:`dispersion` of every unit's cells (dense), each gene's ``e`` capped at its ``q``-quantile over all cells.

    Parameters
    ----------
    e : ndarray, shape (n_cells, G), normalised expression (``expm1`` of log-normalised)
    scale : ndarray, shape (n_cells,), each cell's ``e`` of one count
    unit : ndarray, shape (n_cells,), each cell's unit
    units : list, length U, the units in the order of the rows returned

    Returns
    -------
    ndarray, shape (U, G)
    """
    e = np.asarray(e, dtype=float)
    pieces = dispersion_pieces(e, scale, np.quantile(e, q, axis=0))
    out = np.empty((len(units), e.shape[1]))
    for i, u in enumerate(units):
        rows = np.asarray(unit) == u
        out[i] = dispersion(*(pieces[n][rows].mean(axis=0) for n in ("ec", "ec2", "kec")))
    return out


def dispersion(mean_e: np.ndarray, mean_e2: np.ndarray, mean_ke: np.ndarray) -> np.ndarray:
    """``log(1 + phi)`` per replicate and gene from its cells' moments, ``phi`` clipped at 0 (0 without counts).

    ``1 + phi = (mean(e^2) - mean(k e)) / mean(e)^2``: ``mean(k e)`` is the Poisson part of
    ``mean(e^2)`` (for ``e = k c`` with Poisson ``c`` of mean ``mu / k``,
    ``E[e^2 - k e] = mu^2``), so the ratio is ``mean(mu^2) / mean(mu)^2`` of the cells' expected
    expression ``mu`` (at least 1), free of the gene's scale.

    Parameters
    ----------
    mean_e, mean_e2, mean_ke : ndarray, one shape
        Per replicate (and group) and gene, the cells' means of ``e``, ``e^2`` and ``k e``.
    """
    m, m2, p = (np.asarray(a, dtype=float) for a in (mean_e, mean_e2, mean_ke))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(m > 0, (m2 - p) / (m * m), 1.0)
    return np.log(np.maximum(ratio, 1.0))


def tail_piece(e, threshold: np.ndarray):
    """``1`` where a cell's ``e`` exceeds its gene's ``threshold`` (:func:`column_quantile`), else ``0``; the cells'
    piece :func:`tail_share` averages. Shape of ``e`` (n, G); sparse stays sparse (a threshold is never negative)."""
    thr = np.asarray(threshold, dtype=float)
    if sp.issparse(e):
        above = sp.csr_matrix(e, dtype=float, copy=True)
        above.data = (above.data > thr[above.indices]).astype(float)
        above.eliminate_zeros()
        return above
    return (np.asarray(e, dtype=float) > thr).astype(float)


def tail_share(share: np.ndarray, n_cells: np.ndarray) -> np.ndarray:
    """``log(p / (1 - p))`` with ``p = (share * n + 0.5) / (n + 1)``: the logit of a replicate's share of cells above
    the threshold, kept finite at 0 and 1 of them.

    Parameters
    ----------
    share : ndarray, shape (..., G), the mean of :func:`tail_piece` over each replicate's cells
    n_cells : ndarray, shape (...,), the replicates' cell counts

    >>> import numpy as np
    >>> tail_share(np.array([[0.0, 0.5, 1.0]]), np.array([9])).round(3).tolist()   # 0.5/10, 5/10, 9.5/10
    [[-2.944, 0.0, 2.944]]
    """
    n = np.asarray(n_cells, dtype=float)[..., None]
    p = (np.asarray(share, dtype=float) * n + 0.5) / (n + 1.0)
    return np.log(p / (1.0 - p))


def unit_tail(e: np.ndarray, unit: np.ndarray, units: list, q: float = TAIL_QUANTILE) -> np.ndarray:
    """:func:`tail_share` of every unit's cells (dense ``e``, (n_cells, G)): the share above each gene's ``q``-quantile
    over all the cells given (label-free), shape (U, G) in the order of ``units``."""
    e = np.asarray(e, dtype=float)
    above = tail_piece(e, np.quantile(e, q, axis=0))
    unit = np.asarray(unit)
    rows = [unit == u for u in units]
    return tail_share(np.vstack([above[r].mean(axis=0) for r in rows]), np.array([r.sum() for r in rows]))
