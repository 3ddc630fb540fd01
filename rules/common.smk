# Loads and validates the configuration; defines the names other rules use.
import hashlib
import json
import os
import shlex
import sys
import zlib
from pathlib import Path

from snakemake.exceptions import WorkflowError

sys.path.insert(0, workflow.basedir)  # iolab/ without an installed package
from iolab.config import ConfigError, validate_config  # noqa: E402

# Jobs call python, papermill and jupytext by name: they are the ones beside
# the interpreter running Snakemake (the venv's, even when started as
# .venv/bin/snakemake without activating it). --use-conda puts its
# environment's bin ahead of this in each job.
envvars:
    "PATH",


_TOOL_BIN = os.path.dirname(sys.executable)
if os.environ.get("PATH", "").split(os.pathsep)[0] != _TOOL_BIN:
    os.environ["PATH"] = os.pathsep.join(p for p in (_TOOL_BIN, os.environ.get("PATH")) if p)


def fail_config(message):
    # One line, then stop: a traceback would bury the key that is wrong.
    print(message, file=sys.stderr)
    sys.exit(1)


def strict_config():
    """The config as iolab reads its files (iolab.yamlfile): no anchors or
    aliases (nested aliases stand for billions of values that validation
    would walk for hours), text only, YAML 1.2 numbers (Snakemake's loader
    reads 1e-9 as a string). The same files in the same order as Snakemake
    merged them: the Snakefile's configfiles, then --configfile's, then --config."""
    from copy import deepcopy

    from iolab.config import merge, read_file

    given = [Path(p) for p in workflow.overwrite_configfiles]
    ours = [] if workflow.config_settings.replace_workflow_config else [
        Path(p) for p in workflow.configfiles if Path(p).absolute() not in {g.absolute() for g in given}]
    merged = {}
    for path in [*ours, *given]:
        merged = merge(merged, read_file(path))
    return merge(merged, deepcopy(dict(workflow.config_settings.config)))


try:
    _strict = strict_config()
    config.clear()
    config.update(_strict)
    # The config, typed (iolab.settings.RunConfig). Run keys and the
    # measurements' --settings keep the config's own dicts, as validated.
    RUN = validate_config(config)
except ConfigError as e:
    fail_config(str(e))

NODES = [n.name for n in RUN.nodes]
# The entries as the config holds them: run keys digest them, and the
# measurements get them as JSON.
NODE_BY_NAME = {n["name"]: n for n in config["nodes"]}
# Nodes that cannot run here, with the reason (a vm node without hardware
# KVM); the rest of the run goes on, and the reason is in results/nodes.json.
from iolab.runners import skip_reason  # noqa: E402

SKIPPED_NODES = {n.name: r for n in RUN.nodes if (r := skip_reason(n))}
for _name, _reason in SKIPPED_NODES.items():
    print(f"iolab: skipping node {_name}: {_reason}", file=sys.stderr)

# A cluster executor (the slurm profile: its `jobs` are remote nodes) is
# asked before anything is submitted: without a SLURM that answers, or with
# a node that is no SLURM node, one line now, not an error about cores once
# the executor runs. Not inside a job: there the job step is the executor.
if workflow.global_resources["_nodes"].value is not None and "SLURM_JOB_ID" not in os.environ:
    from iolab.runners import cluster_problem

    if (_problem := cluster_problem([n for n in RUN.nodes if n.name not in SKIPPED_NODES])):
        fail_config(f"iolab: {_problem}")


def reps(experiment):
    """Round 0's repetitions of ``experiment``: ``repeats``, or more where
    ``experiment_repeats`` asks (the paper profile, for reachable verdicts)."""
    return list(range(1, RUN.repeats_of(experiment) + 1))


from iolab.capabilities import Capability, capabilities_of  # noqa: E402
from iolab.registry import NOTEBOOKS as NOTEBOOKS_REGISTRY  # noqa: E402
from iolab.registry import (COST_MODEL_EXPERIMENTS, REGISTRY, can_host, claim_experiments, figures_drawn, has_setting,  # noqa: E402
                            notebooks_run, peer_names)


def node_runs(node, experiment):
    """Whether ``experiment`` runs on ``node``: its `experiments` list, and
    whether its runner has what the experiment needs (iolab/registry.py:
    bpftrace needs this machine's kernel; echo servers; MPI; perftest its ib.peer)."""
    entry = NODE_BY_NAME[node]
    chosen = entry.get("experiments")
    if chosen is not None and experiment not in chosen:
        return False
    return can_host(capabilities_of(entry["runner"]), experiment) and has_setting(entry, experiment)


# Experiments that run: those enabled (cost probes always are) that some
# node that is not skipped can host.
EXPERIMENTS_ON = [name for name in RUN.experiments.switched_on()
               if any(node_runs(n, name) for n in NODES if n not in SKIPPED_NODES)]

