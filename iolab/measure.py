"""Launch one measurement on one node and store its raw file with provenance.

Called by the measurement rules (rules/probes.smk), one repetition per call:

    python -m iolab.measure EXPERIMENT --node '{"name": "local", ...}' \
        --settings '{"batches": 300, ...}' --rep 1 --seed 42 \
        --output data/raw/local/syscall/rep1.csv

The raw file appears only once the probe finished and its output parsed;
the provenance sidecar is renamed into place just before it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from . import atomic, echo, latency, mpi, paths, perftest, provenance, tables, trace
from .experiments import REGISTRY
from .formats import histograms_path
from .nodes import resolve_node
from .probes import probe_argv
from .runners import Capability, RunError, Runner, runner_for
from .runners.mpigroup import Member, MpiNodeGroup

EXPERIMENTS = tuple(REGISTRY)


def programs(experiment: str) -> list[str]:
    """The native programs an experiment runs (built on the node for remote nodes)."""
    return list(REGISTRY[experiment].programs)


def _server_client_cpus(node: Any) -> dict[str, int | str | None]:
    """The node's CPU sets for an echo server and its load generator."""
    return {"server": node.cpus.get("server"), "client": node.cpus.get("client")}


def measure(experiment: str, node_entry: Mapping[str, Any], settings: Mapping[str, Any],
            rep: int, seed: int, output: Path, client_entry: Mapping[str, Any] | None = None,
            peer_entries: Sequence[Mapping[str, Any]] = ()) -> Path:
    started = provenance.utc_now()
    for stale in atomic.remove_stale_temporaries(output):
        print(f"iolab: removed {paths.relative(stale)}, left by an interrupted run", file=sys.stderr)
    runner = runner_for(node_entry)
    remote = Capability.THIS_MACHINE not in runner.capabilities
    with runner.session(programs(experiment)) as node_runner:
        facts = node_runner.facts() if remote else None
        node = resolve_node(node_entry, facts.kind() if facts else None)
        cpu = node.cpus.get("probe")
        print(f"iolab: measuring {experiment} on {node.name} ({node.kind}), rep {rep}", file=sys.stderr)
        with atomic.atomic_path(output) as tmp:
            start = time.monotonic()
            if experiment == "echo":
                extra, argv, summary, placement = _echo(node_entry, node, node_runner, client_entry,
                                                        settings, seed, tmp, output)
            elif experiment == "mpi":
                in_slurm_job = node_entry.get("runner") == "slurm" and "SLURM_JOB_ID" in os.environ
                interface = (node_entry.get("mpi") or {}).get("interface")
                transports, left_out = mpi.node_transports(node_entry, settings)
                if left_out:
                    print(f"iolab: mpi on {node.name}: leaving out {', '.join(left_out)} (they need "
                          "this machine's network namespaces; nodes[].mpi.transports chooses)",
                          file=sys.stderr)
                mpi_settings = {**settings, "transports": transports,
                                **({"tcp_interface": interface} if interface else {})}
                with _mpi_group(node_entry, node_runner, facts, peer_entries, transports) as group:
                    extra = mpi.run_experiment(mpi_settings, seed, tmp, runner=node_runner,
                                               cpus=facts.cpu_count if facts else None,
                                               launcher="srun" if in_slurm_job else "mpirun",
                                               group=group)
                extra["mpi"]["transports_left_out"] = left_out
                frame = tables.read_mpi_csv(tmp)
                if frame.empty:
                    raise RunError(f"mpi on {node.name}: no samples were written")
                argv = ["mpirun ... mpi-probe", "(one launch per transport and rank count)"]
                summary = f"{len(extra['mpi']['launches'])} launches, {len(frame)} samples"
                placement = {"launches": [{k: r[k] for k in ("transport", "ranks", "binding", "oversubscribed")}
                                          for r in extra["mpi"]["launches"]]}
            elif experiment == "latency":
                cpus = _server_client_cpus(node)
                with atomic.atomic_path(histograms_path(output)) as hist_tmp:
                    extra = latency.run(settings, cpus, seed, tmp, hist_tmp, runner=node_runner)
                frame = tables.read_latency_csv(tmp)
                argv = ["echo server + loadgen --rate", "(one run per cell)"]
                summary = f"{int((frame['status'] == 'ok').sum())} of {len(frame)} cells measured"
                placement = cpus
            elif experiment == "ib":
                extra, argv, summary, placement = _ib(node_entry, node.name, node_runner, peer_entries,
                                                      settings, tmp, output)
            elif experiment == "trace":
                if remote:
                    raise RunError(f"trace on {node.name}: bpftrace runs on local nodes only")
                try:
                    extra = trace.measure(settings, cpu, seed, tmp, _server_client_cpus(node))
                except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                    raise RunError(f"trace on {node.name}: {e}") from e
                frame = tables.read_trace_csv(tmp)
                argv = ["bpftrace", "-e", "<script in provenance>"]
                summary = "skipped: " + extra["trace"]["reason"] if frame.empty else f"{len(frame)} rows"
                placement = {"probe_cpu": cpu}
            else:
                argv = probe_argv(experiment, settings, seed, cpu, node_runner.exe("cost-probe"))
                node_runner.run(argv, tmp)
                # Parse before accepting: a truncated or malformed file is not a result.
                frame = tables.read_raw_csv(tmp)
                if frame.empty:
                    raise RunError(f"{experiment} on {node.name}: the probe wrote no samples")
                extra = {"unavailable": tables.read_unavailable(tmp)}
                summary = f"{len(frame)} batches"
                placement = {"probe_cpu": cpu, "observed_cpus": sorted(set(frame["cpu"].tolist()))}
            seconds = time.monotonic() - start
            side = provenance.capture(
                node, experiment, {**settings, "rep": rep, "seed": seed}, command=argv,
                placement=placement, started=started, facts=facts,
                extra={"run_seconds": round(seconds, 3), "runner": node_entry.get("runner", "local"),
                       "slurm_job_id": os.environ.get("SLURM_JOB_ID"), "accel": None,
                       **node_runner.provenance(), **extra},
            )
            atomic.write_json(provenance.sidecar_for(output), side)
    print(f"iolab: wrote {paths.relative(output)} ({summary}, {seconds:.1f} s)", file=sys.stderr)
    return output


