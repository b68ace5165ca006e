"""The tests of ``target = background``: a re-optimised permutation test, a split test and a refit test.

``'permute'`` re-optimises a label-free-tuned divergence for every labelling of the pooled cells,
many labellings at once (:class:`_Labellings`, :func:`_label_starts`, :func:`_relabelled_statistics`),
combining the full divergence and its shape part by min-p within the set of labellings
(:func:`_set_pvalues`, :func:`_min_p_level`); ``'split'`` learns the direction on half of the cells
and permutes the others' labels; ``'refit'`` repeats the whole fit on every permutation.
:class:`_Tests` holds the estimator's side of them (mixed into :class:`SPARDA`).  The measurements
behind the constants are in ``docs/sparda.md``.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings

import numpy as np
import scipy.sparse as sp
from joblib import Parallel, delayed

from ..bounds import check_memory
from ..core import ScontrastError, ScontrastWarning, dense, one_blas_thread, progress, spawn_seed
from ..donor_test import FAMILIES, TOP_K, donor_test, family_t, replicate_features, trend_covariates
from ._replicate import _distinct_labellings, replicate_statistics
from ._tighten import _moment_starts, _tighten_rows
from ._utils import _column_moments, _pooled, _scale_columns
from ._wasserstein import _permuted_w2, _quantile_grid, marginal_wasserstein2, wasserstein2_1d

# test='auto' runs 'permute' when (n + m) * min(d, max_genes), the cost of one
# tightening step of one labelling, is at most this (999 labellings of both statistics
# then take about 3 CPU s), 'split' otherwise.  See the SPARDA docstring.
_PERMUTE_MAX_SIZE = 20_000
# Permutations when n_permutations=None, by test.
_DEFAULT_PERMUTATIONS = {"split": 9999, "permute": 999, "refit": 99, "replicate": 999}
# A replicate-level p-value whose floor is above this cannot show a difference at the usual level.
_FLOOR_WARN = 0.05
_log = logging.getLogger("scontrast.sparda")
# The 'permute' statistic: lam = _PERMUTE_LAM * lam0 (lam0: the best single gene's
# noise level, the mean of _LAM0_RELABELLINGS random relabellings), tightening capped
# at _PERMUTE_TIGHTEN_ITER steps (the measurements that chose them: docs/sparda.md).
_PERMUTE_LAM = 0.5
_LAM0_RELABELLINGS = 20
_PERMUTE_TIGHTEN_ITER = 50
# Labellings processed together (memory: a few arrays of _PERM_BATCH x cells and
# _PERM_BATCH x genes^2 floats).
_PERM_BATCH = 128
# Genes of the replicate test's location part recorded in test_ (largest observed |t| first).
_LOCATION_TOP = 10


# --------------------------------------------------------------------------- #
# The re-optimised statistic for many labellings at once (test='permute')
# --------------------------------------------------------------------------- #
class _Labellings:
    """``D`` and its gradient for many labellings of one pooled sample at once.

    Row ``p`` of ``perms`` lists the pooled cells, the first ``n`` of them the target
    group; ``D_p(beta_p) = W2^2`` between the target and background projections on
    ``beta_p`` and its gradient ``2 W_M beta_p`` (sorted matching), exactly as
    :func:`divergence_gradient` computes it for one labelling.

    With ``centre=True`` each group's projections are centred first: ``D`` is then the
    shape part of the divergence, ``W2^2 = (mean difference)^2 + W2^2(centred)``
    (the two parts of the squared W2 distance between 1-D laws), i.e.
    :func:`divergence_gradient` on the two groups centred separately.  The gradient
    keeps the same formula: the centring terms are multiplied by the sum of the
    matched residuals, which is the difference of the centred means, zero.
    """

    def __init__(self, Z: np.ndarray, n: int, centre: bool = False):
        self.Z, self.n, self.centre = Z, n, centre
        m = Z.shape[0] - n
        ia, ib, w = _quantile_grid(n, m)
        cols = np.arange(w.size)
        self.ia, self.ib, self.w = ia, ib, w
        # scatter of the matched pairs' residuals onto the sorted cells, weighted by their mass
        self.Sx = sp.csr_matrix((w, (ia, cols)), shape=(n, w.size))
        self.Sy = sp.csr_matrix((w, (ib, cols)), shape=(m, w.size))

    def __call__(self, B: np.ndarray, perms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = self.n
        proj = np.take_along_axis(B @ self.Z.T, perms, axis=1)
        px, py = proj[:, :n], proj[:, n:]
        if self.centre:
            px = px - px.mean(axis=1, keepdims=True)
            py = py - py.mean(axis=1, keepdims=True)
        ox = np.argsort(px, axis=1)
        oy = np.argsort(py, axis=1)
        R = np.take_along_axis(px, ox, axis=1)[:, self.ia] - np.take_along_axis(py, oy, axis=1)[:, self.ib]
        D = (R * R) @ self.w
        G = np.empty_like(proj)
        np.put_along_axis(G[:, :n], ox, (self.Sx @ R.T).T, axis=1)
        np.put_along_axis(G[:, n:], oy, -(self.Sy @ R.T).T, axis=1)
        cells = np.empty_like(G)
        np.put_along_axis(cells, perms, G, axis=1)
        return D, 2.0 * (cells @ self.Z)


def _label_starts(Z: np.ndarray, n: int, perms: np.ndarray) -> list[np.ndarray]:
    """Every labelling's tightening starts (:func:`_moment_starts`, as in :meth:`SPARDA._direction`),
    each (P, d): the group moments of all the labellings from two products with ``Z``."""
    N, d = Z.shape
    m = N - n
    lab = np.zeros(perms.shape, dtype=bool)
    np.put_along_axis(lab, perms[:, :n], True, axis=1)
    sx = lab @ Z
    mx, my = sx / n, (Z.sum(axis=0) - sx) / m
    dC = None
    if d > 1:
        Xg = Z[perms[:, :n]]
        Sxx = np.matmul(Xg.transpose(0, 2, 1), Xg)
        Syy = (Z.T @ Z)[None] - Sxx
        dC = (Syy - m * np.einsum("pi,pj->pij", my, my)) / (m - 1) - \
             (Sxx - n * np.einsum("pi,pj->pij", mx, mx)) / (n - 1)
    return _moment_starts(my - mx, dC)


def _relabelled_statistics(Z: np.ndarray, n: int, perms: np.ndarray, lams, max_iter: int) -> np.ndarray:
    """The two test statistics of every labelling (row of ``perms``), shape (P, 2).

    Column 0: the largest tightened ``J = D - lam ||beta||_1^2`` over the starts, at
    ``lams[0]``; column 1: the same for the shape part of the divergence (each group's
    projections centred, see :class:`_Labellings`) at ``lams[1]``.  Both start from the
    same directions of the labelling (:func:`_label_starts`).
    """
    starts = _label_starts(Z, n, perms)
    out = np.empty((perms.shape[0], 2))
    for c, (centre, lam) in enumerate(zip((False, True), lams)):
        f = _Labellings(Z, n, centre)
        out[:, c] = np.max([_tighten_rows(f, perms, B0, lam, None, max_iter) for B0 in starts], axis=0)
    return out


def _min_p_level(T: np.ndarray) -> np.ndarray:
    """Min-p combination of the two statistics of every labelling, larger = more extreme; shape (B + 1,).

    The labellings (rows of ``T``, shape (B + 1, 2): the full divergence, then its shape
    part) are ordered by their smaller within-set p-value (:func:`_set_pvalues`); ties
    (e.g. one labelling extreme in one part, another in the other part) are broken first
    in favour of the full divergence (SPARDA's own statistic keeps its resolution: a
    labelling at its top is never outranked), then by the larger p-value.  On the
    integer counts ``c = p * (B + 1)`` the key is ``(2 c_min + [c_full > c_min]) (B + 2)
    + c_max`` and the level ``1 - key / (2 (B + 1) (B + 2))``; one symmetric rule for
    every labelling, so the set stays exchangeable under the null.
    """
    B1 = T.shape[0]
    c = np.rint(_set_pvalues(T) * B1).astype(np.int64)
    cmin, cmax = c.min(axis=1), c.max(axis=1)
    key = (2 * cmin + (c[:, 0] > cmin)) * (B1 + 1) + cmax
    return 1.0 - key / (2.0 * B1 * (B1 + 1))


def _set_pvalues(T: np.ndarray) -> np.ndarray:
    """Permutation p-value of every member of a set of statistics within the set.

    ``p_b = #{c : T_c >= T_b} / len(T)`` for every column of ``T`` (shape (B + 1, q)):
    the p-value each labelling would get if it were the observed one.  Applying one
    symmetric rule to every member keeps the set exchangeable under the null, so a
    combination of these (min-p) is again an exact permutation statistic.
    """
    srt = np.sort(T, axis=0)
    return np.column_stack([T.shape[0] - np.searchsorted(srt[:, j], T[:, j], side="left")
                            for j in range(T.shape[1])]) / T.shape[0]



def _noise_levels(Z: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``lam0`` of the full divergence and of its shape part, a function of the pooled multiset only.

    The mean over ``_LAM0_RELABELLINGS`` random relabellings of the pooled cells (rows put in a
    canonical order first) of the largest marginal ``W2^2`` and of the largest centred one: the
    noise level of the best single gene.
    """
    N = Z.shape[0]
    canon = Z[np.lexsort(Z.T[::-1])]
    lam0 = np.zeros(2)
    for p in (rng.permutation(N) for _ in range(_LAM0_RELABELLINGS)):
        a, b = canon[p[:n]], canon[p[n:]]
        lam0 += [marginal_wasserstein2(a, b).max(),
                 marginal_wasserstein2(a - a.mean(axis=0), b - b.mean(axis=0)).max()]
    lam0 /= _LAM0_RELABELLINGS
    return lam0


