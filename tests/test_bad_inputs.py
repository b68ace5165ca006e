"""Catalogue of bad inputs, each run through the real workflow.

Every case is a dataset of one config; one ``snakemake --keep-going`` run asks for each
case's failing output, then each test checks that the rule printed one line
``scontrast <rule> [dataset=<case>]: <problem>`` naming the input and the problem (the
traceback stays in the log), that the log ends with that line, and that the failing rule
left no output file. Config mistakes fail before any job, with the key named.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import anndata as ad
import h5py
import numpy as np
import pytest
import scipy.sparse as sp
import yaml

from conftest import REPO, make_counts

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
pytestmark = pytest.mark.workflow

GROUPS = dict(groupby="condition", target=["disease"], background=["healthy"], counts="raw")
# small data: keep every gene and cell the QC would keep, 20 HVGs
PRE = dict(min_genes=1, min_cells=1, n_top_genes=20, min_cells_per_group=5)


@dataclass
class Case:
    rule: str                          # the rule that must fail
    write: Callable[[Path], None]      # writes the dataset's input file at the given path
    expect: list[str]                  # fragments of the one-line message
    dataset: dict = field(default_factory=dict)   # overrides of the dataset's config entry


def _edit(fn: Callable[[ad.AnnData], ad.AnnData | None], **kw) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        a = make_counts(**kw)
        a = fn(a) or a
        a.write_h5ad(path)
    return write


def _truncated(path: Path) -> None:
    make_counts().write_h5ad(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _not_anndata(path: Path) -> None:
    with h5py.File(path, "w") as fh:
        fh["expression"] = np.ones((5, 5))


def _text(path: Path) -> None:
    path.write_text("cell,gene1,gene2\nc1,1,2\n")


def _set_x(value_fn):
    def fn(a):
        X = a.X.toarray()
        value_fn(X)
        a.X = X
    return fn


def _dup_names(axis):
    def fn(a):
        names = list(a.obs_names if axis == "obs" else a.var_names)
        names[1] = names[0]
        if axis == "obs":
            a.obs_names = names
        else:
            a.var_names = names
    return fn


def _zero_target(a):
    X = a.X.toarray()
    X[(a.obs["condition"] == "disease").to_numpy()] = 0
    a.X = sp.csr_matrix(X)


def _few_target(a):
    keep = (a.obs["condition"] != "disease").to_numpy() | (np.arange(a.n_obs) < 9)  # 3 disease cells
    return a[keep].copy()


def _batches(n_b2: int):
    """obs['batch']: 'b1' everywhere but the first ``n_b2`` cells of the contrast ('b2')."""
    def fn(a):
        in_contrast = np.cumsum(a.obs["condition"].isin(["disease", "healthy"]).to_numpy())
        a.obs["batch"] = np.where(in_contrast <= n_b2, "b2", "b1")
    return fn


def _mito_heavy(a):
    X = a.X.toarray()
    X[:, -3:] += 1  # every cell has mitochondrial counts: max_pct_mito=0 removes them all
    a.X = sp.csr_matrix(X)


def _half_few_genes_half_mito(a):
    """Of the contrast's 80 cells, 40 with 2 detected genes (below min_genes=5) and 40 mostly mitochondrial."""
    X = a.X.toarray()
    rows = np.flatnonzero(a.obs["condition"].isin(["disease", "healthy"]).to_numpy())
    few, mito = rows[::2], rows[1::2]
    X[few] = 0
    X[few, :2] = 1
    X[mito, -3:] = 5000
    a.X = sp.csr_matrix(X)


def _corrupt(key: str, edit: Callable[[np.ndarray], None], group: str = "X") -> Callable[[Path], None]:
    """A valid input whose sparse ``group`` (X or a layer) has one of its arrays edited with h5py."""
    def write(path: Path) -> None:
        a = make_counts()
        a.layers["counts"] = a.X.copy()
        a.write_h5ad(path)
        with h5py.File(path, "a") as fh:
            values = fh[group][key][:]
            edit(values)
            del fh[group][key]
            fh[group][key] = values
    return write


def _swap_rows(v):
    v[10], v[11] = v[11], v[10]


def _with_hdf5(add: Callable[[h5py.File, Path], None]) -> Callable[[Path], None]:
    """A valid input file to which ``add(file, folder)`` adds an object with h5py."""
    def write(path: Path) -> None:
        make_counts().write_h5ad(path)
        with h5py.File(path, "a") as fh:
            add(fh, path.parent)
    return write


