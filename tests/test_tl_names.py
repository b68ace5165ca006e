"""The ``tl`` front ends' argument names follow scanpy: ``groupby`` reads the split, ``key_added`` names the slots.

``key=`` (the split's former name) is an alias that warns (``FutureWarning``) and gives the same result.
"""

from __future__ import annotations

import anndata as ad
import numpy as np
import pandas as pd
import pytest

from scontrast import tl
from scontrast.core import TARGET_KEY, ScontrastError

QUADRO_FAST = dict(n_genes=5, outer_cv=3, cv=3, lambda_grid=[1.0, 0.1], lambda2=1.0)

# method -> (call with fast parameters, {default slot: the slot under key_added='custom'})
METHODS = {
    "cpca": (lambda a, **kw: tl.cpca(a, genes="all", alpha=[0.0, 1.0], **kw),
             {("obsm", "X_cpca"): ("obsm", "custom"), ("varm", "cPCs"): ("varm", "custom"),
              ("obsm", "X_cpca_alpha1"): ("obsm", "custom_alpha1"), ("uns", "cpca"): ("uns", "custom")}),
    "pcpca": (lambda a, **kw: tl.pcpca(a, genes="all", holdout_fraction=0.0, **kw),
              {("obsm", "X_pcpca"): ("obsm", "custom"), ("varm", "PCPCA_W"): ("varm", "custom"),
               ("uns", "pcpca"): ("uns", "custom")}),
    "sparda": (lambda a, **kw: tl.sparda(a, genes="all", n_permutations=0, lam=0.05, **kw),
               {("var", "sparda_weight"): ("var", "custom_weight"), ("var", "sparda_selected"): ("var", "custom_selected"),
                ("varm", "sparda_directions"): ("varm", "custom_directions"), ("obsm", "X_sparda"): ("obsm", "X_custom"),
                ("uns", "sparda"): ("uns", "custom")}),
    "quadro": (lambda a, **kw: tl.quadro(a, genes="all", **QUADRO_FAST, **kw),
               {("obs", "quadro_score"): ("obs", "custom_score"), ("obs", "quadro_pred"): ("obs", "custom_pred"),
                ("uns", "quadro"): ("uns", "custom")}),
    "fangs": (lambda a, **kw: tl.fangs(a, samples=_samples(a.n_obs), draws=False, n_init=2, **kw),
              {("obsm", "fangs_features"): ("obsm", "custom_features"), ("uns", "fangs"): ("uns", "custom")}),
}


def _samples(n: int) -> list[np.ndarray]:
    """Posterior samples of one feature held by the first 40% of the cells, one cell flipped per sample."""
    rng = np.random.default_rng(1)
    out = []
    for _ in range(6):
        z = (np.arange(n) < 0.4 * n).astype(np.uint8)[:, None].copy()
        z[rng.integers(n)] ^= 1
        out.append(z)
    return out


def _adata(column: str = TARGET_KEY) -> ad.AnnData:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 12))
    X[:30, :3] += 2.0
    a = ad.AnnData(X, var=pd.DataFrame(index=[f"g{i}" for i in range(12)]),
                   obs=pd.DataFrame(index=[f"c{i}" for i in range(60)]))
    a.obs[column] = np.arange(60) < 30
    return a


def _slot(a: ad.AnnData, where: str, name: str):
    return getattr(a, where)[name]


