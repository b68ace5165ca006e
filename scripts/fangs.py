"""Rule fangs: preprocessed.h5ad + a feature samples .npz -> fangs.h5ad (delta). The figure is rule fangs_figure's."""

from scontrast import io, tl
from scontrast._workflow import run_rule


def main(smk):
    adata = io.read_h5ad(smk.input.h5ad)
    before = io.slot_keys(adata)
    tl.fangs(adata, samples=smk.input.samples, **smk.params.cfg, random_state=smk.params.seed, n_jobs=smk.threads)
    io.write_h5ad(io.extract_delta(adata, before), smk.output.h5ad)


run_rule(snakemake, main)  # noqa: F821