def _external_storage(fh, folder):
    secret = folder / "secret.txt"
    secret.write_bytes(b"password=hunter2\n")
    fh.create_dataset("uns/notes", shape=(17,), dtype="u1", external=[(str(secret), 0, 17)])


def _external_link(fh, folder):
    with h5py.File(folder / "elsewhere.h5", "w") as other:
        other["x"] = np.arange(3)
    fh["uns/linked"] = h5py.ExternalLink(str(folder / "elsewhere.h5"), "/x")


def _virtual(fh, folder):
    with h5py.File(folder / "source.h5", "w") as other:
        other["x"] = np.arange(10.0)
    layout = h5py.VirtualLayout(shape=(10,), dtype="f8")
    layout[:] = h5py.VirtualSource(str(folder / "source.h5"), "x", shape=(10,))
    fh.create_virtual_dataset("uns/virtual", layout)


def _gzip_bomb(fh, folder):
    """300 MiB of zeros in a few hundred KB: over io.BOMB_FLOOR_BYTES, ~1000x compressed."""
    ds = fh.create_dataset("uns/bomb", shape=(75 * 2**20,), dtype="f4", chunks=(2**22,), compression="gzip")
    zeros = np.zeros(2**22, dtype="f4")
    for start in range(0, ds.shape[0], 2**22):
        stop = min(start + 2**22, ds.shape[0])
        ds[start:stop] = zeros[: stop - start]


