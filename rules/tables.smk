# Raw files -> tidy Parquet tables, with the list of raw files they came from.


# Analysis runs where snakemake runs, also under a cluster executor: only
# measurements need the node (and a job slot).
localrules: tidy_table, node_status

rule tidy_table:
    input:
        raw=lambda w: table_inputs(w.experiment),
        code=TABLE_CODE,
        # Its manifest declares the raw columns its reader checks and fills.
        manifest="config/experiments/{experiment}.yaml",
    output:
        table="results/tables/{experiment}.parquet",
        sources="results/tables/{experiment}.sources.json",
    params:
        # The nodes the experiment was left out of when the run was planned,
        # with why: rows of their own in the table, never raw files.
        left_out=lambda w: left_out_flags(w.experiment),
    # Above the notebooks (0), below every measurement: at the end of a run
    # all tables come first, so no notebook waits on a table while another
    # notebook holds the second core (at dad924e cost_model waited about a
    # minute for the nop and send_zc tables, behind two other notebooks).
    priority: 1
    log:
        "results/logs/tables/{experiment}.log",
    conda:
        "../environment.yml"
    shell:
        "python -m iolab.tables {wildcards.experiment} --output {output.table} {params.left_out} {input.raw}"
        " > {log} 2>&1"


rule node_status:
    # Which nodes ran and which were skipped, with the reason (e.g. a vm node
    # without hardware KVM); the paper lists them.
    output:
        "results/nodes.json",
    params:
        status=json.dumps(PLAN.node_status(), sort_keys=True),
    log:
        "results/logs/tables/node_status.log",
    conda:
        "../environment.yml"
    shell:
        "printf '%s\\n' {params.status:q} > {output} 2> {log}"