# What cannot run here as this user (iolab.privilege: without root, the
# trace experiment and the netns transports), known before the first job:
# node -> part ("trace", "mpi netns") -> reason. Left out, said here, kept in
# results/nodes.json, and a left-out experiment's table says why on its rows.
from iolab.privilege import experiment_left_out, transports_left_out  # noqa: E402


def _left_out_here(node):
    parts = {}
    for experiment in EXPERIMENTS_ON:
        if node_runs(node, experiment) and (why := experiment_left_out(experiment)):
            parts[experiment] = why
    if "mpi" in EXPERIMENTS_ON and node_runs(node, "mpi"):
        transports = (NODE_BY_NAME[node].get("mpi") or {}).get("transports") or RUN.experiments.mpi.transports
        left = transports_left_out(transports)
        if left and set(left) >= set(transports):
            fail_config(f"iolab: node {node} runs MPI only over {', '.join(transports)}, and "
                        f"{next(iter(left.values()))}; add shm or tcp to its transports")
        parts |= {f"mpi {t}": why for t, why in left.items()}
    return parts


LEFT_OUT = {n: parts for n in NODES if n not in SKIPPED_NODES
            and Capability.THIS_MACHINE in capabilities_of(NODE_BY_NAME[n]["runner"])
            and (parts := _left_out_here(n))}
for _node, _parts in LEFT_OUT.items():
    for _part, _why in _parts.items():
        print(f"iolab: leaving out {_part} on {_node}: {_why}", file=sys.stderr)


def measures(node, experiment):
    """Whether ``node`` measures ``experiment`` in this run: it runs there and
    is not left out (LEFT_OUT)."""
    return node_runs(node, experiment) and node not in SKIPPED_NODES and experiment not in LEFT_OUT.get(node, {})


def left_out_flags(experiment):
    """iolab.tables' --left-out flags: the nodes ``experiment`` was left out of, with why."""
    return " ".join(shlex.quote(f"--left-out={n}={parts[experiment]}")
                    for n, parts in sorted(LEFT_OUT.items()) if experiment in parts)


# The Python modules each analysis step runs; editing one re-runs the steps
# that run it, never a measurement.
from iolab.paths import caption, module_closure, relative, room_packages, script_closure  # noqa: E402

# What the paper's steps run (the merge of the notebooks' numbers, the
# manifest, the build).
PAPER_CODE = module_closure([], ["iolab.report.paper"])


def notebook_code(notebook):
    """What one notebook runs: the modules its .py file imports and theirs,
    so editing one room re-runs only the notebooks that use it."""
    return script_closure(f"notebooks/{notebook}.py")


# The tidy step's code: iolab.tables, each room's tidy module, and every
# reader, format and check they import; editing any of them rebuilds the tables.
TABLE_CODE = module_closure(["iolab.tables", *(f"{room}.tidy" for room in room_packages())])


def caption_file(figure):
    """A figure's caption file, repository-relative (iolab.paths.caption)."""
    return relative(caption(figure))


wildcard_constraints:
    node="|".join(NODES),
    rep=r"\d+",
    key=r"[0-9a-f]{12}",
    experiment="|".join(EXPERIMENTS_ON),


def rep_priority(experiment, node, rep):
    """Scheduling priority of a measurement: every experiment's repetition 1
    on every node first, then repetition 2, and so on, in a seeded random
    order within each round. A slow quarter of an hour on the host then hits
    every configuration alike, and the repetitions spread over the run."""
    rep = int(rep)
    shuffle = zlib.crc32(f"{RUN.seed}/{rep}/{node}/{experiment}".encode()) % 1000
    return (10_000 - rep) * 1000 + shuffle


def rep_seed(experiment, node, rep):
    """A repetition's seed derived from the config seed, stable across runs."""
    return (RUN.seed + zlib.crc32(f"{experiment}/{node}/{rep}".encode())) % 2**31


def run_seed(experiment, node):
    """The seed every repetition of an experiment on a node shares (echo:
    each setup's preset order, reversed in ABBA over repetitions)."""
    return (RUN.seed + zlib.crc32(f"{experiment}/{node}".encode())) % 2**31


# Which files make each native program: native/programs.mk, the table the
# Makefile includes too.
from iolab.codehash import measuring_sources, update_with_sources  # noqa: E402
from iolab.native import BUILD_FILES, MPI_PROGRAMS, program_sources  # noqa: E402
from iolab.settings import MpiSettings  # noqa: E402

NATIVE_PROGRAMS = program_sources()
# The MPI compiler wrapper the probes are built with.
MPICC = RUN.experiments.mpi.mpicc if RUN.experiments.mpi else MpiSettings().mpicc

