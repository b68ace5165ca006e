"""QUADRO against scikit-learn classifiers: test error over repeated draws, and timings.

Settings (class 1 vs class 2, equal priors, test sets of 2000 per class):

(a) equal means, different covariances: d = 50, n = 100 per class, Sigma_1 = I,
    Sigma_2 = I with an AR(0.8) block on the first 5 features; Gaussian.
(b) the same covariances with multivariate t tails (df 5).
(c) sparse mean and covariance differences with d > n: d = 80, n = 30 per
    class (60 in all), mu_2 = 0.6 on the first 5 features, Sigma_2 as in (a);
    Gaussian.

Methods: QUADRO (robust and sample estimators, lambdas by 5-fold CV; the sample one also with
Ledoit-Wolf shrunk covariances, ``shrinkage='ledoit_wolf'``, which in (c) is what the default
``shrinkage='auto'`` does already: every class there has fewer samples than features), LDA
(Ledoit-Wolf shrinkage), regularised QDA ((1-r) S_k + r tr(S_k)/d I, r by CV;
scikit-learn's QDA refuses classes with no more samples than features),
L1-logistic regression on x and on (x, x x') (LogisticRegressionCV, C chosen by CV
accuracy, which did better here than log-loss). The Bayes
error of each setting is estimated with the true densities on 200,000 draws.

Usage (from the repository root): python -m benchmarks.bench_quadro [--quick] [--out FILE]
[--settings abc] [--reps N] [--only METHOD ...] [--params JSON] [--no-timings]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np
from scipy.stats import multivariate_normal, multivariate_t
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegressionCV
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures, StandardScaler

from scontrast.core import blas_threads
from scontrast.quadro import (
    QUADRO,
    RayleighProblem,
    estimate_moments,
    kendall_correlation,
    nearest_psd,
    robust_variance,
    solve_rayleigh,
)


class RegularizedQDA(ClassifierMixin, BaseEstimator):
    """QDA with covariances (1 - reg) S_k + reg tr(S_k)/d I (defined for any n_k >= 2)."""

    def __init__(self, reg=0.5):
        self.reg = reg

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        self.params_ = []
        for c in self.classes_:
            Xc = X[y == c]
            S = np.atleast_2d(np.cov(Xc, rowvar=False))
            S = (1 - self.reg) * S + self.reg * np.trace(S) / S.shape[0] * np.eye(S.shape[0])
            sign, logdet = np.linalg.slogdet(S)
            self.params_.append((Xc.mean(axis=0), np.linalg.inv(S), logdet, np.log(Xc.shape[0] / X.shape[0])))
        return self

    def decision_function(self, X):
        ll = []
        for mu, P, logdet, logprior in self.params_:
            C = X - mu
            ll.append(-0.5 * np.einsum("ij,jk,ik->i", C, P, C) - 0.5 * logdet + logprior)
        return ll[1] - ll[0]

    def predict(self, X):
        return self.classes_[(self.decision_function(X) > 0).astype(int)]


def ar_block(d: int, s: int, rho: float) -> np.ndarray:
    S = np.eye(d)
    idx = np.arange(s)
    S[:s, :s] = rho ** np.abs(idx[:, None] - idx[None, :])
    return S


SETTINGS = {
    "a": dict(title="(a) equal means, different covariances, Gaussian", d=50, n=100, df=None, shift=0.0),
    "b": dict(title="(b) equal means, different covariances, multivariate t (df 5)", d=50, n=100, df=5, shift=0.0),
    "c": dict(title="(c) sparse mean + covariance differences, d > n, Gaussian", d=80, n=30, df=None, shift=0.6),
}


def setting_laws(d: int, df, shift: float, s: int = 5):
    """The two class laws (scipy frozen distributions) with the stated means and covariances."""
    mu1 = np.zeros(d)
    mu2 = np.zeros(d)
    mu2[:s] = shift
    S1, S2 = np.eye(d), ar_block(d, s, 0.8)
    if df is None:
        return multivariate_normal(mu1, S1), multivariate_normal(mu2, S2)
    # multivariate t with covariance S has shape S (df - 2) / df
    return (multivariate_t(mu1, S1 * (df - 2) / df, df=df), multivariate_t(mu2, S2 * (df - 2) / df, df=df))


def draw(laws, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    X = np.vstack([np.atleast_2d(law.rvs(size=n, random_state=rng)) for law in laws])
    return X, np.repeat([0, 1], n)


def bayes_error(laws, n: int, rng) -> float:
    X, y = draw(laws, n, rng)
    llr = laws[1].logpdf(X) - laws[0].logpdf(X)
    return float(np.mean((llr > 0) != (y == 1)))


def methods(seed: int, quick: bool, params: dict | None = None) -> dict:
    cv = StratifiedKFold(5, shuffle=True, random_state=seed)
    cs = 6 if quick else 10
    # the paper's QUADRO uses every feature: no gene screening (n_features=None) in its simulations
    small = dict(lambda_grid=[1.0, 0.1], cv=3, n_features=None) if quick else dict(n_features=None)
    small.update(params or {})
    return {
        "QUADRO robust": QUADRO(estimator="robust", random_state=seed, **small),
        "QUADRO sample": QUADRO(estimator="sample", random_state=seed, **small),
        # Ledoit-Wolf shrunk covariances (scontrast's option for d near or above n)
        "QUADRO sample, LW": QUADRO(estimator="sample", shrinkage="ledoit_wolf", random_state=seed, **small),
        "LDA (shrinkage)": LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto"),
        "QDA (regularised)": GridSearchCV(RegularizedQDA(), {"reg": [0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99]},
                                          cv=cv),
        "L1-logistic x": make_pipeline(StandardScaler(), LogisticRegressionCV(
            Cs=cs, l1_ratios=(1.0,), solver="liblinear", cv=cv, max_iter=2000, scoring="accuracy",
            use_legacy_attributes=False)),
        "L1-logistic (x, xx')": make_pipeline(PolynomialFeatures(2, include_bias=False), StandardScaler(),
                                              LogisticRegressionCV(Cs=cs, l1_ratios=(1.0,), solver="liblinear",
                                                                   cv=cv, max_iter=2000, scoring="accuracy",
                                                                   use_legacy_attributes=False)),
    }


def run_setting(key: str, n_rep: int, seed: int = 0, n_test: int = 2000, quick: bool = False,
                d: int | None = None, n: int | None = None, only=None, params: dict | None = None) -> dict:
    """Test errors (n_rep draws) of every method in one setting; returns {method: errors array}."""
    cfg = dict(SETTINGS[key])
    if d is not None:
        cfg["d"] = d
    if n is not None:
        cfg["n"] = n
    laws = setting_laws(cfg["d"], cfg["df"], cfg["shift"])
    rng = np.random.default_rng(seed)
    errors: dict[str, list[float]] = {}
    times: dict[str, list[float]] = {}
    pairs: dict[str, list[tuple[int, int]]] = {}  # QUADRO: (gene pairs in Omega_, of them inside the AR block)
    for rep in range(n_rep):
        X, y = draw(laws, cfg["n"], rng)
        Xt, yt = draw(laws, n_test, rng)
        for name, model in methods(seed + rep, quick, params).items():
            if only is not None and name not in only:
                continue
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                model.fit(X, y)
            times.setdefault(name, []).append(time.perf_counter() - t0)
            errors.setdefault(name, []).append(float(np.mean(model.predict(Xt) != yt)))
            if isinstance(model, QUADRO):
                feat = model.features_
                iu, ju = np.triu_indices(feat.size, 1)
                nz = model.Omega_[iu, ju] != 0
                block = (feat[iu] < 5) & (feat[ju] < 5)  # the covariance change lives on features 0-4
                pairs.setdefault(name, []).append((int(nz.sum()), int((nz & block).sum())))
    return {"errors": {k: np.array(v) for k, v in errors.items()},
            "times": {k: np.array(v) for k, v in times.items()}, "cfg": cfg, "laws": laws,
            "pairs": {k: np.array(v) for k, v in pairs.items()}}


def report_setting(key: str, res: dict, bayes: float, out) -> None:
    cfg = res["cfg"]
    errs = res["errors"]
    n_rep = len(next(iter(errs.values())))
    print(f"\n{cfg['title']}  [d={cfg['d']}, n={cfg['n']} per class, {n_rep} draws, Bayes error {bayes:.3f}]",
          file=out)
    print(f"{'method':<24}{'mean error':>11}{'sd':>8}{'se':>8}{'vs best (paired se)':>24}{'fit s':>8}", file=out)
    best = min(errs, key=lambda k: errs[k].mean())
    for name, e in sorted(errs.items(), key=lambda kv: kv[1].mean()):
        diff = e - errs[best]
        se_diff = diff.std(ddof=1) / np.sqrt(n_rep) if n_rep > 1 else float("nan")
        print(f"{name:<24}{e.mean():>11.4f}{e.std(ddof=1) if n_rep > 1 else 0:>8.4f}"
              f"{e.std(ddof=1) / np.sqrt(n_rep) if n_rep > 1 else 0:>8.4f}"
              f"{diff.mean():>+14.4f} ({se_diff:.4f})"
              f"{res['times'][name].mean():>8.2f}", file=out)
    print(f"lowest mean error: {best}", file=out)
    others = [k for k in errs if not k.startswith("QUADRO")]
    for name in (k for k in errs if k.startswith("QUADRO")):
        if n_rep > 1 and others:
            print(f"{name} minus: " + "; ".join(
                f"{o} {(errs[name] - errs[o]).mean():+.4f} (paired se "
                f"{(errs[name] - errs[o]).std(ddof=1) / np.sqrt(n_rep):.4f})" for o in others), file=out)
    for name, p in res.get("pairs", {}).items():
        print(f"{name}: gene pairs (off-diagonal Omega entries) in the final rule per draw {p[:, 0].tolist()}; "
              f"of them inside the changed 5 x 5 block (10 true pairs) {p[:, 1].tolist()}; "
              f"draws with >= 1 block pair {int((p[:, 1] > 0).sum())}/{len(p)}", file=out)


def timings(d_values=(50, 200), n: int = 200, seed: int = 0, out=sys.stdout, quick: bool = False,
            cv_max_d: int = 200) -> None:
    """Wall-clock of QUADRO's parts and fits at d = 50 and d = 200 (n per class).

    Cross-validated fits (36 grid points x 5 folds) are timed up to ``cv_max_d``
    only; at larger d their cost is about that of the fixed-lambda solve times
    the number of grid points and folds.
    """
    rng = np.random.default_rng(seed)
    print(f"\nTimings (wall-clock seconds; n = {n} per class, setting (b) laws, BLAS on one thread)", file=out)
    print(f"{'d':>4}  {'step':<52}{'seconds':>10}", file=out)

    def one(d):  # one size (a function, so that the timed lambdas bind its own data)
        laws = setting_laws(d, 5, 0.0)
        X, y = draw(laws, n, rng)
        X1, X2 = X[y == 0], X[y == 1]

        def clock(label, fn):
            t0 = time.perf_counter()
            val = fn()
            print(f"{d:>4}  {label:<52}{time.perf_counter() - t0:>10.3f}", file=out, flush=True)
            return val

        clock("Kendall tau matrix (one class)", lambda: kendall_correlation(X1))
        clock("robust variances (one class)", lambda: robust_variance(X1))
        sd = np.sqrt(robust_variance(X1))
        S = sd[:, None] * kendall_correlation(X1) * sd
        neg = float(np.linalg.eigvalsh(S)[0])
        print(f"{d:>4}  {'(smallest eigenvalue of the Kendall covariance)':<52}{neg:>10.4f}", file=out)
        clock("nearest PSD, Frobenius", lambda: nearest_psd(S, "fro"))
        clock("nearest PSD, max norm (ADMM, gap 1e-3)", lambda: nearest_psd(S, "max"))
        mom = clock("robust moments, both classes (fro)",
                    lambda: estimate_moments(X1, X2, "robust", psd_norm="fro"))
        prob = RayleighProblem(mom)
        ref = clock("Lipschitz constant (Lanczos) + reference scale",
                    lambda: (prob.lipschitz(), prob.reference_scale())[1])
        sol = clock("one solve, lambda1 = lambda2 = 0.03 (cold start)",
                    lambda: solve_rayleigh(prob, 0.03 * ref[0], 0.03 * ref[1], tol=1e-6))
        print(f"{d:>4}  {'(iterations, converged, |M2 - M1 - 1|)':<52}{sol.n_iter:>5d} {sol.converged} "
              f"{abs(prob.a @ sol.x - 1):.1e}", file=out)
        clock("QUADRO robust fit, fixed lambdas, no CV",
              lambda: QUADRO(0.03, 0.03, estimator="robust", cv=None).fit(X, y))
        clock("QUADRO sample fit, fixed lambdas, no CV",
              lambda: QUADRO(0.03, 0.03, estimator="sample", cv=None).fit(X, y))
        if not quick:
            clock("QUADRO robust fit, psd_norm='max', fixed lambdas",
                  lambda: QUADRO(0.03, 0.03, estimator="robust", psd_norm="max", cv=None).fit(X, y))
        if not quick and d <= cv_max_d:
            clock("QUADRO robust fit, 5-fold CV over the 6 x 6 lambda grid",
                  lambda: QUADRO(estimator="robust", random_state=0).fit(X, y))
            clock("QUADRO sample fit, 5-fold CV over the 6 x 6 lambda grid",
                  lambda: QUADRO(estimator="sample", random_state=0).fit(X, y))
        for name, model in methods(seed, quick=True).items():
            if name.startswith("QUADRO") or (quick and "xx'" in name):
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                clock(f"{name} fit (with its CV)", lambda m=model: m.fit(X, y))

    for d in d_values:
        one(d)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few draws and small sizes (a smoke run)")
    parser.add_argument("--out", default=None, help="also write the report to this file")
    parser.add_argument("--settings", default="abc", help="which settings to run (letters a, b, c)")
    parser.add_argument("--no-timings", action="store_true")
    parser.add_argument("--no-settings", action="store_true", help="timings only")
    parser.add_argument("--reps", type=int, default=10, help="draws per setting")
    parser.add_argument("--only", nargs="*", default=None, help="methods to run (names as in the table)")
    parser.add_argument("--params", default="{}", help="JSON dict of QUADRO parameters other than the defaults")
    args = parser.parse_args(argv)
    n_rep = 2 if args.quick else args.reps
    import json

    params = json.loads(args.params)

    class Tee:
        def __init__(self, *streams):
            self.streams = streams

        def write(self, s):
            for st in self.streams:
                st.write(s)

        def flush(self):
            for st in self.streams:
                st.flush()

    fh = open(args.out, "w") if args.out else None
    out = Tee(sys.stdout, fh) if fh else sys.stdout
    import os

    print("QUADRO benchmark (scontrast)", " --quick" if args.quick else "",
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {os.getloadavg()[0]:.2f} at start"
          + (f", QUADRO parameters {params}" if params else ""), file=out)
    with blas_threads(1):
        for key in ("" if args.no_settings else args.settings):
            t0 = time.perf_counter()
            t_cpu = time.process_time()
            res = run_setting(key, n_rep, seed=100 * (ord(key) - ord("a")), quick=args.quick,
                              n_test=500 if args.quick else 2000, only=args.only, params=params)
            bayes = bayes_error(res["laws"], 20_000 if args.quick else 200_000, np.random.default_rng(7))
            report_setting(key, res, bayes, out)
            print(f"(setting {key} took {time.perf_counter() - t0:.0f} s wall, {time.process_time() - t_cpu:.0f} s CPU; "
                  f"load average {os.getloadavg()[0]:.2f})", file=out, flush=True)
        if not args.no_timings:
            timings(d_values=(20,) if args.quick else (50, 200), n=60 if args.quick else 200, out=out,
                    quick=args.quick)
    if fh:
        fh.close()


if __name__ == "__main__":
    main()
