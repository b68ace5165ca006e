"""The Snakemake workflow end to end, on a tiny config in a temporary directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anndata as ad
import numpy as np
import pytest
import yaml

from conftest import REPO

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")

pytestmark = pytest.mark.workflow


def tiny_config(**overrides) -> dict:
    """Both shipped datasets with small parameters, so that every rule runs in seconds."""
    cfg = yaml.safe_load((REPO / "tests" / "data" / "tiny_config.yaml").read_text())
    for ds in cfg["datasets"].values():
        ds["path"] = str(REPO / ds["path"])
    cfg.update(overrides)
    return cfg


def snakemake(workdir: Path, cfg: dict, *args: str, check=True) -> subprocess.CompletedProcess:
    (workdir / "config.yaml").write_text(yaml.safe_dump(cfg))
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--configfile",
           str(workdir / "config.yaml"), "--cores", "2", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return proc


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One full run of the default target on the tiny config."""
    workdir = tmp_path_factory.mktemp("run")
    cfg = tiny_config()
    snakemake(workdir, cfg)
    return workdir, cfg


def test_dry_run_shows_two_datasets(tmp_path):
    counts = _jobs(snakemake(tmp_path, tiny_config(), "-n", "--quiet", "rules"))
    assert counts["preprocess"] == 2 and counts["collect"] == 2 and counts["summary"] == 2 and counts["all"] == 1


def test_preprocessed_outputs(run):
    workdir, cfg = run
    for name, ds in cfg["datasets"].items():
        pre = ad.read_h5ad(workdir / f"results/{name}/preprocessed.h5ad")
        src = ad.read_h5ad(ds["path"])
        labels = src.obs.loc[pre.obs_names, ds["groupby"]].astype(str)
        assert set(labels) == set(ds["target"]) | set(ds["background"])
        np.testing.assert_array_equal(pre.obs["scontrast_target"].to_numpy(), labels.isin(ds["target"]).to_numpy())
        assert pre.var["highly_variable"].sum() == min(cfg["preprocess"]["n_top_genes"], pre.n_vars)
        info = pre.uns["scontrast"]["preprocess"]
        assert info["params"]["counts"] == ds["counts"]
        assert info["n_cells_kept"]["target"] == int(pre.obs["scontrast_target"].sum())
        assert (workdir / f"results/{name}/figures/preprocess_qc.png").stat().st_size > 10_000
        assert (workdir / f"results/{name}/benchmarks/preprocess.tsv").exists()
        if ds["counts"] == "raw":
            # X = log1p(counts / total * 1e4), recomputed from the kept counts
            counts = pre.layers["counts"].toarray()
            expected = np.log1p(counts / counts.sum(1, keepdims=True) * 1e4)
            np.testing.assert_allclose(pre.X.toarray(), expected, rtol=1e-4, atol=1e-5)
        else:
            np.testing.assert_allclose(pre.X.toarray(), src[pre.obs_names, pre.var_names].X.toarray())


def test_collect_merges_everything(run):
    workdir, cfg = run
    for name in cfg["datasets"]:
        merged = ad.read_h5ad(workdir / f"results/{name}/scontrast.h5ad")
        pre = ad.read_h5ad(workdir / f"results/{name}/preprocessed.h5ad")
        assert merged.obs_names.equals(pre.obs_names) and merged.var_names.equals(pre.var_names)
        for method in cfg["methods"]:
            delta = ad.read_h5ad(workdir / f"results/{name}/{method}.h5ad")
            assert delta.X is None and delta.obs_names.equals(pre.obs_names)
            for key in delta.uns:
                assert key in merged.uns
            for key in delta.obsm:
                np.testing.assert_array_equal(merged.obsm[key], delta.obsm[key])


