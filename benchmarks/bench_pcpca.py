"""PCPCA benchmark: speed and objective against the reference package `pcpca` 0.4, accuracy with
missing values, the admissible bound, the paper's Figure 2, and the two shipped datasets.

Run (from the repository root):  .venv/bin/python -m benchmarks.bench_pcpca [--quick]
The full run writes its output to benchmarks/results/bench_pcpca.txt as well.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.linalg import subspace_angles
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from scontrast.pcpca import PCPCA, max_gamma, observed_loglik
from scontrast.pcpca._missing import _loglik_and_grad, _stack

REPO = Path(__file__).resolve().parents[1]


def _angle(A, B):
    return float(np.degrees(subspace_angles(A, B)).max())


def _correlated(n, D, rng, scale):
    return rng.normal(size=(n, D)) @ (rng.normal(size=(D, D)) * scale / np.sqrt(D))


def _holes(A, frac, rng):
    A = A.copy()
    A[rng.random(A.shape) < frac] = np.nan
    return A


# ----------------------------------------------------------------------------- missing data: speed


def missing_data_speed(n, m, D, k, frac, n_iter, seed, gamma_prime=0.3):
    """Same centred data with NaN, same number of iterations: the reference's Adam loop
    (`gradient_descent_missing_data`, verbose=False so it runs all n_iter) against our L-BFGS.

    Returns a dict: times, iterations, objective evaluations and the objective values reached
    (all objectives evaluated by the same function, checked against the reference in the tests).
    """
    from pcpca import PCPCA as Ref

    rng = np.random.default_rng(seed)
    X = _holes(_correlated(n, D, rng, 2.0) + rng.normal(size=(n, D)), frac, rng)
    Y = _holes(_correlated(m, D, rng, 2.0) + rng.normal(size=(m, D)), frac, rng)
    Xc, Yc = X - np.nanmean(X, 0), Y - np.nanmean(Y, 0)
    gamma = gamma_prime * n / m

    ref = Ref(n_components=k, gamma=gamma)
    # One BLAS thread for both: on 2 shared cores the reference's many small products ran 25x
    # slower with 2 threads (48 s against 1.9 s per iteration at n = m = 300, D = 100).
    with contextlib.redirect_stdout(io.StringIO()), threadpool_limits(limits=1, user_api="blas"):
        t0 = time.perf_counter()
        ref.gradient_descent_missing_data(Xc.T, Yc.T, n_iter=n_iter, verbose=False)
        ref_s = time.perf_counter() - t0
    ref_obj = observed_loglik(Xc, Yc, np.real(ref.W_mle), ref.sigma2_mle, gamma)

    with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="blas"):
        warnings.simplefilter("ignore", ConvergenceWarning)
        t0 = time.perf_counter()
        ours = PCPCA(k, gamma=gamma, max_iter=n_iter, tol=1e-300).fit(Xc, Yc)
        ours_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        conv = PCPCA(k, gamma=gamma).fit(Xc, Yc)
        conv_s = time.perf_counter() - t0
    # The reference starts from the same closed form on mean-imputed data, but with sigma^2 = 2.
    init = PCPCA(k, gamma=gamma, solver="closed_form").fit(np.where(np.isnan(Xc), 0.0, Xc),
                                                          np.where(np.isnan(Yc), 0.0, Yc))
    ref_start = observed_loglik(Xc, Yc, init.W_, 2.0, gamma)

    # Cost of one objective-and-gradient evaluation, ours against the reference's closures.
    data = _stack(Xc, Yc, gamma)
    reps = 20
    with threadpool_limits(limits=1, user_api="blas"):
        t0 = time.perf_counter()
        for _ in range(reps):
            _loglik_and_grad(ours.W_, ours.sigma2_, data)
        eval_s = (time.perf_counter() - t0) / reps
    return {
        "n": n, "m": m, "D": D, "k": k, "frac": frac, "n_iter": n_iter,
        "ref_s": ref_s, "ours_s": ours_s, "ratio": ref_s / ours_s,
        "ours_nit": ours.n_iter_, "ours_per_eval_s": eval_s, "ref_per_iter_s": ref_s / n_iter,
        "start_objective": float(ours.objective_trace_[0]), "ref_start_objective": ref_start,
        "ref_objective": ref_obj, "ours_objective": ours.objective_,
        "converged_objective": conv.objective_, "converged_nit": conv.n_iter_, "converged_s": conv_s,
        "converged": conv.converged_,
    }


# ----------------------------------------------------------------------------- missing data: accuracy


def planted(n, m, D, seed, gamma_prime=0.5):
    """Target = shared + target-specific (T) + noise; background = shared / sqrt(gamma') + noise, so that
    S_x - gamma' S_y is, in the population, T T' + (1 - gamma') I (well specified for PCPCA)."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(D, 4)))
    S, T = Q[:, :2] * 1.5, Q[:, 2:] * np.array([3.0, 2.0])
    X = rng.normal(size=(n, 2)) @ S.T + rng.normal(size=(n, 2)) @ T.T + rng.normal(size=(n, D)) + 1.0
    Y = rng.normal(size=(m, 2)) @ S.T / np.sqrt(gamma_prime) + rng.normal(size=(m, D)) - 0.5
    return X, Y, T


def missing_data_accuracy(fracs, seeds, n=500, D=20):
    rows = []
    for frac in fracs:
        ml, imp, s2_ml, s2_imp, nit, secs, mono = [], [], [], [], [], [], []
        for seed in seeds:
            X, Y, _ = planted(n, n, D, seed)
            full = PCPCA(2, gamma_prime=0.5).fit(X, Y)
            rng = np.random.default_rng(1000 + seed)
            Xm, Ym = _holes(X, frac, rng), _holes(Y, frac, rng)
            t0 = time.perf_counter()
            model = PCPCA(2, gamma_prime=0.5).fit(Xm, Ym)
            secs.append(time.perf_counter() - t0)
            imputed = PCPCA(2, gamma_prime=0.5).fit(np.where(np.isnan(Xm), np.nanmean(Xm, 0), Xm),
                                                    np.where(np.isnan(Ym), np.nanmean(Ym, 0), Ym))
            ml.append(_angle(model.W_, full.W_))
            imp.append(_angle(imputed.W_, full.W_))
            s2_ml.append(model.sigma2_ / full.sigma2_)
            s2_imp.append(imputed.sigma2_ / full.sigma2_)
            nit.append(model.n_iter_)
            mono.append(bool(np.all(np.diff(model.objective_trace_) >= 0)) and model.converged_)
        rows.append((frac, np.mean(ml), np.max(ml), np.mean(imp), np.mean(s2_ml), np.mean(s2_imp),
                     np.mean(nit), np.mean(secs), all(mono)))
    return rows


# ----------------------------------------------------------------------------- closed form at scale


def closed_form_scaling(sizes, seed=0, reference_max_D=2000):
    """Sparse, count-like data: our fit (implicit centring + ARPACK) and max_gamma against the
    reference's dense closed form (D x D covariance, full eigh, sqrtm)."""
    from pcpca import PCPCA as Ref

    rows = []
    for n, D in sizes:
        rng = np.random.default_rng(seed)
        scale = rng.gamma(2.0, 1.0, size=D)
        X = sp.random(n, D, density=0.1, random_state=rng, data_rvs=lambda s, rng=rng: rng.gamma(2.0, 1.0, s)).tocsr()
        Y = sp.random(n, D, density=0.1, random_state=rng, data_rvs=lambda s, rng=rng: rng.gamma(2.0, 1.0, s)).tocsr()
        X = sp.csr_matrix(np.log1p(X.multiply(scale)))
        Y = sp.csr_matrix(np.log1p(Y.multiply(scale)))
        t0 = time.perf_counter()
        model = PCPCA(2, gamma_prime=0.5, random_state=0).fit(X, Y)
        fit_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        bound = max_gamma(X, Y, 2, random_state=0)
        bound_s = time.perf_counter() - t0
        ref_s, err = float("nan"), float("nan")
        if D <= reference_max_D:
            Xd, Yd = X.toarray(), Y.toarray()
            ref = Ref(n_components=2, gamma=model.gamma_)
            t0 = time.perf_counter()
            ref.fit((Xd - Xd.mean(0)).T, (Yd - Yd.mean(0)).T)
            ref_s = time.perf_counter() - t0
            WW = model.W_ @ model.W_.T
            err = float(np.abs(WW - np.real(ref.W_mle @ ref.W_mle.T)).max() / np.abs(WW).max())
        rows.append((n, D, fit_s, bound_s, bound * 1.0, ref_s, err))
    return rows


# ----------------------------------------------------------------------------- Figure 2


def figure2(seeds, gammas=(0.0, 0.2, 0.6, 0.9)):
    Sigma = np.array([[2.7, 2.6], [2.6, 2.7]])
    table = {g: [] for g in gammas}
    rejected = {g: 0 for g in gammas}
    bounds = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        X = np.vstack([rng.multivariate_normal([1, -1], Sigma, 100), rng.multivariate_normal([-1, 1], Sigma, 100)])
        Y = rng.multivariate_normal([0, 0], Sigma, 200)
        bounds.append(max_gamma(X, Y, 1))
        w0 = PCPCA(1, gamma_prime=0.0).fit(X, Y).W_[:, 0]
        for g in gammas:
            try:
                w = PCPCA(1, gamma_prime=g).fit(X, Y).W_[:, 0]
            except ValueError:
                rejected[g] += 1
                continue
            c = abs(w @ w0) / (np.linalg.norm(w) * np.linalg.norm(w0))
            table[g].append(np.degrees(np.arccos(min(1.0, c))))
    return table, rejected, np.asarray(bounds)


# ----------------------------------------------------------------------------- shipped datasets


def shipped_datasets(gammas=(0.0, 0.25, 0.5, 0.75)):
    """The two datasets of config.yaml, preprocessed as there: bound, fit time, held-out log-likelihood."""
    import anndata as ad
    import yaml
    from pcpca import PCPCA as Ref

    from scontrast.preprocess import preprocess
    from scontrast.tl._pcpca import pcpca

    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    out = []
    for name, ds in cfg["datasets"].items():
        path = REPO / ds["path"]
        if not path.exists():
            continue
        pp = dict(cfg.get("preprocess", {}))
        pp.update(ds.get("preprocess", {}))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            adata = preprocess(ad.read_h5ad(path), groupby=ds["groupby"], target=ds["target"],
                               background=ds["background"], counts=ds.get("counts", "raw"),
                               layer=ds.get("layer"), **pp)
        hv = adata.var["highly_variable"].to_numpy()
        M = adata.X[:, hv]
        M = M.toarray() if sp.issparse(M) else np.asarray(M)
        t = adata.obs["scontrast_target"].to_numpy()
        Xt, Yb = M[t], M[~t]
        n, m = len(Xt), len(Yb)
        bound_p = max_gamma(Xt, Yb, 2) * m / n
        ref_p = Ref(n_components=2).get_gamma_bound((Xt - Xt.mean(0)).T, (Yb - Yb.mean(0)).T)
        rows = []
        for g in gammas:
            if g >= bound_p:
                rows.append((g, float("nan"), float("nan"), float("nan")))
                continue
            a = adata.copy()
            t0 = time.perf_counter()
            pcpca(a, gamma_prime=g, random_state=0)
            secs = time.perf_counter() - t0
            u = a.uns["pcpca"]
            rows.append((g, secs, u["sigma2"], u["heldout_loglik"]))
        out.append((name, n, m, int(hv.sum()), bound_p, ref_p, rows))
    return out


# ----------------------------------------------------------------------------- main


def main(quick=False, out=print):
    np.set_printoptions(precision=4, suppress=True)
    out("# PCPCA benchmark" + (" (quick)" if quick else ""))
    out(f"numpy {np.__version__}; 2 cores shared with other jobs, so absolute times are noisy; ratios are "
        "measured in the same process, interleaved.")

    out("\n## 1. Missing values: time against pcpca 0.4 gradient_descent_missing_data, same data and iterations")
    out("ratio = reference time / our time for the same number of iterations (ours: L-BFGS, which may use >1 "
        "objective evaluation per iteration, timed with its closed-form initialisation; reference: Adam, lr 0.01). "
        "Both with one BLAS thread (see the code). eval ratio = reference time per iteration / our time per "
        "objective-and-gradient evaluation.")
    out("Objectives (observed-data l(W, sigma^2), higher is better) after those iterations and, for ours, at "
        "convergence.")
    configs = ([(30, 30, 10, 2, 0.2, 5)] if quick else
               [(200, 200, 50, 2, 0.2, 30), (300, 300, 100, 2, 0.2, 10), (300, 300, 100, 5, 0.3, 10),
                (400, 400, 200, 2, 0.2, 3)])
    header = (f"{'n=m':>5} {'D':>4} {'k':>2} {'miss':>5} {'iters':>5} {'ref s':>8} {'ours s':>8} {'ratio':>7} "
              f"{'ref s/it':>9} {'ours s/eval':>11} {'eval ratio':>10} {'ref start':>12} {'ref obj':>12} {'our start':>12} "
              f"{'ours obj':>12} {'conv obj':>12} {'conv it':>7} {'conv s':>7}")
    out(header)
    for n, m, D, k, frac, n_iter in configs:
        r = missing_data_speed(n, m, D, k, frac, n_iter, seed=0)
        out(f"{n:>5} {D:>4} {k:>2} {frac:>5.2f} {n_iter:>5} {r['ref_s']:>8.2f} {r['ours_s']:>8.3f} "
            f"{r['ratio']:>7.0f} {r['ref_per_iter_s']:>9.4f} {r['ours_per_eval_s']:>11.5f} "
            f"{r['ref_per_iter_s'] / r['ours_per_eval_s']:>10.0f} {r['ref_start_objective']:>12.2f} "
            f"{r['ref_objective']:>12.2f} {r['start_objective']:>12.2f} {r['ours_objective']:>12.2f} "
            f"{r['converged_objective']:>12.2f} "
            f"{r['converged_nit']:>7d} {r['converged_s']:>7.3f}")

    out("\n## 2. Missing values: accuracy on a well-specified simulation (n = m = 500, D = 20, k = 2, gamma' = 0.5)")
    out("max principal angle (degrees) between the fit with entries removed at random and the complete-data fit; "
        "observed-data ML (ours) against mean imputation + closed form; sigma^2 relative to the complete-data fit.")
    seeds = range(2) if quick else range(5)
    fracs = (0.1, 0.3) if quick else (0.05, 0.1, 0.2, 0.3)
    out(f"{'missing':>7} {'ML mean':>8} {'ML max':>7} {'impute':>7} {'s2 ML':>6} {'s2 imp':>6} {'L-BFGS it':>9} "
        f"{'fit s':>6} {'monotone+converged':>18}")
    for frac, ml, mlmax, imp, s2m, s2i, nit, secs, mono in missing_data_accuracy(fracs, seeds):
        out(f"{frac:>7.2f} {ml:>8.2f} {mlmax:>7.2f} {imp:>7.2f} {s2m:>6.3f} {s2i:>6.3f} {nit:>9.1f} {secs:>6.3f} "
            f"{str(mono):>18}")

    out("\n## 3. Complete data at scale: sparse log-counts, n = m, k = 2, gamma' = 0.5")
    out("ours: implicit centring + ARPACK top-k (never a D x D matrix); reference: dense covariance, full eigh, sqrtm; "
        "rel. diff = max |WW'_ours - WW'_ref| / max |WW'_ours|.")
    sizes = [(300, 200)] if quick else [(2000, 500), (2000, 2000), (5000, 5000)]
    out(f"{'n':>6} {'D':>6} {'fit s':>7} {'max_gamma s':>11} {'max_gamma':>10} {'ref fit s':>9} {'rel. diff':>9}")
    for n, D, fit_s, bound_s, bound, ref_s, err in closed_form_scaling(sizes):
        out(f"{n:>6} {D:>6} {fit_s:>7.2f} {bound_s:>11.2f} {bound:>10.4f} {ref_s:>9.2f} {err:>9.1e}")

    out("\n## 4. The paper's Figure 2 (n = m = 200, k = 1): angle (degrees) between the gamma' line and the PPCA line")
    fig_seeds = range(10) if quick else range(200)
    table, rejected, bounds = figure2(fig_seeds)
    out(f"{len(fig_seeds)} draws; max admissible gamma' per draw: 5/50/95% = "
        f"{np.percentile(bounds, 5):.3f} / {np.percentile(bounds, 50):.3f} / {np.percentile(bounds, 95):.3f}")
    for g, angles in table.items():
        if angles:
            out(f"gamma' = {g:.1f}: median {np.median(angles):5.1f}, 10-90% {np.percentile(angles, 10):5.1f}-"
                f"{np.percentile(angles, 90):5.1f}, rejected as inadmissible in {rejected[g]} draws")
        else:
            out(f"gamma' = {g:.1f}: rejected in all {rejected[g]} draws")

    if not quick:
        out("\n## 5. Shipped datasets (config.yaml preprocessing, highly variable genes, k = 2)")
        out("max gamma' = exact admissible bound; reference bound = pcpca 0.4 get_gamma_bound (gamma' units); "
            "held-out = mean log-likelihood of 20% held-out target cells (seed 0).")
        for name, n, m, d, bound_p, ref_p, rows in shipped_datasets():
            out(f"{name}: {n} target, {m} background cells, {d} genes; max gamma' = {bound_p:.4f}; "
                f"reference bound = {ref_p:.4f}")
            for g, secs, s2, ll in rows:
                out(f"  gamma' = {g:.2f}: tl.pcpca {secs:6.2f} s, sigma^2 = {s2:.4f}, held-out log-lik = {ll:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (seconds)")
    parser.add_argument("--out", default=None, help="also write the output here "
                        "(default for the full run: benchmarks/results/bench_pcpca.txt)")
    args = parser.parse_args()
    path = args.out or (None if args.quick else REPO / "benchmarks" / "results" / "bench_pcpca.txt")
    lines = []

    def emit(line):
        print(line, flush=True)
        lines.append(line)

    main(args.quick, emit)
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text("\n".join(lines) + "\n")
        print(f"(written to {path})", file=sys.stderr)
