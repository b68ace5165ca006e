"""Rule overview: summary.tsv + genes.tsv + the key figures -> overview.html, the contrast's part of the report's landing page."""

import pandas as pd

from scontrast import io
from scontrast._workflow import run_rule
from scontrast.summary import overview_html


def main(smk):
    table = pd.read_csv(smk.input.summary, sep="\t", dtype=str, keep_default_na=False)
    genes = pd.read_csv(smk.input.genes, sep="\t")
    figures = list(zip(smk.input.figures, smk.params.legends, strict=True))
    io.write_text(overview_html(smk.wildcards.dataset, table, genes, figures), smk.output.html)


run_rule(snakemake, main)  # noqa: F821
