"""FARO loss and the FANGS search for a Bayes estimate of a feature allocation.

A feature allocation of N items is a binary N x K matrix whose columns (features) are
unordered. Dahl, Johnson and Andros ("Comparison and Bayesian estimation of feature
allocations") compare two allocations with the FARO loss and summarise posterior samples
Z_1..Z_B with FANGS, a search that minimises the Monte Carlo expected FARO loss.

Files:

- ``_loss.py``: the FARO loss (cost matrix, loss; the direction of ``a``), maximum-overlap
  matching and the expected loss.
- ``scontrast._matching`` and ``scontrast._assignment`` (shared with ``scontrast.latent_features``):
  the packed samples ``_Packed``, :func:`feature_support` and the compiled (numba) Hungarian
  method and per-sample block solvers.
- ``_sweetening.py``: greedy one-entry flips with incremental bookkeeping (``_Sweetener``).
- ``_search.py``: :func:`fangs` (initial candidates, parallel sweetenings) and :class:`FangsResult`.
- ``_draws.py``: :func:`draws`, the best posterior sample.
- ``_enrichment.py``: :func:`feature_enrichment` (cells as the unit) and
  :func:`replicate_feature_enrichment` (replicates as the unit), target vs background per feature.
- ``_support.py``: :func:`feature_loadings` (and :func:`feature_support`, re-exported).
- ``_checks.py``: parameter checks shared by the functions (``a``, ``n_jobs``).
- ``_simulate.py``: posterior-like samples around a known truth (for tests and benchmarks).

Notes and measurements: ``docs/fangs.md``.
"""

from ..feature_samples import check_samples
from ._draws import draws
from ._enrichment import feature_enrichment, replicate_feature_enrichment
from ._loss import expected_loss, faro_cost_matrix, faro_loss
from ._search import FangsResult, fangs
from ._support import feature_loadings, feature_support

__all__ = [
    "FangsResult",
    "faro_cost_matrix",
    "faro_loss",
    "expected_loss",
    "draws",
    "fangs",
    "check_samples",
    "feature_enrichment",
    "replicate_feature_enrichment",
    "feature_loadings",
    "feature_support",
]