def test_nothing_to_rerun(run):
    workdir, cfg = run
    proc = snakemake(workdir, cfg, "-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_bad_input_gives_one_line_and_no_output(tmp_path):
    cfg = tiny_config()
    cfg["datasets"] = {"wu2020": cfg["datasets"]["wu2020"]}
    cfg["datasets"]["wu2020"]["target"] = ["Tumour"]  # a typo: the label is 'Tumor'
    proc = snakemake(tmp_path, cfg, "results/wu2020/preprocessed.h5ad", check=False)
    assert proc.returncode != 0
    line = "scontrast preprocess [dataset=wu2020]: target label(s) ['Tumour'] not found in obs['source']"
    assert line in proc.stderr
    assert not (tmp_path / "results/wu2020/preprocessed.h5ad").exists()
    assert not list((tmp_path / "results").rglob("*.h5ad"))
    assert line in (tmp_path / "logs/wu2020/preprocess.log").read_text()


def test_lint_is_clean():
    proc = subprocess.run([SNAKEMAKE, "--lint", "-s", str(REPO / "Snakefile"), "-d", str(REPO)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Lints for" not in proc.stdout + proc.stderr


def _jobs(proc) -> dict[str, int]:
    """Job counts per rule from the 'Job stats' table of a dry run."""
    lines = (proc.stdout + proc.stderr).splitlines()
    start = lines.index("Job stats:")
    counts = {}
    for line in lines[start + 3:]:
        name, n = line.split()
        if name == "total":
            return counts
        counts[name] = int(n)
    raise AssertionError("no total line in the job stats")


def test_changing_one_method_reruns_it_and_its_descendants_only(run):
    workdir, cfg = run
    changed = yaml.safe_load(yaml.safe_dump(cfg))
    changed["pcpca"]["gamma_prime"] = 0.3
    jobs = _jobs(snakemake(workdir, changed, "-n", "--quiet", "rules"))
    # pcpca feeds latent_features (use_rep X_pcpca) -> fangs; their figures, each dataset's collect and
    # summary follow
    assert jobs == {"pcpca": 2, "pcpca_figure": 2, "latent_features": 2, "fangs": 2, "fangs_figure": 2,
                    "collect": 2, "summary": 2, "genes": 2, "overview": 2, "all": 1}
    changed = yaml.safe_load(yaml.safe_dump(cfg))
    changed["fangs"]["a"] = 1.5
    jobs = _jobs(snakemake(workdir, changed, "-n", "--quiet", "rules"))
    assert jobs == {"fangs": 2, "fangs_figure": 2, "collect": 2, "summary": 2, "genes": 2, "overview": 2, "all": 1}
    # a figure setting redraws that figure and refits nothing
    changed = yaml.safe_load(yaml.safe_dump(cfg))
    changed.setdefault("cpca", {}).setdefault("plot", {})["color"] = "bulk_labels"
    jobs = _jobs(snakemake(workdir, changed, "-n", "--quiet", "rules"))
    assert jobs == {"cpca_figure": 2, "all": 1}
    changed = yaml.safe_load(yaml.safe_dump(cfg))
    changed["datasets"]["wu2020"]["preprocess"]["min_cells"] = 4
    jobs = _jobs(snakemake(workdir, changed, "-n", "--quiet", "rules"))
    assert jobs["preprocess"] == 1 and jobs["pcpca"] == 1 and jobs["collect"] == 1
    # the dry runs changed nothing: the original config still has nothing to do
    assert "Nothing to be done" in "".join(snakemake(workdir, cfg, "-n").stdout)


@pytest.mark.parametrize("method", ["cpca", "pcpca", "quadro"])
def test_sparda_genes_bring_the_sparda_job_in(tmp_path, method):
    """`genes: sparda_selected` makes the method's job depend on SPARDA's output, for every method allowing it."""
    cfg = tiny_config(methods=[method])
    cfg["datasets"] = {"wu2020": cfg["datasets"]["wu2020"]}
    cfg.setdefault(method, {})["genes"] = "sparda_selected"
    jobs = _jobs(snakemake(tmp_path, cfg, "-n", "--quiet", "rules"))
    assert jobs.get("sparda") == 1 and jobs[method] == 1, jobs


def test_report_embeds_every_figure_and_the_summary(run):
    import base64
    import json
    import re

    workdir, cfg = run
    snakemake(workdir, cfg, "--report", str(workdir / "report.html"))
    html = (workdir / "report.html").read_text()
    figures = sorted(p.relative_to(workdir).as_posix() for p in (workdir / "results").rglob("figures/*.png"))
    assert len(figures) >= 2 * (1 + len(cfg["methods"]))
    for fig in figures:
        assert f'"{fig}"' in html, fig
    for name in cfg["datasets"]:
        key = f"results/{name}/summary.tsv"
        entry = re.search(r'"%s": (\{.*?"data_uri": "[^"]*"\})' % re.escape(key), html)
        assert entry, key
        record = json.loads(entry.group(1))
        assert record["job_properties"]["rule"] == "summary"
        assert f"<strong>{name}</strong>" in record["caption"]
        embedded = base64.b64decode(record["data_uri"].split("base64,", 1)[1]).decode()
        assert embedded == (workdir / key).read_text()
        pre = ad.read_h5ad(workdir / f"results/{name}/preprocessed.h5ad")
        n_t, n_b = int(pre.obs["scontrast_target"].sum()), int((~pre.obs["scontrast_target"]).sum())
        assert f"cells (target / background)\t{n_t} / {n_b}" in embedded


def test_a_users_configfile_with_datasets_runs_only_those(tmp_path):
    """README "Your own data": the demo config.yaml stays, the user's --configfile replaces its datasets."""
    mine = {"datasets": {"mine": {**tiny_config()["datasets"]["wu2020"], "background": ["Blood"],
                                  "preprocess": {"min_genes": 20, "min_cells_per_group": 5}}}}
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(mine))
    # the repository's own config.yaml is the base, as when a user runs from the clone
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(REPO), "--configfile", str(tmp_path / "mine.yaml"), "-n",
           "--quiet", "host"]  # the job blocks and the job table, which the default profile keeps off the terminal
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    jobs = _jobs(proc)
    assert jobs["preprocess"] == 1 and jobs["collect"] == 1 and jobs["all"] == 1
    assert "results/mine/preprocessed.h5ad" in out and "results/wu2020/" not in out and "results/pbmc68k/" not in out
    # a --configfile without datasets keeps config.yaml's: the demo's contrasts, its study's cell types included
    demo = _jobs(subprocess.run([c for c in cmd if c != "--configfile" and not c.endswith("mine.yaml")],
                                capture_output=True, text=True, timeout=600, cwd=REPO))
    (tmp_path / "settings.yaml").write_text(yaml.safe_dump({"sparda": {"n_permutations": 19}}))
    cmd[cmd.index("--configfile") + 1] = str(tmp_path / "settings.yaml")
    jobs = _jobs(subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO))
    assert jobs["preprocess"] == demo["preprocess"] >= 2 + 2 and jobs["collect"] == demo["collect"], (jobs, demo)