def _same(x, y) -> None:
    if isinstance(x, dict):
        assert set(x) - {"params"} == set(y) - {"params"}
        return
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("method", sorted(METHODS))
def test_groupby_names_the_split_and_key_is_its_deprecated_alias(method):
    call, slots = METHODS[method]
    reference = _adata()
    call(reference, random_state=0)
    (where, name), _ = next(iter(slots.items()))
    expected = _slot(reference, where, name)

    other = _adata("is_case")  # no obs['scontrast_target']: only the named column holds the split
    call(other, groupby="is_case", random_state=0)
    _same(_slot(other, where, name), expected)
    assert other.uns[method]["params"]["groupby"] == "is_case"

    aliased = _adata("is_case")
    with pytest.warns(FutureWarning, match=rf"{method}: 'key' is deprecated .* use 'groupby'"):
        call(aliased, key="is_case", random_state=0)
    _same(_slot(aliased, where, name), expected)
    assert aliased.uns[method]["params"]["groupby"] == "is_case"

    with pytest.raises(ScontrastError, match="'key' is the deprecated name of 'groupby'"), \
            pytest.warns(FutureWarning):
        call(_adata("is_case"), key="is_case", groupby="other", random_state=0)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_key_added_names_every_slot_written(method):
    call, slots = METHODS[method]
    reference = _adata()
    call(reference, random_state=0)
    custom = _adata()
    call(custom, key_added="custom", random_state=0)
    for (where, name), (where_new, name_new) in slots.items():
        assert name in getattr(reference, where), f"{where}['{name}'] is not a default slot"
        assert name not in getattr(custom, where), f"{where}['{name}'] written despite key_added"
        _same(_slot(custom, where_new, name_new), _slot(reference, where, name))
    assert custom.uns["custom"]["params"]["key_added"] == "custom"


def test_quadro_groupby_is_also_a_column_of_labels():
    """QUADRO's groupby reads a boolean split or two labels of another column (``labels``)."""
    a = _adata()
    a.obs["phase"] = pd.Categorical(np.where(a.obs[TARGET_KEY], "S", "G1"))
    tl.quadro(a, groupby="phase", labels=["G1", "S"], genes="all", random_state=0, **QUADRO_FAST)
    b = _adata()
    tl.quadro(b, genes="all", random_state=0, **QUADRO_FAST)
    np.testing.assert_allclose(a.obs["quadro_score"].to_numpy(), b.obs["quadro_score"].to_numpy())
    assert list(a.obs["quadro_pred"].cat.categories) == ["G1", "S"] and b.obs["quadro_pred"].dtype == bool
    with pytest.raises(ScontrastError, match="^labels: needs groupby"):
        tl.quadro(_adata(), labels=["G1", "S"], genes="all", **QUADRO_FAST)


def test_pseudobulk_groupby_and_key_added():
    import scontrast as sct

    rng = np.random.default_rng(0)
    counts = rng.poisson(5.0, size=(120, 60)).astype(np.float32)
    counts[:60, :5] = rng.poisson(20.0, size=(60, 5))
    obs = pd.DataFrame({"condition": np.repeat(["disease", "healthy"], 60),
                        "donor": np.tile(np.repeat(["d1", "d2", "d3"], 20), 2)}, index=[f"c{i}" for i in range(120)])
    raw = ad.AnnData(counts, obs=obs, var=pd.DataFrame(index=[f"g{i}" for i in range(60)]))
    pre = sct.preprocess(raw, groupby="condition", target=["disease"], background=["healthy"], counts="raw",
                         replicate="donor", paired=True, min_genes=10, n_top_genes=30)
    reference = pre.copy()
    tl.pseudobulk(reference)
    pre.obs["is_case"] = pre.obs.pop(TARGET_KEY)
    with pytest.warns(FutureWarning, match="pseudobulk: 'key' is deprecated"):
        tl.pseudobulk(pre, key="is_case", key_added="pb")
    for column in ("log2fc", "pvalue", "padj"):
        assert f"pseudobulk_{column}" not in pre.var
        np.testing.assert_array_equal(pre.var[f"pb_{column}"], reference.var[f"pseudobulk_{column}"])
    assert pre.uns["pb"]["params"]["groupby"] == "is_case" and "pseudobulk" not in pre.uns
    np.testing.assert_array_equal(pre.uns["pb"]["significant_genes"], reference.uns["pseudobulk"]["significant_genes"])
