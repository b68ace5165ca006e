"""PCPCA with missing values: the observed-data objective, its gradients, the optimiser."""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest
from scipy.linalg import subspace_angles
from scipy.stats import multivariate_normal

from scontrast.core import ScontrastConvergenceWarning
from scontrast.pcpca._estimator import PCPCA
from scontrast.pcpca._missing import _loglik_and_grad, _maximise, _stack, observed_loglik

ref_module = pytest.importorskip("pcpca.pcpca")


def planted(n=500, m=500, D=20, seed=0, gamma_prime=0.5):
    """Target = shared + target-specific + noise; background = shared / sqrt(gamma') + noise.

    Then S_x - gamma' S_y has population value T T' + (1 - gamma') I, exactly of the PCPCA form,
    so the observed-data estimator is consistent for the same W as the complete-data one.
    Returns (X, Y, T) with T (D x 2) the target-specific loadings.
    """
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(D, 4)))
    S, T = Q[:, :2] * 1.5, Q[:, 2:] * np.array([3.0, 2.0])
    X = rng.normal(size=(n, 2)) @ S.T + rng.normal(size=(n, 2)) @ T.T + rng.normal(size=(n, D)) + 1.0
    Y = rng.normal(size=(m, 2)) @ S.T / np.sqrt(gamma_prime) + rng.normal(size=(m, D)) - 0.5
    return X, Y, T


def remove(A, frac, rng):
    A = A.copy()
    A[rng.random(A.shape) < frac] = np.nan
    return A


def max_angle(A, B):
    return float(np.degrees(subspace_angles(A, B)).max())


def reference_inner(name, k, gamma):
    """The reference's per-cell objective/gradient closures (nested in gradient_descent_missing_data)."""
    code = next(c for c in ref_module.PCPCA.gradient_descent_missing_data.__code__.co_consts
                if getattr(c, "co_name", None) == name)
    owner = ref_module.PCPCA(n_components=k, gamma=gamma)
    return types.FunctionType(code, vars(ref_module), name, None, (types.CellType(owner),))


@pytest.fixture(scope="module")
def holes():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 8)) @ rng.normal(size=(8, 8)) * 0.5
    Y = rng.normal(size=(50, 8)) @ rng.normal(size=(8, 8)) * 0.5
    return remove(X, 0.2, rng), remove(Y, 0.2, rng), rng.normal(size=(8, 2)), 0.7, 0.25


def test_objective_equals_brute_force_and_reference(holes):
    Xm, Ym, W, s2, g = holes
    brute = 0.0
    for A, weight in ((Xm, 1.0), (Ym, -g)):
        for x in A:
            o = ~np.isnan(x)
            brute += weight * multivariate_normal(np.zeros(o.sum()), (W @ W.T + s2 * np.eye(8))[np.ix_(o, o)]).logpdf(x[o])
    ours = observed_loglik(Xm, Ym, W, s2, g)
    assert ours == pytest.approx(brute, rel=1e-12)
    ref_ll = reference_inner("log_likelihood", 2, g)
    assert ours == pytest.approx(ref_ll(Xm.T, Ym.T, W, s2, g), rel=1e-12)


def test_gradients_match_finite_differences_and_reference(holes):
    Xm, Ym, W, s2, g = holes
    data = _stack(Xm, Ym, g)
    _, gW, gs2 = _loglik_and_grad(W, s2, data)

    def f(W_, s2_):
        return _loglik_and_grad(W_, s2_, data, grad=False)[0]

    eps = 1e-6
    num = np.zeros_like(W)
    for idx in np.ndindex(W.shape):
        E = np.zeros_like(W)
        E[idx] = eps
        num[idx] = (f(W + E, s2) - f(W - E, s2)) / (2 * eps)
    np.testing.assert_allclose(gW, num, rtol=1e-6, atol=1e-6 * np.abs(num).max())
    assert gs2 == pytest.approx((f(W, s2 + eps) - f(W, s2 - eps)) / (2 * eps), rel=1e-6)
    ref_gW, ref_gs2 = reference_inner("grads", 2, g)(Xm.T, Ym.T, W, s2, g)
    np.testing.assert_allclose(gW, ref_gW, rtol=1e-10, atol=1e-12)
    assert gs2 == pytest.approx(ref_gs2, rel=1e-10)


