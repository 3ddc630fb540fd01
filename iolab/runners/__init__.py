"""Runners: how a command reaches a node.

``local`` runs here; ``ssh`` copies the sources to a remote node, builds and
runs there. The MPI experiment's ``netns`` transports use the namespace
cluster in ``netns.py``. Each runner has the same interface: ``session``,
``run``, ``popen``/``terminate`` (servers), ``exe``, ``scratch``,
``read_file`` and ``facts``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .local import LocalRunner, RunError
from .ssh import SshRunner

Runner = LocalRunner | SshRunner

__all__ = ["LocalRunner", "RunError", "Runner", "SshRunner", "runner_for"]


def runner_for(entry: Mapping[str, Any]) -> Runner:
    """The runner for a config ``nodes[]`` entry."""
    runner = entry.get("runner", "local")
    if runner == "local":
        return LocalRunner()
    if runner == "ssh":
        return SshRunner(entry)
    raise RunError(f"node {entry.get('name')!r}: runner {runner!r} cannot run experiments directly "
                   "(netns is an MPI transport of a local node; slurm nodes run through "
                   "--profile profiles/slurm; vm nodes through the vm experiment)")
