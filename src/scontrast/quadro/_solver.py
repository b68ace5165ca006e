"""QUADRO's convex problem and its compiled accelerated proximal-gradient solver.

    min  pi L_1 + (1-pi) L_2 + lambda1 |Omega|_1 + lambda2 |delta|_1
    s.t. M_2 - M_1 = 1

:class:`RayleighProblem` holds the smooth part (a homogeneous quadratic) and the
constraint; :func:`solve_rayleigh` runs FISTA with adaptive restart, whose proximal step
(soft-thresholding with one scalar shift) keeps every iterate on the constraint. The loop,
the gradient and the proximal step are compiled (numba), with the same formulas as the
Python ``RayleighProblem.gradient`` and :func:`_prox_l1_affine`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np
from scipy.optimize import minimize_scalar
from scipy.sparse.linalg import LinearOperator, eigsh

from ..core import CannotRun, ScontrastError
from ._moments import Moments

# --------------------------------------------------------------------------- the convex problem


class RayleighProblem:
    """The smooth part and the constraint of QUADRO's convex problem.

    Variables ``x = (Omega, delta)`` are packed as ``[Omega.ravel(), delta]``
    (length d^2 + d) with Omega symmetric; inner products are Frobenius, so the
    L1 norm of the packed vector counts each off-diagonal entry twice, as
    ``|Omega|_1`` does. ``f(x) = pi L_1 + (1-pi) L_2`` is a homogeneous
    quadratic, ``f(x) = x' H x``, and the constraint ``M_2 - M_1 = 1`` is
    ``<a, x> = 1`` with ``a = [S2 - S1 + mu2 mu2' - mu1 mu1', -2 (mu2 - mu1)]``.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.quadro import RayleighProblem, estimate_moments
    >>> rng = np.random.default_rng(0)
    >>> problem = RayleighProblem(estimate_moments(rng.normal(size=(80, 3)), rng.normal(size=(80, 3)) + 1.0))
    >>> problem.size, problem.a.shape                         # Omega (3 x 3) and delta (3) packed
    (12, (12,))
    """

    def __init__(self, moments: Moments):
        m = moments
        self.d = d = m.mu1.shape[0]
        self.gamma = m.gamma
        self.classes = ((m.pi, m.mu1, m.Sigma1), (1.0 - m.pi, m.mu2, m.Sigma2))
        # both classes stacked, so that one gradient is a handful of batched BLAS calls
        self._w = np.array([m.pi, 1.0 - m.pi])
        self._S = np.stack([m.Sigma1, m.Sigma2])
        self._mu = np.stack([m.mu1, m.mu2])
        A = m.Sigma2 - m.Sigma1 + np.outer(m.mu2, m.mu2) - np.outer(m.mu1, m.mu1)
        self.a = np.concatenate([(0.5 * (A + A.T)).ravel(), -2.0 * (m.mu2 - m.mu1)])
        if not np.any(self.a):
            # not an input to fix: the workflow records it and keeps the other methods' results
            raise CannotRun("moments: the two classes have identical estimated means and covariances, "
                            "nothing to separate")
        self.size = d * d + d
        self._lipschitz = None

    def unpack(self, x: np.ndarray):
        d = self.d
        return x[: d * d].reshape(d, d), x[d * d:]

    def gradient(self, x: np.ndarray) -> np.ndarray:
        """Gradient of f at x (packed, length d^2 + d); equals 2 H x.

        Per class: ``grad_Omega L = 4(1+g) S Omega S + 2 g tr(Omega S) S
        + 4 (r mu' + mu r')`` and ``grad_delta L = -8 r`` with
        ``r = S (Omega mu - delta)`` (Omega symmetric, so the Omega gradient is
        the symmetric one).
        """
        d, g = self.d, self.gamma
        Om = x[: d * d].reshape(d, d)
        de = x[d * d:]
        S, w, mu = self._S, self._w, self._mu
        SOS = (S @ Om) @ S
        tr = np.einsum("kij,ij->k", S, Om)
        r = np.einsum("kij,kj->ki", S, mu @ Om - de)
        wr = w[:, None] * r
        G = np.einsum("k,kij->ij", 4.0 * (1.0 + g) * w, SOS) + np.einsum("k,kij->ij", 2.0 * g * w * tr, S)
        outer = 4.0 * (wr.T @ mu)
        G += outer + outer.T
        G = 0.5 * (G + G.T)
        return np.concatenate([G.ravel(), -8.0 * wr.sum(axis=0)])

    def value(self, x: np.ndarray, grad: np.ndarray | None = None) -> float:
        """f(x) = pi L_1 + (1-pi) L_2 (from the gradient: f is homogeneous of degree 2)."""
        if grad is None:
            grad = self.gradient(x)
        return float(0.5 * grad @ x)

    def lipschitz(self) -> float:
        """Largest eigenvalue of the Hessian 2H (Lanczos, deterministic start)."""
        if self._lipschitz is None:
            op = LinearOperator((self.size, self.size), matvec=self.gradient, dtype=float)
            v0 = np.ones(self.size) / math.sqrt(self.size)
            if self.size <= 3:
                H2 = np.column_stack([self.gradient(e) for e in np.eye(self.size)])
                lam = float(np.linalg.eigvalsh(0.5 * (H2 + H2.T))[-1])
            else:
                lam = float(eigsh(op, k=1, which="LA", v0=v0, tol=1e-8, return_eigenvectors=False)[0])
            self._lipschitz = max(lam, np.finfo(float).tiny)
        return self._lipschitz

    def omega_zero_level(self) -> float | None:
        """The smallest lambda1 at which ``Omega = 0`` solves the problem with ``lambda2 = 0``.

        With ``Omega = 0`` the problem is ``min 4 delta' S delta`` s.t.
        ``-2 (mu2 - mu1)' delta = 1`` (``S`` the prior-weighted covariance), solved by
        ``delta = S^-1 b / (b' S^-1 b)`` with multiplier ``nu = -8 / (b' S^-1 b)``;
        the optimality conditions keep ``Omega`` at zero exactly while
        ``lambda1 >= max_ij |grad_Omega f + nu a_Omega|_ij``. None when no linear
        rule is feasible (equal means).
        """
        d, d2 = self.d, self.d * self.d
        b = self.a[d2:]
        if not np.any(b):
            return None
        S = np.einsum("k,kij->ij", self._w, self._S)
        ridge = 1e-10 * max(float(np.trace(S)) / d, np.finfo(float).tiny)
        u = np.linalg.lstsq(S + ridge * np.eye(d), b, rcond=None)[0]
        den = float(b @ u)
        if not den > 0:
            return None
        x = np.zeros(self.size)
        x[d2:] = u / den
        g = self.gradient(x)
        nu = -float(g[d2:] @ b) / float(b @ b)
        level = float(np.abs(g[:d2] + nu * self.a[:d2]).max())
        return level if level > 0 else None

    def reference_scale(self) -> tuple[float, float]:
        """Scale of the penalties, the analogue of the lasso's ``lambda_max``.

        lambda1: ``omega_zero_level`` (the path of lambda1 multiples starts at 1,
        where the rule is linear, ``Omega = 0``), or the sparsest-point scale below
        when that is larger (then Omega is zero at 1 too). lambda2: at the sparsest feasible point ``x_s`` (the minimum-L1 point of
        ``<a, x> = 1``: one symmetric pair of Omega or one entry of delta, where
        ``|a|`` is largest) the penalties must exceed the constraint-corrected
        smooth gradient ``|grad f(x_s) + nu a|`` to keep the answer that sparse.
        Returns, per block (Omega, delta), the largest entry of that gradient
        with ``nu`` minimising its overall maximum (for lambda1 only when
        ``omega_zero_level`` is None). lambda1 and lambda2 are multiples of
        these: 1 gives ``Omega = 0`` (lambda1) and (nearly) the sparsest delta
        (lambda2); small multiples approach the unpenalised answer.
        """
        d2 = self.d * self.d
        i = int(np.argmax(np.abs(self.a)))
        x = np.zeros(self.size)
        if i < d2:
            r, c = divmod(i, self.d)
            x[[r * self.d + c, c * self.d + r]] = 1.0
        else:
            x[i] = 1.0
        x /= float(self.a @ x)
        g = self.gradient(x)
        a = self.a
        bound = 2.0 * float(np.abs(g).max()) / float(np.abs(a).max()) + 1e-300
        res = minimize_scalar(lambda nu: float(np.abs(g + nu * a).max()), bounds=(-bound, bound),
                              method="bounded", options={"xatol": 1e-10 * bound})
        h = np.abs(g + res.x * a)
        ref1, ref2 = float(h[:d2].max()), float(h[d2:].max())
        zero = self.omega_zero_level()
        if zero is not None:
            # at least the zero level; where the linear problem is degenerate (d > n: a singular
            # covariance separates the classes with f ~ 0) the zero level is ~0 and the
            # sparsest-point scale keeps the path meaningful
            ref1 = max(zero, ref1)
        top = max(ref1, ref2, np.finfo(float).tiny)
        return (ref1 if ref1 > 0 else top, ref2 if ref2 > 0 else top)


def _prox_l1_affine(v: np.ndarray, a: np.ndarray, tau: np.ndarray, theta0: float = 0.0):
    """argmin_z 1/2 |z - v|^2 + sum tau_i |z_i|  s.t.  <a, z> = 1.

    The solution is ``z(theta) = soft(v - theta a, tau)`` where theta solves the
    monotone (non-increasing) piecewise-linear equation ``<a, z(theta)> = 1``.
    Solved by Newton steps on the current linear piece, safeguarded by the
    bracket and by the conservative slope ``-|a|^2`` (which never overshoots);
    on the piece holding the root, Newton lands on it exactly.  Coordinates with
    ``a_i = 0`` are soft-thresholded alone.  (Compiled: :func:`_prox_nb`.)

    Parameters
    ----------
    v, a, tau : ndarray, shape (n,)
    theta0 : float
        Starting multiplier (the previous step's, in FISTA).

    Returns
    -------
    z : ndarray, shape (n,)
    theta : float
    """
    f = np.ascontiguousarray
    return _prox_nb(f(v, dtype=float), f(a, dtype=float), f(tau, dtype=float), float(theta0))


@dataclass
class RayleighSolution:
    """Result of ``solve_rayleigh``.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.quadro import RayleighProblem, estimate_moments, solve_rayleigh
    >>> rng = np.random.default_rng(0)
    >>> problem = RayleighProblem(estimate_moments(rng.normal(size=(80, 3)), rng.normal(size=(80, 3)) + 1.0))
    >>> sol = solve_rayleigh(problem, lambda1=0.1, lambda2=0.1)
    >>> type(sol).__name__, sol.Omega.shape, sol.delta.shape, sol.converged
    ('RayleighSolution', (3, 3), (3,), True)
    """

    Omega: np.ndarray
    delta: np.ndarray
    x: np.ndarray
    objective: float
    smooth: float
    multiplier: float
    n_iter: int
    converged: bool
    residual: float


@numba.njit(cache=True, nogil=True)
def _gradient_nb(x, S, mu, w, g, d):  # pragma: no cover - compiled
    """``RayleighProblem.gradient`` compiled (same formulas; S (2, d, d), mu (2, d), w (2,))."""
    d2 = d * d
    Om = np.ascontiguousarray(x[:d2]).reshape(d, d)
    de = x[d2:]
    G = np.zeros((d, d))
    gd = np.zeros(d)
    # Omega is sparse along the lambda path (zero at its start): S Omega S only over the rows/columns
    # where Omega has an entry
    J = np.empty(d, dtype=np.int64)
    m = 0
    for i in range(d):
        for j in range(d):
            if Om[i, j] != 0.0 or Om[j, i] != 0.0:
                J[m] = i
                m += 1
                break
    J = J[:m]
    OmJ = np.empty((m, m))
    for p in range(m):
        for q in range(m):
            OmJ[p, q] = Om[J[p], J[q]]
    for k in range(2):
        Sk = S[k]
        if m == 0:
            SOS = np.zeros((d, d))
        elif 2 * m < d:
            SJ = np.ascontiguousarray(Sk[:, J])
            SOS = (SJ @ OmJ) @ np.ascontiguousarray(SJ.T)
        else:
            SOS = (Sk @ Om) @ Sk
        tr = 0.0
        for i in range(d):
            for j in range(d):
                tr += Sk[i, j] * Om[i, j]
        u = mu[k] @ Om - de
        wr = w[k] * (Sk @ u)
        c1 = 4.0 * (1.0 + g) * w[k]
        c2 = 2.0 * g * w[k] * tr
        for i in range(d):
            gd[i] -= 8.0 * wr[i]
            for j in range(d):
                G[i, j] += c1 * SOS[i, j] + c2 * Sk[i, j] + 4.0 * (wr[i] * mu[k, j] + wr[j] * mu[k, i])
    out = np.empty(d2 + d)
    for i in range(d):
        for j in range(d):
            out[i * d + j] = 0.5 * (G[i, j] + G[j, i])
        out[d2 + i] = gd[i]
    return out


@numba.njit(cache=True, nogil=True)
def _prox_nb(v, a, tau, theta0):  # pragma: no cover - compiled
    """The iteration of :func:`_prox_l1_affine` (its docstring), compiled; returns (z, theta)."""
    n = v.size
    full_slope = 0.0
    amax = 0.0
    vmax = 0.0
    tmax = 0.0
    for i in range(n):
        if a[i] != 0.0:
            full_slope -= a[i] * a[i]
            amax = max(amax, abs(a[i]))
            vmax = max(vmax, abs(v[i]))
            tmax = max(tmax, tau[i])
    scale = 1.0 + amax * (vmax + tmax)
    lo = -np.inf
    hi = np.inf
    theta = theta0
    for _ in range(200):
        val = -1.0
        slope = 0.0
        for i in range(n):
            ai = a[i]
            if ai != 0.0:
                u = v[i] - theta * ai
                au = abs(u) - tau[i]
                if au > 0:
                    val += ai * (au if u >= 0 else -au)
                    slope -= ai * ai
        if abs(val) <= 1e-14 * scale:
            break
        if val > 0:
            lo = theta
        else:
            hi = theta
        new = theta - val / slope if slope < 0 else np.nan
        if not (lo < new < hi):
            safe = theta - val / full_slope
            new = safe if (lo < safe < hi) else 0.5 * (lo + hi)
        if new == theta:
            break
        theta = new
    z = np.empty(n)
    for i in range(n):
        u = v[i] - theta * a[i]
        au = abs(u) - tau[i]
        z[i] = 0.0 if au <= 0 else (au if u >= 0 else -au)
    return z, theta


@numba.njit(cache=True, nogil=True)
def _fista_nb(S, mu, w, g, d, a, lam, step, start, theta, tol, max_iter):  # pragma: no cover - compiled
    """The FISTA loop of ``solve_rayleigh``; returns (x, theta, n_iter, converged, residual)."""
    tau = step * lam
    x, theta = _prox_nb(start, a, tau, theta)
    y = x.copy()
    t = 1.0
    converged = False
    residual = np.inf
    n_iter = 0
    tiny = np.finfo(np.float64).tiny
    while n_iter < max_iter:
        n_iter += 1
        grad = _gradient_nb(y, S, mu, w, g, d)
        x_new, theta = _prox_nb(y - step * grad, a, tau, theta)
        residual = np.linalg.norm(x_new - y) / max(np.linalg.norm(x_new), tiny)
        if residual <= tol:
            x = x_new
            converged = True
            break
        if np.dot(y - x_new, x_new - x) > 0:  # momentum points uphill: restart
            t = 1.0
            y = x_new.copy()
        else:
            t_new = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
            y = x_new + ((t - 1.0) / t_new) * (x_new - x)
            t = t_new
        x = x_new
    return x, theta, n_iter, converged, residual


def solve_rayleigh(problem: RayleighProblem, lambda1: float, lambda2: float, x0: np.ndarray | None = None,
                   tol: float = 1e-7, max_iter: int = 10000, nu0: float = 0.0) -> RayleighSolution:
    """Solve ``min f(x) + lambda1 |Omega|_1 + lambda2 |delta|_1`` subject to ``M_2 - M_1 = 1``.

    Accelerated proximal gradient (FISTA) with gradient-based adaptive restart;
    the proximal step is ``_prox_l1_affine``, so every iterate satisfies the
    equality constraint up to rounding. ``lambda1``/``lambda2`` are absolute.
    The iteration is compiled (numba: ``_fista_nb``, the gradient and the
    proximal step with the same formulas as ``RayleighProblem.gradient`` and
    ``_prox_l1_affine``).

    Parameters
    ----------
    problem : RayleighProblem
    lambda1, lambda2 : non-negative penalties on Omega and delta.
    x0 : warm start (packed), projected onto the constraint first.
    tol : stop when ``|x_next - y| <= tol |x_next|`` (the scaled gradient mapping).
    max_iter : iteration cap; ``converged`` is False when it is reached.
    nu0 : starting guess of the multiplier (warm start).

    Returns
    -------
    RayleighSolution with ``multiplier`` nu such that
    ``grad f(x) + nu a + lambda * subgradient |x|_1 = 0`` at the optimum.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.quadro import RayleighProblem, estimate_moments, solve_rayleigh
    >>> rng = np.random.default_rng(0)
    >>> X1, X2 = rng.normal(size=(100, 3)), rng.normal(size=(100, 3))
    >>> X2[:, 0] += 1.5                                       # the classes differ in the mean of feature 0
    >>> problem = RayleighProblem(estimate_moments(X1, X2))
    >>> sol = solve_rayleigh(problem, lambda1=0.5, lambda2=0.05)
    >>> bool(np.isclose(problem.a @ sol.x, 1.0)), int(np.argmax(np.abs(sol.delta)))   # M_2 - M_1 = 1 holds
    (True, 0)
    """
    if lambda1 < 0 or lambda2 < 0:
        raise ScontrastError(f"lambda1, lambda2: expected non-negative penalties, got {lambda1!r} and {lambda2!r}")
    d = problem.d
    lam = np.concatenate([np.full(d * d, float(lambda1)), np.full(d, float(lambda2))])
    step = 1.0 / (1.01 * problem.lipschitz())
    start = np.zeros(problem.size) if x0 is None else np.ascontiguousarray(x0, dtype=float)
    x, theta, n_iter, converged, residual = _fista_nb(
        np.ascontiguousarray(problem._S), np.ascontiguousarray(problem._mu), problem._w, float(problem.gamma), d,
        problem.a, lam, step, start, float(nu0 * step), float(tol), int(max_iter))
    g = problem.gradient(x)
    smooth = problem.value(x, g)
    Om, de = problem.unpack(x)
    Om = 0.5 * (Om + Om.T)
    return RayleighSolution(
        Omega=Om, delta=de.copy(), x=x, smooth=smooth,
        objective=smooth + lambda1 * float(np.abs(Om).sum()) + lambda2 * float(np.abs(de).sum()),
        multiplier=theta / step, n_iter=int(n_iter), converged=bool(converged), residual=float(residual),
    )

