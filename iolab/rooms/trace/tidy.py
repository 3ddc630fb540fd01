"""Tidy table of the bpftrace syscall durations."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from ...readers import TRACE_COLUMNS, read_trace_csv
from ..context import skippable_table
from ..room import Room


def trace_table(raw_files: Iterable[str | Path]) -> pd.DataFrame:
    """Tidy bpftrace results: one row per node, repetition, workload and map.
    Empty (with the skip reason in ``skipped``) where tracing was unavailable."""
    return skippable_table(raw_files, read_trace_csv, TRACE_COLUMNS)


ROOM = Room(("trace",), trace_table)
