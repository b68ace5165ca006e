"""Rule latent_features: preprocessed.h5ad + the embedding's delta -> feature_samples.npz.

The samples file format is documented in ``scontrast.latent_features``.
"""

from scontrast import io
from scontrast._workflow import run_rule
from scontrast.latent_features import save_samples
from scontrast.tl._latent_features import latent_features, samples_from_adata


def main(smk):
    adata = io.read_merged(smk.input.h5ad, smk.input.embedding)
    latent_features(adata, **smk.params.cfg, random_state=smk.params.seed)
    info = adata.uns["latent_features"]
    traces = {k: info[k] for k in ("K", "alpha", "sigma_x", "sigma_a", "sweeps")}
    save_samples(smk.output.npz, samples_from_adata(adata), cell_names=adata.obs_names.to_numpy(),
                 log_joint=info["log_joint"], **traces)


run_rule(snakemake, main)  # noqa: F821
