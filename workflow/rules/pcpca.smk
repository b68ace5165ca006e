rule pcpca:
    """Probabilistic contrastive PCA of the target against the background cells."""
    input:
        h5ad=rules.preprocess.output.h5ad,
        # SPARDA's delta (var['sparda_selected']) only when PCPCA runs on SPARDA's genes
        deps=[rules.sparda.output.h5ad] if config["pcpca"]["genes"] == "sparda_selected" else [],
    output:
        h5ad="results/{dataset}/pcpca.h5ad",
    params:
        cfg=model_params("pcpca"),
        seed=config["seed"],
    log:
        "logs/{dataset}/pcpca.log",
    benchmark:
        "results/{dataset}/benchmarks/pcpca.tsv"
    threads: method_threads(2)
    resources:
        mem_mb=mem_mb("pcpca"),
        runtime=runtime_min(per_input_mb=0.1),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/pcpca.py"


rule pcpca_figure:
    """PCPCA's figure (target and background cells in the embedding) from its delta: no refit."""
    input:
        h5ad=rules.preprocess.output.h5ad,
        deltas=[rules.pcpca.output.h5ad],
    output:
        figure=report(
            "results/{dataset}/figures/pcpca.png",
            caption="../report/pcpca.rst",
            category="{dataset}",
            subcategory="pcpca",
        ),
    params:
        method="pcpca",
        plot=plot_params("pcpca"),
    log:
        "logs/{dataset}/pcpca_figure.log",
    benchmark:
        "results/{dataset}/benchmarks/pcpca_figure.tsv"
    threads: 1
    resources:
        mem_mb=mem_mb("pcpca_figure"),
        runtime=runtime_min(per_input_mb=0.01),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/figure.py"
