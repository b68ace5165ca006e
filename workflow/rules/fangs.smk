# FANGS: one feature allocation summarising posterior samples of binary latent features.

# The samples FANGS summarises: a user file (config fangs.samples, '{dataset}' filled in) or rule
# latent_features's delta, which rules collect (common.smk, fangs_deltas) and fangs_figure (the
# sampler's trace) then read beside the fangs delta: each delta holds what its own rule adds.
_FANGS_USER_SAMPLES = config["fangs"]["samples"]


rule fangs:
    """FANGS point estimate of the cells' features from posterior samples (FARO loss)."""
    input:
        h5ad=rules.preprocess.output.h5ad,
        samples=(
            (lambda w: checked_input(_FANGS_USER_SAMPLES.replace("{dataset}", w.dataset), "config.fangs.samples"))
            if _FANGS_USER_SAMPLES
            else rules.latent_features.output.h5ad
        ),
    output:
        h5ad="results/{dataset}/fangs.h5ad",
    params:
        # the samples path is the rule's input, not a parameter of tl.fangs
        cfg=lambda w: {**{k: v for k, v in model_params("fangs").items() if k != "samples"}, **relabel_block(w)},
        samples_file=bool(_FANGS_USER_SAMPLES),
        seed=config["seed"],
    log:
        "logs/{dataset}/fangs.log",
    benchmark:
        "results/{dataset}/benchmarks/fangs.tsv"
    threads: method_threads(2)
    resources:
        mem_mb=mem_mb("fangs"),
        runtime=runtime_min(per_input_mb=0.2),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/fangs.py"


rule fangs_figure:
    """FANGS's figure (the estimate per cell, K over the samples, the stability per K or the sampler's trace) from its delta: no refit."""
    input:
        h5ad=rules.preprocess.output.h5ad,
        deltas=fangs_deltas(),
    output:
        figure=report(
            "results/{dataset}/figures/fangs.png",
            caption="../report/fangs.rst",
            category="{dataset}",
            subcategory="fangs",
        ),
    params:
        method="fangs",
        plot=plot_params("fangs"),
    log:
        "logs/{dataset}/fangs_figure.log",
    benchmark:
        "results/{dataset}/benchmarks/fangs_figure.tsv"
    threads: 1
    resources:
        mem_mb=mem_mb("fangs_figure"),
        runtime=runtime_min(per_input_mb=0.01),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/figure.py"
