"""Rule preprocess: input .h5ad -> results/{dataset}/preprocessed.h5ad (the QC figure: rule preprocess_figure)."""

from scontrast import io
from scontrast._workflow import run_rule
from scontrast.preprocess import preprocess


def main(smk):
    ds = smk.params.dataset
    adata = io.read_h5ad(smk.input.h5ad)
    out = preprocess(adata, groupby=ds["groupby"], target=ds["target"], background=ds["background"],
                     counts=ds["counts"], layer=ds["layer"], replicate=ds["replicate"], paired=ds["paired"],
                     **smk.params.cfg)
    info = out.uns["scontrast"]["preprocess"]
    info["input"] = str(smk.input.h5ad)
    info["dataset"] = str(smk.wildcards.get("dataset"))  # figure titles name the dataset
    io.write_h5ad(out, smk.output.h5ad)


run_rule(snakemake, main)  # noqa: F821
