"""Tidy table of the perftest results."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from ...formats import IB_COLUMNS
from ...readers import read_ib_csv
from ..context import network, skippable_table
from ..room import Room


def ib_table(raw_files: Iterable[str | Path]) -> pd.DataFrame:
    """Tidy perftest results: one row per node, repetition, program, size and
    metric (``value``); none where the experiment was skipped (``skipped``
    then holds the reason, on one row without values)."""
    return skippable_table(raw_files, read_ib_csv, IB_COLUMNS, network)


ROOM = Room(("ib",), ib_table)
