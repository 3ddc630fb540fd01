"""What each runner named in the inventory can do: the one table the
runners, the config checks and the workflow's planning read. Callers ask
for a capability, never for a runner's name (tests/test_runners.py)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Capability(str, Enum):
    # Commands run on the machine the measurement job runs on: its files,
    # its kernel (a SLURM job's node is that machine for its jobs).
    THIS_MACHINE = "this machine"
    # The node's CPU numbers are those of the machine the workflow starts
    # on, so the config can check them there.
    CPUS_HERE = "cpus here"
    # Reached by logging in to a host: the entry needs `host`.
    LOGIN = "login"
    # Long-running processes next to the measurement (the echo server and
    # its load generator): popen, terminate, read_file, write_file, scratch.
    SERVERS = "servers"
    # mpirun on the node.
    MPI = "mpi"
    # Start programs on other nodes over ssh: mpirun across mpi.peers,
    # perftest's client against its ib.peer.
    DRIVES_PEERS = "drives peers"
    # Be such a peer.
    PEER = "peer"
    # bpftrace on the kernel of the machine the job runs on.
    KERNEL_TRACING = "kernel tracing"
    # Its measurements are jobs a cluster executor submits (the slurm
    # profile): the job's own CPUs are its threads.
    CLUSTER_JOB = "cluster job"


_HERE = frozenset(
    {Capability.THIS_MACHINE, Capability.SERVERS, Capability.MPI, Capability.DRIVES_PEERS, Capability.KERNEL_TRACING}
)


@dataclass(frozen=True)
class RunnerKind:
    capabilities: frozenset[Capability]
    # The system packages a node of it needs on this machine beyond a local
    # run's (iolab.packages; Debian 12's names).
    packages: tuple[str, ...] = ()


# Runner name in the inventory -> what it can do and needs: the one list of
# runners. A SLURM node's jobs run on the node the executor placed them on,
# as local ones do there; its CPU numbers are that node's (SLURM's client is
# part of slurm-wlm). A QEMU guest runs the cost probes only. netns is no
# runner: it is an MPI transport of a local node.
RUNNERS: dict[str, RunnerKind] = {
    "local": RunnerKind(_HERE | {Capability.CPUS_HERE}),
    "slurm": RunnerKind(_HERE | {Capability.CLUSTER_JOB}, ("slurm-client",)),
    "ssh": RunnerKind(
        frozenset({Capability.LOGIN, Capability.SERVERS, Capability.MPI, Capability.DRIVES_PEERS, Capability.PEER}),
        ("openssh-client",),
    ),
    "vm": RunnerKind(frozenset(), ("qemu-system-x86", "linux-image-amd64", "busybox-static")),
}
RUNNER_CAPABILITIES: dict[str, frozenset[Capability]] = {name: r.capabilities for name, r in RUNNERS.items()}


# Every name a config's nodes[] entry may give as its runner (the schema's
# enum, filled in by iolab.schema): the runners above, and netns, which is
# an MPI transport of a local node and runs nothing itself.
RUNNER_NAMES: tuple[str, ...] = (*RUNNERS, "netns")


def capabilities_of(runner: str) -> frozenset[Capability]:
    """What a runner named in the inventory can do (empty for a name that
    runs nothing, such as netns)."""
    return RUNNER_CAPABILITIES.get(runner, frozenset())


def runs_experiments(runner: str) -> bool:
    """Whether ``runner`` is one that runs measurements at all."""
    return runner in RUNNER_CAPABILITIES
