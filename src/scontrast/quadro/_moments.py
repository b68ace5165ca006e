"""The moments the Rayleigh quotient is made of: the mean and variance of Q, their plug-in estimates.

A quadratic score ``Q(x) = x' Omega x - 2 delta' x`` of an elliptical class with mean
``mu``, covariance ``Sigma`` and kurtosis parameter ``gamma`` has mean ``M`` and variance
``L`` in closed form (:func:`quadratic_mean`, :func:`quadratic_variance`), so the quotient
needs only each class's mean and covariance (:func:`estimate_moments`, robust or sample)
and the common ``gamma`` (:func:`kurtosis_parameter`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.covariance import ledoit_wolf_shrinkage

from ..core import ScontrastError, check_option
from ._robust import catoni_mean, kendall_correlation, nearest_psd, robust_variance
from ._utils import _not_tiny, _two_classes

# --------------------------------------------------------------------------- kurtosis


def kurtosis_parameter(X1, X2) -> float:
    """Common kurtosis parameter gamma of two elliptical classes.

    Each marginal of an elliptical law has kurtosis ``3 (1 + gamma)``, so gamma is
    estimated as the pooled (genes x classes, weighted by class size) marginal
    kurtosis / 3 - 1, bounded below by ``-2/(d+2)``, the smallest value an
    elliptical law allows and the one that keeps ``L_k`` convex. Constant
    columns are left out. Sample fourth moments are biased low under heavy
    tails: treat the value as a working parameter, not an accurate estimate.

    Parameters
    ----------
    X1 : (n1, d) array, X2 : (n2, d) array

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.quadro import kurtosis_parameter
    >>> rng = np.random.default_rng(0)
    >>> bool(abs(kurtosis_parameter(rng.normal(size=(500, 3)), rng.normal(size=(500, 3)))) < 0.2)   # Gaussian: 0
    True
    """
    X1, X2 = _two_classes(X1, X2)
    d = X1.shape[1]
    total, weight = 0.0, 0.0
    for X in (X1, X2):
        C = X - X.mean(axis=0)
        m2 = (C**2).mean(axis=0)
        ok = _not_tiny(m2)
        if not ok.any():
            continue
        kurt = (C[:, ok] ** 4).mean(axis=0) / m2[ok] ** 2
        total += X.shape[0] * kurt.mean()
        weight += X.shape[0]
    if weight == 0:
        return 0.0
    return float(max(total / weight / 3.0 - 1.0, -2.0 / (d + 2)))


# --------------------------------------------------------------------------- moments of Q


def _check_quad(Omega, delta, mu, Sigma):
    Omega = np.asarray(Omega, dtype=float)
    delta = np.asarray(delta, dtype=float)
    mu = np.asarray(mu, dtype=float)
    Sigma = np.asarray(Sigma, dtype=float)
    d = mu.shape[0]
    if Omega.shape != (d, d) or Sigma.shape != (d, d) or delta.shape != (d,):
        raise ScontrastError(
            f"Omega, delta, mu, Sigma: shapes disagree, {Omega.shape}, {delta.shape}, {mu.shape}, {Sigma.shape}"
        )
    return 0.5 * (Omega + Omega.T), delta, mu, Sigma


def quadratic_mean(Omega, delta, mu, Sigma) -> float:
    """M = E Q(Z) = tr(Omega Sigma) + mu' Omega mu - 2 delta' mu for E Z = mu, cov Z = Sigma.

    Parameters
    ----------
    Omega : (d, d) symmetric, delta : (d,), mu : (d,), Sigma : (d, d)

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.quadro import quadratic_mean
    >>> Omega, delta = np.diag([1.0, 2.0]), np.array([0.5, 0.0])
    >>> mu, Sigma = np.array([1.0, 0.0]), np.eye(2)
    >>> float(quadratic_mean(Omega, delta, mu, Sigma))        # tr(Omega) + mu'Omega mu - 2 delta'mu = 3 + 1 - 1
    3.0
    """
    Omega, delta, mu, Sigma = _check_quad(Omega, delta, mu, Sigma)
    return float(np.sum(Omega * Sigma) + mu @ Omega @ mu - 2.0 * delta @ mu)


def quadratic_variance(Omega, delta, mu, Sigma, gamma: float = 0.0) -> float:
    """L = Var Q(Z) for Z elliptical with mean mu, covariance Sigma, kurtosis parameter gamma.

    ``L = 2(1+gamma) tr(Omega Sigma Omega Sigma) + gamma tr(Omega Sigma)^2
    + 4 (Omega mu - delta)' Sigma (Omega mu - delta)``; gamma = 0 for Gaussian,
    2/(nu - 4) for multivariate t with nu > 4 degrees of freedom.

    Parameters
    ----------
    Omega : (d, d) symmetric, delta : (d,), mu : (d,), Sigma : (d, d), gamma : float

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.quadro import quadratic_variance
    >>> rng = np.random.default_rng(0)
    >>> Omega, delta, mu, Sigma = np.diag([1.0, 0.0]), np.zeros(2), np.zeros(2), np.eye(2)
    >>> float(quadratic_variance(Omega, delta, mu, Sigma))    # Var z_0^2 = 2 for a standard normal z_0
    2.0
    >>> z = rng.normal(size=200_000)
    >>> bool(abs(np.var(z**2) - 2.0) < 0.05)                  # by simulation
    True
    """
    Omega, delta, mu, Sigma = _check_quad(Omega, delta, mu, Sigma)
    OS = Omega @ Sigma
    u = Omega @ mu - delta
    return float(2.0 * (1.0 + gamma) * np.sum(OS * OS.T) + gamma * np.trace(OS) ** 2 + 4.0 * u @ Sigma @ u)


def rayleigh_quotient(Omega, delta, mu1, Sigma1, mu2, Sigma2, gamma: float = 0.0, pi: float = 0.5) -> float:
    """Rq = pi (1-pi) (M_1 - M_2)^2 / (pi L_1 + (1-pi) L_2); pi = P(class 1).

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.quadro import rayleigh_quotient
    >>> Omega, delta, mu = np.diag([1.0, 0.0]), np.zeros(2), np.zeros(2)
    >>> # Q(z) = z_0^2: mean 1 and variance 2 in class 1 (I), mean 4 and variance 32 in class 2 (var 4)
    >>> round(rayleigh_quotient(Omega, delta, mu, np.eye(2), mu, np.diag([4.0, 1.0])), 6)   # 0.25 * 9 / 17
    0.132353
    """
    M1 = quadratic_mean(Omega, delta, mu1, Sigma1)
    M2 = quadratic_mean(Omega, delta, mu2, Sigma2)
    L1 = quadratic_variance(Omega, delta, mu1, Sigma1, gamma)
    L2 = quadratic_variance(Omega, delta, mu2, Sigma2, gamma)
    den = pi * L1 + (1.0 - pi) * L2
    return float(pi * (1.0 - pi) * (M1 - M2) ** 2 / den) if den > 0 else float("inf")


# --------------------------------------------------------------------------- moment estimation


@dataclass
class Moments:
    """Plug-in moments of the two classes, in the coordinates z = (x - center) / scale.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.quadro import estimate_moments
    >>> rng = np.random.default_rng(0)
    >>> m = estimate_moments(rng.normal(size=(50, 2)), rng.normal(size=(50, 2)) + 1.0, estimator="sample")
    >>> type(m).__name__, m.mu1.shape, m.Sigma2.shape, m.pi  # class 1's prior: its share of the samples
    ('Moments', (2,), (2, 2), 0.5)
    """

    mu1: np.ndarray
    Sigma1: np.ndarray
    mu2: np.ndarray
    Sigma2: np.ndarray
    gamma: float
    pi: float
    center: np.ndarray
    scale: np.ndarray


def estimate_moments(X1, X2, estimator: str = "robust", gamma: float | None = None, psd_norm: str = "max",
                     standardize: bool = True, pi: float | None = None, shrinkage: str | None = None) -> Moments:
    """Means and covariances of both classes (robust or sample) and gamma.

    ``'robust'``: Catoni means, ``robust_variance`` variances, Kendall
    correlations ``sin(pi/2 tau)``, then ``nearest_psd(D C D, psd_norm)``.
    ``'sample'``: sample means and covariances (ddof 1).
    With ``standardize`` the moments are those of ``z = (x - center) / scale``
    with ``center`` the prior-weighted class means and ``scale`` the pooled
    within-class standard deviations, so that the L1 penalties treat features
    alike whatever their units.

    Parameters
    ----------
    X1 : (n1, d) array of class 1, X2 : (n2, d) array of class 2.
    gamma : None = ``kurtosis_parameter(X1, X2)``.
    pi : weight of class 1 in the objective and the centring; None = its share
        ``n1 / (n1 + n2)`` of the samples, 0.5 = both classes alike (balanced).
    shrinkage : None, ``'ledoit_wolf'`` or ``'auto'``: each class's (standardised) covariance
        becomes ``(1 - rho) S + rho tr(S)/d I`` with Ledoit and Wolf's ``rho`` of that
        class's standardised samples (about 0 when n >> d; needed when d approaches n, where
        ``S`` is singular and the quotient's variance vanishes along its null space).
        ``'auto'`` shrinks only the classes with at most ``d`` samples (singular ``S``).

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.quadro import estimate_moments
    >>> rng = np.random.default_rng(0)
    >>> X1, X2 = rng.normal(size=(200, 3)), rng.normal(size=(200, 3))
    >>> X2[:, 0] *= 2.0                                       # class 2 spreads more along feature 0
    >>> m = estimate_moments(X1, X2, estimator="sample", standardize=False)
    >>> m.Sigma1.shape, bool(m.Sigma2[0, 0] > 3 * m.Sigma1[0, 0])
    ((3, 3), True)
    """
    check_option(estimator, "estimator", ["robust", "sample"])
    check_option(shrinkage, "shrinkage", [None, "ledoit_wolf", "auto"])
    X1, X2 = _two_classes(X1, X2)
    d = X1.shape[1]
    out = []
    for X in (X1, X2):
        if estimator == "sample":
            mu = X.mean(axis=0)
            S = np.atleast_2d(np.cov(X, rowvar=False))
        else:
            mu = catoni_mean(X)
            sd = np.sqrt(robust_variance(X))
            S = nearest_psd(sd[:, None] * kendall_correlation(X) * sd[None, :], norm=psd_norm)
        out.append((mu, S))
    (mu1, S1), (mu2, S2) = out
    if pi is None:
        pi = X1.shape[0] / (X1.shape[0] + X2.shape[0])
    elif not 0.0 < pi < 1.0:
        raise ScontrastError(f"pi: expected a number in (0, 1), got {pi!r}")
    if gamma is None:
        gamma = kurtosis_parameter(X1, X2)
    elif gamma < -2.0 / (d + 2):
        raise ScontrastError(f"gamma: expected at least -2/(d+2) = {-2.0 / (d + 2):.4g} (d = {d}), got {gamma!r}")
    if standardize:
        center = pi * mu1 + (1 - pi) * mu2
        sd = np.sqrt(pi * np.diag(S1) + (1 - pi) * np.diag(S2))
        scale = np.where(_not_tiny(sd), sd, 1.0)
    else:
        center, scale = np.zeros(d), np.ones(d)
    inv = 1.0 / scale
    Sigma1, Sigma2 = S1 * inv[:, None] * inv[None, :], S2 * inv[:, None] * inv[None, :]
    if shrinkage is not None:
        # Ledoit and Wolf's amount for the standardised genes, whose covariance is the one shrunk
        Sigma1, Sigma2 = (_shrunk(S, ledoit_wolf_shrinkage(X * inv))
                          if shrinkage == "ledoit_wolf" or X.shape[0] <= d else S
                          for S, X in ((Sigma1, X1), (Sigma2, X2)))
    return Moments(
        mu1=(mu1 - center) * inv, Sigma1=Sigma1, mu2=(mu2 - center) * inv, Sigma2=Sigma2,
        gamma=float(gamma), pi=float(pi), center=center, scale=scale,
    )


def _shrunk(S: np.ndarray, rho: float) -> np.ndarray:
    """``(1 - rho) S + rho tr(S)/d I`` for a (d, d) ``S``."""
    d = S.shape[0]
    return (1.0 - rho) * S + rho * float(np.trace(S)) / d * np.eye(d)
