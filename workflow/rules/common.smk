# Helpers shared by all rules: config validation, dataset lookup, per-rule parameters.
import copy
import re
from pathlib import Path

import yaml

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate


def validated(data, schema, where="config"):
    """``snakemake.utils.validate`` (fills defaults) with a one-line error naming the key."""
    try:
        validate(data, schema)
    except WorkflowError as exc:
        cause = exc.__context__  # the jsonschema ValidationError
        if not hasattr(cause, "absolute_path"):
            raise
        key = ".".join(str(p) for p in cause.absolute_path)
        raise WorkflowError(f"{where}{'.' + key if key else ''}: {cause.message}") from None


SCHEMAS = Path(workflow.basedir) / "workflow" / "schemas"


def _defaults(props):
    """The defaults of a schema's properties, nested objects (a method's ``plot`` block) included."""
    out = {}
    for key, spec in props.items():
        if "default" in spec:
            out[key] = copy.deepcopy(spec["default"])
        if spec.get("type") == "object" and "properties" in spec:
            out[key] = {**_defaults(spec["properties"]), **out.get(key, {})}
    return out


def with_defaults(block, schema_file):
    """``block`` with the defaults of ``schema_file`` filled in (one level of nested objects too).

    ``validate`` fills defaults of the top-level schema only, not inside the per-method
    schemas it reaches through ``$ref``.
    """
    out = _defaults(yaml.safe_load((SCHEMAS / schema_file).read_text())["properties"])
    for key, value in block.items():
        out[key] = {**out[key], **value} if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


validated(config, "../schemas/config.schema.yaml")
for _key, _spec in yaml.safe_load((SCHEMAS / "config.schema.yaml").read_text())["properties"].items():
    if "$ref" in _spec:
        config[_key] = with_defaults(config.get(_key, {}), _spec["$ref"])

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
    validated(block, "../schemas/preprocess_block.schema.yaml", where=f"config datasets.{name}")
    return with_defaults(block["preprocess"], "preprocess.schema.yaml")


# Resolved once at parse time, so that a config error fails before any job runs.
PREPROCESS = {name: preprocess_params(name) for name in DATASETS}


def model_params(method):
    """A method's config block without its figure settings: what the method's job fits with.

    The figure settings (the block's ``plot`` entry) go to the method's figure rule only,
    so changing a colour redraws the figure and never refits the model.
    """
    return {k: v for k, v in config[method].items() if k != "plot"}


def plot_params(method):
    """The ``plot`` entry of a method's config block (keyword arguments of ``scontrast.pl.<method>``)."""
    return dict(config[method].get("plot", {}))


def method_outputs(wildcards):
    """Delta files of the configured methods, merged by the collect rule."""
    return [getattr(rules, m).output.h5ad.format(dataset=wildcards.dataset) for m in config["methods"]]


def figure_outputs():
    """Every dataset's figures of the configured methods (one ``<method>_figure`` rule each)."""
    return [
        getattr(rules, f"{m}_figure").output.figure.format(dataset=d) for d in DATASETS for m in config["methods"]
    ]


def mem_mb(per_input_mb=10, floor=2000):
    """Memory request (MB) from the input size on disk, doubled on each retry (profiles set retries)."""

    def _mem(wildcards, input, attempt):
        return int(max(floor, per_input_mb * input.size_mb) * 2 ** (attempt - 1))

    return _mem


def runtime_min(per_input_mb=0.1, floor=10):
    """Wall-time request (minutes) from the input size on disk, longer on each retry."""

    def _runtime(wildcards, input, attempt):
        return int(max(floor, per_input_mb * input.size_mb) * attempt)

    return _runtime
