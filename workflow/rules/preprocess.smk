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
        mem_mb=lambda w, input: max(2000, int(12 * input.size_mb)),
        runtime=lambda w, input: max(10, int(input.size_mb / 20)),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/preprocess.py"
