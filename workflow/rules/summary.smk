rule summary:
    """One table of the key numbers of a dataset, for the report."""
    input:
        h5ad=rules.collect.output.h5ad,
    output:
        tsv=report(
            "results/{dataset}/summary.tsv",
            caption="../report/summary.rst",
            category="{dataset}",
            subcategory="summary",
        ),
        # the same table as a page the report shows inline
        html=report(
            "results/{dataset}/summary.html",
            caption="../report/summary.rst",
            category="{dataset}",
            subcategory="summary",
        ),
    log:
        "logs/{dataset}/summary.log",
    benchmark:
        "results/{dataset}/benchmarks/summary.tsv"
    threads: 1
    resources:
        mem_mb=mem_mb("summary"),
        runtime=runtime_min(per_input_mb=0.02),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/summary.py"


# The figures the landing page shows for a contrast, with their legends (plain, <= 80 words):
# SPARDA's (the verdict's test), then pseudobulk's volcano when it runs, else QUADRO's.
KEY_FIGURES = {
    "sparda": "SPARDA: left, the genes whose weighted sum separates the groups most (red: higher expression pushes a "
    "cell to the target side, blue: to the background side); right, every cell on that direction, target red and "
    "background blue, and with a declared replicate each donor's mean (a line joins a donor's two groups when paired).",
    "pseudobulk": "Pseudobulk DESeq2, one pseudo-sample per donor and group: each dot is a gene, its log2 fold change "
    "against -log10 p; coloured genes pass the adjusted p-value cut, SPARDA's genes are ringed.",
    "quadro": "QUADRO: scores of cells the model never saw, target red and background blue, and the ROC curve "
    "(AUC 0.5 is chance).",
}


rule overview:
    """A contrast's verdict, top genes, key figures and summary table: its part of the report's landing page."""
    input:
        summary=rules.summary.output.tsv,
        genes=rules.genes.output.tsv,
        figures=lambda w: [getattr(rules, f"{m}_figure").output.figure.format(dataset=w.dataset)
                           for m in key_figures(w.dataset)],
    output:
        html=report(
            "results/{dataset}/overview.html",
            caption="../report/overview.rst",
            category="{dataset}",
            subcategory="summary",
        ),
    params:
        legends=lambda w: [KEY_FIGURES[m] for m in key_figures(w.dataset)],
    log:
        "logs/{dataset}/overview.log",
    benchmark:
        "results/{dataset}/benchmarks/overview.tsv"
    threads: 1
    resources:
        mem_mb=mem_mb("summary"),
        runtime=runtime_min(per_input_mb=0.02),
    conda:
        "../../envs/scontrast.yaml"
    script:
        "../../scripts/overview.py"
