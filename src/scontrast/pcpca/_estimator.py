"""The estimator :class:`PCPCA`: parameter checks, the fit (closed form or L-BFGS), and its use.

Inadmissible gamma. ``fit`` computes the admissible range's end once (``max_gamma_``) from
the scatter matrices it fits with. A requested gamma at or above it raises
(``on_inadmissible='error'``, the message states the bound) or is replaced by
``clip_fraction * max_gamma_`` with a warning (``'clip'``).
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
from scipy import linalg
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ..bounds import check_count
from ..core import (
    ScontrastConvergenceWarning,
    ScontrastError,
    ScontrastWarning,
    check_int,
    check_option,
    check_random_state,
    check_real,
    dense,
)
from ._checks import (
    _EIGEN_SOLVERS,
    _GAMMA_PRIME_DEFAULT,
    _ON_INADMISSIBLE,
    _SOLVERS,
    _check_cells,
    _check_groups,
    _contrast_strength,
)
from ._closed_form import _admissible_end, _canonical, _closed_form, _inadmissible, max_gamma
from ._missing import _LOG_2PI, _cellwise, _loglik_and_grad, _maximise, _observed, _stack
from ._scatter import _resolve_eigen_solver, _scatters, _Spectrum


class PCPCA(BaseEstimator):
    """Probabilistic contrastive PCA.

    Parameters
    ----------
    n_components : int, default 2
        Latent dimension k (below the number of genes).
    gamma : float >= 0 or None, default None
        Exponent on the background likelihood (sum scale: C = Xc'Xc - gamma Yc'Yc). When
        given it replaces ``gamma_prime``, which must then be left at its default (or None).
    gamma_prime : float >= 0 or None, default 0.5
        Sample-size-free contrast strength gamma' = gamma m / n (covariance scale:
        C / n = S_x - gamma' S_y; 0 = probabilistic PCA of the target cells). Used
        unless ``gamma`` is given. gamma' < 1 is necessary; the admissible range
        depends on the data (``max_gamma_prime_``).
    solver : {'auto', 'closed_form', 'lbfgs'}, default 'auto'
        'auto' uses the closed form for complete data and L-BFGS on the observed-data
        objective when X or Y has NaN. 'lbfgs' needs dense input.
    eigen_solver : {'auto', 'dense', 'arpack'}, default 'auto'
        'dense' forms and diagonalises the D x D matrix C; 'arpack' finds the top k
        eigenpairs of an implicit (centred) operator. 'auto' picks 'dense' up to 200 genes.
    max_iter : int >= 1, default 1000
        L-BFGS iterations (missing data).
    tol : float > 0, default 1e-9
        L-BFGS tolerance on the relative objective change and the projected gradient.
    on_inadmissible : {'error', 'clip'}, default 'error'
        When the requested gamma is at or above ``max_gamma_``: 'error' raises a
        ``ScontrastError`` stating the bound; 'clip' fits at ``clip_fraction *
        max_gamma_`` instead and warns (``ScontrastWarning``).
    clip_fraction : float in (0, 1), default 0.9
        See ``on_inadmissible``.
    random_state : None, int >= 0 or numpy Generator, default None
        Seeds the ARPACK start vectors.

    Attributes
    ----------
    W_ : (D, k) loadings, orthogonal columns by decreasing norm
    sigma2_ : float, noise variance
    mean_ : (D,) target mean (the model's mean; used by transform, sample, score)
    background_mean_ : (D,) background mean
    gamma_, gamma_prime_ : floats, the exponent used, on both scales (after any clipping)
    gamma_requested_ : float, the requested exponent (gamma scale)
    clipped_ : bool, whether the requested gamma was clipped
    max_gamma_, max_gamma_prime_ : floats, the excluded end of the admissible range on both
        scales (missing values imputed by the group means for it; see :func:`max_gamma`)
    eigenvalues_ : (k,) top eigenvalues of C (closed form / initialisation)
    objective_ : float, the fitted (observed-data) objective l(W, sigma^2)
    solver_ : str, the solver used
    n_iter_ : int, optimiser iterations (0 for the closed form)
    converged_ : bool
    optimizer_message_ : str
    objective_trace_ : (n_iter_ + 1,) objective at each L-BFGS iterate (missing data only)
    n_features_in_ : int, D

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X_target, X_background = rng.normal(size=(60, 10)), rng.normal(size=(60, 10))
    >>> X_target[:, :2] *= 3.0                            # genes 0 and 1 spread more in the target
    >>> from scontrast.pcpca import PCPCA
    >>> model = PCPCA(n_components=2, gamma_prime=0.5).fit(X_target, X_background)
    >>> model.transform(X_target).shape
    (60, 2)
    """

    def __init__(self, n_components=2, gamma=None, gamma_prime=_GAMMA_PRIME_DEFAULT, *, solver="auto",
                 eigen_solver="auto", max_iter=1000, tol=1e-9, on_inadmissible="error", clip_fraction=0.9,
                 random_state=None):
        self.n_components = n_components
        self.gamma = gamma
        self.gamma_prime = gamma_prime
        self.solver = solver
        self.eigen_solver = eigen_solver
        self.max_iter = max_iter
        self.tol = tol
        self.on_inadmissible = on_inadmissible
        self.clip_fraction = clip_fraction
        self.random_state = random_state

    # ------------------------------------------------------------------ fitting

    def fit(self, X, Y):
        """Fit W, sigma^2 and the means.

        Parameters
        ----------
        X : (n, D) target cells (dense or sparse; NaN = missing in dense input)
        Y : (m, D) background cells

        Returns
        -------
        self
        """
        self._check_params()
        return self._fit(X, Y, admissible_range=True)

    def _check_params(self) -> None:
        """Check the hyper-parameters (the contrast-strength rule of :func:`_contrast_strength` included)."""
        check_count(self.n_components, "n_components", 1, "pcpca")
        _contrast_strength(self.gamma, self.gamma_prime)
        check_option(self.solver, "solver", _SOLVERS)
        check_option(self.eigen_solver, "eigen_solver", _EIGEN_SOLVERS)
        check_count(self.max_iter, "max_iter", 1, "pcpca")
        check_real(self.tol, "tol", 0.0, strict_min=True)
        check_option(self.on_inadmissible, "on_inadmissible", _ON_INADMISSIBLE)
        check_real(self.clip_fraction, "clip_fraction", 0.0, 1.0, strict_min=True, strict_max=True)

    def _fit(self, X, Y, admissible_range):
        """:meth:`fit` after :meth:`_check_params`; with ``admissible_range=False`` the range's end is
        searched only to word an error.

        Then admissibility is the closed form's existence at the requested gamma (the same
        condition), ``on_inadmissible`` must be 'error', and ``max_gamma_`` /
        ``max_gamma_prime_`` are NaN: for the throw-away fits of :func:`heldout_loglik`,
        which would otherwise repeat the range search's eigenproblems for nothing.
        """
        k = int(self.n_components)
        value, given = _contrast_strength(self.gamma, self.gamma_prime)
        rng = check_random_state(self.random_state)
        X, Y, has_nan = _check_groups(X, Y, k)
        n, D = X.shape
        m = Y.shape[0]
        requested = value if given == "gamma" else value * n / m
        solver = self._resolve_solver(X, Y, has_nan)

        Sx, Sy = _scatters(X, Y)
        spec = _Spectrum(Sx, Sy, k, _resolve_eigen_solver(self.eigen_solver, D, k), rng)
        bound = _admissible_end(spec) if admissible_range else None
        gamma, clipped = self._gamma_to_fit(spec, requested, value, given, bound, has_nan)
        vals, U, rest = spec.top(gamma)
        W, sigma2, reason = _closed_form(vals, U, rest, D, n, m, gamma)
        if reason is not None:  # below the bound but l_k = ... = l_D (ties), or not searched
            bound = _admissible_end(spec) if bound is None else bound
            shown = value if not clipped else gamma if given == "gamma" else gamma * m / n
            raise ScontrastError(_inadmissible(given, shown, gamma, n, m, bound, reason, has_nan))
        self.mean_, self.background_mean_ = Sx.mu, Sy.mu
        self.gamma_, self.gamma_prime_ = float(gamma), float(gamma * m / n)
        self.gamma_requested_, self.clipped_ = float(requested), clipped
        bound = np.nan if bound is None else bound
        self.max_gamma_, self.max_gamma_prime_ = float(bound), float(bound * m / n)
        self.eigenvalues_ = vals
        self.n_features_in_ = D
        self.solver_ = solver
        if solver == "closed_form":
            self._set_closed_form(W, sigma2, vals, n, m, gamma)
        else:
            self._fit_observed(X, Y, Sx, Sy, W, sigma2, gamma)
        return self

    def _resolve_solver(self, X, Y, has_nan) -> str:
        """The solver used ('closed_form' or 'lbfgs') for this data."""
        solver = self.solver
        if solver == "auto":
            solver = "lbfgs" if has_nan else "closed_form"
        if solver == "closed_form" and has_nan:
            raise ScontrastError("solver: 'closed_form' cannot handle NaN; use 'lbfgs' or 'auto'")
        if solver == "lbfgs" and (sp.issparse(X) or sp.issparse(Y)):
            raise ScontrastError("solver: 'lbfgs' needs dense X and Y (sparse input has no missing values)")
        return solver

    def _gamma_to_fit(self, spec, requested, value, given, bound, has_nan):
        """``(gamma, clipped)``: the requested gamma, or at or above ``bound`` (None: not searched)
        an error (``on_inadmissible='error'``) or ``clip_fraction * bound`` with a warning."""
        if bound is None or not requested >= bound:
            return requested, False
        n, m, D = spec.Sx.n, spec.Sy.n, spec.Sx.mu.shape[0]
        if self.on_inadmissible == "error":
            reason = f"n - gamma*m = {n - requested * m:.4g} <= 0"
            if n - requested * m > 0:
                reason = _closed_form(*spec.top(requested), D, n, m, requested)[2] or "gamma >= max_gamma"
            raise ScontrastError(_inadmissible(given, value, requested, n, m, bound, reason, has_nan))
        gamma = float(self.clip_fraction) * bound
        warnings.warn(f"PCPCA: gamma_prime {requested * m / n:.4g} is not admissible (bound {bound * m / n:.4g}); "
                      f"clipped to {gamma * m / n:.4g}", ScontrastWarning, stacklevel=4)
        return gamma, True

    def _set_closed_form(self, W, sigma2, vals, n, m, gamma):
        """The fitted attributes of the closed-form solution (complete data)."""
        D, k = W.shape
        c = n - gamma * m
        self.W_ = _canonical(W)
        self.sigma2_ = sigma2
        # At the maximiser tr(A^{-1} C) = D c, so the objective has this closed form.
        logdet = float(np.sum(np.log(vals / c))) + (D - k) * np.log(sigma2)
        self.objective_ = -0.5 * c * (D * _LOG_2PI + logdet + D)
        self.n_iter_, self.converged_ = 0, True
        self.optimizer_message_ = "closed form"
        self.objective_trace_ = np.array([self.objective_])

    def _fit_observed(self, X, Y, Sx, Sy, W, sigma2, gamma):
        """L-BFGS on the observed-data objective from the closed form ``(W, sigma2)`` of the imputed data."""
        n, D = X.shape
        m = Y.shape[0]
        data = _stack(dense(X) - Sx.mu, dense(Y) - Sy.mu, gamma)
        W, sigma2, res, trace = _maximise(W, sigma2, data, int(self.max_iter), float(self.tol))
        value = _loglik_and_grad(W, sigma2, data, grad=False)[0]
        typical = (Sx.trace() / n) / D
        if not np.isfinite(value) or not np.all(np.isfinite(W)) or sigma2 < 1e-10 * typical:
            raise ScontrastError(
                f"gamma: the observed-data objective appears unbounded at gamma={gamma:.6g} "
                f"(gamma'={gamma * m / n:.6g}; sigma^2 -> {sigma2:.3g}); lower gamma"
            )
        self.W_ = _canonical(W)
        self.sigma2_ = sigma2
        self.objective_ = value
        self.n_iter_ = int(res.nit)
        self.converged_ = bool(res.success)
        self.optimizer_message_ = str(res.message)
        self.objective_trace_ = trace
        if not res.success:
            warnings.warn(f"PCPCA: L-BFGS stopped without converging: {res.message}", ScontrastConvergenceWarning,
                          stacklevel=4)

    def fit_transform(self, X, Y):
        """Fit, then return the posterior means of z for the target cells, shape (n, k)."""
        return self.fit(X, Y).transform(X)

    def max_gamma(self, X, Y):
        """The largest admissible gamma for this model's n_components (see :func:`max_gamma`)."""
        return max_gamma(X, Y, self.n_components, eigen_solver=self.eigen_solver,
                         random_state=self.random_state)

    # ------------------------------------------------------------------ using the fit

    def _check_new(self, X):
        """Check new cells against the fitted model; returns (X (N, D), has_nan)."""
        check_is_fitted(self)
        X, has_nan = _check_cells(X, "X")
        if X.shape[1] != self.n_features_in_:
            raise ScontrastError(f"X: has {X.shape[1]} genes, the model was fitted on {self.n_features_in_}")
        return X, has_nan

    def transform(self, X):
        """Posterior mean E[z | x] = (W'W + sigma^2 I)^{-1} W'(x - mean_).

        With NaN the posterior given the observed genes of each cell is used.

        Parameters
        ----------
        X : (N, D) cells, dense or sparse

        Returns
        -------
        (N, k) ndarray
        """
        X, has_nan = self._check_new(X)
        W, s2 = self.W_, self.sigma2_
        if has_nan:
            return _cellwise(W, s2, _observed(X - self.mean_))[3]
        Minv = np.linalg.inv(W.T @ W + s2 * np.eye(W.shape[1]))
        B = X @ W - self.mean_ @ W
        return np.asarray(B) @ Minv.T

    def score_samples(self, X):
        """Log-likelihood of each cell under N(mean_, W W' + sigma^2 I) (observed genes only with NaN).

        Parameters
        ----------
        X : (N, D) cells, dense or sparse

        Returns
        -------
        (N,) ndarray
        """
        X, has_nan = self._check_new(X)
        W, s2 = self.W_, self.sigma2_
        k = W.shape[1]
        if has_nan:
            data = _observed(X - self.mean_)
            _, _, _, _, logdet, quad = _cellwise(W, s2, data)
            return -0.5 * (data.d_obs * _LOG_2PI + logdet + quad)
        D = X.shape[1]
        M = W.T @ W + s2 * np.eye(k)
        Lc = linalg.cholesky(M, lower=True)
        logdet = (D - k) * np.log(s2) + 2.0 * np.sum(np.log(np.diag(Lc)))
        mu = self.mean_
        if sp.issparse(X):
            xx = np.asarray(X.multiply(X).sum(axis=1)).ravel() - 2.0 * (X @ mu) + mu @ mu
            B = np.asarray(X @ W) - mu @ W
        else:
            Xc = X - mu
            xx = np.einsum("ij,ij->i", Xc, Xc)
            B = Xc @ W
        Z = linalg.cho_solve((Lc, True), B.T).T
        quad = (xx - np.einsum("ij,ij->i", B, Z)) / s2
        return -0.5 * (D * _LOG_2PI + logdet + quad)

    def score(self, X):
        """Average log-likelihood of the cells of X (see :meth:`score_samples`)."""
        return float(np.mean(self.score_samples(X)))

    def sample(self, n_samples, random_state=None, noise=True):
        """Generate target-like cells x = W z + mean_ (+ e), z ~ N(0, I_k), e ~ N(0, sigma^2 I).

        Parameters
        ----------
        n_samples : int >= 1
        random_state : None, int >= 0 or numpy Generator
        noise : bool, add the isotropic noise e

        Returns
        -------
        (n_samples, D) ndarray
        """
        check_is_fitted(self)
        n_samples = check_int(n_samples, "n_samples", 1)
        rng = check_random_state(random_state)
        D, k = self.W_.shape
        Z = rng.standard_normal((n_samples, k))
        out = Z @ self.W_.T + self.mean_
        if noise:
            out += np.sqrt(self.sigma2_) * rng.standard_normal((n_samples, D))
        return out