# Each experiment's programs, and any other code that decides what it
# measures (iolab/registry.py). The run key digests these with the
# settings, so new settings or new probe code measure into a new directory
# and raw data already measured is never overwritten.


def peer_entries(experiment, node):
    """The other nodes a measurement runs on besides ``node`` (the
    experiment's ``peers`` setting: MPI peers, the perftest server)."""
    return [NODE_BY_NAME[p] for p in peer_names(NODE_BY_NAME[node], experiment)]


def experiment_settings(experiment):
    """An experiment's config section as its measurement gets it, with what
    its settings model derives from the rest of the config (the latency
    presets' echo flags, so new flags measure into a new directory there too)."""
    return REGISTRY[experiment].settings.from_workflow(config["experiments"][experiment], config["experiments"])


def run_key(experiment, node):
    h = hashlib.sha256()
    # The peers' entries count too: other peers are other measurements.
    peers = peer_entries(experiment, node)
    h.update(json.dumps([experiment_settings(experiment), NODE_BY_NAME[node], *peers],
                        sort_keys=True).encode())
    # The parts of it left out here (the netns transports without root):
    # measured without them, so not the directory a run with them fills.
    parts = sorted(p for p in LEFT_OUT.get(node, {}) if p.startswith(f"{experiment} "))
    if parts:
        h.update(json.dumps(parts).encode())
    update_with_sources(h, measuring_sources(experiment), Path(workflow.basedir))
    return h.hexdigest()[:12]


def checked_run_key(wildcards, experiment):
    """Params function: refuse to measure current settings into an old key."""
    want = run_key(experiment, wildcards.node)
    if wildcards.key != want:
        raise WorkflowError(f"data/raw/{wildcards.node}/{experiment}/{wildcards.key} belongs to "
                            f"other settings (current key: {want}); it is kept as measured")
    return want


def raw_files(experiment):
    return [f"data/raw/{node}/{experiment}/{run_key(experiment, node)}/rep{rep}.csv"
            for node in NODES if measures(node, experiment)
            for rep in reps(experiment)]


# --- adaptive precision (rules/precision.smk) --------------------------------
PRECISION = RUN.precision
# The experiments claims are judged from, and the node they are judged on
# (iolab.analysis.claims.evaluate: the first in name order).
CLAIM_EXPERIMENTS = claim_experiments()
CLAIM_NODE = sorted(n for n in NODES if n not in SKIPPED_NODES
                    and all(node_runs(n, e) for e in COST_MODEL_EXPERIMENTS))[0]
PRECISION_PLAN = "results/precision/round{round}.json"


def precision_plan(round_):
    """The plan written by round ``round_``'s checkpoint (raises snakemake's
    IncompleteCheckpointException until it exists)."""
    with open(checkpoints.precision_plan.get(round=round_).output[0]) as f:
        return json.load(f)


def extra_reps(experiment, rounds):
    """Repetitions of ``experiment`` that rounds 1..``rounds`` add."""
    reps = []
    for j in range(rounds):
        reps += precision_plan(j)["next"].get(experiment, {}).get("reps", [])
    return reps


def raw_files_through(experiment, rounds):
    """The configured repetitions, plus what rounds 1..``rounds`` added on the claims' node."""
    extra = [f"data/raw/{CLAIM_NODE}/{experiment}/{run_key(experiment, CLAIM_NODE)}/rep{r}.csv"
             for r in extra_reps(experiment, rounds)]
    return raw_files(experiment) + extra


def final_round():
    """The first round whose plan says stop."""
    k = 0
    while not precision_plan(k)["stop"]:
        k += 1
    return k


def table_inputs(experiment):
    """The raw files a tidy table is built from: with adaptive precision, every round's."""
    if not PRECISION.enabled or experiment not in CLAIM_EXPERIMENTS or not measures(CLAIM_NODE, experiment):
        return raw_files(experiment)
    if not os.path.exists(PRECISION_PLAN.format(round=0)):
        # Round 0's plan as a plain input until it exists: asked through the
        # checkpoint, Snakemake keeps a table that exists (e.g. from a run
        # without precision) and neither plans nor measures anything. Once the
        # plan is written, the checkpoint's dependants are evaluated again.
        return raw_files(experiment) + [PRECISION_PLAN.format(round=0)]
    return raw_files_through(experiment, final_round())


def rep_round(experiment, rep):
    """The round that added repetition ``rep`` (0: planned in advance), and
    that round's plan for ``experiment`` (None for round 0)."""
    rep = int(rep)
    if not PRECISION.enabled or rep <= RUN.repeats_of(experiment):
        return 0, None
    j = 0
    while True:
        planned = precision_plan(j)["next"].get(experiment, {})
        if rep in planned.get("reps", []):
            return j + 1, planned
        j += 1


