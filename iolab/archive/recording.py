"""A run's record (iolab.claims.records) from its crate: what
``./repro archive`` writes under ``data/records/`` beside the crate, and
what ``python -m iolab.archive.recording CRATE.zip ...`` writes for crates
archived elsewhere (a crate is checked first, iolab.archive.untrusted).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import paths
from ..claims import records
from ..readers import sha256
from . import compare
from .untrusted import CrateError


def findings_of(run: compare.Run) -> list[dict[str, Any]]:
    """A crate's findings as its numbers recorded them."""
    entry = run.numbers.get("findings")
    rows = entry.get("value") if isinstance(entry, dict) else None
    return [f for f in rows if isinstance(f, dict)] if isinstance(rows, list) else []


def run_seconds_of(run: compare.Run) -> float | None:
    """A run's measurement and notebook seconds, where its numbers hold them."""
    value = run.numbers.get("artifact_run_seconds")
    v = value.get("value") if isinstance(value, dict) else None
    return float(v) if isinstance(v, int | float) and v > 0 else None


def of_crate(crate_zip: Path, overlay: str = "") -> records.RunRecord:
    """The record of a crate's run (CrateError where the crate does not check)."""
    run = compare.load(crate_zip)
    assert run.identity is not None
    nodes = run.environment.get("nodes")
    return records.RunRecord(
        run.identity,
        records.machine_kind(nodes if isinstance(nodes, dict) else {}),
        sha256(crate_zip),
        overlay,
        tuple(records.kept_finding(f) for f in findings_of(run)),
        run_seconds_of(run),
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m iolab.archive.recording", description=__doc__.split("\n\n")[0])
    ap.add_argument("crates", nargs="+", type=Path)
    ap.add_argument(
        "--out",
        type=Path,
        default=records.DIRECTORY,
        help=f"where the records go (default {paths.relative(records.DIRECTORY)})",
    )
    ap.add_argument("--overlay", default="", help="the config overlay the runs used (recorded; default: none said)")
    args = ap.parse_args(argv)
    status = 0
    for crate in args.crates:
        try:
            path = of_crate(crate, args.overlay).write(args.out)
        except (CrateError, OSError) as e:
            print(f"recording: {e}", file=sys.stderr)
            status = 1
            continue
        print(f"recording: {crate.name} -> {paths.relative(path)} ({path.stat().st_size / 1000:.1f} kB)")
    return status


if __name__ == "__main__":
    sys.exit(main())
