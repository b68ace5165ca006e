# Studies (docs/studies.md): a dataset entry with split_by. Its split contrasts <study>/<folder> run
# every per-contrast rule (common.smk expands them); these rules add the study's own outputs.


rule design_check:
    """The design check of a study, from the cells' annotations only: donors, cells, relabellings, confounding."""
    input:
        h5ad=lambda w: config["datasets"][w.study]["path"],
    output:
        tsv=report(
            "results/{study}/design.tsv",
            caption="../report/design.rst",
            category="{study}",
            subcategory="0 study",
        ),
    params:
        entry=lambda w: config["datasets"][w.study],
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
        h5ad=lambda w: config["datasets"][w.study]["path"],
        design=rules.design_check.output.tsv,
        deltas=study_deltas,
    output:
        tsv=report(
            "results/{study}/study.tsv",
            caption="../report/study.rst",
            category="{study}",
            subcategory="0 study",
        ),
    params:
        entry=lambda w: config["datasets"][w.study],
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
    """The study's ranking figure (splits ordered, donor intervals, significant ones marked) and its part of the
    report's landing page (study.html: the findings, this figure inline, the table, the design check)."""
    input:
        tsv=rules.study.output.tsv,
        design=rules.design_check.output.tsv,
    output:
        figure=report(
            "results/{study}/figures/study.png",
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
