"""AnnData front end of FANGS: ``tl.fangs(adata, ...)``, a point estimate of the cells' features."""

from __future__ import annotations

import inspect
import logging
import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import anndata as ad
import numpy as np

from ..bounds import check_count
from ..core import TARGET_KEY, ScontrastError, ScontrastWarning, check_real
from ..design import cell_blocks
from ..feature_samples import FeatureSamples, load_samples
from ._common import fmt, record_params, renamed, replicate_design, result_warnings
from ._latent_features import INPUT, SAMPLES, cell_rows, samples_from_adata

log = logging.getLogger(__name__)


def _lib():
    """:mod:`scontrast.fangs`, loaded by a fit only: reading a result (summary, figure) skips its stack."""
    from .. import fangs

    return fangs

# Arguments of scontrast.fangs.fangs that the front end sets itself (the data, threads, seed).
_SET_HERE = ("samples", "n_jobs", "random_state")


def _fangs_params(params: dict) -> dict:
    """Every model parameter of :func:`scontrast.fangs.fangs`: its defaults updated with ``params``.

    An unknown name, or one the front end sets, is refused with one line naming the valid ones.
    """
    defaults = {name: p.default for name, p in inspect.signature(_lib().fangs).parameters.items()
                if name not in _SET_HERE}
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ScontrastError(f"fangs: unknown parameter(s) {unknown}; it takes {list(defaults)}")
    return {**defaults, **params}


def _aligned(feature_samples: FeatureSamples, adata: ad.AnnData, origin: str) -> list[np.ndarray]:
    """The samples' rows put in the order of ``adata.obs_names``."""
    samples = feature_samples.samples
    n = samples[0].shape[0]
    names = feature_samples.cell_names
    if names is None:
        if n != adata.n_obs:
            raise ScontrastError(f"samples: {origin} has {n} rows and no cell names, but the data has "
                                 f"{adata.n_obs} cells")
        return samples
    index = {name: i for i, name in enumerate(names)}
    if len(index) != len(names):
        raise ScontrastError(f"samples: {origin} has duplicated cell names")
    missing = [c for c in adata.obs_names if c not in index]
    if missing:
        raise ScontrastError(f"samples: {len(missing)} of the {adata.n_obs} cells are not in {origin} "
                             f"(e.g. {missing[:3]})")
    rows = np.fromiter((index[c] for c in adata.obs_names), dtype=np.intp, count=adata.n_obs)
    if n == adata.n_obs and np.array_equal(rows, np.arange(n)):
        return samples
    return [s[rows] for s in samples]


def _resolve_samples(adata, samples, samples_key):
    """(list of (n_obs, K_b) matrices, description of the source, log-joint trace or None,
    chain of each sample (B,) or None)."""
    if samples is None:
        out = samples_from_adata(adata, samples_key)
        info = adata.uns[samples_key]
        lj, chains = info.get("log_joint"), info.get("chains")
        return (out, f"adata (uns['{samples_key}']['{SAMPLES}'])", None if lj is None else np.asarray(lj),
                None if chains is None else np.asarray(chains))
    if isinstance(samples, (str, os.PathLike)):
        try:
            fs = load_samples(samples)
        except ValueError as exc:
            raise ScontrastError(f"samples: {exc}") from None
        return _aligned(fs, adata, f"'{Path(samples)}'"), str(samples), fs.log_joint, fs.extra.get("chains")
    if isinstance(samples, FeatureSamples):
        return (_aligned(samples, adata, "the FeatureSamples"), "FeatureSamples", samples.log_joint,
                samples.extra.get("chains"))
    # a list of matrices or a (B, N, K) array: check_samples judges
    return samples, type(samples).__name__, None, None


