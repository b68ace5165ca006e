"""The four cPCA solvers: agreement with each other and with a dense eigh, sparse input, one component."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp

from scontrast.core import ScontrastConvergenceWarning
from scontrast.cpca._alpha import alpha_grid
from scontrast.cpca._estimator import CPCA
from scontrast.cpca._simulate import synthetic

from ._helpers import assert_same_fit, sin_max_angle


def test_solvers_agree_on_the_grid(wide):
    X, Y, _ = wide
    full = CPCA(solver="full", random_state=0).fit(X, Y)
    for solver in ("covariance", "gram"):
        assert_same_fit(full, CPCA(solver=solver, random_state=0).fit(X, Y))


def test_gram_solver_with_more_genes_than_cells():
    # 90 + 80 cells, 400 genes: every direction outside the cells' span has no variance at all
    X, Y, _ = synthetic(90, 80, 400, seed=4)
    full = CPCA(solver="full", random_state=0).fit(X, Y)
    gram = CPCA(random_state=0).fit(sp.csr_matrix(X), Y)
    assert gram.solver_ == "gram"
    assert_same_fit(full, gram)


def test_more_than_1000_genes_without_pca():
    # the reference reduces d > 1000 to 1000 PCs and then cannot transform the original data;
    # here every gene is kept and the original data transform
    X, Y, _ = synthetic(150, 130, 1200, seed=6)
    model = CPCA(alpha=[0.0, 1.0, 30.0]).fit(sp.csr_matrix(X), sp.csr_matrix(Y))
    assert model.solver_ == "gram" and model.components_.shape == (3, 2, 1200)
    CX, CY = np.cov(X.T), np.cov(Y.T)
    for a, comps in zip(model.alphas_, model.components_):
        top = sla.eigh(CX - a * CY, subset_by_index=[1198, 1199])[1]
        assert sin_max_angle(top, comps.T) < 1e-6
    assert model.transform(X).shape == (150, 2)


def test_implicit_solver_matches_on_gene_aligned_data(readme):
    # the matrix-free iteration (gene-wise diagonal preconditioner) on the README example
    X, Y, _ = readme
    full = CPCA(solver="full", random_state=0).fit(X, Y)
    assert_same_fit(full, CPCA(solver="implicit", random_state=0).fit(sp.csr_matrix(X), sp.csr_matrix(Y)))


def test_grid_matches_dense_eigh(wide):
    X, Y, _ = wide
    model = CPCA(solver="covariance", random_state=0).fit(X, Y)
    Xc, Yc = X - X.mean(0), Y - Y.mean(0)
    CX, CY = Xc.T @ Xc / (len(X) - 1), Yc.T @ Yc / (len(Y) - 1)
    for a, comps in zip(model.alphas_, model.components_):
        w, E = np.linalg.eigh(CX - a * CY)
        assert sin_max_angle(E[:, -2:], comps.T) < 1e-6
    np.testing.assert_allclose(model.components_ @ model.components_.transpose(0, 2, 1),
                               np.broadcast_to(np.eye(2), (model.alphas_.size, 2, 2)), atol=1e-12)


@pytest.mark.parametrize("solver", ["full", "covariance", "gram"])
def test_sparse_equals_dense(wide, solver):
    X, Y, _ = wide
    X = np.maximum(X, 0)  # zeros, as in expression data
    Y = np.maximum(Y, 0)
    dense = CPCA(solver=solver, random_state=0, standardize=True).fit(X, Y)
    sparse = CPCA(solver=solver, random_state=0, standardize=True).fit(sp.csr_matrix(X), sp.csc_matrix(Y))
    np.testing.assert_array_equal(dense.alphas_, sparse.alphas_)
    np.testing.assert_allclose(sparse.components_, dense.components_, atol=1e-7)
    np.testing.assert_allclose(sparse.transform(sp.csr_matrix(X)), dense.transform(X), atol=1e-6)


def test_one_component(readme, wide):
    X, Y, _ = readme
    one = CPCA(n_components=1, random_state=0).fit(X, Y)
    assert one.components_.shape == (one.alphas_.size, 1, 30)
    assert one.transform(X).shape == (400, 1)
    CX, CY = np.cov(X.T), np.cov(Y.T)
    for a, comp in zip(one.alphas_, one.components_):
        top = np.linalg.eigh(CX - a * CY)[1][:, -1]
        assert abs(abs(top @ comp[0]) - 1) < 1e-10
    # with one component the affinity is the |cosine| between the directions
    U = CPCA(n_components=1, alpha=list(alpha_grid())).fit(X, Y).components_[:, 0, :]
    np.testing.assert_allclose(one.affinity_, np.abs(U @ U.T), atol=1e-10)
    Xw, Yw, _ = wide
    for solver in ("covariance", "gram", "implicit"):
        m = CPCA(n_components=1, alpha=[0.0, 3.0], solver=solver).fit(Xw, Yw)
        ref = CPCA(n_components=1, alpha=[0.0, 3.0], solver="full").fit(Xw, Yw)
        np.testing.assert_allclose(np.abs(np.sum(m.components_ * ref.components_, axis=2)), 1, atol=1e-10)


def test_unconverged_iteration_warns(wide):
    X, Y, _ = wide
    with pytest.warns(ScontrastConvergenceWarning, match="did not converge"):
        CPCA(solver="implicit", max_iter=2, alpha=[1.0]).fit(X, Y)


def test_dense_reference_eigh_path_is_exact(wide):
    X, Y, _ = wide
    m = CPCA(alpha=[2.0], solver="full").fit(X, Y)
    CX, CY = np.cov(X.T), np.cov(Y.T)
    w, E = sla.eigh(CX - 2.0 * CY)
    assert sin_max_angle(E[:, -2:], m.components_[0].T) < 1e-10
    np.testing.assert_allclose(m.explained_contrast_[0], w[::-1][:2], rtol=1e-10)
