"""Shared by the PCPCA tests: correlated made-up groups.

This folder has no ``__init__.py`` on purpose: as a package it would be importable as
``pcpca`` (pytest puts tests/ on sys.path) and hide the reference package ``pcpca`` that the
tests compare with. Its test files therefore carry unique names (``test_pcpca_*.py``), import
this module by its own name, and each declares the ``pair`` fixture it uses (a conftest.py here
would replace tests/conftest.py as the module ``conftest``).
"""

from __future__ import annotations

import numpy as np


def correlated(n, D, seed, shift=0.0, scale=0.5):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, D)) @ rng.normal(size=(D, D)) * scale + shift


def two_groups():
    """The ``pair`` of the tests: a target (150 x 12) and a background (120 x 12), shifted apart."""
    return correlated(150, 12, 0, shift=3.0), correlated(120, 12, 1, shift=-1.0)
