"""Maximum-overlap matching of feature allocations: what FANGS and the latent-feature ensemble share.

Two binary allocations (N items x K features, columns unordered) are aligned by the one-to-one
matching of their features that maximises the total overlap of their cells (the alignment of the
FARO loss, :mod:`scontrast.fangs`). :func:`feature_support` scores how closely an estimate's
features recur in a set of samples; ``scontrast.fangs`` searches with the packed samples and
block solvers here, and ``scontrast.latent_features`` measures its ensemble's stability with
:func:`feature_support`. Neither of those packages imports the other.
"""

from __future__ import annotations

import numpy as np

from ._assignment import _solve_blocks
from .core import ScontrastError
from .feature_samples import _as_binary, check_samples

__all__ = ["feature_support"]

# Column chunk of the overlap products: bounds the float32 temporaries to
# N x _CHUNK values whatever the number of samples.
_CHUNK = 4096


class _Packed:
    """All samples side by side: ``S`` (N, L) with L = sum K_b, sample b in
    columns ``off[b]:off[b+1]``; ``nnz[b]`` = number of ones of sample b;
    ``rowany`` (N, B) = does row i of sample b hold a one."""

    def __init__(self, samples: list[np.ndarray]):
        self.n = samples[0].shape[0]
        self.B = len(samples)
        self.k = np.array([s.shape[1] for s in samples], dtype=np.intp)
        self.off = np.concatenate([[0], np.cumsum(self.k)]).astype(np.intp)
        self.S = (np.ascontiguousarray(np.concatenate(samples, axis=1)) if self.off[-1]
                  else np.zeros((self.n, 0), np.uint8))
        self.nnz = np.array([int(s.sum()) for s in samples], dtype=np.float64)
        self.nnz_col = self.S.sum(axis=0, dtype=np.float64)
        self.rowany = np.stack([s.any(axis=1) for s in samples], axis=1)
        self.kmax = int(self.k.max())

    def sample(self, b: int) -> np.ndarray:
        return self.S[:, self.off[b]:self.off[b + 1]]


def _overlaps(E: np.ndarray, S: np.ndarray) -> np.ndarray:
    """``E.T @ S`` for uint8 matrices, exact, as float64.

    E (N, K), S (N, L) -> (K, L). float32 products are exact for counts
    below 2**24 items; chunks bound the temporaries.
    """
    n = E.shape[0]
    if n >= 2**24:
        raise ScontrastError(f"samples: at most 2**24 items (rows) are supported, got {n}")
    out = np.empty((E.shape[1], S.shape[1]), dtype=np.float64)
    Ef = E.astype(np.float32)
    for start in range(0, S.shape[1], _CHUNK):
        stop = min(start + _CHUNK, S.shape[1])
        out[:, start:stop] = Ef.T @ S[:, start:stop].astype(np.float32)
    return out


def _assign_blocks(O: np.ndarray, off: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Maximum-overlap assignment of the rows of O (K, L) to each sample's columns ``off[b]:off[b+1]``.

    Returns ``(v (B,), assign (B, K))`` as ``_match``.
    """
    v = np.empty(off.size - 1)
    assign = np.empty((off.size - 1, O.shape[0]), dtype=np.int64)
    _solve_blocks(O, off, v, assign)
    return v, assign


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
