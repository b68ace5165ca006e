"""Rule study_figure: results/{study}/study.tsv -> figures/study.png (the ranking figure)."""

from scontrast import io
from scontrast._workflow import run_rule
from scontrast.study import plot_ranking
from scontrast.study._table import read_study_tsv


def main(smk):
    table, global_p = read_study_tsv(smk.input.tsv)
    io.save_figure(plot_ranking(table, global_p), smk.output.figure)


run_rule(snakemake, main)  # noqa: F821
