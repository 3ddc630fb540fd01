# Measurements. Each takes the `bench` resource so that no two run at once
# (profiles/default sets bench=1), and claims every core so that no build or
# analysis job runs beside it: on a 2-core machine a notebook on the other
# core shifts loopback costs by tens of percent. Builds and analysis still
# run in parallel with each other.
# Raw files land in data/raw/<node>/<experiment>/<key>/, where <key> digests
# the settings and the probe's sources (rules/common.smk), and are
# write-protected: measured data is never edited or overwritten.


rule measure:
    # No binary as input: the job builds what it runs (make rebuilds only what
    # is stale). The sources are digested into {key}, so new code measures
    # into a new directory, and a rebuild alone never re-measures.
    output:
        raw=protected("data/raw/{node}/{experiment}/{key}/rep{rep}.csv"),
        provenance=protected("data/raw/{node}/{experiment}/{key}/rep{rep}.provenance.json"),
    wildcard_constraints:
        experiment="|".join(PROBE_EXPERIMENTS),
    params:
        key=lambda w: checked_run_key(w, w.experiment),
        node=lambda w: json.dumps(NODE_BY_NAME[w.node]),
        settings=lambda w: json.dumps(rep_settings(w.experiment, w.rep)),
        seed=lambda w: run_seed(w.experiment, w.node, w.rep),
    threads: lambda wildcards: measurement_threads(wildcards.node)
    priority: lambda w: rep_priority(w.experiment, w.node, w.rep)
    resources:
        bench=1,
        slurm_partition=lambda w: slurm_resource(w.node, "partition"),
        slurm_extra=lambda w: slurm_resource(w.node, "slurm_extra"),
    log:
        "results/logs/measure/{node}/{experiment}/{key}/rep{rep}.log",
    conda:
        "../environment.yml"
    shell:
        "(python -m iolab.deps check build && make -s -C native build/cost-probe"
        " && python -m iolab.measure {wildcards.experiment} --node {params.node:q}"
        " --settings {params.settings:q} --rep {wildcards.rep} --seed {params.seed}"
        " --output {output.raw}) 2>&1 | tee {log}"


rule measure_echo:
    output:
        raw=protected("data/raw/{node}/echo/{key}/rep{rep}.csv"),
        histograms=protected("data/raw/{node}/echo/{key}/rep{rep}.histograms.csv"),
        provenance=protected("data/raw/{node}/echo/{key}/rep{rep}.provenance.json"),
    params:
        key=lambda w: checked_run_key(w, "echo"),
        node=lambda w: json.dumps(NODE_BY_NAME[w.node]),
        settings=lambda w: json.dumps(rep_settings("echo", w.rep)),
        seed=lambda w: run_seed("echo", w.node, w.rep),
        programs=" ".join(f"build/{p}" for p in EXPERIMENT_PROGRAMS["echo"]),
        client=lambda w: client_node_flag(w.node),
    threads: lambda wildcards: measurement_threads(wildcards.node)
    priority: lambda w: rep_priority("echo", w.node, w.rep)
    resources:
        bench=1,
        slurm_partition=lambda w: slurm_resource(w.node, "partition"),
        slurm_extra=lambda w: slurm_resource(w.node, "slurm_extra"),
    log:
        "results/logs/measure/{node}/echo/{key}/rep{rep}.log",
    conda:
        "../environment.yml"
    shell:
        "(python -m iolab.deps check build && make -s -C native {params.programs}"
        " && python -m iolab.measure echo --node {params.node:q} --settings {params.settings:q}"
        " {params.client} --rep {wildcards.rep} --seed {params.seed}"
        " --output {output.raw}) 2>&1 | tee {log}"


rule measure_mpi:
    # mpirun launches on the node: shared memory, TCP, a cluster of network
    # namespaces (iolab/runners/netns.py, torn down after each launch), and
    # across the node's mpi.peers over ssh (iolab/runners/mpigroup.py).
    output:
        raw=protected("data/raw/{node}/mpi/{key}/rep{rep}.csv"),
        provenance=protected("data/raw/{node}/mpi/{key}/rep{rep}.provenance.json"),
    params:
        key=lambda w: checked_run_key(w, "mpi"),
        node=lambda w: json.dumps(NODE_BY_NAME[w.node]),
        settings=lambda w: json.dumps(rep_settings("mpi", w.rep)),
        seed=lambda w: run_seed("mpi", w.node, w.rep),
        mpicc=config["experiments"].get("mpi", {}).get("mpicc", "mpicc"),
        programs=" ".join(f"build/{p}" for p in EXPERIMENT_PROGRAMS["mpi"]),
        peers=lambda w: peer_nodes_flag(w.node),
    threads: lambda wildcards: measurement_threads(wildcards.node)
    priority: lambda w: rep_priority("mpi", w.node, w.rep)
    resources:
        bench=1,
        slurm_partition=lambda w: slurm_resource(w.node, "partition"),
        slurm_extra=lambda w: slurm_resource(w.node, "slurm_extra"),
    log:
        "results/logs/measure/{node}/mpi/{key}/rep{rep}.log",
    conda:
        "../environment.yml"
    shell:
        "(python -m iolab.deps check build mpi && make -s -C native MPICC={params.mpicc:q} {params.programs}"
        " && python -m iolab.measure mpi --node {params.node:q} --settings {params.settings:q}"
        " {params.peers} --rep {wildcards.rep} --seed {params.seed} --output {output.raw}) 2>&1 | tee {log}"
