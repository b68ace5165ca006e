"""Rule cpca: results/{dataset}/preprocessed.h5ad (+ sparda.h5ad for SPARDA's genes) -> cpca.h5ad (delta).

The figure is drawn by rule cpca_figure (scripts/figure.py) from this delta.
"""

from scontrast import io, tl
from scontrast._workflow import run_rule
from scontrast.merge_files import read_merged, used_layers


def main(smk):
    # SPARDA's delta (var['sparda_selected']) is an input only when genes: sparda_selected
    adata = read_merged(smk.input.h5ad, *smk.input.sparda, layers=used_layers(smk.params.cfg))
    before = io.slot_keys(adata)
    tl.cpca(adata, **smk.params.cfg, random_state=smk.params.seed, n_jobs=smk.threads)
    io.write_h5ad(io.extract_delta(adata, before), smk.output.h5ad)


run_rule(snakemake, main)  # noqa: F821