CASES = {
    # preprocess: untrusted files (the message names the object; nothing of it is read)
    "external_storage": Case("preprocess", _with_hdf5(_external_storage),
                             ["external_storage.h5ad", "dataset /uns/notes keeps its data in the external file",
                              "secret.txt", "refused"]),
    "external_link": Case("preprocess", _with_hdf5(_external_link),
                          ["external_link.h5ad", "/uns/linked is an external link to", "elsewhere.h5"]),
    "virtual_dataset": Case("preprocess", _with_hdf5(_virtual),
                            ["virtual_dataset.h5ad", "dataset /uns/virtual is a virtual dataset"]),
    "gzip_bomb": Case("preprocess", _with_hdf5(_gzip_bomb),
                      ["gzip_bomb.h5ad", "dataset /uns/bomb takes 300 MB once read", "decompression bomb"]),
    # preprocess: the input file and the groups
    "truncated": Case("preprocess", _truncated, ["truncated.h5ad", "not a readable AnnData", "truncated file"]),
    "not_anndata": Case("preprocess", _not_anndata, ["not_anndata.h5ad", "not a readable AnnData"]),
    "text_file": Case("preprocess", _text, ["text_file.h5ad", "not HDF5"]),
    "no_column": Case("preprocess", _edit(lambda a: None), ["obs column 'genotype' (groupby) is absent"],
                      {"groupby": "genotype"}),
    "no_target": Case("preprocess", _edit(lambda a: None), ["target label(s) ['sick'] not found in obs['condition']"],
                      {"target": ["sick"]}),
    "no_background": Case("preprocess", _edit(lambda a: None),
                          ["background label(s) ['control'] not found in obs['condition']"], {"background": ["control"]}),
    "few_cells": Case("preprocess", _edit(_few_target), ["target group has 3 cells", "min_cells_per_group=5"]),
    "nan": Case("preprocess", _edit(_set_x(lambda X: X.__setitem__((0, 3), np.nan))), ["X contains 1 NaN or infinite"]),
    "inf": Case("preprocess", _edit(_set_x(lambda X: X.__setitem__((4, 0), np.inf))), ["X contains 1 NaN or infinite"]),
    "negative_raw": Case("preprocess", _edit(_set_x(lambda X: X.__setitem__((0, 0), -1.0))),
                         ["negative values but counts: raw was declared"]),
    "fractional_raw": Case("preprocess", _edit(_set_x(lambda X: X.__setitem__((0, 0), 0.5))),
                           ["non-integer values but counts: raw was declared"]),
    "counts_as_normalized": Case("preprocess", _edit(_set_x(lambda X: X.__imul__(10))),
                                 ["holds integers up to", "looks like raw counts, declare counts: raw"],
                                 {"counts": "normalized"}),
    "all_zero_genes": Case("preprocess", _edit(_set_x(lambda X: X.__setitem__(slice(None), 0.0))),
                           ["no cell has at least min_genes=1 detected genes"]),
    "zero_target_cells": Case("preprocess", _edit(_zero_target), ["target group has 0 cells after QC (of 40)",
                                                                  "; removed: 40 below min_genes=1"]),
    # QC settings that leave nothing: which setting removed what, against what the cells hold
    "qc_min_genes_all": Case("preprocess", _edit(lambda a: None),
                             ["min_genes=5000 removed all 80 cells of the two groups (median genes per cell"],
                             {"preprocess": {**PRE, "min_genes": 5000}}),
    "qc_mito_all": Case("preprocess", _edit(_mito_heavy),
                        ["QC removed all 80 cells of the two groups: max_pct_mito=0 removed 80 (their mitochondrial "
                         "share: median"], {"preprocess": {**PRE, "max_pct_mito": 0}}),
    "qc_both_all": Case("preprocess", _edit(_half_few_genes_half_mito),
                        ["QC removed all 80 cells of the two groups: min_genes=5 removed 40 (median genes per cell",
                         "max_pct_mito=20 removed 40 (their mitochondrial share: median"],
                        {"preprocess": {**PRE, "min_genes": 5, "max_pct_mito": 20}}),
    "qc_min_cells_all": Case("preprocess", _edit(lambda a: None),
                             ["fewer than 2 genes are detected in at least min_cells=1000 cells: min_cells=1000 removed "
                              "60 of 60 genes (the most cells a gene is detected in: 79 of the 79 cells QC kept)"],
                             {"preprocess": {**PRE, "min_cells": 1000}}),
    # crafted sparse arrays (each was a message far from the cause, or a crash): one line naming the matrix
    "index_out_of_range": Case("preprocess", _corrupt("indices", lambda v: v.__setitem__(5, 5000)),
                               ["index_out_of_range.h5ad': X: 1 column index(es) are out of range (up to 5000; the "
                                "matrix has 60 columns): a corrupted sparse matrix"]),
    "negative_index": Case("preprocess", _corrupt("indices", lambda v: v.__setitem__(5, -3)),
                           ["negative_index.h5ad': X: 1 column index(es) are negative (e.g. -3)"]),
    "indptr_decreasing": Case("preprocess", _corrupt("indptr", _swap_rows),
                              ["indptr_decreasing.h5ad': X: indptr decreases at row 10 ("]),
    "indptr_last": Case("preprocess", _corrupt("indptr", lambda v: v.__setitem__(-1, v[-1] - 7)),
                        ["indptr_last.h5ad': X: indptr ends at", "column indices and", "values are stored"]),
    "layer_out_of_range": Case("preprocess", _corrupt("indices", lambda v: v.__setitem__(0, 61), "layers/counts"),
                               ["layer_out_of_range.h5ad': layers['counts']: 1 column index(es) are out of range"]),
    "dup_cells": Case("preprocess", _edit(_dup_names("obs")), ["dup_cells.h5ad", "duplicated cell (obs) names"]),
    "dup_genes": Case("preprocess", _edit(_dup_names("var")), ["dup_genes.h5ad", "duplicated gene (var) names"]),
    "single_gene": Case("preprocess", _edit(lambda a: None, n_genes=1, n_mito=0, shift_genes=1),
                        ["fewer than 2 genes"]),
    # methods, after a preprocessing that succeeds
    "cpca_components": Case("cpca", _edit(lambda a: None, n_genes=3, n_mito=0, shift_genes=1),
                            ["selects 3 gene(s), fewer than n_components=4"]),
    "pcpca_gamma": Case("pcpca", _edit(lambda a: None),
                        ["gamma_prime=0.999", "is not admissible", "need gamma_prime < 0.66"]),
    "quadro_one_class": Case("quadro", _edit(_batches(0)), ["obs['batch'] holds 1 labels ['b1']", "two classes"]),
    "quadro_few_cells": Case("quadro", _edit(_batches(3)), ["obs['batch'] has", "'b2': 3", "at least 4 of each"]),
    "fangs_rows": Case("fangs", _edit(lambda a: None),
                       ["fangs_rows.npz' has 50 rows and no cell names, but the data has 79 cells"]),
    "fangs_not_binary": Case("fangs", _edit(lambda a: None),
                             ["fangs_not_binary.npz", "is not binary: it holds 1 entries other than 0/1"]),
}


