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
import errno
import json
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from . import atomic, integrity, live, paths, provenance
from .experiments import Repetition, run_repetition
from .hostfacts import HostFacts
from .inventory import NodeEntry
from .nodes import resolve_node
from .registry import REGISTRY, extra_output_paths
from .runners import Capability, RunError, runner_for
from .schema import schema_problem

EXPERIMENTS = tuple(REGISTRY)


def measure(
    experiment: str,
    node_entry: Mapping[str, Any],
    settings: Mapping[str, Any],
    rep: int,
    seed: int,
    output: Path,
    client_entry: Mapping[str, Any] | None = None,
    peer_entries: Sequence[Mapping[str, Any]] = (),
    round_: int = 0,
    run_seed: int | None = None,
) -> Path:
    """One repetition of ``experiment`` on the node into ``output``, with its
    provenance sidecar; the experiment's module (iolab/experiments/) runs it."""
    if output.exists() and provenance.sidecar_for(output).exists():
        # Measured already (its key says with these settings and this code):
        # kept as it is. Snakemake asks again when only the text of a
        # rule's parameters or code changed; a raw file is never deleted.
        print(
            f"iolab: {paths.relative(output)} is measured already; kept as it is (to measure it again, "
            "move it and its sidecar away first)",
            file=sys.stderr,
        )
        return output
    busy = live.beside(paths.REPO)
    if busy:
        raise RunError(busy)
    started = provenance.utc_now()
    entry = NodeEntry.of(node_entry)
    typed = REGISTRY[experiment].settings.of(settings)
    client = NodeEntry.of(client_entry) if client_entry is not None else None
    peers = [NodeEntry.of(p) for p in peer_entries]
    for stale in atomic.remove_stale_temporaries(output):
        print(f"iolab: removed {paths.relative(stale)}, left by an interrupted run", file=sys.stderr)
    gone, kept = live.remove_stale_tempdirs()
    for stale in gone:
        print(f"iolab: removed {stale}, left by a process that no longer runs", file=sys.stderr)
    for line in kept:
        print(f"iolab: {line}", file=sys.stderr)
    runner = runner_for(entry)
    remote = Capability.THIS_MACHINE not in runner.capabilities
    # Every program the measurement starts here (mpirun and its daemons,
    # PMIx, bpftrace, ...) keeps its temporary files in this run's own
    # directory, never under a name another user could make first.
    with live.private_tmp(), runner.session(REGISTRY[experiment].programs) as node_runner:
        facts = node_runner.facts()
        node = resolve_node(entry, facts.kind(), facts)
        print(f"iolab: measuring {experiment} on {node.name} ({node.kind}), rep {rep}", file=sys.stderr)
        with atomic.atomic_path(output) as tmp:
            start = time.monotonic()
            measured = run_repetition(
                Repetition(experiment, node, node_runner, typed, seed, tmp, output, client, peers, rep, run_seed)
            )
            seconds = time.monotonic() - start
            # Read again, for what the hypervisor stole during the measurement.
            try:
                after: HostFacts | None = node_runner.facts()
            except RuntimeError:
                after = None
            # The raw file's fingerprint (and its companions', already in
            # place), taken before either file is renamed into place.
            files = {output.name: tmp, **{p.name: p for p in extra_output_paths(experiment, output)}}
            side = provenance.capture(
                node,
                experiment,
                {**settings, "rep": rep, "seed": seed, "run_seed": run_seed, "round": round_},
                command=measured.command,
                placement=dict(measured.placement),
                started=started,
                facts=facts,
                facts_after=after,
                built_here=not remote,
                extra={
                    "run_seconds": round(seconds, 3),
                    "runner": entry.runner,
                    "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
                    "accel": None,
                    **node_runner.provenance(),
                    **measured.extra,
                    integrity.KEY: integrity.fingerprints(files),
                },
            )
            atomic.write_json(provenance.sidecar_for(output), side)
    print(f"iolab: wrote {paths.relative(output)} ({measured.summary}, {seconds:.1f} s)", file=sys.stderr)
    return output


def check_ranges(experiment: str, settings: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> None:
    """The schema's ranges, patterns and list lengths, which the typed models
    do not repeat, for what came on the command line: a section written by
    hand has not been through Snakemake's validation. ValueError, one line."""
    model = REGISTRY[experiment].settings
    section = {k: v for k, v in settings.items() if k not in model.WORKFLOW_KEYS}
    problem = schema_problem(section, "experiments", experiment)
    if problem:
        raise ValueError(f"{model.where(section)}: {problem}")
    for node in nodes:
        problem = schema_problem(node, "nodes", "[]")
        if problem:
            raise ValueError(f"{NodeEntry.where(node)}: {problem}")


def _terminate(signum: int, _frame: Any) -> NoReturn:
    # Turn SIGTERM (snakemake cancelling a job) and SIGINT (Ctrl-C) into a
    # normal unwind, so the temporary file is removed and nothing
    # half-written is left behind; one line in the job's log, no traceback.
    # A second signal (Ctrl-C reaches the job, then Snakemake cancels it)
    # must not interrupt that unwind: it once landed in logging's exit hook
    # and printed a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print(f"iolab: stopped by {signal.Signals(signum).name}; nothing partial was kept", file=sys.stderr)
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m iolab.measure", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("experiment", choices=EXPERIMENTS)
    ap.add_argument("--node", required=True, help="the config's node entry, as JSON")
    ap.add_argument("--settings", required=True, help="the experiment's config section, as JSON")
    ap.add_argument("--rep", type=int, required=True, help="repetition number (1-based)")
    ap.add_argument("--seed", type=int, required=True, help="seed for this repetition's randomised order")
    ap.add_argument(
        "--run-seed",
        type=int,
        help="seed every repetition of the run shares (echo: each setup's preset order, reversed in ABBA "
        "over repetitions; default: --seed)",
    )
    ap.add_argument(
        "--round",
        type=int,
        default=0,
        help="adaptive precision's round that added this repetition (0: planned in advance)",
    )
    ap.add_argument("--output", type=Path, required=True, help="raw file to write")
    ap.add_argument("--client-node", help="echo: the node entry the load generator runs on, as JSON")
    ap.add_argument(
        "--peer-nodes", help="mpi: the node entries of this node's mpi.peers; ib: its ib.peer (a JSON list)"
    )
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _terminate)
    try:
        node, settings = json.loads(args.node), json.loads(args.settings)
        client = json.loads(args.client_node) if args.client_node else None
        peers = json.loads(args.peer_nodes) if args.peer_nodes else []
        check_ranges(args.experiment, settings, [node, *([client] if client else []), *peers])
        measure(
            args.experiment, node, settings, args.rep, args.seed, args.output, client, peers, args.round, args.run_seed
        )
    except (RunError, ValueError) as e:
        if os.strerror(errno.ENOSPC) in str(e):
            # A probe that could not write its standard output wrote into the
            # raw file's temporary: name the file the user knows.
            print(
                f"iolab: could not write {paths.relative(args.output)}: {os.strerror(errno.ENOSPC)} "
                f"({e}); nothing partial was kept",
                file=sys.stderr,
            )
        else:
            print(f"iolab: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        # A full disk, a read-only directory: one line naming the file; the
        # temporaries are gone, nothing partial is kept.
        where = paths.relative(Path(e.filename)) if e.filename else paths.relative(args.output)
        print(f"iolab: could not write {where}: {e.strerror or e}; nothing partial was kept", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
