"""Reliability through the real workflow: what a run does with a degenerate design or a config mistake.

The catalogue (docs/reliability.md lists every case with its outcome):

- ``same_cells``, the target's 40 cells again as the background (PCPCA by ARPACK): every method's
  result or recorded reason, ``scontrast.h5ad`` and the summary;
- ``two_donors``, 2 donors against 2 with ``replicate:`` declared (QUADRO nested): QUADRO records
  that it cannot run, the others' results, ``scontrast.h5ad`` and the summary are kept;
- ``nan_donor``, every second cell without a donor: the 80 cells dropped are counted and warned
  in the log, ``uns`` and the summary;
- a key given twice in a ``--configfile``: refused before any job, naming the key and both lines;
- ``datasets: {}`` in a ``--configfile``: refused before any job (never the demo's datasets instead);
- ``paired: true`` without ``replicate``: refused before any job;
- a dataset's path a FIFO under another dataset's ``results/``: refused before any job, no hang;
- a label typo: one line on the terminal, no ``results/<dataset>/`` folder left.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import REPO, make_counts

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
pytestmark = pytest.mark.workflow

GROUPS = dict(groupby="condition", target=["disease"], background=["healthy"], counts="raw")
PRE = dict(min_genes=1, min_cells=1, n_top_genes=20, min_cells_per_group=5)
FAST = {
    "seed": 0,
    "methods": ["sparda", "cpca", "pcpca", "quadro"],
    "sparda": {"n_permutations": 9, "cv_folds": 2, "n_lambdas": 3, "max_genes": 20},
    "cpca": {"alpha": 1.0},
    "pcpca": {"eigen_solver": "arpack"},  # the solver that crashed on identical groups
    "quadro": {"n_genes": 10, "lambda_grid": [1.0], "outer_cv": 2, "cv": 2},
}


def _run(workdir: Path, cfg: dict, *args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    (workdir / "config.yaml").write_text(yaml.safe_dump(cfg))
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--configfile", str(workdir / "config.yaml"),
           "--cores", "2", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def _same_cells(path: Path) -> None:
    a = make_counts()
    a = a[a.obs["condition"] == "disease"].copy()
    b = a.copy()
    b.obs_names = [f"{n}_copy" for n in b.obs_names]
    b.obs["condition"] = "healthy"
    both = ad.concat([a, b])
    both.obs["condition"] = pd.Categorical(both.obs["condition"])
    both.write_h5ad(path)


def _donors(path: Path, n_donors: int, missing_every: int = 0) -> None:
    a = make_counts(n_cells=240)
    # consecutive blocks of 6 cells (two of each group) per donor: every donor gives cells to every group
    donor = np.array([f"d{(i // 6) % n_donors}" for i in range(a.n_obs)], dtype=object)
    if missing_every:
        donor[::missing_every] = None
    a.obs["donor"] = donor
    a.write_h5ad(path)


@pytest.fixture(scope="module")
def designs(tmp_path_factory):
    """One run of three contrasts asking for each one's scontrast.h5ad and summary."""
    workdir = tmp_path_factory.mktemp("designs")
    _same_cells(workdir / "same_cells.h5ad")
    _donors(workdir / "two_donors.h5ad", 4)  # paired: each donor gives both groups; 2 per group after the split below
    _donors(workdir / "nan_donor.h5ad", 4, missing_every=2)
    datasets = {
        "same_cells": {"path": str(workdir / "same_cells.h5ad"), **GROUPS, "preprocess": dict(PRE)},
        # donors d0, d1 give the target and d2, d3 the background: 2 replicates a group, unpaired
        "two_donors": {"path": str(workdir / "two_donors.h5ad"), **GROUPS, "replicate": "donor",
                       "preprocess": dict(PRE)},
        "nan_donor": {"path": str(workdir / "nan_donor.h5ad"), **GROUPS, "replicate": "donor", "paired": True,
                      "preprocess": dict(PRE)},
    }
    two = ad.read_h5ad(workdir / "two_donors.h5ad")
    keep = ((two.obs["condition"] == "disease") & two.obs["donor"].isin(["d0", "d1"])) | \
           ((two.obs["condition"] == "healthy") & two.obs["donor"].isin(["d2", "d3"]))
    two[keep.to_numpy()].copy().write_h5ad(workdir / "two_donors.h5ad")
    targets = [f"results/{d}/{f}" for d in datasets for f in ("scontrast.h5ad", "summary.tsv")]
    proc = _run(workdir, {"datasets": datasets, **FAST}, "--keep-going", *targets)
    return workdir, proc


