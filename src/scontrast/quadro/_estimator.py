"""The classifier :class:`QUADRO`: hyper-parameters, the fit's steps, scores and predictions.

``fit`` checks the hyper-parameters (``_check_params``), the data and the labels, then
chooses the lambdas by cross-validation (:mod:`._crossval`), screens the genes
(:mod:`._screen`), estimates the moments (:mod:`._moments`), solves along the lambda path
(:mod:`._solver`) and sets the threshold and the probability calibration
(:mod:`._scores`).
"""

from __future__ import annotations

import contextlib
import warnings

import numba
import numpy as np
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from ..bounds import check_count
from ..core import (
    ScontrastConvergenceWarning,
    ScontrastError,
    ScontrastWarning,
    blas_threads,
    check_int,
    check_option,
    check_random_state,
    check_real,
    spawn_seed,
)
from ._crossval import FoldSteps, _cross_validate_path, _lambda_grid, _lambda_path, _select
from ._moments import estimate_moments, rayleigh_quotient
from ._scores import _finite_cut, _logistic_1d, _logistic_slope, _quad_scores, error_threshold
from ._screen import RayleighScreen
from ._solver import RayleighProblem, solve_rayleigh
from ._utils import _stratified_rows, _take


@contextlib.contextmanager
def _numba_threads(n: int | None):
    """Run the block with numba's threads (Kendall's tau) capped at ``n`` in this thread; None = as they are."""
    if n is None:
        yield
        return
    old = numba.get_num_threads()
    numba.set_num_threads(max(1, min(int(n), numba.config.NUMBA_NUM_THREADS)))
    try:
        yield
    finally:
        numba.set_num_threads(old)


