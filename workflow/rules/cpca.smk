def cpca_inputs(wildcards):
    """The preprocessed data, plus SPARDA's delta when cPCA runs on SPARDA's genes."""
    inputs = {"h5ad": f"results/{wildcards.dataset}/preprocessed.h5ad"}
    if config["cpca"]["genes"] == "sparda_selected":
        inputs["deps"] = [f"results/{wildcards.dataset}/sparda.h5ad"]
    return inputs


rule cpca:
    """Contrastive PCA of the target against the background cells, alphas chosen automatically."""
    input:
        unpack(cpca_inputs),
    output:
        h5ad="results/{dataset}/cpca.h5ad",
        figure=report(
            "results/{dataset}/figures/cpca.png",
            caption="../report/cpca.rst",
            category="{dataset}",
            subcategory="cpca",
        ),
    params:
        cfg=config["cpca"],
        seed=config["seed"],
    log:
        "logs/{dataset}/cpca.log",
    benchmark:
        "results/{dataset}/benchmarks/cpca.tsv"
    threads: 2
    resources:
        mem_mb=mem_mb(per_input_mb=10),
        runtime=runtime_min(per_input_mb=0.2),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/cpca.py"
