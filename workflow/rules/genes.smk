rule genes:
    """The gene table of a dataset: every method's number per gene, the genes most methods name first."""
    input:
        h5ad=rules.collect.output.h5ad,
    output:
        tsv=report(
            "results/{dataset}/genes.tsv",
            caption="../report/genes.rst",
            category="{dataset}",
            subcategory="summary",
        ),
        html=report(
            "results/{dataset}/genes.html",
            caption="../report/genes.rst",
            category="{dataset}",
            subcategory="summary",
        ),
    log:
        "logs/{dataset}/genes.log",
    benchmark:
        "results/{dataset}/benchmarks/genes.tsv"
    threads: 1
    resources:
        # the annotations and X a block of cells at a time: the summary's floor
        mem_mb=mem_mb("summary"),
        runtime=runtime_min(per_input_mb=0.02),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/genes.py"
