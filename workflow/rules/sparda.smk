import os

import yaml

# The schema's defaults under the config's sparda block: snakemake's validate() fills
# defaults of the top-level schema only, not of the $ref'd sparda.schema.yaml.
with open(os.path.join(workflow.current_basedir, "../schemas/sparda.schema.yaml")) as _fh:
    _SPARDA_DEFAULTS = {k: v["default"] for k, v in yaml.safe_load(_fh)["properties"].items()}
SPARDA_CFG = {**_SPARDA_DEFAULTS, **config.get("sparda", {})}


rule sparda:
    """Sparse principal differences analysis: the genes carrying the target/background difference."""
    input:
        h5ad="results/{dataset}/preprocessed.h5ad",
    output:
        h5ad="results/{dataset}/sparda.h5ad",
        figure=report(
            "results/{dataset}/figures/sparda.png",
            caption="../report/sparda.rst",
            category="{dataset}",
            subcategory="sparda",
        ),
    params:
        cfg=SPARDA_CFG,
        seed=config["seed"],
    log:
        "logs/{dataset}/sparda.log",
    benchmark:
        "results/{dataset}/benchmarks/sparda.tsv"
    threads: 2
    resources:
        mem_mb=mem_mb(per_input_mb=10),
        runtime=runtime_min(per_input_mb=0.2),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/sparda.py"
