"""What the AnnData front ends share: the group split, gene sets, estimators from params, provenance.

A front end only translates AnnData to arrays and back: it reads the groups and the
gene set here, builds the method's estimator with :func:`build_estimator` (whose
``__init__`` holds every model parameter's one default), fits it, and writes the
slots and :func:`record_params`.
"""

from __future__ import annotations

import warnings
from typing import Any

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..core import TARGET_KEY, ScontrastError, ScontrastWarning, package_versions, result_warnings

__all__ = [
    "TARGET_KEY", "build_estimator", "expression", "fitted_params", "fmt", "gene_mask", "group_matrices", "record_params",
    "renamed", "replicate_design", "replicate_share", "result_warnings", "target_mask",
]

#: a direction whose variance among target cells lies more than this share between replicates is warned
REPLICATE_SHARE_WARN = 0.5

def renamed(new, old, *, new_name: str, old_name: str, default, who: str):
    """The value of the argument ``new_name``, or of its deprecated alias ``old_name`` (``old``, None when not given).

    Passing the alias emits a ``FutureWarning`` naming the new argument (the alias goes in the
    next release); passing both with different values is a one-line error.
    """
    if old is None:
        return new
    warnings.warn(f"{who}: '{old_name}' is deprecated and will be removed in the next release; use "
                  f"'{new_name}'", FutureWarning, stacklevel=3)
    if new != default and new != old:
        raise ScontrastError(f"{who}: '{old_name}' is the deprecated name of '{new_name}'; pass one of them")
    return old


def build_estimator(cls, params: dict[str, Any], **fixed):
    """``cls(**params, **fixed)``, refusing a parameter ``cls`` does not take with one line.

    ``params`` are the user's model parameters (a config block or ``**kwargs`` of a
    ``tl`` function); ``fixed`` are what the front end itself sets (``random_state``,
    ``n_jobs``).

    Examples
    --------
    >>> import scontrast as sct
    >>> from scontrast.cpca import CPCA
    >>> sct.tl.build_estimator(CPCA, {"n_components": 3}, random_state=0).n_components
    3
    >>> try:
    ...     sct.tl.build_estimator(CPCA, {"n_component": 3})
    ... except sct.ScontrastError as err:
    ...     print(str(err)[:50])
    CPCA: unknown parameter(s) ['n_component']; it tak
    """
    valid = cls._get_param_names()
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise ScontrastError(
            f"{cls.__name__}: unknown parameter(s) {unknown}; it takes {[p for p in valid if p not in fixed]}"
        )
    clash = sorted(set(params) & set(fixed))
    if clash:
        raise ScontrastError(f"{cls.__name__}: {clash} are set by the front end, not as model parameters")
    return cls(**params, **{k: v for k, v in fixed.items() if k in valid})


def target_mask(adata: ad.AnnData, key: str = TARGET_KEY, min_cells: int = 1) -> np.ndarray:
    """Boolean (n_obs,) mask of target cells from ``adata.obs[key]``.

    Raises when the column is missing, not boolean, or a group has fewer than
    ``min_cells`` cells.

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> import scontrast as sct
    >>> rng = np.random.default_rng(0)
    >>> var = pd.DataFrame({"highly_variable": [True, True, False, True]}, index=["a", "b", "c", "d"])
    >>> adata = ad.AnnData(rng.normal(size=(10, 4)), var=var)
    >>> adata.obs["scontrast_target"] = np.arange(10) < 4
    >>> int(sct.tl.target_mask(adata).sum())
    4
    """
    if key not in adata.obs:
        raise ScontrastError(f"obs['{key}'] is missing: run scontrast.preprocess first or pass the group column")
    col = adata.obs[key]
    if not pd.api.types.is_bool_dtype(col):
        raise ScontrastError(f"obs['{key}'] must be boolean (True = target), got dtype {col.dtype}")
    mask = col.to_numpy(dtype=bool)
    n_t, n_b = int(mask.sum()), int((~mask).sum())
    if min(n_t, n_b) < min_cells:
        raise ScontrastError(
            f"obs['{key}'] has {n_t} target and {n_b} background cells; at least {min_cells} of each are needed"
        )
    return mask


