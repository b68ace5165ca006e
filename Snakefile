# scontrast: contrast a target and a background population of cells.
#
# config.yaml -> rule (workflow/rules/<rule>.smk) -> script (scripts/<rule>.py)
#   -> library function (src/scontrast/tl/_<method>.py) -> AnnData slot (README, "Outputs").
# Run:  snakemake --cores 2          (profile: workflow/profiles/default)
from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


# A --configfile of the user's that lists datasets replaces the demo datasets of config.yaml
# (Snakemake merges config files key by key, which would run the demo too); one that lists none
# keeps them, so a file holding only method settings reruns the demo with those settings.
import yaml as _yaml

_USER_DATASETS = {}
for _path in workflow.overwrite_configfiles or []:
    with open(_path) as _fh:
        _USER_DATASETS.update((_yaml.safe_load(_fh) or {}).get("datasets") or {})
if _USER_DATASETS:
    config["datasets"] = _USER_DATASETS


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
include: "workflow/rules/summary.smk"


rule all:
    """Every dataset's merged result and summary table."""
    input:
        expand("results/{dataset}/scontrast.h5ad", dataset=DATASETS),
        expand("results/{dataset}/summary.tsv", dataset=DATASETS),
        figure_outputs(),
    default_target: True
