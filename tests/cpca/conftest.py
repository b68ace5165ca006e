"""Fixtures of the cPCA tests: one BLAS thread, the contrastive README example, a wide data set."""

from __future__ import annotations

import pytest

from scontrast.cpca._simulate import readme_data, synthetic


@pytest.fixture(autouse=True, scope="module")
def one_blas_thread():
    """One BLAS thread: the CI and development machines share two cores between jobs."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


@pytest.fixture(scope="module")
def readme():
    """The example of the contrastive README: 400 points, 30 dims, four target groups."""
    return readme_data(seed=0)


@pytest.fixture(scope="module")
def wide():
    """d = 300 with heteroscedastic genes, shared factors and a target-only group structure."""
    return synthetic(600, 500, 300, seed=3)
