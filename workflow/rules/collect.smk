rule collect:
    """Merge the preprocessed data and every configured method's delta into one AnnData."""
    input:
        h5ad=rules.preprocess.output.h5ad,
        deltas=method_outputs,
    output:
        h5ad="results/{dataset}/scontrast.h5ad",
    log:
        "logs/{dataset}/collect.log",
    benchmark:
        "results/{dataset}/benchmarks/collect.tsv"
    threads: 1
    resources:
        mem_mb=mem_mb("collect"),
        runtime=runtime_min(per_input_mb=0.02),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/collect.py"