def _echo(node_entry: Mapping[str, Any], node: Any, server_runner: Runner,
          client_entry: Mapping[str, Any] | None, settings: Mapping[str, Any], seed: int,
          tmp: Path, output: Path) -> tuple[dict[str, Any], list[str], str, dict[str, Any]]:
    """The echo sweep with the server on this node and the load generator
    here too, or on ``client_entry``'s node (then the server listens on all
    addresses and the client connects to this node's ``address``)."""
    cpus = _server_client_cpus(node)
    if client_entry is None or client_entry["name"] == node_entry["name"]:
        client_cm: Any = contextlib.nullcontext(server_runner)
        bind = address = "127.0.0.1"
    else:
        client_cm = runner_for(client_entry).session(programs("echo"))
        bind = "0.0.0.0"
        address = node_entry.get("address") or node_entry.get("host") or "127.0.0.1"
        cpus["client"] = (client_entry.get("cpus") or {}).get("client")
    with client_cm as client_runner, atomic.atomic_path(histograms_path(output)) as hist_tmp:
        extra = echo.run_sweep(settings, cpus, seed, tmp, hist_tmp, server_runner=server_runner,
                               client_runner=client_runner, bind=bind, address=address)
    extra["echo"]["client_node"] = client_entry["name"] if client_entry else node_entry["name"]
    frame = tables.read_echo_csv(tmp)
    ok = int((frame["status"] == "ok").sum())
    return (extra, ["echo-epoll/echo-uring + loadgen", "(one run per cell)"],
            f"{ok} of {len(frame)} cells measured", cpus)


