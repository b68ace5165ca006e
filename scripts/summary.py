"""Rule summary: results/{dataset}/scontrast.h5ad -> summary.tsv and summary.html (key numbers for the report)."""

from scontrast import io
from scontrast._workflow import run_rule
from scontrast.summary import summarise, to_html


def main(smk):
    table = summarise(io.read_h5ad(smk.input.h5ad))
    table.to_csv(smk.output.tsv, sep="\t", index=False)
    with open(smk.output.html, "w") as fh:
        fh.write(to_html(table, f"scontrast summary: {smk.wildcards.dataset}"))


run_rule(snakemake, main)  # noqa: F821
