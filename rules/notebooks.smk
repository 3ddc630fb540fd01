# Notebooks: fits and figures. The jupytext .py file is the source; papermill
# executes it with the pipeline's tables and writes the executed .ipynb.
# Analysis runs where snakemake runs, also under a cluster executor: only
# measurements need the node (and a job slot).
localrules: notebook_cost_model, notebook_echo, notebook_collectives, notebook_nodes

rule notebook_cost_model:
    input:
        notebook="notebooks/cost_model.py",
        syscall="results/tables/syscall.parquet",
        sendrecv="results/tables/sendrecv.parquet",
        uring_batch="results/tables/uring_batch.parquet",
        nop="results/tables/nop.parquet",
        trace=lambda w: [table_or_empty("trace")] if "trace" in EXPERIMENTS else [],
        echo=lambda w: [table_or_empty("echo")] if "echo" in EXPERIMENTS else [],
        code=ANALYSIS_CODE,
    output:
        executed="results/notebooks/cost_model.ipynb",
        numbers="results/numbers/cost_model.json",
        manifest="results/figures/cost_model.json",
        figures=figure_files("cost_model"),
        report_figures=report(
            expand("paper/figures/{figure}.png", figure=NOTEBOOK_FIGURES["cost_model"]),
            category="Cost model",
            subcategory="null syscall s",
        ),
    params:
        trace=table_or_empty("trace"),
        echo=table_or_empty("echo"),
    log:
        "results/logs/notebooks/cost_model.log",
    conda:
        "../environment.yml"
    shell:
        "jupytext --quiet --to ipynb --output - {input.notebook}"
        " | papermill --no-progress-bar --cwd . - {output.executed}"
        " -p syscall_table {input.syscall} -p sendrecv_table {input.sendrecv}"
        " -p uring_batch_table {input.uring_batch} -p nop_table {input.nop}"
        " -p trace_table \"{params.trace}\" -p echo_table \"{params.echo}\" -p figure_dir paper/figures"
        " -p numbers_out {output.numbers} -p manifest_out {output.manifest}"
        " 2>&1 | tee {log}"


rule notebook_echo:
    input:
        notebook="notebooks/echo.py",
        echo="results/tables/echo.parquet",
        syscall="results/tables/syscall.parquet",
        sendrecv="results/tables/sendrecv.parquet",
        uring_batch="results/tables/uring_batch.parquet",
        code=ANALYSIS_CODE,
    output:
        executed="results/notebooks/echo.ipynb",
        numbers="results/numbers/echo.json",
        manifest="results/figures/echo.json",
        figures=figure_files("echo"),
        report_figures=report(
            expand("paper/figures/{figure}.png", figure=NOTEBOOK_FIGURES["echo"]),
            category="Echo servers",
        ),
    log:
        "results/logs/notebooks/echo.log",
    conda:
        "../environment.yml"
    shell:
        "jupytext --quiet --to ipynb --output - {input.notebook}"
        " | papermill --no-progress-bar --cwd . - {output.executed}"
        " -p echo_table {input.echo} -p syscall_table {input.syscall}"
        " -p sendrecv_table {input.sendrecv} -p uring_batch_table {input.uring_batch}"
        " -p figure_dir paper/figures -p numbers_out {output.numbers}"
        " -p manifest_out {output.manifest} 2>&1 | tee {log}"


rule notebook_collectives:
    input:
        notebook="notebooks/collectives.py",
        mpi="results/tables/mpi.parquet",
        code=ANALYSIS_CODE,
    output:
        executed="results/notebooks/collectives.ipynb",
        numbers="results/numbers/collectives.json",
        manifest="results/figures/collectives.json",
        figures=figure_files("collectives"),
        report_figures=report(
            expand("paper/figures/{figure}.png", figure=NOTEBOOK_FIGURES["collectives"]),
            category="MPI collectives",
        ),
    log:
        "results/logs/notebooks/collectives.log",
    conda:
        "../environment.yml"
    shell:
        "jupytext --quiet --to ipynb --output - {input.notebook}"
        " | papermill --no-progress-bar --cwd . - {output.executed}"
        " -p mpi_table {input.mpi} -p figure_dir paper/figures -p numbers_out {output.numbers}"
        " -p manifest_out {output.manifest} 2>&1 | tee {log}"


rule notebook_nodes:
    input:
        notebook="notebooks/nodes.py",
        syscall="results/tables/syscall.parquet",
        sendrecv="results/tables/sendrecv.parquet",
        uring_batch="results/tables/uring_batch.parquet",
        echo=lambda w: [table_or_empty("echo")] if "echo" in EXPERIMENTS else [],
        mpi=lambda w: [table_or_empty("mpi")] if "mpi" in EXPERIMENTS else [],
        code=ANALYSIS_CODE,
    output:
        executed="results/notebooks/nodes.ipynb",
        numbers="results/numbers/nodes.json",
        manifest="results/figures/nodes.json",
        figures=figure_files("nodes"),
        report_figures=report(
            expand("paper/figures/{figure}.png", figure=NOTEBOOK_FIGURES["nodes"]),
            category="Nodes compared",
        ),
    params:
        echo=table_or_empty("echo"),
        mpi=table_or_empty("mpi"),
    log:
        "results/logs/notebooks/nodes.log",
    conda:
        "../environment.yml"
    shell:
        "jupytext --quiet --to ipynb --output - {input.notebook}"
        " | papermill --no-progress-bar --cwd . - {output.executed}"
        " -p syscall_table {input.syscall} -p sendrecv_table {input.sendrecv}"
        " -p uring_batch_table {input.uring_batch}"
        " -p echo_table \"{params.echo}\" -p mpi_table \"{params.mpi}\" -p figure_dir paper/figures"
        " -p numbers_out {output.numbers} -p manifest_out {output.manifest} 2>&1 | tee {log}"
