"""Scores, cuts and calibration: Q itself, the error-minimising threshold, AUC and the logistic fits.

Everything here takes the quadratic scores ``Q`` of samples whose class is known (the
training or held-out ones) and turns them into a cut, an error or a probability scale.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import rankdata
from sklearn.linear_model import LogisticRegression


def _quad_scores(X: np.ndarray, Omega: np.ndarray, delta: np.ndarray, center: np.ndarray,
                 scale: np.ndarray) -> np.ndarray:
    """Q(z) = z' Omega z - 2 delta' z for every row, z = (x - center) / scale; (n,) array."""
    Z = (X - center) / scale
    return np.einsum("ij,ij->i", Z @ Omega, Z) - 2.0 * (Z @ delta)


def error_threshold(scores: np.ndarray, is_two: np.ndarray, balanced: bool = False,
                    class_weights: tuple[float, float] | None = None) -> float:
    """Threshold t minimising the errors of "class 2 iff score > t".

    Candidates are the midpoints between consecutive distinct scores and +-inf;
    among equally good ones the middle one is taken.

    Parameters
    ----------
    scores : (n,) array, is_two : (n,) bool array (True = class 2).
    balanced : minimise the balanced error (the mean of the two classes' error
        rates: each sample weighs ``1 / n_class``) instead of the error count.
    class_weights : (weight of a class-1 sample, of a class-2 sample) for a
        weighted error count (overrides ``balanced``).

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.quadro import error_threshold
    >>> float(error_threshold(np.array([0.0, 1.0, 2.0, 3.0]), np.array([False, False, True, True])))   # between 1 and 2
    1.5
    """
    order = np.argsort(scores, kind="stable")
    s = scores[order]
    two = is_two[order].astype(float)
    one = 1.0 - two
    if class_weights is not None:
        one, two = one * float(class_weights[0]), two * float(class_weights[1])
    elif balanced:
        two = two / max(two.sum(), 1.0)
        one = one / max(one.sum(), 1.0)
    # cutting after position i (0..n): class 2 at or below the cut + class 1 above it
    below_two = np.concatenate([[0.0], np.cumsum(two)])
    above_one = np.concatenate([[0.0], np.cumsum(one[::-1])])[::-1]
    errors = below_two + above_one
    errors = np.where(errors <= errors.min() + 1e-12 * max(errors.max(), 1.0), errors.min(), errors)
    distinct = np.concatenate([[True], s[1:] > s[:-1], [True]])  # cuts between equal scores are not cuts
    errors = np.where(distinct, errors, np.inf)
    best = np.flatnonzero(errors == errors.min())
    i = int(best[len(best) // 2])
    if i == 0:
        return -np.inf
    if i == len(s):
        return np.inf
    return 0.5 * (s[i - 1] + s[i])


def balanced_error(is_two: np.ndarray, predicted_two: np.ndarray) -> float:
    """Mean of the two classes' error rates (1 - balanced accuracy); (n,) bool arrays.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.quadro import balanced_error
    >>> truth = np.array([True] * 2 + [False] * 8)
    >>> always_false = np.zeros(10, dtype=bool)               # 80% right, but blind to the small class
    >>> balanced_error(truth, always_false)
    0.5
    """
    is_two = np.asarray(is_two, dtype=bool)
    predicted_two = np.asarray(predicted_two, dtype=bool)
    rates = [float(np.mean(predicted_two[m] != is_two[m])) for m in (~is_two, is_two) if m.any()]
    return float(np.mean(rates))

def _finite_cut(t: float, scores: np.ndarray) -> float:
    """``t``, or for an infinite ``t`` (every score best called one class) a cut outside the scores.

    The cut lies one spread of the scores below (``-inf``) or above (``+inf``) them, so
    that ``Q - threshold`` stays finite and keeps the ranking of the scores.
    """
    if np.isfinite(t):
        return float(t)
    lo, hi = float(np.min(scores)), float(np.max(scores))
    margin = max(hi - lo, abs(lo), abs(hi)) or 1.0
    return lo - margin if t < 0 else hi + margin

def _auc(is_two: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve of ``scores`` for ``is_two`` (Mann-Whitney, ties count 1/2); (n,) arrays."""
    n2 = int(is_two.sum())
    n1 = is_two.size - n2
    r = rankdata(scores)
    return float((r[is_two].sum() - n2 * (n2 + 1) / 2.0) / (n1 * n2))


def _logistic_1d(scores: np.ndarray, is_two: np.ndarray, sample_weight=None) -> tuple[float, float]:
    """Slope and intercept of P(class 2 | Q) = sigmoid(slope Q + intercept).

    Fitted on standardised scores with a weak ridge (C = 100), which keeps the
    fit finite when the scores separate the classes; a non-positive slope means
    the scores carry no usable signal and the prior is returned (slope 0).
    """
    m, s = float(np.mean(scores)), float(np.std(scores))
    s = s if s > 0 else 1.0
    lr = LogisticRegression(C=100.0, max_iter=1000).fit(((scores - m) / s)[:, None], is_two,
                                                         sample_weight=sample_weight)
    b = float(lr.coef_[0, 0]) / s
    c = float(lr.intercept_[0]) - b * m
    if b <= 0:
        p = float(np.clip(np.average(is_two, weights=sample_weight), 1e-12, 1 - 1e-12))
        return 0.0, math.log(p / (1 - p))
    return b, c


def _logistic_slope(margin: np.ndarray, is_two: np.ndarray, sample_weight=None) -> float:
    """Slope b > 0 of P(class 2 | Q) = sigmoid(b margin), ``margin = Q - threshold`` (offset fixed).

    Fitted on RMS-scaled margins with the weak ridge of :func:`_logistic_1d`. Scores
    without usable signal (b <= 0) get the floor ``1e-3 / RMS``: probabilities of
    nearly 1/2 that still cross it where the prediction changes class.
    """
    rms = float(np.sqrt(np.mean(margin**2)))
    rms = rms if rms > 0 else 1.0
    lr = LogisticRegression(C=100.0, fit_intercept=False, max_iter=1000).fit(
        (margin / rms)[:, None], is_two, sample_weight=sample_weight)
    return max(float(lr.coef_[0, 0]), 1e-3) / rms

