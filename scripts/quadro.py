"""Rule quadro: results/{dataset}/preprocessed.h5ad (+ SPARDA's delta for its genes) -> quadro.h5ad (delta)."""

from scontrast import io, tl
from scontrast._workflow import run_rule


def main(smk):
    adata = io.read_merged(smk.input.h5ad, *smk.input.deltas)
    before = io.slot_keys(adata)
    tl.quadro(adata, **smk.params.cfg, random_state=smk.params.seed, n_jobs=smk.threads)
    io.write_h5ad(io.extract_delta(adata, before), smk.output.h5ad)


run_rule(snakemake, main)  # noqa: F821
