"""Stability selection: SPARDA's selection frequency of every gene over complementary half-subsamples."""

from __future__ import annotations

import numpy as np
from joblib import Parallel, delayed

from ..core import ScontrastError, check_int, check_pair, check_random_state
from ._estimator import SPARDA


def _half_subsamples(n: int, n_subsamples: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Complementary pairs of disjoint half-subsamples of ``range(n)``.

    Each random permutation gives two disjoint halves of ``n // 2`` cells (Shah and
    Samworth's complementary pairs, which tighten the error bound of stability selection
    and make every cell appear equally often); an odd ``n_subsamples`` drops the last one.

    Returns
    -------
    list of ndarray of int, each of shape (n // 2,), sorted
    """
    h = n // 2
    out = []
    while len(out) < n_subsamples:
        p = rng.permutation(n)
        out += [np.sort(p[:h]), np.sort(p[h:2 * h])]
    return out[:n_subsamples]


def _fit_subsample(X, Y, params: dict, seed: int) -> np.ndarray:
    """|weight| of every gene (largest over directions) of one SPARDA fit, shape (d,)."""
    model = SPARDA(**params, random_state=np.random.default_rng(seed)).fit(X, Y)
    return np.abs(model.components_).max(axis=0)


def stability_selection(X, Y, *, lam=None, k=None, n_subsamples=50, n_jobs=1, random_state=None,
                        return_weights=False, **sparda_params):
    """Selection frequency of every gene by SPARDA over random half-subsamples of the cells.

    Stability selection (Meinshausen and Buehlmann 2010): SPARDA at a fixed ``lam`` (or
    ``k``) is fitted on ``n_subsamples`` subsamples made of half of the target cells and
    half of the background cells, drawn independently in each group as complementary
    pairs (Shah and Samworth 2013); a gene's frequency is the fraction of fits in which
    its weight is nonzero.  Keeping the genes of frequency ``>= pi`` (0.6-0.9) trades the
    single fit's support, whose last genes depend on the sample, for the genes selected
    whatever the half of the data.  The subsamples depend only on ``random_state`` and
    the group sizes, so calls with different ``lam`` share them.

    Parameters
    ----------
    X : ndarray or sparse matrix, shape (n, d)
        Target cells (n >= 4).
    Y : ndarray or sparse matrix, shape (m, d)
        Background cells (m >= 4).
    lam : float, optional
        Penalty of every fit (see :class:`SPARDA`).
    k : int, optional
        Cardinality bound of every fit instead of (or with) ``lam``; one of the two
        is required (choosing ``lam`` by cross-validation inside every subsample
        would multiply the cost by the path length and change it per subsample).
    n_subsamples : int
        Number of half-subsample fits (B).
    n_jobs : int
        Parallel workers (joblib) over the subsample fits.
    random_state : None, int or numpy Generator
        Seeds the subsamples and every fit.
    return_weights : bool
        Also return the mean absolute weight of every gene over the fits.
    **sparda_params
        Other :class:`SPARDA` parameters (``n_directions``, ``max_genes``,
        ``relax_max_cells``, ``standardize``...); not ``n_permutations``, ``n_jobs``,
        ``random_state``.

    Returns
    -------
    frequency : ndarray, shape (d,)
        Fraction of the fits in which the gene has a nonzero weight (in any direction).
    mean_weight : ndarray, shape (d,)
        Mean over the fits of the gene's absolute weight (largest over directions; 0 when
        not selected); only with ``return_weights=True``.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.sparda import stability_selection
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.normal(size=(60, 8)), rng.normal(size=(60, 8))
    >>> X[:, 0] *= 3.0                                        # gene 0 is more spread out in the target
    >>> freq = stability_selection(X, Y, k=1, n_subsamples=10, random_state=0)
    >>> freq.shape, int(np.argmax(freq)), float(freq[0])      # gene 0 chosen in every half-subsample
    ((8,), 0, 1.0)
    """
    X, Y = check_pair(X, Y, min_rows=4)
    if lam is None and k is None:
        raise ScontrastError("lam, k: stability selection needs a fixed lam or k (no cross-validation per subsample)")
    check_int(n_subsamples, "n_subsamples", 1)
    if check_int(n_jobs, "n_jobs") == 0:
        raise ScontrastError("n_jobs: expected a nonzero integer (-1 = all cores), got 0")
    bad = sorted({"n_permutations", "n_jobs", "random_state"} & set(sparda_params))
    if bad:
        raise ScontrastError(f"{bad[0]}: not a parameter of the subsample fits")
    unknown = sorted(set(sparda_params) - set(SPARDA._get_param_names()))
    if unknown:
        raise ScontrastError(f"{unknown[0]}: not a parameter of SPARDA")
    params = dict(sparda_params, lam=lam, k=k, n_permutations=0, n_jobs=1)
    # an invalid SPARDA parameter fails here, once, rather than in every worker
    SPARDA(**params)._check_params()
    rng = check_random_state(random_state)
    sx = _half_subsamples(X.shape[0], n_subsamples, rng)
    sy = _half_subsamples(Y.shape[0], n_subsamples, rng)
    seeds = rng.integers(0, 2**63 - 1, size=n_subsamples)
    W = np.asarray(Parallel(n_jobs=n_jobs)(
        delayed(_fit_subsample)(X[ix], Y[iy], params, s) for ix, iy, s in zip(sx, sy, seeds)
    ))
    freq = (W > 0).mean(axis=0)
    return (freq, W.mean(axis=0)) if return_weights else freq
