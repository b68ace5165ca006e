"""QUADRO on sparse and backed input: the same answer as dense, and only the kept genes ever dense."""

import tracemalloc
import warnings

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from scontrast.quadro import QUADRO, _utils, cross_validated_scores
from scontrast.quadro._screen import RayleighScreen, marginal_rayleigh
from scontrast.tl._quadro import quadro


def _sparse_counts(n=400, d=60, density=0.3, seed=0):
    """Log-normalised-looking sparse data of two classes; class 2 differs in genes 0-3."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, random_state=rng, format="csr", dtype=np.float64)
    X.data = np.log1p(rng.gamma(2.0, 2.0, X.nnz))
    y = np.arange(n) % 2 == 0
    X = X.tolil()
    for j in range(4):
        X[np.flatnonzero(y)[: n // 4], j] = np.log1p(rng.gamma(4.0, 3.0, n // 4))
    return sp.csr_matrix(X), y


def test_column_blocks_give_the_moments_of_the_whole_matrix_bitwise(monkeypatch):
    X, y = _sparse_counts(n=301, d=57)
    dense = marginal_rayleigh(X[~y].toarray(), X[y].toarray())
    monkeypatch.setattr(_utils, "BLOCK_ENTRIES", 301 * 3)  # blocks of 2-3 columns, never one alone
    blocks = _utils._column_blocks(301, 57)
    assert min(b.size for b in blocks) >= 2 and np.array_equal(np.concatenate(blocks), np.arange(57))
    assert np.array_equal(marginal_rayleigh(X[~y], X[y]), dense)


def test_sparse_input_gives_the_dense_answer_bitwise():
    X, y = _sparse_counts()
    kw = dict(n_features=8, cv=3, lambda_grid=[1.0, 0.1], lambda2=1.0, random_state=0, estimator="sample")
    a, b = QUADRO(**kw).fit(X.toarray(), y), QUADRO(**kw).fit(X, y)
    for attr in ("features_", "Omega_", "delta_", "threshold_", "oof_decision_", "screen_scores_"):
        assert np.array_equal(getattr(a, attr), getattr(b, attr)), attr
    assert np.array_equal(a.decision_function(X.toarray()), b.decision_function(X))
    screen_d = RayleighScreen(k=8).fit(X.toarray(), y)
    screen_s = RayleighScreen(k=8).fit(X, y)
    assert np.array_equal(screen_d.support_, screen_s.support_) and screen_d.pairs_ == screen_s.pairs_
    # the outer folds, fitted in two threads, each taking its rows when it starts
    r_d = cross_validated_scores(QUADRO(**kw, n_jobs=2), X.toarray(), y, 3, random_state=1)
    r_s = cross_validated_scores(QUADRO(**kw, n_jobs=2), X, y, 3, random_state=1)
    assert np.array_equal(r_d.decision, r_s.decision)


def _adata(n=400, d=60):
    X, y = _sparse_counts(n, d)
    var = pd.DataFrame({"highly_variable": np.ones(d, dtype=bool),
                        "dispersions_norm": np.linspace(2.0, 1.0, d)}, index=[f"g{i}" for i in range(d)])
    obs = pd.DataFrame({"scontrast_target": y}, index=[f"c{i}" for i in range(n)])
    return ad.AnnData(X=X.astype(np.float32), obs=obs, var=var)


FAST = dict(n_genes=40, outer_cv=3, cv=3, lambda_grid=[1.0, 0.1], lambda2=1.0, random_state=0, n_features=8)


@pytest.mark.parametrize("sparse", [True, False])
def test_backed_anndata_gives_the_in_memory_answer(tmp_path, sparse):
    # a backed AnnData (read_h5ad(path, backed='r')) gets the answer of the same data in memory
    a = _adata()
    if not sparse:
        a.X = a.X.toarray()
    a.write_h5ad(tmp_path / "x.h5ad")
    mem, backed = ad.read_h5ad(tmp_path / "x.h5ad"), ad.read_h5ad(tmp_path / "x.h5ad", backed="r")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            quadro(mem, **FAST)
            quadro(backed, **FAST)
        assert np.array_equal(mem.obs["quadro_score"].to_numpy(), backed.obs["quadro_score"].to_numpy())
        assert list(mem.uns["quadro"]["genes"]) == list(backed.uns["quadro"]["genes"])
    finally:
        backed.file.close()


def test_front_end_never_makes_the_candidate_genes_dense(monkeypatch):
    # 3,000 cells x 8,000 candidate genes: dense, 183 MB; sparse (2% non-zero), 6 MB. QUADRO keeps
    # 8 genes per fit and scores co-expression among at most 500: its peak stays far below the dense copy
    rng = np.random.default_rng(0)
    n, d = 3000, 8000
    X = sp.random(n, d, density=0.02, random_state=rng, format="csr", dtype=np.float32)
    X.data = np.log1p(rng.gamma(2.0, 2.0, X.nnz)).astype(np.float32)
    var = pd.DataFrame({"highly_variable": np.ones(d, dtype=bool)}, index=[f"g{i}" for i in range(d)])
    var["dispersions_norm"] = rng.random(d)
    obs = pd.DataFrame({"scontrast_target": np.arange(n) % 2 == 0}, index=[f"c{i}" for i in range(n)])
    a = ad.AnnData(X=X, obs=obs, var=var)
    monkeypatch.setattr(_utils, "BLOCK_ENTRIES", 2**17)  # 1 MB blocks for the screen
    dense_mb = n * d * 8 / 2**20
    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            quadro(a, n_genes=None, outer_cv=2, cv=2, lambda1=0.1, lambda2=0.1, n_features=8, estimator="sample",
                   random_state=0)
        peak_mb = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    assert a.uns["quadro"]["n_candidates"] == d
    assert peak_mb < 0.5 * dense_mb, f"peak {peak_mb:.0f} MB, a dense copy of the candidates is {dense_mb:.0f} MB"


def test_each_fold_takes_its_held_out_block_once(monkeypatch):
    # from a sparse X every take is a pass over all its entries: along the lambda path each fold's
    # held-out block is taken once, not once per point (36 points at the defaults)
    from scontrast.quadro import _crossval

    X, y = _sparse_counts()
    taken = []
    real = _crossval._take

    def counting(M, rows=None, cols=None):
        taken.append(None if rows is None else len(rows))
        return real(M, rows, cols)

    monkeypatch.setattr(_crossval, "_take", counting)
    model = QUADRO(n_features=8, cv=3, lambda_grid=[1.0, 0.3, 0.1], random_state=0, estimator="sample", patience=None)
    model.fit(X, y)
    assert len(model.cv_results_["lambda1"]) == 9  # 9 points x 3 folds scored
    assert len(taken) == 2 * 3  # per fold: its training moments and its held-out block