def replicate_design(adata: ad.AnnData) -> dict | None:
    """The declared replicate design of ``adata`` (by :func:`scontrast.preprocess.preprocess`), or None.

    Returns ``{'column', 'paired', 'summary', 'replicates'}`` where ``replicates`` (n_obs,) str
    is each cell's replicate (``obs['scontrast_replicate']``); None when no replicate is declared
    (the unit is the cell).

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> import scontrast as sct
    >>> rng = np.random.default_rng(0)
    >>> obs = pd.DataFrame({"condition": np.repeat(["disease", "healthy"], 60),
    ...                     "donor": np.tile(np.repeat(["d1", "d2", "d3"], 20), 2)}, index=[f"c{i}" for i in range(120)])
    >>> adata = ad.AnnData(rng.poisson(5.0, size=(120, 100)).astype(np.float32), obs=obs,
    ...                    var=pd.DataFrame(index=[f"g{i}" for i in range(100)]))
    >>> pre = sct.preprocess(adata, groupby="condition", target=["disease"], background=["healthy"], counts="raw",
    ...                      replicate="donor", paired=True, min_genes=10, n_top_genes=50)
    >>> design = sct.tl.replicate_design(pre)
    >>> design["column"], design["paired"], sorted(set(design["replicates"]))
    ('donor', True, ['d1', 'd2', 'd3'])
    >>> sct.tl.replicate_design(ad.AnnData(np.zeros((3, 2)))) is None   # no replicate declared: the cell is the unit
    True
    """
    from ..design import REPLICATE_KEY

    design = adata.uns.get("scontrast", {}).get("design", {})
    if not isinstance(design, dict) or str(design.get("unit", "cell")) != "replicate":
        return None
    if REPLICATE_KEY not in adata.obs:
        raise ScontrastError(f"uns['scontrast']['design'] declares replicates but obs['{REPLICATE_KEY}'] is missing")
    reps = adata.obs[REPLICATE_KEY]
    if reps.isna().any():
        raise ScontrastError(f"obs['{REPLICATE_KEY}']: {int(reps.isna().sum())} cell(s) have no replicate")
    return {"column": str(design["replicate"]), "paired": bool(design["paired"]), "summary": str(design["summary"]),
            "replicates": reps.astype(str).to_numpy()}


def replicate_share(adata: ad.AnnData, scores: np.ndarray, what: str, key: str = TARGET_KEY) -> dict:
    """Share of each direction's variance among the target cells that lies between replicates.

    ``scores`` (n_obs, k) are the cells' coordinates on ``k`` directions (e.g. ``obsm['X_cpca']``).
    With a declared design, returns ``{'replicate_share': (k,), 'design': str}`` and warns
    (``ScontrastWarning``) for each direction above :data:`REPLICATE_SHARE_WARN`: it mostly
    separates replicates (a donor axis) rather than a sub-population they share. Without a
    design, returns {}.
    """
    from ..design import between_replicate_share

    design = replicate_design(adata)
    if design is None:
        return {}
    t = target_mask(adata, key)
    share = between_replicate_share(np.asarray(scores)[t], design["replicates"][t])
    for j in np.flatnonzero(share > REPLICATE_SHARE_WARN):
        warnings.warn(f"{what} {j + 1}: {share[j]:.0%} of its variance among target cells lies between replicates "
                      f"({design['summary']}): it mostly separates donors or samples, not a sub-population they share",
                      ScontrastWarning, stacklevel=2)
    return {"replicate_share": share, "design": design["summary"]}


def gene_mask(adata: ad.AnnData, genes: str = "highly_variable") -> np.ndarray:
    """Boolean (n_vars,) mask of the genes a method uses.

    ``genes`` is ``'all'`` or the name of a boolean ``var`` column such as
    ``'highly_variable'`` or ``'sparda_selected'``.

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> import scontrast as sct
    >>> rng = np.random.default_rng(0)
    >>> var = pd.DataFrame({"highly_variable": [True, True, False, True]}, index=["a", "b", "c", "d"])
    >>> adata = ad.AnnData(rng.normal(size=(10, 4)), var=var)
    >>> adata.obs["scontrast_target"] = np.arange(10) < 4
    >>> sct.tl.gene_mask(adata).tolist()
    [True, True, False, True]
    """
    if genes == "all":
        return np.ones(adata.n_vars, dtype=bool)
    if genes not in adata.var:
        raise ScontrastError(f"gene set '{genes}' is not a var column (have: {list(adata.var.columns)})")
    col = adata.var[genes]
    if not pd.api.types.is_bool_dtype(col):
        raise ScontrastError(f"gene set var['{genes}'] must be a boolean column, got dtype {col.dtype}")
    mask = col.to_numpy(dtype=bool)
    if not mask.any():
        raise ScontrastError(f"gene set var['{genes}'] selects no gene")
    return mask


