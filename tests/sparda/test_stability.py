"""Stability selection over complementary half-subsamples."""


import joblib
import numpy as np
import pytest
import scipy.sparse as sp

from scontrast.core import ScontrastError
from scontrast.sparda._stability import _half_subsamples, stability_selection

from ._helpers import _planted


def test_half_subsamples_are_complementary_pairs():
    rng = np.random.default_rng(0)
    halves = _half_subsamples(11, 5, rng)
    assert len(halves) == 5 and all(h.size == 5 for h in halves)
    for a, b in (halves[0:2], halves[2:4]):
        assert np.intersect1d(a, b).size == 0  # a pair splits one permutation
    assert not np.array_equal(halves[0], halves[2])


def test_stability_selection_frequencies_on_known_support():
    rng = np.random.default_rng(3)
    genes = [2, 5, 9]
    X, Y = _planted(200, 180, 20, genes, "mean", rng, effect=1.0)
    freq, weight = stability_selection(X, Y, lam=0.5, n_subsamples=10, relax_max_iter=20, random_state=0,
                                       return_weights=True)
    assert freq.shape == weight.shape == (20,)
    np.testing.assert_allclose(freq * 10, np.round(freq * 10))  # fractions of the 10 fits
    np.testing.assert_array_equal(freq[genes], 1.0)
    noise = np.delete(np.arange(20), genes)
    assert freq[noise].max() <= 0.2 and freq[noise].mean() <= 0.05
    # the weights of a pure mean shift are the shift direction's, 1/sqrt(3) each up to sampling
    assert weight[genes].min() > 0.35 and weight[noise].max() < 0.05
    # a fixed cardinality gives exactly k genes per fit
    fk = stability_selection(X, Y, k=3, n_subsamples=4, relax_max_iter=20, random_state=1)
    assert fk.sum() == pytest.approx(3.0) and set(np.flatnonzero(fk == 1)) == set(genes)


def test_stability_selection_reproducible_parallel_and_sparse():
    rng = np.random.default_rng(4)
    X, Y = _planted(60, 60, 10, [0, 1], "mean", rng, effect=0.5)
    kw = dict(lam=0.1, n_subsamples=6, relax_max_iter=10, random_state=7)
    f1 = stability_selection(X, Y, **kw)
    # threads rather than worker processes: the same scheduling question without the
    # start-up cost of a process pool
    with joblib.parallel_config(backend="threading"):
        np.testing.assert_array_equal(f1, stability_selection(X, Y, **kw, n_jobs=2))
    np.testing.assert_array_equal(f1, stability_selection(sp.csr_matrix(X), sp.csr_matrix(Y), **kw))
    # a Generator seeded like the int gives the same subsamples and fits
    np.testing.assert_array_equal(f1, stability_selection(X, Y, **dict(kw, random_state=np.random.default_rng(7))))
    # 30 cells per group and a noise-level penalty: the support changes with the subsample
    assert np.any((f1 > 0) & (f1 < 1))
    assert not np.array_equal(f1, stability_selection(X, Y, **dict(kw, random_state=8)))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(), "lam, k"),
        (dict(lam=0.1, n_subsamples=0), "n_subsamples"),
        (dict(lam=0.1, n_jobs=0), "n_jobs"),
        (dict(lam=0.1, n_permutations=9), "n_permutations"),
        (dict(lam=-1.0), "lam: expected"),
        (dict(lam=0.1, max_gene=5), "max_gene: not a parameter"),
        (dict(lam=0.1, random_state="x"), "random_state: expected"),
    ],
)
def test_stability_selection_bad_parameters(kwargs, match):
    X = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(ScontrastError, match="^" + match):
        stability_selection(X, X + 1, **kwargs)
    with pytest.raises(ScontrastError, match="^X: needs at least 4 cells"):
        stability_selection(X[:3], X, lam=0.1)
