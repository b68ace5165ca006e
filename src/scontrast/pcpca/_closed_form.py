"""The closed-form PCPCA maximiser and the admissible range of gamma.

Model: target cells x = W z + mu_x + e and background cells y = W z' + mu_y + e,
z, z' ~ N(0, I_k), e ~ N(0, sigma^2 I_D). PCPCA maximises the relative
likelihood p(X | W, sigma^2) / p(Y | W, sigma^2)^gamma. With both groups
centred and C = Xc'Xc - gamma Yc'Yc (eigenvalues l_1 >= ... >= l_D) the
maximiser is

    c = n - gamma m,  sigma^2 = sum_{j>k} l_j / ((D - k) c),
    W = U_k (L_k / c - sigma^2 I)^{1/2},

valid only when c > 0, sigma^2 > 0 and l_k / c > sigma^2. ``gamma' = gamma m / n``
is the sample-size-free scale (``C / n = S_x - gamma' S_y`` with the two
covariance matrices), and gamma' < 1 is the same as c > 0.

Admissible range (derivation used by :func:`max_gamma`). For a rank-k
orthogonal projector P write a(P) = tr((I - P) S_x) and b(P) = tr((I - P) S_y),
with S_x, S_y the two scatter matrices. Then

    R(gamma) := sum_{j>k} l_j(gamma) = min_P [a(P) - gamma b(P)],

a minimum of non-increasing affine functions of gamma: R is concave and
non-increasing, so {gamma >= 0 : R(gamma) > 0} is an interval [0, gamma_R)
(empty when R(0) <= 0, i.e. the centred target has rank <= k). Its end
gamma_R = min_P a(P) / b(P) is found exactly by Dinkelbach's iteration
(Newton's method from the right on the concave R; each step is one top-k
eigenproblem). The third condition, l_k > mean(l_{k+1}, ..., l_D), holds
whenever l_k > l_{k+1} and fails only where l_k = ... = l_D (ties, not a
range of gamma), so it is checked in ``fit`` rather than folded into the bound.
Hence the admissible set is [0, min(n / m, gamma_R)) and ``max_gamma`` returns
its (excluded) end. (The reference package's bound is a Weyl-type sufficient
bound that sums the target eigenvalues from index k instead of k + 1.)
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from ..core import ScontrastError, check_int, check_option, check_random_state
from ._checks import _EIGEN_SOLVERS, _check_groups
from ._scatter import _resolve_eigen_solver, _scatters, _Spectrum


def _closed_form(vals, U, rest, D, n, m, gamma):
    """Closed-form maximiser, or the reason it does not exist.

    Returns ``(W, sigma2, reason)``; ``reason`` is None when the solution is valid.
    """
    k = vals.shape[0]
    c = n - gamma * m
    if c <= 0:
        return None, None, f"n - gamma*m = {c:.4g} <= 0"
    sigma2 = rest / ((D - k) * c)
    if not sigma2 > 0:
        return None, None, f"sigma^2 = {sigma2:.4g} <= 0 (the trailing eigenvalues of C sum to {rest:.4g})"
    lam = vals / c - sigma2
    if not lam[-1] > 0:
        return None, None, f"l_k/(n - gamma*m) = {vals[-1] / c:.4g} does not exceed sigma^2 = {sigma2:.4g}"
    return U * np.sqrt(lam), float(sigma2), None


def _canonical(W):
    """A fixed representative of W R (R orthogonal): orthogonal columns by decreasing norm,
    each with its largest-magnitude entry positive. W is (D, k)."""
    U, s, _ = linalg.svd(W, full_matrices=False)
    W = U * s
    idx = np.argmax(np.abs(W), axis=0)
    signs = np.sign(W[idx, np.arange(W.shape[1])])
    signs[signs == 0] = 1.0
    return W * signs


def _gamma_R(spec, rtol=1e-12, max_iter=100):
    """End of the interval on which the trailing eigenvalue sum R(gamma) is positive.

    ``spec`` is a :class:`_Spectrum`. Returns ``inf`` when R stays positive on [0, n/m]
    (then c > 0 is the binding condition and the caller uses n/m). Raises
    ScontrastError when R(0) <= 0.
    """
    Sx, Sy, k = spec.Sx, spec.Sy, spec.k
    g_c = Sx.n / Sy.n
    _, _, r0 = spec.top(0.0)
    scale = max(Sx.trace(), np.finfo(float).tiny)
    if r0 <= 1e-12 * scale:
        raise ScontrastError(
            f"X: the centred target data has at most n_components={k} directions of variance; no gamma is admissible"
        )
    _, U, r = spec.top(g_c)
    if r > 0:
        return np.inf
    # Dinkelbach from the right: gamma_{t+1} = a(P_t) / b(P_t), P_t the top-k projector at gamma_t.
    # R(gamma_t) <= 0 and a(P_t) > 0 imply b(P_t) > 0, and the iterates decrease monotonically.
    g = g_c
    tx, ty = Sx.trace(), Sy.trace()
    for _ in range(max_iter):
        a = tx - Sx.quad_trace(U)
        b = ty - Sy.quad_trace(U)
        g_new = a / b
        if g - g_new <= rtol * g:
            return min(g_new, g)
        g = g_new
        # Warm start: the previous top-k space is close, so Lanczos converges in fewer products.
        _, U, _ = spec.top(g, full=False, v0=U.sum(axis=1))
    return g


def _admissible_end(spec):
    """The excluded upper end of the admissible gamma range: min(n/m, gamma_R)."""
    return float(min(spec.Sx.n / spec.Sy.n, _gamma_R(spec)))


def max_gamma(X, Y, n_components=2, *, eigen_solver="auto", random_state=None):
    """The largest admissible gamma (excluded end of the admissible range).

    gamma is admissible when n - gamma m > 0 and sigma^2 > 0 (see the module docstring
    for the derivation); the range is [0, max_gamma). In gamma' units it is
    ``max_gamma * m / n``. Missing values are imputed by the group means for this bound.
    :meth:`PCPCA.fit` computes the same value (``max_gamma_``) from the matrices it fits with.

    Parameters
    ----------
    X : (n, D) target cells, dense or sparse
    Y : (m, D) background cells
    n_components : int, k
    eigen_solver, random_state : as in :class:`PCPCA`

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.pcpca import max_gamma
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.normal(size=(60, 10)), rng.normal(size=(60, 10))
    >>> bool(0 < max_gamma(X, Y) < np.inf)                            # gamma must stay below it
    True
    """
    k = check_int(n_components, "n_components", 1)
    check_option(eigen_solver, "eigen_solver", _EIGEN_SOLVERS)
    rng = check_random_state(random_state)
    X, Y, _ = _check_groups(X, Y, k)
    Sx, Sy = _scatters(X, Y)
    solver = _resolve_eigen_solver(eigen_solver, X.shape[1], k)
    return _admissible_end(_Spectrum(Sx, Sy, k, solver, rng))


def _inadmissible(given, value, gamma, n, m, bound, reason, has_nan):
    """The one-line error for a gamma at or above ``bound`` (the message states the bound on both scales)."""
    where = " (missing values imputed by group means)" if has_nan else ""
    gp, bp = gamma * m / n, bound * m / n
    if given == "gamma":
        what = f"gamma={value:.6g} (gamma_prime={gp:.4g})"
        need = f"need gamma < {bound:.6g} (gamma_prime < {bp:.4g})"
    else:
        what = f"gamma_prime={value:.6g} (gamma={gamma:.6g})"
        need = f"need gamma_prime < {bp:.4g} (gamma < {bound:.6g})"
    return (f"{given}: {what} is not admissible for these {n} target and {m} background cells{where}: "
            f"{reason}; {need}; lower it or set on_inadmissible='clip'")
