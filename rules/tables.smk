# Raw files -> tidy Parquet tables, with the list of raw files they came from.


rule tidy_syscall:
    input:
        raw=raw_files("syscall"),
        code="iolab/tables.py",
    output:
        table="results/tables/syscall.parquet",
        sources="results/tables/syscall.sources.json",
    log:
        "results/logs/tables/syscall.log",
    conda:
        "../environment.yml"
    shell:
        "python -m iolab.tables syscall --output {output.table} {input.raw} 2>&1 | tee {log}"
