"""Rule summary: results/{dataset}/scontrast.h5ad -> summary.tsv and summary.html (key numbers for the report)."""

from scontrast import io
from scontrast._workflow import run_rule
from scontrast.merge_files import read_annotations
from scontrast.summary import summarise, to_html


def main(smk):
    table = summarise(read_annotations(smk.input.h5ad))  # the numbers are in the annotations: X is not read
    io.write_text(table.to_csv(sep="\t", index=False), smk.output.tsv)
    io.write_text(to_html(table, f"scontrast summary: {smk.wildcards.dataset}"), smk.output.html)


run_rule(snakemake, main)  # noqa: F821