def test_the_workflow_extra_has_what_the_report_needs():
    """`snakemake --report` needs pygments, which the README's `.[workflow]` install must bring."""
    import tomllib

    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["workflow"]
    assert any(req.lower().startswith("pygments") for req in extra)


def test_report_from_the_readme_command(run):
    """The README's report command builds the page: the workflow description names each contrast,
    and each dataset's summary is there as an inline page (warnings highlighted) and as the table."""
    import re

    workdir, cfg = run
    readme = (REPO / "README.md").read_text()
    command = re.search(r"^\.venv/bin/snakemake (--report \S+)$", readme, flags=re.M)
    assert command, "the README has no report command"
    args = command.group(1).split()
    snakemake(workdir, cfg, *args)
    html = (workdir / args[1]).read_text()
    for name, ds in cfg["datasets"].items():
        assert f"results/{name}/summary.html" in html
        assert name in html and ds["groupby"] in html  # the description page states the contrast
        assert f"<li><strong>{name}</strong>: " in html  # one list item per contrast, not one run-on line
        page = (workdir / f"results/{name}/summary.html").read_text()
        assert "cells (target / background)" in page and "<table>" in page


def test_the_report_opens_on_each_contrasts_answer(run):
    """summary.tsv opens with the verdict; genes.tsv has every gene, most methods first; the report's landing
    page (its workflow description) holds each contrast's verdict, top genes and key figures."""
    import html

    import pandas as pd

    workdir, cfg = run
    snakemake(workdir, cfg, "--report", str(workdir / "landing.html"))
    page = (workdir / "landing.html").read_text()
    start = page.index("var workflow_desc = ")
    landing = page[start:page.index("\n", start)]  # the landing page's text, one line of the report
    for name in cfg["datasets"]:
        table = pd.read_csv(workdir / f"results/{name}/summary.tsv", sep="\t")
        assert table.iloc[0]["method"] == "verdict" and table.iloc[0]["item"] == "verdict"
        verdict = str(table.iloc[0]["value"])
        assert verdict.startswith(("differs ", "no difference ")), verdict
        genes = pd.read_csv(workdir / f"results/{name}/genes.tsv", sep="\t")
        merged = ad.read_h5ad(workdir / f"results/{name}/scontrast.h5ad", backed="r")
        assert sorted(genes["gene"]) == sorted(merged.var_names) and genes["n_methods"].is_monotonic_decreasing
        merged.file.close()
        assert html.escape(verdict) in landing, name
        assert html.escape(str(genes["gene"].iloc[0])) in landing
    assert landing.count("data:image/png;base64,") >= 2 * len(cfg["datasets"])  # SPARDA's and QUADRO's figures


