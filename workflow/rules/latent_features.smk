# Binary latent features of the cells (samples for rule fangs): an ensemble of resampled binary
# factorisations, K by stability (method ensemble, the default), or the linear-Gaussian IBP's Gibbs
# sampler (method ibp). By default it explains the standardised log expression of the most variable genes.

# The rule whose delta holds each embedding that config latent_features.use_rep may name (the
# schema's enum); the embedding is an input chained by that rule's output.
_FEATURE_EMBEDDINGS = {"X_cpca": rules.cpca.output.h5ad, "X_pcpca": rules.pcpca.output.h5ad}
_LF = config["latent_features"]


rule latent_features:
    """Samples of binary latent features of every cell (resampled fits or IBP Gibbs draws, on genes or an embedding)."""
    input:
        h5ad=rules.preprocess.output.h5ad,
        # the embedding's delta with use_rep; SPARDA's delta (var['sparda_selected']) for SPARDA's genes
        deps=(
            [_FEATURE_EMBEDDINGS[_LF["use_rep"]]]
            if _LF.get("use_rep")
            else [rules.sparda.output.h5ad] if _LF.get("genes") == "sparda_selected" else []
        ),
    output:
        h5ad="results/{dataset}/latent_features.h5ad",
    params:
        cfg=model_params("latent_features"),
        seed=config["seed"],
    log:
        "logs/{dataset}/latent_features.log",
    benchmark:
        "results/{dataset}/benchmarks/latent_features.tsv"
    threads: method_threads(2)  # the fits (or chains) run in parallel (results do not depend on it)
    resources:
        mem_mb=mem_mb("latent_features"),
        runtime=runtime_min(per_input_mb=0.2),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/latent_features.py"
