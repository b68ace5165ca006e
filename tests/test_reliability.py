"""Reliability: each case a user's mistake or a degenerate design, and what scontrast does with it.

Library-level cases (fast); the workflow cases are in ``tests/test_reliability_workflow.py``.
docs/reliability.md is the catalogue of both, with the outcome of each.

| case | outcome |
|---|---|
| a key given twice in a config file (dataset, ``seed``, a method block, any depth) | refused, naming the key and both lines |
| ``target: ["1.0", "0"]``, ``background: ["0.0"]`` on a float column | refused: both select the value 0.0 |
| ``target: ["1"]``, ``background: ["0.0"]`` on a float column | the cells holding 1.0 and 0.0 |
| a label that selects nothing | refused, naming the label and listing the values present |
| PCPCA (ARPACK) on a background identical to the target | the dense solver's result, not an ARPACK crash |
| QUADRO with replicates declared, 2 of them in a group | ``CannotRun``: recorded, the contrast keeps the rest |
| a step of a few seconds | no progress line; a long one a line at most every few seconds |
| a warning that names its method | logged with one prefix, not two |
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd
import pytest

from conftest import make_counts
from scontrast import core
from scontrast._workflow import strict_yaml_load
from scontrast.core import CannotRun, ScontrastError, ScontrastWarning
from scontrast.preprocess import group_labels, preprocess

PRE = dict(min_genes=1, min_cells=1, n_top_genes=20, min_cells_per_group=5)


# ----------------------------------------------------------------------------------- config files
@pytest.mark.parametrize("text, key, lines", [
    ("datasets:\n  mine:\n    path: a.h5ad\n  mine:\n    path: b.h5ad\n", "mine", (2, 4)),
    ("seed: 0\nmethods: [cpca]\nseed: 1\n", "seed", (1, 3)),
    ("sparda:\n  lam: 0.1\ncpca:\n  alpha: 1\nsparda:\n  lam: 0.2\n", "sparda", (1, 5)),
    ("latent_features:\n  ibp:\n    n_iter: 10\n    n_iter: 20\n", "n_iter", (3, 4)),
    ('{"seed": 1,\n "seed": 2}', "seed", (1, 2)),  # JSON, which snakemake also reads
])
def test_a_key_given_twice_is_refused_naming_both_lines(tmp_path, text, key, lines):
    path = tmp_path / "cfg.yaml"
    path.write_text(text)
    with pytest.raises(ValueError) as info:
        strict_yaml_load(path)
    message = str(info.value)
    assert f"'{path}': key '{key}' is given twice in one block (lines {lines[0]} and {lines[1]})" in message
    assert "\n" not in message


def test_the_same_key_in_two_blocks_is_fine(tmp_path):
    path = tmp_path / "cfg.yaml"
    path.write_text("cpca:\n  genes: all\nquadro:\n  genes: all\nanchors:\n  a: &x {k: 1}\n  b: *x\n")
    assert strict_yaml_load(path)["quadro"] == {"genes": "all"}


# --------------------------------------------------------------------------- labels by their value
def _float_groups() -> pd.DataFrame:
    return pd.DataFrame({"grp": np.r_[np.ones(40), np.zeros(40)]}, index=[f"c{i}" for i in range(80)])


@pytest.mark.parametrize("target, background", [(["1.0", "0"], ["0.0"]), (["0.0"], ["0"]), (["1"], ["1e0"])])
def test_labels_spelling_one_value_on_both_sides_are_refused(target, background):
    with pytest.raises(ScontrastError, match=r"labels are both target and background: .* select obs\['grp'\] value"):
        group_labels(_float_groups(), "grp", target, background)


def test_labels_select_by_the_value_they_denote():
    labels = group_labels(_float_groups(), "grp", ["1"], ["0.0"])
    assert (labels.iloc[:40] == "target").all() and (labels.iloc[40:] == "background").all()


def test_text_is_never_read_as_a_number_the_other_way():
    obs = pd.DataFrame({"grp": ["1", "01", "2"] * 10})
    labels = group_labels(obs, "grp", ["1"], ["2"])
    assert labels.value_counts().to_dict() == {"target": 10, "background": 10}  # '01' stays unselected
    with pytest.raises(ScontrastError, match=r"target label\(s\) \['1.0'\] not found in obs\['grp'\] \(values: "
                                             r"\['01', '1', '2'\]\)"):
        group_labels(obs, "grp", ["1.0"], ["2"])


def test_the_overlap_check_runs_through_preprocess():
    a = make_counts()
    a.obs["grp"] = np.where(a.obs["condition"] == "disease", 1.0, 0.0)
    with pytest.raises(ScontrastError, match=r"target \['0'\] and background \['0.0'\] both select .* \(80 cells\)"):
        preprocess(a, groupby="grp", target=["1.0", "0"], background=["0.0"], counts="raw", **PRE)


# -------------------------------------------------------------------- methods on degenerate designs
def _identical_groups():
    """The 40 'disease' cells as the target and again, renamed, as the background."""
    import anndata as ad

    a = make_counts()
    a = a[a.obs["condition"] == "disease"].copy()
    b = a.copy()
    b.obs_names = [f"{n}_copy" for n in b.obs_names]
    b.obs["condition"] = "healthy"
    both = ad.concat([a, b])
    both.obs["condition"] = pd.Categorical(both.obs["condition"])
    return preprocess(both, groupby="condition", target=["disease"], background=["healthy"], counts="raw", **PRE)


def test_pcpca_arpack_on_identical_groups_agrees_with_the_dense_solver():
    """C = Sx - gamma Sy is zero at gamma = n/m when the groups are the same cells: ARPACK stopped with
    'starting vector is zero'; every eigenvalue is 0 there, as the dense solver finds."""
    from scontrast.pcpca import PCPCA

    p = _identical_groups()
    is_t = p.obs[core.TARGET_KEY].to_numpy()
    X, Y = p.X[is_t].toarray(), p.X[~is_t].toarray()
    fits = {s: PCPCA(n_components=2, gamma_prime=0.5, eigen_solver=s, random_state=0).fit(X, Y)
            for s in ("dense", "arpack")}
    assert fits["arpack"].max_gamma_prime_ == pytest.approx(fits["dense"].max_gamma_prime_, rel=1e-9)
    assert fits["dense"].max_gamma_prime_ == pytest.approx(1.0, rel=1e-9)  # min(n/m, gamma_R) with n = m
    scale = np.abs(fits["dense"].W_).max()
    np.testing.assert_allclose(np.abs(fits["arpack"].W_), np.abs(fits["dense"].W_), atol=1e-8 * scale)


def test_a_nonzero_operator_still_fails_loudly(monkeypatch):
    """Only a vanishing C is answered with zeros: any other ARPACK failure is a real error."""
    from scipy.sparse.linalg import ArpackError

    from scontrast.pcpca import _scatter

    def broken(*args, **kwargs):
        raise ArpackError(-9)

    p = make_counts()
    X, Y = p.X[:40].toarray(), p.X[40:80].toarray()
    Sx, Sy = _scatter._scatters(X, Y)
    monkeypatch.setattr(_scatter, "eigsh", broken)
    with pytest.raises(ArpackError):
        _scatter._top_eigenpairs(Sx, Sy, 0.5, 2, "arpack", np.random.default_rng(0))


def test_quadro_with_two_replicates_a_group_cannot_run():
    """Nested CV holding out whole donors needs 3 a group: 2 against 2 is recorded as a design that cannot run."""
    from scontrast import tl

    a = make_counts(n_cells=240)
    a.obs["donor"] = [f"d{i % 4}" for i in range(a.n_obs)]  # every donor gives cells to both groups
    p = preprocess(a, groupby="condition", target=["disease"], background=["healthy"], counts="raw",
                   replicate="donor", paired=True, min_cells_per_replicate=3, **PRE)
    two = p[p.obs["donor"].isin(["d0", "d1"]).to_numpy()].copy()
    with pytest.raises(CannotRun, match=r"needs at least 3 replicates in each group .* the smaller group has 2"):
        tl.quadro(two, random_state=0, outer_cv=2, cv=2, lambda1=1.0, lambda2=1.0)


# --------------------------------------------------------------------------------------- terminal
def test_short_loops_print_no_progress_and_long_ones_a_line_every_few_seconds(caplog, monkeypatch):
    clock = iter(np.arange(0.0, 1000.0, 0.5))  # each step half a second
    monkeypatch.setattr(core.time, "perf_counter", lambda: next(clock))
    with caplog.at_level(logging.INFO, logger="scontrast.x"):
        list(core.progress(range(8), desc="short", logger="scontrast.x"))  # 4 s
        list(core.progress(range(100), desc="long", logger="scontrast.x"))  # 50 s
    lines = [r.getMessage() for r in caplog.records if r.name == "scontrast.x"]
    assert not [ln for ln in lines if ln.startswith("short")]
    done = [int(ln.split(": ")[1].split("/")[0]) for ln in lines]
    assert done[-1] == 100 and len(done) <= 50 / core.PROGRESS_AFTER + 1
    assert min(np.diff(done)) * 0.5 >= core.PROGRESS_AFTER  # at most one line every PROGRESS_AFTER seconds


def test_a_warning_naming_its_method_is_not_prefixed_twice(caplog):
    import warnings

    from scontrast.tl._common import result_warnings

    with caplog.at_level(logging.WARNING, logger="scontrast"):
        with result_warnings("latent_features"):
            warnings.warn("latent_features: the chosen K = 8 is max_features", ScontrastWarning, stacklevel=1)
    assert [r.getMessage() for r in caplog.records] == ["latent_features: the chosen K = 8 is max_features"]


# ------------------------------------------------------------------------------ messages
def _pre(a, **kw):
    return preprocess(a, groupby="condition", target=["disease"], background=["healthy"], counts="raw",
                      **{**PRE, **kw})


def test_an_empty_mito_prefix_is_named_as_the_cause():
    with pytest.raises(ScontrastError, match=r"^mito_prefix '' marks every gene as mitochondrial, so max_pct_mito=20 "
                                             r"would remove every cell"):
        _pre(make_counts(), mito_prefix="")
    assert _pre(make_counts(), mito_prefix="", max_pct_mito=100).n_obs == 80  # the filter off: every cell kept


def test_an_implausibly_small_target_sum_is_warned():
    warned = list(_pre(make_counts(), target_sum=1e-6).uns["scontrast"]["preprocess"]["warnings"])
    assert [w for w in warned if w.startswith("target_sum=1e-06 scales every cell to that total, far below the "
                                              "cells' own (median")]
    for fine in (1e4, 1e6, None):
        warned = list(_pre(make_counts(), target_sum=fine).uns["scontrast"]["preprocess"]["warnings"])
        assert not [w for w in warned if w.startswith("target_sum")], fine


def test_cells_without_a_replicate_are_counted_and_warned():
    a = make_counts(n_cells=240)
    donor = np.array([f"d{(i // 6) % 4}" for i in range(a.n_obs)], dtype=object)
    donor[::2] = None
    a.obs["donor"] = donor
    out = _pre(a, replicate="donor", paired=True)
    warned = list(out.uns["scontrast"]["preprocess"]["warnings"])
    assert warned[0] == ("80 cells have no value in obs column 'donor' (replicate) and were dropped (40 target, "
                         "40 background): give each cell its donor, or leave those cells out of the file")
    assert "removed 40 of 80 disease (target) cells (50%): 40 with no replicate value" in warned
    assert out.uns["scontrast"]["design"]["cells_without_replicate"] == 80
    assert out.n_obs < 80


def test_cpca_components_beyond_the_targets_rank_are_warned():
    from scontrast import tl

    a = make_counts()
    rows = np.r_[np.flatnonzero(a.obs["condition"] == "disease")[:2], np.flatnonzero(a.obs["condition"] == "healthy")]
    p = _pre(a[rows].copy(), min_cells_per_group=2)
    tl.cpca(p, n_components=2, alpha=1.0, random_state=0)
    assert list(p.uns["cpca"]["warnings"]) == [
        "cpca: the target group has 2 cells, so at most 1 direction(s) carry target variance: component 2 has none "
        "(their contrast is minus alpha times the background's variance)"]
    assert p.uns["cpca"]["explained_contrast"][0, 1] <= 0  # what the warning says of the second component
    q = _pre(make_counts())
    tl.cpca(q, n_components=2, alpha=1.0, random_state=0)
    assert not [w for w in q.uns["cpca"]["warnings"] if "direction(s) carry" in w]


def test_a_samples_file_that_decompresses_far_beyond_its_size_is_refused_unread(tmp_path, monkeypatch):
    from scontrast import io
    from scontrast.feature_samples import load_samples, save_samples

    path = tmp_path / "s.npz"
    save_samples(path, [np.zeros((4000, 50), dtype=np.uint8)] * 4)  # zeros: the file is far smaller than its arrays
    assert len(load_samples(path).samples) == 4  # under the floor: read
    monkeypatch.setattr(io, "BOMB_FLOOR_BYTES", 10_000)
    monkeypatch.setattr(np, "load", lambda *a, **k: pytest.fail("np.load ran before the size check"))
    with pytest.raises(ScontrastError, match=r"samples file '.*s.npz': its arrays take .* once read but the file is "
                                             r".* \(more than 100x; largest: Z.npy\); refused as a possible "
                                             r"decompression bomb"):
        load_samples(path)


def test_labels_reach_the_report_page_as_typed():
    """workflow.rst's lit(): TeX, backslashes and line breaks in a label give no docutils System Message."""
    from docutils.core import publish_parts
    from jinja2 import Environment

    from conftest import REPO

    text = (REPO / "workflow/report/workflow.rst").read_text()
    start = text.index("{% macro lit(value)")
    macro = text[start:text.index("{%- endmacro %}", start) + len("{%- endmacro %}")]
    env = Environment(trim_blocks=True, lstrip_blocks=True)
    labels = ["$\\alpha$-cells \\beta", "two\nlines", "``quoted``", " ", "a|b*c_"]
    rst = env.from_string(macro + "\n{% for x in labels %}- {{ lit(x) }}\n{% endfor %}").render(labels=labels)
    html = publish_parts(rst, writer_name="html", settings_overrides={"report_level": 1})["body"]
    assert "System Message" not in html and "system-message" not in html
    shown = re.sub(r"<[^>]+>", "", html)
    assert "$\\alpha$-cells \\beta" in shown  # the backslashes kept
    assert "two lines" in shown


