"""Rule sparda: results/{dataset}/preprocessed.h5ad -> sparda.h5ad (the slots tl.sparda adds; rule sparda_figure draws)."""

from scontrast import io, tl
from scontrast._workflow import run_rule


def main(smk):
    adata = io.read_h5ad(smk.input.h5ad)
    before = io.slot_keys(adata)
    tl.sparda(adata, **smk.params.cfg, random_state=smk.params.seed, n_jobs=smk.threads)
    io.write_h5ad(io.extract_delta(adata, before), smk.output.h5ad)


run_rule(snakemake, main)  # noqa: F821
