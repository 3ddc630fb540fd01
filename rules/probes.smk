# Measurements. Each takes the `bench` resource so that no two run at once
# (profiles/default sets bench=1); builds and analysis still run in parallel.


rule measure_syscall:
    input:
        probe="native/build/cost-probe",
    output:
        raw="data/raw/{node}/syscall/rep{rep}.csv",
        provenance="data/raw/{node}/syscall/rep{rep}.provenance.json",
    params:
        node=lambda w: json.dumps(NODE_BY_NAME[w.node]),
        settings=json.dumps(config["experiments"]["syscall"]),
        seed=lambda w: run_seed("syscall", w.node, w.rep),
    resources:
        bench=1,
    log:
        "results/logs/measure/{node}/syscall/rep{rep}.log",
    conda:
        "../environment.yml"
    shell:
        "python -m iolab.measure syscall --node {params.node:q} --settings {params.settings:q}"
        " --rep {wildcards.rep} --seed {params.seed} --output {output.raw} 2>&1 | tee {log}"
