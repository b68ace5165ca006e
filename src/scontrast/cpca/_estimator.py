"""The estimator :class:`CPCA`: parameter checks, the solver choice, the fitted attributes."""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ..bounds import check_count
from ..core import (
    ScontrastConvergenceWarning,
    ScontrastError,
    ScontrastWarning,
    check_bool,
    check_matrix,
    check_option,
    check_pair,
    check_random_state,
    check_real,
)
from ._alpha import _merge_alike, _resolve_alpha, alpha_grid, select_alphas, subspace_affinity
from ._eigen import _FULL_MAX_D
from ._moments import _Moments
from ._solve import _DENSE_MAX, _solve
from ._threads import _resolve_threads

_SOLVERS = ("auto", "full", "covariance", "gram", "implicit")
_AFFINITIES = ("loadings", "projection")


def _store_shared_params(est, n_components, alpha, n_alphas, max_log_alpha, n_alpha_clusters, affinity, standardize,
                         random_state, tol, merge_affinity) -> None:
    """Store, untouched (scikit-learn's rule for ``__init__``), the hyper-parameters that
    :class:`CPCA` and :class:`~scontrast.cpca._kernel.KernelCPCA` share."""
    est.n_components = n_components
    est.alpha = alpha
    est.n_alphas = n_alphas
    est.max_log_alpha = max_log_alpha
    est.n_alpha_clusters = n_alpha_clusters
    est.affinity = affinity
    est.standardize = standardize
    est.random_state = random_state
    est.tol = tol
    est.merge_affinity = merge_affinity


def _total_variance(A, scale: np.ndarray) -> float:
    """Trace of the (scaled) covariance of ``A`` (n, d): the target's variance, sparse-safe."""
    if sp.issparse(A):
        mean = np.asarray(A.mean(axis=0)).ravel()
        var = np.asarray(A.multiply(A).mean(axis=0)).ravel() - mean**2
    else:
        var = A.var(axis=0)
    return float(np.sum(np.maximum(var, 0.0) * scale**2) * A.shape[0] / max(A.shape[0] - 1, 1))


def _warn_if_no_contrast(contrast: np.ndarray, target_variance: float, alpha: float) -> None:
    """Warn when the default alpha's components carry no target variance beyond the background's.

    ``contrast`` (k,) are the eigenvalues of ``C_X - alpha C_Y`` at the default alpha;
    ``target_variance`` (the trace of ``C_X``) is the scale they are compared with.
    """
    scale = target_variance
    if scale == 0.0:
        warnings.warn("the target cells have no variance in these genes: cPCA has nothing to contrast",
                      ScontrastWarning, stacklevel=3)
    elif float(np.max(contrast, initial=0.0)) <= 1e-9 * scale:
        warnings.warn(f"no contrast at alpha {alpha:.4g}: no direction has more target variance than alpha times "
                      "the background's (the groups vary alike, e.g. the same cells)", ScontrastWarning, stacklevel=3)


