"""PCPCA estimator: reference package, closed-form invariants, parameter checks, clipping, the paper's
Figure 2, likelihood, embedding and generation."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from pcpca_helpers import correlated, two_groups
from scipy.stats import multivariate_normal
from sklearn.exceptions import NotFittedError

from scontrast.core import ScontrastError, ScontrastWarning
from scontrast.pcpca._closed_form import max_gamma
from scontrast.pcpca._estimator import PCPCA
from scontrast.pcpca._missing import observed_loglik

Ref = pytest.importorskip("pcpca").PCPCA


@pytest.fixture(scope="module")
def pair():
    return two_groups()


def figure2(seed):
    """The paper's Figure 2 data: n = m = 200, two target halves at (1,-1) and (-1,1)."""
    rng = np.random.default_rng(seed)
    S = np.array([[2.7, 2.6], [2.6, 2.7]])
    X = np.vstack([rng.multivariate_normal([1, -1], S, 100), rng.multivariate_normal([-1, 1], S, 100)])
    Y = rng.multivariate_normal([0, 0], S, 200)
    return X, Y


def line_angle(u, v):
    """Angle in degrees between the lines spanned by vectors u and v."""
    u, v = u / np.linalg.norm(u), v / np.linalg.norm(v)
    return float(np.degrees(np.arccos(min(1.0, abs(u @ v)))))


@pytest.mark.parametrize("gamma_prime", [0.0, 0.25, 0.5])
def test_equals_reference_where_its_answer_is_valid(pair, gamma_prime):
    X, Y = pair
    ours = PCPCA(2, gamma_prime=gamma_prime).fit(X, Y)
    ref = Ref(n_components=2, gamma=ours.gamma_)
    # The reference takes features x samples and does not centre.
    ref.fit((X - X.mean(0)).T, (Y - Y.mean(0)).T)
    assert not np.iscomplexobj(ref.W_mle) and ref.sigma2_mle > 0
    assert ours.sigma2_ == pytest.approx(ref.sigma2_mle, rel=1e-10)
    # Same loadings up to rotation: W W' is invariant.
    np.testing.assert_allclose(ours.W_ @ ours.W_.T, ref.W_mle @ ref.W_mle.T, atol=1e-10)
    np.testing.assert_allclose(np.abs(ours.W_), np.abs(ref.W_mle), atol=1e-10)  # distinct eigenvalues: signs only


def test_gamma_zero_is_ppca(pair):
    X, _ = pair
    Y = correlated(80, 12, 7)
    model = PCPCA(3, gamma=0.0).fit(X, Y)
    Xc = X - X.mean(0)
    lam = np.linalg.eigvalsh(Xc.T @ Xc / len(X))[::-1]
    assert model.sigma2_ == pytest.approx(lam[3:].mean(), rel=1e-10)  # Tipping & Bishop
    np.testing.assert_allclose(np.sort(np.linalg.norm(model.W_, axis=0) ** 2)[::-1], lam[:3] - lam[3:].mean(),
                               rtol=1e-10)
    np.testing.assert_allclose(model.mean_, X.mean(0))


def test_closed_form_is_a_stationary_point_and_objective(pair):
    """The closed form maximises the objective: its value matches an independent evaluation and
    small perturbations of W and sigma^2 only lower it."""
    X, Y = pair
    model = PCPCA(2, gamma_prime=0.4).fit(X, Y)
    Xc, Yc = X - model.mean_, Y - model.background_mean_
    cov = model.W_ @ model.W_.T + model.sigma2_ * np.eye(12)
    direct = (multivariate_normal(np.zeros(12), cov).logpdf(Xc).sum()
              - model.gamma_ * multivariate_normal(np.zeros(12), cov).logpdf(Yc).sum())
    assert model.objective_ == pytest.approx(direct, rel=1e-10)
    assert observed_loglik(Xc, Yc, model.W_, model.sigma2_, model.gamma_) == pytest.approx(direct, rel=1e-10)
    rng = np.random.default_rng(0)
    for _ in range(20):
        W = model.W_ + 1e-3 * rng.normal(size=model.W_.shape)
        s2 = model.sigma2_ * (1 + 1e-3 * rng.normal())
        assert observed_loglik(Xc, Yc, W, s2, model.gamma_) < model.objective_


