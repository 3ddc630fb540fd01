"""The node inventory (the config's ``nodes``), typed, with every default
taken from config/schema.yaml (iolab.schema). Runners, node resolution and the
experiments take a ``NodeEntry``; the boundaries (the workflow's typed
config, ``python -m iolab.measure``'s JSON, tests) make one with
``NodeEntry.of``, which accepts an entry the schema filled in as well as a
hand-written one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import field_validator

from .capabilities import RUNNER_NAMES
from .schema import Section, from_schema, subschema


def node_schema() -> dict[str, Any]:
    """The schema of one ``nodes[]`` entry."""
    return subschema("nodes", "[]")


def _from_schema(*path: str) -> Any:
    return from_schema("nodes", "[]", *path)


CpuSet = int | str | None


def cpu_list(value: int | str) -> list[int]:
    """The CPUs of a node's cpus entry: one CPU or a taskset-style list ("0-2,5")."""
    out: list[int] = []
    for part in str(value).split(","):
        low, _, high = part.partition("-")
        out += range(int(low), int(high or low) + 1)
    return out


class MpiOptions(Section):
    interface: str | None = None
    peers: tuple[str, ...] = _from_schema("mpi", "peers")
    ranks_per_node: int | None = _from_schema("mpi", "ranks_per_node")
    bind_to: Literal["core", "none"] = _from_schema("mpi", "bind_to")
    transports: tuple[str, ...] | None = _from_schema("mpi", "transports")


class IbOptions(Section):
    peer: str | None = _from_schema("ib", "peer")


class SlurmOptions(Section):
    partition: str | None = None
    slurm_extra: str = _from_schema("slurm", "slurm_extra")
    cpus_per_task: int | None = _from_schema("slurm", "cpus_per_task")


class VmOptions(Section):
    accel: Literal["kvm", "tcg"] = _from_schema("vm", "accel")
    cmdline: str = _from_schema("vm", "cmdline")
    memory_mb: int = _from_schema("vm", "memory_mb")
    cpus: int = _from_schema("vm", "cpus")
    kernel: str | None = _from_schema("vm", "kernel")


class CpuSets(Section):
    probe: int | None = _from_schema("cpus", "probe")
    server: CpuSet = _from_schema("cpus", "server")
    client: CpuSet = _from_schema("cpus", "client")


class NodeEntry(Section):
    """One ``nodes[]`` entry, its defaults filled in."""

    name: str
    runner: str
    kind: Literal["auto", "bare-metal", "vm", "container"] = _from_schema("kind")
    host: str | None = None
    user: str | None = None
    port: int = _from_schema("port")
    identity_file: str | None = None
    known_hosts: str | None = None
    accept_new_host_key: bool = _from_schema("accept_new_host_key")
    connect_timeout: int = _from_schema("connect_timeout")
    address: str | None = None
    setup: tuple[str, ...] = _from_schema("setup")
    experiments: tuple[str, ...] | None = _from_schema("experiments")
    echo_client: str | None = _from_schema("echo_client")
    mpi: MpiOptions = _from_schema("mpi")
    ib: IbOptions = _from_schema("ib")
    slurm: SlurmOptions = _from_schema("slurm")
    vm: VmOptions = _from_schema("vm")
    cpus: CpuSets = _from_schema("cpus")

    @field_validator("runner")
    @classmethod
    def _a_runner(cls, runner: str) -> str:
        # The schema's enum is the same list (iolab.schema fills it in); an
        # entry made by hand comes through here only.
        if runner not in RUNNER_NAMES:
            raise ValueError(f"runner {runner!r} is none of {', '.join(sorted(RUNNER_NAMES))}")
        return runner

    @classmethod
    def where(cls, value: Mapping[str, Any]) -> str:
        return f"node {value.get('name')!r}"

    @property
    def reach(self) -> str | None:
        """How other nodes reach this one: its address, else its ssh host."""
        return self.address or self.host

    def as_config(self) -> dict[str, Any]:
        """The entry as the config holds it (lists, not tuples): for JSON."""
        return self.model_dump(mode="json")
