"""The target/background split: which cells the user's labels select in the group column."""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..core import ScontrastError


def _as_list(labels) -> list[str]:
    """Labels as a list of text: one label (text or a number, ``target: 1.0``) or a list of them."""
    return [str(x) for x in ([labels] if isinstance(labels, (str, numbers.Number)) else labels)]


def _number(text: str) -> float | None:
    """The number a config label spells (``'1.0'``, ``'1'``, ``'1e0'``), or None."""
    try:
        return float(text)
    except ValueError:
        return None


def _is_number(value) -> bool:
    return isinstance(value, (numbers.Real, np.number)) and not isinstance(value, (bool, np.bool_))


def _denoted(label: str, values) -> set:
    """The present values of a column that a config label denotes.

    Its text (``str(value) == label``), and on a numeric value the number it spells: ``'1'``,
    ``'1.0'`` and ``'1e0'`` all select the cells holding 1.0. Text is never read as a number the
    other way round (``'01'`` does not select ``'1'``).
    """
    number = _number(label)
    return {v for v in values if str(v) == label or (number is not None and _is_number(v) and float(v) == number)}


def group_labels(obs: pd.DataFrame, groupby: str, target: Sequence[str], background: Sequence[str]) -> pd.Series:
    """Label each cell 'target', 'background' or NaN (neither).

    Labels are matched against the values present in ``obs[groupby]`` by what they denote
    (:func:`_denoted`: as text, and on a numeric column as numbers, so ``'0'`` and ``'0.0'``
    select the same cells); a cell with no value (NaN, None) is never selected, whatever the
    label (``'nan'`` selects nothing unless a cell holds that text). Raises when ``groupby`` is
    not a column, a label selects no cell (naming it and the values present), or a value is
    selected as both target and background (however each label spells it).
    """
    if groupby not in obs:
        raise ScontrastError(f"obs column '{groupby}' (groupby) is absent; have {list(obs.columns)[:20]}")
    target, background = _as_list(target), _as_list(background)
    col = obs[groupby]
    has_value = col.notna().to_numpy()
    present = list(pd.unique(col[has_value]))
    shown = sorted({str(v) for v in present})
    n_missing = int((~has_value).sum())
    chosen: dict[str, dict[str, set]] = {}
    for role, labels in (("target", target), ("background", background)):
        chosen[role] = {x: _denoted(x, present) for x in labels}
        missing = [x for x, values in chosen[role].items() if not values]
        if missing:
            note = f"; {n_missing} cell(s) have no value, which no label selects" if n_missing else ""
            raise ScontrastError(
                f"{role} label(s) {missing} not found in obs['{groupby}'] (values: {shown[:20]}{note})"
            )
    selected = {role: set().union(*by_label.values()) for role, by_label in chosen.items()}
    both = selected["target"] & selected["background"]
    if both:
        spelled = {role: sorted(x for x, values in chosen[role].items() if values & both) for role in chosen}
        n_both = int(col.isin(both).to_numpy()[has_value].sum())
        raise ScontrastError(
            f"labels are both target and background: target {spelled['target']} and background "
            f"{spelled['background']} both select obs['{groupby}'] value(s) {sorted(str(v) for v in both)} "
            f"({n_both} cells)"
        )
    out = pd.Series(np.nan, index=obs.index, dtype=object)
    for role in ("target", "background"):
        out[(col.isin(selected[role]).to_numpy() & has_value)] = role
    return out


def _group_name(labels: list[str], role: str) -> str:
    return f"{' + '.join(labels)} ({role})"
