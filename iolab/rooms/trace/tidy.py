"""Tidy table of the bpftrace syscall durations."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from ...readers import TRACE_COLUMNS, read_trace_csv
from ..context import left_out_table, skippable_table
from ..room import Room


def trace_table(raw_files: Iterable[str | Path]) -> pd.DataFrame:
    """Tidy bpftrace results: one row per node, repetition, workload and map.
    Empty (with the skip reason in ``skipped``) where tracing was unavailable
    (raw files of runs from before the workflow left it out when planning)."""
    return skippable_table(raw_files, read_trace_csv, TRACE_COLUMNS)


def trace_left_out(left_out: Mapping[str, str]) -> pd.DataFrame:
    """The rows of the nodes the workflow left tracing out of, with why."""
    return left_out_table(left_out, TRACE_COLUMNS)


ROOM = Room(("trace",), trace_table, trace_left_out)
