rule quadro:
    """QUADRO: cross-validated sparse quadratic classification of target vs background cells."""
    input:
        h5ad=rules.preprocess.output.h5ad,
        # SPARDA's delta (var['sparda_selected'], var['sparda_weight']) only when QUADRO runs on SPARDA's genes
        deltas=[rules.sparda.output.h5ad] if config["quadro"]["genes"] == "sparda_selected" else [],
    output:
        h5ad="results/{dataset}/quadro.h5ad",
    params:
        cfg=model_params("quadro"),
        seed=config["seed"],
    log:
        "logs/{dataset}/quadro.log",
    benchmark:
        "results/{dataset}/benchmarks/quadro.tsv"
    threads: method_threads(2)
    resources:
        mem_mb=mem_mb("quadro"),
        runtime=runtime_min(per_input_mb=0.5, floor=30),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/quadro.py"


rule quadro_figure:
    """QUADRO's figure (out-of-fold score histograms per group, ROC curve) from its delta: no refit."""
    input:
        h5ad=rules.preprocess.output.h5ad,
        deltas=[rules.quadro.output.h5ad],
    output:
        figure=report(
            "results/{dataset}/figures/quadro.png",
            caption="../report/quadro.rst",
            category="{dataset}",
            subcategory="quadro",
        ),
    params:
        method="quadro",
        plot=plot_params("quadro"),
    log:
        "logs/{dataset}/quadro_figure.log",
    benchmark:
        "results/{dataset}/benchmarks/quadro_figure.tsv"
    threads: 1
    resources:
        mem_mb=mem_mb("quadro_figure"),
        runtime=runtime_min(per_input_mb=0.01),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/figure.py"
