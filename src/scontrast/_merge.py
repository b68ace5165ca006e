"""Deltas and their merge: what a method added to the preprocessed data, and joining them back.

Every method rule writes a *delta*: an AnnData with the same cells and genes as
``preprocessed.h5ad``, no ``X``, and only the slots the method added (:func:`extract_delta`).
:func:`merge` joins a base and its deltas back into one object. :mod:`scontrast.io` re-exports
these names; reading and writing the files stays there.
"""

from __future__ import annotations

import logging

import anndata as ad
import pandas as pd

from .core import CannotRun, ScontrastError

__all__ = ["FAILURE_KEY", "MethodFailed", "SlotKeys", "slot_keys", "extract_delta", "merge"]

_SLOTS = ("obs", "var", "obsm", "varm", "obsp", "layers", "uns")
_log = logging.getLogger("scontrast.io")  # io's logger: the merge is part of reading the results

#: uns key of a delta that records a method that did not run on the dataset (see ``failure_delta``).
FAILURE_KEY = "scontrast_failure"


class MethodFailed(CannotRun):
    """A delta read as input records that its method did not run on the dataset."""


class SlotKeys(dict):
    """``{slot: set of keys}``, with what each key held (to tell a replaced entry from a kept one)."""

    fingerprints: dict


def _fingerprint(value):
    """What tells a replaced entry: a hash of an obs/var column's values, the object itself otherwise."""
    if isinstance(value, pd.Series):
        try:
            return ("series", str(value.dtype), pd.util.hash_pandas_object(value, index=False).to_numpy().tobytes())
        except TypeError:  # unhashable entries (lists...): only a new key is seen as new
            return None
    return value


def slot_keys(adata: ad.AnnData) -> SlotKeys:
    """The keys of every annotation slot, to diff against after a method ran.

    The result also remembers what each key held, so that :func:`extract_delta` keeps an entry
    a method *replaced* (an input that already held the method's slots, e.g. a finished
    ``scontrast.h5ad`` fed back in), not only the new ones.
    """
    out = SlotKeys(
        obs=set(adata.obs.columns),
        var=set(adata.var.columns),
        obsm=set(adata.obsm.keys()),
        varm=set(adata.varm.keys()),
        obsp=set(adata.obsp.keys()),
        layers=set(adata.layers.keys()),
        uns=set(adata.uns.keys()),
    )
    out.fingerprints = {
        (slot, key): _fingerprint(_entry(adata, slot, key)) for slot in _SLOTS for key in out[slot]
    }
    return out


def _entry(adata: ad.AnnData, slot: str, key: str):
    return getattr(adata, slot)[key]


def _replaced(adata: ad.AnnData, before: dict, slot: str, key: str) -> bool:
    prints = getattr(before, "fingerprints", None)
    if prints is None or (slot, key) not in prints:
        return False
    old, new = prints[(slot, key)], _fingerprint(_entry(adata, slot, key))
    if isinstance(old, tuple) and isinstance(new, tuple):
        return old != new
    return old is not new and not (old is None and new is None)


def extract_delta(adata: ad.AnnData, before: dict[str, set[str]]) -> ad.AnnData:
    """The slots of ``adata`` added or replaced since ``before = slot_keys(adata)``.

    Returns an AnnData with ``adata``'s cell and gene index, ``X=None``, and only the new
    or replaced obs/var columns, obsm/varm/obsp/layers entries and uns keys. A replaced
    entry (the input already held it: a stale result of an earlier run) is logged; keeping
    only new keys would let the stale value win at the merge.
    """
    now = slot_keys(adata)
    new = {}
    for slot in _SLOTS:
        added = now[slot] - before[slot]
        replaced = {k for k in now[slot] & before[slot] if _replaced(adata, before, slot, k)}
        for key in sorted(replaced):
            _log.info("%s['%s'] was in the input and is replaced by this run's result", slot, key)
        new[slot] = sorted(added | replaced)
    return ad.AnnData(
        obs=adata.obs[new["obs"]].copy(),
        var=adata.var[new["var"]].copy(),
        obsm={k: adata.obsm[k] for k in new["obsm"]},
        varm={k: adata.varm[k] for k in new["varm"]},
        obsp={k: adata.obsp[k] for k in new["obsp"]},
        layers={k: adata.layers[k] for k in new["layers"]},
        uns={k: adata.uns[k] for k in new["uns"]},
    )


def merge(base: ad.AnnData, *deltas: ad.AnnData, names: list[str] | None = None,
          failures: str = "raise") -> ad.AnnData:
    """Join deltas into a copy of ``base``.

    Each delta must have exactly ``base``'s cells and genes in the same order. A delta's
    entry that ``base`` already holds replaces it, with a warning in the log (the base held
    a stale result: the delta is this run's); two deltas writing the same entry are refused.
    A delta recording a method that did not run (:func:`failure_delta`) raises
    :class:`MethodFailed` (``failures="raise"``) or is skipped and listed in
    ``uns['scontrast']['failed']`` as ``{method: message}`` (``failures="record"``).
    ``names`` (one per delta) serve the messages.
    """
    out = base.copy()
    names = names or [f"delta {i}" for i in range(len(deltas))]
    base_keys = slot_keys(out)
    written: dict[tuple[str, str], str] = {}
    failed: dict[str, str] = {}
    for name, delta in zip(names, deltas, strict=True):
        if not (delta.obs_names.equals(out.obs_names) and delta.var_names.equals(out.var_names)):
            raise ScontrastError(f"{name} does not have the cells and genes of the preprocessed data")
        if FAILURE_KEY in delta.uns:
            record = delta.uns[FAILURE_KEY]
            method, message = str(record["method"]), str(record["message"])
            if failures != "record":
                raise MethodFailed(f"{name} records that {method} did not run on this dataset: {message}")
            _log.warning("%s did not run on this dataset (%s): %s", method, name, message)
            failed[method] = message
            continue
        for slot, keys in slot_keys(delta).items():
            for key in sorted(keys):
                if (slot, key) in written:
                    raise ScontrastError(f"{name} writes {slot}['{key}'] which {written[(slot, key)]} also writes")
                written[(slot, key)] = name
                if key in base_keys[slot]:
                    _log.warning("%s replaces %s['%s'] of the preprocessed data (a stale result of an earlier run)",
                                 name, slot, key)
        for col in delta.obs.columns:
            out.obs[col] = delta.obs[col]
        for col in delta.var.columns:
            out.var[col] = delta.var[col]
        for slot in ("obsm", "varm", "obsp", "layers"):
            getattr(out, slot).update(dict(getattr(delta, slot)))
        out.uns.update(delta.uns)
    if failures == "record" and failed:
        out.uns["scontrast"] = {**dict(out.uns.get("scontrast", {})), "failed": failed}
    return out
