rule pcpca:
    """Probabilistic contrastive PCA of the target against the background cells."""
    input:
        h5ad="results/{dataset}/preprocessed.h5ad",
    output:
        h5ad="results/{dataset}/pcpca.h5ad",
        figure=report(
            "results/{dataset}/figures/pcpca.png",
            caption="../report/pcpca.rst",
            category="{dataset}",
            subcategory="pcpca",
        ),
    params:
        cfg=config["pcpca"],
        seed=config["seed"],
    log:
        "logs/{dataset}/pcpca.log",
    benchmark:
        "results/{dataset}/benchmarks/pcpca.tsv"
    threads: 2
    resources:
        mem_mb=mem_mb(per_input_mb=8),
        runtime=runtime_min(per_input_mb=0.1),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/pcpca.py"
