"""The SPARDA estimator: screening, the penalty, RELAX then tightening from several starts, deflation.

The fit follows the paper's "tighten after relax" scheme on the screened, centred genes; the
penalty's choice is :class:`._cv._LambdaChoice`, the test of ``target = background``
:class:`._test._Tests`, both mixed into :class:`SPARDA`.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ..bounds import MAXIMUM, check_count
from ..core import (
    ScontrastError,
    ScontrastWarning,
    blas_threads,
    check_int,
    check_matrix,
    check_option,
    check_pair,
    check_random_state,
    check_real,
    dense,
)
from ._cv import _LambdaChoice
from ._relax import relax
from ._replicate import Replicates
from ._test import _Tests
from ._tighten import _moment_starts, tighten
from ._utils import _column_moments, _scale_columns, orient_to_target
from ._wasserstein import marginal_wasserstein2, wasserstein2_1d


class SPARDA(_LambdaChoice, _Tests, BaseEstimator):
    """Sparse principal differences analysis (PDA when ``lam=0``).

    Parameters
    ----------
    lam : float, optional
        L1 penalty: ``lam ||B||_1`` in the relaxation and ``lam ||beta||_1^2`` (the same
        at ``B = beta beta'``) in the tightening, so the answer maximises
        ``D(beta) - lam ||beta||_1^2``; roughly, a gene joins when it adds more than
        ``lam`` to the divergence.  ``None`` with ``k=None``: chosen by the
        cross-validation rule ``cv_rule`` over ``n_lambdas`` values from the best
        gene's marginal W2 or ``D / ||beta||_1^2`` of the unpenalised direction,
        whichever is larger (the sparse end: one or a few genes) down to
        ``lam_min_ratio`` times it.  ``0``: PDA.
    k : int, optional
        Cardinality bound enforced in the tightening (truncation to the ``k``
        largest weights).  With ``lam=None`` the relaxation is run with ``lam=0``.
    n_directions : int
        Maximum number of directions, found in succession by deflating the data along
        the previous ones.  With ``lam > 0`` the search stops at the first later
        direction whose penalised objective ``D - lam ||beta||_1^2`` is not positive:
        the maximiser over the unit ball is then ``beta = 0`` (no direction gains more
        divergence than its genes cost), and the remaining rows of ``components_``
        are zero.  The first direction is always returned.
    n_permutations : int, optional
        Permutations of the group labels for the p-value of ``target = background``
        (0: no test; ``None``: 999 for ``'permute'``, 9999 for ``'split'``, 99 for
        ``'refit'``).  ``p = (1 + b) / (1 + n_permutations)`` with ``b`` the permuted
        statistics at least as large as the observed one; when ``b = 0`` the p-value
        is its floor, an upper bound (a ``ScontrastWarning`` says so; ``test_``
        records ``b``).
    test : {'auto', 'permute', 'split', 'refit', 'replicate'}, default 'auto'
        ``'replicate'`` (and ``'auto'`` when ``fit`` is given each cell's replicate): the
        ``'permute'`` statistics computed for relabellings of whole *replicates* (donors,
        samples) rather than of cells: unpaired, which replicates are target; paired, swaps
        of the two labels within replicates; all of them when at most ``n_permutations``
        (exact; the floor ``1 / #labellings``, counting a labelling and its mirror once, is
        warned when above 0.05), a random sample otherwise.  Cells of one donor are not
        independent, so only this test holds its level when donors differ; the lambda
        folds then hold out whole replicates too.
        ``'permute'``: permutation test on all cells of a statistic re-optimised for every
        labelling with label-free tuning: the largest penalised divergence
        ``D(beta) - lam ||beta||_1^2`` that the tightening (50 steps at most) reaches from the
        group mean difference and the extreme eigenvectors of the group covariance difference,
        at ``lam`` = 0.5 x the noise level of the best single gene, and the same for the shape
        part of ``D`` (each group's projections centred), combined by min-p within the set of
        labellings (``test_`` records both parts' own p-values); exact, the labellings are
        optimised together (vectorised).
        ``'split'``: the whole procedure (screening, lambda rule, RELAX, tightening) runs on a
        random half of each group; the other cells are projected on its first direction and
        their ``W2^2`` is compared with label permutations of those cells only (exact and cheap
        whatever the size, but only half of the cells learn).
        ``'refit'``: the fitted divergence itself, the whole fit at the chosen ``lam``/``k``
        repeated on every permutation (exact only for a fixed ``lam`` or ``k``: with the CV
        rule, the observed data's lambda is reused in the permutations).
        ``'auto'``: ``'replicate'`` when replicates are given, else ``'permute'`` when
        ``(n + m) * min(d, max_genes) <= 20000``, else ``'split'``.  The reported direction is
        always the fit on all cells; the test only supplies the p-value.  Power, calibration
        and cost of each: ``docs/sparda.md``.
    cv_folds : int
        Folds (within each group) for choosing ``lam``: the divergence of the held-out
        cells along the direction fitted on the rest, averaged over folds.
    n_lambdas : int, default 12
        Length of the automatic lambda path (a step of 0.7 between lambdas with the
        default ``lam_min_ratio``: the 'fraction' rule needs a fine path).
    lam_min_ratio : float, default 0.02
        Smallest lambda of the path relative to the largest.
    cv_rule : {'fraction', '1se', 'max'}, default 'fraction'
        ``'fraction'``: the largest lambda (fewest genes) whose mean held-out divergence
        reaches ``cv_fraction`` of that of the unpenalised fit on all screened genes
        (also cross-validated), the analogue of an explained-variance threshold: on
        real contrasts the held-out divergence keeps growing as genes are added (many
        genes differ a little), so ``'max'`` and ``'1se'`` choose (nearly) every gene.
        ``'max'``: the lambda of the largest mean held-out divergence (the paper);
        ``'1se'``: the largest lambda whose mean is within one standard error of
        that maximum.  A choice at either end of the path raises a ``ScontrastWarning``.
    cv_fraction : float, default 0.6
        Share of the unpenalised held-out divergence the ``'fraction'`` rule requires
        (0.6: 15-45 genes on distinct and close cell types of real data, all of them
        among the 100 top Wilcoxon genes; benchmarks/bench_sparda_real.py).
    cv_max_cells : int or None, default 5000
        Cells per group the lambda cross-validation draws its folds from: a group with more is
        subsampled at random to this many (stratified by replicate when replicates are given;
        ``cv_results_['n_cells']`` records the sizes used).  Each fold's fits cost time in
        proportion to its cells, and the held-out divergence of 2000-5000 cells per group chose
        the lambda of all 25,000 in 8 of 9 runs on 50,000 simulated cells, the ninth one step
        denser (``docs/sparda.md``); the path's top, the fit and the test always use every cell.  Groups at or below it (every
        contrast of a few thousand cells) are not subsampled.  ``None``: every cell.
    test_max_cells : int or None, default 5000
        With ``test_distribution``, the ``'replicate'`` test's distributional parts relabel at
        most about twice this many cells (both groups together; the donor test reads every
        cell): with more, every (replicate, group) stratum keeps the same share of its cells,
        drawn at random (``test_['n_cells']`` records the cells used). Each relabelling's
        re-optimised statistic costs time in proportion to the cells, and with donors as the
        unit the cells of one donor add little beyond a few hundred; one share for every
        stratum keeps the test exact (a relabelling swaps whole strata, and their shares with
        them). The fit always uses every cell. ``None``: every cell.
    test_distribution : bool, default False
        The ``'replicate'`` test is the donor test (:func:`scontrast.donor_test.donor_test`): per
        replicate, each gene's pseudobulk (``log1p`` of its cells' mean ``expm1`` expression) and
        the sd of its cells' log-normalised expression; per family, an empirical-Bayes moderated t
        per gene (limma-trend's variance shrinkage towards a trend on the genes' mean location; paired
        designs: the within-replicate differences) and the mean of its 10 largest ``t^2``; the
        families combined by min-p within the set of relabellings, so the test is exact.
        ``test_['parts']`` holds each family's own p-value, ``test_['location_genes']`` and
        ``test_['spread_genes']`` the genes of largest ``|t|``. ``True`` adds SPARDA's re-optimised
        divergence and its shape part, recomputed for every relabelling, as two more parts of the
        min-p (``test_['distribution_pvalue']`` their own combination): about 80 s at 6 vs 6
        donors and 5,000 cells, where the donor test alone takes about 2 s (the power with and
        without them: ``docs/sparda.md``).
    max_genes : int, default 100
        Genes kept by marginal-W2 screening before RELAX when there are more
        (the relaxation needs a d x d eigendecomposition per step).
    relax_max_cells : int, default 100
        Cells per group used by RELAX: both groups are subsampled at random to
        ``min(n, m, relax_max_cells)`` cells (each step solves an exact transport
        problem between them, O(cells^3); the relaxation only provides starts of the
        tightening, and 100 cells give the genes of 200 on real contrasts).  The tightening, the reported divergence
        and the permutation statistic always use every cell.
    relax_max_iter, relax_patience, relax_step : int, int, float, default 20, 15, 0.5
        RELAX iteration cap, patience and initial step (the multi-start tightening
        that follows makes the answer insensitive to the cap above about 20).
    tighten_max_iter : int
        Cap on tightening gradient evaluations.
    standardize : bool
        Scale every gene to unit pooled standard deviation first (searches for
        differences in shape and dependence rather than in scale); weights then
        refer to standardised genes.
    n_jobs : int
        Parallel workers (joblib) for permutations and cross-validation.
    random_state : None, int or numpy Generator
        Seeds subsampling, folds and permutations.

    Notes
    -----
    Each direction is tightened from several starts and the best objective wins:
    the paper's RELAX direction (with its support size as cardinality bound), the
    unpenalised relaxation's direction, the difference of the group means and the
    extreme eigenvectors of the difference of the group covariances.  The relaxation
    is loose when the difference is a covariance change (its optimum is then nearly
    diagonal), and the extra starts keep the answer from collapsing onto noise genes.
    Genes are screened by marginal W2 when there are more than ``max_genes``:
    differences carried only by genes whose own distribution does not change
    (correlation changes) are then invisible unless those genes pass the screen.

    Attributes
    ----------
    beta_ : ndarray, shape (d,) or (n_directions, d)
        Unit direction(s); zero outside the selected genes.  Oriented so that the
        target cells (``X``) project higher on average: a positive weight contributes
        to the target side (see :func:`orient_to_target`).
    components_ : ndarray, shape (n_directions, d)
        Same as ``beta_``, always two-dimensional; rows after ``n_directions_`` are zero.
    n_directions_ : int
        Directions found (at most ``n_directions``; fewer when the deflation stopped
        because no further direction had a positive penalised objective).
    divergence_ : float
        ``W2^2`` between the projected groups along the first direction (all cells).
    divergences_ : ndarray, shape (n_directions,)
        Divergence along each direction (0 for the directions not found).
    selected_ : ndarray of int
        Genes with a nonzero weight in any direction.
    pvalue_ : float or None
        Permutation p-value ``(1 + #{T_perm >= T_obs}) / (1 + P)``.
    test_ : dict or None
        The test's resolution: ``method``, ``statistic``, ``n_permutations``,
        ``n_at_least`` (permuted statistics >= the observed), ``bound`` (True when none
        was: p is its floor, an upper bound), ``pvalue``, ``requested`` (the ``test``
        parameter, e.g. ``'auto'``); for ``'split'`` also the cells of the learning and
        test halves, and the learning half's lambda and number of genes; for
        ``'permute'`` the number of test genes, ``lam0``, the test's lambda, the same two
        for the shape part (``shape_lam0``, ``shape_test_lam``), the observed value and own
        permutation p-value of each part (``divergence_statistic``, ``shape_statistic``,
        ``divergence_pvalue``, ``shape_pvalue``; ``statistic`` is then the observed
        labelling's min-p level) and the tightening cap.
    null_divergences_ : ndarray, shape (n_permutations,) or None
        The permuted statistics (for ``'permute'``: their min-p levels, see ``test_``).
    lam_ : float
        Penalty used (chosen by CV when ``lam=None`` and ``k=None``).
    k_ : int
        Number of nonzero weights of the first direction.
    cv_results_ : dict or None
        ``lam`` (path), ``score`` (mean held-out divergence), ``score_se``,
        ``n_selected`` (mean nonzeros over folds), ``best_index`` (the rule's choice),
        ``reference_score`` / ``reference_n_selected`` (the unpenalised fit's), ``n_cells``
        (target and background cells the folds were drawn from, see ``cv_max_cells``).
    screened_ : ndarray of int
        Genes that entered RELAX (all genes when ``d <= max_genes``).
    marginal_w2_ : ndarray, shape (d,)
        Marginal squared W2 of every gene (the screening score).
    relax_info_, tighten_info_ : list of dict
        Per direction searched (``n_directions_`` of them, plus the rejected one
        that stopped the deflation, if any): iterations, objectives, relaxation tightness
        (``eig_fraction``: top eigenvalue over the sum of absolute eigenvalues of the
        relaxed ``B``, in (0, 1]; 1 = rank one, tight), the winning
        tightening start.
    pda_divergence_ : float or None
        Divergence of the unpenalised fit that scales the lambda path (CV only).
    n_relax_cells_ : int
        Cells per group used by RELAX.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X_target, X_background = rng.normal(size=(60, 10)), rng.normal(size=(60, 10))
    >>> X_target[:, :2] *= 3.0                            # genes 0 and 1 spread more in the target
    >>> from scontrast.sparda import SPARDA
    >>> model = SPARDA(n_permutations=19, random_state=0).fit(X_target, X_background)
    >>> set(model.selected_.tolist()) <= {0, 1}            # a change of spread, not of mean
    True
    >>> bool(model.pvalue_ <= 0.05)
    True
    >>> model.components_.shape
    (1, 10)
    """

    def __init__(
        self,
        lam=None,
        k=None,
        n_directions=1,
        n_permutations=None,
        test="auto",
        cv_folds=3,
        n_lambdas=12,
        lam_min_ratio=0.02,
        cv_rule="fraction",
        cv_fraction=0.6,
        cv_max_cells=5000,
        test_max_cells=5000,
        test_distribution=False,
        max_genes=100,
        relax_max_cells=100,
        relax_max_iter=20,
        relax_patience=15,
        relax_step=0.5,
        tighten_max_iter=300,
        standardize=False,
        n_jobs=1,
        random_state=None,
    ):
        self.lam = lam
        self.k = k
        self.n_directions = n_directions
        self.n_permutations = n_permutations
        self.test = test
        self.cv_folds = cv_folds
        self.n_lambdas = n_lambdas
        self.lam_min_ratio = lam_min_ratio
        self.cv_rule = cv_rule
        self.cv_fraction = cv_fraction
        self.cv_max_cells = cv_max_cells
        self.test_max_cells = test_max_cells
        self.test_distribution = test_distribution
        self.max_genes = max_genes
        self.relax_max_cells = relax_max_cells
        self.relax_max_iter = relax_max_iter
        self.relax_patience = relax_patience
        self.relax_step = relax_step
        self.tighten_max_iter = tighten_max_iter
        self.standardize = standardize
        self.n_jobs = n_jobs
        self.random_state = random_state

    # ------------------------------------------------------------------ checks
    def _check_params(self):
        """Refuse a bad hyper-parameter with one line ``"<name>: <problem>"`` (``ScontrastError``)."""
        check_real(self.lam, "lam", 0, allow_none=True)
        check_count(self.k, "k", 1, "sparda", allow_none=True)
        check_count(self.n_directions, "n_directions", 1, "sparda")
        check_count(self.n_permutations, "n_permutations", 0, "sparda", allow_none=True)
        check_option(self.test, "test", ("auto", "permute", "split", "refit", "replicate"))
        check_count(self.cv_folds, "cv_folds", 2, "sparda")
        check_count(self.n_lambdas, "n_lambdas", 1, "sparda")
        check_real(self.lam_min_ratio, "lam_min_ratio", 0, 1, strict_min=True)
        check_option(self.cv_rule, "cv_rule", ("fraction", "1se", "max"))
        check_real(self.cv_fraction, "cv_fraction", 0, 1, strict_min=True)
        # at least 2 cells per fold and group at the largest cv_folds
        check_count(self.cv_max_cells, "cv_max_cells", 2 * MAXIMUM["sparda"]["cv_folds"], "sparda", allow_none=True)
        # a relabelling needs 2 cells a group (each replicate keeps one a stratum)
        check_count(self.test_max_cells, "test_max_cells", 2, "sparda", allow_none=True)
        if not isinstance(self.test_distribution, (bool, np.bool_)):
            raise ScontrastError(f"test_distribution: expected True or False, got {self.test_distribution!r}")
        check_count(self.max_genes, "max_genes", 1, "sparda")
        check_count(self.relax_max_cells, "relax_max_cells", 2, "sparda")
        check_count(self.relax_max_iter, "relax_max_iter", 1, "sparda")
        check_count(self.relax_patience, "relax_patience", 1, "sparda")
        check_real(self.relax_step, "relax_step", 0, strict_min=True)
        check_count(self.tighten_max_iter, "tighten_max_iter", 0, "sparda")
        if not isinstance(self.standardize, (bool, np.bool_)):
            raise ScontrastError(f"standardize: expected True or False, got {self.standardize!r}")
        if check_int(self.n_jobs, "n_jobs") == 0:
            raise ScontrastError("n_jobs: expected a nonzero integer (-1 = all cores), got 0")

    # ------------------------------------------------------------- core pieces
    def _scale_screen_centre(self, X, Y):
        """Scale (``standardize``), screen by marginal W2 (``max_genes``), densify and centre.

        Parameters
        ----------
        X : ndarray or CSR matrix, shape (n, d)
        Y : ndarray or CSR matrix, shape (m, d)

        Returns
        -------
        Xd : ndarray, shape (n, s)
        Yd : ndarray, shape (m, s)
            The screened genes' columns, dense, centred on the pooled mean (W2 between
            projections is translation invariant; centring keeps the RELAX costs
            x'Bx + y'By - 2x'By free of cancellation).
        screened : ndarray of int, shape (s,)
            Sorted indices of the genes kept, ``s = min(d, max_genes)``.
        marginal_w2 : ndarray, shape (d,)
            Marginal squared W2 of every gene (after scaling), the screening score.
        """
        if self.standardize:
            X = _scale_columns(X, 1.0 / self.scale_)
            Y = _scale_columns(Y, 1.0 / self.scale_)
        w2 = marginal_wasserstein2(X, Y)
        d = X.shape[1]
        if d > self.max_genes:
            # stable ordering so ties resolve identically for dense and sparse input
            screened = np.sort(np.argsort(-w2, kind="stable")[: self.max_genes])
        else:
            screened = np.arange(d)
        Xd = dense(X[:, screened])
        Yd = dense(Y[:, screened])
        mu = (Xd.sum(axis=0) + Yd.sum(axis=0)) / (Xd.shape[0] + Yd.shape[0])
        return Xd - mu, Yd - mu, screened, w2

    def _relax(self, Xd, Yd, lam, rng) -> dict:
        """RELAX on equal-size random subsamples of the two groups."""
        n, m = Xd.shape[0], Yd.shape[0]
        # equal group sizes make the optimal plan a permutation: small RELAX steps are
        # assignment problems, and the cost of a step does not grow with the larger group
        ns = min(n, m, self.relax_max_cells)
        ix = np.sort(rng.choice(n, ns, replace=False)) if n > ns else slice(None)
        iy = np.sort(rng.choice(m, ns, replace=False)) if m > ns else slice(None)
        rel = relax(Xd[ix], Yd[iy], lam, step=self.relax_step, max_iter=self.relax_max_iter,
                    patience=self.relax_patience)
        rel["divergence"] = wasserstein2_1d(Xd @ rel["beta"], Yd @ rel["beta"])
        return rel

    def _direction(self, Xd, Yd, lam, k, rng, rel0=None):
        """One direction: RELAX, then tightening on all cells from several starts.

        Every start is tightened and the largest ``J = D - lam ||beta||_1^2`` wins
        (all starts optimise the same objective, so the permutation test, which
        repeats this procedure, stays exact):

        - 'relax': the paper's, the leading eigenvector of the penalised relaxation
          with its number of nonzeros as the cardinality bound;
        - 'pda_relax' (``lam > 0``): the leading eigenvector of the unpenalised (PDA)
          relaxation ``rel0``, the L1 penalty alone deciding the support.  It guards
          against the penalised relaxation collapsing onto one gene when the
          relaxation is loose (covariance changes: the relaxed optimum is then
          near-diagonal and thresholding erases the off-diagonal links);
        - 'mean_diff', 'cov_up', 'cov_down': the difference of the group means and the
          extreme eigenvectors of the difference of the group covariances, the
          directions of largest divergence when the groups are Gaussian and differ
          in one moment only; the relaxation's eigenvector misses them when it is
          loose (few cells, pure covariance changes).

        Returns
        -------
        beta : ndarray, shape (d,)
        rel : dict
            The penalised relaxation's result (``divergence`` = D of its direction).
        tig : dict
            The winning tightening, with ``start`` naming its start.
        rel0 : dict
            The unpenalised relaxation and the moment starts (``'moment_starts'``), reusable on the same data.
        """
        d = Xd.shape[1]
        if rel0 is None:
            rel0 = self._relax(Xd, Yd, 0.0, rng)
        rel = rel0 if lam == 0 else self._relax(Xd, Yd, lam, rng)
        starts = [("relax", rel["beta"], int(np.count_nonzero(rel["beta"])) if k is None else k)]
        free = d if k is None else k
        if lam > 0:
            starts.append(("pda_relax", rel0["beta"], free))
        if "moment_starts" not in rel0:
            # a function of the data alone, like rel0 (which carries it): the lambdas of a path share it
            dC = np.cov(Yd, rowvar=False) - np.cov(Xd, rowvar=False) if d > 1 else None
            rel0["moment_starts"] = _moment_starts(Yd.mean(axis=0) - Xd.mean(axis=0), dC)
        starts += [(name, beta0, free) for name, beta0 in zip(("mean_diff", "cov_up", "cov_down"),
                                                              rel0["moment_starts"])]
        tig = None
        for name, beta0, kk in starts:
            if not np.any(beta0):
                continue
            cand = tighten(Xd, Yd, beta0, kk, lam, max_iter=self.tighten_max_iter)
            cand["start"] = name
            if tig is None or cand["objective"] > tig["objective"]:
                tig = cand
        return tig["beta"], rel, tig, rel0

    def _fit_first(self, X, Y, lam, k, rng) -> float:
        """Statistic of the permutation test: the first direction's divergence."""
        Xd, Yd, _, _ = self._scale_screen_centre(X, Y)
        return self._direction(Xd, Yd, lam, k, rng)[2]["divergence"]

    # --------------------------------------------------------------------- fit
    def fit(self, X, Y, replicates_x=None, replicates_y=None, paired: bool = False, blocks_x=None, blocks_y=None):
        """Fit on target cells ``X`` (n x d) and background cells ``Y`` (m x d).

        Parameters
        ----------
        X : ndarray or scipy.sparse matrix, shape (n, d)
        Y : ndarray or scipy.sparse matrix, shape (m, d)
        replicates_x, replicates_y : array-like, shapes (n,) and (m,), optional
            Each cell's replicate (donor, patient, sample). Given, the test is run over
            relabellings of replicates (``test='replicate'``, see ``test``) and the lambda folds
            hold out whole replicates.
        paired : bool
            Every replicate gives cells to both groups (its labels are swapped under the null).
        blocks_x, blocks_y : array-like, shapes (n,) and (m,), optional
            Each cell's block (batch, site; one per replicate): the replicate test's relabellings
            keep every block's number of target replicates, and its floor follows.

        Returns
        -------
        self
        """
        self._check_params()
        # The matrices are at most a few hundred genes wide: multithreaded BLAS gains
        # little on them, and its spinning threads fight the permutation / CV workers
        # (and other jobs) for the cores.
        with blas_threads(1):
            return self._fit(X, Y, replicates_x, replicates_y, paired, blocks_x, blocks_y)

    def _fit(self, X, Y, replicates_x=None, replicates_y=None, paired=False, blocks_x=None, blocks_y=None):
        X, Y = check_pair(X, Y, min_rows=2)
        rng = check_random_state(self.random_state)
        n, d = X.shape
        m = Y.shape[0]
        given = replicates_x is not None or replicates_y is not None
        if not given and (blocks_x is not None or blocks_y is not None):
            raise ScontrastError("blocks_x, blocks_y: blocks group replicates; give replicates_x and replicates_y too")
        self.replicates_ = Replicates.from_labels(replicates_x, replicates_y, n, m, paired, blocks_x,
                                                  blocks_y) if given else None
        if self.test == "replicate" and self.replicates_ is None:
            raise ScontrastError("test: 'replicate' needs each cell's replicate (fit(X, Y, replicates_x=..., "
                                 "replicates_y=...))")
        self.scale_ = self._gene_scale(X, Y)
        Xd, Yd, screened, w2 = self._scale_screen_centre(X, Y)
        self.screened_ = screened
        self.marginal_w2_ = w2
        self.n_relax_cells_ = min(n, m, self.relax_max_cells)
        lam, rel0, self.cv_results_, self.pda_divergence_ = self._choose_lambda(X, Y, Xd, Yd, w2, screened, rng,
                                                                                self.replicates_)
        if self.cv_results_ is not None:
            self._warn_path_edge(self.cv_results_)
        self.lam_ = lam
        comps, divs = self._deflate(Xd, Yd, screened, d, lam, rel0, rng)
        self._set_directions(comps, divs, Xd, Yd)
        self._run_test(X, Y, lam, rng)
        return self

    def _gene_scale(self, X, Y) -> np.ndarray | None:
        """``scale_``: every gene's pooled standard deviation with ``standardize``, else None."""
        if not self.standardize:
            return None
        _, sd = _column_moments(X, Y)
        # constant genes carry no difference; scale 1 leaves them at zero spread
        return np.where(sd > 0, sd, 1.0)

    def _deflate(self, Xd, Yd, screened, d, lam, rel0, rng):
        """The directions, found in succession by deflating the data along the previous ones.

        Sets ``relax_info_``, ``tighten_info_`` and ``n_directions_``.

        Returns
        -------
        comps : ndarray, shape (n_directions, d)
            The directions on all genes (rows after ``n_directions_`` zero).
        divs : ndarray, shape (n_directions,)
            Divergence along each.
        """
        comps = np.zeros((self.n_directions, d))
        divs = np.zeros(self.n_directions)
        self.relax_info_, self.tighten_info_ = [], []
        Xj, Yj = Xd, Yd
        P = np.eye(len(screened))
        mean_difference = Xd.mean(axis=0) - Yd.mean(axis=0)
        self.n_directions_ = 0
        for j in range(self.n_directions):
            beta, rel, tig, _ = self._direction(Xj, Yj, lam, self.k, rng, rel0 if j == 0 else None)
            self._record_search(rel, tig)
            if j > 0 and lam > 0 and tig["objective"] <= 0:
                # D and lam ||beta||_1^2 are both 2-homogeneous, so when no unit direction
                # has J = D - lam ||beta||_1^2 > 0 the penalised problem's maximiser over the
                # ball ||beta||_2 <= 1 is beta = 0: no further direction is worth its genes.
                # (Forcing a unit direction here returns the single gene of largest
                # residual divergence, noise included.)  The first direction is always
                # returned, so that a fit never comes back empty.
                break
            self.n_directions_ += 1
            # the direction acting on the original (screened) genes: P beta, where P
            # accumulates the deflations; it is orthogonal to the earlier directions
            u = P @ beta
            nu = np.linalg.norm(u)
            u[np.abs(u) < 1e-12 * max(nu, 1e-300)] = 0.0
            if nu > 0:
                u = orient_to_target(u / nu, mean_difference)
            comps[j, screened] = u
            divs[j] = wasserstein2_1d(Xd @ u, Yd @ u)
            if j + 1 < self.n_directions:
                Xj = Xj - np.outer(Xj @ beta, beta)
                Yj = Yj - np.outer(Yj @ beta, beta)
                P = P - np.outer(P @ beta, beta)
        return comps, divs

    def _record_search(self, rel: dict, tig: dict) -> None:
        """Append one searched direction's relaxation and tightening to ``relax_info_`` / ``tighten_info_``."""
        self.relax_info_.append({k: rel[k] for k in ("n_iter", "objective", "bound", "eig_fraction", "divergence")})
        self.tighten_info_.append({k: tig[k] for k in ("n_iter", "divergence", "objective", "start")})

    def _set_directions(self, comps, divs, Xd, Yd) -> None:
        """The fitted directions' attributes; none selected when the groups do not differ at all."""
        spread = float(np.var(np.vstack([Xd, Yd]), axis=0).sum())
        if not divs[0] > 1e-12 * spread:
            # identical groups (e.g. a background that copies the target): every direction has
            # divergence 0, so whichever genes the search ended on carry nothing
            comps[:] = 0.0
            divs[:] = 0.0
            warnings.warn("no difference between the groups along any direction (divergence 0, e.g. a background "
                          "identical to the target): no gene is selected", ScontrastWarning, stacklevel=4)
        self.components_ = comps
        self.beta_ = comps[0] if self.n_directions == 1 else comps
        self.divergences_ = divs
        self.divergence_ = float(divs[0])
        self.selected_ = np.flatnonzero(np.any(comps != 0, axis=0))
        self.k_ = int(np.count_nonzero(comps[0]))

    # -------------------------------------------------------------- transform
    def transform(self, X) -> np.ndarray:
        """Project cells on the fitted directions.

        Parameters
        ----------
        X : ndarray or sparse matrix, shape (n, d)

        Returns
        -------
        ndarray, shape (n, n_directions)
        """
        check_is_fitted(self)
        X = check_matrix(X, "X")
        if X.shape[1] != self.components_.shape[1]:
            raise ScontrastError(f"X: has {X.shape[1]} genes, the model was fitted on {self.components_.shape[1]}")
        W = self.components_.T
        if self.scale_ is not None:
            W = W / self.scale_[:, None]
        return np.asarray(X @ W)
