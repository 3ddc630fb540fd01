"""The node inventory (the config's ``nodes``), typed.

config/schema.yaml stays the source: Snakemake validates the config against
it and fills in its defaults. These models take every default from the
schema, so none is written twice, and tests/test_config.py checks that they
name the same keys as the schema. Runners, node resolution and the
experiments read a node through ``NodeEntry.of``, which accepts an entry
the schema filled in as well as a hand-written one (tests, ``python -m
iolab.measure``).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .paths import CONFIG_SCHEMA


@cache
def node_schema() -> dict[str, Any]:
    """The schema of one ``nodes[]`` entry."""
    schema: dict[str, Any] = yaml.safe_load(CONFIG_SCHEMA.read_text())["properties"]["nodes"]["items"]
    return schema


def schema_default(*path: str) -> Any:
    """The schema's default of a node key (``"vm", "accel"``); None where it
    gives none (an optional key)."""
    schema = node_schema()
    for part in path:
        schema = schema["properties"][part]
    return schema.get("default")


def _from_schema(*path: str) -> Any:
    return Field(default=schema_default(*path))


class _Section(BaseModel):
    # Defaults are validated too, so the schema's [] becomes a tuple.
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


CpuSet = int | str | None


class MpiOptions(_Section):
    interface: str | None = None
    peers: tuple[str, ...] = _from_schema("mpi", "peers")
    ranks_per_node: int | None = _from_schema("mpi", "ranks_per_node")
    bind_to: Literal["core", "none"] = _from_schema("mpi", "bind_to")
    transports: tuple[str, ...] | None = _from_schema("mpi", "transports")


class IbOptions(_Section):
    peer: str | None = _from_schema("ib", "peer")


class SlurmOptions(_Section):
    partition: str | None = None
    slurm_extra: str = _from_schema("slurm", "slurm_extra")
    cpus_per_task: int | None = _from_schema("slurm", "cpus_per_task")


class VmOptions(_Section):
    accel: Literal["kvm", "tcg"] = _from_schema("vm", "accel")
    cmdline: str = _from_schema("vm", "cmdline")
    memory_mb: int = _from_schema("vm", "memory_mb")
    cpus: int = _from_schema("vm", "cpus")
    kernel: str | None = _from_schema("vm", "kernel")


class CpuSets(_Section):
    probe: int | None = _from_schema("cpus", "probe")
    server: CpuSet = _from_schema("cpus", "server")
    client: CpuSet = _from_schema("cpus", "client")


class NodeEntry(_Section):
    """One ``nodes[]`` entry, its defaults filled in."""

    name: str
    runner: Literal["local", "netns", "ssh", "slurm", "vm"]
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

    @classmethod
    def of(cls, entry: Mapping[str, Any] | NodeEntry) -> NodeEntry:
        """The typed entry; a bad one is a ValueError of one line naming the key."""
        if isinstance(entry, NodeEntry):
            return entry
        try:
            return cls.model_validate(dict(entry))
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ValueError(f"node {entry.get('name')!r}: {where}: {first['msg']}") from None

    @property
    def reach(self) -> str | None:
        """How other nodes reach this one: its address, else its ssh host."""
        return self.address or self.host

    def as_config(self) -> dict[str, Any]:
        """The entry as the config holds it (lists, not tuples): for JSON."""
        return self.model_dump(mode="json")