def test_two_datasets_with_two_contrasts_each(tmp_path):
    cfg = tiny_config()
    wu, pbmc = cfg["datasets"]["wu2020"], cfg["datasets"]["pbmc68k"]
    cfg["datasets"]["wu2020_blood"] = {**wu, "target": ["Tumor"], "background": ["Blood"],
                                       "preprocess": {"min_genes": 20, "min_cells_per_group": 5}}
    cfg["datasets"]["pbmc68k_t"] = {**pbmc, "target": ["CD8+ Cytotoxic T"], "background": ["CD4+/CD25 T Reg"]}
    jobs = _jobs(snakemake(tmp_path, cfg, "-n", "--quiet", "rules"))
    per_dataset = ({"preprocess", "collect", "summary", "latent_features"} | set(cfg["methods"])
                   | {f"{m}_figure" for m in cfg["methods"]})
    assert all(jobs[rule] == 4 for rule in per_dataset) and jobs["all"] == 1
    snakemake(tmp_path, cfg, "results/wu2020_blood/preprocessed.h5ad", "results/pbmc68k_t/preprocessed.h5ad")
    for name in ("wu2020_blood", "pbmc68k_t"):
        pre = ad.read_h5ad(tmp_path / f"results/{name}/preprocessed.h5ad")
        labels = pre.obs[cfg["datasets"][name]["groupby"]].astype(str)
        assert set(labels) == set(cfg["datasets"][name]["target"]) | set(cfg["datasets"][name]["background"])
        np.testing.assert_array_equal(pre.obs["scontrast_target"], labels.isin(cfg["datasets"][name]["target"]))


def _differences(a, b, where: str) -> list[str]:
    """Where two values differ: arrays bitwise (NaN equal to NaN), mappings key by key.

    ``uns[...]['timings']`` (wall-clock seconds of FANGS's phases) is the one value
    expected to differ between runs and is skipped.
    """
    import pandas as pd
    import scipy.sparse as sp

    if isinstance(a, dict) or isinstance(b, dict):
        if not (isinstance(a, dict) and isinstance(b, dict)) or set(a) != set(b):
            return [f"{where}: keys differ"]
        return [d for k in a if k != "timings" for d in _differences(a[k], b[k], f"{where}/{k}")]
    if isinstance(a, pd.DataFrame):
        return [] if a.equals(b) and list(a.dtypes) == list(b.dtypes) else [where]
    if sp.issparse(a) or sp.issparse(b):
        return [] if sp.issparse(a) and sp.issparse(b) and (a != b).nnz == 0 else [where]
    a, b = np.asarray(a), np.asarray(b)
    same = a.shape == b.shape and a.dtype == b.dtype and (
        np.array_equal(a, b, equal_nan=True) if a.dtype.kind in "fc" else np.array_equal(a, b))
    return [] if same else [where]


