"""Tidy table of the MPI iterations."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...formats import OSU_PREFIX, REFERENCE_BENCH, bench_method, launch_rows, launch_selection
from ...readers import RawFormatError, read_mpi_csv
from ..context import context, network
from ..room import Room

# What each MPI launch decided and ran, as columns of its samples.
LAUNCH_COLUMNS = (
    "oversubscribed",
    "binding",
    "selection",
    "algorithm",
    "pinned",
    "sync",
    "hosts",
    "rate_mbit",
    "peers",
    "fabric",
    "timer_ns",
)


def launch_columns(rec: dict[str, Any], bench: str) -> dict[str, Any]:
    """The LAUNCH_COLUMNS of one benchmark's samples under launch record ``rec``."""
    meta = rec.get("probe_meta", {})
    algorithm = meta.get("algorithms", {}).get(bench.removeprefix(OSU_PREFIX), {})
    group = rec.get("group") or {}
    cluster = rec.get("cluster") or {}
    # Ranks of one benchmark on distinct processors; else the launch's spread.
    procs = meta.get("processors")
    spread = [k for k in group.get("ranks_per_node", []) if k]
    return {
        "oversubscribed": rec["oversubscribed"],
        "binding": rec["binding"],
        "selection": launch_selection(rec),
        "algorithm": algorithm.get("algorithm", ""),
        "pinned": bool(algorithm.get("pinned", False)),
        "sync": "self" if bench in ("pingpong", "osu_latency", REFERENCE_BENCH) else meta.get("sync", ""),
        "hosts": len(set(procs)) if procs else (len(cluster.get("hosts", [])) or len(spread) or 1),
        "rate_mbit": cluster.get("rate_mbit"),
        "peers": ",".join(group.get("nodes", [])[1:]),
        # What one clock reading costs, inside every timed iteration (0 where
        # the probe predates recording it).
        "timer_ns": float(meta.get("timer_overhead_ns", 0.0)),
        # The launch's fabric kind (launches recorded before it: "").
        "fabric": (rec.get("fabric") or {}).get("kind", ""),
    }


def _launch_of_each_row(raw: Path, frame: pd.DataFrame) -> tuple[list[dict[str, Any]], np.ndarray]:
    """The launch records of an MPI raw file and, per row, the index of the
    record it was measured under; rows that disagree with their record are
    a RawFormatError."""
    try:
        records, counts = launch_rows(raw)
    except ValueError as e:
        raise RawFormatError(f"{raw}: {e}") from e
    if sum(counts) != len(frame):
        raise RawFormatError(f"{raw}: {len(frame)} rows but {sum(counts)} under '# launch:' records")
    launch_index = np.repeat(np.arange(len(records)), counts)
    program = np.where(frame["bench"] == REFERENCE_BENCH, "mpi-pingpong-ref", "mpi-probe")
    method = frame["bench"].map(bench_method).to_numpy()
    seen = set(zip(launch_index.tolist(), frame["transport"], frame["ranks"].astype(int), program, method, strict=True))
    for i, *key in sorted(seen):
        rec = records[i]
        want = (rec["transport"], int(rec["ranks"]), rec["program"], rec.get("method", "probe"))
        if tuple(key) != want:
            raise RawFormatError(f"{raw}: rows {tuple(key)} under the launch record of {want}")
    return records, launch_index


def mpi_table(raw_files: Iterable[str | Path]) -> pd.DataFrame:
    """Tidy MPI samples: one row per node, repetition, launch, iteration and
    rank, with what each launch decided (oversubscription, binding) and what
    ran (collective algorithm selection and algorithm, synchronisation, tbf
    rate, and for the nodes transport the peers the ranks spanned besides
    ``node``)."""
    frames = []
    for raw in sorted(Path(p) for p in raw_files):
        frame = read_mpi_csv(raw)
        records, launch_index = _launch_of_each_row(raw, frame)
        per_launch: dict[tuple[int, str], dict[str, Any]] = {}
        cols: dict[str, list[Any]] = {c: [] for c in LAUNCH_COLUMNS}
        for index, bench in zip(launch_index.tolist(), frame["bench"], strict=True):
            if (index, bench) not in per_launch:
                per_launch[index, bench] = launch_columns(records[index], bench)
            for c in LAUNCH_COLUMNS:
                cols[c].append(per_launch[index, bench][c])
        frames.append(frame.assign(**cols, **context(raw), nic_kind=network(raw)["nic_kind"]))
    if not frames:
        raise RawFormatError("no raw files given")
    out = pd.concat(frames, ignore_index=True)
    out["late"] = out["late"].astype(bool)
    out["rate_mbit"] = pd.to_numeric(out["rate_mbit"], errors="coerce")
    return out


ROOM = Room(("mpi",), mpi_table)
