"""``BinaryFactorEnsemble``: binary latent features chosen by their stability over resamples of the cells.

An alternative to the IBP posterior (``LinearGaussianIBP``) for real cells, where that posterior
wants more features the more cells it sees and its chains stop in different modes.
For each K = 1 .. ``max_features``, ``n_members`` fixed-K binary factorisations X ~ 1 b' + Z A
(``_binary_factor``: least squares over binary Z, exact per-cell enumeration of the 2^K patterns)
are fitted, each on its own Bayesian-bootstrap reweighting of the cells (Dirichlet(1, ..., 1)
weights) and from its own starts; every cell then gets its pattern from each member's loadings.
A K is *stable* when the medoid member's every feature recurs in the other members (on the fitted
cells) with a mean matched Jaccard index of at least ``stability`` (the matching of :func:`scontrast.fangs.feature_support`). The
chosen K is the largest stable one (the finest resolution the resamples reproduce); its members
are the samples FANGS summarises. The members are resamples, not posterior draws: their spread
is the sampling variability of the fit (a bootstrap), which is what the agreement of two runs and
the support of a finding need.

K is bounded by ``max_features`` and, because the fits run on at most ``max_cells`` cells (a
stratified subsample; the other cells are assigned exactly given each member's loadings), does
not grow with the number of cells beyond that.
"""

from __future__ import annotations

import logging
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from .._matching import feature_support
from ..bounds import check_count
from ..core import (
    ScontrastError,
    ScontrastWarning,
    check_bool,
    check_int,
    check_matrix,
    check_random_state,
    check_real,
    one_blas_thread,
    spawn_seed,
)
from ._binary_factor import assign, fit_member, oriented
from ._estimator import _subsample

_log = logging.getLogger("scontrast.latent_features")


def _member(X: np.ndarray, k: int, seed: int, p: dict) -> dict:
    """One member: a fit of the (fitted) cells X with Bayesian-bootstrap weights, each feature the minority side."""
    rng = np.random.default_rng(seed)
    w = rng.dirichlet(np.ones(X.shape[0])) * X.shape[0]
    fit = fit_member(X, w, k, starts=p["starts"], max_iter=p["max_iter"], ridge=p["ridge"],
                     min_cells=p["min_cells"], rng=rng)
    Z, b, A = oriented(fit["Z"], fit["b"], fit["A"])
    keep = Z.sum(axis=0) >= p["min_cells"]
    return {"Z": np.ascontiguousarray(Z[:, keep]), "b": b, "A": A[keep], "loss": fit["loss"],
            "converged": fit["converged"]}


def _on_all_cells(X: np.ndarray, rows: np.ndarray, member: dict, min_cells: int) -> dict:
    """The member with every cell of X assigned from its loadings (the fitted cells keep their fit)."""
    if rows.size == X.shape[0]:
        return member
    Z = assign(X, member["b"], member["A"])
    Z[rows] = member["Z"]
    keep = Z.sum(axis=0) >= min_cells
    return {**member, "Z": np.ascontiguousarray(Z[:, keep]), "A": member["A"][keep]}


def stability(members: list[np.ndarray], k: int | None = None) -> tuple[float, int, np.ndarray]:
    """How well the medoid member's features recur in the others.

    members: M >= 2 binary (N, K_m) allocations, fitted with ``k`` features each (None: each
    member's own count). Each member's features are matched to every other member's
    (``fangs.feature_support``: maximum-overlap alignment, Jaccard index of the matched cells, 0
    unmatched) and averaged over the others; a feature a member lacks (K_m < k: dropped below
    ``min_cells``) counts at support 0, so a member that found fewer features than were asked
    for cannot make a K look stable. The medoid is the member of largest mean support over its
    k features (ties: the first). Returns ``(min support of the medoid's k features (1.0 when
    k = 0), medoid index, the support of its own features (K_medoid,))``.
    """
    best, medoid, per_feature, weakest = -1.0, 0, np.zeros(0), 1.0
    for m, Zm in enumerate(members):
        others = [z for j, z in enumerate(members) if j != m]
        s = feature_support(others, Zm)[0][:, 0] if Zm.shape[1] else np.zeros(0)
        slots = np.concatenate([s, np.zeros(max(0, (Zm.shape[1] if k is None else k) - s.size))])
        score = float(slots.mean()) if slots.size else 1.0
        if score > best:
            best, medoid, per_feature = score, m, s
            weakest = float(slots.min()) if slots.size else 1.0
    return weakest, medoid, per_feature


