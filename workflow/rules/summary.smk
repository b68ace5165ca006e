rule summary:
    """One table of the key numbers of a dataset, for the report."""
    input:
        h5ad=rules.collect.output.h5ad,
    output:
        tsv=report(
            "results/{dataset}/summary.tsv",
            caption="../report/summary.rst",
            category="{dataset}",
            subcategory="summary",
        ),
        # the same table as a page the report shows inline
        html=report(
            "results/{dataset}/summary.html",
            caption="../report/summary.rst",
            category="{dataset}",
            subcategory="summary",
        ),
    log:
        "logs/{dataset}/summary.log",
    benchmark:
        "results/{dataset}/benchmarks/summary.tsv"
    threads: 1
    resources:
        mem_mb=mem_mb("summary"),
        runtime=runtime_min(per_input_mb=0.02),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/summary.py"
