"""The Snakemake workflow end to end, on a tiny config in a temporary directory."""

from __future__ import annotations

import subprocess
import sys
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


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: c.update(colour="red"), "config: Additional properties are not allowed ('colour' was unexpected)"),
        (lambda c: c["preprocess"].update(n_top_genes=1), "config.preprocess.n_top_genes: 1 is less than the minimum"),
        (lambda c: c["datasets"]["wu2020"].update(counts="tpm"), "config.datasets.wu2020.counts: 'tpm' is not one of"),
        (lambda c: c["datasets"]["wu2020"].pop("groupby"), "config.datasets.wu2020: 'groupby' is a required property"),
        (lambda c: c["datasets"]["wu2020"]["preprocess"].update(min_gens=3),
         "config datasets.wu2020.preprocess: Additional properties are not allowed ('min_gens' was unexpected)"),
        (lambda c: c.update(seed="zero"), "config.seed: 'zero' is not of type 'integer'"),
    ],
)
def test_bad_config_fails_before_any_job(tmp_path, edit, message):
    cfg = tiny_config()
    edit(cfg)
    proc = snakemake(tmp_path, cfg, check=False)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()


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


def test_missing_input_file(tmp_path):
    cfg = tiny_config()
    cfg["datasets"]["wu2020"]["path"] = str(tmp_path / "nowhere.h5ad")
    proc = snakemake(tmp_path, cfg, check=False)
    assert proc.returncode != 0
    assert "nowhere.h5ad" in proc.stdout + proc.stderr


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
    jobs = _jobs(snakemake(workdir, changed, "-n"))
    # pcpca feeds latent_features (use_rep X_pcpca) -> fangs; each dataset's collect and summary follow
    assert jobs == {"pcpca": 2, "latent_features": 2, "fangs": 2, "collect": 2, "summary": 2, "all": 1}
    changed = yaml.safe_load(yaml.safe_dump(cfg))
    changed["fangs"]["a"] = 1.5
    jobs = _jobs(snakemake(workdir, changed, "-n"))
    assert jobs == {"fangs": 2, "collect": 2, "summary": 2, "all": 1}
    changed = yaml.safe_load(yaml.safe_dump(cfg))
    changed["datasets"]["wu2020"]["preprocess"]["min_cells"] = 4
    jobs = _jobs(snakemake(workdir, changed, "-n"))
    assert jobs["preprocess"] == 1 and jobs["pcpca"] == 1 and jobs["collect"] == 1
    # the dry runs changed nothing: the original config still has nothing to do
    assert "Nothing to be done" in "".join(snakemake(workdir, cfg, "-n").stdout)


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


def test_two_datasets_with_two_contrasts_each(tmp_path):
    cfg = tiny_config()
    wu, pbmc = cfg["datasets"]["wu2020"], cfg["datasets"]["pbmc68k"]
    cfg["datasets"]["wu2020_blood"] = {**wu, "target": ["Tumor"], "background": ["Blood"],
                                       "preprocess": {"min_genes": 20, "min_cells_per_group": 5}}
    cfg["datasets"]["pbmc68k_t"] = {**pbmc, "target": ["CD8+ Cytotoxic T"], "background": ["CD4+/CD25 T Reg"]}
    jobs = _jobs(snakemake(tmp_path, cfg, "-n", "--quiet", "rules"))
    per_dataset = {"preprocess", "collect", "summary", "latent_features"} | set(cfg["methods"])
    assert all(jobs[rule] == 4 for rule in per_dataset) and jobs["all"] == 1
    snakemake(tmp_path, cfg, "results/wu2020_blood/preprocessed.h5ad", "results/pbmc68k_t/preprocessed.h5ad")
    for name in ("wu2020_blood", "pbmc68k_t"):
        pre = ad.read_h5ad(tmp_path / f"results/{name}/preprocessed.h5ad")
        labels = pre.obs[cfg["datasets"][name]["groupby"]].astype(str)
        assert set(labels) == set(cfg["datasets"][name]["target"]) | set(cfg["datasets"][name]["background"])
        np.testing.assert_array_equal(pre.obs["scontrast_target"], labels.isin(cfg["datasets"][name]["target"]))