class QUADRO(ClassifierMixin, BaseEstimator):
    """QUADRO: sparse quadratic classifier by Rayleigh-quotient optimisation.

    Fits ``Q(z) = z' Omega z - 2 delta' z`` (``z = (x - center_) / scale_``; the
    raw ``x`` when ``standardize=False``) by solving

        min  pi L_1 + (1-pi) L_2 + lambda1 |Omega|_1 + lambda2 |delta|_1
        s.t. M_2 - M_1 = 1

    with plug-in (robust or sample) moments; class 2 = ``classes_[1]`` scores
    higher. ``quadratic_score`` is Q itself; ``decision_function`` is
    ``Q - threshold_`` (scikit-learn's convention: positive means
    ``classes_[1]``, which ``predict`` returns there).

    Parameters
    ----------
    lambda1, lambda2 : float >= 0 or None
        Penalties on ``|Omega|_1`` and ``|delta|_1`` as multiples of a reference
        scale (``RayleighProblem.reference_scale``: the largest smooth gradient
        of each block at the sparsest feasible point, the lasso's ``lambda_max``
        analogue), so that one value means the same for any data scale. None =
        chosen by cross-validation over ``lambda_grid``.
    estimator : ``'robust'`` (Catoni means and variances, Kendall's tau
        correlations, nearest PSD) or ``'sample'`` (sample moments).
    gamma : float or None
        Kurtosis parameter (at least ``-2/(d+2)``); None = ``kurtosis_parameter``
        of the training data (0 assumes Gaussian classes).
    cv : int >= 1 or None
        Stratified folds for choosing lambdas and for the out-of-fold scores
        that set the threshold and the probability calibration; each class
        needs ``2 cv`` samples. None or 1 = no cross-validation (both lambdas
        must then be given; threshold and calibration use the training scores).
    random_state : None, int >= 0 or numpy Generator; seeds the folds.
    lambda_grid : sequence of floats >= 0 or None
        Candidate multiples for each lambda left None, walked from the largest
        down (default ``geomspace(3, 1e-3, 6)``, a factor ~5 apart: lambda1's
        reference 1 is where the optimality conditions make ``Omega = 0`` at
        ``lambda2 = 0``, so the path starts beyond it, at a linear rule even for
        ``lambda2 > 0``; 3 also keeps the sparsest answers that d > n needs; when a
        class has fewer samples than features and no shrinkage, a linear rule of zero
        training variance exists, that level is ~0 and the reference is the sparsest-point
        scale, at 3 times which Omega may still hold a few pairs);
        with both None the 36-point product grid is searched. A lambda
        chosen at the least penalised end of its path raises a
        :class:`scontrast.core.ScontrastWarning` (the path may be too short).
    cv_scoring : ``'auc'`` (rank based, threshold free) or ``'error'``
        (held-out error at a threshold chosen on the training fold).
    cv_rule : ``'1se_lambda1'`` — among the points whose mean CV score is within one
        standard error of the best, the largest lambda1 (the sparsest Omega), then at that
        lambda1 the largest lambda2; ``'1se'`` — the most penalised lambdas (largest
        ``lambda1 * lambda2``) within one standard error of the best; ``'best'`` — the best
        mean. Held-out scores of a few dozen samples are noisy, hence one standard error.
        The product of ``'1se'`` trades one penalty against the other and lands in corners
        of the grid (small lambda1 with a huge lambda2: many gene pairs and no linear part)
        that are poor rules when d > n; ordering the penalties (Omega first, the paper's
        interest being whether pairs are needed at all) avoids them.
    patience : int >= 1 or None
        The grid is walked from the largest lambda1 down; the walk stops after
        ``patience`` successive lambda1 values whose best mean CV score lies
        more than one standard error below the best so far (their points are
        NaN in ``cv_results_``). None = the whole grid.
    psd_norm : ``'fro'`` (one eigendecomposition) or ``'max'`` (the paper;
        iterative): how the robust covariance is made positive semi-definite.
    standardize : bool
        Solve in coordinates centred at the prior-weighted class means and
        scaled by the pooled within-class standard deviations (the estimated
        moments are transformed; data are not copied).
    threshold : ``'error'`` (minimise the error of the calibration scores) or
        ``'logistic'`` (where the logistic calibration of Q crosses 1/2). When
        every calibration score is best called one class, the cut is placed
        one spread of the scores beyond them (``threshold_`` is always finite).
    tol, max_iter : solver tolerance (relative step of the proximal gradient
        mapping) of the final fit and iteration cap.
    cv_tol : the (looser) solver tolerance inside cross-validation, where
        only the ranking of held-out scores matters.
    n_jobs : int >= 1 or None
        Threads of the Kendall's tau computation (numba) and of the BLAS during
        ``fit``; None = leave both as they are. :func:`cross_validated_scores` runs
        the final model and the outer folds in ``n_jobs`` threads instead (each fit
        on one thread; the same models).
    n_features : int >= 1 or None
        Keep the ``n_features`` columns of largest :func:`marginal_rayleigh` (each
        gene's own Rayleigh quotient: mean and spread differences), chosen on the
        training samples of every fold and of the final fit, so that held-out
        scores never see the labels that chose the genes. None = every column.
    shrinkage : ``'auto'``, ``'ledoit_wolf'`` or None
        ``'ledoit_wolf'``: shrink each class's covariance towards a multiple of the
        identity by Ledoit and Wolf's amount (:func:`estimate_moments`); ``'auto'``: only
        the classes with at most as many samples as kept features (in every fit: inner
        folds, outer folds, final), whose plug-in covariance is singular, so that a linear
        combination with no variance in the training samples cannot pose as a perfect
        separator; None: plug-in covariances (the paper). What shrinking does to the test
        error on the paper's settings: ``docs/quadro.md``.
    max_cells : int >= 2 or None
        Fit on at most this many samples (None = all): with more, on ``max_cells`` of them drawn
        without replacement within each class (and each replicate of ``fit``'s ``groups``) in
        proportion to its size, at least one of each, so that every replicate stays (and at least
        ``2 cv`` of a rare class, what the folds need). Everything
        the fit learns (the genes, the lambdas, Omega, the threshold) is then learned on them;
        ``fitted_cells_`` says which. Scoring is not affected: ``decision_function`` scores any
        samples, and :func:`cross_validated_scores` scores every sample by an outer model that
        did not train on it (a fit costs about samples x candidate genes: the screen, the
        moments and the folds' scores). With ``max_cells`` samples or fewer nothing changes.
    class_weight : ``'balanced'``, None or a dict ``{label: weight > 0}``
        ``'balanced'``: both classes weigh 1/2 whatever their sizes: ``pi = 1/2``
        in the objective and the centring, the threshold minimises the balanced
        error (mean of the two classes' error rates), ``cv_scoring='error'`` is
        the balanced error and the calibration is class-weighted (probabilities
        for equal priors). None: the classes weigh their shares of the samples
        (the paper's ``pi``; the threshold minimises the raw error, which on
        imbalanced groups may call every sample the larger class). A dict
        weighs each sample of a class by its value (missing labels weigh 1).

    Attributes
    ----------
    classes_ : (2,) labels; features_ : (k,) indices of the kept columns (ascending);
    screen_scores_ : (d,) their :func:`marginal_rayleigh` (None when all are kept)
    Omega_ : (k, k); delta_ : (k,); center_, scale_ : (k,) (of the kept columns)
    n_features_in_ : d (and ``feature_names_in_`` for a DataFrame)
    threshold_ : float (cut on Q); gamma_ : float; pi_ : float (weight of ``classes_[0]``)
    rayleigh_quotient_ : plug-in Rayleigh quotient of the fitted Q (training moments)
    lambda1_, lambda2_ : chosen multiples; penalties_ : (2,) absolute penalties
    lambda_reference_ : (2,) reference scales; multiplier_ : constraint multiplier
    n_iter_, converged_ : solver iterations and convergence of the final fit
    constraint_residual_ : ``M_2 - M_1 - 1`` at the answer
    cv_results_ : dict of arrays ``lambda1``, ``lambda2``, ``mean_score``, ``std_score``
    oof_decision_ : (m,) out-of-fold decision scores ``Q - threshold_`` at the
        chosen lambdas of the ``m`` samples fitted on (``fitted_cells_``; None without CV)
    fitted_cells_ : (m,) int, the samples (rows of X, ascending) the fit learned from: all n,
        or the stratified subsample of ``max_cells``
    calibration_ : (2,) slope ``b`` and intercept ``-b threshold_`` of
        ``P(classes_[1] | x) = sigmoid(b Q + intercept)``

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X_target, X_background = rng.normal(size=(60, 10)), rng.normal(size=(60, 10))
    >>> X_target[:, :2] *= 3.0                            # genes 0 and 1 spread more in the target
    >>> from scontrast.quadro import QUADRO
    >>> X = np.vstack([X_target, X_background])
    >>> y = np.repeat([1, 0], 60)
    >>> model = QUADRO(random_state=0).fit(X, y)
    >>> bool(model.score(X, y) > 0.7)                       # a quadratic rule sees the change of spread
    True
    """

    def __init__(self, lambda1=None, lambda2=None, estimator="robust", gamma=None, cv=5, random_state=None,
                 lambda_grid=None, cv_scoring="auc", cv_rule="1se_lambda1", patience=2, psd_norm="fro",
                 standardize=True, threshold="error", tol=1e-6, cv_tol=1e-4, max_iter=5000, n_jobs=None,
                 n_features=50, class_weight="balanced", shrinkage="auto", max_cells=10_000):
        self.max_cells = max_cells
        self.shrinkage = shrinkage
        self.n_features = n_features
        self.class_weight = class_weight
        self.lambda1 = lambda1
        self.lambda2 = lambda2
        self.estimator = estimator
        self.gamma = gamma
        self.cv = cv
        self.random_state = random_state
        self.lambda_grid = lambda_grid
        self.cv_scoring = cv_scoring
        self.cv_rule = cv_rule
        self.patience = patience
        self.psd_norm = psd_norm
        self.standardize = standardize
        self.threshold = threshold
        self.tol = tol
        self.cv_tol = cv_tol
        self.max_iter = max_iter
        self.n_jobs = n_jobs

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        tags.input_tags.sparse = True
        return tags

    # ----------------------------------------------------------------- checks

    def _check_params(self) -> None:
        """Refuse a bad hyper-parameter with one line ``"<name>: <problem>"`` (``ScontrastError``)."""
        check_real(self.lambda1, "lambda1", 0.0, allow_none=True)
        check_real(self.lambda2, "lambda2", 0.0, allow_none=True)
        check_option(self.estimator, "estimator", ["robust", "sample"])
        check_real(self.gamma, "gamma", allow_none=True)
        check_count(self.cv, "cv", 1, "quadro", allow_none=True)
        check_option(self.cv_scoring, "cv_scoring", ["auc", "error"])
        check_option(self.cv_rule, "cv_rule", ["1se_lambda1", "1se", "best"])
        check_count(self.patience, "patience", 1, "quadro", allow_none=True)
        check_option(self.psd_norm, "psd_norm", ["fro", "max"])
        check_option(self.standardize, "standardize", [True, False])
        check_option(self.threshold, "threshold", ["error", "logistic"])
        check_real(self.tol, "tol", 0.0, strict_min=True)
        check_real(self.cv_tol, "cv_tol", 0.0, strict_min=True)
        check_count(self.max_iter, "max_iter", 1, "quadro")
        check_int(self.n_jobs, "n_jobs", 1, allow_none=True)
        check_count(self.n_features, "n_features", 1, "quadro", allow_none=True)
        check_option(self.shrinkage, "shrinkage", [None, "ledoit_wolf", "auto"])
        check_count(self.max_cells, "max_cells", 2, "quadro", allow_none=True)
        if isinstance(self.class_weight, dict):
            for v in self.class_weight.values():
                check_real(v, "class_weight", 0.0, strict_min=True)
        else:
            check_option(self.class_weight, "class_weight", ["balanced", None])
        _lambda_grid(self.lambda_grid)

    def _validated(self, X, y="no_validation", reset: bool = True):
        """scikit-learn's ``validate_data`` (feature count and names), its errors as one-line ScontrastError."""
        try:
            if isinstance(y, str) and y == "no_validation":
                return validate_data(self, X, dtype=np.float64, reset=reset, accept_sparse="csr")
            return validate_data(self, X, y, dtype=np.float64, y_numeric=False, accept_sparse="csr")
        except ScontrastError:
            raise
        except ValueError as exc:
            text = " ".join(str(exc).split())
            raise ScontrastError(f"{'X' if isinstance(y, str) and y == 'no_validation' else 'X, y'}: {text}") from exc

    def _check_labels(self, y, n_points: int):
        """The two classes, the mask of the second, and the folds (None = no CV) for labels ``y``.

        ``n_points`` is the length of the lambda path: more than one point needs folds.
        """
        try:
            check_classification_targets(y)
        except ValueError as exc:
            raise ScontrastError(f"y: {' '.join(str(exc).split())}") from exc
        classes = np.unique(y)
        if classes.size > 2:
            raise ScontrastError(f"y: Only binary classification is supported. The type of the target is "
                                 f"{type_of_target(y)} ({classes.size} classes)")
        if classes.size < 2:
            raise ScontrastError(f"y: has 1 class ({classes[0]!r}); QUADRO separates two")
        is_two = y == classes[1]
        n_min = int(min(is_two.sum(), (~is_two).sum()))
        cv = None if self.cv is None or self.cv == 1 else int(self.cv)
        if n_points > 1 and cv is None:
            raise ScontrastError(f"cv: expected at least 2 folds when lambda1 or lambda2 is None (they are chosen "
                                 f"by cross-validation), got {self.cv!r}")
        if n_min < 2:
            raise ScontrastError(f"y: each class needs at least 2 samples, the smaller has {n_min}")
        if cv is not None and n_min < 2 * cv:
            raise ScontrastError(f"cv: {cv} folds need at least {2 * cv} samples per class, the smaller has {n_min}")
        return classes, is_two, cv

    # ----------------------------------------------------------------- helpers

    def _class_weights(self, is_two) -> tuple[float, float] | None:
        """Weight of a ``classes_[0]`` and of a ``classes_[1]`` sample among these ones; None = unweighted."""
        cw = self.class_weight
        if cw is None:
            return None
        if isinstance(cw, str):  # 'balanced': both classes total n / 2
            n, n2 = is_two.size, int(is_two.sum())
            return n / (2.0 * max(n - n2, 1)), n / (2.0 * max(n2, 1))
        return float(cw.get(self.classes_[0], 1.0)), float(cw.get(self.classes_[1], 1.0))

    def _sample_weight(self, is_two) -> np.ndarray | None:
        w = self._class_weights(is_two)
        return None if w is None else np.where(is_two, w[1], w[0])

    def _pi(self, is_two) -> float | None:
        """Weight of class 1 in the objective: its share of the (weighted) samples."""
        w = self._class_weights(is_two)
        if w is None:
            return None
        n2 = int(is_two.sum())
        return w[0] * (is_two.size - n2) / (w[0] * (is_two.size - n2) + w[1] * n2)

    def _moments(self, X, is_two):
        return estimate_moments(X[~is_two], X[is_two], estimator=self.estimator, gamma=self.gamma,
                                psd_norm=self.psd_norm, standardize=self.standardize, pi=self._pi(is_two),
                                shrinkage=self.shrinkage)

    def _screen(self, X, is_two) -> tuple[np.ndarray, RayleighScreen | None]:
        """The columns kept for these (training) samples (ascending) and the screen that chose them.

        The screen is None when every column is kept.
        """
        if self.n_features is None or self.n_features >= X.shape[1]:
            return np.arange(X.shape[1]), None
        gamma = None if self.gamma is None else max(float(self.gamma), -2.0 / 3.0)
        screen = RayleighScreen(k=int(self.n_features), gamma=gamma, class_weight=None)
        screen.fit(X, is_two, pi=self._pi(is_two))
        return np.flatnonzero(screen.support_), screen

    def _solve_path(self, moments, path, stop):
        """Solve along ``path[:stop + 1]`` with warm starts; only the last point at full accuracy."""
        problem = RayleighProblem(moments)
        ref = problem.reference_scale()
        x0, nu = None, 0.0
        for i, (c1, c2) in enumerate(path[: stop + 1]):
            sol = solve_rayleigh(problem, c1 * ref[0], c2 * ref[1], x0=x0, nu0=nu,
                                 tol=self.tol if i == stop else max(self.tol, self.cv_tol),
                                 max_iter=int(self.max_iter))
            x0, nu = sol.x, sol.multiplier
        return problem, ref, sol

    def _fold_steps(self) -> FoldSteps:
        """What each inner fold of the lambda path does with its samples: this estimator's steps."""
        return FoldSteps(screen=self._screen, moments=self._moments, threshold=self._threshold_of,
                         sample_weight=self._sample_weight, scoring=self.cv_scoring,
                         tol=max(self.tol, self.cv_tol), max_iter=int(self.max_iter), patience=self.patience)

    def _threshold_of(self, scores, is_two) -> float:
        """The cut on Q of the calibration ``scores`` (n,), finite."""
        if self.threshold == "error":
            t = error_threshold(scores, is_two, class_weights=self._class_weights(is_two))
        else:
            slope, intercept = _logistic_1d(scores, is_two, self._sample_weight(is_two))
            pi = self._pi(is_two)
            prior = is_two.mean() if pi is None else 1.0 - pi
            t = -intercept / slope if slope > 0 else (np.inf if prior < 0.5 else -np.inf)
        return _finite_cut(t, scores)

    # ----------------------------------------------------------------- the fit's steps

    def fit(self, X, y, groups=None):
        """Fit on X (n, d) and binary labels y (n,); returns self.

        X may be sparse (CSR): only the genes a step keeps are made dense (the screen's blocks,
        its co-expression candidates, the ``n_features`` kept), never all ``d`` at once.

        ``groups`` (n,), each sample's replicate (donor, sample), makes the inner folds that
        choose the lambdas hold out whole replicates.
        """
        self._check_params()
        path = _lambda_path(self.lambda1, self.lambda2, self.lambda_grid)
        rng = check_random_state(self.random_state)
        X, y = self._validated(X, y)
        classes, is_two, cv = self._check_labels(y, len(path))
        if groups is not None:
            groups = np.asarray(groups)
            if groups.shape != (X.shape[0],):
                raise ScontrastError(f"groups: expected shape ({X.shape[0]},), got {groups.shape}")
        self.fitted_cells_ = self._fitted_rows(is_two, groups, cv, rng)
        if self.fitted_cells_.size < X.shape[0]:
            rows = self.fitted_cells_
            X, is_two, groups = X[rows], is_two[rows], None if groups is None else groups[rows]
        n_jobs = self.n_jobs
        with _numba_threads(n_jobs), blas_threads(n_jobs):
            self._fit(X, is_two, classes, path, cv, rng, groups)
        return self

    def _fitted_rows(self, is_two, groups, cv, rng) -> np.ndarray:
        """The samples the fit learns from (ascending): all, or ``max_cells`` stratified by class and replicate.

        Below ``max_cells`` nothing is drawn from ``rng``, so the fit is the one without the option.
        """
        n = is_two.size
        if self.max_cells is None or n <= self.max_cells:
            return np.arange(n)
        strata = is_two.astype(np.int64)
        if groups is not None:
            strata = np.unique(np.column_stack([strata.astype(str), groups.astype(str)]), axis=0,
                               return_inverse=True)[1].ravel()
        sub_rng = np.random.default_rng(spawn_seed(rng))
        rows = _stratified_rows(strata, int(self.max_cells), sub_rng)
        # a rare class keeps at least what the folds need (2 cv samples; _check_labels saw that many in all)
        need = 2 * (cv or 1)
        for cls in (False, True):
            short = need - int((is_two[rows] == cls).sum())
            if short > 0:
                spare = np.setdiff1d(np.flatnonzero(is_two == cls), rows)
                rows = np.sort(np.r_[rows, sub_rng.choice(spare, short, replace=False)])
        return rows

    def _fit(self, X, is_two, classes, path, cv, rng, groups=None):
        self.classes_ = classes
        best, oof = self._choose_lambdas(X, is_two, path, cv, rng, groups)
        self._warn_at_path_end(path)

        self.features_, screen = self._screen(X, is_two)
        self.screen_scores_ = None if screen is None else screen.scores_
        X = _take(X, cols=self.features_)  # the kept genes only, dense
        mom = self._moments(X, is_two)
        sol = self._fit_final(mom, path, best)
        # threshold and calibration from scores of models that did not see the sample (training scores without CV)
        cal = oof[:, best] if oof is not None else _quad_scores(X, sol.Omega, sol.delta, mom.center, mom.scale)
        self._calibrate(cal, is_two, oof is not None)

    def _choose_lambdas(self, X, is_two, path, cv, rng, groups=None):
        """Cross-validate along ``path`` (unless ``cv`` is None) and choose a point.

        Sets ``cv_results_``, ``lambda1_`` and ``lambda2_``; returns the point's index and
        the out-of-fold Q (None without CV).
        """
        if cv is None:
            scores, oof = np.zeros((len(path), 1)), None
        else:
            scores, oof = _cross_validate_path(self._fold_steps(), X, is_two, path, cv, spawn_seed(rng), groups)
        explored = np.flatnonzero(~np.isnan(scores[:, 0]))
        best = int(explored[_select([path[i] for i in explored], scores[explored], self.cv_rule)])
        self.cv_results_ = {
            "lambda1": np.array([p[0] for p in path]), "lambda2": np.array([p[1] for p in path]),
            "mean_score": scores.mean(axis=1), "std_score": scores.std(axis=1), "scoring": self.cv_scoring,
        }
        self.lambda1_, self.lambda2_ = path[best]
        return best, oof

    def _fit_final(self, mom, path, best):
        """Solve on all samples' moments up to the chosen point; the solution's attributes; returns it."""
        problem, ref, sol = self._solve_path(mom, path, stop=best)
        self.Omega_, self.delta_ = sol.Omega, sol.delta
        self.center_, self.scale_ = mom.center, mom.scale
        self.gamma_, self.pi_ = mom.gamma, mom.pi
        self.lambda_reference_ = np.array(ref)
        self.penalties_ = np.array([self.lambda1_ * ref[0], self.lambda2_ * ref[1]])
        self.multiplier_ = sol.multiplier
        self.n_iter_, self.converged_ = sol.n_iter, sol.converged
        if not sol.converged:
            # stacklevel: this method, _fit, fit, the caller
            warnings.warn(f"QUADRO solver did not converge in max_iter={self.max_iter} iterations "
                          f"(relative residual {sol.residual:.2e})", ScontrastConvergenceWarning, stacklevel=4)
        self.constraint_residual_ = float(problem.a @ sol.x - 1.0)
        self.objective_ = sol.objective
        self.rayleigh_quotient_ = rayleigh_quotient(sol.Omega, sol.delta, mom.mu1, mom.Sigma1, mom.mu2,
                                                    mom.Sigma2, mom.gamma, mom.pi)
        return sol

    def _calibrate(self, cal, is_two, out_of_fold: bool):
        """``threshold_``, ``calibration_`` and ``oof_decision_`` from the calibration scores ``cal`` (n,)."""
        self.threshold_ = self._threshold_of(cal, is_two)
        slope = _logistic_slope(cal - self.threshold_, is_two, self._sample_weight(is_two))
        self.calibration_ = np.array([slope, -slope * self.threshold_])
        self.oof_decision_ = cal - self.threshold_ if out_of_fold else None

    def _warn_at_path_end(self, path):
        """ScontrastWarning when a cross-validated lambda is the least penalised of its path."""
        for name, j in (("lambda1", 0), ("lambda2", 1)):
            values = sorted({p[j] for p in path})
            if len(values) < 2 or getattr(self, f"{name}_") != values[0]:
                continue
            # stacklevel: this method, _fit, fit, the caller
            warnings.warn(f"QUADRO: {name} chosen at the least penalised end of its path ({values[0]:.3g} x the "
                          f"reference); extend lambda_grid below it", ScontrastWarning, stacklevel=4)

    # ----------------------------------------------------------------- API

    def quadratic_score(self, X) -> np.ndarray:
        """Q at each row of X (n, d): the quadratic score itself; larger means ``classes_[1]``."""
        check_is_fitted(self)
        X = self._validated(X, reset=False)
        return _quad_scores(_take(X, cols=self.features_), self.Omega_, self.delta_, self.center_, self.scale_)

    def decision_function(self, X) -> np.ndarray:
        """``Q - threshold_`` at each row of X (n, d): positive means ``classes_[1]``."""
        check_is_fitted(self)
        return self.quadratic_score(X) - self.threshold_

    def predict(self, X) -> np.ndarray:
        """``classes_[1]`` where ``Q > threshold_``, else ``classes_[0]``."""
        check_is_fitted(self)
        above = self.decision_function(X) > 0
        return self.classes_[above.astype(int)]

    def predict_proba(self, X) -> np.ndarray:
        """(n, 2) probabilities ``sigmoid(b (Q - threshold_))`` (``b = calibration_[0] > 0``).

        ``b`` is the logistic fit of the calibration scores (out of fold with CV) with
        the offset fixed at the threshold, so the probability of ``classes_[1]``
        exceeds 1/2 exactly where ``predict`` returns it.
        """
        check_is_fitted(self)
        p = expit(self.calibration_[0] * self.decision_function(X))
        return np.column_stack([1.0 - p, p])

    def interactions(self, feature_names=None, tol: float = 0.0):
        """Non-zero entries of Omega_ (i <= j) and delta_, largest first.

        Returns a list of ``(name_i, name_j, weight)`` for Omega_ (``name_j`` is
        the same as ``name_i`` on the diagonal) and one of ``(name, weight)`` for
        delta_.
        """
        check_is_fitted(self)
        d = self.Omega_.shape[0]
        names = (np.arange(self.n_features_in_).astype(str) if feature_names is None
                 else np.asarray(feature_names).astype(str))[self.features_]
        iu, ju = np.triu_indices(d)
        w = self.Omega_[iu, ju]
        keep = np.abs(w) > tol
        order = np.argsort(-np.abs(w[keep]), kind="stable")
        pairs = [(names[i], names[j], float(v)) for i, j, v in
                 zip(iu[keep][order], ju[keep][order], w[keep][order], strict=True)]
        dk = np.flatnonzero(np.abs(self.delta_) > tol)
        dk = dk[np.argsort(-np.abs(self.delta_[dk]), kind="stable")]
        return pairs, [(names[i], float(self.delta_[i])) for i in dk]
