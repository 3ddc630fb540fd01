"""Tidy table of the cost probes' timed batches, for every cost-probe mode
without a room of its own."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from ...readers import RawFormatError, read_metadata, read_raw_csv
from ...registry import REGISTRY, room_of
from ..context import context
from ..room import Room


def probe_table(raw_files: Iterable[str | Path]) -> pd.DataFrame:
    """Tidy cost-probe samples: one row per timed batch, warm-up flagged.

    ``ns_per_call`` subtracts the probe's measured timer-pair cost from the
    batch time before dividing by the system calls in it; ``ns_per_sqe``
    divides that by the SQEs per call (io_uring modes, n > 0).
    """
    frames = []
    for raw in sorted(Path(p) for p in raw_files):
        frame = read_raw_csv(raw)
        timer = float(read_metadata(raw).get("timer_overhead_ns", 0.0))
        per_call = (frame["ns"] - timer) / frame["calls"]
        frame = frame.assign(
            **context(raw),
            timer_overhead_ns=timer,
            ns_per_call=per_call,
            ns_per_sqe=per_call / frame["n"].where(frame["n"] > 0),
        )
        frames.append(frame)
    if not frames:
        raise RawFormatError("no raw files given")
    out = pd.concat(frames, ignore_index=True)
    out["warmup"] = out["warmup"].astype(bool)
    return out


# Every cost-probe mode without a room of its own (iolab.registry.room_of),
# so a new mode needs no line here.
ROOM = Room(tuple(name for name in REGISTRY if room_of(name) == "cost_probes"), probe_table)
