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
        mem_mb=lambda w, input: max(2000, int(8 * input.size_mb)),
        runtime=lambda w, input: max(10, int(input.size_mb / 10)),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/pcpca.py"
