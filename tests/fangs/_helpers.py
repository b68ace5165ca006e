"""Helpers shared by the FANGS tests."""

from __future__ import annotations

import numpy as np


def rand_fa(rng, n, k, p=0.4):
    return (rng.random((n, k)) < p).astype(np.uint8)