def _fangs_samples(path: Path, case: str) -> None:
    """Feature samples of the shipped .npz format: too few rows, or entries other than 0/1."""
    rng = np.random.default_rng(0)
    Z = (rng.random((79, 3)) < 0.4).astype(np.int8)  # the case's data keeps 79 cells
    if case == "fangs_rows":
        Z = Z[:50]
    else:
        Z[0, 0] = 2
    np.savez(path, format=np.array("scontrast.feature_samples"), version=np.array(1), Z=Z,
             n_features=np.array([2, 1]))


def _stale_input(path: Path) -> None:
    """A finished scontrast.h5ad (cPCA with alpha=5) with stale slots of other methods, as a user may feed back in."""
    from scontrast import tl
    from scontrast.preprocess import preprocess

    done = preprocess(make_counts(), **{k: v for k, v in GROUPS.items()}, **PRE)
    tl.cpca(done, n_components=4, alpha=5.0, random_state=0)
    done.obs["quadro_score"] = -1.0
    done.var["sparda_weight"] = 99.0
    done.uns["quadro"] = {"stale": True}
    done.write_h5ad(path)


# An orphan a killed preprocessing left (SIGKILL during write_h5ad): the next run removes it.
ORPHAN = "results/cpca_components/.preprocessed.h5ad.k1ll3d_x.tmp"
EXTRA_TARGETS = ["results/stale_input/scontrast.h5ad", "results/method_cannot_run/cpca.h5ad"]


def _outputs(case: str, rule: str) -> list[str]:
    out = f"results/{case}/{rule}.h5ad" if rule != "preprocess" else f"results/{case}/preprocessed.h5ad"
    return [out]


def _config(inputs: Path) -> dict:
    datasets = {}
    for name, case in CASES.items():
        path = inputs / f"{name}.h5ad"
        case.write(path)
        entry = {"path": str(path), **GROUPS, "preprocess": dict(PRE)}
        entry.update(case.dataset)
        datasets[name] = entry
    for name in ("fangs_rows", "fangs_not_binary"):
        _fangs_samples(inputs / f"{name}.npz", name)
    # runs that must succeed: a finished result fed back in, and the data of the method-failure run
    _stale_input(inputs / "stale_input.h5ad")
    datasets["stale_input"] = {"path": str(inputs / "stale_input.h5ad"), **GROUPS, "layer": "counts",
                               "preprocess": dict(PRE)}
    make_counts().write_h5ad(inputs / "method_cannot_run.h5ad")
    datasets["method_cannot_run"] = {"path": str(inputs / "method_cannot_run.h5ad"), **GROUPS, "preprocess": dict(PRE)}
    return {
        "datasets": datasets,
        "seed": 0,
        "methods": ["cpca"],
        "cpca": {"n_components": 4, "alpha": 1.0},
        "pcpca": {"gamma_prime": 0.999},
        "sparda": {"n_permutations": 0, "lam": 0.1},
        "quadro": {"groupby": "batch", "outer_cv": 2, "cv": 2, "nested": False, "lambda_grid": [1.0]},
        "fangs": {"samples": str(inputs / "{dataset}.npz"), "n_init": 2, "n_iter": 10},
    }


def _run(workdir: Path, cfg: dict, *targets: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    (workdir / "config.yaml").write_text(yaml.safe_dump(cfg))
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--configfile", str(workdir / "config.yaml"),
           "--cores", "2", *targets]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """One keep-going run asking for every case's failing output."""
    workdir = tmp_path_factory.mktemp("bad")
    inputs = workdir / "inputs"
    inputs.mkdir()
    cfg = _config(inputs)
    (workdir / ORPHAN).parent.mkdir(parents=True)
    (workdir / ORPHAN).write_bytes(b"\x89HDF half written")
    targets = [t for name, case in CASES.items() for t in _outputs(name, case.rule)] + EXTRA_TARGETS
    proc = _run(workdir, cfg, "--keep-going", *targets)
    assert proc.returncode != 0
    return workdir, proc.stdout + proc.stderr, cfg


def test_catalogue_is_large_enough():
    assert len(CASES) + len(CONFIG_CASES) + 1 >= 20  # + the missing input file


