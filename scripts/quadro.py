"""Rule quadro: results/{dataset}/preprocessed.h5ad (+ SPARDA's delta for its genes) -> quadro.h5ad (delta)."""

from scontrast import io, tl
from scontrast._workflow import run_rule
from scontrast.merge_files import read_merged, used_layers


def main(smk):
    adata = read_merged(smk.input.h5ad, *smk.input.deltas, layers=used_layers(smk.params.cfg))
    before = io.slot_keys(adata)
    tl.quadro(adata, **smk.params.cfg, random_state=smk.params.seed, n_jobs=smk.threads)
    io.write_h5ad(io.extract_delta(adata, before), smk.output.h5ad)


run_rule(snakemake, main)  # noqa: F821