def fangs(
    adata: ad.AnnData,
    *,
    samples=None,
    samples_key: str = "latent_features",
    draws: bool = True,
    n_top_genes: int = 10,
    fdr: float = 0.05,
    groupby: str = TARGET_KEY,
    block: str | None = None,
    key_added: str = "fangs",
    random_state: int = 0,
    n_jobs: int | None = 1,
    copy: bool = False,
    key: str | None = None,
    **params,
):
    """FANGS point estimate of the cells' feature allocation from posterior samples.

    Parameters
    ----------
    adata
        Cells x genes; ``obs[groupby]`` (True = target) annotates the features.
    samples
        Posterior samples of a feature allocation of the cells: None (read
        those written by ``tl.latent_features`` under ``samples_key``), a path
        to a samples ``.npz`` (``scontrast.latent_features`` format; rows
        matched to ``obs_names`` by its ``cell_names`` when present), a
        ``FeatureSamples``, or a list of (n_obs, K_b) binary matrices.
    samples_key
        Where ``tl.latent_features`` wrote its samples (its ``key_added``);
        used when ``samples`` is None.
    draws
        Also run the draws method (the best single sample) for comparison.
    n_top_genes
        Genes named per feature (largest posterior mean loadings), when the samples
        come from ``tl.latent_features`` on genes (``uns[samples_key]['input']``).
    fdr
        Benjamini-Hochberg level at which a feature counts as enriched in one group
        (``feature_enriched``).
    groupby
        Boolean obs column of the target/background split.
    block
        Categorical obs column of the replicates' blocks (batch, site; one per replicate), with a
        declared replicate design: the replicate enrichment relabels replicates only within
        blocks, and its floor follows (``uns['fangs']['feature_replicate_blocks']``). None: no block.
    key_added
        Where the results go: ``obsm[f'{key_added}_features']`` and ``uns[key_added]`` (the
        default gives the names below).
    random_state
        Seed of FANGS (None, an int >= 0 or a numpy Generator).
    n_jobs
        Threads (-1 = all cores); results do not depend on it.
    copy
        Work on (and return) a copy.
    key
        Deprecated name of ``groupby`` (a ``FutureWarning``; removed in the next release).
    **params
        Parameters of :func:`scontrast.fangs.fangs` (their defaults are its
        own): ``a`` (FARO cost of an entry the estimate has and a sample
        lacks, in (0, 2); lower gives denser estimates), ``n_init``,
        ``n_sweet``, ``n_iter`` (flips per sweetening, None = no cap, then
        ``max_seconds`` is required) and ``max_seconds``.

    Writes
    ------
    ``obsm['fangs_features']`` (n_obs x K, uint8): the estimate, features
    sorted by decreasing size (not written when K = 0: ``uns['fangs']['n_features']`` is 0,
    and no cell carries a feature); ``uns['fangs']``: params, versions, seed,
    ``a``, ``expected_loss``, ``draws_expected_loss`` and ``draws_index``
    (NaN / -1 when ``draws`` is False), ``n_features``, ``n_samples``,
    ``samples_K_values``/``samples_K_counts`` (K distribution of the samples),
    ``feature_n_cells``, ``feature_n_target``, ``feature_n_background`` (K,),
    ``initial_losses``, ``sweetened_losses``, ``accepted_flips``,
    ``timings`` (seconds: initialization, sweetening, total, draws),
    ``source`` and, when the samples carry it, ``log_joint`` ((n_chains, n_iter) or
    (n_iter,)). ``feature_chain_support`` (K, C): per feature and chain, the mean over
    that chain's samples of the Jaccard index between the feature's cells and those of its
    match in the sample (:func:`scontrast.fangs.feature_support`; chains ``support_chains``
    (C,), from ``tl.latent_features``'s samples or a samples file's ``chains``, else one
    column); a feature below 0.5 in some chain is a warning: it may be one chain's mode.
    With ``obs[groupby]`` holding both groups, per feature (K,):
    ``feature_prevalence_target``, ``feature_prevalence_background``,
    ``feature_difference``, ``feature_odds_ratio``, ``feature_pvalue`` (two-sided
    Fisher's exact test), ``feature_qvalue`` (Benjamini-Hochberg) and
    ``feature_enriched`` (q <= ``fdr``); see :func:`scontrast.fangs.feature_enrichment`.
    When the samples are ``tl.latent_features``'s (``samples`` None) and its input
    matrix is stored: ``loadings`` (K, D), the posterior mean loadings given the
    estimate (:func:`scontrast.fangs.feature_loadings` with the sampler's posterior
    mean sigma_x, sigma_a), ``loading_names`` (D,) and ``feature_top_genes`` (K,),
    the ``n_top_genes`` largest loadings of each feature, comma-separated.

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> import scontrast as sct
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 12))
    >>> X[rng.random(200) < 0.4, :4] += 3.0               # a programme of g0-g3 in 40% of the cells
    >>> adata = ad.AnnData(X, var=pd.DataFrame(index=[f"g{i}" for i in range(12)]))
    >>> adata.obs["scontrast_target"] = np.arange(200) < 100
    >>> sct.tl.latent_features(adata, genes="all", random_state=0)
    >>> sct.tl.fangs(adata, random_state=0)
    >>> adata.obsm["fangs_features"].shape
    (200, 1)
    >>> sorted(adata.uns["fangs"]["feature_top_genes"][0].split(", ")[:4])
    ['g0', 'g1', 'g2', 'g3']
    """
    groupby = renamed(groupby, key, new_name="groupby", old_name="key", default=TARGET_KEY, who="fangs")
    front, model_params = _checked_params(params, samples=samples, samples_key=samples_key, draws=draws,
                                          n_top_genes=n_top_genes, fdr=fdr, groupby=groupby, key_added=key_added,
                                          block=block)
    adata = adata.copy() if copy else adata
    _estimate_and_record(adata, samples, front, model_params, random_state=random_state, n_jobs=n_jobs)
    return adata if copy else None


