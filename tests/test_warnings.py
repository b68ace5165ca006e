"""Warnings that surface: what a method warns reaches the log, ``uns[<method>]['warnings']`` and the summary."""

from __future__ import annotations

import logging
import warnings

import anndata as ad
import numpy as np
import pandas as pd
import pytest

from scontrast import io
from scontrast.core import ScontrastWarning
from scontrast.summary import summarise
from scontrast.tl._common import record_params, result_warnings


def test_result_warnings_collects_logs_and_dedupes(caplog):
    with caplog.at_level(logging.WARNING, logger="scontrast"):
        with result_warnings("sparda") as warned:
            warnings.warn("p-value at its permutation floor\n 1/50", ScontrastWarning, stacklevel=1)
            warnings.warn("p-value at its permutation floor 1/50", ScontrastWarning, stacklevel=1)
            np.log(np.zeros(1))  # a numerical RuntimeWarning is kept too
            with pytest.warns(FutureWarning, match="old API"):  # library noise is passed on, not recorded
                warnings.warn("old API", FutureWarning, stacklevel=1)
    assert warned == ["p-value at its permutation floor 1/50", "divide by zero encountered in log"]
    logged = [r.getMessage() for r in caplog.records if r.name == "scontrast.sparda"]
    assert logged == ["sparda: p-value at its permutation floor 1/50", "sparda: divide by zero encountered in log"]


def test_recorded_warnings_survive_the_file_and_reach_the_summary(tmp_path):
    a = ad.AnnData(np.ones((3, 2)), obs=pd.DataFrame(index=["a", "b", "c"]))
    record_params(a, "quadro", {}, 0, warnings=["lambda1 chosen at the end of its path"], cv_error=0.1)
    record_params(a, "cpca", {}, 0, alphas=np.array([0.0, 1.0]))
    io.write_h5ad(a, tmp_path / "a.h5ad")
    b = io.read_h5ad(tmp_path / "a.h5ad")
    assert list(b.uns["quadro"]["warnings"]) == ["lambda1 chosen at the end of its path"]
    assert len(b.uns["cpca"]["warnings"]) == 0
    table = summarise(b)
    rows = table[table["item"] == "warning"]
    assert rows[["method", "value"]].values.tolist() == [["quadro", "lambda1 chosen at the end of its path"]]


def test_the_summary_opens_with_what_must_be_read_first():
    """The report tells the reader to read the warnings first: they, and any method that did not
    run, are the summary's first rows (in the table and in the page the report shows)."""
    from scontrast.summary import to_html

    a = ad.AnnData(np.ones((3, 2)), obs=pd.DataFrame(index=["a", "b", "c"]))
    record_params(a, "quadro", {}, 0, warnings=["lambda1 chosen at the end of its path"], cv_error=0.1,
                  balanced_error=0.2, auc=0.8)
    a.uns["scontrast"] = {"failed": {"sparda": "divergence: the groups do not differ"}}
    table = summarise(a)
    # the verdict line, then what must be read before the numbers
    assert table["item"].tolist()[:3] == ["verdict", "did not run", "warning"]
    assert len(table) > 3 and not {"verdict", "did not run", "warning"} & set(table["item"].tolist()[3:])
    rows = to_html(table, "t").split("<tr")[2:]  # after the header row
    assert rows[0].startswith(' class="verdict"')
    assert [r.startswith(' class="warning"') for r in rows[1:4]] == [True, True, False]


# What a clean run of the demo (config.yaml as shipped) warns, each a fact a user can act on. Measured with
# `.venv/bin/snakemake` in a fresh copy of the repository (terminal lines with WARNING):
DEMO_WARNINGS = {
    # paired design: 8 of 14 patients give too few cells to one group (lower min_cells_per_replicate to keep
    # them, or accept the 6 kept); one line for the design
    ("wu2020", "preprocess"): [r"^replicate 'Colon1' of obs column 'patient' dropped: no target cell \(paired design\); "
                               r"replicate 'Colon2' .*; replicate 'Renal3' of obs column 'patient' dropped: 2 target / "
                               r"3 background cells, fewer than min_cells_per_replicate=3 in a group$"],
    ("pbmc68k", "preprocess"): [],
    # the demo study's file as a whole (each cell type's split reads its own rows of it)
    ("pbmc_study", "preprocess"): [],
}


def _demo_preprocess(name: str) -> list[str]:
    import yaml

    from conftest import REPO
    from scontrast.preprocess import preprocess_file

    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    ds = cfg["datasets"][name]
    params = {**cfg["preprocess"], **ds.get("preprocess", {})}
    out = preprocess_file(REPO / ds["path"], groupby=ds["groupby"], target=ds["target"], background=ds["background"],
                          counts=ds.get("counts", "raw"), layer=ds.get("layer"), replicate=ds.get("replicate"),
                          paired=ds.get("paired", False), **params)
    return [str(w) for w in out.uns["scontrast"]["preprocess"]["warnings"]]


@pytest.mark.parametrize("name", ["wu2020", "pbmc68k", "pbmc_study"])
def test_the_demo_does_not_warn_about_its_own_data(name):
    """The demo's preprocessing warns exactly DEMO_WARNINGS: no mitochondrial-prefix warning about the shipped
    file (wu2020 names its mitochondrial genes ND1, COX2...: config.yaml turns that filter off for it)."""
    import re

    warned = _demo_preprocess(name)
    expected = DEMO_WARNINGS[(name, "preprocess")]
    assert len(warned) == len(expected), warned
    for text, pattern in zip(warned, expected):
        assert re.match(pattern, text), text
    assert not [w for w in warned if "mito_prefix" in w]
