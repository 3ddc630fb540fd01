"""Readers of the raw files, one per format: the code that measures (to
check what it wrote) and the tidy tables (iolab.tables) both read raw files
through these, so the run side never imports the read side. Each raises
RawFormatError, one line naming the file, on a file of the wrong shape or
of a format it does not read (the header's "# iolab-raw:" line against
iolab.registry's raw_format; files written before that line existed have
none, and are read by their columns)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path

import pandas as pd

from .formats import (
    CELL_COLUMNS,
    CELL_OPTIONAL,
    IB_COLUMNS,
    LATENCY_COLUMNS,
    LATENCY_OPTIONAL,
    MPI_COLUMNS,
    RAW_FORMAT_PREFIX,
)
from .registry import REGISTRY

# cost-probe raw format v2: every mode writes these columns.
PROBE_COLUMNS = [
    "mode",
    "variant",
    "transport",
    "pattern",
    "ack",
    "bytes",
    "n",
    "connections",
    "seq",
    "batch",
    "warmup",
    "calls",
    "ns",
    "cpu",
    "emptied",
    "not_inline",
]
TRACE_COLUMNS = ["workload", "map", "count", "avg_ns", "total_ns"]
_META = re.compile(r"^#\s*([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_UNAVAILABLE = re.compile(r"^#\s*unavailable:\s*preset=(\S+)\s+reason=(.*)$")


class RawFormatError(ValueError):
    """A raw file does not have the expected shape."""


def _header(path: str | Path) -> Iterator[str]:
    """The ``#`` lines a raw file starts with, stripped."""
    with open(path) as f:
        for line in f:
            if not line.startswith("#"):
                return
            yield line.strip()


def read_metadata(path: str | Path) -> dict[str, str]:
    """The ``# key=value`` lines of a raw file's header."""
    return {m.group(1): m.group(2) for line in _header(path) if (m := _META.match(line))}


def read_unavailable(path: str | Path) -> list[dict[str, str]]:
    """Ring presets the probe reported as unavailable or not applicable."""
    return [{"preset": m.group(1), "reason": m.group(2)} for line in _header(path) if (m := _UNAVAILABLE.match(line))]


def formats_of(*experiments: str) -> frozenset[str]:
    """The raw formats of ``experiments`` (iolab.registry)."""
    return frozenset(REGISTRY[e].raw_format for e in experiments)


def raw_format(path: str | Path) -> str:
    """The format a raw file's header names ("" for a file without the line)."""
    prefix = RAW_FORMAT_PREFIX.strip()
    return next((line[len(prefix) :].strip() for line in _header(path) if line.startswith(prefix)), "")


def _read_csv(
    path: str | Path,
    columns: list[str],
    complete: list[str],
    formats: Collection[str],
    optional: Mapping[str, object] | None = None,
) -> pd.DataFrame:
    """A raw CSV of one of ``formats`` with every one of ``columns``, those
    in ``complete`` set in every row. A column of ``optional`` (name ->
    default), which files from before it lack, is filled with its default."""
    optional = optional or {}
    try:
        found = raw_format(path)
    except (OSError, UnicodeDecodeError) as e:
        raise RawFormatError(f"{path}: cannot be read ({e})") from e
    if found and found not in formats:
        raise RawFormatError(
            f"{path}: its format is {found!r}, which this iolab does not read (it reads "
            f"{', '.join(sorted(formats))}); read it with the iolab commit its sidecar records"
        )
    try:
        frame = pd.read_csv(path, comment="#")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise RawFormatError(f"{path}: not a valid raw CSV ({e})") from e
    missing = [c for c in columns if c not in frame.columns and c not in optional]
    if missing:
        raise RawFormatError(f"{path}: missing columns {missing}")
    gaps = frame[complete].isna()
    if gaps.any().any():
        row = int(gaps.any(axis=1).to_numpy().argmax())
        empty = ", ".join(c for c in complete if gaps[c].iloc[row])
        with open(path, "rb") as f:
            f.seek(max(Path(path).stat().st_size - 1, 0))
            cut = f.read(1) != b"\n"
        why = (
            "the file ends inside it (truncated?)" if cut and row == len(frame) - 1 else "an empty or non-numeric value"
        )
        raise RawFormatError(f"{path}: data row {row + 1} has no {empty}: {why}")
    for column, default in optional.items():
        if column not in frame:
            frame[column] = default
    return frame


