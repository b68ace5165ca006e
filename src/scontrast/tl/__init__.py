"""scanpy-style AnnData front ends: ``tl.<method>(adata, ...)`` writes its results into ``adata``.

Each reads the target/background split from ``obs['scontrast_target']`` (set by
``scontrast.preprocess``) and records ``uns[<method>]['params']``, package
versions and the seed.
"""

from ..core import lazy_attributes

# each front end (and its method's numerics) loads when first used
_WHERE = {
    "build_estimator": "._common", "gene_mask": "._common", "group_matrices": "._common",
    "record_params": "._common", "target_mask": "._common", "result_warnings": "._common",
    "replicate_design": "._common", "pseudobulk": "._pseudobulk",
    "cpca": "._cpca", "fangs": "._fangs", "latent_features": "._latent_features",
    "latent_features_params": "._latent_features",
    "samples_from_adata": "._latent_features", "pcpca": "._pcpca", "quadro": "._quadro", "sparda": "._sparda",
}
__getattr__, __dir__ = lazy_attributes(__name__, _WHERE)
__all__ = sorted(_WHERE)
