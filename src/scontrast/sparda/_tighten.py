"""Tightening: projected gradient ascent on ``J(beta) = D(beta) - lam ||beta||_1^2`` over the sparse unit sphere.

:func:`tighten` ascends from one start for one labelling of the cells; :func:`_tighten_rows` runs
the same ascent for many labellings at once (the ``'permute'`` test's statistic, each row with its
own labelling and start).  Both are built from the same step functions: the objective
(:func:`_penalised`), the candidate of a step (gradient step, L1 proximal step, truncation to ``k``:
:func:`_candidate`) and the step-size rule (:func:`_next_step`).  They are not one loop with the
single labelling as the batch of one, because that would change its results in the last bits: a
vector's dot product and norm (BLAS) round differently from the row-wise reductions of the batch,
and the scalar ``float ** 2`` (C ``pow``) differs from an array's square in about 1 case in 1,300.
:func:`_moment_starts` turns group moments into tightening starts, for one labelling (the
estimator) or many (the test).
"""

from __future__ import annotations

import numpy as np

from ._utils import _orient
from ._wasserstein import divergence_gradient


# --------------------------------------------------------------------------- #
# The steps, shared by the single and the batched ascent (last axis: genes)
# --------------------------------------------------------------------------- #
def _top_k(B: np.ndarray, k: int | None) -> np.ndarray:
    """Keep the ``k`` largest-magnitude entries along the last axis of ``B`` (all when ``k`` is None)."""
    if k is None or k >= B.shape[-1]:
        return B
    idx = np.argpartition(np.abs(B), -k, axis=-1)[..., -k:]
    out = np.zeros_like(B)
    np.put_along_axis(out, idx, np.take_along_axis(B, idx, axis=-1), axis=-1)
    return out


def _unit_rows(B: np.ndarray) -> np.ndarray:
    """Every row of ``B`` rescaled to unit norm (zero rows stay zero)."""
    nrm = np.linalg.norm(B, axis=1, keepdims=True)
    return np.divide(B, nrm, out=np.zeros_like(B), where=nrm > 0)


def _project_sparse_sphere(beta: np.ndarray, k: int) -> np.ndarray:
    """Keep the ``k`` largest-magnitude entries, rescale to unit norm."""
    beta = _top_k(beta, k)
    nrm = np.linalg.norm(beta)
    return beta / nrm if nrm > 0 else beta


def _penalised(D, beta: np.ndarray, lam: float, power: int = 2):
    """``J = D - lam ||beta||_1^power`` of one direction (1-D) or of every row (2-D)."""
    return D - lam * np.abs(beta).sum(axis=-1) ** power


def _shrink(cand: np.ndarray, thr) -> np.ndarray:
    """Soft-threshold every direction (last axis) by its ``thr``; one that would vanish keeps its
    largest entry instead (the sparsest point on the sphere rather than no direction at all)."""
    shrunk = np.sign(cand) * np.maximum(np.abs(cand) - np.expand_dims(thr, -1), 0.0)
    empty = ~shrunk.any(axis=-1)
    if empty.any():
        top = np.argmax(np.abs(cand), axis=-1, keepdims=True)
        sparsest = np.where(np.arange(cand.shape[-1]) == top, cand, 0.0)
        shrunk = np.where(np.expand_dims(empty, -1), sparsest, shrunk)
    return shrunk


def _candidate(beta: np.ndarray, gt: np.ndarray, s, lam: float, k: int | None, power: int = 2) -> np.ndarray:
    """The next point of the ascent before rescaling: step ``s`` along the angular gradient ``gt``,
    the L1 proximal step (the penalty linearised at ``beta``), truncation to the ``k`` largest entries.

    ``beta``, ``gt``: shape (d,) or (P, d); ``s``: a scalar or shape (P,).  ``power=1`` thresholds
    for ``lam ||beta||_1`` instead of its square.
    """
    cand = beta + np.expand_dims(s, -1) * gt
    if lam > 0:
        thr = 2.0 * s * lam * np.abs(beta).sum(axis=-1) if power == 2 else s * lam
        cand = _shrink(cand, thr)
    return _top_k(cand, k)


def _next_step(eta, accepted, step: float):
    """Backtracking: a successful step earns a slightly longer next one (at most ``step``), a failed one half."""
    return np.where(accepted, np.minimum(step, eta * 1.5), eta * 0.5)


def _moment_starts(mean_difference: np.ndarray, cov_difference: np.ndarray | None) -> list[np.ndarray]:
    """Tightening starts from the group moments: the mean difference and the extreme eigenvectors
    (largest, then smallest eigenvalue) of the covariance difference (``None``: one gene, no
    eigenvectors); for one labelling (shapes (d,), (d, d)) or many (leading axis P)."""
    starts = [mean_difference]
    if cov_difference is not None:
        _, V = np.linalg.eigh(cov_difference)
        starts += [V[..., -1], V[..., 0]]
    return starts


