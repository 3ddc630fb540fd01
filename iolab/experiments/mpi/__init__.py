"""The MPI experiment: mpi-probe (and the OSU-style reference ping-pong) over
every transport and rank count, in a seeded random order.

Transports on one machine:
  shm        ranks on this host, Open MPI's shared-memory BTL (vader; sm in 5.x)
  tcp        ranks on this host, TCP BTL forced onto loopback
             (btl_tcp_if_include=lo: Open MPI excludes 127.0.0.0/8 by default)
  netns      one rank group per network namespace (iolab.experiments.mpi.netns),
             TCP over veth + bridge: separate TCP/IP stacks
  netns_tbf  as netns with tbf rate shaping on every host's egress: a known
             bandwidth, the ground truth for t_w (ping-pong only)

Across machines:
  nodes      ranks in blocks over the node and its inventory ``mpi.peers``,
             mpirun on the node launching the peers over ssh
             (iolab.experiments.mpi.group); TCP between nodes, shared memory
             within one

A node runs ``experiments.mpi.transports`` unless its ``mpi.transports``
says otherwise (``node_transports``).

One call measures one repetition and writes ``rep<N>.csv``: a ``transport``
column followed by mpi-probe's columns, one ``# launch: {json}`` line before
each launch's rows, and mpi-probe's own ``# meta:`` line. A launch's command
line and rows are made in ``launch.py``.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ... import live, privilege, readers
from ...formats import MPI_COLUMNS, raw_format_line
from ...hostfacts import HostFacts
from ...inventory import NodeEntry
from ...registry import REGISTRY
from ...runners import Capability, LocalRunner, RunError, Runner, capabilities_of, runner_for
from ...settings import MpiSettings
from .. import Measured, Repetition, settings_of
from .group import Member, MpiNodeGroup
from .launch import Launch, Settings, mpirun_path, mpirun_version, run_launch, shm_btl, usable_cpus
from .netns import NetnsCluster, require_root_and_iproute2

NETNS_TRANSPORTS = tuple(privilege.ROOT_TRANSPORTS)
BENCHMARKS = ("pingpong", "bcast", "allreduce", "alltoall", "barrier")


def selections(settings: Settings) -> list[str]:
    """The algorithm selections launches run: ``selections`` as configured,
    where "pinned" with nothing pinned is Open MPI's default selection."""
    pinned = bool(settings.pinned_algorithms())
    return list(dict.fromkeys(s if pinned else "default" for s in settings.selections))


def default_sizes(settings: MpiSettings) -> list[int]:
    if settings.sizes:
        return sorted(settings.sizes)
    lo, hi = settings.min_bytes, settings.max_bytes
    out, m = [], 1
    while m <= hi:
        if m >= lo:
            out.append(m)
        m *= 2
    return out


def node_transports(node: NodeEntry, settings: Settings) -> tuple[list[str], list[str]]:
    """(transports this node runs, configured ones it leaves out).

    A node's ``mpi.transports`` is taken as written (the config check
    refuses what the node cannot do). Otherwise the experiment's list: the
    netns transports need this machine's namespaces, so an ssh node leaves
    them out, and a node with ``mpi.peers`` adds ``nodes``."""
    if node.mpi.transports:
        return [str(t) for t in node.mpi.transports], []
    configured: list[str] = list(settings.transports)
    here = Capability.THIS_MACHINE in capabilities_of(node.runner)
    chosen = [t for t in configured if here or t not in NETNS_TRANSPORTS]
    left_out = [t for t in configured if t not in chosen]
    if node.mpi.peers and "nodes" not in chosen:
        chosen.append("nodes")
    return chosen, left_out


