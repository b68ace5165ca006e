rule cpca:
    """Contrastive PCA of the target against the background cells, alphas chosen automatically."""
    input:
        h5ad=rules.preprocess.output.h5ad,
        # SPARDA's delta (var['sparda_selected']) only when cPCA runs on SPARDA's genes
        sparda=[rules.sparda.output.h5ad] if config["cpca"]["genes"] == "sparda_selected" else [],
    output:
        h5ad="results/{dataset}/cpca.h5ad",
    params:
        cfg=model_params("cpca"),
        seed=config["seed"],
    log:
        "logs/{dataset}/cpca.log",
    benchmark:
        "results/{dataset}/benchmarks/cpca.tsv"
    threads: method_threads(2)
    resources:
        mem_mb=mem_mb("cpca"),
        runtime=runtime_min(per_input_mb=0.2),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/cpca.py"


rule cpca_figure:
    """cPCA's figure (one panel per fitted alpha) from its delta: no refit."""
    input:
        h5ad=rules.preprocess.output.h5ad,
        deltas=[rules.cpca.output.h5ad],
    output:
        figure=report(
            "results/{dataset}/figures/cpca.png",
            caption="../report/cpca.rst",
            category="{dataset}",
            subcategory="cpca",
        ),
    params:
        method="cpca",
        plot=plot_params("cpca"),
    log:
        "logs/{dataset}/cpca_figure.log",
    benchmark:
        "results/{dataset}/benchmarks/cpca_figure.tsv"
    threads: 1
    resources:
        mem_mb=mem_mb("cpca_figure"),
        runtime=runtime_min(per_input_mb=0.01),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/figure.py"
