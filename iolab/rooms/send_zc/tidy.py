"""Tidy table of cost-probe send-zc: the probe's timed batches with, per
zero-copy cell, the notifications and copies the kernel reported."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from ... import paths
from ..cost_probes.tidy import probe_table
from ..room import Room

_ZC_USAGE = re.compile(r"^#\s*zc_usage:\s*variant=(\S+)\s+bytes=(\d+)\s+notifications=(\d+)\s+copied=(\d+)\s*$")


def read_zc_usage(path: str | Path) -> pd.DataFrame:
    """cost-probe send-zc's "# zc_usage:" lines, written after the samples:
    per zero-copy cell, the notifications of its measured batches and how
    many of them reported that the kernel copied the data."""
    with open(path) as f:
        rows = [m.groups() for line in f if line.startswith("#") and (m := _ZC_USAGE.match(line.strip()))]
    frame = pd.DataFrame(rows, columns=["variant", "bytes", "zc_notifications", "zc_copied"])
    return frame.astype({"bytes": int, "zc_notifications": int, "zc_copied": int})


def send_zc_table(raw_files: Iterable[str | Path]) -> pd.DataFrame:
    """probe_table's rows of cost-probe send-zc, each zero-copy cell with
    its notifications and the copies they reported (``zc_notifications``,
    ``zc_copied``: per repetition and cell, measured batches only; 0 for
    plain send)."""
    files = sorted(Path(p) for p in raw_files)
    table = probe_table(files)
    usage = pd.concat([read_zc_usage(raw).assign(raw_file=paths.relative(raw)) for raw in files], ignore_index=True)
    table = table.merge(usage, on=["raw_file", "variant", "bytes"], how="left", validate="many_to_one")
    return table.fillna({"zc_notifications": 0, "zc_copied": 0}).astype({"zc_notifications": int, "zc_copied": int})


ROOM = Room(("send_zc",), send_zc_table)
