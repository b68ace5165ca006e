"""The documentation: docstring examples run, the API page lists every public name, the configuration
reference covers every key, the README stays a front door."""

from __future__ import annotations

import doctest
import importlib
import inspect
import re
import sys
from pathlib import Path

import matplotlib
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "docs" / "_ext"))

from schema_reference import entries, load  # noqa: E402

matplotlib.use("Agg")

# the modules whose public docstrings carry an Examples section
EXAMPLE_MODULES = [
    "scontrast.preprocess",
    "scontrast.tl._sparda", "scontrast.tl._cpca", "scontrast.tl._pcpca", "scontrast.tl._quadro", "scontrast.tl._fangs",
    "scontrast.tl._pseudobulk",
    "scontrast.pl._sparda", "scontrast.pl._cpca", "scontrast.pl._pcpca", "scontrast.pl._quadro", "scontrast.pl._fangs",
    "scontrast.pl._pseudobulk", "scontrast.pl._preprocess",
    "scontrast.tl._latent_features",
    "scontrast.sparda._estimator", "scontrast.cpca._estimator", "scontrast.cpca._kernel", "scontrast.pcpca._estimator",
    "scontrast.quadro._estimator", "scontrast.latent_features._ensemble", "scontrast.latent_features._estimator",
    "scontrast.fangs._search", "scontrast.fangs._loss", "scontrast.fangs._enrichment", "scontrast.sparda._wasserstein",
    "scontrast.cpca._alpha", "scontrast.pcpca._closed_form", "scontrast.design", "scontrast.quadro._robust",
    "scontrast.latent_features._diagnostics", "scontrast.latent_features._simulate", "scontrast.pseudobulk",
    "scontrast.study._design", "scontrast.sparda._utils", "scontrast.tl._common", "scontrast._matching",
    "scontrast.quadro._screen", "scontrast.study._split", "scontrast.feature_samples", "scontrast.quadro._moments",
    "scontrast.quadro._scores", "scontrast.study._test", "scontrast.datasets", "scontrast.core",
    "scontrast.sparda._stability", "scontrast.sparda._relax", "scontrast.sparda._tighten", "scontrast.pcpca._heldout",
    "scontrast.pcpca._missing", "scontrast.quadro._outer", "scontrast.quadro._solver", "scontrast.latent_features._likelihood",
    "scontrast.fangs._draws", "scontrast.fangs._support", "scontrast.study._study", "scontrast.study._effect",
    "scontrast.study._figure",
]
# the public modules whose names the API page must list (constants aside)
API_MODULES = ["scontrast.tl", "scontrast.pl", "scontrast.sparda", "scontrast.cpca", "scontrast.pcpca", "scontrast.quadro",
               "scontrast.latent_features", "scontrast.fangs", "scontrast.design", "scontrast.pseudobulk", "scontrast.study",
               "scontrast.datasets"]


@pytest.mark.parametrize("name", EXAMPLE_MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    tests = [t for t in doctest.DocTestFinder().find(module, name) if t.examples]
    assert tests, f"{name}: no docstring example found"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    failed, attempted = runner.summarize(verbose=False)
    assert attempted > 0 and failed == 0, f"{name}: {failed} of {attempted} example lines failed (output above)"


def test_the_api_page_lists_every_public_name():
    page = (REPO / "docs" / "api.md").read_text()
    listed = set(re.findall(r"^\s+(scontrast\.[\w.]+)$", page, flags=re.M))
    missing = []
    for name in API_MODULES:
        module = importlib.import_module(name)
        for attr in module.__all__:
            obj = getattr(module, attr)
            if callable(obj) and f"{name}.{attr}" not in listed:
                missing.append(f"{name}.{attr}")
    assert not missing, f"docs/api.md does not list {missing}"
    for entry in listed:  # and every listed name exists
        module, _, attr = entry.rpartition(".")
        assert hasattr(importlib.import_module(module), attr), entry


def _api_entries() -> list[str]:
    return re.findall(r"^\s+(scontrast\.[\w.]+)$", (REPO / "docs" / "api.md").read_text(), flags=re.M)


def test_every_entry_of_the_api_page_has_an_example_that_runs():
    """Every function, estimator and class the API page lists has an ``Examples`` section, in a module
    whose examples ``test_docstring_examples_run`` runs."""
    entries = _api_entries()
    assert len(entries) > 100  # the page's autosummary lists were read
    lacking, not_run = [], []
    for entry in entries:
        module, _, attr = entry.rpartition(".")
        obj = getattr(importlib.import_module(module), attr)
        doc = inspect.getdoc(obj) or ""
        if not re.search(r"^Examples\n-{3,}\n\s*>>> ", doc, flags=re.M):
            lacking.append(entry)
        elif inspect.unwrap(obj).__module__ not in EXAMPLE_MODULES:
            not_run.append(f"{entry} ({inspect.unwrap(obj).__module__})")
    assert not lacking, f"API entries without a docstring Examples section: {lacking}"
    assert not not_run, f"API entries whose module's examples are not run (add it to EXAMPLE_MODULES): {not_run}"


def _keys(block: dict, prefix: str = "") -> set[str]:
    """Dotted keys of a config block, with dataset names as <name> and figure settings at their depth."""
    out = set()
    for key, value in block.items():
        path = f"{prefix}.{key}" if prefix else key
        out.add(path)
        if isinstance(value, dict) and value:
            out |= _keys(value, path)
    return out


def test_the_configuration_reference_covers_every_key_of_the_shipped_config():
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["datasets"] = {"<name>": next(iter(config["datasets"].values()))}
    documented = {path for path, _ in entries(load("config.schema.yaml"), "")}
    for name in ("preprocess", "sparda", "cpca", "pcpca", "quadro", "latent_features", "fangs", "pseudobulk"):
        documented |= {path for path, _ in entries(load(f"{name}.schema.yaml"), name)}
    # a dataset's own preprocess overrides are the preprocess block's keys
    documented |= {f"datasets.<name>.preprocess.{k}" for k in load("preprocess.schema.yaml")["properties"]}
    missing = sorted(_keys(config) - documented)
    assert not missing, f"config.yaml keys absent from the configuration reference: {missing}"


def test_the_readme_is_a_front_door():
    readme = (REPO / "README.md").read_text()
    assert len(readme.encode()) <= 10 * 1024
    # the docs it links to exist
    for target in re.findall(r"\]\(((?:docs/|CONTRIBUTING|CHANGELOG)[^)#]+)\)", readme):
        assert (REPO / target).exists(), target
