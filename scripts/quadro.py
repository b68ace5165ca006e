"""Rule quadro: results/{dataset}/preprocessed.h5ad (+ sparda.h5ad for SPARDA genes) -> quadro.h5ad (delta) + figure."""

import numba
from threadpoolctl import threadpool_limits

from scontrast import io
from scontrast._workflow import run_rule
from scontrast.pl._quadro import quadro as plot_quadro
from scontrast.tl._quadro import quadro


def main(smk):
    adata = io.read_merged(smk.input.h5ad, *list(smk.input.deps))
    before = io.slot_keys(adata)
    # the solver's matrices are small (genes x genes): more BLAS threads than the job's only contend
    numba.set_num_threads(max(1, min(smk.threads, numba.config.NUMBA_NUM_THREADS)))
    with threadpool_limits(limits=smk.threads, user_api="blas"):
        quadro(adata, **smk.params.cfg, random_state=smk.params.seed)
    io.write_h5ad(io.extract_delta(adata, before), smk.output.h5ad)
    plot_quadro(adata).savefig(smk.output.figure, dpi=120)


run_rule(snakemake, main)  # noqa: F821