def test_gamma_prime_scale_and_exclusivity(pair):
    X, Y = pair
    n, m = len(X), len(Y)
    a = PCPCA(2, gamma_prime=0.3).fit(X, Y)
    b = PCPCA(2, gamma=0.3 * n / m).fit(X, Y)  # gamma replaces the default gamma_prime
    c = PCPCA(2, gamma=0.3 * n / m, gamma_prime=None).fit(X, Y)
    np.testing.assert_allclose(a.W_, b.W_)
    np.testing.assert_array_equal(b.W_, c.W_)
    assert a.gamma_prime_ == pytest.approx(0.3) and b.gamma_ == pytest.approx(0.3 * n / m)
    assert b.gamma_prime_ == pytest.approx(0.3)
    # The default is gamma' = 0.5.
    d = PCPCA(2).fit(X, Y)
    assert d.gamma_prime_ == pytest.approx(0.5) and d.gamma_ == pytest.approx(0.5 * n / m)
    np.testing.assert_array_equal(d.W_, PCPCA(2, gamma_prime=0.5).fit(X, Y).W_)
    # Neither, or both set to values other than their defaults: refused.
    with pytest.raises(ScontrastError, match=r"^gamma, gamma_prime: set one of the two; both are None"):
        PCPCA(2, gamma_prime=None).fit(X, Y)
    with pytest.raises(ScontrastError, match=r"^gamma, gamma_prime: set one of the two, not both"):
        PCPCA(2, gamma=0.1, gamma_prime=0.1).fit(X, Y)
    with pytest.raises(ScontrastError, match=r"^gamma_prime: expected a finite number >= 0"):
        PCPCA(2, gamma_prime=-0.1).fit(X, Y)
    with pytest.raises(ScontrastError, match=r"^gamma: expected a finite number >= 0"):
        PCPCA(2, gamma=-0.1).fit(X, Y)


def test_bad_input(pair):
    X, Y = pair
    with pytest.raises(ValueError, match="n_components"):
        PCPCA(12, gamma=0.1).fit(X, Y)
    with pytest.raises(ValueError, match="Y: has 11 genes"):
        PCPCA(2, gamma=0.1).fit(X, Y[:, :11])
    Xi = X.copy()
    Xi[0, 0] = np.inf
    with pytest.raises(ValueError, match="X: contains 1 infinite values"):
        PCPCA(2, gamma=0.1).fit(Xi, Y)
    Xs = sp.csr_matrix(X)
    Xs.data[0] = np.nan
    with pytest.raises(ValueError, match="X: sparse input contains NaN"):
        PCPCA(2, gamma=0.1).fit(Xs, Y)
    with pytest.raises(ValueError, match="Y: needs at least 2 cells"):
        PCPCA(2, gamma=0.1).fit(X, Y[:1])
    for method in ("transform", "score_samples", "score"):
        with pytest.raises(NotFittedError):
            getattr(PCPCA(2, gamma=0.1), method)(X)
    with pytest.raises(NotFittedError):
        PCPCA(2).sample(3)
    model = PCPCA(2, gamma=0.1).fit(X, Y)
    with pytest.raises(ScontrastError, match="X: has 11 genes, the model was fitted on 12"):
        model.transform(X[:, :11])
    for name, value, message in (("solver", "svd", r"^solver: expected one of"),
                                 ("eigen_solver", "lobpcg", r"^eigen_solver: expected one of"),
                                 ("max_iter", 0, r"^max_iter: expected an integer >= 1"),
                                 ("tol", 0.0, r"^tol: expected a finite number > 0"),
                                 ("on_inadmissible", "ignore", r"^on_inadmissible: expected one of"),
                                 ("clip_fraction", 1.0, r"^clip_fraction: expected a finite number > 0.0 and < 1.0"),
                                 ("n_components", 0, r"^n_components: expected an integer >= 1")):
        with pytest.raises(ScontrastError, match=message):
            PCPCA(**{name: value}).fit(X, Y)


