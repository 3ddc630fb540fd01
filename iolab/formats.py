"""Raw file formats shared by the code that writes them (iolab.experiments.echo,
iolab.experiments.mpi) and the readers that load them (iolab.readers, each room's tidy
step); an experiment's raw columns are declared in its manifest
(``raw_columns``). Nothing here runs anything, so analysis can depend on it
without reaching the runners."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .manifests import manifests

HISTOGRAM_SUFFIX = "_hist"


def raw_columns(experiment: str) -> list[str]:
    """Its raw file's columns, in the order they are written: its manifest's
    ``raw_columns`` (config/experiments/<name>.yaml)."""
    return [c if isinstance(c, str) else c["name"] for c in manifests()[experiment].get("raw_columns", ())]


def counters(experiment: str) -> tuple[str, ...]:
    """Its raw columns marked ``counter`` (echo-uring's own report keys)."""
    return tuple(
        c["name"] for c in manifests()[experiment].get("raw_columns", ()) if isinstance(c, dict) and c.get("counter")
    )


def optional_columns(experiment: str) -> dict[str, object]:
    """column -> the value its reader fills in where a file lacks it: those
    marked ``optional`` (that value), and the counters ("" for a histogram,
    else empty)."""
    out: dict[str, object] = {}
    for c in manifests()[experiment].get("raw_columns", ()):
        if isinstance(c, dict) and "optional" in c:
            out[c["name"]] = c["optional"]
        elif isinstance(c, dict) and c.get("counter"):
            out[c["name"]] = "" if c["name"].endswith(HISTOGRAM_SUFFIX) else None
    return out


# echo-uring's report keys beyond every server's, each an echo raw column of
# the same name (declared in the echo manifest's raw_columns).
URING_COUNTERS = counters("echo")


def uring_counter_text(report: Mapping[str, Any], name: str) -> Any:
    """A URING_COUNTERS value as the raw file holds it ("" where the server
    does not report it)."""
    value = report.get(name, [] if name.endswith(HISTOGRAM_SUFFIX) else "")
    return " ".join(str(n) for n in value) if name.endswith(HISTOGRAM_SUFFIX) else value


# echo: one row per cell of a sweep.
CELL_COLUMNS = raw_columns("echo")
CELL_OPTIONAL = optional_columns("echo")

# Every raw file's header says its format and version (iolab.registry's
# raw_format), on a line of its own: "# iolab-raw: <format>".
RAW_FORMAT_PREFIX = "# iolab-raw: "


def raw_format_line(raw_format: str) -> str:
    """The header line that names a raw file's format."""
    return f"{RAW_FORMAT_PREFIX}{raw_format}\n"


def histograms_path(raw: Path) -> Path:
    """The latency buckets an echo or latency sweep writes beside ``rep<N>.csv``."""
    return raw.with_name(raw.stem + ".histograms.csv")


# latency: one row per cell of an open-loop sweep (iolab.experiments.latency).
LATENCY_COLUMNS = raw_columns("latency")
LATENCY_OPTIONAL = optional_columns("latency")

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
