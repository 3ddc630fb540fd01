# Loads and validates the configuration, and binds the names the rule files
# use. The logic is iolab.runplan (typed, unit-tested); this file is wiring.
import json
import os
import shlex  # noqa: F401  (rules/probes.smk quotes with it)
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from iolab import runplan  # noqa: E402  (Snakefile put iolab/ on the path)
from iolab.config import ConfigError, read_as_snakemake, validate_config  # noqa: E402

# Jobs find the tools beside this interpreter (--use-conda puts its own
# environment's first in each job).
envvars:
    "PATH",


os.environ["PATH"] = runplan.tool_path(sys.executable, os.environ.get("PATH", ""))


def fail_config(message):
    # One line, then stop: a traceback would bury the key that is wrong.
    print(message, file=sys.stderr)
    sys.exit(1)


try:
    # Read again as iolab reads config files (no aliases, text only, YAML
    # 1.2 numbers), in Snakemake's order.
    _strict = read_as_snakemake(workflow.configfiles, workflow.overwrite_configfiles,
                                workflow.config_settings.config, workflow.config_settings.replace_workflow_config)
    config.clear()
    config.update(_strict)
    # The config, typed (iolab.settings.RunConfig); the plan keeps the
    # config's own dicts, as validated, for run keys and --settings.
    RUN = validate_config(config)
    PLAN = runplan.RunPlan(RUN, config, Path(workflow.basedir), lambda: workflow.cores)
except ConfigError as e:
    fail_config(str(e))
runplan.say_skipped(PLAN, lambda line: print(line, file=sys.stderr))

# A cluster executor (the slurm profile) is asked before anything is
# submitted: without a SLURM that answers, one line now. Not inside a job.
if workflow.global_resources["_nodes"].value is not None and "SLURM_JOB_ID" not in os.environ:
    from iolab.runners import cluster_problem

    if (_problem := cluster_problem([n for n in RUN.nodes if n.name not in PLAN.skipped])):
        fail_config(f"iolab: {_problem}")

NODES, NODE_BY_NAME, SKIPPED_NODES = PLAN.nodes, PLAN.node_by_name, PLAN.skipped
EXPERIMENTS_ON = PLAN.experiments_on
node_runs, measures, left_out_flags = PLAN.node_runs, PLAN.measures, PLAN.left_out_flags
dependency_groups, measurement_threads, slurm_resource = (
    PLAN.dependency_groups, PLAN.measurement_threads, PLAN.slurm_resource)
other_nodes_flag = PLAN.other_nodes_flag
rep_priority = lambda e, n, r: runplan.rep_priority(RUN.seed, e, n, r)  # noqa: E731
rep_seed = lambda e, n, r: runplan.rep_seed(RUN.seed, e, n, r)  # noqa: E731
run_seed = lambda e, n: runplan.run_seed(RUN.seed, e, n)  # noqa: E731


def checked_run_key(wildcards, experiment):
    """Params function: refuse to measure current settings into an old key."""
    want = PLAN.run_key(experiment, wildcards.node)
    if wildcards.key != want:
        raise WorkflowError(f"data/raw/{wildcards.node}/{experiment}/{wildcards.key} belongs to "
                            f"other settings (current key: {want}); it is kept as measured")
    return want


# The code each step runs: editing a module re-runs the steps that run it,
# never a measurement (iolab.paths).
from iolab.paths import caption, module_closure, relative, room_packages, script_closure  # noqa: E402
from iolab.native import BUILD_FILES, MPI_PROGRAMS, program_sources  # noqa: E402
from iolab.registry import COST_MODEL_EXPERIMENTS, REGISTRY, NOTEBOOKS as NOTEBOOKS_REGISTRY  # noqa: E402
from iolab.settings import MpiSettings  # noqa: E402

PAPER_CODE = module_closure([], ["iolab.report.paper"])
TABLE_CODE = module_closure(["iolab.tables", *(f"{room}.tidy" for room in room_packages())])
notebook_code = lambda notebook: script_closure(f"notebooks/{notebook}.py")  # noqa: E731
caption_file = lambda figure: relative(caption(figure))  # noqa: E731
NATIVE_PROGRAMS = program_sources()
MPICC = RUN.experiments.mpi.mpicc if RUN.experiments.mpi else MpiSettings().mpicc

wildcard_constraints:
    node="|".join(NODES),
    rep=r"\d+",
    key=r"[0-9a-f]{12}",
    experiment="|".join(EXPERIMENTS_ON),


# Adaptive precision (rules/precision.smk): each round's plan is read
# through its checkpoint.
PRECISION = RUN.precision
PRECISION_PLAN = runplan.PRECISION_PLAN


def precision_plan(round_):
    """Round ``round_``'s plan (raises Snakemake's IncompleteCheckpointException until it exists)."""
    with open(checkpoints.precision_plan.get(round=round_).output[0]) as f:
        return json.load(f)


ROUNDS = runplan.Rounds(PLAN, precision_plan)
CLAIM_EXPERIMENTS, CLAIM_NODE = ROUNDS.claim_experiments, ROUNDS.claim_node
raw_files_through, table_inputs = ROUNDS.raw_files_through, ROUNDS.table_inputs
rep_round, rep_settings = ROUNDS.rep_round, ROUNDS.rep_settings

# Notebooks: the tables each reads, the figures each writes (stable names,
# cited by users) and their category come from iolab/registry.py.
NOTEBOOKS_ON = PLAN.notebooks_on
NOTEBOOK_CATEGORY = {name: nb.category for name, nb in NOTEBOOKS_REGISTRY.items()}
NOTEBOOK_FIGURES = {name: PLAN.notebook_figures(name) for name in NOTEBOOKS_ON}
notebook_tables, notebook_table_params = PLAN.notebook_tables, PLAN.notebook_table_params
notebook_plans = lambda notebook: ROUNDS.notebook_plans(NOTEBOOKS_REGISTRY[notebook].judges_claims)  # noqa: E731


def notebook_extra_params(input):
    """For the claims under adaptive precision, the round-0 count (their
    error budget keeps a share for later rounds, chosen before any data)."""
    return f"-p anytime_after {RUN.repeats}" if input.plans else ""


def figure_files(notebook):
    return expand("paper/figures/{figure}.{ext}", figure=NOTEBOOK_FIGURES[notebook], ext=["pdf", "svg"])
