# scontrast: contrast a target and a background population of cells.
#
# config.yaml -> rule (workflow/rules/<rule>.smk) -> script (scripts/<rule>.py)
#   -> library function (src/scontrast/tl/_<method>.py) -> AnnData slot (docs/guide/results.md).
# Run:  snakemake                    (profile: workflow/profiles/default: every core, a quiet terminal)
from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


# A --configfile of the user's that lists datasets replaces the demo datasets of config.yaml
# (Snakemake merges config files key by key, which would run the demo too); one that lists none
# keeps them, so a file holding only method settings reruns the demo with those settings.
# Every config file is read again by a loader that refuses a key given twice (YAML keeps the last).
from snakemake.exceptions import WorkflowError as _WorkflowError

from scontrast._workflow import strict_yaml_load as _strict_yaml_load


try:
    for _path in dict.fromkeys([*workflow.configfiles, *(workflow.overwrite_configfiles or [])]):
        _strict_yaml_load(_path)
    _USER_DATASETS = None  # `datasets: {}` in a user's file is refused by the schema, never the demo run instead
    for _path in workflow.overwrite_configfiles or []:
        _loaded = _strict_yaml_load(_path) or {}
        if isinstance(_loaded, dict) and "datasets" in _loaded:
            _USER_DATASETS = {**(_USER_DATASETS or {}), **(_loaded["datasets"] or {})}
except ValueError as _exc:
    raise _WorkflowError(str(_exc)) from None
if _USER_DATASETS is not None:
    config["datasets"] = _USER_DATASETS


# The scheduler's "Select jobs to execute..." and "Execute 1 jobs..." (two lines per finished job) and
# the report's "Adding <file> (<size>)." (one per file), whatever --quiet says, are progress: quiet
# with it, as in the default profile.
from snakemake.logging import logger as _logger
from snakemake.settings.enums import Quietness as _Quietness

from scontrast._workflow import quiet_progress_lines as _quiet_progress_lines


if {_Quietness.PROGRESS, _Quietness.ALL} & set(workflow.output_settings.quiet or ()):
    _quiet_progress_lines(_logger)


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/preprocess.smk"
include: "workflow/rules/sparda.smk"
include: "workflow/rules/cpca.smk"
include: "workflow/rules/pcpca.smk"
include: "workflow/rules/quadro.smk"
include: "workflow/rules/latent_features.smk"
include: "workflow/rules/fangs.smk"
include: "workflow/rules/pseudobulk.smk"
include: "workflow/rules/collect.smk"
include: "workflow/rules/genes.smk"
include: "workflow/rules/summary.smk"
include: "workflow/rules/study.smk"


rule all:
    """Every dataset's merged result and summary table."""
    input:
        reported(  # `snakemake --report`: what exists (a failed dataset's results are left out and named)
            expand("results/{dataset}/scontrast.h5ad", dataset=DATASETS),
            expand("results/{dataset}/summary.tsv", dataset=DATASETS),
            expand("results/{dataset}/overview.html", dataset=DATASETS),
            figure_outputs(),
            study_outputs(),
        ),
    default_target: True