class BinaryFactorEnsemble(BaseEstimator):
    """Binary latent features of the cells, K chosen by stability over Bayesian-bootstrap resamples.

    Parameters
    ----------
    max_features : int
        Largest K tried (every K from 1 up to it); choosing it is a warning (edge of the grid).
    n_members : int >= 2
        Resampled fits per K; the chosen K's members are the samples.
    stability : float in (0, 1]
        A K is stable when every feature of its medoid member recurs in the other members with
        a mean matched Jaccard index >= this.
    starts : int
        Starts per member (the first the deterministic principal-axis start, the others random).
    max_iter : int
        Alternations per start (each ends earlier, when at most 0.1% of the cells change pattern).
    ridge : float
        Ridge penalty of the loadings (in units of X^2 after ``scale``: the prior precision of a
        loading with standard deviation one when the noise variance is one).
    min_cells : int
        A feature held by fewer cells (in the fit, or over all cells at the end) is dropped.
    max_cells : int >= 2 or None
        The fits run on at most this many cells, stratified by ``fit``'s ``strata`` (None = all);
        every cell is assigned exactly from each member's loadings.
    scale : bool
        Divide X by its overall standard deviation first (one number: the geometry is unchanged).
    n_jobs : int or None
        Threads fitting members at once (-1 or None = one per core); results do not depend on it.
    random_state : None, int >= 0 or numpy Generator

    Attributes
    ----------
    samples_ : list of ndarray (N, K_m) uint8
        The chosen K's members: each cell's features in each resampled fit (no empty columns).
    sample_chains_ : ndarray (M,) int
        Each member's half (member index mod 2): two halves whose support is reported apart, as
        two chains of a sampler would be.
    n_features_ : int
        The chosen K (0 when not even one feature is stable).
    stability_ : ndarray (max_features,)
        Minimum support of the medoid member's features at K = 1 .. max_features (NaN: not tried,
        because the K before it were unstable, see ``PATIENCE``).
    medoid_support_ : ndarray (K,)
        The chosen K's medoid features' support. ``medoid_`` : int, its index in ``samples_``.
    A_ : ndarray (K, D), intercept_ : ndarray (D,)
        The medoid member's loadings and baseline (in the units of X).
    sigma_x_ : float
        Root mean squared residual of the medoid member over all cells (units of X).
    converged_ : ndarray (M,) bool
        Whether each chosen member's best start reached a fixed point within ``max_iter``.
    fitted_cells_ : ndarray (S,) int ; scale_ : float ; timings_ : dict

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.latent_features import BinaryFactorEnsemble
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 12))
    >>> X[rng.random(200) < 0.4, :4] += 3.0               # one programme of genes 0-3
    >>> model = BinaryFactorEnsemble(random_state=0).fit(X)
    >>> model.n_features_
    1
    """

    def __init__(self, max_features: int = 8, n_members: int = 40, stability: float = 0.8, starts: int = 4,
                 max_iter: int = 100, ridge: float = 1.0, min_cells: int = 10, max_cells: int | None = 2000,
                 scale: bool = True, n_jobs: int | None = 1, random_state=None):
        self.max_features = max_features
        self.n_members = n_members
        self.stability = stability
        self.starts = starts
        self.max_iter = max_iter
        self.ridge = ridge
        self.min_cells = min_cells
        self.max_cells = max_cells
        self.scale = scale
        self.n_jobs = n_jobs
        self.random_state = random_state

    def _check_params(self) -> dict:
        """The checked hyper-parameters (``ScontrastError`` naming the first bad one)."""
        p = {"max_features": _count(self.max_features, "max_features", 1),
             "n_members": _count(self.n_members, "n_members", 2),
             "stability": check_real(self.stability, "stability", 0.0, 1.0, strict_min=True),
             "starts": _count(self.starts, "starts", 1),
             "max_iter": _count(self.max_iter, "max_iter", 1),
             "ridge": check_real(self.ridge, "ridge", 0.0, strict_min=True),
             "min_cells": _count(self.min_cells, "min_cells", 1),
             "max_cells": _count(self.max_cells, "max_cells", 2, allow_none=True)}
        check_bool(self.scale, "scale")
        if not (self.n_jobs is None or self.n_jobs == -1):
            check_int(self.n_jobs, "n_jobs", 1)
        return p

    @one_blas_thread  # members run in threads; their algebra is small
    def fit(self, X, y=None, strata=None):
        """Fit the ensembles on X, shape (N cells, D dims); ``y`` is ignored. Returns self.

        ``strata`` (N,): each cell's stratum (group, replicate) for the subsample when N exceeds
        ``max_cells`` (None = one stratum).
        """
        p = self._check_params()
        X = check_matrix(X, "X", min_rows=2, accept_sparse=False)
        rng = check_random_state(self.random_state)
        scale = float(X.std()) if self.scale else 1.0
        if not scale > 0:
            raise ScontrastError("X: is constant, there is nothing for latent features to explain")
        Xs = np.ascontiguousarray(X / scale)
        seeds = [[spawn_seed(rng) for _ in range(p["n_members"])] for _ in range(p["max_features"])]
        rows = _subsample(X.shape[0], p["max_cells"], strata, rng)
        Xf = Xs[rows] if rows.size < Xs.shape[0] else Xs
        jobs = _threads(self.n_jobs, p["n_members"])
        t0 = time.perf_counter()
        per_k, stab = [], np.zeros(p["max_features"])
        with ThreadPoolExecutor(jobs) as pool:
            for k in range(1, p["max_features"] + 1):
                members = list(pool.map(lambda s, k=k: _member(Xf, k, s, p), seeds[k - 1]))
                stab[k - 1], medoid, support = stability([m["Z"] for m in members], k)
                per_k.append((members, medoid, support))
                if _past_patience(stab[:k], p["stability"]):
                    break
            stab[len(per_k):] = np.nan
            chosen = _chosen_k(stab, p["stability"])
            if chosen:
                members, medoid, support = per_k[chosen - 1]
                members = list(pool.map(lambda m: _on_all_cells(Xs, rows, m, p["min_cells"]), members))
                per_k[chosen - 1] = (members, medoid, support)
        self.timings_ = {"fitting": time.perf_counter() - t0}
        self._record(per_k, chosen, stab, Xs, scale, rows)
        self._warn(p)
        return self

    def _record(self, per_k, chosen: int, stab: np.ndarray, Xs: np.ndarray, scale: float, rows: np.ndarray) -> None:
        """The fitted attributes from the members of the chosen K (none when K = 0)."""
        self.stability_ = stab
        self.n_features_ = chosen
        self.scale_ = scale
        self.fitted_cells_ = rows
        n, d = Xs.shape
        if chosen == 0:
            self.samples_ = [np.zeros((n, 0), dtype=np.uint8) for _ in range(self.n_members)]
            self.medoid_, self.medoid_support_ = 0, np.zeros(0)
            self.A_, self.intercept_ = np.zeros((0, d)), Xs.mean(axis=0) * scale
            self.sigma_x_ = float(Xs.std(axis=0).mean() * scale)
            self.converged_ = np.ones(self.n_members, dtype=bool)
        else:
            members, medoid, support = per_k[chosen - 1]
            self.samples_ = [m["Z"] for m in members]
            self.medoid_, self.medoid_support_ = int(medoid), support
            med = members[medoid]
            self.A_, self.intercept_ = med["A"] * scale, med["b"] * scale
            R = Xs - med["b"] - med["Z"].astype(np.float64) @ med["A"]
            self.sigma_x_ = float(np.sqrt(np.mean(R * R)) * scale)
            self.converged_ = np.array([m["converged"] for m in members])
        self.sample_chains_ = np.arange(len(self.samples_), dtype=np.int64) % 2

    def _warn(self, p: dict) -> None:
        """The choices a user can change, as ``ScontrastWarning``s; no stable feature is logged as a finding."""
        k = self.n_features_
        if k == 0:  # a finding (n_features_ and stability_ hold it, the summary states it), not a warning
            _log.info(f"latent_features: no feature is stable over {p['n_members']} resamples of the cells "
                      f"(largest stability {np.nanmax(self.stability_):.2f} < {p['stability']}): the cells show no "
                      "reproducible binary structure in these genes")
        elif k == p["max_features"]:
            warnings.warn(f"latent_features: the chosen K = {k} is max_features, the edge of the grid: the data may "
                          "support more features (raise max_features)", ScontrastWarning, stacklevel=3)
        if not self.converged_.all():
            warnings.warn(f"latent_features: {int((~self.converged_).sum())} of {self.converged_.size} fits did not "
                          "settle (<= 0.1% of the cells changing pattern) in "
                          f"max_iter = {p['max_iter']} alternations", ScontrastWarning, stacklevel=3)

    def diagnostics(self) -> dict:
        """The stability curve and the chosen K."""
        check_is_fitted(self)
        return {"n_features": int(self.n_features_), "stability": np.asarray(self.stability_),
                "medoid_support": np.asarray(self.medoid_support_)}


