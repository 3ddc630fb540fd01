"""The experiments, one module each, and one registry of them: what each
runs, which code decides what it measures, what one repetition writes,
where its tidy table and figures come from, and what it needs from the
runner of the node it runs on. The workflow (rules/common.smk,
rules/probes.smk), the measurement entry point (iolab.measure) and the
loaders read the registry; adding an experiment means an entry here, its
module (with a ``run_repetition``), a loader and a notebook.

This package's ``__init__`` stays light: the workflow imports the registry
at every start, so an experiment's run code is imported only to run it.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..runners.base import Capability

if TYPE_CHECKING:
    from ..hostfacts import HostFacts
    from ..inventory import NodeEntry
    from ..nodes import Node
    from ..runners import Runner
    from ..settings import ExperimentSettings


@dataclass(frozen=True)
class Experiment:
    name: str
    # Native programs it runs (built on the node); see native/programs.mk.
    programs: tuple[str, ...]
    # Python modules whose code decides what it measures: digested into the
    # run key with the programs' sources, so new code measures into a new
    # directory.
    code: tuple[str, ...] = ()
    # Files one repetition writes besides rep<N>.csv and its sidecar.
    extra_outputs: tuple[str, ...] = ()
    # The raw file's format and version (the loaders check the header line
    # where the format has one; bump it with a reader kept for the old one).
    raw_format: str = ""
    # Notebooks that present it.
    notebooks: tuple[str, ...] = ()
    # What the runner of a node must be able to do for it to run there.
    needs: frozenset[Capability] = frozenset()
    # The inventory setting a node must have for it to run there (e.g. the
    # ib experiment's "ib.peer"); "" when every node may run it.
    needs_setting: str = ""
    # Programs built only where the node has their toolchain (the Go
    # servers): the experiment builds them itself and records why one could
    # not be built; its sources are digested into the run key all the same.
    optional_programs: tuple[str, ...] = ()
    # The module under iolab/experiments/ whose run_repetition(Repetition)
    # measures one repetition.
    module: str = ""


COST_PROBE = ("cost-probe",)
COST_PROBE_CODE = ("iolab/experiments/cost_probes.py",)
ECHO_CODE = "iolab/experiments/echo.py"
ECHO_PROGRAMS = ("echo-epoll", "echo-uring", "loadgen")
GO_SERVERS = ("echo-go-net", "echo-go-uring")
REGISTRY: dict[str, Experiment] = {e.name: e for e in (
    Experiment("syscall", COST_PROBE, COST_PROBE_CODE, module="cost_probes",
               raw_format="cost-probe syscall v2", notebooks=("cost_model", "claims")),
    Experiment("sendrecv", COST_PROBE, COST_PROBE_CODE, module="cost_probes",
               raw_format="cost-probe sendrecv v2", notebooks=("cost_model", "claims")),
    Experiment("uring_batch", COST_PROBE, COST_PROBE_CODE, module="cost_probes",
               raw_format="cost-probe uring-batch v2", notebooks=("cost_model", "claims")),
    Experiment("nop", COST_PROBE, COST_PROBE_CODE, module="cost_probes",
               raw_format="cost-probe nop v2", notebooks=("cost_model",)),
    Experiment("trace", (*COST_PROBE, "echo-uring", "loadgen"), ("iolab/experiments/trace.py", ECHO_CODE),
               module="trace", raw_format="bpftrace maps v1", notebooks=("cost_model",),
               needs=frozenset({Capability.KERNEL_TRACING})),
    Experiment("echo", ECHO_PROGRAMS, (ECHO_CODE,), module="echo", optional_programs=GO_SERVERS,
               extra_outputs=("histograms.csv",), raw_format="echo cells v1",
               notebooks=("echo", "cost_model", "claims"), needs=frozenset({Capability.SERVERS})),
    Experiment("latency", ECHO_PROGRAMS, ("iolab/experiments/latency.py", ECHO_CODE), module="latency",
               optional_programs=GO_SERVERS, extra_outputs=("histograms.csv",),
               raw_format="echo open-loop v1", notebooks=("echo",), needs=frozenset({Capability.SERVERS})),
    Experiment("mpi", ("mpi-probe", "mpi-pingpong-ref"),
               ("iolab/experiments/mpi/__init__.py", "iolab/experiments/mpi/launch.py",
                "iolab/runners/netns.py", "iolab/runners/mpigroup.py"),
               module="mpi", raw_format="mpi iterations v1", notebooks=("collectives", "claims"),
               needs=frozenset({Capability.MPI})),
    # perftest comes from the node's packages, not from native/.
    Experiment("ib", (), ("iolab/experiments/ib.py",), module="ib", extra_outputs=("perftest.txt",),
               raw_format="perftest v1", notebooks=("claims",),
               needs=frozenset({Capability.SERVERS}), needs_setting="ib.peer"),
)}


def can_host(capabilities: frozenset[Capability], experiment: str) -> bool:
    """Whether a runner with ``capabilities`` can run ``experiment``."""
    return REGISTRY[experiment].needs <= capabilities


def has_setting(entry: dict, experiment: str) -> bool:
    """Whether a node's inventory entry sets what ``experiment`` needs."""
    dotted = REGISTRY[experiment].needs_setting
    value: object = entry
    for part in dotted.split(".") if dotted else []:
        value = value.get(part) if isinstance(value, dict) else None
    return bool(value)


@dataclass(frozen=True)
class Repetition:
    """One repetition of an experiment on one node, as its run code gets it
    from iolab.measure: a session on the node with the programs built, and
    the temporary path the raw file goes to (renamed into place by the
    caller once the repetition returns)."""

    experiment: str
    node_entry: NodeEntry              # the inventory entry
    node: Node                         # its kind resolved on the node
    runner: Runner                     # the node's session, programs built
    facts: HostFacts                   # the node's host facts, gathered on it
    settings: ExperimentSettings       # the experiment's config section, typed
    seed: int
    raw: Path                          # where the raw file is written
    output: Path                       # its final name (extra outputs are named from it)
    client_entry: NodeEntry | None = None      # echo: the load generator's node
    peer_entries: Sequence[NodeEntry] = ()     # mpi: mpi.peers; ib: ib.peer

    @property
    def remote(self) -> bool:
        return Capability.THIS_MACHINE not in self.runner.capabilities

    def server_client_cpus(self) -> dict[str, int | str | None]:
        """The node's CPU sets for an echo server and its load generator."""
        return {"server": self.node.cpus.get("server"), "client": self.node.cpus.get("client")}


@dataclass(frozen=True)
class Measured:
    """What a repetition tells its provenance and the log."""

    extra: dict[str, Any]              # experiment-specific provenance
    command: list[str]                 # what ran, for the sidecar
    summary: str                       # one line for the log
    placement: Mapping[str, Any]       # where it ran (CPUs, peers)


def run_repetition(repetition: Repetition) -> Measured:
    """Measure one repetition with its experiment's module."""
    module = importlib.import_module(f"{__name__}.{REGISTRY[repetition.experiment].module}")
    measured: Measured = module.run_repetition(repetition)
    return measured
