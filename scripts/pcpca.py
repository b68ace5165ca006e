"""Rule pcpca: results/{dataset}/preprocessed.h5ad -> pcpca.h5ad (delta) + embedding figure."""

from scontrast import io
from scontrast._workflow import run_rule
from scontrast.pl._pcpca import pcpca as plot_pcpca
from scontrast.tl._pcpca import pcpca


def main(smk):
    cfg = dict(smk.params.cfg)
    color = cfg.pop("color", None)
    if cfg.get("gamma") is not None:
        cfg["gamma_prime"] = None  # gamma on the likelihood scale replaces the default gamma_prime
    adata = io.read_h5ad(smk.input.h5ad)
    before = io.slot_keys(adata)
    pcpca(adata, **cfg, random_state=smk.params.seed)
    io.write_h5ad(io.extract_delta(adata, before), smk.output.h5ad)
    plot_pcpca(adata, color).savefig(smk.output.figure, dpi=120)


run_rule(snakemake, main)  # noqa: F821