def test_orphaned_temporary_file_removed_by_the_next_run(batch):
    workdir, _, _ = batch
    assert (workdir / "results/cpca_components/preprocessed.h5ad").exists()
    assert not (workdir / ORPHAN).exists()
    assert "left by a killed job" in (workdir / "logs/cpca_components/preprocess.log").read_text()


def test_finished_result_fed_back_gives_fresh_results(batch):
    """scontrast.h5ad (cPCA alpha=5, stale QUADRO/SPARDA slots) as input: only this run's results come out."""
    workdir, output, _ = batch
    assert "[dataset=stale_input]:" not in output  # no job of it failed (warning lines name it too, without a colon)
    out = ad.read_h5ad(workdir / "results/stale_input/scontrast.h5ad")
    delta = ad.read_h5ad(workdir / "results/stale_input/cpca.h5ad")
    assert out.uns["cpca"]["params"]["alpha"] == 1.0  # this run's config, not the input's 5.0
    np.testing.assert_array_equal(out.obsm["X_cpca"], delta.obsm["X_cpca"])
    stale = ad.read_h5ad(workdir / "inputs/stale_input.h5ad")
    assert not np.allclose(out.obsm["X_cpca"], stale.obsm["X_cpca"][: out.n_obs])
    # the slots of methods this run did not run are not carried over from the input
    assert "quadro_score" not in out.obs and "sparda_weight" not in out.var and "quadro" not in out.uns
    assert not [k for k in out.obsm if k.startswith("X_cpca_alpha") and k not in delta.obsm]


@pytest.fixture(scope="module")
def cannot_run(batch):
    """A second run: SPARDA recorded that it could not run; QUADRO on SPARDA's genes; cPCA fine.

    The recorded SPARDA delta stands for a method raising ``io.CannotRun`` (tests/test_run_rule.py
    checks that step): it is written here, newer than the preprocessed data, so this run keeps it.
    """
    from scontrast import io

    workdir, _, cfg = batch
    base = workdir / "results/method_cannot_run/preprocessed.h5ad"
    io.write_h5ad(io.failure_delta(base, "sparda", "divergence: the groups do not differ"),
                  workdir / "results/method_cannot_run/sparda.h5ad")
    cfg = {**cfg, "methods": ["sparda", "cpca", "quadro"], "quadro": {**cfg["quadro"], "genes": "sparda_selected"}}
    proc = _run(workdir, cfg, "--keep-going", "results/method_cannot_run/scontrast.h5ad",
                "results/method_cannot_run/summary.tsv", "results/method_cannot_run/figures/quadro.png")
    return workdir, proc


def test_method_that_cannot_run_costs_nothing_else(cannot_run):
    workdir, proc = cannot_run
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0  # the run reports it: the figure of a method that did not run fails
    res = workdir / "results/method_cannot_run"
    recorded = ("scontrast quadro [dataset=method_cannot_run]: did not run: 'results/method_cannot_run/sparda.h5ad' "
                "records that sparda did not run on this dataset: divergence: the groups do not differ")
    assert recorded in output
    figure = ("scontrast quadro_figure [dataset=method_cannot_run]: 'results/method_cannot_run/quadro.h5ad' records "
              "that quadro did not run on this dataset")
    assert figure in output
    assert not (res / "figures/quadro.png").exists()
    assert not (workdir / "logs/method_cannot_run/sparda.log").exists()  # the recorded delta is kept, not rerun
    out = ad.read_h5ad(res / "scontrast.h5ad")
    assert "X_cpca" in out.obsm and "cpca" in out.uns  # the other method's results are kept
    failed = dict(out.uns["scontrast"]["failed"])
    assert failed["sparda"] == "divergence: the groups do not differ"
    assert failed["quadro"].startswith("'results/method_cannot_run/sparda.h5ad' records that sparda did not run")
    assert "quadro" not in out.uns and "sparda_selected" not in out.var
    table = (res / "summary.tsv").read_text()
    assert "cpca\talphas chosen" in table


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_one_line_and_no_output(batch, name):
    workdir, output, _ = batch
    case = CASES[name]
    prefix = f"scontrast {case.rule} [dataset={name}]: "
    # one line; the profile's show-failed-logs prints the job's log again, hence the same line twice
    lines = sorted({ln for ln in output.splitlines() if ln.startswith(prefix)})
    assert len(lines) == 1, f"no one-line error for {name}:\n{output[-3000:]}"
    line = lines[0]
    for fragment in case.expect:
        assert fragment in line, (fragment, line)
    assert "Traceback" not in line
    log = (workdir / f"logs/{name}/{case.rule}.log").read_text()
    assert log.rstrip("\n").splitlines()[-1] == line  # the log ends with the same line, after the traceback
    assert "Traceback" in log
    for out in _outputs(name, case.rule):
        assert not (workdir / out).exists(), out
    # nothing of the failing rule anywhere: only the files of the preprocessing before it, if any
    left = sorted(p.name for p in (workdir / "results" / name).rglob("*") if p.is_file())
    # (the QC figure is rule preprocess_figure's, which the batch does not ask for)
    assert left == ([] if case.rule == "preprocess" else ["preprocess.tsv", "preprocessed.h5ad"])