def test_identical_groups_keep_every_result(designs):
    workdir, proc = designs
    res = workdir / "results/same_cells"
    assert "ARPACK" not in proc.stdout + proc.stderr
    out = ad.read_h5ad(res / "scontrast.h5ad")
    failed = dict(out.uns["scontrast"].get("failed", {}))
    for method in FAST["methods"]:  # a result, or the recorded reason it could not run
        assert method in out.uns or method in failed, method
    assert "pcpca" in out.uns and "X_pcpca" in out.obsm  # ARPACK's zero operator now has the dense solver's answer
    assert (res / "summary.tsv").stat().st_size > 0


def test_two_donors_a_group_records_quadro_and_keeps_the_rest(designs):
    workdir, proc = designs
    output = proc.stdout + proc.stderr
    res = workdir / "results/two_donors"
    assert "scontrast quadro [dataset=two_donors]: did not run: nested cross-validation holding out whole " \
           "replicates needs at least 3 replicates in each group" in output
    out = ad.read_h5ad(res / "scontrast.h5ad")
    assert "needs at least 3 replicates" in dict(out.uns["scontrast"]["failed"])["quadro"]
    assert {"sparda", "cpca", "pcpca"} <= set(out.uns)
    table = pd.read_csv(res / "summary.tsv", sep="\t")
    assert ((table["method"] == "quadro") & (table["item"] == "did not run")).any()


def test_cells_without_a_donor_are_counted_and_warned_everywhere(designs):
    workdir, _ = designs
    line = "80 cells have no value in obs column 'donor' (replicate) and were dropped (40 target, 40 background)"
    assert line in (workdir / "logs/nan_donor/preprocess.log").read_text()
    out = ad.read_h5ad(workdir / "results/nan_donor/scontrast.h5ad")
    assert any(line in w for w in out.uns["scontrast"]["preprocess"]["warnings"])
    assert out.uns["scontrast"]["design"]["cells_without_replicate"] == 80
    table = (workdir / "results/nan_donor/summary.tsv").read_text()
    assert line in table
    assert "removed 40 of 80 disease (target) cells (50%): 40 with no replicate value" in table


# ------------------------------------------------------------------------- refused before any job
def _base(tmp_path: Path) -> dict:
    make_counts().write_h5ad(tmp_path / "in.h5ad")
    return {"path": str(tmp_path / "in.h5ad"), **GROUPS, "preprocess": dict(PRE)}


def _dry(tmp_path: Path, text: str) -> str:
    (tmp_path / "mine.yaml").write_text(text)
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "--configfile", str(tmp_path / "mine.yaml"),
           "-n"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert not (tmp_path / "results").exists()
    return proc.stdout + proc.stderr


def test_a_dataset_named_twice_is_refused(tmp_path):
    entry = yaml.safe_dump({"mine": _base(tmp_path)})
    swapped = entry.replace("disease", "@@").replace("healthy", "disease").replace("@@", "healthy")
    text = "datasets:\n" + "".join(f"  {line}\n" for line in (entry + swapped).splitlines())
    second = 2 + len(entry.splitlines())
    assert f"key 'mine' is given twice in one block (lines 2 and {second})" in _dry(tmp_path, text)


def test_two_seeds_are_refused(tmp_path):
    text = yaml.safe_dump({"datasets": {"mine": _base(tmp_path)}}) + "seed: 0\nseed: 1\n"
    n = len(text.splitlines())
    assert f"key 'seed' is given twice in one block (lines {n - 1} and {n})" in _dry(tmp_path, text)


