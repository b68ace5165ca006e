"""Rule pcpca: results/{dataset}/preprocessed.h5ad (+ sparda.h5ad for SPARDA's genes) -> pcpca.h5ad (delta).

The figure is drawn by rule pcpca_figure (scripts/figure.py) from the delta.
"""

from scontrast import io, tl
from scontrast._workflow import run_rule
from scontrast.merge_files import read_merged, used_layers


def main(smk):
    adata = read_merged(smk.input.h5ad, *smk.input.deps, layers=used_layers(smk.params.cfg))
    before = io.slot_keys(adata)
    tl.pcpca(adata, **smk.params.cfg, random_state=smk.params.seed)
    io.write_h5ad(io.extract_delta(adata, before), smk.output.h5ad)


run_rule(snakemake, main)  # noqa: F821
