"""The experiments, in one registry: what each runs, which code decides what
it measures, what one repetition writes, where its tidy table and figures
come from, and what it needs from the runner of the node it runs on. The
workflow (rules/common.smk, rules/probes.smk), the measurement entry point
(iolab.measure) and the loaders read it; adding an experiment means an entry
here, its run code, a loader and a notebook.
"""

from __future__ import annotations

from dataclasses import dataclass

from .runners.base import Capability


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


COST_PROBE = ("cost-probe",)
REGISTRY: dict[str, Experiment] = {e.name: e for e in (
    Experiment("syscall", COST_PROBE, ("iolab/probes.py",), raw_format="cost-probe syscall v2",
               notebooks=("cost_model", "claims")),
    Experiment("sendrecv", COST_PROBE, ("iolab/probes.py",), raw_format="cost-probe sendrecv v2",
               notebooks=("cost_model", "claims")),
    Experiment("uring_batch", COST_PROBE, ("iolab/probes.py",), raw_format="cost-probe uring-batch v2",
               notebooks=("cost_model", "claims")),
    Experiment("nop", COST_PROBE, ("iolab/probes.py",), raw_format="cost-probe nop v2",
               notebooks=("cost_model",)),
    Experiment("trace", (*COST_PROBE, "echo-uring", "loadgen"), ("iolab/trace.py", "iolab/echo.py"),
               raw_format="bpftrace maps v1",
               notebooks=("cost_model",), needs=frozenset({Capability.KERNEL_TRACING})),
    Experiment("echo", ("echo-epoll", "echo-uring", "loadgen"), ("iolab/echo.py",),
               optional_programs=("echo-go-net", "echo-go-uring"),
               extra_outputs=("histograms.csv",), raw_format="echo cells v1",
               notebooks=("echo", "cost_model", "claims"),
               needs=frozenset({Capability.SERVERS})),
    Experiment("latency", ("echo-epoll", "echo-uring", "loadgen"), ("iolab/latency.py", "iolab/echo.py"),
               optional_programs=("echo-go-net", "echo-go-uring"),
               extra_outputs=("histograms.csv",), raw_format="echo open-loop v1",
               notebooks=("echo",), needs=frozenset({Capability.SERVERS})),
    Experiment("mpi", ("mpi-probe", "mpi-pingpong-ref"),
               ("iolab/mpi.py", "iolab/runners/netns.py", "iolab/runners/mpigroup.py"),
               raw_format="mpi iterations v1", notebooks=("collectives", "claims"),
               needs=frozenset({Capability.MPI})),
    # perftest comes from the node's packages, not from native/.
    Experiment("ib", (), ("iolab/perftest.py",), extra_outputs=("perftest.txt",),
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
