"""A whole study in one call: design check, donor-level test per split, global p, effect, ranking."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats as sps

from ..core import ScontrastError
from ..donor_spread import unit_dispersion, unit_tail
from ..donor_test import FAMILIES
from ._design import design_table
from ._effect import jackknife_interval, unit_subsample
from ._split import split_folders, subset_mask
from ._test import combine_parts, donor_features, min_p, normalise, part_statistics, rank_pvalues, study_labellings

__all__ = ["StudyResult", "run_study", "bh_adjust", "shape_genes", "STUDY_COLUMNS"]

log = logging.getLogger("scontrast.study")

#: the counts of a gene expected in a donor's cells below which the test does not read its shape (shape_genes)
MIN_SHAPE_COUNT = 40.0

#: each family of the study test's own p-value, in the order of the families
PART_COLUMNS = [f"pvalue_{family}" for family in FAMILIES]
STUDY_COLUMNS = ["split", "value", "status", "n_target_replicates", "n_background_replicates", "n_target_cells",
                 "n_background_cells", "pvalue", "pvalue_floor", "padj", *PART_COLUMNS, "effect", "effect_low",
                 "effect_high", "top_genes", "n_pseudobulk_genes", "driven_by", "rank", "note"]


@dataclass
class StudyResult:
    """What :func:`run_study` finds.

    Attributes
    ----------
    table : DataFrame, one row per split (``STUDY_COLUMNS``), ranked splits first.
    global_pvalue : float
        "Any split differs": min-p over the tested splits under the shared relabellings.
    design : DataFrame
        The design check (:func:`scontrast.study.design_table`).
    n_labellings, exact
        The shared relabellings of the study's donors and whether every one is listed.
    findings : list of str
        Plain sentences: the global answer and every split whose floor keeps it from the
        corrected level.
    params : dict

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> from scontrast.datasets import simulate_study
    >>> from scontrast.study import run_study
    >>> rng = np.random.default_rng(0)
    >>> obs = pd.DataFrame({"cell_type": np.repeat(["B", "T"], 60)}, index=[f"c{i}" for i in range(120)])
    >>> cells = ad.AnnData(rng.poisson(3.0, size=(120, 50)).astype(np.float32), obs=obs,
    ...                    var=pd.DataFrame(index=[f"g{i}" for i in range(50)]))
    >>> study = simulate_study(cells, n_target=4, n_background=4, cells_per_donor=15, gene_pool=20, random_state=0)
    >>> res = run_study(study, groupby="condition", target=["case"], background=["control"], replicate="donor",
    ...                 split_by="cell_type", n_genes=30)
    >>> type(res).__name__, res.table.shape[0], res.design.shape[0]   # a row per split; a row per split and group
    ('StudyResult', 2, 4)
    >>> res.findings[0].startswith("global p-value")
    True
    """

    table: pd.DataFrame
    global_pvalue: float
    design: pd.DataFrame
    n_labellings: int
    exact: bool
    findings: list[str] = field(default_factory=list)
    params: dict = field(default_factory=dict)


def bh_adjust(pvalues) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (n,) of ``pvalues`` (n,).

    Examples
    --------
    >>> from scontrast.study import bh_adjust
    >>> bh_adjust([0.01, 0.04, 0.03]).tolist()                   # p * n / rank, then monotone from the largest
    [0.03, 0.04, 0.04]
    """
    p = np.asarray(pvalues, dtype=float)
    return sps.false_discovery_control(p, method="bh") if p.size else p


def _rows(adata, idx: np.ndarray, layer: str | None):
    """The counts of rows ``idx`` (sorted) of ``adata``: for a backed file only those rows are read."""
    X = adata.X if layer is None else adata.layers[layer]
    return X[idx]