def test_no_datasets_is_refused_not_the_demo_run(tmp_path):
    output = _dry(tmp_path, "datasets: {}\n")
    assert "config.datasets: {} should be non-empty" in output
    assert "wu2020" not in output


def test_paired_without_replicate_is_refused_before_any_job(tmp_path):
    text = yaml.safe_dump({"datasets": {"mine": {**_base(tmp_path), "paired": True}}})
    assert "config.datasets.mine: paired: true needs a replicate column" in _dry(tmp_path, text)


def test_a_fifo_under_results_is_refused_without_a_hang(tmp_path):
    (tmp_path / "results/B").mkdir(parents=True)
    os.mkfifo(tmp_path / "results/B/fifo.h5ad")
    text = yaml.safe_dump({"datasets": {"A": {**_base(tmp_path), "path": "results/B/fifo.h5ad"},
                                        "B": _base(tmp_path)}})
    (tmp_path / "mine.yaml").write_text(text)
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "--configfile", str(tmp_path / "mine.yaml"),
           "--cores", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "config.datasets.A.path: 'results/B/fifo.h5ad' is not a regular file (a FIFO)" in proc.stdout + proc.stderr


def test_a_label_typo_is_one_line_and_leaves_no_folder(tmp_path):
    cfg = {"datasets": {"mine": {**_base(tmp_path), "target": ["diseased"]}}, **FAST}
    proc = _run(tmp_path, cfg, "results/mine/preprocessed.h5ad")
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    lines = [ln for ln in output.splitlines() if "not found in obs['condition']" in ln]
    assert lines == ["scontrast preprocess [dataset=mine]: target label(s) ['diseased'] not found in "
                     "obs['condition'] (values: ['disease', 'healthy', 'other'])"]
    assert "Traceback" not in output and "Shell command" not in output
    assert "Traceback" in (tmp_path / "logs/mine/preprocess.log").read_text()
    assert not (tmp_path / "results/mine").exists()


def test_an_input_replaced_by_an_older_file_reruns_the_contrast(tmp_path):
    """``cp new x.tmp && mv x.tmp x.h5ad`` with the copy made before the result: snakemake's mtime check
    alone says "Nothing to be done" and keeps the result of the file that is gone; the input's identity
    (size, mtime, inode), a parameter of rule preprocess, reruns it."""
    source = tmp_path / "x.h5ad"
    make_counts().write_h5ad(source)
    cfg = {"datasets": {"mine": {"path": str(source), **GROUPS, "preprocess": dict(PRE)}}, **FAST}
    target = "results/mine/preprocessed.h5ad"
    first = _run(tmp_path, cfg, target)
    assert first.returncode == 0, first.stderr[-2000:]
    swapped = make_counts()
    swapped.obs["condition"] = swapped.obs["condition"].map({"disease": "healthy", "healthy": "disease",
                                                             "other": "other"}).astype("category")
    swapped.write_h5ad(tmp_path / "x.h5ad.tmp")
    made = (tmp_path / target).stat().st_mtime
    os.utime(tmp_path / "x.h5ad.tmp", (made - 3600, made - 3600))  # older than the result, as a copy made earlier
    os.replace(tmp_path / "x.h5ad.tmp", source)
    second = _run(tmp_path, cfg, target)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "Nothing to be done" not in second.stdout + second.stderr
    out = ad.read_h5ad(tmp_path / target)
    kept = set(out.obs_names[out.obs["scontrast_target"].to_numpy()])
    now_target = set(swapped.obs_names[swapped.obs["condition"] == "disease"])
    assert kept <= now_target and len(kept) >= 0.9 * len(now_target)  # the current file's target (QC kept most)
    third = _run(tmp_path, cfg, target)  # and nothing more while it stays as it is
    assert "Nothing to be done" in third.stdout + third.stderr


