"""Rule collect: preprocessed.h5ad + every method's delta -> results/{dataset}/scontrast.h5ad.

A delta that records a method that did not run on the dataset is not merged: the method and
why are listed in ``uns['scontrast']['failed']`` and the others' results are kept.
"""

from scontrast import io
from scontrast._workflow import run_rule


def main(smk):
    merged = io.read_merged(smk.input.h5ad, *smk.input.deltas, failures="record")
    io.write_h5ad(merged, smk.output.h5ad)


run_rule(snakemake, main)  # noqa: F821
