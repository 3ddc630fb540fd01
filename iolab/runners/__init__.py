"""Runners: how a command reaches a node.

``local`` (and ``slurm``, whose jobs the executor already placed on the
node) runs here; ``ssh`` copies the sources to a remote node, builds and
runs there; ``vm`` boots a QEMU guest per command. Every runner
implements the ``Runner`` protocol (``base.py``) and declares its
capabilities; callers ask for those, never for a runner class.
"""

from __future__ import annotations

from ..capabilities import Capability, capabilities_of
from ..inventory import NodeEntry
from .base import RunError, Runner, RunResult, build_failure
from .local import LocalRunner, SlurmRunner
from .qemu import VmError, guest_kernel, guest_modules, run_in_guest
from .ssh import SshRunner, ssh_failure, ssh_options
from .vm import VmRunner

__all__ = [
    "Capability",
    "LocalRunner",
    "RunError",
    "RunResult",
    "Runner",
    "SlurmRunner",
    "SshRunner",
    "VmError",
    "VmRunner",
    "build_failure",
    "capabilities_of",
    "guest_kernel",
    "guest_modules",
    "run_in_guest",
    "runner_for",
    "skip_reason",
    "ssh_failure",
    "ssh_options",
]

_CLASSES: dict[str, type[LocalRunner] | type[SshRunner] | type[VmRunner]] = {
    "local": LocalRunner,
    "slurm": SlurmRunner,
    "ssh": SshRunner,
    "vm": VmRunner,
}


def runner_for(node: NodeEntry) -> Runner:
    """The runner for a config ``nodes[]`` entry."""
    cls = _CLASSES.get(node.runner)
    if cls is None:
        raise RunError(
            f"node {node.name!r}: runner {node.runner!r} cannot run experiments "
            "(netns is an MPI transport of a local node: experiments.mpi.transports)"
        )
    if issubclass(cls, LocalRunner):  # SlurmRunner too: this machine, no node to hold
        return cls()
    return cls(node)


def skip_reason(node: NodeEntry) -> str | None:
    """Why a node cannot run here (None: it can): its runner's answer (a
    QEMU guest without its emulator, guest kernel or KVM)."""
    cls = _CLASSES.get(node.runner)
    return cls.skip_reason(node) if cls is not None else None
