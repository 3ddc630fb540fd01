"""Raw file formats shared by the code that writes them (iolab.echo,
iolab.mpi) and the loaders that read them (iolab.tables). Nothing here runs
anything, so analysis can depend on it without reaching the runners."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# echo: one row per cell of a sweep
CELL_COLUMNS = [
    "order", "server", "preset", "connections", "bytes", "status", "reason",
    "rps", "requests", "p50_us", "p99_us", "p999_us", "max_us",
    "client_cpu_ns", "server_cpu_ns", "server_requests", "server_bytes",
    "waits", "events", "io_uring_enter", "sqes", "cqes", "short_writes", "async_sqes",
    "nobufs", "iowq_workers", "server_cpu", "client_cpu", "port",
]

# mpi: one row per timed iteration and rank, transport first
MPI_PROBE_COLUMNS = ["bench", "bytes", "ranks", "series", "iteration", "rank", "ns", "late", "window_ns"]
MPI_COLUMNS = ["transport", *MPI_PROBE_COLUMNS]
REFERENCE_BENCH = "reference_pingpong"
# The ib experiment's raw CSV (iolab.perftest): one row per program, size and metric.
IB_RAW_HEADER = "# iolab-raw: perftest v1"
IB_COLUMNS = ["program", "bytes", "iterations", "metric", "value"]
OSU_PREFIX = "osu_"


def read_launches(path: str | Path) -> list[dict[str, Any]]:
    """The ``# launch:`` records of a raw MPI file, in file order."""
    out = []
    with open(path) as f:
        for line in f:
            if line.startswith("# launch:"):
                out.append(json.loads(line.split(":", 1)[1]))
    return out


def launch_lookup(records: Sequence[Mapping[str, Any]]) -> dict[tuple[str, int, str, str], Mapping[str, Any]]:
    """(transport, ranks, program, method) -> launch record (records from
    before methods existed are the probe's own)."""
    return {(r["transport"], int(r["ranks"]), r["program"], r.get("method", "probe")): r for r in records}


def bench_method(bench: str) -> str:
    """How a raw MPI row was timed: mpi-probe --method osu names its rows
    after the OSU program (osu_bcast, ...)."""
    return "osu" if bench.startswith(OSU_PREFIX) else "probe"
