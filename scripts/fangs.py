"""Rule fangs: preprocessed.h5ad + rule latent_features's delta (or a samples .npz) -> fangs.h5ad (delta).

With rule latent_features's samples, the delta also carries that rule's slots (samples, input
matrix, uns['latent_features'] with the convergence diagnostics) into the merged scontrast.h5ad.
The figure is rule fangs_figure's.
"""

from scontrast import io, tl
from scontrast._workflow import run_rule


def main(smk):
    adata = io.read_h5ad(smk.input.h5ad)
    before = io.slot_keys(adata)
    if smk.params.samples_file:
        tl.fangs(adata, samples=smk.input.samples, **smk.params.cfg, random_state=smk.params.seed,
                 n_jobs=smk.threads)
    else:
        adata = io.merge(adata, io.read_h5ad(smk.input.samples), names=[f"'{smk.input.samples}'"])
        tl.fangs(adata, **smk.params.cfg, random_state=smk.params.seed, n_jobs=smk.threads)
    io.write_h5ad(io.extract_delta(adata, before), smk.output.h5ad)


run_rule(snakemake, main)  # noqa: F821
