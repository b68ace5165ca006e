"""scanpy-style AnnData front ends: ``tl.<method>(adata, ...)`` writes its results into ``adata``.

Each reads the target/background split from ``obs['scontrast_target']`` (set by
``scontrast.preprocess``) and records ``uns[<method>]['params']``, package
versions and the seed.
"""

from ._common import build_estimator, gene_mask, group_matrices, record_params, target_mask
from ._cpca import cpca
from ._fangs import fangs
from ._latent_features import latent_features, samples_from_adata
from ._pcpca import pcpca
from ._quadro import quadro
from ._sparda import sparda

__all__ = [
    "build_estimator", "cpca", "fangs", "gene_mask", "group_matrices", "latent_features", "pcpca", "quadro",
    "record_params", "samples_from_adata", "sparda", "target_mask",
]
