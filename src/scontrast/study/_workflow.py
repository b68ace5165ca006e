"""A study entry of the workflow's config expanded into its split contrasts, at parse time.

A dataset entry with ``split_by`` is a study: each value of that obs column (among the cells its
``subset`` keeps) becomes a contrast ``<study>/<folder>`` whose entry is the study's own with the
split added to its ``subset`` (its preprocess job then reads only the split's rows), so that every
per-contrast rule runs on it unchanged under ``results/<study>/<folder>/``. The design check
(:func:`scontrast.study.design_table`, on the cells' annotations only) decides which splits can be
tested before any job: the others get no job and are rows ``skipped: <reason>`` of the study table.
"""

from __future__ import annotations

import copy

import pandas as pd

from ._design import design_table
from ._split import read_obs, split_folders, subset_mask

__all__ = ["STUDY_KEYS", "expand_study", "study_design"]

# keys of a study entry that its split contrasts do not take as such (the split enters their subset)
STUDY_KEYS = ("split_by", "effect_cells")


def study_design(entry: dict, preprocess: dict, alpha: float = 0.05) -> tuple[pd.DataFrame, dict[str, str]]:
    """The design check of a study entry (its ``path`` read for obs only) and ``{value: folder}``."""
    obs = read_obs(entry["path"])
    obs = obs.loc[subset_mask(obs, entry.get("subset"))]
    if entry.get("replicate") is None:
        from ..core import ScontrastError

        raise ScontrastError("split_by needs a replicate column (replicate: <obs column of the donors>): a study's "
                             "answer is per donor")
    folders = split_folders(pd.unique(obs[entry["split_by"]].astype(str)) if entry["split_by"] in obs else [])
    design = design_table(obs, groupby=entry["groupby"], target=entry["target"], background=entry["background"],
                          replicate=entry["replicate"], split_by=entry["split_by"], folders=folders,
                          paired=bool(entry.get("paired", False)), covariates=entry.get("covariates") or (),
                          block=entry.get("block"), min_cells_per_group=preprocess["min_cells_per_group"],
                          min_cells_per_replicate=preprocess["min_cells_per_replicate"], alpha=alpha)
    return design, folders


def expand_study(name: str, entry: dict, design: pd.DataFrame) -> dict[str, dict]:
    """``{'<name>/<folder>': entry}`` of the study's testable splits, each entry's subset holding its value."""
    out = {}
    for value, rows in design.groupby("value", sort=True):
        if not rows["testable"].iloc[0]:
            continue
        split = {k: copy.deepcopy(v) for k, v in entry.items() if k not in STUDY_KEYS}
        split["subset"] = {**(entry.get("subset") or {}), entry["split_by"]: [str(value)]}
        out[f"{name}/{rows['split'].iloc[0]}"] = split
    return out
