"""Part 3 of bench_study (``--effect``): the effect size of one split at 50 and at 500 cells per donor.

The shipped effect (:func:`scontrast.study.jackknife_interval`: ``(B - W) / W`` with each donor's
cell-sampling noise removed) is computed on the same simulated split beside two alternatives,
built from the same library pieces, that show what each property of the effect costs:

- **uncorrected**: the same distance with no noise removed (the noise set to 0). It is pivotal
  under no difference (every donor profile is then one draw of the same law, and each feature is
  in units of its own spread), so its distribution is the same at every cell count; under an
  effect it shrinks as cells get fewer, because the cells' noise inflates ``W``;
- **50 cells**: ``run_study(..., effect_cells=50)``, the shipped effect on 50 cells drawn at random
  from each donor, so that every donor has the noise of 50 cells whatever it has; it throws the
  other cells away.

The effect needs only the split's profiles, not the test's relabellings, so the split is prepared
by the study's own code without them (each variant equals ``run_study``'s effect at the same
``random_state``, which the tests check).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from scontrast.datasets import simulate_study
from scontrast.study import jackknife_interval

SPLIT = "CD14 Mono"
FOLDS = (1.0, 1.5, 2.0, 3.0)
COUNTS = (50, 500)
REFERENCE_CELLS = 50  # the "50 cells" variant's cells per donor
VARIANTS = ("shipped", "uncorrected", "50 cells")


def split_profiles(sim, random_state: int):
    """The split's unit profiles as ``run_study(..., effect_cells=REFERENCE_CELLS, random_state=random_state)``
    builds them (a ``_Split``: ``features`` of every cell, ``effect_features`` of the reference cells)."""
    from scontrast.study._study import _split_data

    obs = sim.obs
    cells = pd.DataFrame({"donor": obs["donor"].astype(str).to_numpy(),
                          "is_target": (obs["condition"] == "case").to_numpy()}, index=np.arange(sim.n_obs))
    donors = sorted(cells["donor"].unique())
    rng = np.random.default_rng(random_state).spawn(1)[0]  # run_study's stream for the effect's cells
    return _split_data(sim, None, cells, SPLIT, SPLIT, donors, paired=False, n_genes=300,
                       effect_cells=REFERENCE_CELLS, rng=rng)


def split_effects(sim, random_state: int) -> dict[str, tuple[float, float, float]]:
    """Per variant, the split's effect and its 95% jackknife interval (estimate, low, high)."""
    s = split_profiles(sim, random_state)
    is_target, donor = s.units["is_target"].to_numpy(), s.units["donor"].to_numpy()
    return {"shipped": jackknife_interval(s.features, s.noise, is_target, donor),
            "uncorrected": jackknife_interval(s.features, np.zeros_like(s.noise), is_target, donor),
            "50 cells": jackknife_interval(s.effect_features, s.effect_noise, is_target, donor)}


def _row(values: np.ndarray, covered: int, band) -> str:
    se = values.std(ddof=1) / np.sqrt(values.size)
    return f"mean {values.mean():.3f} (se {se:.3f}) sd {values.std(ddof=1):.3f}, covers 0 in {band(covered, values.size)}"


def effect(cells, n: int, seed: int, band, n_null: int | None = None) -> dict:
    """Print the effect of the CD14 Mono split, 6 vs 6 donors: ``n_null`` studies with nothing planted and ``n``
    per planted fold, at 50 and at 500 cells per donor (only the split's real cells are simulated), each variant
    side by side; returns {(variant, fold, cells): effects}."""
    n_null = n_null or n
    mono = cells[(cells.obs["cell_type"] == SPLIT).to_numpy()].copy()
    print(f"\n## Effect size (6 vs 6 donors, {SPLIT} split; {n_null} studies with nothing planted and {n} per "
          "planted fold, at each cell count; variants: " + ", ".join(VARIANTS) + ")")
    out = {}
    for fold in FOLDS:
        planted = [] if fold == 1.0 else [{"cell_type": SPLIT, "kind": "mean", "n_genes": 15, "fold": fold}]
        for cpd in COUNTS:
            rows = [split_effects(simulate_study(mono, n_target=6, n_background=6, effects=planted, cells_per_donor=cpd,
                                                 random_state=seed + 2000 + i), seed + i)
                    for i in range(n_null if fold == 1.0 else n)]
            for variant in VARIANTS:
                est = np.array([r[variant] for r in rows])
                out[variant, fold, cpd] = est[:, 0]
                covered = int(((est[:, 1] <= 0) & (0 <= est[:, 2])).sum())
                print(f"{cpd} cells/donor, fold {fold}, {variant}: {_row(est[:, 0], covered, band)}")
    for variant in VARIANTS:
        a, b = out[variant, 1.0, 50], out[variant, 1.0, 500]
        diff, se = a.mean() - b.mean(), np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
        grows = ", ".join(f"{out[variant, f, 50].mean() / out[variant, f, 500].mean():.2f} at {f:g}x" for f in FOLDS[1:])
        print(f"{variant}: nothing planted, 50 against 500 cells/donor: mean difference {diff:.3f} (se {se:.3f}, "
              f"z {diff / se:.2f}); Kolmogorov-Smirnov p {stats.ks_2samp(a, b).pvalue:.3g}; sd ratio "
              f"{a.std(ddof=1) / b.std(ddof=1):.2f}; planted, mean at 50 over mean at 500 cells/donor: {grows}")
    return out
