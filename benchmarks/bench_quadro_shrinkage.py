"""QUADRO's covariance shrinkage settings on the real contrasts: None, ``'ledoit_wolf'``, ``'auto'``.

Same contrasts, genes and seed as ``bench_quadro_real.py`` (whose tables give the baselines);
prints, for each contrast, the balanced error (AUC), the CPU seconds of ``tl.quadro`` with one
job and the gene pairs of the final rule, for each setting (the other parameters at their
defaults). Evidence for the default ``shrinkage='auto'`` (Ledoit-Wolf only for a class with no
more cells than kept genes in a fit): see benchmarks/results/bench_quadro_shrinkage.txt.

    PYTHONPATH=. python -m benchmarks.bench_quadro_shrinkage
"""

from __future__ import annotations

import os
import time
import warnings

import anndata as ad
import pandas as pd

from benchmarks import bench_quadro_real as real


def run(c: dict, shrinkage) -> str:
    from scontrast import tl
    from scontrast.core import TARGET_KEY

    a = ad.AnnData(c["X"], var=pd.DataFrame({"highly_variable": True}, index=c["genes"]))
    a.obs[TARGET_KEY] = c["y"]
    t = time.process_time()
    tl.quadro(a, n_genes=None, outer_cv=real.OUTER_CV, random_state=real.SEED, n_jobs=1, shrinkage=shrinkage)
    q = a.uns["quadro"]
    return (f"{shrinkage}: {q['balanced_error']:.3f} ({q['auc']:.3f}) {time.process_time() - t:.1f}s "
            f"pairs {len(q['interactions']['weight'])}")


def main() -> None:
    warnings.simplefilter("ignore")
    print("bench_quadro_shrinkage: balanced error (AUC), CPU s, gene pairs; load", os.getloadavg(), flush=True)
    for group in (real.wu2020, real.pbmc68k, real.pbmc3k):
        for c in group():
            print(" | ".join([c["name"], run(c, None), run(c, "ledoit_wolf"), run(c, "auto")]), flush=True)


if __name__ == "__main__":
    main()
