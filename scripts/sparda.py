"""Rule sparda: results/{dataset}/preprocessed.h5ad -> sparda.h5ad (delta) + weights/densities figure."""

from scontrast import io
from scontrast._workflow import run_rule
from scontrast.pl._sparda import sparda as plot_sparda
from scontrast.tl._sparda import sparda


def main(smk):
    adata = io.read_h5ad(smk.input.h5ad)
    before = io.slot_keys(adata)
    sparda(adata, **smk.params.cfg, n_jobs=smk.threads, random_state=smk.params.seed)
    io.write_h5ad(io.extract_delta(adata, before), smk.output.h5ad)
    plot_sparda(adata).savefig(smk.output.figure, dpi=120)


run_rule(snakemake, main)  # noqa: F821
