"""Runners: how a command reaches a node.

``local`` (and ``slurm``, whose jobs the executor already placed on the
node) runs here; ``ssh`` copies the sources to a remote node, builds and
runs there; ``vm`` boots a QEMU guest per command. Every runner
implements the ``Runner`` protocol (``base.py``) and declares its
capabilities; callers ask for those, never for a runner class.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

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
    "cluster_problem",
    "guest_kernel",
    "guest_modules",
    "run_in_guest",
    "runner_for",
    "skip_reason",
    "ssh_failure",
    "ssh_options",
]

# Runner name (iolab.capabilities.RUNNER_CAPABILITIES, each class's
# ``name``) -> its class; tests/test_declared_once.py holds the two together.
_CLASSES: dict[str, type[LocalRunner] | type[SshRunner] | type[VmRunner]] = {
    cls.name: cls for cls in (LocalRunner, SlurmRunner, SshRunner, VmRunner)
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


# Seconds sinfo may take to answer: it returns at once where no SLURM is
# configured, and retries for up to 60 s where its config file is missing.
SINFO_TIMEOUT = 10


def cluster_problem(nodes: Sequence[NodeEntry]) -> str | None:
    """Why a run with a cluster executor (the slurm profile) cannot submit
    its measurements from here (None: it can): no sbatch, no SLURM cluster
    that answers, or a node whose measurements are not SLURM jobs (without
    the job's CPUs its threads are the workflow's total cores, which a
    cluster run has none of). Asked when the workflow plans, so that it is
    one line at once rather than an executor's error about cores."""
    fix = "run it on a SLURM cluster's login node, or drop --profile profiles/slurm to run on this machine"
    submits = "the slurm profile submits every measurement to SLURM"
    if shutil.which("sbatch") is None:
        return f"{submits} with sbatch, which is not installed here; {fix}"
    try:
        res = subprocess.run(
            ["sinfo", "--noheader", "--format=%P"], capture_output=True, text=True, timeout=SINFO_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        return f"{submits}, and sinfo gave no answer in {SINFO_TIMEOUT} s; {fix}"
    except OSError as e:
        return f"{submits}, and sinfo cannot run here ({e.strerror}); {fix}"
    if res.returncode != 0:
        said = (res.stderr.strip().splitlines() or [f"exit status {res.returncode}"])[-1]
        return f"{submits}, and no SLURM cluster answers here ({said}); {fix}"
    for node in nodes:
        if Capability.CLUSTER_JOB not in capabilities_of(node.runner):
            return (
                f"node {node.name} has runner {node.runner}, and the slurm profile measures only nodes with "
                "runner: slurm (config/nodes.example.yaml); give your cluster's nodes with --configfile, "
                "or drop --profile profiles/slurm to run on this machine"
            )
    return None


def skip_reason(node: NodeEntry) -> str | None:
    """Why a node cannot run here (None: it can): its runner's answer (a
    QEMU guest without its emulator, guest kernel or KVM)."""
    cls = _CLASSES.get(node.runner)
    return cls.skip_reason(node) if cls is not None else None
