"""Rule design_check: a study's input (obs only) -> results/{study}/design.tsv."""

import logging

from scontrast import io
from scontrast._workflow import run_rule
from scontrast.study._workflow import study_design


def main(smk):
    design, _ = study_design(dict(smk.params.entry), dict(smk.params.preprocess))
    for _, row in design.drop_duplicates("split").iterrows():
        logging.getLogger("scontrast.study").info("%s: %s", row["value"], row["verdict"])
    io.write_text(design.to_csv(sep="\t", index=False), smk.output.tsv)


run_rule(snakemake, main)  # noqa: F821
