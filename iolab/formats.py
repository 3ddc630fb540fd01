"""Raw file formats shared by the code that writes them (iolab.experiments.echo,
iolab.experiments.mpi) and the readers that load them (iolab.readers, each room's tidy
step). Nothing here runs
anything, so analysis can depend on it without reaching the runners."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# echo-uring's report keys beyond every server's (echo-epoll and the Go
# servers have none), each an echo raw column of the same name; one that
# ends in HISTOGRAM_SUFFIX is a list of counts, written space-separated. A
# new counter is one line here (and its C code).
HISTOGRAM_SUFFIX = "_hist"
URING_COUNTERS = (
    # What the provided buffers did (buffers per receive, bundles,
    # incremental buffers).
    "recv_buffers",
    "recv_bufs_hist",
    "buf_more",
    "bufs_retired",
    "rearms",
    # Chunks per send (above 1 only with --gather-send).
    "send_buffers",
    "send_bufs_hist",
    # Connections whose NAPI id --napi read at close, and those with one.
    "napi_checked",
    "napi_conns",
    # Zero-copy sends (--send-zc): notifications, those whose usage report
    # says the kernel copied, sends from registered buffers.
    "zc_notifs",
    "zc_copied",
    "zc_fixed",
)


def uring_counter_text(report: Mapping[str, Any], name: str) -> Any:
    """A URING_COUNTERS value as the raw file holds it ("" where the server
    does not report it)."""
    value = report.get(name, [] if name.endswith(HISTOGRAM_SUFFIX) else "")
    return " ".join(str(n) for n in value) if name.endswith(HISTOGRAM_SUFFIX) else value


# echo: one row per cell of a sweep
CELL_COLUMNS = [
    "order",
    "server",
    "preset",
    "connections",
    "bytes",
    "status",
    "reason",
    "rps",
    "requests",
    "p50_us",
    "p99_us",
    "p999_us",
    "max_us",
    "client_cpu_ns",
    "server_cpu_ns",
    "server_requests",
    "server_bytes",
    "waits",
    "events",
    "io_uring_enter",
    "sqes",
    "cqes",
    "short_writes",
    "async_sqes",
    "nobufs",
    "iowq_workers",
    "server_cpu",
    "client_cpu",
    "port",
    "client",
    "layout",
    "pipeline",
    "server_resched_ipis",
    "helper_cpus",
    *URING_COUNTERS,
    "connections_answered",
]
# Files from before the client model and the layout were settings lack their
# columns: those cells ran the event-loop client, pinned where a server CPU
# is recorded (the loader derives layout from server_cpu).
CELL_OPTIONAL = {
    "client": "event-loop",
    "layout": "",
    # Requests in flight per connection: the sweep's one setting before it
    # was a setup's (the loader fills it from the run's settings).
    "pipeline": None,
    # Rescheduling IPIs on the server's CPUs: not counted before.
    "server_resched_ipis": None,
    # The CPUs a preset's {spare_cpu}/{spare_cpus} became: none before.
    "helper_cpus": "",
    # echo-uring's own counters: not counted before, nor by the other servers.
    **{name: "" if name.endswith(HISTOGRAM_SUFFIX) else None for name in URING_COUNTERS},
    # Connections the server echoed on within the cell (loadgen): not
    # counted before; below `connections` only where the thread-per-
    # connection client reported, without failing, some never answered.
    "connections_answered": None,
}

# Every raw file's header says its format and version (iolab.registry's
# raw_format), on a line of its own: "# iolab-raw: <format>".
RAW_FORMAT_PREFIX = "# iolab-raw: "


def raw_format_line(raw_format: str) -> str:
    """The header line that names a raw file's format."""
    return f"{RAW_FORMAT_PREFIX}{raw_format}\n"


def histograms_path(raw: Path) -> Path:
    """The latency buckets an echo or latency sweep writes beside ``rep<N>.csv``."""
    return raw.with_name(raw.stem + ".histograms.csv")


# latency: one row per cell of an open-loop sweep (iolab.experiments.latency); phase is
# "capacity" (closed loop, load 0), "open" (offered_rps = load x the preset's
# capacity) or "fixed" (load x the slowest preset's: one rate for all)
LATENCY_COLUMNS = [
    "order",
    "server",
    "preset",
    "phase",
    "load",
    "offered_rps",
    "connections",
    "bytes",
    "status",
    "reason",
    "rps",
    "requests",
    "p50_us",
    "p99_us",
    "p999_us",
    "max_us",
    "client_cpu_ns",
    "server_cpu_ns",
    "server_bytes",
    "server_cpu",
    "client_cpu",
]
# Files from before the fixed-rate phase lack the bytes the server echoed
# (its CPU per request needs them).
LATENCY_OPTIONAL: dict[str, object] = {"server_bytes": None}

# mpi: one row per timed iteration and rank, transport first
MPI_PROBE_COLUMNS = ["bench", "bytes", "ranks", "series", "iteration", "rank", "ns", "late", "window_ns"]
MPI_COLUMNS = ["transport", *MPI_PROBE_COLUMNS]
REFERENCE_BENCH = "reference_pingpong"
# The ib experiment's raw CSV (iolab.experiments.ib): one row per program, size and metric.
IB_COLUMNS = ["program", "bytes", "iterations", "metric", "value"]
OSU_PREFIX = "osu_"


def launch_rows(path: str | Path) -> tuple[list[dict[str, Any]], list[int]]:
    """The ``# launch:`` records of a raw MPI file and how many data rows
    follow each (the rows a CSV reader with comment="#" returns, in order).
    A row is its launch's by position: two launches of one transport, rank
    count and program (default and pinned algorithms) are told apart.
    Raises ValueError for data rows before the first record."""
    records: list[dict[str, Any]] = []
    counts: list[int] = []
    header_seen = False
    with open(path) as f:
        for line in f:
            if line.startswith("# launch:"):
                records.append(json.loads(line.split(":", 1)[1]))
                counts.append(0)
            elif line.startswith("#") or not line.strip():
                continue
            elif not header_seen:
                header_seen = True
            elif not records:
                raise ValueError("data rows before the first '# launch:' record")
            else:
                counts[-1] += 1
    return records, counts


def launch_selection(record: Mapping[str, Any]) -> str:
    """Which collective algorithms a launch ran: "pinned" or "default"
    (Open MPI's decision rules). Records from before selections existed
    say it through the probe's own reading of coll_tuned."""
    if "selection" in record:
        return str(record["selection"])
    algos = (record.get("probe_meta") or {}).get("algorithms", {})
    return "pinned" if any(a.get("pinned") for a in algos.values()) else "default"


def bench_method(bench: str) -> str:
    """How a raw MPI row was timed: mpi-probe --method osu names its rows
    after the OSU program (osu_bcast, ...)."""
    return "osu" if bench.startswith(OSU_PREFIX) else "probe"
