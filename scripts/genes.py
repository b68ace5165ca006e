"""Rule genes: results/{dataset}/scontrast.h5ad -> genes.tsv and genes.html (every method's number per gene)."""

from scontrast import io
from scontrast._workflow import run_rule
from scontrast.core import TARGET_KEY
from scontrast.merge_files import read_annotations
from scontrast.tables import gene_table, gene_table_html, group_means


def main(smk):
    adata = read_annotations(smk.input.h5ad)
    # the groups' mean expression from X a block of cells at a time: the annotations hold the rest
    means = group_means(smk.input.h5ad, adata.obs[TARGET_KEY].to_numpy(dtype=bool))
    table = gene_table(adata, means)
    io.write_text(table.to_csv(sep="\t", index=False), smk.output.tsv)
    io.write_text(gene_table_html(table, f"scontrast genes: {smk.wildcards.dataset}"), smk.output.html)


run_rule(snakemake, main)  # noqa: F821
