"""Shared fixtures: small made-up AnnData objects and the repository paths."""

from __future__ import annotations

import types
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

REPO = Path(__file__).resolve().parents[1]


def make_counts(n_cells=120, n_genes=60, n_mito=3, seed=0, shift_genes=5, fold=4.0, sparse=True):
    """Negative-binomial counts for three groups: 'disease', 'healthy' and 'other'.

    The first ``shift_genes`` genes have a ``fold`` times higher mean in 'disease'; the last
    ``n_mito`` genes are mitochondrial ('MT-' names).
    """
    rng = np.random.default_rng(seed)
    groups = np.array(["disease", "healthy", "other"])[np.arange(n_cells) % 3]
    mu = rng.gamma(2.0, 1.0, size=n_genes)[None, :] * np.ones((n_cells, 1))
    mu[groups == "disease", :shift_genes] *= fold
    counts = rng.negative_binomial(5, 5 / (5 + mu)).astype(np.float32)
    names = [f"gene{i}" for i in range(n_genes - n_mito)] + [f"MT-{i}" for i in range(n_mito)]
    obs = pd.DataFrame({"condition": pd.Categorical(groups)}, index=[f"cell{i}" for i in range(n_cells)])
    X = sp.csr_matrix(counts) if sparse else counts
    return ad.AnnData(X=X, obs=obs, var=pd.DataFrame(index=names))


@pytest.fixture
def counts_adata():
    return make_counts()


@pytest.fixture
def groups():
    return dict(groupby="condition", target=["disease"], background=["healthy"])


def rule_object(inputs: dict, outputs: dict, params: dict, log, rule: str, threads: int = 1):
    """A stand-in for the ``snakemake`` object a rule script receives (named inputs, outputs and params).

    ``inputs``/``outputs`` map names to a path or a list of paths, as in a rule's directives.
    """

    class Files(list):
        pass

    def files(named):
        out = Files([x for v in named.values() for x in (v if isinstance(v, list) else [v])])
        for name, v in named.items():
            setattr(out, name, v)
        return out

    return types.SimpleNamespace(input=files(inputs), output=files(outputs), params=types.SimpleNamespace(**params),
                                 log=[str(log)], rule=rule, wildcards={"dataset": "toy"}, threads=threads)