def _checked_params(params: dict, *, samples, samples_key, draws, n_top_genes, fdr, groupby,
                    key_added, block=None) -> tuple[dict, dict]:
    """The front end's parameters (as recorded) and the model's, checked before the data is touched."""
    model_params = _fangs_params(params)
    given = None if samples is None else str(samples) if isinstance(samples, (str, os.PathLike)) \
        else type(samples).__name__
    n_top_genes = check_count(n_top_genes, "n_top_genes", 1, "fangs")
    fdr = check_real(fdr, "fdr", 0.0, 1.0, strict_min=True)
    front = dict(samples=given, samples_key=samples_key, draws=draws, n_top_genes=n_top_genes, fdr=fdr,
                 groupby=groupby, key_added=key_added, **({"block": block} if block else {}))
    return front, model_params


def _checked_samples(adata: ad.AnnData, samples, samples_key: str):
    """``_resolve_samples``'s samples, checked, one row per cell, with one chain label per sample."""
    S, source, log_joint, chains = _resolve_samples(adata, samples, samples_key)
    S = _lib().check_samples(S)
    if S[0].shape[0] != adata.n_obs:
        raise ScontrastError(f"samples: {S[0].shape[0]} rows but the data has {adata.n_obs} cells")
    if chains is not None and np.shape(chains) != (len(S),):
        raise ScontrastError(f"samples: its chain labels have shape {np.shape(chains)} but there are {len(S)} samples")
    return S, source, log_joint, chains


