# Measurements. Each takes the `bench` resource so that no two run at once
# (profiles/default sets bench=1), and claims every core so that no build or
# analysis job runs beside it: on a 2-core machine a notebook on the other
# core shifts loopback costs by tens of percent. Builds and analysis still
# run in parallel with each other.
# Raw files land in data/raw/<node>/<experiment>/<key>/, where <key> digests
# the settings and the probe's sources (rules/common.smk), and are
# write-protected: measured data is never edited or overwritten.


rule measure:
    input:
        # The probe's sources are digested into {key}; a rebuild alone
        # (new mtime, same sources) must not re-measure.
        probe=ancient("native/build/cost-probe"),
    output:
        raw=protected("data/raw/{node}/{experiment}/{key}/rep{rep}.csv"),
        provenance=protected("data/raw/{node}/{experiment}/{key}/rep{rep}.provenance.json"),
    params:
        key=lambda w: checked_run_key(w.experiment)(w),
        node=lambda w: json.dumps(NODE_BY_NAME[w.node]),
        settings=lambda w: json.dumps(config["experiments"][w.experiment]),
        seed=lambda w: run_seed(w.experiment, w.node, w.rep),
    threads: workflow.cores
    resources:
        bench=1,
    log:
        "results/logs/measure/{node}/{experiment}/{key}/rep{rep}.log",
    conda:
        "../environment.yml"
    shell:
        "python -m iolab.measure {wildcards.experiment} --node {params.node:q}"
        " --settings {params.settings:q} --rep {wildcards.rep} --seed {params.seed}"
        " --output {output.raw} 2>&1 | tee {log}"
