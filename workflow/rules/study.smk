# Studies (docs/studies.md): a dataset entry with split_by. Its split contrasts <study>/<folder> run
# every per-contrast rule (common.smk expands them); these rules add the study's own outputs.


wildcard_constraints:
    study="|".join(re.escape(s) for s in STUDIES) or "no^study",


def study_entry(wildcards):
    """A study's config entry (the values of its split_by column become its contrasts)."""
    return config["datasets"][wildcards.study]


def study_preprocess(wildcards):
    entry = config["datasets"][wildcards.study]
    return {**config["preprocess"], **entry.get("preprocess", {})}


def study_deltas(wildcards):
    """The per-split deltas the study table reads: SPARDA's p-value, pseudobulk's genes."""
    return [
        getattr(rules, m).output.h5ad.format(dataset=split)
        for split in STUDIES[wildcards.study]
        for m in ("sparda", "pseudobulk")
        if m in config["methods"] and runs(m, split)
    ]


def study_outputs():
    """Every study's design check, table and figure (rule all)."""
    return [
        path.format(study=s)
        for s in STUDIES
        for path in ("results/{study}/design.tsv", "results/{study}/study.tsv", "results/{study}/figures/study.png")
    ]


rule design_check:
    """The design check of a study, from the cells' annotations only: donors, cells, relabellings, confounding."""
    input:
        h5ad=lambda w: study_entry(w)["path"],
    output:
        tsv=report(
            "results/{study}/design.tsv",
            caption="../report/design.rst",
            category="{study}",
            subcategory="0 study",
        ),
    params:
        entry=study_entry,
        preprocess=study_preprocess,
    log:
        "logs/{study}/design_check.log",
    benchmark:
        "results/{study}/benchmarks/design_check.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/design_check.py"


rule study:
    """The study table: per split the donor-level test, padj across splits, effect and interval, driven_by, rank."""
    input:
        h5ad=lambda w: study_entry(w)["path"],
        design=rules.design_check.output.tsv,
        deltas=study_deltas,
    output:
        tsv=report(
            "results/{study}/study.tsv",
            caption="../report/study.rst",
            category="{study}",
            subcategory="0 study",
        ),
        html=report(
            "results/{study}/study.html",
            caption="../report/study.rst",
            category="{study}",
            subcategory="0 study",
        ),
    params:
        entry=study_entry,
        preprocess=study_preprocess,
        seed=config["seed"],
        alpha=config["pseudobulk"]["alpha"],
    log:
        "logs/{study}/study.log",
    benchmark:
        "results/{study}/benchmarks/study.tsv"
    threads: 1
    resources:
        # one split's cells x 300 genes dense at a time, three copies
        mem_mb=lambda w, input, attempt: int(2000 + 3 * os.stat(input.h5ad).st_size / 2**20) * attempt,
        runtime=runtime_min(per_input_mb=0.1),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/study.py"


rule study_figure:
    """The study's ranking figure (splits ordered, donor intervals, significant ones marked)."""
    input:
        tsv=rules.study.output.tsv,
    output:
        figure=report(
            "results/{study}/figures/study.png",
            caption="../report/study.rst",
            category="{study}",
            subcategory="0 study",
        ),
    log:
        "logs/{study}/study_figure.log",
    benchmark:
        "results/{study}/benchmarks/study_figure.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/study_figure.py"
