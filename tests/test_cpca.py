"""Contrastive PCA: agreement with the `contrastive` package, solver agreement, kernel cPCA."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.metrics import silhouette_score

from benchmarks import bench_cpca
from scontrast.core import ScontrastError, blas_threads
from scontrast.cpca import CPCA, KernelCPCA, alpha_grid, select_alphas, subspace_affinity

contrastive = pytest.importorskip("contrastive")


@pytest.fixture(autouse=True, scope="module")
def one_blas_thread():
    """One BLAS thread: the CI and development machines share two cores between jobs."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


def sin_max_angle(A, B):
    """Sine of the largest principal angle between span(A) and span(B) (columns)."""
    qa, qb = np.linalg.qr(A)[0], np.linalg.qr(B)[0]
    # the norm of the part of span(B) outside span(A): accurate for tiny angles, unlike sqrt(1 - cos^2)
    return float(np.linalg.norm(qb - qa @ (qa.T @ qb), 2))


def reference_directions(ref, alpha, d):
    """The reference package's top eigenvectors at alpha, shape (d, k): its projection of the identity."""
    return np.real(ref.cpca_alpha(np.eye(d), alpha))


@pytest.fixture(scope="module")
def readme():
    """The example of the contrastive README: 400 points, 30 dims, four target groups."""
    return bench_cpca.readme_data(seed=0)


@pytest.fixture(scope="module")
def wide():
    """d = 300 with heteroscedastic genes, shared factors and a target-only group structure."""
    return bench_cpca.synthetic(600, 500, 300, seed=3)


# ------------------------------------------------------------------ reference


@pytest.mark.parametrize("standardize", [False, True])
def test_fixed_alphas_match_contrastive_readme(readme, standardize):
    X, Y, _ = readme
    ref = contrastive.CPCA(standardize=standardize)
    ref.fit(X, Y)
    alphas = [0.0, 0.3, 2.0, 17.0, 400.0]
    ours = CPCA(alpha=alphas, standardize=standardize).fit(X, Y)
    assert ours.solver_ == "full"
    for i, a in enumerate(alphas):
        assert sin_max_angle(reference_directions(ref, a, 30), ours.components_[i].T) < 1e-6


@pytest.mark.parametrize("solver", ["full", "covariance", "gram"])
def test_fixed_alphas_match_contrastive_d300(wide, solver):
    X, Y, _ = wide
    ref = contrastive.CPCA(standardize=False)
    ref.fit(X, Y)
    alphas = [0.0, 0.7, 5.0, 60.0]
    ours = CPCA(alpha=alphas, solver=solver).fit(X, Y)
    for i, a in enumerate(alphas):
        U = reference_directions(ref, a, X.shape[1])
        assert sin_max_angle(U, ours.components_[i].T) < 1e-6, (solver, a)
        # eigenvalues: the Rayleigh quotients of the reference directions
        A = ref.fg_cov - a * ref.bg_cov
        Uq = np.linalg.qr(U)[0]
        ref_vals = np.sort(np.linalg.eigvalsh(Uq.T @ A @ Uq))[::-1]
        np.testing.assert_allclose(ours.explained_contrast_[i], ref_vals, rtol=1e-8, atol=1e-8 * abs(ref_vals).max())


def test_automatic_alphas_match_contrastive_readme(readme):
    X, Y, _ = readme
    ref = contrastive.CPCA(standardize=False)
    ref.fit(X, Y)
    np.random.seed(0)  # noqa: NPY002  (the reference's spectral clustering draws from the global state)
    _, ref_alphas = ref.transform(X, alpha_selection="auto", return_alphas=True)
    ours = CPCA(affinity="projection", random_state=0).fit(X, Y)
    np.testing.assert_allclose(ours.affinity_, ref.affinity_matrix, atol=1e-8)
    np.testing.assert_allclose(ours.alphas_, ref_alphas, rtol=1e-12)
    assert ours.alphas_[0] == 0 and ours.alpha_grid_.size == 41
    # the clustering is not an accident of the seed
    for seed in (1, 2, 3):
        np.testing.assert_allclose(CPCA(affinity="projection", random_state=seed).fit(X, Y).alphas_, ref_alphas)


