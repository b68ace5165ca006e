"""Rule collect: preprocessed.h5ad + every method's delta -> results/{dataset}/scontrast.h5ad.

A delta that records a method that did not run on the dataset is not merged: the method and
why are listed in ``uns['scontrast']['failed']`` and the others' results are kept. The contrast's
verdict (the first row of summary.tsv) with its numbers goes to ``uns['scontrast']['verdict']``. The merged
file is a copy of preprocessed.h5ad with the deltas' entries added: its matrices are never read.
"""

from scontrast._workflow import run_rule
from scontrast.merge_files import merge_files
from scontrast.summary import add_verdict


def main(smk):
    merge_files(smk.input.h5ad, smk.input.deltas, smk.output.h5ad, failures="record", annotate=add_verdict)


run_rule(snakemake, main)  # noqa: F821
