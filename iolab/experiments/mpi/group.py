"""MPI across nodes: a node and its ``mpi.peers`` from the inventory.

mpirun runs on the first node (the node whose MPI experiment it is, local or
ssh) and starts its daemons on the peers over ssh. Everything it needs comes
from the inventory and is written into the first node's scratch directory:

  hostfile    every node's ``address`` with ``slots=`` its ``mpi.ranks_per_node``
              (default: the CPUs the node reports)
  ssh_config  one Host block per peer address: user, port, identity file,
              known_hosts and host-key policy of that peer's entry; host keys
              are checked as the ssh runner checks them
  agent       Open MPI's ``plm_rsh_agent``: ``AGENT HOST CMD...`` runs CMD on
              the peer through ``ssh -F ssh_config``, after the peer's
              ``setup`` commands (a module load reaches Open MPI's daemon too)

The peers' ssh settings are used from the first node, so the identity and
known_hosts files they name must exist there (a shared home, as on most
clusters; for a local first node they are this machine's files).

Binaries are built on every node (each in its own session directory), so a
launch is MPMD: each node's ranks run that node's own build, placed in
blocks (ranks 0..k-1 on the first node, the next on the first peer, ...),
and a 2-rank launch puts one rank on each of two nodes.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ... import hostfacts
from ...inventory import NodeEntry
from ...runners import RunError, Runner, ssh_failure, ssh_options

AGENT = """#!/bin/sh
# plm_rsh_agent of iolab's MPI node group {group}: "AGENT HOST COMMAND..."
# runs COMMAND on peer HOST with that peer's inventory settings.
host="$1"; shift
case "$host" in
{cases}
  *) echo "iolab-mpi-agent: $host is not a peer of node {group}" >&2; exit 255 ;;
esac
exec ssh -F {config} -- "$host" "$setup$*"
"""


@dataclass
class Member:
    """One node of the group, with its own runner (its build) and facts."""

    entry: NodeEntry
    runner: Runner
    facts: hostfacts.HostFacts | None

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def address(self) -> str:
        return str(self.entry.reach)

    @property
    def slots(self) -> int:
        if self.entry.mpi.ranks_per_node:
            return self.entry.mpi.ranks_per_node
        count = self.facts.cpu_count if self.facts is not None else None
        return int(count or 1)

    def exe(self, program: str) -> str:
        return self.runner.exe(program)


def one_line(value: str, what: str) -> str:
    """``value``, which goes into a generated file's line; a line break in it
    would start a line of its own (the schema's patterns refuse them first,
    this holds for an entry that did not come through the schema)."""
    if any(c in value for c in "\r\n\0"):
        raise RunError(f"{what} {value!r} contains a line break; it would add a line to a generated file")
    return value


def ssh_config_block(node: NodeEntry) -> str:
    """The ssh_config lines that reach ``node`` by its address from another
    node: the options the ssh runner uses, paths left for that node's ssh."""
    lines = [f"Host {one_line(str(node.reach), f'node {node.name}: address')}\n"]
    lines += [
        f"  {keyword} {one_line(value, f'node {node.name}: ssh {keyword}')}\n" for keyword, value in ssh_options(node)
    ]
    return "".join(lines)