# ------------------------------------------------------------------ an input replaced while it is read
def test_an_input_replaced_while_read_fails_the_job_and_leaves_no_output(tmp_path, capsys):
    """``mv`` of a new version onto the input while the job reads it: the job fails in one line, no output."""
    import os

    from conftest import rule_object
    from scontrast import io
    from scontrast._workflow import run_rule

    source = tmp_path / "x.h5ad"
    make_counts().write_h5ad(source)
    out = tmp_path / "results" / "preprocessed.h5ad"

    def main(smk):
        a = io.read_h5ad(smk.input.h5ad)
        make_counts(seed=1).write_h5ad(tmp_path / "x.h5ad.tmp")
        os.replace(tmp_path / "x.h5ad.tmp", source)  # the user's cp + mv, while the job holds the old file
        io.write_h5ad(a, smk.output.h5ad)

    smk = rule_object({"h5ad": str(source)}, {"h5ad": str(out)}, {}, tmp_path / "log.txt", "preprocess")
    root = logging.getLogger()
    try:
        with pytest.raises(SystemExit) as ended:
            run_rule(smk, main)
    finally:
        logging.captureWarnings(False)
        for handler in list(root.handlers):
            root.removeHandler(handler)
            handler.close()
    assert ended.value.code == 1
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(f"scontrast preprocess [dataset=toy]: input '{source}' changed while this job read it "
                           "(size ")
    assert "its result could mix two versions and is discarded" in line
    assert not out.exists()


