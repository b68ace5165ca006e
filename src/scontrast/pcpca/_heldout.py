"""Held-out comparison: a fitted PCPCA and probabilistic PCA scored on held-out target cells."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from ..core import check_random_state, check_real
from ._checks import _check_cells


def heldout_loglik(estimator, X, Y, holdout_fraction=0.2, random_state=None):
    """Held-out log-likelihood of target cells under PCPCA and under probabilistic PCA.

    ``round(holdout_fraction * n)`` target cells, drawn with ``random_state``, are held
    out. Two models are fitted on the other target cells and all background cells: a
    clone of ``estimator`` at its fitted ``gamma_prime_`` (the gamma' it used, after any
    clipping) and the same at gamma' = 0 (PPCA); both with ``on_inadmissible='error'``, so
    the comparison is made at that gamma' or not at all. Each scores the held-out cells
    (:meth:`PCPCA.score`, mean log-likelihood per cell).

    Parameters
    ----------
    estimator : fitted :class:`PCPCA`
    X : (n, D) target cells (those it was fitted on); dense (NaN = missing) or CSR
    Y : (m, D) background cells
    holdout_fraction : float in [0, 1); 0 skips the comparison
    random_state : None, int >= 0 or numpy Generator; draws the split

    Returns
    -------
    dict with ``n_heldout`` (int), ``heldout_loglik`` and ``heldout_loglik_ppca`` (floats,
    NaN when the split is too small or a fit on it fails) and ``heldout_note`` (str: why a
    value is NaN, '' when none is).

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.pcpca import PCPCA, heldout_loglik
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.normal(size=(100, 6)), rng.normal(size=(100, 6))
    >>> X[:, 0] += rng.normal(scale=2.0, size=100)            # variation only the target has
    >>> model = PCPCA(n_components=1, gamma_prime=0.5, random_state=0).fit(X, Y)
    >>> out = heldout_loglik(model, X, Y, holdout_fraction=0.2, random_state=0)
    >>> out["n_heldout"], bool(np.isfinite(out["heldout_loglik"]) and np.isfinite(out["heldout_loglik_ppca"]))
    (20, True)
    """
    check_is_fitted(estimator)
    holdout_fraction = check_real(holdout_fraction, "holdout_fraction", 0.0, 1.0, strict_max=True)
    rng = check_random_state(random_state)
    X, _ = _check_cells(X, "X")
    out = {"n_heldout": 0, "heldout_loglik": float("nan"), "heldout_loglik_ppca": float("nan"),
           "heldout_note": ""}
    if holdout_fraction == 0:
        out["heldout_note"] = "holdout_fraction=0"
        return out
    n = X.shape[0]
    n_test = int(round(holdout_fraction * n))
    out["n_heldout"] = n_test
    if n_test < 1 or n - n_test < 2:
        out["heldout_note"] = f"split of {n} target cells too small for holdout_fraction={holdout_fraction}"
        return out
    perm = rng.permutation(n)
    test, train = np.sort(perm[:n_test]), np.sort(perm[n_test:])
    Xtr, Xte = X[train], X[test]
    notes = []
    for key, gp in (("heldout_loglik", estimator.gamma_prime_), ("heldout_loglik_ppca", 0.0)):
        model = clone(estimator).set_params(gamma=None, gamma_prime=gp, on_inadmissible="error")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # convergence of the split fit is reported by the main fit
                model._check_params()
                model._fit(Xtr, Y, admissible_range=False)  # only W, sigma^2 and the means are needed
        except ValueError as exc:
            notes.append(f"{key}: {exc}.")
            continue
        out[key] = model.score(Xte)
    out["heldout_note"] = " ".join(notes)
    return out