CONFIG_CASES = [
    (lambda c: c.update(colour="red"), "config: Additional properties are not allowed ('colour' was unexpected)"),
    (lambda c: c["sparda"].update(lamda=0.1), "config.sparda: Additional properties are not allowed ('lamda' was"),
    (lambda c: c["preprocess"].update(n_top_genes=1), "config.preprocess.n_top_genes: 1 is less than the minimum"),
    (lambda c: c["cpca"].update(n_components="two"), "config.cpca.n_components: 'two' is not of type 'integer'"),
    (lambda c: c.update(seed="zero"), "config.seed: 'zero' is not of type 'integer'"),
    (lambda c: c["datasets"]["wu2020"].update(counts="log2"), "config.datasets.wu2020.counts: 'log2' is not one of"),
    (lambda c: c["datasets"]["wu2020"].pop("groupby"), "config.datasets.wu2020: 'groupby' is a required property"),
    (lambda c: c["datasets"]["wu2020"]["preprocess"].update(min_gens=3),
     "config datasets.wu2020.preprocess: Additional properties are not allowed ('min_gens' was unexpected)"),
    (lambda c: c.update(methods=["sparda", "umap"]), "config.methods.1: 'umap' is not one of"),
    (lambda c: c["pcpca"].update(gamma_prime=1.5), "config.pcpca.gamma_prime: 1.5 is greater than or equal to"),
    (lambda c: c.update(seed=2**63), "config.seed: 9223372036854775808 is greater than the maximum of 9223372036854775807"),
    # counts bounded to what 24 GB and a day allow (scontrast.bounds; tests/test_bounds.py checks every key)
    (lambda c: c["sparda"].update(n_permutations=10**9),
     "config.sparda.n_permutations: 1000000000 is greater than the maximum of 100000"),
    (lambda c: c["fangs"].update(n_init=10**9), "config.fangs.n_init: 1000000000 is greater than the maximum of 1000"),
    (lambda c: c["latent_features"].setdefault("ibp", {}).update(n_iter=10**9),
     "config.latent_features.ibp.n_iter: 1000000000 is greater than the maximum of 100000"),
    (lambda c: c["latent_features"].setdefault("ibp", {}).update(max_features=10**6),
     "config.latent_features.ibp.max_features: 1000000 is greater than the maximum of 1000"),
    (lambda c: c["latent_features"].setdefault("ensemble", {}).update(max_features=13),
     "config.latent_features.ensemble.max_features: 13 is greater than the maximum of 12"),
    # Gibbs settings beside method ensemble would be silently unused: they belong in the ibp block
    (lambda c: c["latent_features"].update(n_iter=200),
     "config.latent_features: Additional properties are not allowed ('n_iter' was unexpected)"),
    # a sampler move the package no longer has: a config that still sets it is refused by name
    (lambda c: c["latent_features"].setdefault("ibp", {}).update(split_merge_moves=0),
     "config.latent_features.ibp: Additional properties are not allowed ('split_merge_moves' was unexpected)"),
    (lambda c: c["datasets"].update({2020: c["datasets"].pop("wu2020")}),
     "config.datasets: dataset name 2020 is not a string (YAML reads it as int); quote it: '2020':"),
    # a folder name holds at most 255 bytes: a 300-character name failed with OSError at its first job
    (lambda c: c["datasets"].update({"wu2020" + "x" * 294: c["datasets"].pop("wu2020")}),
     "config.datasets: dataset name 'wu2020xxxxxxxxxxxxxx...' is 300 characters long, more than 241"),
    (lambda c: c["fangs"].update(samples="/nonexistent/samples.npz"),
     "config.fangs.samples: '/nonexistent/samples.npz' does not exist (no such file)"),
]


