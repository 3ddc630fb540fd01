"""Running one cost-probe mode from the sanitizer build, for the tests of
each mode (tests/test_<experiment>.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd

from iolab import readers


def measured_rows(native_build: Path, out: Path, mode: str, *flags: str) -> pd.DataFrame:
    """The measured (not warm-up) rows of one short run of ``mode``, read
    as the workflow reads them (its header names its raw format)."""
    probe = str(native_build / "san" / "cost-probe")
    res = subprocess.run(
        [probe, mode, "--batches", "6", "--warmup-batches", "1", *flags, "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    frame = readers.read_raw_csv(out)
    measured = frame[frame["warmup"] == 0]
    assert (measured["calls"] > 0).all() and (measured["ns"] > 0).all()
    return measured


def refusal(native_build: Path, mode: str, *flags: str) -> str:
    """What ``mode`` says of flags it must refuse: one line, exit status 2."""
    res = subprocess.run(
        [str(native_build / "san" / "cost-probe"), mode, *flags], capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    return res.stderr
