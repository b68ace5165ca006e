"""Rule summary: results/{dataset}/scontrast.h5ad -> summary.tsv (key numbers for the report)."""

from scontrast import io
from scontrast._workflow import run_rule
from scontrast.summary import summarise


def main(smk):
    table = summarise(io.read_h5ad(smk.input.h5ad))
    table.to_csv(smk.output.tsv, sep="\t", index=False)


run_rule(snakemake, main)  # noqa: F821