def expression(adata: ad.AnnData, layer: str | None = None, genes: np.ndarray | None = None):
    """The expression matrix (``X`` or ``layers[layer]``), restricted to the ``genes`` mask or indices.

    Returns a CSR matrix for sparse data (sparse input stays sparse), else an ndarray;
    shape (n_obs, number of genes selected). A missing layer or ``X`` is a one-line error.
    """
    if layer is None:
        M = adata.X
        if M is None:
            raise ScontrastError("X: the AnnData has no X matrix (pass layer=...)")
    elif layer not in adata.layers:
        raise ScontrastError(f"layer: '{layer}' is not a layer of the data (have: {list(adata.layers.keys())})")
    else:
        M = adata.layers[layer]
    if genes is not None:
        M = M[:, genes]
    return sp.csr_matrix(M) if sp.issparse(M) else np.asarray(M)


def group_matrices(
    adata: ad.AnnData,
    genes: str = "highly_variable",
    layer: str | None = None,
    use_rep: str | None = None,
    key: str = TARGET_KEY,
    min_cells: int = 2,
):
    """Split the data into target and background matrices.

    Returns ``(X, Y, mask)``: X (n_target x d) and Y (n_background x d) from
    ``layer`` (``None`` = ``adata.X``) restricted to ``gene_mask(adata, genes)``
    (``mask``, shape (n_vars,)), or from ``obsm[use_rep]`` (then ``mask`` is
    None). Sparse input stays sparse (CSR).

    Examples
    --------
    >>> import numpy as np, pandas as pd, anndata as ad
    >>> import scontrast as sct
    >>> rng = np.random.default_rng(0)
    >>> var = pd.DataFrame({"highly_variable": [True, True, False, True]}, index=["a", "b", "c", "d"])
    >>> adata = ad.AnnData(rng.normal(size=(10, 4)), var=var)
    >>> adata.obs["scontrast_target"] = np.arange(10) < 4
    >>> X_target, X_background, genes = sct.tl.group_matrices(adata)
    >>> X_target.shape, X_background.shape, int(genes.sum())
    ((4, 3), (6, 3), 3)
    """
    is_target = target_mask(adata, key, min_cells)
    if use_rep is not None:
        if use_rep not in adata.obsm:
            raise ScontrastError(f"obsm['{use_rep}'] is missing (have: {list(adata.obsm.keys())})")
        M = np.asarray(adata.obsm[use_rep])
        mask = None
    else:
        mask = gene_mask(adata, genes)
        M = expression(adata, layer, mask)
    return M[is_target], M[~is_target], mask


def _h5_safe(value: Any) -> Any:
    """Make a parameter value storable in h5ad (None is stored as None; mixed lists as strings)."""
    if isinstance(value, dict):
        return {str(k): _h5_safe(v) for k, v in value.items()}
    if isinstance(value, np.ndarray) and value.ndim == 1:
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        items = [_h5_safe(v) for v in value]
        numeric = all(isinstance(v, (int, float, bool, np.number)) for v in items)
        return items if numeric or all(isinstance(v, str) for v in items) else [str(v) for v in items]
    if isinstance(value, np.random.Generator):
        return str(value)
    return value


def fmt(value) -> str:
    """A number as the summary table shows it (4 significant digits; 'nan')."""
    if isinstance(value, (float, np.floating)):
        return "nan" if np.isnan(value) else f"{value:.4g}"
    return str(value)


def fitted_params(model) -> dict[str, Any]:
    """``model.get_params()`` without what the front end sets itself (``random_state``, ``n_jobs``)."""
    return {k: v for k, v in model.get_params().items() if k not in ("random_state", "n_jobs")}


def record_params(adata: ad.AnnData, method: str, params: dict, random_state, warnings: list[str] | None = None,
                  **extra) -> dict:
    """Create ``adata.uns[method]`` with params, package versions, seed and warnings, plus ``extra``.

    ``warnings`` (from :func:`result_warnings`) is stored as ``uns[method]['warnings']``, an
    array of one-line messages (empty when there were none).

    Examples
    --------
    >>> import numpy as np, anndata as ad
    >>> import scontrast as sct
    >>> adata = ad.AnnData(np.zeros((3, 2)))
    >>> entry = sct.tl.record_params(adata, "my_method", {"n_components": 2}, random_state=0, score=0.5)
    >>> sorted(adata.uns["my_method"])
    ['params', 'random_state', 'score', 'versions', 'warnings']
    >>> adata.uns["my_method"]["params"], "numpy" in adata.uns["my_method"]["versions"]
    ({'n_components': 2}, True)
    """
    entry = {
        "params": _h5_safe(dict(params)),
        "versions": package_versions(),
        "random_state": _h5_safe(random_state if isinstance(random_state, (int, np.integer)) or random_state is None
                                 else str(random_state)),
        "warnings": np.array(list(warnings or []), dtype=object).astype(str),
    }
    entry.update(extra)
    adata.uns[method] = entry
    return entry
