"""Sphinx configuration of the scontrast documentation.

Build (from the repository root, after ``pip install -e ".[docs]"``)::

    .venv/bin/sphinx-build -W -b html docs docs/_build/html
"""

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
# the tutorial and the examples find the shipped data from the repository root
ROOT = HERE.parent
os.environ.setdefault("SCONTRAST_DATA", str(ROOT / "data"))

project = "scontrast"
author = "scontrast developers"
copyright = "scontrast developers"
try:
    from importlib.metadata import version as _version

    release = _version("scontrast")
except Exception:  # a source tree that is not installed
    release = "0.1.0"
version = release

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "schema_reference",
    "plain_docstrings",
]

# Markdown pages (MyST) and executed notebooks in MyST text form (the tutorial)
# .rst first: autosummary writes its generated API pages with the first suffix
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath"]
myst_heading_anchors = 3
nb_execution_mode = "force"
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_merge_streams = True

exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**/.ipynb_checkpoints", "_ext"]
templates_path = ["_templates"]

# docstrings are numpydoc-style; "Writes" lists the AnnData slots a front end fills
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
napoleon_custom_sections = [("Writes", "notes_style"), ("Reads", "notes_style")]
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": False, "show-inheritance": False}
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented"
autodoc_member_order = "bysource"
# type hints name third-party classes (AnnData, Figure) that this site does not document
nitpicky = False

html_theme = "furo"
html_title = f"scontrast {release}"
html_static_path = []
html_show_sourcelink = False
