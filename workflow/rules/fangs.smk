# Latent binary features of the cells (linear-Gaussian IBP on an embedding) and their FANGS summary.

# Rule whose delta holds each embedding that config latent_features.use_rep may name.
_FEATURE_EMBEDDINGS = {"X_cpca": "cpca", "X_pcpca": "pcpca"}
# The samples FANGS summarises: a user file (config fangs.samples, '{dataset}' filled in) or rule
# latent_features's output.
_FANGS_SAMPLES = config["fangs"].get("samples") or "results/{dataset}/feature_samples.npz"


rule latent_features:
    """Gibbs samples of binary latent features of every cell (linear-Gaussian IBP on an embedding)."""
    input:
        h5ad="results/{dataset}/preprocessed.h5ad",
        embedding=lambda w: f"results/{w.dataset}/{_FEATURE_EMBEDDINGS[config['latent_features']['use_rep']]}.h5ad",
    output:
        npz="results/{dataset}/feature_samples.npz",
    params:
        cfg=config["latent_features"],
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


rule fangs:
    """FANGS point estimate of the cells' features from posterior samples (FARO loss)."""
    input:
        h5ad="results/{dataset}/preprocessed.h5ad",
        samples=lambda w: _FANGS_SAMPLES.replace("{dataset}", w.dataset),
    output:
        h5ad="results/{dataset}/fangs.h5ad",
        figure=report(
            "results/{dataset}/figures/fangs.png",
            caption="../report/fangs.rst",
            category="{dataset}",
            subcategory="fangs",
        ),
    params:
        cfg=config["fangs"],
        seed=config["seed"],
    log:
        "logs/{dataset}/fangs.log",
    benchmark:
        "results/{dataset}/benchmarks/fangs.tsv"
    threads: 2
    resources:
        mem_mb=mem_mb(per_input_mb=8),
        runtime=runtime_min(per_input_mb=0.2),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/fangs.py"