class CPCA(BaseEstimator):
    """Contrastive PCA of target X against background Y (a scikit-learn estimator; ``fit(X, Y)``).

    Parameters
    ----------
    n_components : int, default 2
        Contrastive components per alpha.
    alpha : 'auto', float >= 0 or list of floats >= 0, default 'auto'
        'auto' chooses alphas from a grid as in the paper (alpha = 0, plain PCA
        of the target, is always reported first); a number or list fits those.
    n_alphas : int, default 40
        Non-zero grid values, log-spaced in [0.1, 10**max_log_alpha] ('auto' only).
    max_log_alpha : float, default 3
    n_alpha_clusters : int, default 4
        Spectral clusters of the grid; the one holding alpha = 0 is dropped, so at
        most ``n_alpha_clusters - 1`` non-zero alphas are returned.
    affinity : {'loadings', 'projection'}, default 'loadings'
        Principal angles between the loadings (the paper) or between the projected
        target data (what the ``contrastive`` package computes).
    standardize : bool, default False
        Scale each gene to unit variance within its own set (target, background).
    random_state : None, int >= 0 or numpy Generator, default None
        Seeds the k-means step of the spectral clustering ('auto' only).
    solver : {'auto', 'full', 'covariance', 'gram', 'implicit'}, default 'auto'
        See :mod:`scontrast.cpca._solve`; 'auto' picks 'full' for d <= 128, else
        'covariance' when d <= n + m, 'gram' when there are fewer cells than genes
        (each up to 12,000), and 'implicit' beyond.
    tol : float, default 1e-10
        Relative residual norm ``||A u - theta u|| / ||A||`` at which an
        iterative solver stops.
    max_iter : int, default 500
        Davidson sweeps at most; alphas not converged by then raise a warning.
    merge_affinity : float in (0, 1], default 0.99
        'auto' only: two chosen alphas whose subspaces have at least this affinity
        (product of the cosines of their principal angles) are one answer, not two: the
        larger alpha is dropped, with a ``ScontrastWarning`` naming both (1 keeps every
        alpha the clustering chose, however alike).
    n_jobs : None or int, default None
        Threads of the fit (scikit-learn's reading): None follows the BLAS's current setting
        (``threadpoolctl.threadpool_limits``; all cores unless limited), -1 uses every core, a
        positive number that many. With exactly two the dense solvers run pairs of
        single-threaded tasks side by side; with more, one task on a BLAS of that many threads
        (:mod:`scontrast.cpca._threads`).

    Attributes
    ----------
    alphas_ : ndarray (n_fitted,)
        Fitted alphas: for 'auto' 0 followed by the chosen values (ascending).
    default_alpha_ : float
        The first non-zero fitted alpha (the chosen one for 'auto', the given
        one otherwise); ``transform`` uses it when no alpha is passed.
    default_index_ : int
        Its position in ``alphas_``.
    components_ : ndarray (n_fitted, n_components, n_features)
        Orthonormal contrastive directions per fitted alpha.
    explained_contrast_ : ndarray (n_fitted, n_components)
        Their eigenvalues of ``C_X - alpha C_Y`` (target minus alpha times
        background variance), descending.
    alpha_grid_ : ndarray (n_grid,)
        Alphas compared by the affinity ('auto': the grid; else ``alphas_``).
    affinity_ : ndarray (n_grid, n_grid)
    alpha_labels_ : ndarray (n_grid,) of int
        Spectral cluster of each grid alpha ('auto'); -1 otherwise.
    grid_explained_contrast_ : ndarray (n_grid, n_components)
    residuals_ : ndarray (n_grid,)
        Relative residual norm reached per grid alpha (0 for the 'full' solver).
    n_iter_ : ndarray (n_grid,) of int
        Davidson sweeps per grid alpha (1 for the 'full' solver).
    solver_ : str
    n_threads_ : int
        Threads the fit used (``n_jobs`` resolved).
    mean_, scale_ : ndarray (n_features,)
        Target centring and scaling (scale is ones unless standardize).
    background_mean_, background_scale_ : ndarray (n_features,)
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X_target, X_background = rng.normal(size=(60, 10)), rng.normal(size=(60, 10))
    >>> X_target[:, :2] *= 3.0                            # genes 0 and 1 spread more in the target
    >>> from scontrast.cpca import CPCA
    >>> model = CPCA(n_components=2, random_state=0).fit(X_target, X_background)
    >>> float(model.alphas_[0]), len(model.alphas_)          # alpha = 0 (PCA of the target), then the chosen alphas
    (0.0, 4)
    >>> model.transform(X_target).shape
    (60, 2)
    """

    def __init__(self, n_components=2, alpha="auto", n_alphas=40, max_log_alpha=3, n_alpha_clusters=4,
                 affinity="loadings", standardize=False, random_state=None, solver="auto", tol=1e-10,
                 max_iter=500, merge_affinity=0.99, n_jobs=None):
        _store_shared_params(self, n_components, alpha, n_alphas, max_log_alpha, n_alpha_clusters, affinity,
                             standardize, random_state, tol, merge_affinity)
        self.solver = solver
        self.max_iter = max_iter
        self.n_jobs = n_jobs

    def _check_params(self) -> None:
        """Check the hyper-parameters (``fit`` resolves the alpha setting with :func:`_resolve_alpha`)."""
        check_count(self.n_components, "n_components", 1, "cpca")
        mode, _ = _resolve_alpha(self.alpha)
        n_alphas = check_count(self.n_alphas, "n_alphas", 1, "cpca")
        check_real(self.max_log_alpha, "max_log_alpha", -1, strict_min=True)
        p = check_count(self.n_alpha_clusters, "n_alpha_clusters", 2, "cpca")
        if mode == "auto" and p > n_alphas + 1:
            raise ScontrastError(f"n_alpha_clusters: expected at most n_alphas + 1 = {n_alphas + 1} "
                                 f"(the grid's size), got {p}")
        check_option(self.affinity, "affinity", _AFFINITIES)
        check_option(self.solver, "solver", _SOLVERS)
        check_real(self.tol, "tol", 0, 1, strict_min=True, strict_max=True)
        check_count(self.max_iter, "max_iter", 1, "cpca")
        check_bool(self.standardize, "standardize")
        check_real(self.merge_affinity, "merge_affinity", 0, 1, strict_min=True)
        _resolve_threads(self.n_jobs)

    def _pick_solver(self, d: int, k: int, n_cells: int) -> str:
        if self.solver != "auto":
            return self.solver
        if d <= max(_FULL_MAX_D, 8 * (k + 2)):
            return "full"
        if d <= n_cells and d <= _DENSE_MAX:
            return "covariance"
        if n_cells < d and n_cells <= _DENSE_MAX:
            return "gram"
        return "implicit"

    def fit(self, X, Y):
        """Fit on target X (n x d) and background Y (m x d); dense arrays or scipy.sparse.

        Returns
        -------
        self
        """
        self._check_params()
        k = int(self.n_components)
        mode, values = _resolve_alpha(self.alpha)
        rng = check_random_state(self.random_state)
        X, Y = check_pair(X, Y, min_rows=2)
        d = X.shape[1]
        if k > d:
            # one line naming both numbers, also what tl.cpca reports for a too small gene set
            raise ScontrastError(f"n_components: the gene set selects {d} gene(s), fewer than n_components={k}")
        grid = alpha_grid(self.n_alphas, self.max_log_alpha) if mode == "auto" else values
        solver = self._pick_solver(d, k, X.shape[0] + Y.shape[0])
        threads = _resolve_threads(self.n_jobs)
        moments = _Moments(X, Y, bool(self.standardize))
        U, theta, res, its, gram = _solve(moments, grid, k, solver, float(self.tol), int(self.max_iter), threads)
        bad = res > self.tol
        if bad.any():
            warnings.warn(f"cPCA did not converge to tol={self.tol:g} for {int(bad.sum())} alpha(s) within "
                          f"max_iter={self.max_iter} (largest relative residual {res.max():.2e})", ScontrastConvergenceWarning,
                          stacklevel=2)
        affinity = subspace_affinity(U, gram if self.affinity == "projection" else None)
        if mode == "auto":
            chosen, labels = select_alphas(affinity, int(self.n_alpha_clusters), rng)
            chosen = _merge_alike(chosen, affinity, grid, float(self.merge_affinity))
            keep = np.concatenate(([0], chosen))
        else:
            labels = np.full(grid.size, -1)
            keep = np.arange(grid.size)

        self.solver_ = solver
        self.n_threads_ = threads
        self.n_features_in_ = d
        self.mean_, self.scale_ = moments.mean_x, moments.scale_x
        self.background_mean_, self.background_scale_ = moments.mean_y, moments.scale_y
        self.alpha_grid_ = grid
        self.affinity_ = affinity
        self.alpha_labels_ = labels
        self.grid_explained_contrast_ = theta
        self.residuals_ = res
        self.n_iter_ = its
        self.alphas_ = grid[keep]
        self.components_ = U[keep].transpose(0, 2, 1).copy()
        self.explained_contrast_ = theta[keep]
        nonzero = np.flatnonzero(self.alphas_ > 0)
        self.default_index_ = int(nonzero[0]) if nonzero.size else 0
        self.default_alpha_ = float(self.alphas_[self.default_index_])
        # the scale of that warning: trace(C_X), from the solver's C_X or K_XX when it formed one
        variance = moments.trace_x if moments.trace_x is not None else _total_variance(X, moments.scale_x)
        _warn_if_no_contrast(self.explained_contrast_[self.default_index_], variance, self.default_alpha_)
        return self

    def _alpha_index(self, alpha) -> int:
        """Position in ``alphas_`` of a fitted alpha (None: the default one)."""
        check_is_fitted(self)
        if alpha is None:
            return self.default_index_
        hits = np.flatnonzero(np.isclose(self.alphas_, float(alpha), rtol=1e-9, atol=0.0))
        if hits.size == 0:
            raise ScontrastError(f"alpha: {alpha!r} was not fitted; the fitted alphas are "
                                 f"{np.round(self.alphas_, 6).tolist()}")
        return int(hits[0])

    def transform(self, X, alpha=None) -> np.ndarray:
        """Project cells onto the contrastive components of one fitted alpha.

        Cells are centred (and scaled) with the target's mean (and scale), so
        target and background cells passed here share one embedding.

        Parameters
        ----------
        X : (n, d) dense or sparse
        alpha : float or None
            A fitted alpha (one of ``alphas_``); None = ``default_alpha_``.

        Returns
        -------
        embedding : ndarray (n, n_components)
        """
        check_is_fitted(self)
        i = self._alpha_index(alpha)
        X = check_matrix(X, "X")
        if X.shape[1] != self.n_features_in_:
            raise ScontrastError(f"X: has {X.shape[1]} genes, the model was fitted on {self.n_features_in_}")
        W = (self.components_[i] * self.scale_[None, :]).T  # (d, k)
        return np.asarray(X @ W) - self.mean_ @ W

    def fit_transform(self, X, Y) -> np.ndarray:
        """``fit(X, Y).transform(X)`` at the default alpha, shape (n, n_components)."""
        return self.fit(X, Y).transform(X)