def _estimate_and_record(adata: ad.AnnData, samples, front: dict, model_params: dict, *, random_state,
                         n_jobs) -> None:
    """Run FANGS (and the draws method) on the samples and write ``obsm['fangs_features']`` and ``uns['fangs']``
    (``fangs`` being ``front['key_added']``)."""
    slot = front["key_added"]
    S, source, log_joint, chains = _checked_samples(adata, samples, front["samples_key"])
    with result_warnings("fangs") as warned:
        result = _lib().fangs(S, **model_params, n_jobs=n_jobs, random_state=random_state)
        est, support, chain_labels, extra = _described_estimate(adata, S, result.estimate, chains, key=front["groupby"],
                                                                fdr=front["fdr"], random_state=random_state,
                                                                block=front.get("block"))
    timings = {k: float(v) for k, v in result.timings.items()}
    draws_loss, draws_index = float("nan"), -1
    if front["draws"]:
        d = _lib().draws(S, a=result.a, n_jobs=n_jobs)
        draws_loss, draws_index = d.expected_loss, d.index
        timings["draws"] = float(d.timings["total"])
    k_values, k_counts = np.unique([s.shape[1] for s in S], return_counts=True)
    if est.shape[1]:  # K = 0 is said by uns['fangs']['n_features']: obsm holds no zero-width array
        adata.obsm[f"{slot}_features"] = est
    else:
        adata.obsm.pop(f"{slot}_features", None)  # a stale estimate of an earlier call
    if samples is None:
        extra.update(_gene_programmes(adata, front["samples_key"], est, front["n_top_genes"]))
    if log_joint is not None:
        extra["log_joint"] = np.asarray(log_joint, dtype=np.float64)
    log.info("fangs: K=%d, expected FARO loss %.4g (draws %.4g) from %d samples in %.1f s",
             est.shape[1], result.expected_loss, draws_loss, len(S), timings["total"])
    record_params(
        adata, slot, {**front, **model_params}, random_state, warnings=warned,
        a=float(result.a), expected_loss=float(result.expected_loss), draws_expected_loss=float(draws_loss),
        draws_index=int(draws_index), n_features=int(est.shape[1]), n_samples=len(S),
        samples_K_values=k_values.astype(np.int64), samples_K_counts=k_counts.astype(np.int64),
        feature_n_cells=est.sum(axis=0).astype(np.int64), timings=timings, source=source,
        feature_chain_support=support, support_chains=chain_labels.astype(np.int64),
        feature_supported=support.min(axis=1, initial=1.0) >= SUPPORTED if support.size
        else np.zeros(est.shape[1], dtype=bool), supported_threshold=SUPPORTED,
        initial_losses=np.asarray(result.details["initial_losses"], dtype=float),
        sweetened_losses=np.asarray(result.details["sweetened_losses"], dtype=float),
        accepted_flips=np.asarray(result.details["accepted"], dtype=np.int64),
        **extra,
    )


def _described_estimate(adata: ad.AnnData, S: list[np.ndarray], estimate: np.ndarray, chains, *, key: str, fdr: float,
                        random_state, block: str | None = None):
    """The estimate with its features by decreasing size, their support per chain and their counts per group.

    Returns ``(est, support, chain_labels, extra)``, ``extra`` holding the per-group counts and,
    with both groups present, the enrichment. Runs inside ``result_warnings``: its warnings are the result's.
    """
    order = np.argsort(-estimate.sum(axis=0), kind="stable")
    est = np.ascontiguousarray(estimate[:, order], dtype=np.uint8)
    support, chain_labels = _lib().feature_support(S, est, chains)
    _warn_unsupported(support, chain_labels)
    extra = {}
    if key in adata.obs:
        is_target = adata.obs[key].to_numpy(dtype=bool)
        extra = {"feature_n_target": est[is_target].sum(axis=0).astype(np.int64),
                 "feature_n_background": est[~is_target].sum(axis=0).astype(np.int64)}
        if is_target.any() and not is_target.all():
            extra.update(_enrichment(adata, est, is_target, fdr, random_state, block))
    return est, support, chain_labels, extra