def plan(settings: Settings, seed: int) -> list[Launch]:
    """Every launch of one repetition, in a seeded random order.

    Ping-pong runs in the 2-rank launch only (with more ranks the others
    would just wait); the tbf-shaped cluster runs ping-pong at its own sizes.
    """
    benches: list[str] = [b for b in BENCHMARKS if b in settings.benchmarks]
    ranks = sorted(settings.ranks)
    sizes = default_sizes(settings)
    launches = []
    first, *others = selections(settings)
    for transport in settings.transports:
        if transport == "netns_tbf":
            launches.append(
                Launch(transport, 2, "mpi-probe", ["pingpong"], sorted(settings.netns.tbf_sizes), selection=first)
            )
            continue
        for p in ranks:
            chosen = [b for b in benches if b != "pingpong" or p == 2]
            # Algorithms choose nothing for ping-pong: it runs once, in the
            # first selection's launch.
            runs: list[tuple[str, list[str]]] = [
                (first, chosen),
                *((s, [b for b in chosen if b != "pingpong"]) for s in others),
            ]
            for selection, picked in runs:
                for method in settings.methods if picked else []:
                    launches.append(Launch(transport, p, "mpi-probe", picked, sizes, method, selection))
        if settings.reference.enabled and 2 in ranks:
            launches.append(
                Launch(
                    transport, 2, "mpi-pingpong-ref", ["pingpong"], sorted(settings.reference.sizes), selection=first
                )
            )
    random.Random(seed).shuffle(launches)
    return launches


def run_experiment(
    settings: Settings,
    seed: int,
    output: Path,
    progress: bool = True,
    runner: Runner | None = None,
    cpus: int | None = None,
    launcher: str = "mpirun",
    group: MpiNodeGroup | None = None,
    facts: HostFacts | None = None,
) -> dict[str, Any]:
    """Every launch of one repetition into ``output``; provenance extras back.
    ``runner``: the node mpirun runs on (default: here), ``cpus`` its CPUs,
    ``facts`` its host facts if already gathered (a remote node's mpirun
    version is read from them);
    ``launcher``: mpirun, or srun inside a SLURM job (shm and tcp transports);
    ``group``: the node and its peers, for the nodes transport (prepared)."""
    runner = runner or LocalRunner()
    remote = Capability.THIS_MACHINE not in runner.capabilities
    launches = plan(settings, seed)
    if any(lc.transport in NETNS_TRANSPORTS for lc in launches):
        if remote:
            raise RunError(
                f"node {getattr(runner, 'node', '?')}: the netns transports run on local "
                "nodes only; drop netns and netns_tbf from this node's mpi.transports"
            )
        require_root_and_iproute2()
    if any(lc.transport == "nodes" for lc in launches) and group is None:
        raise RunError("the nodes transport runs across a node and its mpi.peers; none are set")
    if remote:
        version = (facts or runner.facts()).get("mpirun") or "unknown"
    else:
        version = mpirun_version(settings.mpirun)
    btl_shm = shm_btl(version)
    records = []
    netns = settings.netns
    with live.tempdir("iolab-mpi-") as tmp, open(output, "w") as out:
        out.write(raw_format_line(REGISTRY["mpi"].raw_format) + ",".join(MPI_COLUMNS) + "\n")
        for i, launch in enumerate(launches, 1):
            if progress:
                print(f"iolab: mpi [{i}/{len(launches)}] {launch.label()}", flush=True)
            if launch.transport in ("netns", "netns_tbf"):
                rate = netns.tbf_rate_mbit if launch.transport == "netns_tbf" else None
                with NetnsCluster(
                    min(netns.hosts, launch.ranks),
                    subnet=netns.subnet,
                    rate_mbit=rate,
                    burst_bytes=netns.tbf_burst_bytes,
                ) as cluster:
                    records.append(run_launch(settings, launch, seed + i, btl_shm, Path(tmp), out, cluster))
            else:
                records.append(
                    run_launch(
                        settings,
                        launch,
                        seed + i,
                        btl_shm,
                        Path(tmp),
                        out,
                        runner=runner,
                        cpus=cpus,
                        launcher=launcher,
                        group=group,
                    )
                )
    return {
        "mpi": {
            "mpirun": mpirun_path(settings, remote),
            "mpirun_version": version,
            "mpicc": settings.mpicc,
            "shm_btl": btl_shm,
            "usable_cpus": cpus if cpus is not None else usable_cpus(),
            "launcher": launcher,
            "transports": list(settings.transports),
            **({"group": group.describe()} if group is not None else {}),
            "mca_environment": {k: v for k, v in os.environ.items() if k.startswith("OMPI_MCA_")},
            "launches": records,
        }
    }


