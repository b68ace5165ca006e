"""Kernel cPCA: the linear kernel spans cPCA's space, the dual eigenproblem, automatic alpha."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import silhouette_score

from scontrast.cpca._estimator import CPCA
from scontrast.cpca._kernel import KernelCPCA

from ._helpers import sin_max_angle


def test_linear_kernel_spans_the_cpca_space(readme):
    X, Y, _ = readme
    Xn = np.random.default_rng(5).normal(size=(50, 30)) * 3
    for alpha in (0.0, 1.5, 40.0):
        lin = KernelCPCA(kernel="linear", alpha=alpha).fit(X, Y)
        ours = CPCA(alpha=alpha).fit(X, Y)
        assert sin_max_angle(lin.fit_transform(X, Y), ours.transform(X)) < 1e-8
        assert sin_max_angle(lin.transform(Xn), ours.transform(Xn)) < 1e-8
        np.testing.assert_allclose(lin.explained_contrast_, ours.explained_contrast_, rtol=1e-8)
    # the automatic choice is the same too (principal angles are invariant under the isometry)
    for affinity in ("loadings", "projection"):
        lin = KernelCPCA(kernel="linear", affinity=affinity, random_state=0).fit(X[::2], Y[::2])
        ours = CPCA(affinity=affinity, random_state=0).fit(X[::2], Y[::2])
        np.testing.assert_allclose(lin.alphas_, ours.alphas_)
        np.testing.assert_allclose(lin.affinity_, ours.affinity_, atol=1e-7)


@pytest.mark.parametrize("kernel", ["rbf", "poly"])
def test_kernel_cpca_solves_the_dual_eigenproblem(kernel):
    rng = np.random.default_rng(2)
    # target: two rings (radius 1 and 3) in dims 0-1; background: one ring of radius 2.2, so the
    # squared radius varies in the target only (x, y, x^2, y^2, xy vary in both)
    n, m = 120, 100
    t, tb = rng.uniform(0, 2 * np.pi, n), rng.uniform(0, 2 * np.pi, m)
    r = np.where(np.arange(n) % 2 == 0, 1.0, 3.0)
    X = np.column_stack([r * np.cos(t), r * np.sin(t), rng.normal(0, 1, (n, 2))]) + rng.normal(0, 0.1, (n, 4))
    Y = np.column_stack([2.2 * np.cos(tb), 2.2 * np.sin(tb), rng.normal(0, 1, (m, 2))]) + rng.normal(0, 0.1, (m, 4))
    alpha, gamma = 2.0, (0.1 if kernel == "rbf" else 0.5)
    model = KernelCPCA(kernel=kernel, alpha=alpha, gamma=gamma, degree=2).fit(X, Y)
    a = model.dual_coef_[0]
    Z = np.vstack([X, Y])
    from sklearn.metrics.pairwise import pairwise_kernels
    K = pairwise_kernels(Z, Z, metric="rbf" if kernel == "rbf" else "polynomial", gamma=gamma,
                         **({} if kernel == "rbf" else {"degree": 2, "coef0": 1.0}))
    H = np.zeros((n + m, n + m))
    H[:n, :n] = np.eye(n) - 1.0 / n
    H[n:, n:] = np.eye(m) - 1.0 / m
    Kc = H @ K @ H
    np.testing.assert_allclose(a.T @ Kc @ a, np.eye(2), atol=1e-8)
    E = Kc @ a
    S = np.r_[np.full(n, 1.0 / (n - 1)), np.full(m, -alpha / (m - 1))]
    lam = model.explained_contrast_[0]
    # K S e = lambda e: the block-row-scaled kernel eigenproblem of the paper, on the embedding
    np.testing.assert_allclose(Kc @ (S[:, None] * E), E * lam[None, :], atol=1e-7 * np.abs(lam).max())
    # and the top eigenvalues of S K are the lambdas
    ev = np.sort(np.real(np.linalg.eigvals(S[:, None] * Kc)))[::-1]
    np.testing.assert_allclose(ev[:2], lam, rtol=1e-6)
    np.testing.assert_allclose(model.transform(X), E[:n], atol=1e-8)
    np.testing.assert_allclose(model.fit_transform(X, Y), E[:n], atol=1e-8)
    # the rings separate in the kernel embedding, not in the linear one
    kernel_sil = silhouette_score(model.transform(X), r)
    linear_sil = silhouette_score(CPCA(alpha=alpha).fit(X, Y).transform(X), r)
    print(f"{kernel}: silhouette of the two rings, kernel cPCA {kernel_sil:.3f}, linear cPCA {linear_sil:.3f}")
    assert kernel_sil > 0.5 > 0.1 > linear_sil


def test_kernel_automatic_alpha_runs(readme):
    X, Y, _ = readme
    model = KernelCPCA(kernel="rbf", random_state=0).fit(X[::2], Y[::2])
    assert model.alphas_[0] == 0 and 2 <= model.alphas_.size <= 4
    assert model.transform(X).shape == (400, 2)
