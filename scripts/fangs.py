"""Rule fangs: preprocessed.h5ad + a feature samples .npz -> fangs.h5ad (delta) + heatmap."""

from scontrast import io
from scontrast._workflow import run_rule
from scontrast.pl._fangs import fangs as plot_fangs
from scontrast.tl._fangs import fangs


def main(smk):
    cfg = {k: v for k, v in smk.params.cfg.items() if k != "samples"}  # the path is the rule's input
    adata = io.read_h5ad(smk.input.h5ad)
    before = io.slot_keys(adata)
    fangs(adata, samples=smk.input.samples, **cfg, n_jobs=smk.threads, random_state=smk.params.seed)
    io.write_h5ad(io.extract_delta(adata, before), smk.output.h5ad)
    plot_fangs(adata).savefig(smk.output.figure, dpi=120)


run_rule(snakemake, main)  # noqa: F821
