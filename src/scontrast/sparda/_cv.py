"""The choice of the penalty ``lam``: the lambda path and its cross-validated held-out divergence.

:class:`_LambdaChoice` is mixed into :class:`SPARDA`: ``lam`` as given, 0 with ``k``, else the
``cv_rule`` on the held-out divergence of the directions fitted along a geometric path (folds in
parallel), with a warning when the rule chooses an end of the path.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings

import numpy as np
from joblib import Parallel, delayed
from sklearn.model_selection import KFold

from ..core import ScontrastError, ScontrastWarning, dense, one_blas_thread, progress, spawn_seed
from ..design import stratified_subsample
from ._replicate import replicate_folds
from ._wasserstein import wasserstein2_1d

_log = logging.getLogger("scontrast.sparda")


class _LambdaChoice:
    """The penalty of a :class:`SPARDA` fit (``lam``, ``k``, ``cv_folds``, ``n_lambdas``,
    ``lam_min_ratio``, ``cv_rule``, ``cv_fraction``, ``cv_max_cells``)."""

    def _lambda_path(self, top: float) -> np.ndarray:
        if top <= 0:
            return np.zeros(1)
        return top * np.geomspace(1.0, self.lam_min_ratio, self.n_lambdas)

    def _choose_lambda(self, X, Y, Xd, Yd, w2, screened, rng, reps=None):
        """The penalty of a fit: ``lam``, 0 with ``k``, else the CV rule on the path.

        Returns
        -------
        lam : float
        rel0 : dict or None
            The unpenalised relaxation on ``Xd, Yd`` (reusable), when computed.
        cv : dict or None
            ``cv_results_`` (path, scores, rule's choice), when cross-validated.
        pda_divergence : float or None
        """
        if self.lam is not None:
            return float(self.lam), None, None, None
        if self.k is not None:
            return 0.0, None, None, None
        # The path's top is the larger of the best single gene's marginal W2 (where that gene's
        # J = D - lam ||beta||_1^2 is 0) and D / ||beta||_1^2 of the unpenalised direction (where
        # its J is 0): above both, neither the best gene alone nor the dense direction pays, so
        # the top is the sparse end (one or a few genes).  (The unpenalised divergence itself,
        # a bound above which no direction pays, lies far above on real data, where it wastes
        # most of the path on one-gene fits.)  It runs down to lam_min_ratio times the top.
        _, _, tig0, rel0 = self._direction(Xd, Yd, 0.0, None, rng)
        pda = tig0["divergence"]
        top = max(float(w2[screened].max()), pda / float(np.abs(tig0["beta"]).sum()) ** 2)
        lams = self._lambda_path(top)
        if lams.size == 1:
            return float(lams[0]), rel0, None, pda
        cv = self._cross_validate(X, Y, lams, rng, reps)
        return float(lams[cv["best_index"]]), rel0, cv, pda

    @one_blas_thread
    def _cv_fold(self, X, Y, train_x, test_x, train_y, test_y, lams, seed):
        rng = np.random.default_rng(seed)
        Xtr, Ytr = X[train_x], Y[train_y]
        Xd, Yd, screened, _ = self._scale_screen_centre(Xtr, Ytr)
        Xte = dense(X[test_x][:, screened])
        Yte = dense(Y[test_y][:, screened])
        if self.standardize:
            Xte, Yte = Xte / self.scale_[screened], Yte / self.scale_[screened]
        scores, nnz = np.empty(len(lams) + 1), np.empty(len(lams) + 1)
        rel0 = None
        # the path, then lam = 0 (all screened genes: the reference of cv_rule='fraction')
        for i, lam in enumerate([*lams, 0.0]):
            beta, _, _, rel0 = self._direction(Xd, Yd, lam, None, rng, rel0)
            scores[i] = wasserstein2_1d(Xte @ beta, Yte @ beta)
            nnz[i] = np.count_nonzero(beta)
        return scores, nnz

    # --------------------------------------------------------------------- fit
    def _cross_validate(self, X, Y, lams, rng, reps=None) -> dict:
        """Held-out divergence along the path and the rule's choice (the ``cv_results_`` dict).

        With ``reps`` (:class:`~._replicate.Replicates`) the folds hold out whole replicates.
        """
        n, m = X.shape[0], Y.shape[0]
        folds = self.cv_folds
        if min(n, m) < 2 * folds:
            raise ScontrastError(
                f"cv_folds: {folds} folds need at least {2 * folds} cells per group, got {n} and {m}; "
                "lower cv_folds or set lam"
            )
        fold_seeds = [spawn_seed(rng) for _ in range(1 if reps is not None else 2)]
        # the subsample draws from a child of the folds' seeds, not from rng: the rest of the fit
        # (RELAX's subsamples, the test) then draws exactly what it draws without a subsample
        sub_rng = np.random.default_rng(np.random.SeedSequence(fold_seeds).spawn(1)[0])
        X, Y, reps = self._cv_cells(X, Y, sub_rng, reps)
        n, m = X.shape[0], Y.shape[0]
        if reps is None:
            kx = KFold(folds, shuffle=True, random_state=fold_seeds[0]).split(np.arange(n))
            ky = KFold(folds, shuffle=True, random_state=fold_seeds[1]).split(np.arange(m))
            splits = [(trx, tex, try_, tey) for (trx, tex), (try_, tey) in zip(kx, ky)]
        else:
            splits = replicate_folds(reps, n, folds, fold_seeds[0])
            folds = len(splits)
        seeds = rng.integers(0, 2**63 - 1, size=folds)
        jobs = [delayed(self._cv_fold)(X, Y, *split, lams, seeds[f]) for f, split in enumerate(splits)]
        res = list(progress(Parallel(n_jobs=self.n_jobs, return_as="generator")(jobs), total=folds,
                            desc="sparda: cross-validation folds", logger="scontrast.sparda"))
        scores = np.array([r[0] for r in res])
        nnz = np.array([r[1] for r in res])
        full_mean = scores.mean(axis=0)
        full_se = scores.std(axis=0, ddof=1) / np.sqrt(folds)
        mean, se, reference = full_mean[:-1], full_se[:-1], float(full_mean[-1])
        best = int(np.argmax(mean))
        if self.cv_rule == "1se":
            # the path is decreasing, so the first index within one SE is the largest lambda
            best = int(np.flatnonzero(mean >= mean[best] - se[best])[0])
        elif self.cv_rule == "fraction":
            reached = np.flatnonzero(mean >= self.cv_fraction * reference)
            best = int(reached[0]) if reached.size else len(lams) - 1
        return {
            "lam": lams,
            "score": mean,
            "score_se": se,
            "n_selected": nnz[:, :-1].mean(axis=0),
            "best_index": best,
            "reference_score": reference,
            "reference_n_selected": float(nnz[:, -1].mean()),
            # cells of each group the folds were drawn from (cv_max_cells)
            "n_cells": [n, m],
        }

    def _cv_cells(self, X, Y, rng, reps=None):
        """The cells the lambda folds use: all of them, or at most ``cv_max_cells`` of each group.

        The held-out divergence along the path is an average over cells; a few thousand per group
        rank the lambdas nearly always as every cell does (``docs/sparda.md``), while each fold's fits cost time in
        proportion to the cells.  A group above ``cv_max_cells`` is subsampled without
        replacement, stratified by replicate when there are replicates (every replicate keeps
        cells in proportion, so the folds can still hold out whole replicates); a group at or
        below it is kept whole, without a draw from ``rng``.

        Returns
        -------
        X, Y : the cells kept of each group (same types as given)
        reps : :class:`~._replicate.Replicates` or None, restricted to the cells kept
        """
        n, m = X.shape[0], Y.shape[0]
        cap = self.cv_max_cells
        if cap is None or max(n, m) <= cap:
            return X, Y, reps
        strata_x, strata_y = (None, None) if reps is None else (reps.index[:n], reps.index[n:])
        ix = np.arange(n) if n <= cap else stratified_subsample(n, cap, strata_x, rng)
        iy = np.arange(m) if m <= cap else stratified_subsample(m, cap, strata_y, rng)
        if reps is not None:
            reps = dataclasses.replace(reps, index=reps.index[np.concatenate([ix, n + iy])])
        return X[ix], Y[iy], reps

    def _warn_path_edge(self, cv: dict) -> None:
        """``ScontrastWarning`` when the rule's choice is the dense end of the lambda path (a smaller lambda may
        do better); an INFO line when it is the sparse end (the best single genes carry the difference)."""
        lams, best = cv["lam"], cv["best_index"]
        if lams.size < 2:
            return
        size = cv["n_selected"][best]
        if best == lams.size - 1:
            warnings.warn(
                f"cv_rule={self.cv_rule!r} chose the smallest lambda of the path ({lams[best]:.3g}, "
                f"{size:.0f} genes), its dense end; lower lam_min_ratio or raise n_lambdas to see whether a "
                "smaller one is better", ScontrastWarning, stacklevel=4)
        elif best == 0:  # a finding (cv_results_ and the summary's row state it), not advice
            _log.info(f"cv_rule={self.cv_rule!r} chose the largest lambda of the path ({lams[best]:.3g}, "
                      f"{size:.0f} gene(s)), its sparse end: the best single genes carry the difference")

