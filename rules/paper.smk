# The paper: numbers and figure manifest merged from every notebook, then
# the Typst source compiled to paper/paper.pdf.


# Analysis runs where snakemake runs, also under a cluster executor: only
# measurements need the node (and a job slot).
localrules: paper_numbers, figure_manifest, paper_pdf

rule paper_numbers:
    input:
        numbers=expand("results/numbers/{notebook}.json", notebook=NOTEBOOKS_ON),
        quoted="iolab/quoted.py",
        code=PAPER_CODE,
    output:
        "paper/generated/numbers.json",
    log:
        "results/logs/paper/numbers.log",
    conda:
        "../environment.yml"
    shell:
        "python -m iolab.report.paper numbers {input.numbers} --output {output} > {log} 2>&1"


rule figure_manifest:
    input:
        manifests=expand("results/figures/{notebook}.json", notebook=NOTEBOOKS_ON),
        code=PAPER_CODE,
    output:
        "paper/figures/manifest.json",
    log:
        "results/logs/paper/manifest.log",
    conda:
        "../environment.yml"
    shell:
        "python -m iolab.report.paper manifest {input.manifests} --output {output} > {log} 2>&1"


rule paper_pdf:
    input:
        source="paper/paper.typ",
        numbers="paper/generated/numbers.json",
        manifest="paper/figures/manifest.json",
        figures=[f for nb in NOTEBOOKS_ON for f in figure_files(nb)],
        code=PAPER_CODE,
    output:
        "paper/paper.pdf",
    log:
        "results/logs/paper/build.log",
    conda:
        "../environment.yml"
    shell:
        "python -m iolab.report.paper build {input.source} --output {output} 2>&1 | tee {log}"
