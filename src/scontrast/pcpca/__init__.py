"""Probabilistic contrastive PCA (PCPCA; Li, Jones & Engelhardt).

Target cells x = W z + mu_x + e and background cells y = W z' + mu_y + e share W and the noise
variance; PCPCA maximises p(X | W, sigma^2) / p(Y | W, sigma^2)^gamma. The files:

``_estimator.py``
    :class:`PCPCA`: parameter checks, the fit (closed form, or L-BFGS with missing values),
    transform, scores and sampling.
``_closed_form.py``
    the closed-form maximiser and the admissible range of gamma (:func:`max_gamma`), with the
    derivation.
``_missing.py``
    the observed-data objective for missing values (:func:`observed_loglik`), its gradients
    and its L-BFGS maximisation.
``_scatter.py``
    the groups' scatter matrices and the top-k eigenproblems of Sx - gamma Sy.
``_checks.py``
    input checks and the contrast-strength rule (gamma or gamma_prime).
``_heldout.py``
    :func:`heldout_loglik`: held-out log-likelihood against probabilistic PCA.

Timings behind the size thresholds: docs/pcpca.md.
"""

from ._closed_form import max_gamma
from ._estimator import PCPCA
from ._heldout import heldout_loglik
from ._missing import observed_loglik

__all__ = ["PCPCA", "heldout_loglik", "max_gamma", "observed_loglik"]
