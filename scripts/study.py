"""Rule study: a study's input + its splits' SPARDA and pseudobulk deltas -> study.tsv (rule study_figure draws it)."""

import logging
from pathlib import Path

from scontrast import io
from scontrast._workflow import run_rule
from scontrast.study import run_study
from scontrast.study._table import add_method_results, study_tsv

log = logging.getLogger("scontrast.study")


def main(smk):
    entry, pre = dict(smk.params.entry), dict(smk.params.preprocess)
    adata = io.read_h5ad(smk.input.h5ad, backed=True)  # each split's rows are read alone
    try:
        result = run_study(adata, groupby=entry["groupby"], target=entry["target"], background=entry["background"],
                           replicate=entry["replicate"], split_by=entry["split_by"], paired=entry.get("paired", False),
                           block=entry.get("block"), covariates=entry.get("covariates") or (),
                           subset=entry.get("subset"), layer=entry.get("layer"), effect_cells=entry.get("effect_cells"),
                           alpha=smk.params.alpha,
                           min_cells_per_group=pre["min_cells_per_group"],
                           min_cells_per_replicate=pre["min_cells_per_replicate"], random_state=smk.params.seed)
    finally:
        adata.file.close()
    deltas = {}
    for path in smk.input.deltas:  # results/<study>/<folder>/<method>.h5ad
        p = Path(path)
        deltas.setdefault(p.parent.name, {})[p.stem] = io.read_annotations(p)
    add_method_results(result, deltas, alpha=smk.params.alpha)
    for sentence in result.findings:
        log.info("%s", sentence)
    io.write_text(study_tsv(result), smk.output.tsv)


run_rule(snakemake, main)  # noqa: F821
