"""Feature enrichment between the target and background cells: Fisher's exact test per feature."""

from __future__ import annotations

import numpy as np

from ..core import ScontrastError
from ..feature_samples import _as_binary


def feature_enrichment(estimate, is_target) -> dict[str, np.ndarray]:
    """Prevalence of each feature in the target and background cells and Fisher's exact test.

    estimate (N, K) binary, is_target (N,) bool with cells in both groups. Returns
    (K,) arrays ``n_target``, ``n_background`` (cells holding the feature),
    ``prevalence_target``, ``prevalence_background``, ``difference`` (target minus
    background), ``odds_ratio``, ``pvalue`` (two-sided Fisher's exact test of the 2 x 2
    table holds/lacks x target/background) and ``qvalue`` (Benjamini-Hochberg over the
    K features). The test treats the allocation as given: it is calibrated when the
    features were found blind to the groups (``tl.latent_features`` fits all cells
    together and, by default, chooses its genes without the labels).
    """
    from scipy.stats import false_discovery_control, fisher_exact

    E = _as_binary(estimate, "estimate")
    t = np.asarray(is_target, dtype=bool)
    if t.shape != (E.shape[0],):
        raise ScontrastError(f"is_target: has shape {t.shape} but the estimate has {E.shape[0]} rows")
    n_t, n_b = int(t.sum()), int((~t).sum())
    if min(n_t, n_b) == 0:
        raise ScontrastError(f"is_target: {n_t} target and {n_b} background cells; both groups are needed")
    ht = E[t].sum(axis=0).astype(np.int64)
    hb = E[~t].sum(axis=0).astype(np.int64)
    odds = np.empty(E.shape[1])
    p = np.empty(E.shape[1])
    for k in range(E.shape[1]):
        res = fisher_exact([[ht[k], n_t - ht[k]], [hb[k], n_b - hb[k]]])
        odds[k], p[k] = float(res.statistic), float(res.pvalue)
    q = false_discovery_control(p) if p.size else p.copy()
    return {"n_target": ht, "n_background": hb, "prevalence_target": ht / n_t, "prevalence_background": hb / n_b,
            "difference": ht / n_t - hb / n_b, "odds_ratio": odds, "pvalue": p, "qvalue": np.asarray(q, dtype=float)}
