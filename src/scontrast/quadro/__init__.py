"""QUADRO: sparse quadratic classification by Rayleigh-quotient optimisation.

Fan, Ke, Liu and Xia (2015), *QUADRO: a supervised dimension reduction method
via Rayleigh quotient optimization*, Annals of Statistics 43(4).

A quadratic score ``Q(x) = x' Omega x - 2 delta' x`` separates two classes
(class 1 = ``classes_[0]``, class 2 = ``classes_[1]``). Under elliptical laws
with a common kurtosis parameter ``gamma`` its class-wise mean and variance are

    M_k = tr(Omega S_k) + mu_k' Omega mu_k - 2 delta' mu_k
    L_k = 2 (1 + gamma) tr(Omega S_k Omega S_k) + gamma tr(Omega S_k)^2
          + 4 (Omega mu_k - delta)' S_k (Omega mu_k - delta)

so the Rayleigh quotient ``pi (1-pi) (M_1 - M_2)^2 / (pi L_1 + (1-pi) L_2)``
needs only means, covariances and ``gamma``. Being scale free, it is maximised
by the convex problem

    min  pi L_1 + (1-pi) L_2 + lambda1 |Omega|_1 + lambda2 |delta|_1
    s.t. M_2 - M_1 = 1,

solved here by an accelerated proximal gradient method whose proximal step
(soft-thresholding with one scalar shift) keeps every iterate exactly on the
constraint. Means, variances and correlations are estimated robustly
(Catoni's M-estimator, Kendall's tau) or by the sample moments.

For real data: ``class_weight='balanced'`` gives both
classes the weight 1/2 (``pi``, the threshold and the calibration), so that a
small group is not traded away; :class:`RayleighScreen` keeps the genes whose
own distribution (:func:`marginal_rayleigh`) or co-expression
(:func:`coexpression_change`) changes most, fitted on the training samples of
every fold; lambda1's path starts where the optimality conditions make
``Omega = 0`` (``RayleighProblem.omega_zero_level``) and a choice at the path's
least penalised end is a :class:`scontrast.core.ScontrastWarning`. The proximal
gradient loop is compiled (numba) and :func:`cross_validated_scores` fits the outer
folds in ``n_jobs`` threads; ``shrinkage='auto'`` (the default) regularises the
covariance of a class with no more samples than features (Ledoit-Wolf), and
``cv_rule='1se_lambda1'`` orders the one-standard-error choice: Omega's penalty first.

The package is numpy/scipy in, numpy out; ``scontrast.tl.quadro`` is the
AnnData front end. Measured figures (shrinkage on the paper's settings): ``docs/quadro.md``.

Files
-----
``_robust``    Catoni's means, robust variances, Kendall's tau (compiled), the nearest PSD matrix
``_moments``   the mean and variance of Q, the kurtosis parameter, ``estimate_moments``
``_solver``    ``RayleighProblem`` and the compiled proximal-gradient ``solve_rayleigh``
``_scores``    Q itself, the error threshold, AUC and the logistic calibration
``_screen``    ``marginal_rayleigh``, ``coexpression_change`` and the selector ``RayleighScreen``
``_estimator`` the classifier ``QUADRO`` (its checks and the steps of ``fit``)
``_crossval``  the lambda path and the inner folds that choose the lambdas
``_outer``     ``cross_validated_scores``: every sample scored by an outer model that did not see it
``_utils``     input checks shared by the estimators
"""

from ._estimator import QUADRO
from ._moments import (
    Moments,
    estimate_moments,
    kurtosis_parameter,
    quadratic_mean,
    quadratic_variance,
    rayleigh_quotient,
)
from ._outer import OutOfFold, cross_validated_scores
from ._robust import catoni_mean, kendall_correlation, kendall_tau_matrix, median_of_means_variance, nearest_psd, robust_variance
from ._scores import balanced_error, error_threshold
from ._screen import RayleighScreen, coexpression_change, marginal_rayleigh
from ._solver import RayleighProblem, RayleighSolution, solve_rayleigh

__all__ = [
    "catoni_mean",
    "median_of_means_variance",
    "robust_variance",
    "kendall_tau_matrix",
    "kendall_correlation",
    "nearest_psd",
    "kurtosis_parameter",
    "quadratic_mean",
    "quadratic_variance",
    "rayleigh_quotient",
    "estimate_moments",
    "Moments",
    "RayleighProblem",
    "RayleighSolution",
    "solve_rayleigh",
    "error_threshold",
    "balanced_error",
    "marginal_rayleigh",
    "coexpression_change",
    "RayleighScreen",
    "QUADRO",
    "OutOfFold",
    "cross_validated_scores",
]