def _run_differences(ref: Path, other: Path) -> list[str]:
    """Every result file of two run directories compared (benchmark timings aside)."""
    files = sorted(p.relative_to(ref) for p in (ref / "results").rglob("*")
                   if p.is_file() and p.parent.name != "benchmarks")
    assert files, "the reference run has no results"
    diffs = []
    for rel in files:
        a, b = ref / rel, other / rel
        if not b.exists():
            diffs.append(f"{rel}: missing")
        elif rel.suffix == ".h5ad":
            x, y = ad.read_h5ad(a), ad.read_h5ad(b)
            for slot in ("obs", "var"):
                diffs += _differences(getattr(x, slot), getattr(y, slot), f"{rel}:{slot}")
            diffs += _differences(x.X, y.X, f"{rel}:X") if x.X is not None or y.X is not None else []
            for slot in ("obsm", "varm", "layers", "obsp"):
                diffs += _differences(dict(getattr(x, slot)), dict(getattr(y, slot)), f"{rel}:{slot}")
            diffs += _differences(dict(x.uns), dict(y.uns), f"{rel}:uns")
        elif rel.suffix == ".npz":
            with np.load(a) as x, np.load(b) as y:
                diffs += _differences(dict(x), dict(y), str(rel))
        elif a.read_bytes() != b.read_bytes():  # figures and tables: bytewise
            diffs.append(str(rel))
    return diffs


def test_killed_run_resumes_to_identical_results(run, tmp_path):
    """SIGKILL the snakemake process tree mid-run, unlock, rerun with --rerun-incomplete.

    The resumed run's outputs equal the uninterrupted run's bitwise (every rule is
    deterministic for a given seed), which is also the determinism test: this
    directory recomputes every result from scratch.
    """
    ref, cfg = run
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "--configfile",
           str(tmp_path / "config.yaml"), "--cores", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 900
    # kill once a long job is running and some method results already exist
    while proc.poll() is None and time.monotonic() < deadline:
        if list(tmp_path.glob("logs/*/latent_features.log")) and list(tmp_path.glob("results/*/pcpca.h5ad")):
            break
        time.sleep(0.1)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finals = [tmp_path / f"results/{name}/scontrast.h5ad" for name in cfg["datasets"]]
    assert not all(f.exists() for f in finals)
    # no output is a truncated file: anything present reads back
    for f in (tmp_path / "results").rglob("*.h5ad"):
        ad.read_h5ad(f)
    snakemake(tmp_path, cfg, "--unlock")
    snakemake(tmp_path, cfg, "--rerun-incomplete")
    assert _run_differences(ref, tmp_path) == []
    # the temporary files of the killed jobs went with their rerun
    assert not [p for p in (tmp_path / "results").rglob(".*") if p.is_file()]
    for name in cfg["datasets"]:  # the seed and the package versions are recorded with the results
        merged = ad.read_h5ad(tmp_path / f"results/{name}/scontrast.h5ad")
        for method in cfg["methods"]:
            assert merged.uns[method]["random_state"] == cfg["seed"]
            assert {"numpy", "scanpy", "scontrast"} <= set(merged.uns[method]["versions"])


def _logged_warnings(workdir: Path) -> list[tuple[str, str]]:
    """(``<dataset>/<rule>``, message) of every WARNING line of every job's log, once each."""
    import re

    found = set()
    for log in sorted((workdir / "logs").glob("*/*.log")):
        for line in log.read_text().splitlines():
            hit = re.match(r"^\S+ \S+ (\S+) WARNING (.*)$", line)
            if hit:
                found.add((f"{log.parent.name}/{log.stem}", hit.group(2)))
    return sorted(found)


_FLOOR = (r"sparda: p-value at its floor: none of the 9 permutations reached the observed statistic, so p <= 0\.1 is "
          r"a bound")
