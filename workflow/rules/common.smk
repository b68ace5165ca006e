# Helpers shared by all rules: config validation, dataset lookup, per-rule parameters.
import copy
import re

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate


validate(config, "../schemas/config.schema.yaml")

DATASETS = list(config["datasets"])


wildcard_constraints:
    dataset="|".join(re.escape(d) for d in DATASETS),


def dataset_cfg(wildcards):
    """The config entry of one dataset (one contrast)."""
    return config["datasets"][wildcards.dataset]


def preprocess_params(name):
    """Global preprocess block with the dataset's own overrides, validated."""
    merged = copy.deepcopy(config["preprocess"])
    merged.update(config["datasets"][name].get("preprocess", {}))
    block = {"preprocess": merged}
    try:
        validate(block, "../schemas/preprocess_block.schema.yaml")
    except WorkflowError as exc:
        raise WorkflowError(f"config datasets['{name}'] preprocess: {exc}") from None
    return block["preprocess"]


# Resolved once at parse time, so that a config error fails before any job runs.
PREPROCESS = {name: preprocess_params(name) for name in DATASETS}


def result(name):
    """Path pattern of a per-dataset result file."""
    return f"results/{{dataset}}/{name}"


def method_outputs(wildcards):
    """Delta files of the configured methods, merged by the collect rule."""
    return [f"results/{wildcards.dataset}/{m}.h5ad" for m in config["methods"]]