def _labelling_statistics(Z: np.ndarray, n: int, n_permutations: int, lams, rng: np.random.Generator) -> np.ndarray:
    """Both statistics of the observed labelling (row 0) and of ``n_permutations`` random ones, shape (B + 1, 2)."""
    N = Z.shape[0]
    stats = np.empty((n_permutations + 1, 2))
    starts = range(0, n_permutations + 1, _PERM_BATCH)
    for s in progress(starts, desc=f"sparda: labellings in batches of {_PERM_BATCH}", logger="scontrast.sparda"):
        e = min(s + _PERM_BATCH, n_permutations + 1)
        perms = rng.permuted(np.broadcast_to(np.arange(N), (e - s, N)), axis=1)
        if s == 0:
            perms[0] = np.arange(N)  # the observed labelling
        stats[s:e] = _relabelled_statistics(Z, n, perms, lams, _PERMUTE_TIGHTEN_ITER)
    return stats


def _donor_part(X, Y, reps, lab: np.ndarray, exact: bool, extra: dict | None = None) -> tuple[dict, dict]:
    """The donor test (:func:`scontrast.donor_test.donor_test`) of every labelling, on every cell and gene of ``X``, ``Y``.

    Per replicate (and group, paired) the feature families of :data:`scontrast.donor_test.FAMILIES`
    (:func:`scontrast.donor_test.replicate_features`), the mean of each family's ``TOP_K`` largest
    moderated ``t^2``, combined by min-p with any ``extra`` statistics of the same labellings. Returns the
    donor test's result and, per family, the ``_LOCATION_TOP`` genes of largest observed ``|t|``
    with their t and max-T adjusted p-values (``#{labellings whose largest |t| in the family
    reaches the gene's} / L``), as ``<family>_genes``, ``<family>_t``, ``<family>_adjusted_pvalue``.
    """
    n = X.shape[0]
    is_target = np.arange(n + Y.shape[0]) < n
    feats = replicate_features([X, Y], reps.index, is_target, reps.names.size, paired=reps.paired)
    feats = {f: feats[f] for f in FAMILIES}
    # the labellings are listed without their mirrors: the floor is 1 / L
    res = donor_test(feats, lab, paired=reps.paired, exact=exact, top_k=TOP_K, extra=extra, floor=1.0 / lab.shape[0])
    genes = {}
    trend = trend_covariates(feats, paired=reps.paired)
    for f in FAMILIES:
        t, df = family_t(feats[f], lab, paired=reps.paired, covariate=trend.get(f))
        stat = np.abs(t).max(axis=1)
        top = np.argsort(-np.abs(t[0]), kind="stable")[:_LOCATION_TOP]
        genes[f"{f}_genes"] = top.astype(np.int64)
        genes[f"{f}_t"] = t[0, top]
        genes[f"{f}_df"] = float(df[0])
        genes[f"{f}_adjusted_pvalue"] = (stat[None, :] >= np.abs(t[0, top])[:, None] * (1 - 1e-12)).mean(axis=1)
    return res, genes


