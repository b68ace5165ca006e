"""limma's empirical-Bayes variances (``squeezeVar``) for many sets of genes' variances at once.

The moderated t of :mod:`scontrast.donor_test` shrinks every gene's residual variance towards a prior
whose scale follows a natural-spline trend on a covariate (limma-trend) and whose degrees of freedom are
estimated from the spread of all genes' variances (Smyth 2004, *Stat. Appl. Genet. Mol. Biol.* 3:3).
Every row of variances (one relabelling of the donors) is squeezed on its own, as a few matrix
products over all rows together.
"""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, polygamma

from .donor_spread import _natural_spline_basis  # the trend's basis, shared with the residual spread

__all__ = ["squeeze_var"]


def _trend_df(n_genes: int) -> int:
    """Degrees of freedom of the natural-spline trend of the prior variance on mean expression, as limma's
    fitFDist chooses them: ``1 + [G >= 3] + [G >= 6] + [G >= 30]``."""
    return 1 + (n_genes >= 3) + (n_genes >= 6) + (n_genes >= 30)


def _trigamma_inverse(x: np.ndarray) -> np.ndarray:
    """``y`` with ``trigamma(y) = x`` (limma's ``trigammaInverse``: Newton's method on 1/trigamma), x > 0."""
    x = np.asarray(x, dtype=float)
    if x.size == 0:
        return x
    y = 0.5 + 1.0 / x
    for _ in range(50):
        tri = polygamma(1, y)
        dif = tri * (1.0 - tri / x) / polygamma(2, y)
        y = y + dif
        if np.max(-dif / y) < 1e-8:
            break
    y = np.where(x > 1e7, 1.0 / np.sqrt(x), y)
    return np.where(x < 1e-6, 1.0 / x, y)


def squeeze_var(s2: np.ndarray, df: float, covariate: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray,
                                                                                           np.ndarray]:
    """Empirical-Bayes posterior variances of genes, for many sets of variances at once (``limma::squeezeVar``).

    Each row of ``s2`` is one set of the genes' residual variances on ``df`` degrees of freedom
    (one relabelling). Per row, ``log s2`` minus its expectation under a scaled chi-square law is
    regressed on a natural spline of ``covariate`` (the genes' mean expression: limma-trend; a
    constant without it); the residual variance beyond ``trigamma(df / 2)`` gives the prior's
    degrees of freedom ``d0 = 2 trigamma^-1(.)`` and the fit its scale ``s0^2`` per gene.

    Parameters
    ----------
    s2 : ndarray, shape (L, G)
    df : float
        Residual degrees of freedom of every variance (> 0).
    covariate : ndarray, shape (G,), optional

    Returns
    -------
    post : ndarray, shape (L, G)
        ``(d0 s0^2 + df s2) / (d0 + df)`` (``s0^2`` when ``d0`` is infinite).
    d0 : ndarray, shape (L,)
        The prior degrees of freedom (``inf``: the genes' variances are no more spread than
        sampling alone would make them).
    s0 : ndarray, shape (L, G)
        The prior variances.
    """
    s2 = np.atleast_2d(np.asarray(s2, dtype=float))
    L, G = s2.shape
    B = np.ones((G, 1)) if covariate is None else _natural_spline_basis(covariate, _trend_df(G))
    # limma: zero variances are offset away from zero, relative to the median (a median of 0 counts as 1)
    med = np.median(s2, axis=1, keepdims=True)
    med = np.where(med > 0, med, 1.0)
    x = np.maximum(s2, 1e-5 * med)
    e = np.log(x) - digamma(df / 2.0) + np.log(df / 2.0)
    Q, _ = np.linalg.qr(B)
    rank = Q.shape[1]
    fitted = (e @ Q) @ Q.T
    evar = ((e - fitted) ** 2).sum(axis=1) / max(G - rank, 1) - polygamma(1, df / 2.0)
    d0 = np.full(L, np.inf)
    pos = evar > 0
    d0[pos] = 2.0 * _trigamma_inverse(evar[pos])
    half = np.where(pos, d0 / 2.0, 1.0)
    s0 = np.exp(fitted + np.where(pos, digamma(half) - np.log(half), 0.0)[:, None])
    with np.errstate(invalid="ignore"):
        post = np.where(pos[:, None], (d0[:, None] * s0 + df * s2) / (d0[:, None] + df), s0)
    return post, d0, s0
