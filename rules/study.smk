# A cluster study: `snakemake study` (or ./repro study --configfile NODES.yaml)
# measures the config on every node of the inventory through the executor
# (each node one occasion), then pools the claims' verdicts over the nodes
# (iolab/archive/study.py): results/study/verdicts.{json,md} and its page.
# Never part of `all`: a study is asked for.

localrules: study

STUDY_CODE = module_closure([], ["iolab.archive.study"])


rule study:
    input:
        tables=expand("results/tables/{experiment}.parquet", experiment=[e for e in CLAIM_EXPERIMENTS if e in EXPERIMENTS_ON]),
        code=STUDY_CODE,
    output:
        "results/study/verdicts.json",
        "results/study/verdicts.md",
        "results/study/index.html",
    params:
        # The nodes fixed in advance: every node that measures the cost
        # probes (a skipped one is said, and leaves the planned test).
        planned=",".join(n for n in NODES if n not in SKIPPED_NODES
                         and all(node_runs(n, e) for e in COST_MODEL_EXPERIMENTS)),
        skipped=",".join(SKIPPED_NODES),
    log:
        "results/logs/study.log",
    conda:
        "../environment.yml"
    shell:
        "python -m iolab.archive.study --tables results/tables --out results/study"
        " --planned={params.planned:q} --skipped={params.skipped:q} 2>&1 | tee {log}"