def test_the_report_is_built_from_what_exists(designs):
    """The designs run made scontrast.h5ad and summary.tsv only (no figures, no overview): the report is built
    from them, and what it leaves out is named, instead of stopping on the first result that does not exist."""
    workdir, _ = designs
    ran = (workdir / "config.yaml").read_text()
    cfg = yaml.safe_load(ran)
    cfg["datasets"]["never_run"] = dict(cfg["datasets"]["same_cells"])  # a contrast with no result at all
    try:
        proc = _run(workdir, cfg, "--report", "report.html")
    finally:
        (workdir / "config.yaml").write_text(ran)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert "marked for report but does not exist" not in output
    assert "are left out of the report: results/nan_donor, results/nan_donor/figures, results/never_run" in output
    html = (workdir / "report.html").read_text()
    assert len(html) > 10_000
    # the page names the contrast it has no result for, and only that one
    absent = re.search(r"Not in this report.*?</p>", html, flags=re.S)
    assert absent, "the report does not say what it leaves out"
    assert "never_run" in absent.group(0) and "same_cells" not in absent.group(0) and "nan_donor" not in absent.group(0)


def test_a_failed_contrast_leaves_no_earlier_answer_and_a_truncated_result_says_what_to_do(tmp_path):
    """Two contrasts run; then one's config gets a label typo and the other's preprocessed.h5ad is truncated.
    Each failing job removes its contrast's earlier answer (scontrast.h5ad, summary.tsv...), which answered
    another input or configuration, and the truncated result is named with what to do."""
    for name in ("a", "b"):
        make_counts().write_h5ad(tmp_path / f"{name}.h5ad")
    cfg = {"datasets": {name: {"path": str(tmp_path / f"{name}.h5ad"), **GROUPS, "preprocess": dict(PRE)}
                        for name in ("a", "b")}, **FAST, "methods": ["cpca"]}
    targets = ["results/a/summary.tsv", "results/b/summary.tsv"]
    first = _run(tmp_path, cfg, *targets)
    assert first.returncode == 0, first.stderr[-2000:]
    cfg["datasets"]["a"]["target"] = ["diseased"]
    made = tmp_path / "results/b/preprocessed.h5ad"
    made.write_bytes(made.read_bytes()[: made.stat().st_size // 2])
    second = _run(tmp_path, cfg, "--keep-going", *targets)
    output = second.stdout + second.stderr
    assert second.returncode != 0
    for name in ("a", "b"):
        for answer in ("scontrast.h5ad", "summary.tsv", "summary.html"):
            assert not (tmp_path / f"results/{name}/{answer}").exists(), (name, answer)
    line = next(ln for ln in output.splitlines() if ln.startswith("scontrast cpca [dataset=b]: "))
    assert line.startswith("scontrast cpca [dataset=b]: input 'results/b/preprocessed.h5ad' cannot be read (")
    assert "truncated file" in line
    assert "it is a result of an earlier job: delete it (or rerun with --forcerun results/b/preprocessed.h5ad)" in line
    assert "(the earlier scontrast.h5ad, summary.tsv, summary.html of this dataset were removed" in line
    assert any(ln.startswith("scontrast preprocess [dataset=a]: target label(s) ['diseased'] not found")
               and "the earlier scontrast.h5ad" in ln for ln in output.splitlines())


def test_a_dataset_reading_its_own_result_is_refused_by_name(tmp_path):
    """A cycle through results/ (A reads B's result, B reads A's) was snakemake's 'Cyclic dependency on rule collect'."""
    base = _base(tmp_path)
    text = yaml.safe_dump({"datasets": {"A": {**base, "path": "results/B/scontrast.h5ad"},
                                        "B": {**base, "path": "results/A/scontrast.h5ad"}}})
    output = _dry(tmp_path, text)
    assert "config.datasets.A.path: 'results/B/scontrast.h5ad' is a result of this workflow that depends on itself " \
           "(A -> B -> A)" in output
    assert "CyclicGraphException" not in output


def test_a_path_with_a_tilde_says_it_is_not_expanded(tmp_path):
    text = yaml.safe_dump({"datasets": {"mine": {**_base(tmp_path), "path": "~/nowhere/x.h5ad"}}})
    assert "'~/nowhere/x.h5ad' does not exist (no such file) (a path beginning with '~' is not expanded: write " \
           "the whole path)" in _dry(tmp_path, text)