# Every warning the tiny run logs, each true of its data and settings: (job, pattern, required).
EXPECTED_WARNINGS = [
    # wu2020 names its mitochondrial genes ND1, COX2, ATP6...: the 'MT-' prefix matches none of them
    ("wu2020/preprocess", r"preprocess: mito_prefix 'MT-' matches no gene, so max_pct_mito=20 removed no cell", True),
    # 13 patients give cells to each group and the tiny config declares no replicate
    ("wu2020/preprocess", r"preprocess: obs column 'patient' looks like donors or samples \(13 values in the target "
                          r"group, 13 in the background\) but no replicate is declared", True),
    # n_permutations: 9 and the groups differ: no permutation reaches the observed statistic, p <= 0.1 is a bound
    ("wu2020/sparda", _FLOOR, True),
    ("pbmc68k/sparda", _FLOOR, True),
    # (wu2020's SPARDA chooses the sparse end of its path, one gene: a finding, logged at INFO and in the summary)
    # lambda_grid: [1.0, 0.1] and the smaller value wins: the path ends there
    ("wu2020/quadro", r"quadro: QUADRO: lambda2 chosen at the least penalised end of its path \(0\.1 x the "
                      r"reference\)", True),
    # latent_features (method ensemble on the 2 pPCA dims) chooses K = 1 on wu2020 and K = 3 on pbmc68k, below
    # max_features = 4, every fit settled, and FANGS's features are held by both halves: no warning
]


def test_a_clean_run_logs_only_warnings_true_of_the_data(run):
    """Every warning of the tiny run (both shipped datasets) is listed above with why it is true: a
    warning that cries wolf (one not listed, such as a merge's "stale result" on a first run), or a
    listed one no longer given, fails this test."""
    import re

    workdir, _ = run
    logged = _logged_warnings(workdir)
    unexpected = [(where, message) for where, message in logged
                  if not any(where == w and re.match(p, message) for w, p, _ in EXPECTED_WARNINGS)]
    assert unexpected == []
    missing = [(w, p) for w, p, required in EXPECTED_WARNINGS
               if required and not any(where == w and re.match(p, message) for where, message in logged)]
    assert missing == []
    for w, p, _ in EXPECTED_WARNINGS:  # each pattern stands for one warning
        assert sum(where == w and bool(re.match(p, message)) for where, message in logged) <= 1, (w, p)


# started by every Python process of a run (PYTHONPATH): any figure fails to draw
_FIGURES_FAIL = """
import matplotlib.figure

def _fail(self, *args, **kwargs):
    raise RuntimeError("this figure failed to draw (a test)")

matplotlib.figure.Figure.savefig = _fail
"""


def test_a_figure_that_fails_to_draw_leaves_every_result(tmp_path, monkeypatch):
    """A figure's failure never removes a method's result. The QC figure was an output of the
    preprocess job, so a QC figure that failed to draw (a group label `$\\frac$`) deleted
    preprocessed.h5ad with it; every figure is now a rule of its own."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_FIGURES_FAIL)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")])))
    cfg = tiny_config(methods=["sparda"])
    cfg["datasets"] = {"wu2020": cfg["datasets"]["wu2020"]}
    proc = snakemake(tmp_path, cfg, "--keep-going", check=False)
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    # each failed job's one line (the profile is quiet on snakemake's job blocks, "Error in rule ...")
    assert "scontrast preprocess_figure [dataset=wu2020]: " in output
    assert "scontrast sparda_figure [dataset=wu2020]: " in output
    assert "scontrast preprocess [dataset=wu2020]: " not in output
    assert "this figure failed to draw (a test)" in (tmp_path / "logs/wu2020/preprocess_figure.log").read_text()
    results = tmp_path / "results" / "wu2020"
    for name in ("preprocessed.h5ad", "sparda.h5ad", "scontrast.h5ad", "summary.tsv"):
        assert (results / name).is_file(), name
    assert not (results / "figures" / "preprocess_qc.png").exists()