# Unstable K tried in a row after a stable one before larger K are left untried (their 2^K fits cost
# the most; on every contrast measured, stability only fell further past two unstable K). Before any
# stable K, up to START_PATIENCE are tried: K = 1 and 2 can both be unstable where three features of
# similar size are not (which one or two a fit takes then varies between resamples).
PATIENCE = 2
START_PATIENCE = 4


def _past_patience(stab: np.ndarray, threshold: float) -> bool:
    """Whether the stabilities of K = 1 .. len(stab) end the search (see ``PATIENCE``)."""
    last = _chosen_k(stab, threshold)
    return stab.size - last >= (PATIENCE if last else START_PATIENCE)


def _count(value, name: str, minimum: int, allow_none: bool = False):
    """``check_count`` against the ensemble's bound of ``name`` (``scontrast.bounds``)."""
    return check_count(value, name, minimum, "latent_features", key=f"ensemble.{name}", allow_none=allow_none)


def _threads(n_jobs, n_members: int) -> int:
    import os

    jobs = (os.cpu_count() or 1) if n_jobs is None or n_jobs == -1 else int(n_jobs)
    return max(1, min(jobs, n_members))


def _chosen_k(stab: np.ndarray, threshold: float) -> int:
    """The largest K (1-based) whose stability reaches ``threshold``; 0 when none does."""
    ok = np.flatnonzero(np.nan_to_num(stab, nan=-1.0) >= threshold)
    return int(ok[-1] + 1) if ok.size else 0
