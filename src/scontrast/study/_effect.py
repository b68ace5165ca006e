"""The effect size of a split: how far apart the groups' donors are, relative to how far apart
donors of one group are, with a jackknife interval over donors.

With ``d(i, j)`` the squared distance between two units' profiles (per-gene means and standard
deviations, :func:`scontrast.study._test.donor_features`) minus what their finite cell counts add
to it (their sampling variances), ``B`` the mean over pairs of units of different groups and
different donors and ``W`` over pairs of one group and different donors::

    effect = (B - W) / W

Its no-effect value is 0 (every pair of distinct donors is alike under no difference, whatever
the cells per donor). Without the sampling noise removed it would grow with the cells per donor
under an effect (W shrinks towards the donors' own spread as cells are added); ``W`` is floored
at a quarter of its raw value so that donors that barely differ do not make the ratio explode.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = ["group_distance", "jackknife_interval"]

W_FLOOR = 0.25  # the noise-corrected within-group spread is at least this share of the raw one


def group_distance(profiles: np.ndarray, noise: np.ndarray, is_target: np.ndarray, donor: np.ndarray) -> float:
    """``(B - W) / W`` of the units' profiles (U, F), noise (U,), groups (U,) and donors (U,); NaN
    when a group has fewer than 2 donors."""
    is_target = np.asarray(is_target, dtype=bool)
    donor = np.asarray(donor)
    if min(np.unique(donor[is_target]).size, np.unique(donor[~is_target]).size) < 2:
        return float("nan")
    sq = (profiles ** 2).sum(axis=1)
    raw = sq[:, None] + sq[None, :] - 2 * profiles @ profiles.T
    corrected = raw - noise[:, None] - noise[None, :]
    distinct = donor[:, None] != donor[None, :]
    between = distinct & (is_target[:, None] != is_target[None, :])
    within = distinct & (is_target[:, None] == is_target[None, :])
    B, W = corrected[between].mean(), corrected[within].mean()
    W = max(W, W_FLOOR * raw[within].mean())
    return float((B - W) / W)


def jackknife_interval(profiles, noise, is_target, donor, level: float = 0.95) -> tuple[float, float, float]:
    """The effect and its leave-one-donor-out jackknife interval (estimate, low, high).

    Pseudo-values ``n * theta - (n - 1) * theta_{-i}`` over the n donors; the interval is their
    mean's t interval (n - 1 degrees of freedom) centred on the estimate. NaN bounds when fewer
    than 3 leave-one-out estimates exist.
    """
    donor = np.asarray(donor)
    theta = group_distance(profiles, noise, is_target, donor)
    donors = np.unique(donor)
    loo = []
    for d in donors:
        keep = donor != d
        value = group_distance(profiles[keep], noise[keep], np.asarray(is_target)[keep], donor[keep])
        if np.isfinite(value):
            loo.append(value)
    n = len(loo)
    if n < 3 or not np.isfinite(theta):
        return theta, float("nan"), float("nan")
    loo = np.array(loo)
    pseudo = n * theta - (n - 1) * loo
    se = pseudo.std(ddof=1) / np.sqrt(n)
    half = stats.t.ppf(0.5 + level / 2, n - 1) * se
    return theta, float(theta - half), float(theta + half)
