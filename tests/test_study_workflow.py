"""A study entry in the workflow: its split contrasts, skipped splits, and the study table's files."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import REPO
from scontrast.core import ScontrastWarning
from scontrast.datasets import simulate_study
from scontrast.study import run_study
from scontrast.study._table import add_method_results, read_study_tsv, study_tsv

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


def _small_study(path: Path) -> None:
    cells = ad.read_h5ad(REPO / "data" / "pbmc3k_celltypes.h5ad")
    sim = simulate_study(cells, n_target=3, n_background=3, cells_per_donor=12, random_state=0)
    # Dendritic cells of one target donor only: that split cannot be tested
    keep = ~((sim.obs["cell_type"] == "Dendritic") & (sim.obs["donor"] != "D01") & (sim.obs["condition"] == "case"))
    sim[keep.to_numpy()].copy().write_h5ad(path)


@pytest.mark.workflow
def test_dry_run_lists_each_testable_split_and_no_job_for_the_others(tmp_path):
    import subprocess

    _small_study(tmp_path / "study.h5ad")
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg["datasets"] = {"st": {"path": str(tmp_path / "study.h5ad"), "groupby": "condition", "target": ["case"],
                              "background": ["control"], "counts": "raw", "replicate": "donor",
                              "split_by": "cell_type", "subset": {"cell_type": ["B", "NK", "Dendritic"]},
                              "covariates": [], "methods": ["sparda"], "preprocess": {"min_genes": 50}}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = subprocess.run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "--configfile",
                           str(tmp_path / "config.yaml"), "-n", "--quiet", "rules"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            jobs[parts[0]] = int(parts[1])
    assert jobs["preprocess"] == 2 and jobs["sparda"] == 2  # B and NK; Dendritic has 1 target donor
    assert jobs["design_check"] == 1 and jobs["study"] == 1 and jobs["study_figure"] == 1
    assert "pseudobulk" not in jobs and "quadro" not in jobs  # the entry's own methods list


def _job_threads(dry_run: str) -> dict[tuple[str, str], int]:
    """(rule, dataset) -> threads of every job a ``--quiet host`` dry run lists (snakemake prints threads above 1)."""
    out, rule, dataset = {}, None, None
    for line in dry_run.splitlines() + ["rule end:"]:
        line = line.strip()
        if line.startswith("rule ") and line.endswith(":"):
            if rule and dataset:
                out[(rule, dataset)] = out.pop((rule, None), 1)
            rule, dataset = line[5:-1], None
        elif line.startswith("wildcards:") and "dataset=" in line:
            dataset = line.split("dataset=")[1].split(",")[0]
        elif line.startswith("threads:"):
            out[(rule, None)] = int(line.split()[1])
    return out


@pytest.mark.workflow
def test_a_split_asks_one_thread_per_method_and_a_contrast_of_its_own_two(tmp_path):
    """A study's splits run side by side, one thread each; a single contrast keeps its method's threads."""
    import subprocess

    _small_study(tmp_path / "study.h5ad")
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    study = {"path": str(tmp_path / "study.h5ad"), "groupby": "condition", "target": ["case"],
             "background": ["control"], "counts": "raw", "replicate": "donor", "covariates": [],
             "methods": ["sparda", "cpca", "pseudobulk"], "preprocess": {"min_genes": 50}}
    cfg["datasets"] = {"st": {**study, "split_by": "cell_type", "subset": {"cell_type": ["B", "NK"]}},
                       "one": {**study, "subset": {"cell_type": ["B"]}}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = subprocess.run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "--configfile",
                           str(tmp_path / "config.yaml"), "-n", "--cores", "4", "--quiet", "progress"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    threads = _job_threads(proc.stdout)
    for method in ("sparda", "cpca"):
        assert threads[(method, "one")] == 2
        assert threads[(method, "st/B")] == 1 and threads[(method, "st/NK")] == 1
    assert threads[("pseudobulk", "one")] == 1 and threads[("pseudobulk", "st/B")] == 1


@pytest.mark.workflow
def test_the_report_opens_on_the_study_with_its_ranking_figure(tmp_path):
    """The landing page's first block is the study's: its global p-value, the ranking figure inline (the bytes of
    figures/study.png), then the ranked splits; the splits' own blocks come after it."""
    import base64
    import html
    import subprocess

    _small_study(tmp_path / "study.h5ad")
    cfg = yaml.safe_load((REPO / "tests" / "data" / "tiny_config.yaml").read_text())  # small method settings
    cfg["datasets"] = {"st": {"path": str(tmp_path / "study.h5ad"), "groupby": "condition", "target": ["case"],
                              "background": ["control"], "counts": "raw", "replicate": "donor",
                              "split_by": "cell_type", "subset": {"cell_type": ["B", "NK", "Dendritic"]},
                              "covariates": [], "methods": ["sparda"], "preprocess": {"min_genes": 50}}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    base = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "--configfile", str(tmp_path / "config.yaml"),
            "--cores", "2"]
    for extra in ([], ["--report", str(tmp_path / "report.html")]):
        proc = subprocess.run(base + extra, capture_output=True, text=True, timeout=1800)
        assert proc.returncode == 0, proc.stderr[-3000:]
    page = (tmp_path / "report.html").read_text()
    start = page.index("var workflow_desc = ")
    landing = page[start:page.index("\n", start)]  # the landing page's text, one line of the report
    study = landing.index(html.escape("Study st"))
    figure = base64.b64encode((tmp_path / "results/st/figures/study.png").read_bytes()).decode()
    assert study < landing.index(figure) < landing.index("Splits, ranked") < landing.index("st/B")
    assert landing.count("data:image/png;base64,") >= 1 + 2  # the study's ranking, each split's key figure


