"""The experiments, one module each. What each one is (its programs,
settings, raw format, tidy table, needs) is declared once in
iolab.registry; a module here measures one repetition of it
(``run_repetition``). This package's ``__init__`` stays light: an
experiment's run code is imported only to run it.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
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
    module = importlib.import_module(f"{__name__}.{REGISTRY[repetition.experiment].module}")
    measured: Measured = module.run_repetition(repetition)
    return measured
