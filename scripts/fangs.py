"""Rule fangs: preprocessed.h5ad + rule latent_features's delta (or a samples .npz) -> fangs.h5ad (delta).

The delta holds only what FANGS adds: the sampler's slots stay in latent_features.h5ad, which
rules collect and fangs_figure read beside it. The figure is rule fangs_figure's.
"""

from scontrast import io, tl
from scontrast._workflow import run_rule
from scontrast.merge_files import read_merged


def main(smk):
    if smk.params.samples_file:
        adata = read_merged(smk.input.h5ad, layers=())
        samples = {"samples": smk.input.samples}
    else:  # the sampler's slots are read, not added: they stay out of the delta
        adata = read_merged(smk.input.h5ad, smk.input.samples, layers=())
        samples = {}
    before = io.slot_keys(adata)
    tl.fangs(adata, **samples, **smk.params.cfg, random_state=smk.params.seed, n_jobs=smk.threads)
    io.write_h5ad(io.extract_delta(adata, before), smk.output.h5ad)


run_rule(snakemake, main)  # noqa: F821