# --------------------------------------------------------------------------- #
# The estimator's side
# --------------------------------------------------------------------------- #
class _Tests:
    """The test of :class:`SPARDA` (``test``, ``n_permutations``): run after the fit, sets ``pvalue_``,
    ``null_divergences_`` and ``test_``."""

    def _test_method(self, n: int, m: int, d: int) -> str:
        """The test run: ``self.test``, or for ``'auto'`` the rule in the class docstring."""
        reps = getattr(self, "replicates_", None)
        if self.test != "auto":
            if reps is not None and self.test != "replicate":
                warnings.warn(
                    f"test={self.test!r} relabels cells although replicates are given ({reps.summary()}): its p-value "
                    "treats cells as independent, so differences between donors read as differences between groups; "
                    "test='replicate' (or 'auto') tests at the level of the replicate", ScontrastWarning, stacklevel=5)
            return self.test
        if reps is not None:
            return "replicate"
        return "permute" if (n + m) * min(d, self.max_genes) <= _PERMUTE_MAX_SIZE else "split"

    def _run_test(self, X, Y, lam, rng) -> None:
        """The test of ``target = background`` chosen by ``test``, after the directions are fitted."""
        self.pvalue_ = None
        self.null_divergences_ = None
        self.part_statistics_ = None
        self.test_ = None
        (n, d), m = X.shape, Y.shape[0]
        method = self._test_method(n, m, d)
        n_perm = _DEFAULT_PERMUTATIONS[method] if self.n_permutations is None else int(self.n_permutations)
        if n_perm == 0:
            return
        if method in ("replicate", "permute"):
            self._check_batch_memory(method, n, m, d)
        if method == "replicate":
            self._replicate_test(X, Y, n_perm, rng)
            return
        if method == "split":
            obs, null, info = self._split_test(X, Y, n_perm, rng)
        elif method == "permute":
            obs, null, info = self._permute_test(X, Y, n_perm, rng)
        else:
            null = self._permutation_null(X, Y, lam, n_perm, rng)
            # the observed statistic is the first direction's tightened divergence,
            # computed by the same procedure (_direction with the same lam and k) as
            # every null value
            obs, info = self.tighten_info_[0]["divergence"], {}
        at_least = int(np.sum(null >= obs))
        self.null_divergences_ = null
        self.pvalue_ = float((1 + at_least) / (1 + n_perm))
        self.test_ = {
            "method": method,
            "requested": self.test,
            "statistic": float(obs),
            "n_permutations": n_perm,
            "n_at_least": at_least,
            # no permuted statistic reached the observed one: the p-value is the floor
            # 1 / (n_permutations + 1), an upper bound of what more permutations would give
            "bound": at_least == 0,
            "pvalue": self.pvalue_,
            **info,
        }
        if at_least == 0:
            text = (f"p-value at its floor: none of the {n_perm} permutations reached the "
                    f"observed statistic, so p <= {self.pvalue_:.2g} is a bound")
            if self.pvalue_ > _FLOOR_WARN:  # advice only where more permutations can change the answer
                warnings.warn(f"{text} (raise n_permutations to resolve it)", ScontrastWarning, stacklevel=4)
            else:  # a finding (test_['bound'] records it, the summary states it), not a warning
                _log.info(text)

    def _check_batch_memory(self, method: str, n: int, m: int, d: int) -> None:
        """Refuse, naming ``max_genes``, a ``'permute'``/``'replicate'`` test whose batch of labellings
        would not fit the memory budget: each labelling holds its target cells on the test genes and
        three genes x genes moments (:func:`_label_starts`), and a few arrays over all cells."""
        s = min(d, self.max_genes)
        if method == "replicate":
            # a relabelling of replicates moves the sizes; test_max_cells shrinks every group alike
            cells = max(n, m) * self._test_share(n, m) + 2 * self.replicates_.names.size
        else:
            cells = n
        nbytes = 8.0 * _PERM_BATCH * (cells * s + 3 * s * s + 6 * (n + m))
        check_memory(nbytes, "max_genes", self.max_genes,
                     f"test {method!r}'s batch of {_PERM_BATCH} labellings ({_PERM_BATCH} x about {cells:.0f} cells x "
                     f"{s} genes, and {s} x {s} moments each)")

    def _test_genes(self, X, Y):
        """The ``'permute'`` test's pooled cells, dense and centred, on its genes (label free).

        All genes, or the ``max_genes`` of largest pooled variance when there are more; scaled by
        ``scale_`` with ``standardize``.

        Returns
        -------
        Z : ndarray, shape (n + m, s)
        genes : ndarray of int, shape (s,)
        """
        n = X.shape[0]
        Z = _pooled(X, Y)
        if self.standardize:
            Z = _scale_columns(Z, 1.0 / self.scale_)
        d = Z.shape[1]
        if d > self.max_genes:
            _, sd = _column_moments(Z[:n], Z[n:])
            genes = np.sort(np.argsort(-sd, kind="stable")[: self.max_genes])
        else:
            genes = np.arange(d)
        Z = dense(Z[:, genes])
        return Z - Z.mean(axis=0), genes

    def _permute_test(self, X, Y, n_permutations, rng):
        """Permutation test of a re-optimised, label-free-tuned divergence on all cells.

        Two statistics are computed for every labelling: ``T_1``, the largest
        ``J = D(beta) - lam ||beta||_1^2`` reached by the tightening (at most
        ``_PERMUTE_TIGHTEN_ITER`` steps) from the mean difference and the two extreme
        eigenvectors of the covariance difference of the labelled groups, on the test
        genes, at ``lam = _PERMUTE_LAM * lam0``; and ``T_2``, the same for the shape part
        of ``D`` (``W2^2`` of the projections with each group centred: ``D`` minus the
        squared mean difference) at ``_PERMUTE_LAM`` times its own ``lam0``.  The mean
        difference of 30 noise genes is the largest part of ``T_1``'s null spread, so a
        change of spread or correlation alone stands out far more in ``T_2``; ``T_1``
        keeps location changes.  They are combined by min-p: each labelling's p-value of
        ``T_1`` and of ``T_2`` within the set of all labellings (observed included), the
        statistic being ``1 - min`` of the two.  Every piece is one fixed function of
        (pooled cells, labels), computed identically for the observed labelling (the
        identity, row 0 of the batch) and for every permuted one:

        - the test genes: all genes, or the ``max_genes`` of largest pooled variance (label
          free) when there are more; ``scale_`` (``standardize``) is label-free;
        - ``lam0``: the mean over ``_LAM0_RELABELLINGS`` random relabellings of the pooled
          cells (rows put in a canonical order first, so it depends on the pooled multiset
          only) of the largest marginal ``W2^2`` (and of the largest centred one for
          ``T_2``): the noise level of the best single gene;
        - the starts and the tightening are recomputed for every labelling; the min-p rule
          is applied to every member of the set alike.

        Under ``target = background`` the observed and permuted labellings are exchangeable,
        and so are their combined statistics, so
        ``p = (1 + #{T_perm >= T_obs}) / (1 + n_permutations)`` is exact.  No lambda chosen
        on the observed labels enters (that would make the observed statistic special).

        Returns
        -------
        statistic : float
            The observed labelling's ``1 - min(p_1, p_2)``.
        null : ndarray, shape (n_permutations,)
            The permuted labellings' ``1 - min(p_1, p_2)``.
        info : dict
            Test genes, both ``lam0`` and ``lam``, the two observed statistics and their
            own permutation p-values, and the tightening cap.
        """
        n = X.shape[0]
        Z, genes = self._test_genes(X, Y)
        lam0 = _noise_levels(Z, n, rng)
        lams = _PERMUTE_LAM * lam0
        stats = _labelling_statistics(Z, n, n_permutations, lams, rng)
        level = _min_p_level(stats)
        comp = (1 + np.sum(stats[1:] >= stats[0], axis=0)) / (n_permutations + 1)
        info = {"n_test_genes": int(genes.size), "lam0": float(lam0[0]), "test_lam": float(lams[0]),
                "shape_lam0": float(lam0[1]), "shape_test_lam": float(lams[1]),
                "divergence_statistic": float(stats[0, 0]), "shape_statistic": float(stats[0, 1]),
                "divergence_pvalue": float(comp[0]), "shape_pvalue": float(comp[1]),
                "tighten_max_iter": _PERMUTE_TIGHTEN_ITER}
        return float(level[0]), level[1:], info

    def _replicate_test(self, X, Y, max_labellings, rng) -> None:
        """The replicate test: the donor test, and optionally the ``'permute'`` statistics, over relabellings of replicates.

        The donor test (:func:`scontrast.donor_test.donor_test`, on every cell and gene): per
        replicate, each gene's pseudobulk (location), the sd of its log-normalised expression
        (spread) and its dispersion beyond Poisson (:mod:`scontrast.donor_spread`); per family,
        limma-trend's moderated t of every gene under every labelling and the mean of its ``TOP_K``
        largest ``t^2``; the families combined by min-p within the set of labellings. With
        ``test_distribution``, the ``'permute'`` test's re-optimised divergence and its shape part
        (on the test cells and genes; the test genes and both ``lam0`` label free as in
        ``'permute'``) join the min-p as two more parts of the same labellings. Every part is a
        fixed function of (pooled cells, labels), so under exchangeable replicates
        ``p = #{combined p <= observed} / L`` over the ``L`` labellings (observed included) is
        exact when they are all listed, and valid when sampled.
        """
        X_all, Y_all, reps_all = X, Y, self.replicates_
        info, extra = {}, None
        if self.test_distribution:
            X, Y, reps = self._test_cells(X, Y, reps_all, rng)
            n = X.shape[0]
            Z, genes = self._test_genes(X, Y)
            lam0 = _noise_levels(Z, Z.shape[0] // 2, rng)
            lams = _PERMUTE_LAM * lam0

            def statistics(Z, size, perms):
                return _relabelled_statistics(Z, size, perms, lams, _PERMUTE_TIGHTEN_ITER)

            lab, exact, L = _distinct_labellings(reps, max_labellings, rng)
            dist = replicate_statistics(statistics, Z, n, reps, lab, _PERM_BATCH)
            distribution_level = _min_p_level(dist)
            extra = {"divergence": dist[:, 0], "shape": dist[:, 1]}
            info = {"distribution_pvalue": float((1 + np.sum(distribution_level[1:] >= distribution_level[0])) / L),
                    "n_cells": np.array([n, Z.shape[0] - n]),
                    "subsampled": bool(Z.shape[0] < reps_all.index.size),
                    "n_test_genes": int(genes.size), "lam0": float(lam0[0]), "test_lam": float(lams[0]),
                    "shape_lam0": float(lam0[1]), "shape_test_lam": float(lams[1]),
                    "divergence_statistic": float(dist[0, 0]), "shape_statistic": float(dist[0, 1]),
                    "tighten_max_iter": _PERMUTE_TIGHTEN_ITER}
        else:
            reps = reps_all
            lab, exact, L = _distinct_labellings(reps, max_labellings, rng)
            info = {"n_cells": np.array([X.shape[0], Y.shape[0]]), "subsampled": False}
        res, genes = _donor_part(X_all, Y_all, reps_all, lab, exact, extra)
        level = 1.0 - res["level"]
        at_least = int(np.sum(level[1:] >= level[0]))
        self.null_divergences_ = level[1:]
        self.part_statistics_ = res["statistics"]
        self.pvalue_ = float((1 + at_least) / L)
        floor = 1.0 / L
        parts = res["parts"]
        if self.test_distribution:
            info["divergence_pvalue"], info["shape_pvalue"] = parts["divergence"], parts["shape"]
        self.test_ = {
            "method": "replicate", "requested": self.test, "unit": "replicate", "design": reps.summary(),
            "paired": reps.paired, "n_replicates": int(reps.names.size), "statistic": float(level[0]),
            "test_max_cells": -1 if self.test_max_cells is None else int(self.test_max_cells),
            "n_permutations": L - 1, "n_labellings": L, "exact": bool(exact), "floor": floor,
            "n_at_least": at_least, "bound": bool(at_least == 0 and not exact), "pvalue": self.pvalue_,
            "parts": parts, "combined": list(res["combined"]), "families": list(FAMILIES), "top_k": int(TOP_K),
            "distribution": bool(self.test_distribution), **info, **genes,
        }
        kind = "all" if exact else "a random sample of"
        if floor > _FLOOR_WARN:
            warnings.warn(
                f"with {reps.summary()} there are only {L} distinct relabellings of the replicates, so the smallest "
                f"possible p-value is {floor:.3g}: no difference can be shown at {_FLOOR_WARN} with this many "
                "replicates (more donors or samples are needed)", ScontrastWarning, stacklevel=4)
        elif at_least == 0:  # a finding (test_ records it, the summary states it), not a warning
            _log.info(f"p-value at its floor: the observed labelling is the most extreme of {kind} {L} relabellings "
                      f"of the replicates ({reps.summary()}), p = {self.pvalue_:.2g}" + ("" if exact else " (a bound)"))

    def _test_share(self, n: int, m: int) -> float:
        """The share of every (replicate, group) stratum the replicate test keeps (1: every cell)."""
        cap = self.test_max_cells
        return 1.0 if cap is None or n + m <= 2 * cap else 2 * cap / (n + m)

    def _test_cells(self, X, Y, reps, rng):
        """The cells the replicate test relabels: all, or the same share of every stratum.

        The strata are the (replicate, group) pairs; each keeps ``_test_share`` of its cells,
        rounded (at least one), drawn from a child of ``rng`` so that a test without subsampling
        draws exactly as before. Under the null a relabelling exchanges whole strata, and their
        quotas with them (a quota depends on its stratum's size only, not on a rounding shared
        with the others): the subsample is as exchangeable as the cells, and the test stays
        exact.

        Returns
        -------
        X, Y : the target and background cells kept (same types as given)
        reps : :class:`~._replicate.Replicates` restricted to them
        """
        n, m = X.shape[0], Y.shape[0]
        share = self._test_share(n, m)
        if share >= 1.0:
            return X, Y, reps
        sub_rng = np.random.default_rng(spawn_seed(rng))
        strata = np.unique(2 * reps.index + (np.arange(n + m) < n), return_inverse=True)[1]
        take = np.maximum(np.rint(np.bincount(strata) * share).astype(np.int64), 1)
        keep = np.sort(np.concatenate([sub_rng.choice(np.flatnonzero(strata == k), t, replace=False)
                                       for k, t in enumerate(take)]))
        ix, iy = keep[keep < n], keep[keep >= n] - n
        return X[ix], Y[iy], dataclasses.replace(reps, index=reps.index[keep])

    def _split_test(self, X, Y, n_permutations, rng):
        """Sample-splitting test: direction learnt on half of the cells, tested on the others.

        Each group is split at random into a learning half (``n // 2`` and ``m // 2``
        cells) and a test half.  The whole procedure (screening, the lambda rule, RELAX,
        tightening; ``scale_`` is label-free) is run on the learning half; the test cells
        are projected on its first direction and the statistic is ``W2^2`` between the
        projected test target and background cells, compared with ``n_permutations``
        permutations of the test cells' labels.  The direction does not depend on the
        test cells, so under ``target = background`` their labels are exchangeable given
        it and the p-value is exact (uniform up to the permutation grid) whatever the
        selection; each permutation costs a sort of ``n + m`` numbers, not a fit.

        Returns
        -------
        statistic : float
        null : ndarray, shape (n_permutations,)
        info : dict
            Cells of each half and the learning half's lambda and genes (and the cells its lambda
            folds were drawn from, when cross-validated).
        """
        n, m = X.shape[0], Y.shape[0]
        px, py = rng.permutation(n), rng.permutation(m)
        lx, tx = np.sort(px[: n // 2]), np.sort(px[n // 2:])
        ly, ty = np.sort(py[: m // 2]), np.sort(py[m // 2:])
        XL, YL = X[lx], Y[ly]
        if self.lam is None and self.k is None and min(lx.size, ly.size) < 2 * self.cv_folds:
            raise ScontrastError(
                f"test: the split test chooses lambda by {self.cv_folds}-fold CV on half of each group, which needs "
                f"at least {4 * self.cv_folds} cells per group, got {n} and {m}; set lam or k, or test='refit'")
        Xd, Yd, screened, w2 = self._scale_screen_centre(XL, YL)
        lam, rel0, cv, _ = self._choose_lambda(XL, YL, Xd, Yd, w2, screened, rng)
        beta = self._direction(Xd, Yd, lam, self.k, rng, rel0)[0]
        w = beta / self.scale_[screened] if self.standardize else beta
        keep = w != 0
        cols = screened[keep]
        a = np.asarray(dense(X[tx][:, cols]) @ w[keep]).ravel()
        b = np.asarray(dense(Y[ty][:, cols]) @ w[keep]).ravel()
        null = _permuted_w2(np.concatenate([a, b]), a.size, n_permutations, rng)
        info = {"n_learn": [int(lx.size), int(ly.size)], "n_test": [int(tx.size), int(ty.size)],
                "learn_lam": float(lam), "learn_n_genes": int(cols.size)}
        if cv is not None:  # the learning half's lambda folds (cv_max_cells)
            info["learn_cv_n_cells"] = [int(c) for c in cv["n_cells"]]
        return float(wasserstein2_1d(a, b)), null, info

    def _permutation_null(self, X, Y, lam, n_permutations, rng) -> np.ndarray:
        """The ``'refit'`` test's null: the first direction's divergence refitted on every permutation."""
        n = X.shape[0]
        Z = _pooled(X, Y)
        seeds = rng.integers(0, 2**63 - 1, size=n_permutations)

        @one_blas_thread
        def one(seed):
            r = np.random.default_rng(seed)
            perm = r.permutation(Z.shape[0])
            return self._fit_first(Z[perm[:n]], Z[perm[n:]], lam, self.k, r)

        fits = Parallel(n_jobs=self.n_jobs, return_as="generator")(delayed(one)(s) for s in seeds)
        return np.asarray(list(progress(fits, total=len(seeds), desc="sparda: permutation refits",
                                        logger="scontrast.sparda")))

