"""Runners: how a command reaches a node.

``local`` (and ``slurm``, whose jobs the executor already placed on the
node) runs here; ``ssh`` copies the sources to a remote node, builds and
runs there; ``vm`` boots a QEMU guest per command. The MPI experiment's ``netns`` transports use the namespace
cluster in ``netns.py``. Each runner has the same interface: ``session``,
``run``, ``popen``/``terminate`` (servers), ``exe``, ``scratch``,
``read_file`` and ``facts``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .local import LocalRunner, RunError
from .ssh import SshRunner
from .vm import VmRunner

Runner = LocalRunner | SshRunner | VmRunner

__all__ = ["LocalRunner", "RunError", "Runner", "SshRunner", "VmRunner", "runner_for"]


def runner_for(entry: Mapping[str, Any]) -> Runner:
    """The runner for a config ``nodes[]`` entry."""
    runner = entry.get("runner", "local")
    if runner in ("local", "slurm"):
        # A slurm node's jobs are already on the node (the executor plugin
        # submitted them there), so they run locally.
        return LocalRunner()
    if runner == "ssh":
        return SshRunner(entry)
    if runner == "vm":
        return VmRunner(entry)
    raise RunError(f"node {entry.get('name')!r}: runner {runner!r} cannot run experiments "
                   "(netns is an MPI transport of a local node: experiments.mpi.transports)")