# ------------------------------------------------------- more cases of the same kind (docs/reliability.md)
def test_yaml_merge_keys_still_load_and_an_override_is_not_a_duplicate(tmp_path):
    path = tmp_path / "cfg.yaml"
    path.write_text("base: &b {groupby: g, counts: raw}\ndatasets:\n  a:\n    <<: *b\n    groupby: h\n")
    assert strict_yaml_load(path)["datasets"]["a"] == {"groupby": "h", "counts": "raw"}
    path.write_text("base: &b {g: 1}\nd:\n  <<: *b\n  x: 1\n  x: 2\n")
    with pytest.raises(ValueError, match=r"key 'x' is given twice in one block \(lines 4 and 5\)"):
        strict_yaml_load(path)


def test_a_single_number_as_the_label():
    """``group_labels(obs, 'g', 1.0, 0.0)`` (the library's API; the config takes lists of text) raised TypeError."""
    labels = group_labels(_float_groups(), "grp", 1.0, 0)
    assert labels.value_counts().to_dict() == {"target": 40, "background": 40}


def test_the_replicate_column_being_the_groupby_column_is_named():
    with pytest.raises(ScontrastError, match=r"^replicate: 'condition' is the groupby column itself"):
        _pre(make_counts(), replicate="condition")


def test_a_replicate_per_cell_gives_a_readable_line():
    """A donor per cell: the 79 dropped are named 10 and counted (the line listed every one)."""
    a = make_counts()
    a.obs["donor"] = [f"d{i:03d}" for i in range(a.n_obs)]
    with pytest.raises(ScontrastError) as info:
        _pre(a, replicate="donor", paired=True)
    message = str(info.value)
    assert "after dropping d000, d001, d003, d004, d006, d007, d009, d010, d012, d013 and 69 more;" in message
    assert len(message) < 300
