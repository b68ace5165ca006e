"""Scatter matrices of the two groups and the top-k eigenproblems of C(gamma) = Sx - gamma Sy."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy import linalg
from scipy.sparse.linalg import ArpackError, LinearOperator, eigsh

from ..core import ScontrastError, blas_threads

# Up to this many features the contrastive scatter matrix is formed and fully diagonalised
# (exact trailing eigenvalue sum); above it a Lanczos top-k solve on an implicit operator is
# much faster (docs/pcpca.md) and never forms a D x D matrix.
_DENSE_MAX_FEATURES = 200
# Dense input up to this many genes: each group's D x D scatter matrix is formed once (32 MB at
# 2000 genes) and the Lanczos products use it.
_GRAM_MAX_FEATURES = 2000
# Dense eigh of C up to this many genes runs on one BLAS thread: a threaded one gains little there and
# its spinning threads stall on shared cores (docs/pcpca.md).
_EIGH_ONE_THREAD_MAX = 1000


def _column_means(A, name):
    """Per-gene mean of one group over its observed entries, shape (D,)."""
    if sp.issparse(A):
        return np.asarray(A.mean(axis=0)).ravel()
    observed = (~np.isnan(A)).sum(axis=0)
    if (observed == 0).any():
        j = int(np.flatnonzero(observed == 0)[0])
        raise ScontrastError(f"{name}: gene {j} has no observed value")
    return np.nansum(A, axis=0) / observed


def _scatters(X, Y):
    """Scatter matrices of both groups, missing entries imputed by the group mean."""
    mx, my = _column_means(X, "X"), _column_means(Y, "Y")
    if not sp.issparse(X):
        X = np.where(np.isnan(X), mx, X)
    if not sp.issparse(Y):
        Y = np.where(np.isnan(Y), my, Y)
    return _Scatter(X, mx), _Scatter(Y, my)


class _Scatter:
    """Scatter matrix S = (A - 1 mu')'(A - 1 mu') of one group (D x D, never formed for sparse A).

    Parameters
    ----------
    A : (n, D) ndarray or CSR matrix without NaN
    mu : (D,) ndarray, the group mean used for centring
    """

    def __init__(self, A, mu):
        self.n = A.shape[0]
        self.mu = mu
        self.sparse = sp.issparse(A)
        # Dense data is centred explicitly (exact); sparse data implicitly, so it stays sparse.
        self.A = A if self.sparse else A - mu
        self._gram = None

    def _cached_gram(self):
        """The formed D x D matrix for dense data of moderate width, else None.

        A Lanczos solve needs ~100 products; with the matrix formed once (one BLAS syrk-like
        product) each costs D^2 instead of 2 n D and reads 8 D^2 bytes instead of 16 n D
        (timings in docs/pcpca.md).
        """
        if self.sparse or self.A.shape[1] > _GRAM_MAX_FEATURES:
            return None
        if self._gram is None:
            self._gram = self.A.T @ self.A
        return self._gram

    def trace(self):
        if self.sparse:
            return float(self.A.multiply(self.A).sum() - self.n * (self.mu @ self.mu))
        return float(np.einsum("ij,ij->", self.A, self.A))

    def dense(self):
        """The D x D scatter matrix (a new array)."""
        if self.sparse:
            G = (self.A.T @ self.A).toarray()
            return G - self.n * np.outer(self.mu, self.mu)
        G = self._cached_gram()
        return self.A.T @ self.A if G is None else G.copy()

    def matmat(self, V):
        """S @ V for V of shape (D, r)."""
        if self.sparse:
            return self.A.T @ (self.A @ V) - self.n * np.outer(self.mu, self.mu @ V)
        G = self._cached_gram()
        return self.A.T @ (self.A @ V) if G is None else G @ V

    def quad_trace(self, U):
        """tr(U' S U) for U of shape (D, r)."""
        G = self._cached_gram()
        if G is not None:
            return float(np.einsum("ij,ij->", U, G @ U))
        AU = self.A @ U
        if self.sparse:
            AU = AU - np.outer(np.ones(self.n), self.mu @ U)
        return float(np.einsum("ij,ij->", AU, AU))


def _resolve_eigen_solver(eigen_solver, D, k):
    """The eigensolver used for ``eigen_solver`` ('auto', 'dense', 'arpack') at D genes and k components."""
    if eigen_solver == "auto":
        return "dense" if D <= _DENSE_MAX_FEATURES else "arpack"
    if eigen_solver == "arpack" and k >= D - 1:
        return "dense"  # ARPACK needs k < D - 1
    return eigen_solver


def _top_eigenpairs(Sx, Sy, gamma, k, solver, rng, full=True, v0=None):
    """Top-k eigenpairs of C = Sx - gamma Sy (``v0``: optional ARPACK start vector, shape (D,)).

    Returns
    -------
    vals : (k,) descending eigenvalues
    U : (D, k) orthonormal eigenvectors
    rest : sum of the other D - k eigenvalues (only when ``full``; else None)
    """
    D = Sx.mu.shape[0]
    if solver == "dense":
        C = Sx.dense() - gamma * Sy.dense()
        with blas_threads(1 if D <= _EIGH_ONE_THREAD_MAX else None):
            if full:
                w, V = linalg.eigh(C, overwrite_a=True, check_finite=False)
                w, V = w[::-1], V[:, ::-1]
                return w[:k].copy(), np.ascontiguousarray(V[:, :k]), float(np.sum(w[k:]))
            w, V = linalg.eigh(C, subset_by_index=[D - k, D - 1], overwrite_a=True, check_finite=False)
        return w[::-1].copy(), np.ascontiguousarray(V[:, ::-1]), None

    op = LinearOperator(
        (D, D),
        matvec=lambda v: (Sx.matmat(v.reshape(-1, 1)) - gamma * Sy.matmat(v.reshape(-1, 1))).ravel(),
        matmat=lambda V: Sx.matmat(V) - gamma * Sy.matmat(V),
        dtype=np.float64,
    )
    # ARPACK's own start vector is unseeded; a seeded one makes results reproducible.
    if v0 is None:
        v0 = rng.uniform(-1.0, 1.0, size=D)
    ncv = min(D, max(2 * k + 1, 24))
    try:
        w, V = eigsh(op, k=k, which="LA", v0=v0, ncv=ncv, tol=0.0, maxiter=max(1000, 10 * D))
    except ArpackError:
        if not _vanishes(Sx, Sy, gamma, rng, D):
            raise
        # C = 0 (the groups' scatters are proportional, e.g. the same cells, at gamma = n/m): every
        # eigenvalue is 0 and any basis is an eigenbasis, what the dense solver returns too; ARPACK
        # fails on it ("starting vector is zero": the Krylov space of any start is {0}).
        w, V = np.zeros(k), linalg.qr(rng.standard_normal((D, k)), mode="economic")[0]
    order = np.argsort(w)[::-1]
    w, V = w[order], V[:, order]
    rest = Sx.trace() - gamma * Sy.trace() - float(w.sum()) if full else None
    return w, np.ascontiguousarray(V), rest


def _vanishes(Sx, Sy, gamma, rng, D, probes=2):
    """Whether C = Sx - gamma Sy is zero (to rounding): C v against Sx v + gamma Sy v for random v."""
    V = rng.standard_normal((D, probes))
    CV = Sx.matmat(V) - gamma * Sy.matmat(V)
    scale = np.linalg.norm(Sx.matmat(V)) + abs(gamma) * np.linalg.norm(Sy.matmat(V))
    return bool(np.linalg.norm(CV) <= 1e-10 * max(scale, np.finfo(float).tiny))


class _Spectrum:
    """The top-k eigenproblems of C(gamma) = Sx - gamma Sy for one pair of groups.

    Full solves (eigenpairs and trailing sum) are kept by gamma, so the search for the
    admissible range and the fit share the solves they both need (gamma = 0 for
    probabilistic PCA, gamma = n/m) instead of redoing them.

    Parameters
    ----------
    Sx, Sy : :class:`_Scatter` of the target (n cells) and background (m cells), D genes
    k : int, number of components
    solver : 'dense' or 'arpack' (resolved)
    rng : numpy Generator (ARPACK start vectors)
    """

    def __init__(self, Sx, Sy, k, solver, rng):
        self.Sx, self.Sy, self.k, self.solver, self.rng = Sx, Sy, k, solver, rng
        self._full = {}

    def top(self, gamma, full=True, v0=None):
        """:func:`_top_eigenpairs` at ``gamma``: ``(vals (k,), U (D, k), rest or None)``."""
        if not full or v0 is not None:
            return _top_eigenpairs(self.Sx, self.Sy, gamma, self.k, self.solver, self.rng, full=full, v0=v0)
        key = float(gamma)
        if key not in self._full:
            self._full[key] = _top_eigenpairs(self.Sx, self.Sy, key, self.k, self.solver, self.rng)
        return self._full[key]
