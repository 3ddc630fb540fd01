# Measurements. Each takes the `bench` resource so that no two run at once
# (profiles/default sets bench=1), and claims every core so that no build or
# analysis job runs beside it: on a 2-core machine a notebook on the other
# core shifts loopback costs by tens of percent. Builds and analysis still
# run in parallel with each other.
# Raw files land in data/raw/<node>/<experiment>/<key>/, where <key> digests
# the settings and the probe's sources (rules/common.smk), and are
# write-protected: measured data is never edited or overwritten. One rule per
# experiment of the registry (iolab/registry.py), all from this definition;
# mpirun launches on the node: shared memory, TCP, a cluster of network
# namespaces (iolab/experiments/mpi/netns.py), and across the node's mpi.peers over
# ssh (iolab/experiments/mpi/group.py).


for _experiment, _spec in REGISTRY.items():

    rule:
        name:
            f"measure_{_experiment}"
        # No binary as input: the job builds what it runs (make rebuilds only
        # what is stale). The sources are digested into {key}, so new code
        # measures into a new directory, and a rebuild alone never re-measures.
        # A raw file is never deleted: `update` keeps Snakemake from removing
        # it before a job it decides to re-run (as root, `protected` alone
        # does not: root may write a read-only file), and iolab.measure keeps
        # a repetition already measured (the key says its settings are these).
        output:
            raw=protected(update(f"data/raw/{{node}}/{_experiment}/{{key}}/rep{{rep}}.csv")),
            provenance=protected(update(f"data/raw/{{node}}/{_experiment}/{{key}}/rep{{rep}}.provenance.json")),
            **{suffix.split(".")[0]: protected(update(f"data/raw/{{node}}/{_experiment}/{{key}}/rep{{rep}}.{suffix}"))
               for suffix in _spec.extra_outputs},
        params:
            experiment=_experiment,
            key=lambda w, e=_experiment: checked_run_key(w, e),
            # Canonical JSON (sorted keys): the same settings read from another
            # overlay must be the same text, or Snakemake sees "params changed".
            node=lambda w: json.dumps(NODE_BY_NAME[w.node], sort_keys=True),
            settings=lambda w, e=_experiment: json.dumps(rep_settings(e, w.rep), sort_keys=True),
            seed=lambda w, e=_experiment: rep_seed(e, w.node, w.rep),
            run_seed=lambda w, e=_experiment: run_seed(e, w.node),
            round=lambda w, e=_experiment: rep_round(e, w.rep)[0],
            # Where the echo load generator runs, or the MPI peers of the node.
            nodes=lambda w, e=_experiment: other_nodes_flag(e, w.node),
            deps=lambda w, e=_experiment: dependency_groups(e, w.node),
            # What to build first; nothing for an experiment that runs the
            # node's installed programs (ib: perftest).
            build=(lambda w, s=_spec: "make -s -C native MPICC={} {}".format(
                shlex.quote(MPICC),
                " ".join(f"build/{p}" for p in s.programs)) if s.programs else "true"),
        threads: lambda wildcards: measurement_threads(wildcards.node)
        priority: lambda w, e=_experiment: rep_priority(e, w.node, w.rep)
        resources:
            bench=1,
            slurm_partition=lambda w: slurm_resource(w.node, "partition"),
            slurm_extra=lambda w: slurm_resource(w.node, "slurm_extra"),
        log:
            f"results/logs/measure/{{node}}/{_experiment}/{{key}}/rep{{rep}}.log",
        # Each job's wall time and peak memory, for the paper's artifact appendix.
        benchmark:
            f"results/benchmarks/measure/{{node}}/{_experiment}/{{key}}/rep{{rep}}.tsv",
        conda:
            "../environment.yml"
        shell:
            "(python -m iolab.deps check {params.deps} && {params.build}"
            " && python -m iolab.measure {params.experiment} --node {params.node:q}"
            " --settings {params.settings:q} {params.nodes} --rep {wildcards.rep} --seed {params.seed}"
            " --run-seed {params.run_seed}"
            " --round {params.round}"
            " --output {output.raw}) > {log} 2>&1"
