"""Rule study_figure: study.tsv + design.tsv -> figures/study.png (the ranking) and study.html, the study's
part of the report's landing page with that figure inline."""

import pandas as pd

from scontrast import io
from scontrast._workflow import run_rule
from scontrast.study import plot_ranking
from scontrast.study._table import read_findings, read_study_tsv, study_html


def main(smk):
    table, global_p = read_study_tsv(smk.input.tsv)
    io.save_figure(plot_ranking(table, global_p), smk.output.figure)
    design = pd.read_csv(smk.input.design, sep="\t", keep_default_na=False, na_values=[""])
    page = study_html(str(smk.wildcards.study), table, global_p, read_findings(smk.input.tsv), design,
                      figure=smk.output.figure)
    io.write_text(page, smk.output.html)


run_rule(snakemake, main)  # noqa: F821
