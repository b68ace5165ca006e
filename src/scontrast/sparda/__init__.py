"""Principal differences analysis (PDA) and its sparse variant SPARDA.

Mueller & Jaakkola (NIPS 2015): find the unit direction ``beta`` along which the
projected target cells ``X @ beta`` and background cells ``Y @ beta`` differ most
in squared 2-Wasserstein distance; an L1 penalty (``lam``) or a cardinality bound
(``k``) makes ``beta`` sparse, so that its support names the genes carrying the
difference, whatever its kind (mean, variance, correlation).

The fit follows the paper's "tighten after relax" scheme:

1. optional screening of the genes by their marginal W2 when ``d`` is large
   (the d x d semidefinite relaxation cannot run on thousands of genes);
2. RELAX: projected supergradient ascent on the semidefinite relaxation
   ``max_{B psd, tr B = 1} min_M tr(W_M B) - lam ||B||_1`` on (a subsample of) the
   cells, the supergradient ``W_M`` built from the exact optimal transport plan
   ``M`` for the cost ``z_ij' B z_ij``;
3. tightening: projected gradient ascent on ``D(beta) = W2^2(X beta, Y beta)``
   from the RELAX direction, on all cells, with the sorted (quantile) matching
   giving the gradient ``2 W_M(beta) beta`` in O(n d + n log n).

Significance is a permutation test of a divergence (and of its shape part, combined
by min-p) re-optimised, with label-free tuning, for every labelling (small problems), a
sample-splitting permutation test
(direction learnt on half of the cells, the held-out projections' W2 permuted; large
problems) or a permutation test of the whole refit; ``lam`` is chosen by a rule on the
cross-validated held-out divergence; several directions are found by deflation.
Directions are oriented so that the target cells project higher.

The files:

- ``_wasserstein``: exact 1-D W2 on the merged quantile grid, the sorted matching,
  ``D(beta)`` and its gradient, marginal and permuted W2;
- ``_relax``: RELAX (optimal plans, supergradient, simplex projection of the eigenvalues);
- ``_tighten``: the tightening, for one labelling and for many at once, from shared steps,
  and the starts from the group moments;
- ``_test``: the tests of ``target = background`` ('permute', 'split', 'refit');
- ``_cv``: the lambda path and its cross-validation;
- ``_estimator``: the :class:`SPARDA` estimator (screening, deflation, attributes);
- ``_stability``: stability selection over half-subsamples;
- ``_utils``: orientation of a direction, gene moments and scaling.

Measurements behind the defaults (test power and calibration, the 'permute' statistic):
``docs/sparda.md``.
"""

from ._estimator import SPARDA
from ._relax import relax, relax_supergradient
from ._stability import stability_selection
from ._tighten import tighten
from ._utils import orient_to_target
from ._wasserstein import divergence_gradient, marginal_wasserstein2, projected_divergence, wasserstein2_1d

__all__ = [
    "wasserstein2_1d",
    "projected_divergence",
    "divergence_gradient",
    "marginal_wasserstein2",
    "relax_supergradient",
    "relax",
    "tighten",
    "orient_to_target",
    "SPARDA",
    "stability_selection",
]