@dataclass
class _Split:
    value: str
    folder: str
    donors: list  # unpaired: every donor of the split; paired: donors with both groups
    target_of_donor: np.ndarray
    units: pd.DataFrame  # unit rows: donor, is_target
    features: np.ndarray  # (U, 2G)
    noise: np.ndarray  # (U, 2G)
    genes: np.ndarray  # (G,)
    dispersion: np.ndarray  # (U, G): the test's third family (scontrast.donor_spread.unit_dispersion)
    tail: np.ndarray  # (U, G): the fourth, the share of cells in the gene's upper tail (scontrast.donor_spread.unit_tail)
    shape_genes: np.ndarray  # (G,) bool: the genes whose sd, dispersion and tail the test reads (shape_genes())
    effect_features: np.ndarray | None = None  # (U, 2G): the effect's profiles; None: ``features`` (every cell)
    effect_noise: np.ndarray | None = None  # (U, 2G); None: ``noise``

    def __post_init__(self):
        if self.effect_features is None:
            self.effect_features, self.effect_noise = self.features, self.noise


def shape_genes(mean_count: np.ndarray, cells_per_unit: float, min_count: float, at_least: int) -> np.ndarray:
    """The genes (G,) bool whose shape (sd, dispersion, upper tail) the study test reads: those expected to be
    counted at least ``min_count`` times in a donor's cells (their mean count per cell ``mean_count`` (G,) over the
    split's cells times the units' median number of cells ``cells_per_unit``), and never fewer than the
    ``at_least`` most expressed.

    Independent filtering (Bourgon, Gentleman & Huber, PNAS 2010): in a donor with few counts of a gene, the
    gene's spread is mostly Poisson noise, so its moderated t carries no power but still competes for the top
    ``top_k``; more cells per donor make rarer genes measurable. The filter uses every cell of the split whatever
    its label (a relabelling moves no cell and keeps the units' sizes), so each relabelling sees the same genes
    and the test stays exact.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.study import shape_genes
    >>> shape_genes(np.array([2.0, 0.1, 0.7, 0.3]), 80, 40, 1).tolist()       # 80 cells: 0.5 counts per cell
    [True, False, True, False]
    >>> shape_genes(np.array([2.0, 0.1, 0.7, 0.3]), 300, 40, 1).tolist()      # 300 cells: 0.13
    [True, False, True, True]
    >>> shape_genes(np.array([2.0, 0.1, 0.2, 0.3]), 80, 40, 2).tolist()       # the two most expressed at least
    [True, False, False, True]
    """
    mean_count = np.asarray(mean_count, dtype=float)
    keep = mean_count * cells_per_unit >= min_count
    keep[np.argsort(-mean_count, kind="stable")[:at_least]] = True
    return keep


def _split_data(adata, layer, cells: pd.DataFrame, value: str, folder: str, donors: list, *, paired: bool,
                n_genes: int, min_shape_count: float = MIN_SHAPE_COUNT, min_shape_genes: int = 20,
                effect_cells: int | None = None, rng: np.random.Generator | None = None) -> _Split:
    """Profiles of one split's units from its rows only (the effect's from at most ``effect_cells`` cells per unit,
    drawn with ``rng``, of the same genes)."""
    idx = np.sort(cells.index.to_numpy())
    cells = cells.loc[idx]
    counts = _rows(adata, idx, layer)
    genes, cpm, logn = normalise(counts, n_genes)  # label-free: the most expressed
    total = np.asarray(counts.sum(axis=1)).ravel()
    if paired:
        units = pd.DataFrame([(d, t) for d in donors for t in (True, False)], columns=["donor", "is_target"])
    else:
        tgt = cells.groupby("donor", observed=True)["is_target"].first()
        units = pd.DataFrame({"donor": donors, "is_target": [bool(tgt[d]) for d in donors]})
    key = cells["donor"].astype(str) + np.where(cells["is_target"], "|t", "|b")
    unit_keys = (units["donor"].astype(str) + np.where(units["is_target"], "|t", "|b")).tolist()
    feats, noise = donor_features(cpm, logn, key.to_numpy(), unit_keys)
    # each cell's normalised value of one count (per 10,000): the Poisson part of the dispersion
    disp = unit_dispersion(cpm / 100.0, 1e4 / np.where(total > 0, total, 1.0), key.to_numpy(), unit_keys)
    tail = unit_tail(cpm / 100.0, key.to_numpy(), unit_keys)
    target_of_donor = units.groupby("donor", sort=False)["is_target"].first().to_numpy() if not paired else \
        np.zeros(len(donors), bool)
    var_names = np.asarray(adata.var_names)[genes]
    mean_count = np.asarray(counts[:, genes].mean(axis=0)).ravel()
    cells_per_unit = float(np.median(key.value_counts().reindex(unit_keys, fill_value=0).to_numpy()))
    effect_feats, effect_noise = feats, noise
    if effect_cells is not None:
        kept = unit_subsample(key.to_numpy(), effect_cells, rng)
        effect_feats, effect_noise = donor_features(cpm[kept], logn[kept], key.to_numpy()[kept], unit_keys)
    return _Split(value, folder, list(donors), target_of_donor, units, feats, noise, var_names, disp, tail,
                  shape_genes(mean_count, cells_per_unit, min_shape_count, min_shape_genes), effect_feats, effect_noise)


