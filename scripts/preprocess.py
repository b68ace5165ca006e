"""Rule preprocess: input .h5ad -> results/{dataset}/preprocessed.h5ad (the QC figure: rule preprocess_figure)."""

from scontrast import io
from scontrast._workflow import run_rule
from scontrast.preprocess import preprocess_file


def main(smk):
    ds = smk.params.dataset
    # the input is dropped once its two groups are taken: a large file is held once, not twice
    out = preprocess_file(smk.input.h5ad, groupby=ds["groupby"], target=ds["target"], background=ds["background"],
                          counts=ds["counts"], layer=ds["layer"], replicate=ds["replicate"], paired=ds["paired"],
                          **smk.params.cfg)
    info = out.uns["scontrast"]["preprocess"]
    info["input"] = str(smk.input.h5ad)
    info["dataset"] = str(smk.wildcards.get("dataset"))  # figure titles name the dataset
    io.write_h5ad(out, smk.output.h5ad)


run_rule(snakemake, main)  # noqa: F821