def test_optimiser_reproduces_the_closed_form_without_missing_values():
    X, Y, _ = planted(200, 200, 10, seed=3)
    closed = PCPCA(2, gamma_prime=0.5).fit(X, Y)
    data = _stack(X - closed.mean_, Y - closed.background_mean_, closed.gamma_)
    assert data.O is None
    rng = np.random.default_rng(0)
    W, s2, res, trace = _maximise(closed.W_ + 0.5 * rng.normal(size=closed.W_.shape), 3 * closed.sigma2_,
                                  data, max_iter=2000, tol=1e-13)
    assert res.success, res.message
    assert max_angle(W, closed.W_) < 1e-3
    assert s2 == pytest.approx(closed.sigma2_, rel=1e-6)
    np.testing.assert_allclose(W @ W.T, closed.W_ @ closed.W_.T, atol=1e-4 * np.abs(closed.W_).max() ** 2)
    assert np.all(np.diff(trace) >= 0)  # every accepted L-BFGS step raises the objective
    # And the public estimator forced onto the optimiser path agrees as well.
    forced = PCPCA(2, gamma_prime=0.5, solver="lbfgs").fit(X, Y)
    assert forced.converged_ and max_angle(forced.W_, closed.W_) < 1e-6


def test_missing_data_fit_approaches_the_complete_data_fit():
    angles = {}
    ml_30, imputed_30 = [], []
    for seed in range(3):
        X, Y, _ = planted(seed=seed)
        full = PCPCA(2, gamma_prime=0.5).fit(X, Y)
        rng = np.random.default_rng(100 + seed)
        for frac in (0.1, 0.3):
            Xm, Ym = remove(X, frac, rng), remove(Y, frac, rng)
            model = PCPCA(2, gamma_prime=0.5).fit(Xm, Ym)
            assert model.solver_ == "lbfgs" and model.converged_, model.optimizer_message_
            assert np.all(np.diff(model.objective_trace_) >= 0)
            assert model.sigma2_ == pytest.approx(full.sigma2_, rel=0.1)
            angles[seed, frac] = max_angle(model.W_, full.W_)
            if frac == 0.3:
                ml_30.append(angles[seed, frac])
                mean_imputed = PCPCA(2, gamma_prime=0.5).fit(np.where(np.isnan(Xm), np.nanmean(Xm, 0), Xm),
                                                            np.where(np.isnan(Ym), np.nanmean(Ym, 0), Ym))
                imputed_30.append(max_angle(mean_imputed.W_, full.W_))
    print("subspace angle to the complete-data W (degrees):", {k: round(v, 2) for k, v in angles.items()})
    assert all(angles[s, 0.1] < 6 for s in range(3))
    assert all(angles[s, 0.3] < 12 for s in range(3))
    assert np.mean([angles[s, 0.1] for s in range(3)]) < np.mean([angles[s, 0.3] for s in range(3)])
    # The observed-data fit beats mean imputation followed by the closed form.
    assert np.mean(ml_30) < np.mean(imputed_30)


def test_optimiser_reports_why_it_stopped():
    X, Y, _ = planted(200, 200, 10, seed=4)
    Xm = remove(X, 0.2, np.random.default_rng(0))
    with pytest.warns(ScontrastConvergenceWarning, match="L-BFGS stopped without converging"):
        model = PCPCA(2, gamma_prime=0.5, max_iter=2).fit(Xm, Y)
    assert not model.converged_ and "ITERATIONS" in model.optimizer_message_.upper()
    assert model.n_iter_ == 2 and len(model.objective_trace_) == 3
    assert np.all(np.diff(model.objective_trace_) >= 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScontrastConvergenceWarning)
        assert PCPCA(2, gamma_prime=0.5).fit(Xm, Y).converged_


def test_missing_values_reject_inadmissible_gamma_and_closed_form():
    X, Y, _ = planted(200, 200, 10, seed=5)
    Xm = remove(X, 0.1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="missing values imputed by group means"):
        PCPCA(2, gamma_prime=0.99).fit(Xm, Y)
    with pytest.raises(ValueError, match="cannot handle NaN"):
        PCPCA(2, gamma_prime=0.5, solver="closed_form").fit(Xm, Y)
    bad = Xm.copy()
    bad[:, 3] = np.nan
    with pytest.raises(ValueError, match="gene 3 has no observed value"):
        PCPCA(2, gamma_prime=0.5).fit(bad, Y)
