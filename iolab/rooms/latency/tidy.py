"""Tidy table of the open-loop latency cells."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from ...formats import histograms_path
from ...readers import RawFormatError, read_histograms_csv, read_latency_csv
from ..context import context
from ..room import Room


def latency_table(raw_files: Iterable[str | Path]) -> pd.DataFrame:
    """Tidy open-loop latency results: one row per node, repetition and
    cell, with the cell's raw latency buckets (``hist_low_ns``,
    ``hist_count``: lists) so that analysis can merge repetitions."""
    frames = []
    for raw in sorted(Path(p) for p in raw_files):
        frame = read_latency_csv(raw)
        buckets = read_histograms_csv(histograms_path(raw))
        frame = frame.assign(**context(raw))
        frame["hist_low_ns"] = [buckets.get(int(o), ([], []))[0] for o in frame["order"]]
        frame["hist_count"] = [buckets.get(int(o), ([], []))[1] for o in frame["order"]]
        frames.append(frame)
    if not frames:
        raise RawFormatError("no raw files given")
    out = pd.concat(frames, ignore_index=True)
    out["achieved_over_offered"] = (out["rps"] / out["offered_rps"]).where(out["phase"].isin(["open", "fixed"]))
    # Server CPU (its whole life: warm-up, measured seconds, drain) over the
    # requests it echoed in that time; NaN in files from before server_bytes.
    echoed = pd.to_numeric(out["server_bytes"], errors="coerce") / out["bytes"]
    out["server_ns_per_request"] = (out["server_cpu_ns"] / echoed).where(out["status"] == "ok")
    return out


ROOM = Room(("latency",), latency_table)
