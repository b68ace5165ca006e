"""Reading an estimate against the samples and the data: per-chain support and loadings of its features."""

from __future__ import annotations

import numpy as np

from ..core import ScontrastError, check_real
from ..feature_samples import _as_binary, check_samples
from ._loss import _assign_blocks, _overlaps, _Packed


def feature_support(samples, estimate, groups=None) -> tuple[np.ndarray, np.ndarray]:
    """How closely each feature of an estimate recurs in the samples, per group of samples (e.g. chain).

    samples: B binary (N, K_b) matrices; estimate (N, K) binary; groups (B,) labels of the
    samples (None = one group). In every sample the estimate's features are matched one-to-one
    to the sample's by maximum overlap (the alignment of the FARO loss, the same for every
    ``a``); a feature's score in that sample is the Jaccard index of its cells and its match's
    (0 when it has no match). Returns ``(support (K, G) float64, labels (G,))``: the mean score
    over each group's samples, groups in sorted order. A feature near 1 in every chain is one
    all chains hold; near 1 in one chain and low in another, one chain's mode only.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.fangs import feature_support
    >>> estimate = np.array([[1, 0], [1, 1], [0, 1]], np.uint8)
    >>> support, groups = feature_support([estimate] * 4, estimate)   # every sample holds both features
    >>> support.ravel().tolist()
    [1.0, 1.0]
    """
    S = check_samples(samples)
    E = _as_binary(estimate, "estimate", n_rows=S[0].shape[0])
    g = np.zeros(len(S), dtype=np.int64) if groups is None else np.asarray(groups)
    if g.shape != (len(S),):
        raise ScontrastError(f"groups: has shape {g.shape} but there are {len(S)} samples")
    labels, index = np.unique(g, return_inverse=True)
    P = _Packed(S)
    if P.S.shape[1] == 0 or E.shape[1] == 0:
        return np.zeros((E.shape[1], labels.size)), labels
    O = _overlaps(E, P.S)
    _, assign = _assign_blocks(O, P.off)
    matched = assign >= 0
    cols = np.where(matched, P.off[:-1, None] + assign, 0)  # (B, K) column of each match in P.S
    o = O[np.arange(E.shape[1])[None, :], cols]
    union = E.sum(axis=0, dtype=np.float64)[None, :] + P.nnz_col[cols] - o
    score = np.where(matched & (union > 0), o / np.where(union > 0, union, 1.0), 0.0)
    support = np.stack([score[index == j].mean(axis=0) for j in range(labels.size)], axis=1)
    return support.reshape(E.shape[1], labels.size), labels


def _check_loadings_params(sigma_x, sigma_a) -> tuple[float, float]:
    """The checked parameters of :func:`feature_loadings`, before any data check."""
    return (check_real(sigma_x, "sigma_x", 0.0, strict_min=True),
            check_real(sigma_a, "sigma_a", 0.0, strict_min=True))


def feature_loadings(X, estimate, sigma_x: float, sigma_a: float, intercept: bool = False) -> np.ndarray:
    """Posterior mean of the loadings given an allocation: (K, D).

    For the linear-Gaussian model X = Z A + E (E ~ N(0, sigma_x^2), A ~ N(0, sigma_a^2)),
    A | Z, X has mean (Z'Z + (sigma_x / sigma_a)^2 I)^-1 Z'X per column; here Z is the
    estimate (N, K) and X (N, D) the matrix the sampler explained, so row k is the
    change feature k makes to each column (gene), in X's units. With ``intercept`` the
    model has a baseline shared by all cells (a column of ones with the same prior, as in
    ``LinearGaussianIBP(intercept=True)``): row k is then the change from the baseline.
    """
    sigma_x, sigma_a = _check_loadings_params(sigma_x, sigma_a)
    E = _as_binary(estimate, "estimate").astype(np.float64)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] != E.shape[0]:
        raise ScontrastError(f"X: expected {E.shape[0]} rows (the estimate's), got shape {X.shape}")
    k = E.shape[1]
    if k == 0:
        return np.zeros((0, X.shape[1]))
    if intercept:
        E = np.hstack([np.ones((E.shape[0], 1)), E])
    P = E.T @ E + (sigma_x / sigma_a) ** 2 * np.eye(E.shape[1])
    return np.linalg.solve(P, E.T @ X)[E.shape[1] - k:]