def _shipped_config() -> dict:
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    for ds in cfg["datasets"].values():
        ds["path"] = str(REPO / ds["path"])
    return cfg


@pytest.mark.parametrize("edit, message", CONFIG_CASES)
def test_bad_config_fails_before_any_job(tmp_path, edit, message):
    cfg = _shipped_config()
    edit(cfg)
    proc = _run(tmp_path, cfg, "-n")  # a dry run: a case that stopped failing ends at once, not after every job
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()


def test_missing_input_file(tmp_path):
    cfg = _shipped_config()
    cfg["datasets"]["wu2020"]["path"] = str(tmp_path / "nowhere.h5ad")
    proc = _run(tmp_path, cfg)
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert f"config.datasets.wu2020.path: '{tmp_path / 'nowhere.h5ad'}' does not exist (no such file)" in output
    assert "MissingInputException" not in output
    assert not (tmp_path / "results").exists()


def _unreadable(path: Path) -> None:
    make_counts().write_h5ad(path)
    path.chmod(0)


# Input paths that are not an existing, regular, readable file: refused in one line before any job,
# never opened (a FIFO hung the run: a job's memory request opened it with h5py, which waits for a writer).
PATH_CASES = {
    "fifo": (lambda p: os.mkfifo(p), "is not a regular file (a FIFO)"),
    "directory": (lambda p: p.mkdir(), "is not a regular file (a directory)"),
    "dangling_link": (lambda p: p.symlink_to(p.parent / "gone.h5ad"), "is a symbolic link to '"),
    "device_link": (lambda p: p.symlink_to("/dev/zero"), "is not a regular file (a character device)"),
    "not_a_folder": (None, "cannot be reached (not a directory)"),
    "unreadable": (_unreadable, "is not readable (permission denied)"),
}


@pytest.mark.parametrize("name", list(PATH_CASES))
def test_bad_input_path_fails_before_any_job(tmp_path, name):
    if name == "unreadable" and os.geteuid() == 0:
        pytest.skip("root reads any file")
    make, reason = PATH_CASES[name]
    path = tmp_path / f"{name}.h5ad"
    if make is None:  # a file where the path needs a folder
        (tmp_path / "plain").write_text("")
        path = tmp_path / "plain" / "x.h5ad"
    else:
        make(path)
    cfg = _shipped_config()
    cfg["datasets"]["wu2020"]["path"] = str(path)
    proc = _run(tmp_path, cfg, "-n", timeout=300)  # before the check, a FIFO hung even the dry run
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"config.datasets.wu2020.path: '{path}' {reason}" in output, output[-2000:]
    assert "MissingInputException" not in output
    assert not (tmp_path / "results").exists()


def test_fifo_input_does_not_hang_a_run(tmp_path):
    """The real run (not a dry run) stops at once on a FIFO, before any job."""
    fifo = tmp_path / "fifo.h5ad"
    os.mkfifo(fifo)
    cfg = _shipped_config()
    cfg["datasets"]["wu2020"]["path"] = str(fifo)
    proc = _run(tmp_path, cfg, timeout=300)
    assert proc.returncode != 0
    assert f"config.datasets.wu2020.path: '{fifo}' is not a regular file (a FIFO)" in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()


def test_longest_dataset_name_plans_every_job(tmp_path):
    """A name of 241 characters (what a folder name holds, less a temporary sibling's 14) passes."""
    cfg = _shipped_config()
    name = "w" * 237 + "_end"  # not periodic at its end (snakemake refuses such wildcard values)
    cfg["datasets"] = {name: cfg["datasets"]["wu2020"]}
    proc = _run(tmp_path, cfg, "-n", timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_largest_seed_passes_before_any_job(tmp_path):
    """2**63 - 1 (int64, what uns stores; numpy's default_rng takes it) plans every job; 2**63 fails above."""
    cfg = _shipped_config()
    cfg["seed"] = 2**63 - 1
    proc = _run(tmp_path, cfg, "-n")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "sparda" in proc.stdout and "quadro" in proc.stdout