def rep_settings(experiment, rep):
    """An experiment's settings for one repetition: an extra round's echo
    repetition measures only the cells its plan lists."""
    settings = experiment_settings(experiment)
    _, planned = rep_round(experiment, rep)
    return {**settings, "cells": planned["cells"]} if planned and "cells" in planned else settings


def other_nodes_flag(experiment, node):
    """The other nodes a measurement involves: its load generator's node
    (the echo_client), or the nodes it spans (MPI peers, the perftest server)."""
    if REGISTRY[experiment].client_setting:
        return client_node_flag(node, REGISTRY[experiment].client_setting)
    return peer_nodes_flag(experiment, node)


def client_node_flag(node, setting):
    """`--client-node JSON` when the load generator runs on another node
    (the inventory's ``setting``), else ""."""
    client = NODE_BY_NAME[node].get(setting)
    if not client or client == node:
        return ""
    return f"--client-node {shlex.quote(json.dumps(NODE_BY_NAME[client], sort_keys=True))}"


def peer_nodes_flag(experiment, node):
    """`--peer-nodes JSON` when the measurement spans other nodes, else ""."""
    peers = peer_entries(experiment, node)
    return f"--peer-nodes {shlex.quote(json.dumps(peers, sort_keys=True))}" if peers else ""


def dependency_groups(experiment, node):
    """What `python -m iolab.deps check` checks before a measurement: the
    build tools (and MPI's) for native programs; perftest where the ib
    experiment's client runs here."""
    programs = set(REGISTRY[experiment].programs)
    if not programs:
        here = Capability.THIS_MACHINE in capabilities_of(NODE_BY_NAME[node]["runner"])
        return "ib" if here else "ssh"
    return "build mpi" if programs & set(MPI_PROGRAMS) else "build"


def measurement_threads(node):
    """A measurement claims the whole node: every core of a local run, or
    its slurm.cpus_per_task when it is a SLURM job."""
    cpus = (NODE_BY_NAME[node].get("slurm") or {}).get("cpus_per_task")
    return cpus or workflow.cores


def slurm_resource(node, key):
    return (NODE_BY_NAME[node].get("slurm") or {}).get(key, "")


# Notebooks, the tables each one reads (its `<experiment>_table` parameters),
# the figures each one writes (stable names, cited by users) and their report
# category: iolab/registry.py, from the experiments' manifests
# (config/experiments/<name>.yaml). With more than one node, the nodes notebook
# sets them side by side.
ACTIVE_NODES = [n for n in NODES if n not in SKIPPED_NODES]
NOTEBOOKS_ON = notebooks_run(set(EXPERIMENTS_ON), RUN, len(ACTIVE_NODES))
NOTEBOOK_TABLES = {name: list(nb.tables) for name, nb in NOTEBOOKS_REGISTRY.items()}
NOTEBOOK_CATEGORY = {name: nb.category for name, nb in NOTEBOOKS_REGISTRY.items()}
NOTEBOOK_FIGURES = {name: figures_drawn(name, set(EXPERIMENTS_ON), RUN, len(ACTIVE_NODES)) for name in NOTEBOOKS_ON}


def notebook_tables(notebook):
    """The tables a notebook reads that this run measures."""
    return [f"results/tables/{e}.parquet" for e in NOTEBOOK_TABLES[notebook] if e in EXPERIMENTS_ON]


def notebook_table_params(notebook):
    """papermill -p flags: each table, or "" for an experiment that is disabled."""
    tables = {e: f"results/tables/{e}.parquet" if e in EXPERIMENTS_ON else "" for e in NOTEBOOK_TABLES[notebook]}
    return " ".join(f"-p {e}_table {shlex.quote(path)}" for e, path in tables.items())


def notebook_plans(notebook):
    """The precision plans the claims notebook's verdicts depend on (every
    round's, with adaptive precision): none otherwise."""
    if not NOTEBOOKS_REGISTRY[notebook].judges_claims or not PRECISION.enabled or not set(COST_MODEL_EXPERIMENTS) <= set(EXPERIMENTS_ON):
        return []
    return [PRECISION_PLAN.format(round=k) for k in range(final_round() + 1)]


def notebook_extra_params(input):
    """papermill -p flags besides the tables: for the claims under adaptive
    precision, the round-0 count (their error budget keeps a share for later
    rounds, chosen before any data are seen); ``input.plans``: notebook_plans."""
    return f"-p anytime_after {RUN.repeats}" if input.plans else ""


def figure_files(notebook):
    return expand("paper/figures/{figure}.{ext}",
                  figure=NOTEBOOK_FIGURES[notebook], ext=["pdf", "svg"])