def _ib(node_entry: Mapping[str, Any], node: str, node_runner: Runner,
        peer_entries: Sequence[Mapping[str, Any]], settings: Mapping[str, Any], tmp: Path,
        output: Path) -> tuple[dict[str, Any], list[str], str, dict[str, Any]]:
    """perftest with the client on this node and the server on its ib.peer."""
    if len(peer_entries) != 1:
        raise RunError(f"ib on {node}: the server end runs on the node's ib.peer (pass it with --peer-nodes)")
    peer = peer_entries[0]
    address = peer.get("address") or peer.get("host")
    with runner_for(peer).session(()) as peer_runner, \
            atomic.atomic_path(output.with_name(output.stem + ".perftest.txt")) as transcript:
        extra = perftest.run_experiment(settings, node, node_runner, peer["name"], peer_runner, str(address),
                                        tmp, transcript)
    frame = tables.read_ib_csv(tmp)
    summary = (f"skipped: {extra['ib']['reason']}" if not extra["ib"]["available"]
               else f"{frame['bytes'].nunique()} sizes, {len(frame)} values")
    return extra, ["ib_send_lat/ib_send_bw -a", f"(server on {peer['name']})"], summary, {"peer": peer["name"]}


@contextlib.contextmanager
def _mpi_group(node_entry: Mapping[str, Any], node_runner: Runner, facts: Any,
               peer_entries: Sequence[Mapping[str, Any]],
               transports: Sequence[str]) -> Iterator[MpiNodeGroup | None]:
    """The node and its MPI peers, each peer's sources built in its own ssh
    session, the launch files written on this node; None without ``nodes``."""
    if "nodes" not in transports:
        yield None
        return
    if not peer_entries:
        raise RunError(f"mpi on {node_entry['name']}: the nodes transport needs mpi.peers "
                       "(pass them with --peer-nodes)")
    if Capability.MPI_ACROSS_PEERS not in node_runner.capabilities:
        raise RunError(f"mpi on {node_entry['name']}: mpirun across nodes starts on a local or ssh node")
    with contextlib.ExitStack() as stack:
        peers = []
        for entry in peer_entries:
            runner = runner_for(entry)
            if Capability.MPI_PEER not in runner.capabilities:
                raise RunError(f"mpi on {node_entry['name']}: peer {entry['name']} is not an ssh node")
            session = stack.enter_context(runner.session(programs("mpi")))
            peers.append(Member(entry, session, session.facts()))
        first = Member(node_entry, node_runner, facts if facts is not None else node_runner.facts())
        group = MpiNodeGroup(first, peers)
        group.prepare()
        yield group


def _terminate(signum: int, _frame: Any) -> NoReturn:
    # Turn SIGTERM (snakemake cancelling a job) into a normal unwind, so the
    # temporary file is removed and nothing half-written is left behind.
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m iolab.measure", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("experiment", choices=EXPERIMENTS)
    ap.add_argument("--node", required=True, help="the config's node entry, as JSON")
    ap.add_argument("--settings", required=True, help="the experiment's config section, as JSON")
    ap.add_argument("--rep", type=int, required=True, help="repetition number (1-based)")
    ap.add_argument("--seed", type=int, required=True, help="seed for the randomised run order")
    ap.add_argument("--output", type=Path, required=True, help="raw file to write")
    ap.add_argument("--client-node", help="echo: the node entry the load generator runs on, as JSON")
    ap.add_argument("--peer-nodes", help="mpi: the node entries of this node's mpi.peers; ib: its ib.peer "
                                         "(a JSON list)")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        measure(args.experiment, json.loads(args.node), json.loads(args.settings),
                args.rep, args.seed, args.output,
                json.loads(args.client_node) if args.client_node else None,
                json.loads(args.peer_nodes) if args.peer_nodes else ())
    except (RunError, ValueError) as e:
        print(f"iolab: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
