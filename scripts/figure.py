"""Rule <method>_figure: preprocessed.h5ad (annotations only) + <method>.h5ad -> figures/<method>.png.

One script for every method's figure: it calls ``scontrast.pl.<method>`` with the method's
``plot`` settings, so a figure setting reruns the drawing, never the fit.
"""

from scontrast import io, pl
from scontrast._workflow import run_rule


def main(smk):
    adata = io.read_for_figure(smk.input.h5ad, *smk.input.deltas)
    draw = getattr(pl, smk.params.method)
    io.save_figure(draw(adata, **smk.params.plot), smk.output.figure)


run_rule(snakemake, main)  # noqa: F821
