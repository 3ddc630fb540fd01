# The run's archive: `snakemake archive` (or ./repro archive) packs the
# finished run into archive/iolab-<commit>-<date>.crate.zip, a Provenance Run
# Crate (iolab/archive/crate.py). Never part of `all`: a run is archived on
# purpose, once it is worth citing.

localrules: archive

rule archive:
    input:
        "paper/paper.pdf",
        "paper/figures/manifest.json",
        "results/nodes.json",
    params:
        overlay=RUN.overlay,
    log:
        "results/logs/archive.log",
    conda:
        "../environment.yml"
    shell:
        "python -m iolab.archive.crate build --overlay {params.overlay:q} 2>&1 | tee {log}"
