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
        cfg=config["sparda"],
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
