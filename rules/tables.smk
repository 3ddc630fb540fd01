# Raw files -> tidy Parquet tables, with the list of raw files they came from.


rule tidy_table:
    input:
        raw=lambda w: raw_files(w.experiment),
        code="iolab/tables.py",
    output:
        table="results/tables/{experiment}.parquet",
        sources="results/tables/{experiment}.sources.json",
    log:
        "results/logs/tables/{experiment}.log",
    conda:
        "../environment.yml"
    shell:
        "python -m iolab.tables {wildcards.experiment} --output {output.table} {input.raw}"
        " 2>&1 | tee {log}"
