"""Automatic alpha (Algorithm 2 of Abid et al. 2018): the grid, subspace affinities, the choice.

The subspaces of a grid of alphas (0 plus ``n_alphas`` values log-spaced in
[0.1, 10**max_log_alpha]) are compared by the product of the cosines of their principal
angles, the resulting affinity matrix is split by spectral clustering, the cluster holding
alpha = 0 is dropped and each other cluster contributes its medoid (the alpha of largest
summed affinity to its cluster).
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from sklearn.cluster import SpectralClustering

from ..core import ScontrastError, ScontrastWarning, _controller, check_random_state, spawn_seed


def alpha_grid(n_alphas: int = 40, max_log_alpha: float = 3) -> np.ndarray:
    """Candidate contrast strengths: 0, then ``n_alphas`` values log-spaced in [0.1, 10**max_log_alpha].

    Returns
    -------
    alphas : ndarray, shape (n_alphas + 1,)

    Examples
    --------
    >>> from scontrast.cpca import alpha_grid
    >>> alpha_grid(n_alphas=4, max_log_alpha=1).round(3).tolist()
    [0.0, 0.1, 0.464, 2.154, 10.0]
    """
    return np.concatenate(([0.0], np.logspace(-1, max_log_alpha, n_alphas)))


def _resolve_alpha(alpha):
    """The ``alpha`` setting as ``(mode, values)``: ('auto', None), ('float', [a]) or ('list', [a, ...]).

    ``alpha`` is 'auto', a float >= 0 or a non-empty list of floats >= 0; anything else raises.
    """
    what = "'auto', a number >= 0 or a non-empty list of them"
    if isinstance(alpha, str):
        if alpha != "auto":
            raise ScontrastError(f"alpha: expected {what}, got {alpha!r}")
        return "auto", None
    if isinstance(alpha, numbers.Real) and not isinstance(alpha, bool):
        values = np.array([float(alpha)])
        mode = "float"
    else:
        try:
            values = np.asarray(alpha, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            raise ScontrastError(f"alpha: expected {what}, got {alpha!r}") from None
        if values.size == 0:
            raise ScontrastError(f"alpha: expected {what}, got an empty list")
        mode = "list"
    if not np.isfinite(values).all() or (values < 0).any():
        raise ScontrastError(f"alpha: expected {what} (finite), got {alpha!r}")
    return mode, values


def subspace_affinity(U: np.ndarray, gram: np.ndarray | None = None) -> np.ndarray:
    """Product of the cosines of the principal angles between the subspaces of each pair.

    Parameters
    ----------
    U : ndarray, shape (a, d, k)
        Orthonormal bases (the loadings) of the a subspaces.
    gram : ndarray, shape (a*k, a*k), optional
        Inner products of the columns under another metric, e.g. ``U' C_X U`` to
        compare the spans of the projected target data ``X_c U`` (the measure of
        the ``contrastive`` package) instead of the loadings.

    Returns
    -------
    affinity : ndarray, shape (a, a), symmetric, ones on the diagonal where defined.

    Notes
    -----
    The product of the cosines equals ``|det(Qa' Qb)|`` for orthonormal bases,
    i.e. ``|det G_ab| / sqrt(det G_aa det G_bb)`` for any bases with Gram blocks G.
    Pairs involving a subspace along which the metric vanishes get 0.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.cpca import subspace_affinity
    >>> I = np.eye(3)
    >>> U = np.stack([I[:, :2], I[:, [0, 2]], I[:, :2]])   # three 2-D subspaces of R^3
    >>> subspace_affinity(U).round(6).tolist()              # the first and the third are the same
    [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 1.0]]
    """
    n_alpha, _, k = U.shape
    if gram is None:
        flat = U.transpose(1, 0, 2).reshape(U.shape[1], -1)
        gram = flat.T @ flat
    blocks = gram.reshape(n_alpha, k, n_alpha, k).transpose(0, 2, 1, 3)
    sign, logdet = np.linalg.slogdet(blocks)
    own = np.diagonal(logdet).copy()
    own_ok = np.diagonal(sign) > 0
    with np.errstate(invalid="ignore", over="ignore"):
        aff = np.exp(logdet - 0.5 * (own[:, None] + own[None, :]))
    aff[(sign == 0) | ~own_ok[:, None] | ~own_ok[None, :]] = 0.0
    aff = np.nan_to_num(np.minimum(aff, 1.0))
    aff = (aff + aff.T) / 2
    np.fill_diagonal(aff, np.where(own_ok, 1.0, 0.0))
    return aff


def select_alphas(affinity: np.ndarray, n_clusters: int, random_state=None):
    """Spectral clustering of the alpha grid; one medoid per cluster not holding alpha = 0 (index 0).

    Parameters
    ----------
    affinity : ndarray (a, a), from :func:`subspace_affinity`
    n_clusters : int
    random_state : None, int >= 0 or numpy Generator
        The k-means step of the clustering gets an int seed drawn from it.

    Returns
    -------
    chosen : ndarray of grid indices (ascending); labels : (a,) cluster labels

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.cpca import select_alphas
    >>> affinity = np.array([[1.0, 0.9, 0.1, 0.1], [0.9, 1.0, 0.1, 0.1],
    ...                      [0.1, 0.1, 1.0, 0.9], [0.1, 0.1, 0.9, 1.0]])   # two groups of similar subspaces
    >>> chosen, labels = select_alphas(affinity, 2, random_state=0)
    >>> len(set(labels[:2].tolist())), len(set(labels[2:].tolist())), bool(labels[0] != labels[2])
    (1, 1, True)
    """
    seed = spawn_seed(check_random_state(random_state))
    spectral = SpectralClustering(n_clusters=n_clusters, affinity="precomputed", random_state=seed)
    with warnings.catch_warnings(), _controller().limit(limits=1, user_api="openmp"):
        # a disconnected affinity graph is legitimate here (far-apart subspaces); threads only
        # cost time on a grid of ~41 points
        warnings.filterwarnings("ignore", message="Graph is not fully connected")
        labels = spectral.fit(affinity).labels_
    chosen = []
    for c in range(n_clusters):
        members = np.flatnonzero(labels == c)
        if members.size == 0 or 0 in members:
            continue
        sums = affinity[np.ix_(members, members)].sum(axis=0)
        chosen.append(members[np.argmax(sums)])
    return np.sort(np.asarray(chosen, dtype=int)), labels


def _merge_alike(chosen: np.ndarray, affinity: np.ndarray, grid: np.ndarray, threshold: float) -> np.ndarray:
    """The chosen grid indices (ascending) without those whose subspace repeats a smaller chosen alpha's.

    An alpha whose affinity with an already kept one is ``>= threshold`` gives the same
    answer: it is dropped with a ``ScontrastWarning`` (on data where every alpha's subspace
    is alike, the clustering still returns its requested number of clusters).
    """
    kept: list[int] = []
    for idx in np.sort(chosen):
        twin = next((k for k in kept if affinity[idx, k] >= threshold), None)
        if twin is None:
            kept.append(int(idx))
            continue
        warnings.warn(
            f"alpha {grid[idx]:.4g} gives the same subspace as alpha {grid[twin]:.4g} (affinity "
            f"{affinity[idx, twin]:.4f} >= merge_affinity {threshold:g}): reported once, as {grid[twin]:.4g}",
            ScontrastWarning, stacklevel=3)
    for idx in kept:
        if affinity[idx, 0] >= threshold:
            warnings.warn(
                f"alpha {grid[idx]:.4g} gives the same subspace as plain PCA of the target (alpha = 0; affinity "
                f"{affinity[idx, 0]:.4f}): the background changes nothing here", ScontrastWarning, stacklevel=3)
    return np.asarray(kept, dtype=int)