# --------------------------------------------------------------------------- #
# One labelling
# --------------------------------------------------------------------------- #
def tighten(
    X,
    Y,
    beta0: np.ndarray,
    k: int | None = None,
    lam: float = 0.0,
    *,
    step: float = 0.5,
    max_iter: int = 300,
    min_step: float = 1e-3,
    tol: float = 1e-9,
) -> dict:
    """Tightening: projected gradient ascent on ``J(beta) = D(beta) - lam ||beta||_1^2``
    over the unit sphere and ``||beta||_0 <= k``.

    ``lam ||beta||_1^2`` is the relaxation's penalty ``lam ||B||_1`` at ``B = beta beta'``,
    so ``J`` is the objective the relaxation relaxes (``lam = 0``: the paper's
    tightening of ``D`` alone).  Each step moves along the gradient
    ``2 W_M(beta) beta`` (sorted matching) with its radial part removed (``D`` is
    2-homogeneous: only the angular part matters), scaled to length ``step``;
    then the L1 proximal step (soft-threshold by ``2 lam ||beta||_1`` times the step,
    the penalty linearised at ``beta``), truncation to the ``k`` largest entries
    and rescaling to unit norm (the maximiser over the ball lies on the sphere).
    A step that does not increase ``J`` is retried from the current point with half
    the step (backtracking), so the iterates are monotone and the answer never
    ends below ``J(beta0)``.

    Parameters
    ----------
    X : ndarray or sparse matrix, shape (n, d)
    Y : ndarray or sparse matrix, shape (m, d)
    beta0 : ndarray, shape (d,)
        Start (the RELAX direction).
    k : int, optional
        Cardinality bound; default the number of nonzeros of ``beta0``.
    lam : float
        Penalty weight (0: plain divergence).
    step : float
        Initial angular step (radians, roughly).
    max_iter : int
        Maximum number of gradient evaluations.
    min_step : float
        Stop once backtracking shrinks the step below this.
    tol : float
        Stop when an accepted step improves ``J`` by less than ``tol * |J|``.

    Returns
    -------
    dict
        ``beta`` (d,), ``divergence`` ``D(beta)``, ``objective`` ``J(beta)``,
        ``start_divergence`` / ``start_objective`` at the (truncated) start,
        ``n_iter`` (gradient evaluations).

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.sparda import tighten
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.normal(size=(40, 4)), rng.normal(size=(40, 4))
    >>> X[:, 2] *= 3.0
    >>> out = tighten(X, Y, beta0=np.full(4, 0.5))            # from a flat start, no sparsity constraint
    >>> int(np.argmax(np.abs(out["beta"]))), bool(out["divergence"] > out["start_divergence"])
    (2, True)
    """
    beta0 = np.asarray(beta0, dtype=float)
    if k is None:
        k = int(np.count_nonzero(beta0))
    k = max(1, min(int(k), beta0.shape[0]))
    beta = _project_sparse_sphere(beta0, k)
    D, g = divergence_gradient(X, Y, beta)
    J = _penalised(D, beta, lam)
    D0, J0 = D, J
    eta = step
    t = 0
    for t in range(1, max_iter + 1):  # noqa: B007 (t, the iterations done, is returned)
        gt = g - (g @ beta) * beta
        gn = np.linalg.norm(gt)
        if gn == 0.0 or eta < min_step:
            break
        cand = _project_sparse_sphere(_candidate(beta, gt, eta / gn, lam, k), k)
        Dc, gc = divergence_gradient(X, Y, cand)
        Jc = _penalised(Dc, cand, lam)
        accepted = Jc > J
        if accepted:
            small = Jc - J <= tol * abs(J)
            beta, D, J, g = cand, Dc, Jc, gc
            if small:
                break
        eta = float(_next_step(eta, accepted, step))
    return {
        "beta": _orient(beta),
        "divergence": D,
        "objective": J,
        "start_divergence": D0,
        "start_objective": J0,
        "n_iter": t,
    }


# --------------------------------------------------------------------------- #
# Many labellings at once (test='permute')
# --------------------------------------------------------------------------- #
def _tighten_rows(f, perms: np.ndarray, B0: np.ndarray, lam: float, k: int | None,
                  max_iter: int, step: float = 0.5, min_step: float = 1e-3, tol: float = 1e-6,
                  power: int = 2) -> np.ndarray:
    """:func:`tighten` run on every labelling (row) at once; the final objectives ``J``, shape (P,).

    ``f`` is the batched divergence and gradient (``scontrast.sparda._test._Labellings``).  The
    same steps as :func:`tighten` (angular gradient step, L1 proximal step, truncation to ``k``,
    rescaling, backtracking), row by row: a row's result does not depend on the others.
    ``power=1`` penalises ``lam ||beta||_1`` instead of its square (a variant the benchmark
    measured and rejected, see ``docs/sparda.md``).
    """
    beta = _unit_rows(_top_k(np.array(B0, dtype=float), k))
    D, g = f(beta, perms)
    J = _penalised(D, beta, lam, power)
    eta = np.full(beta.shape[0], step)
    done = np.zeros(beta.shape[0], dtype=bool)
    for _ in range(max_iter):
        gt = g - np.einsum("pd,pd->p", g, beta)[:, None] * beta
        gn = np.linalg.norm(gt, axis=1)
        done |= (gn == 0.0) | (eta < min_step)
        act = np.flatnonzero(~done)
        if act.size == 0:
            break
        cand = _unit_rows(_candidate(beta[act], gt[act], eta[act] / gn[act], lam, k, power))
        Dc, gc = f(cand, perms[act])
        Jc = _penalised(Dc, cand, lam, power)
        Ja = J[act]
        acc = Jc > Ja
        done[act[acc & (Jc - Ja <= tol * np.abs(Ja))]] = True
        up = act[acc]
        beta[up], J[up], g[up] = cand[acc], Jc[acc], gc[acc]
        eta[act] = _next_step(eta[act], acc, step)
    return J