def test_cpca_separates_the_groups_where_pca_does_not(readme):
    X, Y, labels = readme
    model = CPCA(random_state=0).fit(X, Y)
    pca = silhouette_score(model.transform(X, alpha=0.0), labels)
    cpca = max(silhouette_score(model.transform(X, alpha=a), labels) for a in model.alphas_[1:])
    print(f"silhouette of the four target groups: PCA {pca:.3f}, best cPCA alpha {cpca:.3f}")
    assert pca < 0.1
    assert cpca > 0.5


# ----------------------------------------------------------------- solvers


def _assert_same_fit(full, other):
    assert other.residuals_.max() <= 1e-10
    np.testing.assert_allclose(other.affinity_, full.affinity_, atol=1e-7)
    np.testing.assert_array_equal(other.alphas_, full.alphas_)
    for a, b in zip(full.components_, other.components_):
        assert sin_max_angle(a.T, b.T) < 1e-6
    np.testing.assert_allclose(other.grid_explained_contrast_, full.grid_explained_contrast_, rtol=1e-8,
                               atol=1e-9 * np.abs(full.grid_explained_contrast_).max())


def test_solvers_agree_on_the_grid(wide):
    X, Y, _ = wide
    full = CPCA(solver="full", random_state=0).fit(X, Y)
    for solver in ("covariance", "gram"):
        _assert_same_fit(full, CPCA(solver=solver, random_state=0).fit(X, Y))


def test_gram_solver_with_more_genes_than_cells():
    # 90 + 80 cells, 400 genes: every direction outside the cells' span has no variance at all
    X, Y, _ = bench_cpca.synthetic(90, 80, 400, seed=4)
    full = CPCA(solver="full", random_state=0).fit(X, Y)
    gram = CPCA(random_state=0).fit(sp.csr_matrix(X), Y)
    assert gram.solver_ == "gram"
    _assert_same_fit(full, gram)


def test_more_than_1000_genes_without_pca():
    # the reference reduces d > 1000 to 1000 PCs and then cannot transform the original data;
    # here every gene is kept and the original data transform
    X, Y, _ = bench_cpca.synthetic(150, 130, 1200, seed=6)
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
    _assert_same_fit(full, CPCA(solver="implicit", random_state=0).fit(sp.csr_matrix(X), sp.csr_matrix(Y)))


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


def test_reproducible_and_seeded(readme):
    X, Y, _ = readme
    a = CPCA(random_state=7).fit(X, Y)
    b = CPCA(random_state=7).fit(X, Y)
    np.testing.assert_array_equal(a.alphas_, b.alphas_)
    np.testing.assert_array_equal(a.components_, b.components_)
    np.testing.assert_array_equal(a.affinity_, b.affinity_)
    # deterministic signs: the largest loading of every component is positive
    idx = np.abs(a.components_).argmax(axis=2)
    assert (np.take_along_axis(a.components_, idx[..., None], axis=2) > 0).all()


def test_transform_uses_target_centring(readme):
    X, Y, _ = readme
    model = CPCA(alpha=5.0).fit(X, Y)
    W = model.components_[0].T
    np.testing.assert_allclose(model.transform(Y), (Y - X.mean(0)) @ W, atol=1e-10)
    np.testing.assert_allclose(model.fit_transform(X, Y), (X - X.mean(0)) @ W, atol=1e-10)
    assert model.default_alpha_ == 5.0 and model.alphas_.tolist() == [5.0]


