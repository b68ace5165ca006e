"""Rule latent_features: preprocessed.h5ad + the embedding's delta -> feature_samples.npz.

The samples file format is documented in ``scontrast.latent_features``; rule fangs reads it.
"""

from scontrast import io, tl
from scontrast._workflow import run_rule
from scontrast.latent_features import save_samples


def main(smk):
    adata = io.read_merged(smk.input.h5ad, smk.input.embedding)
    tl.latent_features(adata, **smk.params.cfg, random_state=smk.params.seed)
    info = adata.uns["latent_features"]
    samples = tl.samples_from_adata(adata)
    traces = {k: info[k] for k in ("K", "alpha", "sigma_x", "sigma_a", "sweeps")}
    save_samples(smk.output.npz, samples, cell_names=adata.obs_names.to_numpy(), log_joint=info["log_joint"],
                 **traces)


run_rule(snakemake, main)  # noqa: F821
