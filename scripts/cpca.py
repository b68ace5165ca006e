"""Rule cpca: results/{dataset}/preprocessed.h5ad (+ sparda.h5ad for SPARDA genes) -> cpca.h5ad (delta) + figure."""

from scontrast import io
from scontrast._workflow import run_rule
from scontrast.pl._cpca import cpca as plot_cpca
from scontrast.tl._cpca import cpca


def main(smk):
    cfg = dict(smk.params.cfg)
    color = cfg.pop("color")
    deps = list(smk.input.deps)
    adata = io.read_merged(smk.input.h5ad, *deps)
    before = io.slot_keys(adata)
    cpca(adata, **cfg, random_state=smk.params.seed)
    io.write_h5ad(io.extract_delta(adata, before), smk.output.h5ad)
    plot_cpca(adata, color).savefig(smk.output.figure, dpi=120)


run_rule(snakemake, main)  # noqa: F821
