rule quadro:
    """QUADRO: cross-validated sparse quadratic classification of target vs background cells."""
    input:
        h5ad="results/{dataset}/preprocessed.h5ad",
        # SPARDA's delta (var['sparda_selected']) only when QUADRO runs on SPARDA's genes
        deps=lambda w: (
            [f"results/{w.dataset}/sparda.h5ad"] if config["quadro"]["genes"] == "sparda_selected" else []
        ),
    output:
        h5ad="results/{dataset}/quadro.h5ad",
        figure=report(
            "results/{dataset}/figures/quadro.png",
            caption="../report/quadro.rst",
            category="{dataset}",
            subcategory="quadro",
        ),
    params:
        cfg=config["quadro"],
        seed=config["seed"],
    log:
        "logs/{dataset}/quadro.log",
    benchmark:
        "results/{dataset}/benchmarks/quadro.tsv"
    threads: 2
    resources:
        mem_mb=mem_mb(per_input_mb=10),
        runtime=runtime_min(per_input_mb=0.5, floor=30),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/quadro.py"
