# Binary latent features of the cells: linear-Gaussian IBP Gibbs sampler (samples for rule fangs).

# The rule whose delta holds each embedding that config latent_features.use_rep may name (the
# schema's enum); the embedding is an input chained by that rule's output.
_FEATURE_EMBEDDINGS = {"X_cpca": rules.cpca.output.h5ad, "X_pcpca": rules.pcpca.output.h5ad}


rule latent_features:
    """Gibbs samples of binary latent features of every cell (linear-Gaussian IBP on an embedding)."""
    input:
        h5ad=rules.preprocess.output.h5ad,
        embedding=_FEATURE_EMBEDDINGS[config["latent_features"]["use_rep"]],
    output:
        npz="results/{dataset}/feature_samples.npz",
    params:
        cfg=model_params("latent_features"),
        seed=config["seed"],
    log:
        "logs/{dataset}/latent_features.log",
    benchmark:
        "results/{dataset}/benchmarks/latent_features.tsv"
    threads: 1
    resources:
        mem_mb=mem_mb(per_input_mb=6),
        runtime=runtime_min(per_input_mb=0.2),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/latent_features.py"
