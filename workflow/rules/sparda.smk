rule sparda:
    """Sparse principal differences analysis: the genes carrying the target/background difference."""
    input:
        h5ad=rules.preprocess.output.h5ad,
    output:
        h5ad="results/{dataset}/sparda.h5ad",
    params:
        cfg=lambda w: {**model_params("sparda"), **relabel_block(w)},  # a block: relabelled within it
        seed=config["seed"],
    log:
        "logs/{dataset}/sparda.log",
    benchmark:
        "results/{dataset}/benchmarks/sparda.tsv"
    threads: method_threads(2)
    resources:
        mem_mb=mem_mb("sparda"),
        runtime=runtime_min(per_input_mb=0.2),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/sparda.py"


rule sparda_figure:
    """SPARDA's figure (gene weights, projected densities of both groups) from its delta: no refit."""
    input:
        h5ad=rules.preprocess.output.h5ad,
        deltas=[rules.sparda.output.h5ad],
    output:
        figure=report(
            "results/{dataset}/figures/sparda.png",
            caption="../report/sparda.rst",
            category="{dataset}",
            subcategory="sparda",
        ),
    params:
        method="sparda",
        plot=plot_params("sparda"),
    log:
        "logs/{dataset}/sparda_figure.log",
    benchmark:
        "results/{dataset}/benchmarks/sparda_figure.tsv"
    threads: 1
    resources:
        mem_mb=mem_mb("sparda_figure"),
        runtime=runtime_min(per_input_mb=0.01),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/figure.py"
