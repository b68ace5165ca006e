rule preprocess:
    """QC, normalisation, highly variable genes and the target/background split of one dataset."""
    input:
        h5ad=lambda w: dataset_cfg(w)["path"],
    output:
        h5ad="results/{dataset}/preprocessed.h5ad",
        figure=report(
            "results/{dataset}/figures/preprocess_qc.png",
            caption="../report/preprocess.rst",
            category="{dataset}",
            subcategory="preprocess",
        ),
    params:
        dataset=lambda w: {k: v for k, v in dataset_cfg(w).items() if k != "preprocess"},
        cfg=lambda w: PREPROCESS[w.dataset],
    log:
        "logs/{dataset}/preprocess.log",
    benchmark:
        "results/{dataset}/benchmarks/preprocess.tsv"
    threads: 1
    resources:
        mem_mb=mem_mb(per_input_mb=12),
        runtime=runtime_min(per_input_mb=0.05),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/preprocess.py"
