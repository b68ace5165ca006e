"""Rule pseudobulk: results/{dataset}/preprocessed.h5ad -> pseudobulk.h5ad (PyDESeq2 per replicate, tl.pseudobulk)."""

from scontrast import io, tl
from scontrast._workflow import run_rule


def main(smk):
    # the counts layer is all DESeq2 needs of the matrices: X (normalised) is not read
    adata = io.read_annotations(smk.input.h5ad, layers=("counts",))
    before = io.slot_keys(adata)
    tl.pseudobulk(adata, **smk.params.cfg, n_jobs=smk.threads)
    io.write_h5ad(io.extract_delta(adata, before), smk.output.h5ad)


run_rule(snakemake, main)  # noqa: F821