def _test_features(split: _Split, paired: bool) -> np.ndarray:
    """The rows the test relabels (log-CPM, sd, dispersion, tail): unpaired each donor's, paired each donor's
    difference."""
    f = np.hstack([split.features, split.dispersion, split.tail])
    if not paired:
        return f
    t = split.units["is_target"].to_numpy()
    return f[t] - f[~t]


def _top_genes(split: _Split, paired: bool, k: int = 5) -> str:
    """The ``k`` distinct genes with the largest observed |t| of either profile, strongest first.

    A gene is named once with what changed: both parts (``(mean and sd)``) when its log-CPM and its
    spread are both among the ``k`` largest |t| of all features, else its stronger part (bare for
    the mean, ``(sd)`` for the spread).
    """
    from ._test import paired_t, unpaired_t

    lab = np.zeros((1, len(split.donors)), bool) if paired else split.target_of_donor[None, :]
    t = np.abs((paired_t if paired else unpaired_t)(_test_features(split, paired), lab, _kinds(split))[0])
    t[~_tested(split)] = 0.0  # a shape the test does not read is not named
    G = split.genes.size
    # a change of spread or of the upper tail: the largest of the gene's sd, dispersion and tail t
    return _named_parts(split.genes, t[:G], t[G:].reshape(-1, G).max(axis=0), k)


def _named_parts(genes: np.ndarray, t_mean: np.ndarray, t_sd: np.ndarray, k: int) -> str:
    """``'A, B (sd), C (mean and sd)'``: the ``k`` genes (G,) of largest max(|t_mean|, |t_sd|) (each (G,)).

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.study._study import _named_parts
    >>> genes = np.array(["GFER", "CD14", "LYZ"])
    >>> _named_parts(genes, np.array([9.0, 1.0, 5.0]), np.array([8.0, 6.0, 0.5]), 2)   # GFER's sd 2nd of all
    'GFER (mean and sd), CD14 (sd)'
    >>> _named_parts(genes, np.array([9.0, 1.0, 5.0]), np.array([4.0, 6.0, 0.5]), 2)   # GFER's sd 4th: its mean
    'GFER, CD14 (sd)'
    """
    G = genes.size
    t = np.concatenate([t_mean, t_sd])
    among = np.zeros(2 * G, bool)
    among[np.argsort(-t, kind="stable")[:k]] = True
    order = np.argsort(-np.maximum(t_mean, t_sd), kind="stable")[:k]
    names = []
    for i in order:
        both = among[i] and among[G + i]
        names.append(f"{genes[i]}{' (mean and sd)' if both else ' (sd)' if t_sd[i] > t_mean[i] else ''}")
    return ", ".join(names)


def _kinds(split: _Split) -> np.ndarray:
    """0 for the log-CPM features, 1 for the sds, 2 for the dispersions, 3 for the tails: each kind has its own
    variance prior."""
    return np.repeat([0, 1, 2, 3], split.genes.size)


def _tested(split: _Split) -> np.ndarray:
    """The test's features (4G,) bool whose t enter its families' top ``top_k``: every location; the sd, dispersion
    and tail of the split's ``shape_genes``."""
    return np.concatenate([np.ones(split.genes.size, bool), np.tile(split.shape_genes, 3)])


