"""The experiments, one module each. What each one is (its programs,
settings, raw format, needs) is declared once in iolab.registry; a module
here measures one repetition of it (``run_repetition``), and ``RUNS`` holds
each experiment's by reference, checked against the registry at import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..capabilities import Capability
from ..registry import REGISTRY
from ..settings import ExperimentSettings

if TYPE_CHECKING:
    from ..hostfacts import HostFacts
    from ..inventory import NodeEntry
    from ..nodes import Node
    from ..runners import Runner


S = TypeVar("S", bound=ExperimentSettings)


@dataclass(frozen=True)
class Repetition:
    """One repetition of an experiment on one node, as its run code gets it
    from iolab.measure: a session on the node with the programs built, and
    the temporary path the raw file goes to (renamed into place by the
    caller once the repetition returns)."""

    experiment: str
    node: Node  # the node: its entry, kind and host facts
    runner: Runner  # the node's session, programs built
    settings: ExperimentSettings  # the experiment's config section, typed
    seed: int
    raw: Path  # where the raw file is written
    output: Path  # its final name (extra outputs are named from it)
    client_entry: NodeEntry | None = None  # echo: the load generator's node
    peer_entries: Sequence[NodeEntry] = ()  # mpi: mpi.peers; ib: ib.peer
    index: int = 1  # the repetition's number, 1-based
    run_seed: int | None = None  # the seed every repetition of the run shares (None: seed)

    @property
    def entry(self) -> NodeEntry:
        """The node's inventory entry."""
        if self.node.entry is None:
            raise TypeError(f"{self.experiment}: the node {self.node.name} came without its entry")
        return self.node.entry

    @property
    def facts(self) -> HostFacts:
        """The node's host facts, gathered on it."""
        if self.node.facts is None:
            raise TypeError(f"{self.experiment}: the node {self.node.name} came without its host facts")
        return self.node.facts

    @property
    def remote(self) -> bool:
        return Capability.THIS_MACHINE not in self.runner.capabilities

    def server_client_cpus(self) -> dict[str, int | str | None]:
        """The node's CPU sets for an echo server and its load generator."""
        return {"server": self.node.cpus.get("server"), "client": self.node.cpus.get("client")}


@dataclass(frozen=True)
class Measured:
    """What a repetition tells its provenance and the log."""

    extra: dict[str, Any]  # experiment-specific provenance
    command: list[str]  # what ran, for the sidecar
    summary: str  # one line for the log
    placement: Mapping[str, Any]  # where it ran (CPUs, peers)


def settings_of(rep: Repetition, model: type[S]) -> S:
    """The repetition's settings as its experiment's model (typed once, by
    iolab.measure)."""
    if not isinstance(rep.settings, model):
        raise TypeError(f"{rep.experiment}: settings of type {type(rep.settings).__name__}, not {model.__name__}")
    return rep.settings


def run_repetition(repetition: Repetition) -> Measured:
    """Measure one repetition with its experiment's module."""
    return RUNS[repetition.experiment](repetition)


class RunsError(ImportError):
    """RUNS does not cover the registry's experiments exactly, or an entry
    is not its experiment's run module's (the registry's first ``code``)."""


def check_runs(runs: Mapping[str, Callable[[Repetition], Measured]]) -> dict[str, Callable[[Repetition], Measured]]:
    """``runs`` in the registry's order, or a RunsError naming what is wrong."""
    problems = [f"{e} has no run_repetition in iolab.experiments.RUNS" for e in REGISTRY if e not in runs]
    problems += [f"RUNS names {e}, which iolab.registry does not declare" for e in runs if e not in REGISTRY]
    problems += [
        f"{e}: RUNS holds {f.__module__}.{f.__name__}, but its registry entry's code starts with "
        f"{REGISTRY[e].code[0] if REGISTRY[e].code else 'nothing'}"
        for e, f in runs.items()
        if e in REGISTRY and f.__module__ != REGISTRY[e].run_module
    ]
    if problems:
        raise RunsError("; ".join(problems))
    return {e: runs[e] for e in REGISTRY}


# The run modules import Repetition and Measured from here: imported last.
from . import cost_probes, echo, ib, latency, mpi, trace  # noqa: E402

# experiment -> the function that measures one repetition of it. Every
# cost-probe mode runs through cost_probes.
RUNS: dict[str, Callable[[Repetition], Measured]] = check_runs(
    {
        **{name: cost_probes.run_repetition for name, e in REGISTRY.items() if e.probe_mode},
        "trace": trace.run_repetition,
        "echo": echo.run_repetition,
        "latency": latency.run_repetition,
        "mpi": mpi.run_repetition,
        "ib": ib.run_repetition,
    }
)