def test_sparse_input_and_arpack_match_dense():
    rng = np.random.default_rng(5)
    D = 300
    dense_X = rng.poisson(0.4, size=(250, D)) * rng.gamma(2.0, 1.0, size=D)
    dense_Y = rng.poisson(0.4, size=(200, D)) * rng.gamma(2.0, 1.0, size=D)
    X, Y = sp.csr_matrix(dense_X), sp.csr_matrix(dense_Y)
    a = PCPCA(3, gamma_prime=0.5, eigen_solver="arpack", random_state=0).fit(X, Y)
    b = PCPCA(3, gamma_prime=0.5, eigen_solver="dense").fit(dense_X, dense_Y)
    assert a.sigma2_ == pytest.approx(b.sigma2_, rel=1e-9)
    np.testing.assert_allclose(a.W_, b.W_, atol=1e-8)
    np.testing.assert_allclose(a.transform(X), b.transform(dense_X), atol=1e-8)
    np.testing.assert_allclose(a.score_samples(X), b.score_samples(dense_X), rtol=1e-10)
    assert max_gamma(X, Y, 3, eigen_solver="arpack", random_state=0) == pytest.approx(
        max_gamma(dense_X, dense_Y, 3, eigen_solver="dense"), rel=1e-9)


def test_fit_reports_the_bound_and_clips_on_request(pair):
    X, Y = pair
    n, m = len(X), len(Y)
    bound = max_gamma(X, Y, 2)
    model = PCPCA(2, gamma_prime=0.2).fit(X, Y)
    assert model.max_gamma_ == pytest.approx(bound, rel=1e-12)
    assert model.max_gamma_prime_ == pytest.approx(bound * m / n, rel=1e-12)
    assert not model.clipped_ and model.gamma_requested_ == pytest.approx(0.2 * n / m)
    assert PCPCA(2).max_gamma(X, Y) == pytest.approx(bound, rel=1e-12)
    # The error states the bound on the scale the user set, and on the other one.
    gp = 1.2 * bound * m / n
    with pytest.raises(ScontrastError, match=rf"^gamma_prime: gamma_prime={gp:.6g} \(gamma=.*\) is not admissible "
                       rf"for these {n} target and {m} background cells: .*; need gamma_prime < "
                       rf"{bound * m / n:.4g} \(gamma < {bound:.6g}\); lower it or set on_inadmissible='clip'$"):
        PCPCA(2, gamma_prime=gp).fit(X, Y)
    with pytest.warns(ScontrastWarning, match=rf"not admissible \(bound {bound * m / n:.4g}\); clipped to "
                      rf"{0.8 * bound * m / n:.4g}"):
        clipped = PCPCA(2, gamma_prime=gp, on_inadmissible="clip", clip_fraction=0.8).fit(X, Y)
    assert clipped.clipped_ and clipped.gamma_ == pytest.approx(0.8 * bound, rel=1e-12)
    assert clipped.gamma_requested_ == pytest.approx(gp * n / m)
    direct = PCPCA(2, gamma=0.8 * bound).fit(X, Y)
    np.testing.assert_allclose(clipped.W_, direct.W_, rtol=1e-12, atol=1e-12 * np.abs(direct.W_).max())
    # 'clip' leaves an admissible gamma alone.
    kept = PCPCA(2, gamma_prime=0.2, on_inadmissible="clip").fit(X, Y)
    assert not kept.clipped_ and kept.gamma_prime_ == pytest.approx(0.2)


def test_figure2_line_rotates_about_90_degrees():
    X, Y = figure2(0)
    w0 = PCPCA(1, gamma_prime=0.0).fit(X, Y).W_[:, 0]
    w9 = PCPCA(1, gamma_prime=0.9).fit(X, Y).W_[:, 0]
    assert line_angle(w0, [1, 1]) < 10  # PPCA: the shared axis
    assert line_angle(w9, [1, -1]) < 10  # the axis that separates the two target halves
    assert 80 < line_angle(w0, w9) <= 90