def _enrichment(adata: ad.AnnData, est: np.ndarray, is_target: np.ndarray, fdr: float, random_state,
                block: str | None = None) -> dict:
    """Per-feature enrichment: over replicates when a design is declared (within ``block``'s blocks), else over cells."""
    design = replicate_design(adata)
    if design is None and block is not None:
        raise ScontrastError(f"block '{block}': blocks group replicates, and no replicate is declared")
    if design is None:
        enr = _lib().feature_enrichment(est, is_target)
        out = {f"feature_{name}": enr[name] for name in (
            "prevalence_target", "prevalence_background", "difference", "odds_ratio", "pvalue", "qvalue")}
        out.update(feature_test="Fisher's exact test over cells", feature_unit="cell")
    else:
        seed = random_state if isinstance(random_state, (int, np.integer)) else 0
        enr = _lib().replicate_feature_enrichment(est, is_target, design["replicates"], paired=design["paired"],
                                                  random_state=seed,
                                                  blocks=None if block is None else cell_blocks(adata.obs, block))
        if enr["pvalue_floor"] > fdr:
            warnings.warn(
                f"feature enrichment is tested over replicates ({design['summary']}): the smallest p-value their "
                f"relabellings allow is {enr['pvalue_floor']:.3g}, above fdr={fdr:g}, so no feature can be called "
                "enriched with this many replicates", ScontrastWarning, stacklevel=2)
        out = {f"feature_{name}": enr[name] for name in (
            "prevalence_target", "prevalence_background", "difference", "pvalue", "qvalue")}
        out.update(feature_test=("sign-flip permutation of within-replicate differences" if design["paired"]
                                 else "permutation of replicate labels") + " (replicate-mean prevalence)"
                                + ("" if block is None else f", within the blocks of '{block}'"),
                   feature_unit="replicate", feature_pvalue_floor=float(enr["pvalue_floor"]),
                   feature_replicate_names=enr["replicate_names"], feature_replicate_prevalence=enr["replicate_prevalence"],
                   design=design["summary"])
        if block is not None:
            out["feature_replicate_blocks"] = enr["replicate_blocks"]
    out["feature_enriched"] = out["feature_qvalue"] <= fdr
    return out


# A feature whose mean matched Jaccard index in some chain's samples is below this is held by the
# samples of some chains only, or only loosely by any (a warning).
SUPPORT_WARN = 0.5
# A finding is held at least this closely by every chain's (or ensemble half's) samples; the other
# features are listed apart in the summary as unsupported.
SUPPORTED = 0.8


def _warn_unsupported(support: np.ndarray, chains: np.ndarray) -> None:
    """Warn about the features (rows of ``support`` (K, C)) some chain's samples do not hold."""
    weak = np.flatnonzero(support.min(axis=1, initial=1.0) < SUPPORT_WARN) if support.size else []
    if len(weak) == 0:
        return
    names = ", ".join(f"F{j + 1} ({' / '.join(f'{v:.2f}' for v in support[j])})" for j in weak)
    where = f"the samples of some of the {len(chains)} chains" if len(chains) > 1 else "most samples"
    warnings.warn(f"features {names} are not held by {where} (mean matched Jaccard index below {SUPPORT_WARN}, "
                  "per chain): they may be one chain's mode, not the posterior's; do not read them as findings",
                  ScontrastWarning, stacklevel=2)


def _gene_programmes(adata: ad.AnnData, samples_key: str, est: np.ndarray, n_top: int) -> dict:
    """Loadings of the estimate's features on the sampler's input and each feature's top names."""
    info = adata.uns[samples_key]
    if INPUT not in info or "input_names" not in info or "sigma_x_mean" not in info:
        return {}
    names = np.asarray(info["input_names"]).astype(str)
    params = info.get("params", {})
    L = _lib().feature_loadings(cell_rows(adata, samples_key, INPUT), est, float(info["sigma_x_mean"]),
                                float(info["sigma_a_mean"]),
                                intercept=bool(info.get("intercept", params.get("intercept", False))))
    top = [", ".join(names[np.argsort(-row, kind="stable")[:n_top]]) for row in L]
    return {"loadings": L, "loading_names": names, "feature_top_genes": np.array(top, dtype=object).astype(str)}


