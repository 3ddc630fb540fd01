# Notebooks: fits and figures. The jupytext .py file is the source; papermill
# executes it with the pipeline's tables and writes the executed .ipynb. One
# rule per notebook, all from this one definition (rules/common.smk lists
# each notebook's tables and figures).

for _notebook in NOTEBOOKS_ON:

    rule:
        name:
            f"notebook_{_notebook}"
        # Analysis runs where snakemake runs, also under a cluster executor:
        # only measurements need the node (and a job slot).
        localrule: True
        input:
            notebook=f"notebooks/{_notebook}.py",
            tables=notebook_tables(_notebook),
            code=notebook_code(_notebook),
            # The between-occasion spread every prediction interval and the
            # launch planner read (iolab.estimation.occasion_spread).
            occasions="data/occasions.json",
            captions=[caption_file(figure) for figure in NOTEBOOK_FIGURES[_notebook]],
            plans=lambda w, notebook=_notebook: notebook_plans(notebook),
        output:
            executed=f"results/notebooks/{_notebook}.ipynb",
            numbers=f"results/numbers/{_notebook}.json",
            manifest=f"results/figures/{_notebook}.json",
            figures=figure_files(_notebook),
            # One report entry per figure, with its caption (iolab.paths.caption;
            # the notebook writes the same text into the manifest).
            **{f"png_{figure}": report(f"paper/figures/{figure}.png", caption=f"../{caption_file(figure)}",
                                       category=NOTEBOOK_CATEGORY[_notebook])
               for figure in NOTEBOOK_FIGURES[_notebook]},
        params:
            tables=notebook_table_params(_notebook),
            extra=lambda w, input: notebook_extra_params(input),
        log:
            f"results/logs/notebooks/{_notebook}.log",
        benchmark:
            f"results/benchmarks/notebooks/{_notebook}.tsv",
        conda:
            "../environment.yml"
        # The kernel's connection file goes to a temporary directory named
        # for this job's shell (iolab.live): removed when the job ends, and
        # by the next run if the job was killed.
        shell:
            "tmp=$(mktemp -d \"${{TMPDIR:-/tmp}}/iolab-nb-$$-XXXXXX\") && trap 'rm -rf \"$tmp\"' EXIT"
            " && export TMPDIR=\"$tmp\" && jupytext --quiet --to ipynb --output - {input.notebook}"
            " | papermill --no-progress-bar --cwd . - {output.executed} {params.tables} {params.extra}"
            " -p figure_dir paper/figures -p numbers_out {output.numbers}"
            " -p manifest_out {output.manifest} > {log} 2>&1"