def test_affinity_and_selection_helpers():
    rng = np.random.default_rng(0)
    q = np.linalg.qr(rng.standard_normal((10, 4)))[0]
    U = np.stack([q[:, :2], q[:, [0, 2]], q[:, 2:]])
    aff = subspace_affinity(U)
    np.testing.assert_allclose(aff, [[1, 0, 0], [0, 1, 0], [0, 0, 1]], atol=1e-12)
    c, s = np.cos(0.3), np.sin(0.3)
    V = np.stack([q[:, :2], np.column_stack([q[:, 0], c * q[:, 1] + s * q[:, 2]])])
    np.testing.assert_allclose(subspace_affinity(V)[0, 1], c, atol=1e-12)
    block = np.kron(np.eye(3), np.ones((4, 4))) * 0.9 + np.eye(12) * 0.1 + 0.01
    chosen, labels = select_alphas(block, 3, random_state=0)
    assert len(chosen) == 2 and 0 not in chosen and len(set(labels[[0, 4, 8]])) == 3


def test_bad_input_raises():
    """Every refusal is a one-line ScontrastError starting with the name of what is wrong."""
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(20, 5)), rng.normal(size=(30, 5))
    bad = [
        (CPCA(alpha=-1.0), (X, Y), r"^alpha: expected"),
        (CPCA(alpha="best"), (X, Y), r"^alpha: expected"),
        (CPCA(alpha=[]), (X, Y), r"^alpha: .*empty list"),
        (CPCA(n_components=6), (X, Y), r"^n_components: the gene set selects 5 gene\(s\), fewer than n_components=6"),
        (CPCA(n_components=0), (X, Y), r"^n_components: expected an integer >= 1"),
        (CPCA(), (X, Y[:, :4]), r"^Y: has 4 genes, X has 5"),
        (CPCA(affinity="angles"), (X, Y), r"^affinity: expected one of"),
        (CPCA(solver="lanczos"), (X, Y), r"^solver: expected one of"),
        (CPCA(n_alpha_clusters=1), (X, Y), r"^n_alpha_clusters: expected an integer >= 2"),
        (CPCA(n_alphas=3, n_alpha_clusters=5), (X, Y), r"^n_alpha_clusters: expected at most n_alphas \+ 1 = 4"),
        (CPCA(max_log_alpha=-1), (X, Y), r"^max_log_alpha: expected a finite number > -1"),
        (CPCA(tol=1.0), (X, Y), r"^tol: expected"),
        (CPCA(max_iter=0), (X, Y), r"^max_iter: expected an integer >= 1"),
        (CPCA(standardize=1), (X, Y), r"^standardize: expected True or False"),
        (CPCA(), (np.where(X > 2, np.nan, X), Y), r"^X: contains \d+ NaN"),
        (CPCA(), (X[:1], Y), r"^X: needs at least 2 cells, got 1"),
        (KernelCPCA(kernel="sigmoid"), (X, Y), r"^kernel: expected one of"),
        (KernelCPCA(gamma=0.0), (X, Y), r"^gamma: expected a finite number > 0"),
        (KernelCPCA(rank_tol=1.0), (X, Y), r"^rank_tol: expected"),
        (KernelCPCA(kernel="linear", alpha=1.0, n_components=6), (X, Y), r"^n_components: 6 exceeds the rank"),
    ]
    for est, args, message in bad:
        with pytest.raises(ScontrastError, match=message):
            est.fit(*args)
    model = CPCA(alpha=[1.0, 2.0]).fit(X, Y)
    with pytest.raises(ScontrastError, match=r"^alpha: 3.0 was not fitted"):
        model.transform(X, alpha=3.0)
    with pytest.raises(ScontrastError, match=r"^X: has 4 genes, the model was fitted on 5"):
        model.transform(X[:, :4])
    with pytest.raises(NotFittedError):
        CPCA().transform(X)
    with pytest.raises(NotFittedError):
        KernelCPCA().transform(X)
    with pytest.raises(ScontrastError, match=r"^X: has 4 genes"):
        KernelCPCA(alpha=1.0).fit(X, Y).transform(X[:, :4])


