"""The design check of a study, before any compute: donors, cells, relabellings, confounding.

It reads the cells' annotations only. Per split and group it counts the donors and their cells,
names the donors a contrast would drop (fewer than ``min_cells_per_replicate`` cells in a group;
paired: missing a group), counts the distinct relabellings of donors the split's tests can use
(within blocks when a block is declared) and the smallest p-value they allow, and says in plain
words whether the split can be tested. A covariate or block that determines the condition is an
error naming it; a strongly associated one is a warning.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..core import ScontrastError, ScontrastWarning

__all__ = ["check_confounding", "count_labellings", "design_table", "STRONG_ASSOCIATION"]

STRONG_ASSOCIATION = 0.5  # Cramer's V (categorical) or |r| (numeric) over the units that warns (3 of 4 donors alike)


def _cramers_v(a: pd.Series, b: pd.Series) -> float:
    table = pd.crosstab(a, b).to_numpy(dtype=float)
    if min(table.shape) < 2:
        return 0.0
    n = table.sum()
    expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / n
    chi2 = float(((table - expected) ** 2 / expected).sum())
    return math.sqrt(chi2 / (n * (min(table.shape) - 1)))


def check_confounding(units: pd.DataFrame, columns: Sequence[str], *, role: str = "covariate") -> list[str]:
    """Raise if a column determines the condition; the warnings of strongly associated ones.

    Parameters
    ----------
    units : DataFrame, one row per (donor, condition) unit
        ``condition`` (``'target'``/``'background'``) and the ``columns``, each constant within
        a unit (the value of its cells).
    columns
        Covariates or the block, by obs column name.

    Returns
    -------
    The warning messages issued (``ScontrastWarning``), one per strongly associated column.

    Examples
    --------
    >>> import pandas as pd
    >>> import scontrast as sct
    >>> from scontrast.study import check_confounding
    >>> units = pd.DataFrame({"condition": ["target"] * 3 + ["background"] * 3,
    ...                       "sex": ["F", "M", "F", "M", "F", "M"], "batch": ["b1"] * 3 + ["b2"] * 3})
    >>> check_confounding(units, ["sex"])                        # balanced: nothing to say
    []
    >>> try:
    ...     check_confounding(units, ["batch"])                  # each batch holds one condition only
    ... except sct.ScontrastError as err:
    ...     print(str(err)[:38])
    covariate 'batch' determines the condi
    """
    said = []
    both = units["condition"].nunique() == 2
    for col in columns:
        values = units[col]
        numeric = pd.api.types.is_numeric_dtype(values) and values.nunique() > 2
        if numeric:
            r = abs(float(np.corrcoef(values.astype(float), units["condition"] == "target")[0, 1])) \
                if values.nunique() > 1 and both else 0.0
            if r >= STRONG_ASSOCIATION:
                said.append(f"{role} '{col}' is strongly associated with the condition across donors (|r| = {r:.2f}): "
                            "its effect and the condition's are hard to tell apart")
            continue
        per_value = units.groupby(values.astype(str), observed=True)["condition"].nunique()
        if both and values.nunique() >= 2 and (per_value == 1).all():
            raise ScontrastError(f"{role} '{col}' determines the condition (each of its values holds one condition "
                                 "only): its effect and the condition's cannot be told apart; drop it or rebalance")
        if role == "block" and both and (per_value == 1).all():
            raise ScontrastError(f"block '{col}' holds a single condition: no relabelling within it exists")
        v = _cramers_v(values.astype(str), units["condition"]) if both else 0.0
        if v >= STRONG_ASSOCIATION:
            said.append(f"{role} '{col}' is strongly associated with the condition across donors (Cramer's V = "
                        f"{v:.2f}): its effect and the condition's are hard to tell apart")
    for message in said:
        warnings.warn(message, ScontrastWarning, stacklevel=2)
    return said


def count_labellings(target_of_donor: np.ndarray, *, paired: bool, blocks: np.ndarray | None = None) -> tuple[int, bool]:
    """The number of distinct donor relabellings and whether each has a mirror (the groups swapped).

    Unpaired: which donors are target, their number kept within each block (C(n_b, t_b) per
    block). Paired: which donors have their two labels swapped (2^n, blocks change nothing).
    A statistic symmetric in the groups gives a labelling and its mirror the same value, so the
    smallest p-value is ``(2 if mirror else 1) / count``.

    Examples
    --------
    >>> import numpy as np
    >>> from scontrast.study import count_labellings
    >>> count_labellings(np.array([True, True, True, False, False, False]), paired=False)   # 3 against 3 donors
    (20, True)
    """
    target = np.asarray(target_of_donor, dtype=bool)
    if paired:
        return 2 ** target.size, True
    blocks = np.zeros(target.size, dtype=int) if blocks is None else pd.factorize(np.asarray(blocks))[0]
    count, mirror = 1, True
    for b in np.unique(blocks):
        n, t = int((blocks == b).sum()), int(target[blocks == b].sum())
        count *= math.comb(n, t)
        mirror &= 2 * t == n
    return count, mirror


def _split_rows(cells: pd.DataFrame, *, paired: bool, min_cells_per_replicate: int, min_cells_per_group: int,
                block: str | None) -> tuple[list[dict], dict]:
    """The two group rows of one split and its split-level verdict."""
    counts = cells.groupby(["donor", "condition"], observed=True).size().unstack(fill_value=0)
    for cond in ("target", "background"):
        if cond not in counts:
            counts[cond] = 0
    dropped: dict[str, list[str]] = {"target": [], "background": []}
    kept: dict[str, list[str]] = {"target": [], "background": []}
    for donor, row in counts.iterrows():
        has = {c: int(row[c]) for c in ("target", "background")}
        if not paired and has["target"] and has["background"]:
            for c in has:
                dropped[c].append(f"{donor} (cells in both groups: declare paired: true)")
            continue
        if paired and not (has["target"] and has["background"]):
            for c in has:
                if has[c]:
                    dropped[c].append(f"{donor} (no cell in the other group)")
            continue
        low = [c for c in has if 0 < has[c] < min_cells_per_replicate]
        for c in has:
            if not has[c]:
                continue
            if low:
                dropped[c].append(f"{donor} ({has[low[0]]} cells in {low[0]} < {min_cells_per_replicate})")
            else:
                kept[c].append(str(donor))
    rows = []
    for cond in ("target", "background"):
        per = counts.loc[kept[cond], cond] if kept[cond] else pd.Series(dtype=int)
        rows.append({"group": cond, "n_donors": len(kept[cond]), "donors": ",".join(kept[cond]),
                     "n_cells": int(per.sum()), "cells_per_donor_min": int(per.min()) if len(per) else 0,
                     "cells_per_donor_median": float(per.median()) if len(per) else 0.0,
                     "donors_dropped": "; ".join(dropped[cond])})
    reasons = []
    for r in rows:
        if r["n_donors"] < 2:
            reasons.append(f"{r['n_donors']} donor(s) in {r['group']} (2 needed)")
        elif r["n_cells"] < min_cells_per_group:
            reasons.append(f"{r['n_cells']} cells in {r['group']} (< {min_cells_per_group})")
    donors = sorted(set(kept["target"]) | set(kept["background"]))
    if reasons:
        return rows, {"testable": False, "reason": "; ".join(reasons), "n_labellings": 0, "pvalue_floor": 1.0,
                      "donors": donors}
    target_of_donor = np.array([d in kept["target"] for d in donors]) if not paired else np.zeros(len(donors), bool)
    blocks = None
    if block is not None and not paired:
        blocks = cells.groupby("donor", observed=True)[block].first().astype(str).reindex(donors).to_numpy()
    n, mirror = count_labellings(target_of_donor, paired=paired, blocks=blocks)
    floor = min(1.0, (2 if mirror else 1) / n)
    return rows, {"testable": True, "reason": "", "n_labellings": n, "pvalue_floor": floor, "donors": donors}


def design_table(obs: pd.DataFrame, *, groupby: str, target: Sequence[str], background: Sequence[str],
                 replicate: str, split_by: str, folders: dict[str, str] | None = None, paired: bool = False,
                 covariates: Sequence[str] = (), block: str | None = None, min_cells_per_group: int = 10,
                 min_cells_per_replicate: int = 3, alpha: float = 0.05) -> pd.DataFrame:
    """The design check of a study: one row per split and group (n_splits * 2 rows).

    Parameters
    ----------
    obs : DataFrame (n_cells, ...)
        The cells of the study (after its ``subset``).
    groupby, target, background
        The condition: ``obs[groupby]`` values of the target and background cells (others dropped).
    replicate
        obs column of the donors (the unit of every test).
    split_by
        obs column making one contrast per value.
    folders
        ``{value: folder}`` of the splits (default: :func:`split_folders`).

    Returns
    -------
    DataFrame with columns ``split`` (folder), ``value``, ``group``, ``n_donors``, ``donors``,
    ``n_cells``, ``cells_per_donor_min``, ``cells_per_donor_median``, ``donors_dropped``,
    ``n_labellings``, ``pvalue_floor``, ``testable`` and ``verdict`` (plain words); its
    ``attrs['warnings']`` holds the confounding warnings. Raises when a column is absent or a
    covariate or block determines the condition.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from scontrast.study import design_table
    >>> obs = pd.DataFrame({"condition": np.repeat(["case", "control"], 40),
    ...                     "donor": np.repeat([f"D{i}" for i in range(8)], 10),
    ...                     "cell_type": np.tile(np.repeat(["B", "T"], 5), 8)})
    >>> design = design_table(obs, groupby="condition", target=["case"], background=["control"], replicate="donor",
    ...                       split_by="cell_type")
    >>> design[["split", "group", "n_donors", "n_cells", "testable"]].values.tolist()
    [['B', 'target', 4, 20, True], ['B', 'background', 4, 20, True], ['T', 'target', 4, 20, True], ['T', 'background', 4, 20, True]]
    >>> round(float(design.loc[0, "pvalue_floor"]), 4)           # 4 against 4 donors: 70 relabellings, 2 extreme
    0.0286
    """
    from ._split import split_folders

    for role, col in [("groupby", groupby), ("replicate", replicate), ("split_by", split_by), ("block", block),
                      *(("covariate", c) for c in covariates)]:
        if col is not None and col not in obs:
            raise ScontrastError(f"{role}: obs column '{col}' is absent; have {list(obs.columns)[:20]}")
    labels = obs[groupby].astype(str)
    cond = np.where(labels.isin(list(map(str, target))), "target",
                    np.where(labels.isin(list(map(str, background))), "background", ""))
    cells = pd.DataFrame({"donor": obs[replicate].astype(str).to_numpy(), "condition": cond,
                          "split": obs[split_by].astype(str).to_numpy()}, index=obs.index)
    for col in [*covariates, *([block] if block else [])]:
        cells[col] = obs[col].to_numpy()
    cells = cells[cells["condition"] != ""]
    if cells.empty:
        raise ScontrastError(f"groupby: no cell of '{groupby}' is in target {list(target)} or background "
                             f"{list(background)}")
    units = cells.drop_duplicates(["donor", "condition"]).drop(columns="split")
    said = check_confounding(units, list(covariates))
    if block is not None:
        said += check_confounding(units, [block], role="block")
    folders = folders or split_folders(pd.unique(cells["split"]))
    out = []
    n_testable = 0
    verdicts = {}
    for value in sorted(folders):
        rows, verdict = _split_rows(cells[cells["split"] == value], paired=paired, block=block,
                                    min_cells_per_replicate=min_cells_per_replicate,
                                    min_cells_per_group=min_cells_per_group)
        verdicts[value] = verdict
        n_testable += verdict["testable"]
        for r in rows:
            out.append({"split": folders[value], "value": value, **r})
    for row in out:
        v = verdicts[row["value"]]
        row["n_labellings"] = v["n_labellings"]
        row["pvalue_floor"] = v["pvalue_floor"]
        row["testable"] = v["testable"]
        row["verdict"] = _verdict(v, n_testable, alpha)
    table = pd.DataFrame(out)
    table.attrs["warnings"] = said
    return table


def _verdict(v: dict, n_testable: int, alpha: float) -> str:
    """Whether a split is testable, in plain words."""
    if not v["testable"]:
        return f"not testable: {v['reason']}"
    alone = alpha / max(n_testable, 1)
    text = (f"testable: {v['n_labellings']} relabellings of its donors, smallest p-value {v['pvalue_floor']:.3g}")
    if v["pvalue_floor"] > alpha:
        return text + f"; it can never reach p < {alpha:g}, even alone"
    if v["pvalue_floor"] > alone:
        return text + (f"; above {alpha:g}/{n_testable} = {alone:.3g}, it can be called across {n_testable} splits "
                       "only together with others (Benjamini-Hochberg)")
    return text
