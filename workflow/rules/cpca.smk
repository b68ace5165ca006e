rule cpca:
    """Contrastive PCA of the target against the background cells, alphas chosen automatically."""
    input:
        h5ad="results/{dataset}/preprocessed.h5ad",
        # SPARDA's delta (var['sparda_selected']) only when cPCA runs on SPARDA's genes
        deps=lambda w: (
            [f"results/{w.dataset}/sparda.h5ad"] if config["cpca"]["genes"] == "sparda_selected" else []
        ),
    output:
        h5ad="results/{dataset}/cpca.h5ad",
        figure=report(
            "results/{dataset}/figures/cpca.png",
            caption="../report/cpca.rst",
            category="{dataset}",
            subcategory="cpca",
        ),
    params:
        cfg=config["cpca"],
        seed=config["seed"],
    log:
        "logs/{dataset}/cpca.log",
    benchmark:
        "results/{dataset}/benchmarks/cpca.tsv"
    threads: 2
    resources:
        mem_mb=mem_mb(per_input_mb=10),
        runtime=runtime_min(per_input_mb=0.2),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/cpca.py"
