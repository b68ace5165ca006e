"""Rule summary: results/{dataset}/scontrast.h5ad -> summary.tsv and summary.html (key numbers for the report)."""

from scontrast import io
from scontrast._workflow import run_rule
from scontrast.summary import summarise, to_html


def main(smk):
    table = summarise(io.read_h5ad(smk.input.h5ad))
    io.write_text(table.to_csv(sep="\t", index=False), smk.output.tsv)
    io.write_text(to_html(table, f"scontrast summary: {smk.wildcards.dataset}"), smk.output.html)


run_rule(snakemake, main)  # noqa: F821