def test_study_tsv_round_trip_and_method_columns(tmp_path):
    path = tmp_path / "study.h5ad"
    _small_study(path)
    sim = ad.read_h5ad(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScontrastWarning)
        res = run_study(sim, groupby="condition", target=["case"], background=["control"], replicate="donor",
                        split_by="cell_type", subset={"cell_type": ["B", "NK", "Dendritic"]})
    obs = pd.DataFrame(index=["c0"])
    pb = ad.AnnData(obs=obs, var=pd.DataFrame({"pseudobulk_padj": [0.01, 0.2, 0.04]}, index=["a", "b", "c"]))
    failed = ad.AnnData(obs=obs, uns={"scontrast_failure": {"method": "sparda", "message": "too few cells"}})
    add_method_results(res, {"B": {"pseudobulk": pb}, "NK": {"sparda": failed}})
    table = res.table.set_index("split")
    assert table.loc["B", "n_pseudobulk_genes"] == 2
    assert "sparda did not run: too few cells" in table.loc["NK", "note"]
    assert table.loc["Dendritic", "status"].startswith("skipped: 1 donor(s) in target")
    (tmp_path / "study.tsv").write_text(study_tsv(res))
    back, global_p = read_study_tsv(tmp_path / "study.tsv")
    assert global_p == pytest.approx(res.global_pvalue, rel=1e-5)
    assert list(back["split"]) == list(res.table["split"])
    assert np.allclose(back["pvalue"].to_numpy(float), res.table["pvalue"].to_numpy(float), rtol=1e-5, equal_nan=True)
    # 3 v 3 donors: 20 relabellings, floor 2/20 = 0.1 above 0.05: said in plain words
    assert all("cannot be found" in n for n in back.loc[back["status"] == "tested", "note"])


def _rules() -> set[str]:
    import re

    return {m for f in (REPO / "workflow" / "rules").glob("*.smk")
            for m in re.findall(r"^rule (\w+):", f.read_text(), flags=re.M)}


def test_grouped_slurm_profile_is_the_slurm_profile_with_every_per_contrast_rule_grouped():
    profiles = REPO / "workflow" / "profiles"
    slurm = yaml.safe_load((profiles / "slurm" / "config.yaml").read_text())
    grouped = yaml.safe_load((profiles / "slurm_grouped" / "config.yaml").read_text())
    assert {k: v for k, v in grouped.items() if k not in ("groups", "group-components")} == slurm
    assigned = dict(entry.split("=") for entry in grouped["groups"])
    study_rules = {"design_check", "study", "study_figure"}  # they read every split: never inside one
    assert set(assigned) == _rules() - study_rules and set(assigned.values()) == {"contrast"}
    assert grouped["group-components"] == ["contrast=1"]


@pytest.mark.workflow
def test_grouped_profile_makes_one_group_job_per_split(tmp_path):
    import subprocess

    _small_study(tmp_path / "study.h5ad")
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg["datasets"] = {"st": {"path": str(tmp_path / "study.h5ad"), "groupby": "condition", "target": ["case"],
                              "background": ["control"], "counts": "raw", "replicate": "donor",
                              "split_by": "cell_type", "subset": {"cell_type": ["B", "NK", "Dendritic"]},
                              "methods": ["sparda", "pseudobulk"], "preprocess": {"min_genes": 50}}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = subprocess.run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "--configfile",
                           str(tmp_path / "config.yaml"), "-n", "--workflow-profile",
                           str(REPO / "workflow" / "profiles" / "slurm_grouped")], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert out.count("Group job contrast") == 2  # B and NK (Dendritic cannot be tested): one submission each


@pytest.mark.workflow
def test_effect_cells_is_a_study_key_and_needs_split_by(tmp_path):
    import subprocess

    from scontrast.study._workflow import expand_study, study_design

    _small_study(tmp_path / "study.h5ad")
    entry = {"path": str(tmp_path / "study.h5ad"), "groupby": "condition", "target": ["case"],
             "background": ["control"], "counts": "raw", "replicate": "donor", "split_by": "cell_type",
             "subset": {"cell_type": ["B", "NK"]}, "methods": ["sparda"], "effect_cells": 8}
    design, _ = study_design(entry, {"min_cells_per_group": 10, "min_cells_per_replicate": 3})
    splits = expand_study("st", entry, design)
    assert sorted(splits) == ["st/B", "st/NK"] and not any("effect_cells" in e for e in splits.values())
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    without_split = {k: v for k, v in entry.items() if k != "split_by"}
    for datasets, ok in (({"st": entry}, True), ({"one": without_split}, False)):
        cfg["datasets"] = datasets
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
        proc = subprocess.run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "--configfile",
                               str(tmp_path / "config.yaml"), "-n", "--quiet", "rules"], capture_output=True,
                              text=True, timeout=600)
        assert (proc.returncode == 0) == ok, proc.stderr[-3000:]
        if not ok:
            assert "config.datasets.one: 'split_by' is a dependency of 'effect_cells'" in proc.stdout, proc.stdout[-3000:]