def test_scikit_learn_estimators_clone_and_take_a_generator(readme):
    """clone/get_params/set_params work, and a numpy Generator seeds the clustering like its int."""
    X, Y, _ = readme
    model = CPCA(n_components=1, alpha=[0.0, 2.0])
    twin = clone(model)
    assert twin.get_params() == model.get_params() and twin is not model
    assert CPCA().set_params(solver="gram").solver == "gram"
    assert "rank_tol" in KernelCPCA().get_params()
    by_int = CPCA(random_state=5).fit(X, Y)
    by_generator = CPCA(random_state=np.random.default_rng(5)).fit(X, Y)
    np.testing.assert_array_equal(by_int.alphas_, by_generator.alphas_)
    np.testing.assert_array_equal(by_int.alpha_labels_, by_generator.alpha_labels_)
    rng = np.random.default_rng(5)
    kernel = KernelCPCA(kernel="linear", random_state=rng).fit(X[::2], Y[::2])
    assert kernel.random_state is rng and kernel.alphas_[0] == 0


def test_unconverged_iteration_warns(wide):
    X, Y, _ = wide
    with pytest.warns(UserWarning, match="did not converge"):
        CPCA(solver="implicit", max_iter=2, alpha=[1.0]).fit(X, Y)


# ------------------------------------------------------------------ kernel


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


# ------------------------------------------------------------- benchmark core


def test_benchmark_core_runs_on_tiny_sizes():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = bench_cpca.speed_rows(dims=(40,), n=150, repeats=1)
    assert rows and rows[0]["d"] == 40 and rows[0]["ratio"] > 0 and rows[0]["same_alphas"] in (True, False)
    sparse = bench_cpca.sparse_row(n_cells=200, n_genes=300)
    assert sparse["seconds"] > 0 and sparse["max_residual"] < 1e-6
    floor = bench_cpca.floor_times(d=40, n=150)
    parts = list(floor.values())
    assert all(v > 0 for v in parts)
    # the bound: both covariances + the cheapest reduction + half the congruence and products
    assert floor["lower bound on two cores (see docstring)"] == pytest.approx(
        parts[1] + min(parts[2], parts[3], parts[6]) + (parts[4] + parts[5]) / 2)


def test_dense_reference_eigh_path_is_exact(wide):
    X, Y, _ = wide
    m = CPCA(alpha=[2.0], solver="full").fit(X, Y)
    CX, CY = np.cov(X.T), np.cov(Y.T)
    w, E = sla.eigh(CX - 2.0 * CY)
    assert sin_max_angle(E[:, -2:], m.components_[0].T) < 1e-10
    np.testing.assert_allclose(m.explained_contrast_[0], w[::-1][:2], rtol=1e-10)


# ------------------------------------------------------------- two-task paths


def test_two_task_paths_match_the_reference_eigh(wide):
    """With two BLAS threads allowed, the covariance and gram solvers run pairs of single-threaded
    tasks side by side (halved products, the grid split in two); the answers are those of eigh."""
    from threadpoolctl import threadpool_limits

    from scontrast import cpca as C

    X, Y, _ = wide
    full = CPCA(solver="full", random_state=0).fit(X, Y)
    with threadpool_limits(2):
        assert C._two_tasks()
        with blas_threads(1):
            assert not C._two_tasks()  # the pairs' own setting: one thread per task
        _assert_same_fit(full, CPCA(solver="covariance", random_state=0).fit(X, Y))
        _assert_same_fit(full, CPCA(solver="gram", random_state=0).fit(sp.csr_matrix(X), Y))
        # the halved building blocks against direct products
        rng = np.random.default_rng(1)
        A = rng.normal(size=(40, 31))
        with blas_threads(1):
            G = C._gram_two_tasks(A)
            np.testing.assert_allclose(G, A.T @ A, rtol=1e-12, atol=1e-12)
            assert np.array_equal(G, G.T)
            S = A.T @ A + np.eye(31)
            Q = np.linalg.qr(rng.normal(size=(31, 31)))[0]
            for L in (np.linalg.cholesky(S), None):
                np.testing.assert_allclose(C._congruence_two_tasks(S, Q, L), Q.T @ S @ Q, rtol=1e-10, atol=1e-10)
            mean = A.mean(axis=0)
            np.testing.assert_allclose(C._covariance(A, mean, np.ones(31), two_tasks=True), np.cov(A.T),
                                       rtol=1e-12, atol=1e-12)
        # tiny problems forced onto the dense solvers
        Xs, Ys = X[:, :3], Y[:, :3]
        for solver in ("covariance", "gram"):
            small = CPCA(solver=solver, n_components=1, alpha=[0.0, 2.0]).fit(Xs, Ys)
            ref = CPCA(solver="full", n_components=1, alpha=[0.0, 2.0]).fit(Xs, Ys)
            np.testing.assert_allclose(np.abs(np.sum(small.components_ * ref.components_, axis=2)), 1, atol=1e-10)
    assert not C._two_tasks()  # the module fixture's one thread is back