def run_repetition(rep: Repetition) -> Measured:
    """Every launch of one repetition: the transports this node can run
    (mpirun here, or srun inside a SLURM job), with its peers for ``nodes``."""
    # srun only inside a job's allocation; mpirun otherwise (a SLURM node's
    # runner launches with srun, every other with mpirun).
    launcher = rep.runner.mpi_launcher if "SLURM_JOB_ID" in os.environ else "mpirun"
    interface = rep.entry.mpi.interface
    transports, left_out = node_transports(rep.entry, settings_of(rep, MpiSettings))
    why = dict.fromkeys(left_out, "it needs this machine's network namespaces; nodes[].mpi.transports chooses")
    if Capability.THIS_MACHINE in rep.runner.capabilities:
        # The rule the workflow planned by: without root, no namespaces.
        why |= privilege.transports_left_out(transports)
        transports = [t for t in transports if t not in why]
    for transport, reason in why.items():
        print(f"iolab: mpi on {rep.node.name}: leaving out {transport}: {reason}", file=sys.stderr)
    left_out = list(why)
    settings = settings_of(rep, MpiSettings).model_copy(
        update={"transports": tuple(transports), **({"tcp_interface": interface} if interface else {})}
    )
    with _node_group(rep, transports) as group:
        extra = run_experiment(
            settings,
            rep.seed,
            rep.raw,
            runner=rep.runner,
            cpus=rep.facts.cpu_count,
            launcher=launcher,
            group=group,
            facts=rep.facts,
        )
    extra["mpi"]["transports_left_out"] = left_out
    extra["mpi"]["transports_left_out_why"] = why
    frame = readers.read_mpi_csv(rep.raw)
    if frame.empty:
        raise RunError(f"mpi on {rep.node.name}: no samples were written")
    placement = {
        "launches": [
            {k: r[k] for k in ("transport", "ranks", "binding", "oversubscribed")} for r in extra["mpi"]["launches"]
        ]
    }
    return Measured(
        extra,
        ["mpirun ... mpi-probe", "(one launch per transport and rank count)"],
        f"{len(extra['mpi']['launches'])} launches, {len(frame)} samples",
        placement,
    )


@contextlib.contextmanager
def _node_group(rep: Repetition, transports: Sequence[str]) -> Iterator[MpiNodeGroup | None]:
    """The node and its MPI peers, each peer's sources built in its own ssh
    session, the launch files written on this node; None without ``nodes``."""
    if "nodes" not in transports:
        yield None
        return
    name = rep.entry.name
    if not rep.peer_entries:
        raise RunError(f"mpi on {name}: the nodes transport needs mpi.peers (pass them with --peer-nodes)")
    if Capability.DRIVES_PEERS not in rep.runner.capabilities:
        raise RunError(f"mpi on {name}: mpirun across nodes starts on a local or ssh node")
    programs = REGISTRY["mpi"].programs
    with contextlib.ExitStack() as stack:
        peers = []
        for entry in rep.peer_entries:
            runner = runner_for(entry)
            if Capability.PEER not in runner.capabilities:
                raise RunError(f"mpi on {name}: peer {entry.name} is not an ssh node")
            session = stack.enter_context(runner.session(programs))
            peers.append(Member(entry, session, session.facts()))
        group = MpiNodeGroup(Member(rep.entry, rep.runner, rep.facts), peers)
        group.prepare()
        yield group
