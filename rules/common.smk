# Loads and validates the configuration; defines the names other rules use.
import hashlib
import json
import os
import shlex
import sys
import zlib

from snakemake.exceptions import WorkflowError

sys.path.insert(0, workflow.basedir)  # iolab/ without an installed package
from iolab.config import ConfigError, validate_config  # noqa: E402


def fail_config(message):
    # One line, then stop: a traceback would bury the key that is wrong.
    print(message, file=sys.stderr)
    sys.exit(1)


try:
    validate_config(config, os.path.join(workflow.basedir, "config", "schema.yaml"))
except ConfigError as e:
    fail_config(str(e))

NODES = [n["name"] for n in config["nodes"]]
NODE_BY_NAME = {n["name"]: n for n in config["nodes"]}
# Nodes that cannot run here, with the reason (a vm node without hardware
# KVM); the rest of the run goes on, and the reason is in results/nodes.json.
from iolab.runners.qemu import skip_reason  # noqa: E402

SKIPPED_NODES = {n["name"]: r for n in config["nodes"] if (r := skip_reason(n))}
for _name, _reason in SKIPPED_NODES.items():
    print(f"iolab: skipping node {_name}: {_reason}", file=sys.stderr)
REPS = list(range(1, config["repeats"] + 1))
# Experiments a runner cannot host: bpftrace needs this kernel.
RUNNER_EXPERIMENTS_EXCLUDED = {"ssh": {"trace"}, "vm": {"trace", "echo", "mpi"}}


def node_runs(node, experiment):
    """Whether ``experiment`` runs on ``node`` (its `experiments` list, and what its runner can do)."""
    entry = NODE_BY_NAME[node]
    chosen = entry.get("experiments")
    if chosen is not None and experiment not in chosen:
        return False
    return experiment not in RUNNER_EXPERIMENTS_EXCLUDED.get(entry["runner"], set())


# Experiments that run: those enabled (cost probes always are) that some
# node that is not skipped can host.
EXPERIMENTS = [name for name, section in config["experiments"].items()
               if section.get("enabled", True)
               and any(node_runs(n, name) for n in NODES if n not in SKIPPED_NODES)]

# Python modules the analysis steps run (iolab.analysis, iolab.report and
# everything they import); editing one re-runs the analysis, never a measurement.
from iolab.paths import module_closure  # noqa: E402

ANALYSIS_CODE = module_closure(["iolab.analysis", "iolab.report"])


wildcard_constraints:
    node="|".join(NODES),
    rep=r"\d+",
    key=r"[0-9a-f]{12}",
    experiment="|".join(EXPERIMENTS),


def run_seed(experiment, node, rep):
    """A per-run seed derived from the config seed, stable across runs."""
    return (config["seed"] + zlib.crc32(f"{experiment}/{node}/{rep}".encode())) % 2**31


# Each experiment's program, and any other code that decides what it measures.
# The run key digests these with the settings, so new settings or new probe
# code measure into a new directory and raw data already measured is never
# overwritten.
PROBE_EXPERIMENTS = ["syscall", "sendrecv", "uring_batch", "nop", "trace"]
EXPERIMENT_PROGRAMS = {name: ["cost-probe"] for name in PROBE_EXPERIMENTS}
EXPERIMENT_PROGRAMS["echo"] = ["echo-epoll", "echo-uring", "loadgen"]
EXPERIMENT_PROGRAMS["mpi"] = ["mpi-probe", "mpi-pingpong-ref"]
EXPERIMENT_EXTRA_SOURCES = {"trace": ["iolab/trace.py"], "echo": ["iolab/echo.py"],
                            "mpi": ["iolab/mpi.py", "iolab/runners/netns.py", "iolab/runners/mpigroup.py"]}


def mpi_peers(node):
    """The inventory entries of a node's MPI peers (the nodes transport)."""
    return [NODE_BY_NAME[p] for p in (NODE_BY_NAME[node].get("mpi") or {}).get("peers") or []]


def run_key(experiment, node):
    h = hashlib.sha256()
    # The peers' entries count too: other peers are other measurements.
    peers = mpi_peers(node) if experiment == "mpi" else []
    h.update(json.dumps([config["experiments"][experiment], NODE_BY_NAME[node], *peers],
                        sort_keys=True).encode())
    sources = set(NATIVE_COMMON + EXPERIMENT_EXTRA_SOURCES.get(experiment, []))
    for program in EXPERIMENT_PROGRAMS[experiment]:
        sources.update(NATIVE_PROGRAMS[program])
    for src in sorted(sources):
        h.update(src.encode())
        h.update(open(os.path.join(workflow.basedir, src), "rb").read())
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
            for node in NODES if node_runs(node, experiment) and node not in SKIPPED_NODES
            for rep in REPS]


def client_node_flag(node):
    """`--client-node JSON` when the echo load generator runs on another node, else ""."""
    client = NODE_BY_NAME[node].get("echo_client")
    if not client or client == node:
        return ""
    return f"--client-node {shlex.quote(json.dumps(NODE_BY_NAME[client]))}"


def peer_nodes_flag(node):
    """`--peer-nodes JSON` when the node runs MPI across its mpi.peers, else ""."""
    peers = mpi_peers(node)
    return f"--peer-nodes {shlex.quote(json.dumps(peers))}" if peers else ""


def measurement_threads(node):
    """A measurement claims the whole node: every core of a local run, or
    its slurm.cpus_per_task when it is a SLURM job."""
    cpus = (NODE_BY_NAME[node].get("slurm") or {}).get("cpus_per_task")
    return cpus or workflow.cores


def slurm_resource(node, key):
    return (NODE_BY_NAME[node].get("slurm") or {}).get(key, "")


# Notebooks and the figures each one writes (stable names, cited by users).
NOTEBOOKS = (["cost_model"] + (["echo"] if "echo" in EXPERIMENTS else [])
             + (["collectives"] if "mpi" in EXPERIMENTS else []))
# With more than one node, the nodes notebook sets them side by side (and
# compares node kinds when the inventory turns out to have more than one).
ACTIVE_NODES = [n for n in NODES if n not in SKIPPED_NODES]
if len(ACTIVE_NODES) > 1:
    NOTEBOOKS.append("nodes")
NOTEBOOK_FIGURES = {
    "cost_model": ["syscall_cost", "sendrecv_cost", "uring_batch_time", "cost_model_per_request"],
    "echo": ["echo_rps", "echo_cpu_per_request", "echo_latency", "echo_batch_size"],
    "collectives": ["mpi_pingpong", "mpi_collectives", "mpi_prediction_error", "mpi_transport_ratio"],
    # nodes_mpi_ratio and nodes_echo_ratio exist only when two node kinds were
    # measured; the manifest lists them then.
    "nodes": ["nodes_costs"],
}


def table_or_empty(experiment):
    """A notebook parameter: the experiment's table, or "" if it is disabled."""
    return f"results/tables/{experiment}.parquet" if experiment in EXPERIMENTS else ""


def figure_files(notebook):
    return expand("paper/figures/{figure}.{ext}",
                  figure=NOTEBOOK_FIGURES[notebook], ext=["pdf", "svg"])
