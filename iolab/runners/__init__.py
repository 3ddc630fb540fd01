"""Runners: how a command reaches a node.

``local`` (and ``slurm``, whose jobs the executor already placed on the
node) runs here; ``ssh`` copies the sources to a remote node, builds and
runs there; ``vm`` boots a QEMU guest per command. The MPI experiment's
``netns`` transports use the namespace cluster in ``netns.py``. Every runner
implements the ``Runner`` protocol (``base.py``) and declares its
capabilities; callers ask for those, never for a runner class.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..inventory import NodeEntry
from .base import Capability, Runner
from .local import LocalRunner, RunError
from .ssh import SshRunner
from .vm import VmRunner

__all__ = ["Capability", "LocalRunner", "RunError", "Runner", "SshRunner", "VmRunner",
           "capabilities_of", "runner_for"]

# runner name in the inventory -> the class whose capabilities it has (a
# slurm node's jobs already run on the node, as local ones).
_CLASSES = {"local": LocalRunner, "slurm": LocalRunner, "ssh": SshRunner, "vm": VmRunner}


def capabilities_of(runner: str) -> frozenset[Capability]:
    """What a runner named in the inventory can do (for planning, before any node is reached)."""
    cls = _CLASSES.get(runner)
    return cls.capabilities if cls is not None else frozenset()


def runner_for(entry: Mapping[str, Any] | NodeEntry) -> Runner:
    """The runner for a config ``nodes[]`` entry."""
    node = NodeEntry.of(entry)
    runner = node.runner
    if runner in ("local", "slurm"):
        # A slurm node's jobs are already on the node (the executor plugin
        # submitted them there), so they run locally.
        return LocalRunner()
    if runner == "ssh":
        return SshRunner(node)
    if runner == "vm":
        return VmRunner(node)
    raise RunError(f"node {node.name!r}: runner {runner!r} cannot run experiments "
                   "(netns is an MPI transport of a local node: experiments.mpi.transports)")