class MpiNodeGroup:
    """The first node and its peers; ``prepare`` writes the launch files on
    the first node and checks that it reaches every peer."""

    def __init__(self, first: Member, peers: Sequence[Member]) -> None:
        if not peers:
            raise RunError(f"node {first.name}: the nodes transport needs mpi.peers")
        self.first = first
        self.peers = list(peers)
        self.members = [first, *self.peers]
        self.interface: str | None = first.entry.mpi.interface
        self.bind_to: str = first.entry.mpi.bind_to
        self._dir: str | None = None

    # -- files on the first node ---------------------------------------------
    def prepare(self) -> None:
        self._check_versions()
        runner = self.first.runner
        self._dir = runner.scratch("mpi-nodes")
        res = runner.shell(f"mkdir -p {shlex.quote(self._dir)}", timeout=120)
        if res.returncode != 0:
            raise RunError(
                f"node {self.first.name}: cannot create {self._dir}: {ssh_failure(res.stderr, res.returncode)}"
            )
        runner.write_file(self.hostfile, self.hostfile_text())
        runner.write_file(self.ssh_config, "".join(ssh_config_block(p.entry) for p in self.peers), 0o600)
        runner.write_file(self.agent, self.agent_text(), 0o700)
        for peer in self.peers:
            self._check_peer(peer)

    def _path(self, name: str) -> str:
        if self._dir is None:
            raise RunError(f"node {self.first.name}: the MPI node group is not prepared")
        return f"{self._dir}/{name}"

    @property
    def hostfile(self) -> str:
        return self._path("hostfile")

    @property
    def ssh_config(self) -> str:
        return self._path("ssh_config")

    @property
    def agent(self) -> str:
        return self._path("agent")

    def hostfile_text(self) -> str:
        head = f"# Open MPI hostfile of node {self.first.name}'s MPI group, from the iolab inventory\n"
        return head + "".join(
            f"{one_line(m.address, f'node {m.name}: address')} slots={m.slots}  # {m.name}\n" for m in self.members
        )

    def agent_text(self) -> str:
        cases = []
        for peer in self.peers:
            setup = "".join(f"{cmd} && " for cmd in peer.entry.setup)
            cases.append(f"  {shlex.quote(peer.address)}) setup={shlex.quote(setup)} ;;")
        return AGENT.format(group=self.first.name, cases="\n".join(cases), config=shlex.quote(self.ssh_config))

    def _check_versions(self) -> None:
        versions = {m.name: (m.facts.get("mpirun") if m.facts is not None else None) for m in self.members}
        mine = versions[self.first.name]
        for name, version in versions.items():
            if mine and version and version != mine:
                raise RunError(
                    f"node {name} has {version} but node {self.first.name} has {mine}: "
                    "mpirun across nodes needs the same Open MPI on every node"
                )

    def _check_peer(self, peer: Member) -> None:
        """The first node reaches the peer through the agent, as mpirun will."""
        res = self.first.runner.shell(
            shlex.join([self.agent, peer.address, "true"]), timeout=peer.entry.connect_timeout + 60
        )
        if res.returncode != 0:
            raise RunError(
                f"node {self.first.name} cannot reach its MPI peer {peer.name} "
                f"({peer.address}) over ssh: {ssh_failure(res.stderr, res.returncode)}"
            )

    # -- launches -------------------------------------------------------------
    def distribution(self, ranks: int) -> list[int]:
        """Ranks per member, in blocks: as even as the count allows, the
        first members taking the remainder (p below the member count uses
        the first p nodes)."""
        n = len(self.members)
        return [ranks // n + (1 if i < ranks % n else 0) for i in range(n)]

    def oversubscribed(self, ranks: int) -> bool:
        return any(k > m.slots for k, m in zip(self.distribution(ranks), self.members, strict=True))

    def contexts(self, ranks: int, program: str, args: Sequence[str]) -> list[str]:
        """The MPMD part of mpirun's command line: each node's ranks, its build."""
        out: list[str] = []
        for k, member in zip(self.distribution(ranks), self.members, strict=True):
            if k == 0:
                continue
            if out:
                out.append(":")
            out += ["-np", str(k), "--host", f"{member.address}:{k}", member.exe(program), *args]
        return out

    def infiniband_seen(self) -> dict[str, bool]:
        """Per node: whether its host facts showed an active InfiniBand port
        (False where the facts are missing: not seen is not assumed)."""
        return {m.name: bool(m.facts is not None and m.facts.infiniband_active) for m in self.members}

    def describe(self, ranks: int | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "nodes": [m.name for m in self.members],
            "addresses": [m.address for m in self.members],
            "slots": [m.slots for m in self.members],
            "interface": self.interface,
            "bind_to": self.bind_to,
            "kinds": [m.facts.kind().kind if m.facts is not None else None for m in self.members],
            "mpirun_versions": [m.facts.get("mpirun") if m.facts is not None else None for m in self.members],
            "hostfile": self.hostfile_text(),
        }
        if ranks is not None:
            out["ranks_per_node"] = self.distribution(ranks)
        return out
