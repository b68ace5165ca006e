"""Rule preprocess: input .h5ad -> results/{dataset}/preprocessed.h5ad (the QC figure: rule preprocess_figure)."""

from scontrast import io
from scontrast._workflow import run_rule
from scontrast.preprocess import preprocess, preprocess_file


def main(smk):
    ds = smk.params.dataset
    args = dict(groupby=ds["groupby"], target=ds["target"], background=ds["background"], counts=ds["counts"],
                layer=ds["layer"], replicate=ds["replicate"], paired=ds["paired"], **smk.params.cfg)
    if ds.get("subset"):  # a study's split (or a subset): only its rows are read
        from scontrast.study import read_subset

        out = preprocess(read_subset(smk.input.h5ad, ds["subset"]), **args)
    else:  # the input is dropped once its two groups are taken: a large file is held once, not twice
        out = preprocess_file(smk.input.h5ad, **args)
    info = out.uns["scontrast"]["preprocess"]
    if ds.get("subset"):
        info["subset"] = {col: [str(v) for v in values] for col, values in ds["subset"].items()}
    info["input"] = str(smk.input.h5ad)
    info["dataset"] = str(smk.wildcards.get("dataset"))  # figure titles name the dataset
    io.write_h5ad(out, smk.output.h5ad)


run_rule(snakemake, main)  # noqa: F821