def test_figure2_over_seeds():
    """gamma' = 0.9 is close to the bound at n = m = 200 (sigma^2 = l_2 / c needs the target's variance
    along (1,1) to exceed 0.9 times the background's): inadmissible draws must raise, and the rotation
    of the admissible ones is near 90 degrees."""
    angles, rejected = [], 0
    for seed in range(40):
        X, Y = figure2(seed)
        w0 = PCPCA(1, gamma_prime=0.0).fit(X, Y).W_[:, 0]
        assert line_angle(w0, [1, 1]) < 10
        if max_gamma(X, Y, 1) <= 0.9:
            rejected += 1
            with pytest.raises(ValueError, match="not admissible"):
                PCPCA(1, gamma_prime=0.9).fit(X, Y)
            continue
        angles.append(line_angle(w0, PCPCA(1, gamma_prime=0.9).fit(X, Y).W_[:, 0]))
    assert rejected < 20 and len(angles) > 20
    assert np.median(angles) > 75


def test_score_equals_scipy_logpdf(pair):
    X, Y = pair
    model = PCPCA(2, gamma_prime=0.4).fit(X, Y)
    new = correlated(30, 12, 9, shift=3.0)
    ref = multivariate_normal(model.mean_, model.W_ @ model.W_.T + model.sigma2_ * np.eye(12))
    np.testing.assert_allclose(model.score_samples(new), ref.logpdf(new), rtol=1e-10)
    assert model.score(new) == pytest.approx(ref.logpdf(new).mean(), rel=1e-10)
    assert model.score(sp.csr_matrix(new)) == pytest.approx(ref.logpdf(new).mean(), rel=1e-10)
    # With NaN: the marginal density of the observed genes.
    holes = new.copy()
    holes[np.random.default_rng(1).random(holes.shape) < 0.3] = np.nan
    cov = model.W_ @ model.W_.T + model.sigma2_ * np.eye(12)
    for x, got in zip(holes, model.score_samples(holes)):
        o = ~np.isnan(x)
        assert got == pytest.approx(multivariate_normal(model.mean_[o], cov[np.ix_(o, o)]).logpdf(x[o]), rel=1e-10)


def test_transform_is_the_posterior_mean(pair):
    X, Y = pair
    model = PCPCA(2, gamma_prime=0.4).fit(X, Y)
    W, s2 = model.W_, model.sigma2_
    expected = (X - model.mean_) @ W @ np.linalg.inv(W.T @ W + s2 * np.eye(2))
    np.testing.assert_allclose(model.transform(X), expected, atol=1e-12)
    np.testing.assert_allclose(model.fit_transform(X, Y), expected, atol=1e-12)
    # Posterior given the observed genes only (Gaussian conditioning, brute force).
    x = X[0].copy()
    x[[1, 4, 7]] = np.nan
    o = ~np.isnan(x)
    Wo = W[o]
    z = np.linalg.solve(Wo.T @ Wo + s2 * np.eye(2), Wo.T @ (x[o] - model.mean_[o]))
    np.testing.assert_allclose(model.transform(x[None, :])[0], z, atol=1e-12)


def test_samples_have_the_fitted_mean_and_covariance(pair):
    X, Y = pair
    model = PCPCA(2, gamma_prime=0.4).fit(X, Y)
    N = 40000
    W, s2, mu = model.W_, model.sigma2_, model.mean_
    for noise, cov in ((True, W @ W.T + s2 * np.eye(12)), (False, W @ W.T)):
        S = model.sample(N, random_state=0, noise=noise)
        assert S.shape == (N, 12)
        se_mean = np.sqrt(np.diag(cov) / N)
        assert np.all(np.abs(S.mean(0) - mu) < 5 * se_mean + 1e-12)
        # Standard error of a sample covariance entry: sqrt((S_ii S_jj + S_ij^2) / N).
        d = np.diag(cov)
        se_cov = np.sqrt((np.outer(d, d) + cov**2) / N)
        assert np.all(np.abs(np.cov(S.T) - cov) < 5 * se_cov + 1e-12)
    noiseless = model.sample(500, random_state=1, noise=False) - mu
    assert np.linalg.matrix_rank(noiseless, tol=1e-8) == 2  # lies in span(W)
    np.testing.assert_array_equal(model.sample(5, random_state=3), model.sample(5, random_state=3))
