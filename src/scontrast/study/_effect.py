"""The effect size of a split: how far apart the groups' donors are, relative to how far apart
donors of one group are, with a jackknife interval over donors.

Each feature of the units' profiles (per-gene log-CPM and spread,
:func:`scontrast.study._test.donor_features`) is put in units of its own spread over all units
(label-free, its sampling noise removed), so that genes that vary a lot from donor to donor do not
swamp the others. With ``d(i, j)`` the squared distance between two units minus what their finite
cell counts add to it (their sampling variances), ``B`` its mean over pairs of units of different
groups and different donors and ``W`` over pairs of one group and different donors::

    effect = (B - W) / W

Its no-effect value is 0 (every pair of distinct donors is alike under no difference, whatever
the cells per donor). Without the sampling noise removed it would grow with the cells per donor
under an effect (W shrinks towards the donors' own spread as cells are added). In the denominator
``W`` (and each feature's spread) is floored at a quarter of its raw value, so that donors that
barely differ beyond their cells' noise do not make the ratio explode.

Removing the noise keeps the effect's centre where it is whatever the cells per donor, not its
fluctuations: fewer cells per donor make it (and its interval) wider. With ``effect_cells`` (a
:func:`scontrast.study.run_study` option) every unit's profile is read from at most that many of its
cells (:func:`unit_subsample`), so that every split's effect carries the noise of the same number of
cells: its law under no difference is then the same at every larger cell count, and so are the
effects of splits of different sizes, at the price of the precision the other cells would give.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = ["group_distance", "jackknife_interval", "unit_subsample"]

W_FLOOR = 0.25  # the noise-corrected within-group spread is at least this share of the raw one


def group_distance(profiles: np.ndarray, noise: np.ndarray, is_target: np.ndarray, donor: np.ndarray) -> float:
    """``(B - W) / W`` of units' profiles (U, F), their sampling variances (U, F), groups (U,) and
    donors (U,), each feature in units of its label-free spread over the units; NaN when a group
    has fewer than 2 donors.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.study import group_distance
    >>> rng = np.random.default_rng(0)
    >>> profiles, noise = rng.normal(size=(8, 5)), np.full((8, 5), 0.01)   # 8 donors, 5 genes
    >>> is_target, donor = np.repeat([True, False], 4), np.array([f"d{i}" for i in range(8)])
    >>> round(group_distance(profiles, noise, is_target, donor), 2)        # no difference: about 0
    -0.05
    >>> profiles[is_target] += 2.0
    >>> round(group_distance(profiles, noise, is_target, donor), 2)        # the target donors shifted
    2.09
    """
    is_target = np.asarray(is_target, dtype=bool)
    donor = np.asarray(donor)
    if min(np.unique(donor[is_target]).size, np.unique(donor[~is_target]).size) < 2:
        return float("nan")
    spread = profiles.var(axis=0, ddof=1)
    scale = np.maximum(spread - noise.mean(axis=0), W_FLOOR * spread)
    ok = scale > 0  # a feature constant over every unit carries nothing
    z, zn = profiles[:, ok] / np.sqrt(scale[ok]), noise[:, ok] / scale[ok]
    i, j = np.triu_indices(z.shape[0], k=1)
    keep = donor[i] != donor[j]
    i, j = i[keep], j[keep]
    raw = ((z[i] - z[j]) ** 2).sum(axis=1)  # (pairs,)
    corrected = raw - zn[i].sum(axis=1) - zn[j].sum(axis=1)
    between = is_target[i] != is_target[j]
    B, W = corrected[between].mean(), corrected[~between].mean()
    # the floor bounds the denominator only: the numerator stays unbiased (0 under no difference)
    return float((B - W) / max(W, W_FLOOR * raw[~between].mean()))


def unit_subsample(unit: np.ndarray, n_cells: int, rng: np.random.Generator) -> np.ndarray:
    """The sorted positions of at most ``n_cells`` cells of each unit of ``unit`` (n_cells_total,), drawn without
    replacement (a unit with fewer keeps all of its cells).

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.study import unit_subsample
    >>> unit = np.array(["a"] * 5 + ["b"] * 2)
    >>> kept = unit_subsample(unit, 3, np.random.default_rng(0))
    >>> np.unique(unit[kept], return_counts=True)[1].tolist()
    [3, 2]
    """
    unit = np.asarray(unit)
    keep = [rng.choice(idx, size=n_cells, replace=False) if idx.size > n_cells else idx
            for idx in (np.flatnonzero(unit == u) for u in np.unique(unit))]
    return np.sort(np.concatenate(keep)) if keep else np.zeros(0, dtype=int)


def jackknife_interval(profiles, noise, is_target, donor, level: float = 0.95) -> tuple[float, float, float]:
    """The effect and its leave-one-donor-out jackknife interval (estimate, low, high).

    Pseudo-values ``n * theta - (n - 1) * theta_{-i}`` over the n donors; the interval is their
    mean's t interval (n - 1 degrees of freedom) centred on the estimate. NaN bounds when fewer
    than 3 leave-one-out estimates exist.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.study import jackknife_interval
    >>> rng = np.random.default_rng(0)
    >>> profiles, noise = rng.normal(size=(8, 5)), np.full((8, 5), 0.01)
    >>> is_target, donor = np.repeat([True, False], 4), np.array([f"d{i}" for i in range(8)])
    >>> profiles[is_target] += 2.0
    >>> estimate, low, high = jackknife_interval(profiles, noise, is_target, donor)
    >>> bool(low < estimate < high), round(estimate, 2)
    (True, 2.09)
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