def test_davidson_continuation_matches_eigh_on_random_problems():
    """The batched Davidson with coarse-to-fine starts (shared Rayleigh-Ritz) against
    scipy.linalg.eigh on random symmetric B - alpha diag(lam), including clustered lam."""
    from scontrast import cpca as C

    rng = np.random.default_rng(3)
    r = 160
    for trial in range(3):
        F = rng.normal(size=(r, r // 2))
        B = F @ F.T / r + np.diag(rng.uniform(0, 2, r))
        lam = np.sort(rng.gamma(0.5 if trial else 2.0, 1.0, r))
        if trial == 2:
            lam[:20] = lam[0]  # a cluster at the bottom of the background spectrum
        alphas = alpha_grid(20, 2)
        Z, theta, res, its, gram = C._diagonal_basis_solve(B.copy(), lam, alphas, 2, 1e-10, 500)
        assert res.max() <= 1e-10
        for i, a in enumerate(alphas):
            w, E = sla.eigh(B - a * np.diag(lam), subset_by_index=[r - 2, r - 1])
            assert sin_max_angle(E, Z[i]) < 1e-7, (trial, a)
            np.testing.assert_allclose(theta[i], w[::-1], rtol=1e-9, atol=1e-9 * np.abs(w).max())
        np.testing.assert_allclose(gram, Z.transpose(1, 0, 2).reshape(r, -1).T @ B @ Z.transpose(1, 0, 2).reshape(r, -1),
                                   atol=1e-9)


def test_alike_alphas_are_reported_once_with_a_warning():
    """Where every alpha's subspace is alike, the clustering still returns n_alpha_clusters - 1 alphas:
    those that repeat a smaller chosen alpha's subspace are dropped and the user is told."""
    import warnings

    from scontrast.core import ScontrastWarning

    rng = np.random.default_rng(0)
    # one dominant target-only direction: every alpha's top component is (nearly) that direction
    d = 12
    X = rng.normal(size=(300, d)) * 0.3
    X[:, 0] += rng.normal(size=300) * 8.0
    Y = rng.normal(size=(300, d)) * 0.3
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        merged = CPCA(n_components=1, n_alphas=20, random_state=0).fit(X, Y)
    kept = CPCA(n_components=1, n_alphas=20, random_state=0, merge_affinity=1.0).fit(X, Y)
    said = [str(w.message) for w in caught if issubclass(w.category, ScontrastWarning)]
    assert len(kept.alphas_) > len(merged.alphas_) >= 2
    dropped = set(np.round(kept.alphas_, 9)) - set(np.round(merged.alphas_, 9))
    assert len([m for m in said if "gives the same subspace as alpha" in m]) == len(dropped)
    # what is kept is the smallest of each group of alike alphas, and no two kept ones are alike
    chosen = merged.alphas_[1:]
    aff = merged.affinity_[np.ix_(np.searchsorted(merged.alpha_grid_, chosen), np.searchsorted(merged.alpha_grid_, chosen))]
    assert np.all(aff[np.triu_indices(len(chosen), 1)] < 0.99)


def test_no_contrast_is_a_warning():
    from scontrast.core import ScontrastWarning

    rng = np.random.default_rng(1)
    X = rng.normal(size=(80, 6))
    with pytest.warns(ScontrastWarning, match="no contrast at alpha"):
        CPCA(n_components=2, alpha=1.0).fit(X, X.copy())
