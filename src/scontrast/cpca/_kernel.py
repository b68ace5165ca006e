"""Kernel contrastive PCA (:class:`KernelCPCA`): :class:`CPCA` in the coordinates of a centred kernel."""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla
from sklearn.base import BaseEstimator
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.utils.validation import check_is_fitted

from ..core import (
    ScontrastError,
    check_bool,
    check_int,
    check_matrix,
    check_option,
    check_pair,
    check_random_state,
    check_real,
    dense,
)
from ._estimator import CPCA, _store_shared_params
from ._moments import _column_moments

_KERNELS = ("rbf", "poly", "linear")


class KernelCPCA(BaseEstimator):
    """Kernel contrastive PCA (Abid et al. 2018, Appendix E); a scikit-learn estimator, ``fit(X, Y)``.

    Target and background are mapped by a kernel; in feature space each set is
    centred on its own mean and cPCA is solved there. With the centred kernel
    ``K = L L'`` (``L = U_r diag(s_r)^{1/2}`` from its eigendecomposition, rank r)
    the rows of L are isometric coordinates of the centred feature vectors, so
    the dual eigenproblem of the block-row-scaled kernel becomes the symmetric
    r x r problem ``L_X' L_X / (n-1) - alpha L_Y' L_Y / (m-1)`` solved by
    :class:`CPCA` (automatic alpha included). The dual coefficients ``a``
    (minimum-norm representers) satisfy ``a' K a = 1`` and the embedding of the
    training cells is ``K a``. With a linear kernel the embedding spans the same
    space as cPCA's.

    The sets are scaled by 1/(n-1) and alpha/(m-1) (the paper writes 1/n and alpha/m)
    so that an alpha means the same contrast here as in :class:`CPCA` and the
    ``contrastive`` package; with n = m the two coincide. The eigenvalues of the
    block-row-scaled kernel are those of the symmetric problem above, so no
    non-symmetric eigensolver is needed.

    Parameters
    ----------
    kernel : {'rbf', 'poly', 'linear'}, default 'rbf'
    alpha : 'auto', float >= 0 or list, default 'auto'
    n_components : int, default 2
    gamma : float or None
        rbf/poly coefficient; None = 1 / n_features (scikit-learn's convention).
    degree : int, default 3; coef0 : float, default 1 (poly kernel)
    n_alphas, max_log_alpha, n_alpha_clusters, affinity, tol :
        as :class:`CPCA`.
    random_state : None, int >= 0 or numpy Generator, default None
        As :class:`CPCA` (the automatic alpha's spectral clustering).
    standardize : bool, default False
        Scale each input gene to unit variance within its own set before the kernel.
    rank_tol : float, default 1e-10
        Kernel eigenvalues below ``rank_tol * largest`` are dropped.
    merge_affinity : float, default 0.99
        As :class:`CPCA` (near-identical chosen alphas are reported once).

    Attributes
    ----------
    alphas_, default_alpha_, explained_contrast_, alpha_grid_, affinity_,
    alpha_labels_ : as :class:`CPCA`.
    dual_coef_ : ndarray (n_fitted, n + m, n_components)
        Coefficients ``a`` of each component over the training cells (target rows first).
    rank_ : int
        Numerical rank of the centred kernel.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X_target, X_background = rng.normal(size=(60, 10)), rng.normal(size=(60, 10))
    >>> X_target[:, :2] *= 3.0                            # genes 0 and 1 spread more in the target
    >>> from scontrast.cpca import KernelCPCA
    >>> model = KernelCPCA(n_components=2, alpha=1.0).fit(X_target, X_background)
    >>> model.transform(X_target).shape
    (60, 2)
    """

    def __init__(self, kernel="rbf", alpha="auto", n_components=2, gamma=None, degree=3, coef0=1.0,
                 n_alphas=40, max_log_alpha=3, n_alpha_clusters=4, affinity="loadings", standardize=False,
                 random_state=None, tol=1e-10, rank_tol=1e-10, merge_affinity=0.99):
        self.kernel = kernel
        _store_shared_params(self, n_components, alpha, n_alphas, max_log_alpha, n_alpha_clusters, affinity,
                             standardize, random_state, tol, merge_affinity)
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.rank_tol = rank_tol

    def _kernel(self, A, B):
        params = {}
        if self.kernel in ("rbf", "poly"):
            params["gamma"] = self._gamma
        if self.kernel == "poly":
            params.update(degree=self.degree, coef0=self.coef0)
        return pairwise_kernels(A, B, metric="polynomial" if self.kernel == "poly" else self.kernel, **params)

    def _scale_like_target(self, A):
        """New cells (n_new, d), checked and densified, centred and scaled as the target was in fit."""
        A = dense(check_matrix(A, "X"))
        if A.shape[1] != self._Z.shape[1]:
            raise ScontrastError(f"X: has {A.shape[1]} genes, the model was fitted on {self._Z.shape[1]}")
        return (A - self._in_mean) * self._in_scale

    def _check_params(self) -> None:
        """Check the hyper-parameters: the kernel's, then those of the cPCA solved in its coordinates."""
        check_option(self.kernel, "kernel", _KERNELS)
        check_real(self.gamma, "gamma", 0, strict_min=True, allow_none=True)
        check_int(self.degree, "degree", 1)
        check_real(self.coef0, "coef0")
        check_real(self.rank_tol, "rank_tol", 0, 1, strict_max=True)
        check_bool(self.standardize, "standardize")
        # cPCA in the kernel's coordinates: its parameters are checked before the kernel is built
        self._inner_cpca(None)._check_params()

    def _inner_cpca(self, random_state) -> CPCA:
        """The (unfitted) :class:`CPCA` solved in the kernel's coordinates."""
        return CPCA(n_components=self.n_components, alpha=self.alpha, n_alphas=self.n_alphas,
                    max_log_alpha=self.max_log_alpha, n_alpha_clusters=self.n_alpha_clusters,
                    affinity=self.affinity, standardize=False, random_state=random_state, tol=self.tol,
                    merge_affinity=self.merge_affinity)

    def fit(self, X, Y):
        """Fit on target X (n x d) and background Y (m x d). Returns self."""
        self._check_params()
        rng = check_random_state(self.random_state)
        inner = self._inner_cpca(rng)
        k = int(self.n_components)
        X, Y = check_pair(X, Y, min_rows=2)
        X, Y = dense(X), dense(Y)
        n, m = X.shape[0], Y.shape[0]
        self._gamma = 1.0 / X.shape[1] if self.gamma is None else float(self.gamma)
        if self.standardize:
            mx, sx = _column_moments(X, True)
            my, sy = _column_moments(Y, True)
            Xs, Ys = (X - mx) * sx, (Y - my) * sy
            # new data is mapped like the target
            self._in_mean, self._in_scale = mx, sx
        else:
            Xs, Ys = X, Y
            self._in_mean, self._in_scale = np.zeros(X.shape[1]), np.ones(X.shape[1])
        Z = np.vstack([Xs, Ys])
        K = self._kernel(Z, Z)
        groups = [slice(0, n), slice(n, n + m)]
        # feature-space centring, each set on its own mean
        col_mean = np.vstack([K[g].mean(axis=0) for g in groups])          # (2, N): mean over each set's rows
        block_mean = np.array([[K[g, h].mean() for h in groups] for g in groups])
        group_of = np.repeat([0, 1], [n, m])
        Kc = K - col_mean[group_of] - col_mean[group_of].T + block_mean[group_of][:, group_of]
        Kc = (Kc + Kc.T) / 2
        s, V = sla.eigh(Kc, driver="evd")
        keep = s > self.rank_tol * max(s.max(), 0.0)
        if not keep.any():
            raise ScontrastError("kernel: the centred kernel matrix is zero (no variance to contrast)")
        s, V = s[keep][::-1], V[:, keep][:, ::-1]
        L = V * np.sqrt(s)
        if k > L.shape[1]:
            raise ScontrastError(f"n_components: {k} exceeds the rank of the centred kernel ({L.shape[1]})")
        inner.fit(L[:n], L[n:])
        self.cpca_ = inner
        self.rank_ = int(L.shape[1])
        for name in ("alphas_", "default_alpha_", "default_index_", "explained_contrast_", "alpha_grid_", "affinity_",
                     "alpha_labels_", "residuals_"):
            setattr(self, name, getattr(inner, name))
        # minimum-norm dual coefficients: K a = L b and a' K a = b'b = 1
        self.dual_coef_ = np.einsum("nr,r,ark->ank", V, 1.0 / np.sqrt(s), inner.components_.transpose(0, 2, 1))
        self._Z = Z
        self._n = n
        self._col_mean_target = col_mean[0]
        self._row_target_mean = np.array([block_mean[0, 0], block_mean[0, 1]])[group_of]
        self._group_of = group_of
        self._groups = groups
        self._target_embedding = {i: L[:n] @ inner.components_[i].T for i in range(len(self.alphas_))}
        return self

    def transform(self, X, alpha=None) -> np.ndarray:
        """Embed cells (centred in feature space on the target mean), shape (n_cells, n_components)."""
        check_is_fitted(self)
        i = self.cpca_._alpha_index(alpha)
        A = self._scale_like_target(X)
        Kn = self._kernel(A, self._Z)
        own = np.column_stack([Kn[:, g].mean(axis=1) for g in self._groups])  # (n_new, 2)
        Kc = Kn - own[:, self._group_of] - self._col_mean_target[None, :] + self._row_target_mean[None, :]
        return Kc @ self.dual_coef_[i]

    def fit_transform(self, X, Y) -> np.ndarray:
        """Fit, then the target cells' embedding at the default alpha, shape (n, n_components)."""
        self.fit(X, Y)
        return self._target_embedding[self.default_index_].copy()