def summary_rows(adata: ad.AnnData, n_top: int = 10) -> Iterator[tuple[str, str]]:
    """(item, value) rows of the workflow's summary table for ``uns['fangs']`` (and the sampler's diagnostics)."""
    f = adata.uns["fangs"]
    lf = adata.uns.get("latent_features")
    if lf is not None and "stability" in lf:
        yield from _ensemble_rows(lf)
    if lf is not None and "rhat_log_joint" in lf:
        yield "sampler: chains x sweeps (burn-in)", (f"{np.asarray(lf['log_joint']).shape[0]} x "
                                                     f"{lf['params'].get('n_iter')} ({lf['params'].get('burn_in')})")
        rep = lf["params"].get("use_rep")
        yield "sampler: input", f"{lf.get('n_dims_used')} " + (f"dims of obsm['{rep}']" if rep else "genes")
        yield "sampler: split R-hat log joint / K", f"{fmt(lf.get('rhat_log_joint'))} / {fmt(lf.get('rhat_K'))}"
        yield "sampler: ESS log joint / K", f"{fmt(lf.get('ess_log_joint'))} / {fmt(lf.get('ess_K'))}"
    yield "features K (estimate)", fmt(f.get("n_features"))
    ks, counts = np.asarray(f.get("samples_K_values", [])), np.asarray(f.get("samples_K_counts", []))
    if ks.size:
        yield "K over samples (K: count)", ", ".join(f"{k}: {c}" for k, c in zip(ks, counts))
    yield "expected FARO loss: FANGS vs draws", f"{fmt(f.get('expected_loss'))} vs {fmt(f.get('draws_expected_loss'))}"
    if "feature_qvalue" in f:
        unit = str(f.get("feature_unit", "cell"))
        test = str(f.get("feature_test", "Fisher's exact test over cells"))
        if unit == "replicate":
            test += f", {f['design']}; smallest possible p {fmt(float(f['feature_pvalue_floor']))}"
        else:
            test += " (cells treated as independent: declare a replicate when the cells come from several donors)"
        yield f"feature enrichment test (unit: {unit})", test
        genes = np.asarray(f.get("feature_top_genes", [""] * int(f["n_features"])), dtype=object)
        supported = np.asarray(f.get("feature_supported", np.ones(int(f["n_features"]), dtype=bool)), dtype=bool)
        holders = "the two halves of the fits" if lf is not None and "stability" in lf else "the chains' samples"
        for j in np.concatenate([np.flatnonzero(supported), np.flatnonzero(~supported)]).astype(int):
            pt, pb = float(f["feature_prevalence_target"][j]), float(f["feature_prevalence_background"][j])
            q = float(f["feature_qvalue"][j])
            where = ("enriched in target" if pt > pb else "enriched in background") if f["feature_enriched"][j] \
                else "not enriched"
            top = ", ".join(str(genes[j]).split(", ")[:n_top]) if str(genes[j]) else ""
            held = ""
            if "feature_chain_support" in f:
                held = f"; held by {holders} (Jaccard) " + " / ".join(
                    f"{v:.2f}" for v in np.asarray(f["feature_chain_support"])[j])
            item = f"feature F{j + 1}" if supported[j] else (
                f"unsupported feature F{j + 1} (held below {float(f.get('supported_threshold', 0.8)):g} by one of "
                f"{holders}: not a finding)")
            yield (item, f"prevalence target {pt:.2f} / background {pb:.2f}, BH q = {fmt(q)} per {unit} "
                   f"({where})" + held + (f"; top genes: {top}" if top else ""))


def _ensemble_rows(lf) -> Iterator[tuple[str, str]]:
    """Summary rows of ``tl.latent_features(method='ensemble')``: members, stability per K, chosen K."""
    p = lf["params"]
    stab = np.asarray(lf["stability"], dtype=float)
    yield "latent features: method", (f"{p.get('n_members')} binary factorisations per K on Bayesian-bootstrap "
                                      "resamples of the cells (resamples, not posterior draws)")
    rep = p.get("use_rep")
    yield "latent features: input", f"{lf.get('n_dims_used')} " + (f"dims of obsm['{rep}']" if rep else "genes")
    yield "latent features: stability per K (from K = 1)", ", ".join(
        f"{v:.2f}" for v in stab[np.isfinite(stab)])
    yield "latent features: chosen K", (f"{int(lf['n_features_chosen'])} (the largest K whose features recur at "
                                        f"stability >= {fmt(p.get('stability'))})")


__all__ = ["fangs", "summary_rows"]
