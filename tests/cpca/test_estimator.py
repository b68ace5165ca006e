"""CPCA: agreement with the `contrastive` package, seeding, transform, parameter checks, warnings."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.metrics import silhouette_score

from scontrast.core import ScontrastError
from scontrast.cpca._estimator import CPCA
from scontrast.cpca._kernel import KernelCPCA

from ._helpers import reference_directions, sin_max_angle

contrastive = pytest.importorskip("contrastive")


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


def test_alike_alphas_are_reported_once_with_a_warning():
    """Where every alpha's subspace is alike, the clustering still returns n_alpha_clusters - 1 alphas:
    those that repeat a smaller chosen alpha's subspace are dropped and the user is told."""

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


def test_target_variance_comes_from_the_solvers_covariance(wide, monkeypatch):
    """The no-contrast warning's scale, the target's total variance, is trace(C_X) when the solver
    formed C_X or K_XX: X is not read again for it. It is the per-gene variance summed."""
    import scipy.sparse as sp

    from scontrast.core import ScontrastWarning
    from scontrast.cpca import _estimator
    from scontrast.cpca._moments import _Moments

    X, Y, _ = wide
    for standardize in (False, True):
        moments = _Moments(X, Y, standardize)
        moments.covariance_x()
        assert moments.trace_x == pytest.approx(_estimator._total_variance(X, moments.scale_x), rel=1e-12)
        moments = _Moments(sp.csr_matrix(X), Y, standardize)
        moments.gram_blocks(("xx",))
        assert moments.trace_x == pytest.approx(_estimator._total_variance(X, moments.scale_x), rel=1e-12)

    def not_again(*args):
        raise AssertionError("X read again for its variance")

    monkeypatch.setattr(_estimator, "_total_variance", not_again)
    for solver in ("full", "covariance", "gram"):
        CPCA(alpha=[1.0], solver=solver).fit(X, Y)
    rng = np.random.default_rng(1)
    same = rng.normal(size=(80, 6))
    with pytest.warns(ScontrastWarning, match="no contrast at alpha"):
        CPCA(n_components=2, alpha=1.0).fit(same, same.copy())
