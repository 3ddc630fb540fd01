# Adaptive precision (config: precision). Round 0 is the configured
# repetitions; each checkpoint reads every raw file so far, judges the claims
# (iolab.claims) and plans the next round: more repetitions of only
# what feeds an unsettled verdict, within the time budget. The tidy tables
# wait for the round whose plan says stop (rules/common.smk: table_inputs).


checkpoint precision_plan:
    input:
        raw=lambda w: [f for e in CLAIM_EXPERIMENTS if e in EXPERIMENTS_ON and measures(CLAIM_NODE, e)
                       for f in raw_files_through(e, int(w.round))],
    output:
        PRECISION_PLAN,
    wildcard_constraints:
        round=r"\d+",
    params:
        precision=PRECISION.model_dump_json(),
        repeats=json.dumps({e: RUN.repeats_of(e) for e in CLAIM_EXPERIMENTS}, sort_keys=True),
    localrule: True
    log:
        "results/logs/precision/round{round}.log",
    conda:
        "../environment.yml"
    shell:
        "python -m iolab.planning.precision plan --round {wildcards.round} --repeats {params.repeats:q}"
        " --precision {params.precision:q} --output {output} {input.raw} 2>&1 | tee {log}"
