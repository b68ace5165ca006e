rule preprocess:
    """QC, normalisation, highly variable genes and the target/background split of one dataset."""
    input:
        h5ad=lambda w: dataset_cfg(w)["path"],
    output:
        h5ad="results/{dataset}/preprocessed.h5ad",
    params:
        dataset=lambda w: {k: v for k, v in dataset_cfg(w).items() if k != "preprocess"},
        cfg=lambda w: PREPROCESS[w.dataset],
        identity=lambda w: input_identity(dataset_cfg(w)["path"]),  # a replaced input reruns (common.smk)
    log:
        "logs/{dataset}/preprocess.log",
    benchmark:
        "results/{dataset}/benchmarks/preprocess.tsv"
    threads: 1
    resources:
        mem_mb=mem_mb("preprocess"),
        runtime=runtime_min(per_input_mb=0.05),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/preprocess.py"


rule preprocess_figure:
    """The QC figure of the preprocessed data, a rule of its own: a figure that fails to draw never
    takes preprocessed.h5ad (an output of the same job would be deleted with it)."""
    input:
        h5ad=rules.preprocess.output.h5ad,
    output:
        figure=report(
            "results/{dataset}/figures/preprocess_qc.png",
            caption="../report/preprocess.rst",
            category="{dataset}",
            subcategory="preprocess",
        ),
    log:
        "logs/{dataset}/preprocess_figure.log",
    benchmark:
        "results/{dataset}/benchmarks/preprocess_figure.tsv"
    threads: 1
    resources:
        # X is read only when the genes lack scanpy's dispersions (the last panel then needs it)
        mem_mb=mem_mb("preprocess_figure"),
        runtime=runtime_min(per_input_mb=0.02),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/preprocess_figure.py"
