"""Simulated studies from real cells: pseudo-donors, conditions, covariates and planted effects.

:func:`simulate_study` turns a real count matrix whose cells carry a cell type into a
*condition x cell type x donor* study with a known truth, for power planning ("how many donors
do I need?"), for the tests and for the benchmarks:

- every simulated donor draws its cells from the real cells of each type (at random, without
  replacement while enough remain) and multiplies each gene's counts by its own log-normal
  factor (``donor_sd``: the log-sd across donors), shared by its cell types;
- donors are split into a target and a background condition (``paired``: every donor gives
  cells to both), with donor-level covariates balanced across the conditions;
- effects are planted in the target cells of chosen cell types: a mean shift of some genes by a
  fold, a change of spread with the mean kept, or a new sub-state carried by a fraction of the
  cells;
- the counts are redrawn as Poisson with the cell's real counts times every factor as its mean,
  so that factors act on expected counts and zeros stay possible everywhere.

The same ``random_state`` gives the same study, bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from .core import ScontrastError

__all__ = ["simulate_study", "EFFECT_KINDS"]

EFFECT_KINDS = ("mean", "spread", "substate")


def _check_effects(effects: Sequence[Mapping], types: pd.Index) -> list[dict]:
    """The effects with their defaults, each checked: a one-line error names the bad entry."""
    out = []
    for i, eff in enumerate(effects):
        eff = dict(eff)
        kind = eff.get("kind", "mean")
        if kind not in EFFECT_KINDS:
            raise ScontrastError(f"effects[{i}]: kind must be one of {EFFECT_KINDS}, got {kind!r}")
        if eff.get("cell_type") not in types:
            raise ScontrastError(f"effects[{i}]: cell_type {eff.get('cell_type')!r} is absent; have {list(types)}")
        eff.setdefault("n_genes", 15 if kind == "mean" else 10)
        eff.setdefault("fold", 2.0 if kind == "mean" else 4.0)  # mean and substate
        eff.setdefault("log_sd", 1.0)  # spread: sd of the per-cell log multiplier
        eff.setdefault("fraction", 0.2)  # substate: share of the type's target cells in it
        eff.setdefault("shared", False)  # spread: one multiplier per cell for all its genes (co-expression)
        if eff["n_genes"] < 1 or eff["fold"] <= 0 or eff["log_sd"] < 0 or not 0 < eff["fraction"] <= 1:
            raise ScontrastError(f"effects[{i}]: n_genes >= 1, fold > 0, log_sd >= 0 and 0 < fraction <= 1 needed")
        eff["kind"] = kind
        out.append(eff)
    return out


def _donor_table(n_target: int, n_background: int, paired: bool, covariates: Mapping[str, Sequence[str]]):
    """One row per donor: its name, condition (unpaired) and covariates, balanced across conditions."""
    n = n_target if paired else n_target + n_background
    names = [f"D{i + 1:02d}" for i in range(n)]
    cond = ["both"] * n if paired else ["target"] * n_target + ["background"] * n_background
    table = pd.DataFrame({"donor": names, "condition": cond})
    for col, values in covariates.items():
        values = list(values)
        # within each condition the values cycle, so every covariate is balanced (not confounded)
        rank = table.groupby("condition").cumcount().to_numpy()
        table[col] = [values[r % len(values)] for r in rank]
    return table


def simulate_study(
    adata: ad.AnnData,
    *,
    cell_type: str = "cell_type",
    layer: str | None = None,
    n_target: int = 6,
    n_background: int = 6,
    paired: bool = False,
    cells_per_donor: int | None = None,
    donor_sd: float = 0.3,
    covariates: Mapping[str, Sequence[str]] | None = None,
    effects: Sequence[Mapping] = (),
    gene_pool: int = 200,
    target_label: str = "case",
    background_label: str = "control",
    random_state: int | np.random.Generator | None = 0,
) -> ad.AnnData:
    """A simulated study of ``n_target`` against ``n_background`` donors from real cells.

    Parameters
    ----------
    adata
        Real cells (n_cells x n_genes) with raw counts in ``X`` (or ``layer``) and their type in
        ``obs[cell_type]``.
    n_target, n_background
        Donors per condition. ``paired``: ``n_target`` donors each give cells to both
        conditions (``n_background`` is ignored).
    cells_per_donor
        Cells of each type per donor and condition, drawn with replacement from the real cells
        of the type. None: the real cells of each type are shared out among the donor-condition
        pairs without replacement (each real cell used once).
    donor_sd
        Log-sd of the per-donor gene factors (log-normal, mean-one on the log scale's exponent).
    covariates
        Donor-level covariates: ``{"sex": ["F", "M"]}`` cycles the values within each condition.
    effects
        Planted in the target cells: dicts with ``cell_type``, ``kind`` and its parameters.
        ``kind='mean'``: ``n_genes`` genes (default 15) times ``fold`` (2). ``'spread'``:
        ``n_genes`` (10) genes times a per-cell log-normal factor of log-sd ``log_sd`` (1.0) and
        mean one (the mean is kept, the spread grows); ``shared=True`` uses one factor per cell
        for all the genes (a co-expression change). ``'substate'``: a ``fraction`` (0.2) of the
        type's target cells carry ``n_genes`` (20) genes times ``fold`` (4). Genes are drawn at
        random among the ``gene_pool`` (200) most expressed of the type, distinct across effects,
        never mitochondrial (``MT-``: they would move cells across the QC's filter).
    random_state
        Seed or Generator: the same seed gives the same study.

    Returns
    -------
    AnnData (cells x genes) of Poisson counts (CSR, float32) with obs ``cell_type``, ``donor``,
    ``condition`` (``target_label`` / ``background_label``) and the covariates;
    ``uns['simulation']``: the parameters, the donor table (``donors``: donor, condition,
    covariates, as columns) and every planted effect with its genes (``effects``).

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> from scontrast.datasets import simulate_study
    >>> rng = np.random.default_rng(0)
    >>> obs = pd.DataFrame({"cell_type": np.repeat(["B", "T"], 60)}, index=[f"c{i}" for i in range(120)])
    >>> cells = ad.AnnData(rng.poisson(3.0, size=(120, 50)).astype(np.float32), obs=obs,
    ...                    var=pd.DataFrame(index=[f"g{i}" for i in range(50)]))
    >>> study = simulate_study(cells, n_target=3, n_background=3, cells_per_donor=10, gene_pool=20,
    ...                        effects=[{"cell_type": "T", "kind": "mean", "n_genes": 5}], random_state=0)
    >>> study.obs["donor"].nunique(), sorted(study.obs["condition"].unique())
    (6, ['case', 'control'])
    >>> len(study.uns["simulation"]["effects"]["0"]["genes"])   # the planted genes: the answer to find
    5
    """
    if cell_type not in adata.obs:
        raise ScontrastError(f"obs column '{cell_type}' (cell_type) is absent; have {list(adata.obs.columns)[:20]}")
    if n_target < 1 or (not paired and n_background < 1):
        raise ScontrastError("n_target and n_background must be at least 1")
    if donor_sd < 0:
        raise ScontrastError(f"donor_sd must be >= 0, got {donor_sd}")
    rng = np.random.default_rng(random_state)
    counts = adata.X if layer is None else adata.layers[layer]
    counts = sp.csr_matrix(counts, dtype=np.float64)
    types_of_cell = adata.obs[cell_type].astype(str).to_numpy()
    types = pd.Index(sorted(set(types_of_cell)))
    effects = _check_effects(effects, types)
    donors = _donor_table(n_target, n_background, paired, covariates or {})
    n_genes = adata.n_vars

    # donor-condition pairs: unpaired one per donor; paired two per donor
    units = ([(d, "target") for d in donors.donor] + [(d, "background") for d in donors.donor]) if paired else \
        list(zip(donors.donor, donors.condition))
    factors = {d: np.exp(rng.normal(0.0, donor_sd, n_genes)) for d in donors.donor}

    planted = _plant_genes(counts, types_of_cell, effects, rng, gene_pool, adata.var_names)
    rows, obs = [], []
    for ct in types:
        pool = np.flatnonzero(types_of_cell == ct)
        picks = _share_out(pool, len(units), cells_per_donor, rng)
        for (donor, cond), idx in zip(units, picks):
            rows.append((idx, donor, cond, ct))
    blocks, obs_rows = [], []
    for idx, donor, cond, ct in rows:
        mean = counts[idx].multiply(factors[donor][None, :]).tocsr()
        if cond == "target":
            mean = _apply_effects(mean, ct, effects, planted, rng)
        blocks.append(mean)
        obs_rows.append(pd.DataFrame({"cell_type": ct, "donor": donor, "condition": cond}, index=range(len(idx))))
    mean = sp.vstack(blocks, format="csr")
    mean.data = rng.poisson(mean.data).astype(np.float64)
    mean.eliminate_zeros()
    obs = pd.concat(obs_rows, ignore_index=True)
    obs["condition"] = obs["condition"].map({"target": target_label, "background": background_label})
    for col in (covariates or {}):
        obs[col] = obs["donor"].map(donors.set_index("donor")[col])
    for col in obs.columns:
        obs[col] = pd.Categorical(obs[col].astype(str))
    obs.index = [f"cell{i}" for i in range(obs.shape[0])]
    out = ad.AnnData(X=mean.astype(np.float32), obs=obs, var=pd.DataFrame(index=adata.var_names.copy()))
    out.uns["simulation"] = {
        "params": {"n_target": n_target, "n_background": n_background if not paired else n_target,
                   "paired": bool(paired), "cells_per_donor": -1 if cells_per_donor is None else cells_per_donor,
                   "donor_sd": float(donor_sd), "gene_pool": gene_pool, "target_label": target_label,
                   "background_label": background_label},
        "donors": {col: donors[col].astype(str).to_numpy() for col in donors.columns},
        "effects": {str(i): {**{k: (str(v) if isinstance(v, str) else v) for k, v in eff.items()},
                             "genes": np.asarray(adata.var_names[planted[i]], dtype=str)}
                    for i, eff in enumerate(effects)},
    }
    return out


def _share_out(pool: np.ndarray, n_units: int, cells_per_donor: int | None, rng) -> list[np.ndarray]:
    """The real cells each unit (donor, condition) takes of one type."""
    if cells_per_donor is not None:
        return [rng.choice(pool, cells_per_donor, replace=True) for _ in range(n_units)]
    return np.array_split(rng.permutation(pool), n_units)


def _plant_genes(counts, types_of_cell, effects, rng, gene_pool: int, var_names) -> list[np.ndarray]:
    """Each effect's genes: drawn among the ``gene_pool`` most expressed genes of its type, distinct across effects."""
    # mitochondrial genes are never planted: shifting them would move cells across the QC's mito filter
    used: set[int] = {i for i, name in enumerate(map(str, var_names)) if name.upper().startswith("MT-")}
    out = []
    for eff in effects:
        mask = types_of_cell == eff["cell_type"]
        means = np.asarray(counts[mask].mean(axis=0)).ravel()
        top = [g for g in np.argsort(-means, kind="stable")[:gene_pool] if g not in used]
        if len(top) < eff["n_genes"]:
            raise ScontrastError(f"effects: {eff['n_genes']} genes asked of {eff['cell_type']!r}, {len(top)} free")
        genes = np.sort(rng.choice(top, eff["n_genes"], replace=False))
        used.update(genes.tolist())
        out.append(genes)
    return out


def _apply_effects(mean: sp.csr_matrix, ct: str, effects, planted, rng) -> sp.csr_matrix:
    """``mean`` (cells x genes) with every effect planted in cell type ``ct`` applied."""
    mean = mean.tolil(copy=True) if any(e["cell_type"] == ct for e in effects) else mean
    n = mean.shape[0]
    for eff, genes in zip(effects, planted):
        if eff["cell_type"] != ct:
            continue
        block = mean[:, genes].toarray()
        if eff["kind"] == "mean":
            block *= eff["fold"]
        elif eff["kind"] == "spread":
            s = eff["log_sd"]
            shape = (n, 1) if eff["shared"] else (n, genes.size)
            block *= np.exp(rng.normal(-s * s / 2, s, shape))  # mean-one log-normal: the mean is kept
        else:
            carriers = rng.random(n) < eff["fraction"]
            block[carriers] *= eff["fold"]
        mean[:, genes] = block
    return mean.tocsr()