def _split_test(split: _Split, labellings: np.ndarray, *, paired: bool, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """The split's p-value (L,) as each labelling would get it, and each family's own p-value (n_families,) of the
    observed labelling (row 0)."""
    T = part_statistics(_test_features(split, paired), labellings, paired=paired, top_k=top_k, kinds=_kinds(split),
                        tested=_tested(split))
    parts = np.array([rank_pvalues(T[:, j])[0] for j in range(T.shape[1])])
    return rank_pvalues(combine_parts(T, labellings, paired=paired)), parts


def _driven_by(split: _Split, pvalues: np.ndarray, j: int, *, alpha, paired, blocks_of_donor, top_k, max_labellings,
               rng) -> str:
    """Donors whose removal alone takes called split ``j`` out of the study's Benjamini-Hochberg calls: its p-value
    recomputed without the donor, Benjamini-Hochberg redone with the other splits' observed ``pvalues`` (S,)."""
    out = []
    for i, d in enumerate(split.donors):
        keep = np.arange(len(split.donors)) != i
        tod = split.target_of_donor[keep]
        if not paired and min(tod.sum(), (~tod).sum()) < 2:
            out.append(str(d))
            continue
        blocks = None if blocks_of_donor is None else np.array([blocks_of_donor[x] for x in np.array(split.donors)[keep]])
        labs, _ = study_labellings(tod, paired=paired, blocks=blocks, max_labellings=max_labellings, random_state=rng)
        unit_keep = (split.units["donor"] != d).to_numpy()
        reduced = _Split(split.value, split.folder, list(np.array(split.donors)[keep]), tod,
                         split.units[unit_keep].reset_index(drop=True), split.features[unit_keep],
                         split.noise[unit_keep], split.genes, split.dispersion[unit_keep], split.tail[unit_keep],
                         split.shape_genes)
        without = pvalues.copy()
        without[j] = _split_test(reduced, labs, paired=paired, top_k=top_k)[0][0]
        if bh_adjust(without)[j] >= alpha:
            out.append(str(d))
    return ", ".join(out)


def run_study(adata, *, groupby: str, target: Sequence[str], background: Sequence[str], replicate: str,
              split_by: str, paired: bool = False, block: str | None = None, covariates: Sequence[str] = (),
              subset: Mapping[str, Sequence] | None = None, layer: str | None = None, n_genes: int = 300,
              top_k: int = 10, min_shape_count: float = MIN_SHAPE_COUNT, effect_cells: int | None = None,
              max_labellings: int = 2000, alpha: float = 0.05, min_cells_per_group: int = 10,
              min_cells_per_replicate: int = 3, random_state=0) -> StudyResult:
    """Which splits (cell types) differ between target and background donors, how much, and which genes.

    Parameters
    ----------
    adata
        Cells x genes with raw counts in ``X`` (or ``layer``); may be backed (``read_h5ad(...,
        backed='r')``): each split's rows are then read alone.
    groupby, target, background
        The condition column and its target and background values.
    replicate
        obs column of the donors: the unit of the test, the effect's interval and ``driven_by``.
    split_by
        obs column making one contrast per value.
    paired
        Every donor gives cells to both groups: relabellings swap a donor's two labels.
    block
        obs column: relabellings keep each block's count of target donors (unpaired).
    covariates
        obs columns checked for confounding with the condition (the design check).
    subset
        ``{column: [values]}``: only these cells form the study.
    n_genes, top_k
        The test's genes per split (the most expressed, label-free) and the number of largest
        squared t statistics its statistic averages.
    min_shape_count
        The sd, dispersion and tail families read only the genes expected at least this many times in a donor's
        cells (mean count per cell over the split times the donors' median number of cells; and at least the
        ``2 * top_k`` most expressed): with fewer, a gene's spread is mostly Poisson noise
        (:func:`shape_genes`, label-free, so the test stays exact). 0 reads every gene.
    effect_cells
        The effect reads at most this many cells of each donor (each donor and group when paired), drawn at random
        (:func:`unit_subsample`): every split's effect then carries the sampling noise of the same number of
        cells, so that its law under no difference is the same in splits of any larger size, at the price of
        the precision of the cells left out. None (default): every cell, the most precise effect, whose centre
        does not move with the cells per donor but whose spread shrinks with more. The test reads every cell
        either way.
    max_labellings
        Every relabelling of the study's donors when there are at most this many, else this many
        at random (the observed first).
    alpha
        The level of the calls (Benjamini-Hochberg across the tested splits).

    Returns
    -------
    :class:`StudyResult`

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> from scontrast.datasets import simulate_study
    >>> from scontrast.study import run_study
    >>> rng = np.random.default_rng(0)
    >>> obs = pd.DataFrame({"cell_type": np.repeat(["B", "T"], 60)}, index=[f"c{i}" for i in range(120)])
    >>> cells = ad.AnnData(rng.poisson(3.0, size=(120, 50)).astype(np.float32), obs=obs,
    ...                    var=pd.DataFrame(index=[f"g{i}" for i in range(50)]))
    >>> study = simulate_study(cells, n_target=4, n_background=4, cells_per_donor=15, gene_pool=20,
    ...                        effects=[{"cell_type": "T", "kind": "mean", "n_genes": 5, "fold": 4}], random_state=0)
    >>> res = run_study(study, groupby="condition", target=["case"], background=["control"], replicate="donor",
    ...                 split_by="cell_type", n_genes=30)
    >>> res.table.loc[0, "split"], res.n_labellings, res.exact    # T (the planted effect) ranks first; 8 choose 4
    ('T', 70, True)
    >>> planted = set(study.uns["simulation"]["effects"]["0"]["genes"])
    >>> len(planted & set(res.table.loc[0, "top_genes"].split(", "))) >= 3
    True
    """
    if effect_cells is not None and (isinstance(effect_cells, bool) or not isinstance(effect_cells, (int, np.integer))
                                     or effect_cells < 2):
        raise ScontrastError(f"effect_cells: {effect_cells!r} is not a number of cells of at least 2 (a donor's "
                             "spread needs two)")
    obs = adata.obs
    mask = subset_mask(obs, subset)
    if not mask.any():
        raise ScontrastError("subset: no cell left")
    obs = obs.loc[mask]
    folders = split_folders(pd.unique(obs[split_by].astype(str)))
    design = design_table(obs, groupby=groupby, target=target, background=background, replicate=replicate,
                          split_by=split_by, folders=folders, paired=paired, covariates=covariates, block=block,
                          min_cells_per_group=min_cells_per_group, min_cells_per_replicate=min_cells_per_replicate,
                          alpha=alpha)
    labels = obs[groupby].astype(str)
    cells = pd.DataFrame({"donor": obs[replicate].astype(str).to_numpy(),
                          "is_target": labels.isin(list(map(str, target))).to_numpy(),
                          "in_groups": labels.isin(list(map(str, target)) + list(map(str, background))).to_numpy(),
                          "split": obs[split_by].astype(str).to_numpy()}, index=np.flatnonzero(mask))
    cells = cells[cells["in_groups"]]
    rng = np.random.default_rng(random_state)
    # a child stream: drawing the effect's cells leaves the relabellings of the test as they are without it
    effect_rng = rng.spawn(1)[0] if effect_cells is not None else None
    effect_cells = None if effect_cells is None else int(effect_cells)
    splits = []
    for value, folder in folders.items():
        rows = design[design["value"] == value]
        if not rows["testable"].iloc[0]:
            continue
        donors = sorted(set(",".join(rows["donors"]).split(",")) - {""})
        sc = cells[(cells["split"] == value) & cells["donor"].isin(donors)]
        splits.append(_split_data(adata, layer, sc, value, folder, donors, paired=paired, n_genes=n_genes,
                                  min_shape_count=min_shape_count, min_shape_genes=2 * top_k,
                                  effect_cells=effect_cells, rng=effect_rng))
    table = design_rows(design)
    if not splits:
        table["rank"] = np.nan
        return StudyResult(table[STUDY_COLUMNS], float("nan"), design, 0, True,
                           ["no split can be tested (design.tsv says why)"])
    study_donors = sorted({d for s in splits for d in s.donors})
    tgt_of = cells.groupby("donor")["is_target"].first()
    target_of_donor = np.zeros(len(study_donors), bool) if paired else tgt_of.reindex(study_donors).to_numpy(bool)
    blocks_of_donor = None
    if block is not None and not paired:
        blocks_of_donor = obs.assign(_d=obs[replicate].astype(str)).groupby("_d", observed=True)[block].first() \
            .astype(str).to_dict()
    blocks = None if blocks_of_donor is None else np.array([blocks_of_donor[d] for d in study_donors])
    labellings, exact = study_labellings(target_of_donor, paired=paired, blocks=blocks,
                                         max_labellings=max_labellings, random_state=rng)
    position = {d: i for i, d in enumerate(study_donors)}
    tests = [_split_test(s, labellings[:, [position[d] for d in s.donors]], paired=paired, top_k=top_k) for s in splits]
    P = np.column_stack([p for p, _ in tests])
    global_p = min_p(P)
    padj = bh_adjust(P[0])
    called = padj < alpha
    for j, s in enumerate(splits):
        effect, low, high = jackknife_interval(s.effect_features, s.effect_noise, s.units["is_target"].to_numpy(),
                                               s.units["donor"].to_numpy())
        at = table["value"] == s.value
        table.loc[at, ["status", "pvalue", "pvalue_floor", "padj", *PART_COLUMNS, "effect", "effect_low",
                       "effect_high"]] = ["tested", P[0, j], P[:, j].min(), padj[j], *tests[j][1], effect, low, high]
        table.loc[at, "top_genes"] = _top_genes(s, paired)
        if called[j]:
            table.loc[at, "driven_by"] = _driven_by(s, P[0], j, alpha=alpha, paired=paired, blocks_of_donor=blocks_of_donor,
                                                    top_k=top_k, max_labellings=max_labellings, rng=rng)
    table, findings = rank_and_say(table, global_p, alpha=alpha, n_labellings=labellings.shape[0], exact=exact)
    if effect_cells is not None:
        findings.append(f"each split's effect reads at most {effect_cells} cells of each donor (effect_cells), drawn at "
                        "random with the seed; its test reads every cell")
    params = {"groupby": groupby, "target": list(map(str, target)), "background": list(map(str, background)),
              "replicate": replicate, "split_by": split_by, "paired": bool(paired), "block": str(block),
              "covariates": list(covariates), "n_genes": n_genes, "top_k": top_k,
              "min_shape_count": min_shape_count, "effect_cells": effect_cells, "max_labellings": max_labellings,
              "alpha": alpha,
              "statistic": "mean of the top_k squared moderated t over per-donor gene means, and the sds, dispersions and "
                           "upper-tail shares of the genes expected min_shape_count times in a donor's cells"}
    return StudyResult(table, global_p, design, int(labellings.shape[0]), bool(exact), findings, params)


def design_rows(design: pd.DataFrame) -> pd.DataFrame:
    """The study table's rows from the design check: counts filled, results empty, untestable splits skipped.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from scontrast.study import design_rows, design_table
    >>> obs = pd.DataFrame({"condition": np.repeat(["case", "control"], 40),
    ...                     "donor": np.repeat([f"D{i}" for i in range(8)], 10),
    ...                     "cell_type": np.tile(np.repeat(["B", "T"], 5), 8)})
    >>> design = design_table(obs, groupby="condition", target=["case"], background=["control"], replicate="donor",
    ...                       split_by="cell_type")
    >>> design_rows(design)[["split", "status", "n_target_replicates", "n_background_replicates"]].values.tolist()
    [['B', 'tested', 4, 4], ['T', 'tested', 4, 4]]
    """
    rows = []
    for value, d in design.groupby("value", sort=True):
        t = d[d["group"] == "target"].iloc[0]
        b = d[d["group"] == "background"].iloc[0]
        rows.append({"split": t["split"], "value": value,
                     "status": "tested" if t["testable"] else f"skipped: {t['verdict'].removeprefix('not testable: ')}",
                     "n_target_replicates": int(t["n_donors"]), "n_background_replicates": int(b["n_donors"]),
                     "n_target_cells": int(t["n_cells"]), "n_background_cells": int(b["n_cells"]),
                     "pvalue": np.nan, "pvalue_floor": float(t["pvalue_floor"]), "padj": np.nan,
                     **dict.fromkeys(PART_COLUMNS, np.nan), "effect": np.nan,
                     "effect_low": np.nan, "effect_high": np.nan, "top_genes": "", "n_pseudobulk_genes": np.nan,
                     "driven_by": "", "rank": np.nan, "note": ""})
    return pd.DataFrame(rows, columns=STUDY_COLUMNS)


def _evidence_order(tested: pd.DataFrame) -> pd.Index:
    """The rows of ``tested`` by padj, p-value, their parts' p-values sorted (compared in turn), then effect."""
    present = [c for c in PART_COLUMNS if c in tested]
    parts = np.sort(tested[present].to_numpy(float), axis=1) if present else np.empty((len(tested), 0))
    # np.lexsort: the last key is the first compared; stable, so equal rows keep the table's order
    keys = [-tested["effect"].to_numpy(float), *parts.T[::-1], tested["pvalue"].to_numpy(float),
            tested["padj"].to_numpy(float)]
    return tested.index[np.lexsort(keys)]


def _through(row) -> str:
    """`` (strongest: location, spread)``: the families at a called split's smallest part p-value."""
    parts = {c.removeprefix("pvalue_"): getattr(row, c, np.nan) for c in PART_COLUMNS}
    parts = {k: v for k, v in parts.items() if np.isfinite(v)}
    if not parts:
        return ""
    low = min(parts.values())
    return f" (strongest: {', '.join(k for k, v in parts.items() if v <= low)})"


def rank_and_say(table: pd.DataFrame, global_p: float, *, alpha: float, n_labellings: int, exact: bool):
    """Rank the tested splits and the plain sentences a reader needs.

    By padj, then p-value, then the families' own p-values (``PART_COLUMNS``) smallest first, compared in
    turn (the order in which the test's min-p ranks the relabellings, so two splits at the p floor are told
    apart by their other parts), then effect.

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> from scontrast.datasets import simulate_study
    >>> from scontrast.study import rank_and_say, run_study
    >>> rng = np.random.default_rng(0)
    >>> obs = pd.DataFrame({"cell_type": np.repeat(["B", "T"], 60)}, index=[f"c{i}" for i in range(120)])
    >>> cells = ad.AnnData(rng.poisson(3.0, size=(120, 50)).astype(np.float32), obs=obs,
    ...                    var=pd.DataFrame(index=[f"g{i}" for i in range(50)]))
    >>> study = simulate_study(cells, n_target=4, n_background=4, cells_per_donor=15, gene_pool=20,
    ...                        effects=[{"cell_type": "T", "kind": "mean", "n_genes": 5, "fold": 4}], random_state=0)
    >>> res = run_study(study, groupby="condition", target=["case"], background=["control"], replicate="donor",
    ...                 split_by="cell_type", n_genes=30)
    >>> table, findings = rank_and_say(res.table, res.global_pvalue, alpha=0.05, n_labellings=res.n_labellings,
    ...                                exact=res.exact)
    >>> table["split"].tolist(), table["rank"].tolist()
    (['T', 'B'], [1.0, 2.0])
    """
    table = table.copy()
    tested = table["status"] == "tested"
    order = _evidence_order(table[tested])
    table.loc[order, "rank"] = np.arange(1, order.size + 1)
    m = int(tested.sum())
    findings = []
    called = table[tested & (table["padj"] < alpha)].sort_values("rank")
    how = "every relabelling" if exact else f"{n_labellings} random relabellings"
    findings.append(
        f"global p-value (any of the {m} tested splits differs; min-p over {how} of the donors, shared by every "
        f"split): {global_p:.3g}. " + (f"{len(called)} split(s) differ at Benjamini-Hochberg level {alpha:g}: "
                                       + ", ".join(f"{r.value}{_through(r)}" for r in called.itertuples())
                                       if len(called) else f"no split differs at Benjamini-Hochberg level {alpha:g}."))
    for i in table.index[tested]:
        floor = float(table.at[i, "pvalue_floor"])
        note = ""
        if floor > alpha:
            note = f"its smallest possible p-value ({floor:.3g}) is above {alpha:g}: with these donors it cannot be found"
        elif floor > alpha / m and table.at[i, "padj"] >= alpha:
            note = (f"its smallest possible p-value ({floor:.3g}) is above {alpha:g}/{m} = {alpha / m:.3g}: "
                    "with these donors it can be found only together with other splits")
        if table.at[i, "driven_by"]:
            note = "; ".join(filter(None, [note, f"the call rests on donor(s) {table.at[i, 'driven_by']}"]))
        table.at[i, "note"] = note
        if note:
            findings.append(f"{table.at[i, 'value']}: {note}.")
    table = pd.concat([table.loc[order], table[~tested]])
    return table.reset_index(drop=True), findings