def read_echo_csv(path: str | Path) -> pd.DataFrame:
    """An echo sweep's raw CSV (one row per cell)."""
    frame = _read_csv(
        path, CELL_COLUMNS, ["order", "connections", "bytes", "status"], formats_of("echo"), CELL_OPTIONAL
    )
    # CPU sets as taskset wrote them ("0", "0-3"), not as floats.
    for column in ("server_cpu", "client_cpu"):
        frame[column] = frame[column].map(
            lambda v: None if pd.isna(v) else str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)
        )
    # Receives (sends) by buffers taken (carried), as "n1 n2 n3-4 ...": ""
    # where not counted.
    for column in ("recv_bufs_hist", "send_bufs_hist"):
        frame[column] = frame[column].map(lambda v: "" if pd.isna(v) else str(v))
    # The CPUs a preset's placeholders became ("2", "2-3"), "" where none.
    frame["helper_cpus"] = frame["helper_cpus"].map(
        lambda v: "" if pd.isna(v) else str(int(v)) if isinstance(v, float) else str(v)
    )
    if (frame["layout"] == "").any():
        frame["layout"] = frame["layout"].where(
            frame["layout"] != "", frame["server_cpu"].notna().map({True: "pinned", False: "shared"})
        )
    return frame


def read_latency_csv(path: str | Path) -> pd.DataFrame:
    """An open-loop latency sweep's raw CSV (one row per cell)."""
    frame = _read_csv(
        path, LATENCY_COLUMNS, ["order", "phase", "load", "status"], formats_of("latency"), LATENCY_OPTIONAL
    )
    frame["reason"] = frame["reason"].astype(object).where(frame["reason"].notna(), "")
    return frame


def read_histograms_csv(path: str | Path) -> dict[int, tuple[list[int], list[int]]]:
    """A sweep's ``rep<N>.histograms.csv``: cell order -> (bucket lower
    bounds in ns, counts), as the load generator wrote them."""
    try:
        frame = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, FileNotFoundError) as e:
        raise RawFormatError(f"{path}: not a valid histogram file ({e})") from e
    if list(frame.columns) != ["order", "low_ns", "high_ns", "count"] or frame.isna().any().any():
        raise RawFormatError(f"{path}: not a histogram file (columns order,low_ns,high_ns,count, all set)")
    return {
        int(order): (g["low_ns"].astype(int).tolist(), g["count"].astype(int).tolist())
        for order, g in frame.groupby("order", sort=True)
    }


def read_raw_csv(path: str | Path) -> pd.DataFrame:
    """A cost-probe raw CSV as a frame; raises RawFormatError if malformed."""
    probes = [name for name, e in REGISTRY.items() if e.probe_mode]
    return _read_csv(path, PROBE_COLUMNS, ["seq", "calls", "ns", "not_inline"], formats_of(*probes))


def read_ib_csv(path: str | Path) -> pd.DataFrame:
    """A perftest raw CSV (possibly empty, when no RDMA device was found)."""
    return _read_csv(path, IB_COLUMNS, IB_COLUMNS, formats_of("ib"))


def read_trace_csv(path: str | Path) -> pd.DataFrame:
    """A bpftrace raw CSV (possibly empty, when tracing was skipped)."""
    return _read_csv(path, TRACE_COLUMNS, ["count", "avg_ns"], formats_of("trace"))


def sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_mpi_csv(path: str | Path) -> pd.DataFrame:
    """An MPI repetition's raw CSV: one row per timed iteration and rank."""
    return _read_csv(path, MPI_COLUMNS, MPI_COLUMNS, formats_of("mpi"))
