"""Rule latent_features: preprocessed.h5ad (+ the embedding's or SPARDA's delta) -> latent_features.h5ad (delta).

The delta holds uns['latent_features']: the samples ('samples', packed: the ensemble's resampled fits of
the chosen K, or the IBP sampler's kept sweeps), the matrix explained ('input'), their cells, and
(ensemble: stability per K, the chosen K; ibp: traces of every chain,
split R-hat, ESS); rule fangs reads it, and rules collect and fangs_figure read it beside the fangs
delta. Only the block of config latent_features.method is passed on.
"""

from scontrast import io, tl
from scontrast._workflow import run_rule
from scontrast.merge_files import read_merged, used_layers


def main(smk):
    adata = read_merged(smk.input.h5ad, *smk.input.deps, layers=used_layers(smk.params.cfg))
    before = io.slot_keys(adata)
    params = tl.latent_features_params(smk.params.cfg)
    tl.latent_features(adata, **params, random_state=smk.params.seed, n_jobs=smk.threads)
    io.write_h5ad(io.extract_delta(adata, before), smk.output.h5ad)


run_rule(snakemake, main)  # noqa: F821
