"""Whole studies: one contrast per split (cell type), a design check, and a donor-level answer.

- :func:`subset_mask`, :func:`split_folders`, :func:`read_obs`: which cells, which splits;
- :func:`design_table`, :func:`check_confounding`: the design check before any compute;
- :func:`run_study`: per split, an exact donor-level p-value under relabellings shared by every
  split (its spread families on the :func:`shape_genes`), Benjamini-Hochberg across splits, the
  global min-p, an effect with a donor jackknife interval, leave-one-donor-out ``driven_by`` and the ranking (:class:`StudyResult`);
- :func:`plot_ranking`: the study figure.
"""

from ._design import check_confounding, count_labellings, design_table
from ._effect import group_distance, jackknife_interval, unit_subsample
from ._figure import plot_ranking
from ._split import read_obs, read_subset, split_folders, subset_mask
from ._study import STUDY_COLUMNS, StudyResult, bh_adjust, design_rows, rank_and_say, run_study, shape_genes
from ._test import study_labellings

__all__ = ["STUDY_COLUMNS", "StudyResult", "bh_adjust", "check_confounding", "count_labellings", "design_rows",
           "design_table", "group_distance", "jackknife_interval", "plot_ranking", "rank_and_say", "read_obs",
           "read_subset",
           "run_study", "shape_genes", "split_folders", "study_labellings", "subset_mask", "unit_subsample"]
