"""Rule preprocess_figure: results/{dataset}/preprocessed.h5ad -> figures/preprocess_qc.png.

Its own rule, so that a figure that fails to draw leaves preprocessed.h5ad (and every method's
result built on it) in place.
"""

from scontrast import io, pl
from scontrast._workflow import run_rule


def main(smk):
    adata = io.read_for_figure(smk.input.h5ad)
    if not {"means", "dispersions_norm"} <= set(adata.var.columns):
        # every gene was kept as highly variable, without scanpy's dispersions: the last panel
        # draws the genes' moments, read from X a block of cells at a time
        adata.var["means"], adata.var["variances"] = io.gene_moments(smk.input.h5ad)
    io.save_figure(pl.preprocess(adata), smk.output.figure, dpi=110)


run_rule(snakemake, main)  # noqa: F821
