rule pseudobulk:
    """Replicate-level DESeq2 on counts summed per replicate and group (only with a declared replicate and raw counts)."""
    input:
        h5ad=rules.preprocess.output.h5ad,
    output:
        h5ad="results/{dataset}/pseudobulk.h5ad",
    params:
        # a study's covariates and block enter the design (docs/studies.md); absent, the block as it is
        cfg=lambda w: {**model_params("pseudobulk"), **pseudobulk_design(w)},
    log:
        "logs/{dataset}/pseudobulk.log",
    benchmark:
        "results/{dataset}/benchmarks/pseudobulk.tsv"
    # PyDESeq2's per-gene fits take milliseconds: a second worker process costs more than it saves
    # (12 samples x 1,859 genes: 9.2 s wall in one process, 9.7 s in two; the same table bit for bit)
    threads: 1
    resources:
        mem_mb=mem_mb("pseudobulk"),
        runtime=runtime_min(per_input_mb=0.05),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/pseudobulk.py"


rule pseudobulk_figure:
    """Volcano plot of the pseudobulk genes, SPARDA's genes ringed (when SPARDA is configured)."""
    input:
        h5ad=rules.preprocess.output.h5ad,
        deltas=lambda w: [rules.pseudobulk.output.h5ad.format(dataset=w.dataset)]
        + ([rules.sparda.output.h5ad.format(dataset=w.dataset)] if "sparda" in config["methods"] else []),
    output:
        figure=report(
            "results/{dataset}/figures/pseudobulk.png",
            caption="../report/pseudobulk.rst",
            category="{dataset}",
            subcategory="pseudobulk",
        ),
    params:
        method="pseudobulk",
        plot=plot_params("pseudobulk"),
    log:
        "logs/{dataset}/pseudobulk_figure.log",
    benchmark:
        "results/{dataset}/benchmarks/pseudobulk_figure.tsv"
    threads: 1
    resources:
        mem_mb=mem_mb("pseudobulk_figure"),
        runtime=runtime_min(per_input_mb=0.01),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/figure.py"
