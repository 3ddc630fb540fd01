"""Loaders from raw files to tidy tables (one row per observation).

Each experiment's tidy step lives in its room (iolab.rooms); this module
loads, describes and writes the tables. Raw probe files are CSV with
``# key=value`` metadata lines; each has a provenance sidecar. Tidy tables
join the two, so every row says which node, repetition and raw file it came
from. ``python -m iolab.tables`` writes them as Parquet together with a
``.sources.json`` listing the raw files (with SHA-256) that the figure
manifest links to.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from . import atomic, paths
from .formats import histograms_path
from .provenance import sidecar_for
from .readers import RawFormatError, read_unavailable, sha256
from .registry import REGISTRY
from .rooms import ROOMS
from .rooms.context import load_sidecar
from .rooms.room import Tidy

_RAW_NAME = re.compile(r"^rep\d+\.csv$")  # not rep<N>.histograms.csv


# experiment -> the function that builds its tidy table (its room's).
TABLES: dict[str, Tidy] = {name: room.tidy for name, room in ROOMS.items()}


def tidy(experiment: str, raw_files: Iterable[str | Path]) -> pd.DataFrame:
    """The tidy table of ``experiment`` from its raw files."""
    return TABLES[experiment](raw_files)


def unavailable_configurations(raw_files: Iterable[str | Path]) -> pd.DataFrame:
    """Presets each raw file reported as unavailable, with the reason."""
    rows = [{"raw_file": paths.relative(p), **u} for p in raw_files for u in read_unavailable(p)]
    return pd.DataFrame(rows, columns=["raw_file", "preset", "reason"])


def raw_files_under(root: str | Path, experiment: str) -> list[Path]:
    """Every raw file of ``experiment`` below ``root``
    (``<node>/<experiment>/<run key>/rep<N>.csv``)."""
    return sorted(p for p in Path(root).glob(f"*/{experiment}/*/rep*.csv") if _RAW_NAME.match(p.name))


# What a notebook opened by hand reads: the pipeline's latest tidy table when
# there is one, else the small raw dataset shipped with the repository.
AUTO = "auto"
REFERENCE = "data/reference"


def resolve(experiment: str, source: str | Path) -> Path:
    """``source`` as a path; ``"auto"`` is results/tables/<experiment>.parquet
    when the pipeline has built it, and the shipped reference data otherwise."""
    if str(source) != AUTO:
        return paths.resolve(source)
    table = paths.resolve(f"results/tables/{experiment}.parquet")
    return table if table.exists() else paths.resolve(REFERENCE)


def load(
    experiment: str, source: str | Path, include_emulated: bool = False, reps: Sequence[int] | None = None
) -> pd.DataFrame:
    """The tidy table for ``experiment`` from a Parquet file, a raw-data root
    such as ``data/reference`` (how notebooks open without measuring), or
    ``"auto"`` (``resolve``). ``reps``: only these repetitions (empty or
    None: all). Rows measured in an emulated (TCG) guest are labelled
    accel=tcg in the table and left out here unless ``include_emulated``:
    they are for functional tests, never for performance figures."""
    src = resolve(experiment, source)
    if src.suffix == ".parquet":
        table = pd.read_parquet(src)
    else:
        files = raw_files_under(src, experiment)
        if not files:
            raise RawFormatError(f"no {experiment} raw files under {src}")
        table = TABLES[experiment](files)
    if reps:
        table = table[table["rep"].isin(list(reps))].reset_index(drop=True)
        if table.empty:
            raise RawFormatError(f"{experiment}: no repetition {sorted(reps)} in {paths.relative(src)}")
    return table if include_emulated else performance_rows(table)


def describe_all(sources: dict[str, str]) -> str:
    """``describe`` for every table a notebook reads (skipping "": not run)."""
    return "\n".join(describe(e, src) for e, src in sources.items() if src)


def describe(experiment: str, source: str | Path) -> str:
    """One line saying which data a table holds: where it comes from, the
    nodes, when it was measured and at which commit (from the sidecars)."""
    src = resolve(experiment, source)
    if src.suffix == ".parquet":
        raws = table_raw_files(src)
        origin = "the pipeline's latest run" if str(source) == AUTO else "a pipeline table"
    else:
        raws = raw_files_under(src, experiment)
        origin = "the reference data shipped with iolab" if src == paths.resolve(REFERENCE) else "raw files"
    sides = [load_sidecar(r) for r in raws if Path(sidecar_for(r)).exists()]
    if not sides:
        return f"{experiment}: {paths.relative(src)} ({origin})"
    nodes = sorted({s["node"]["name"] for s in sides})
    started = sorted(s["started"] for s in sides)
    commits = sorted(
        {(s["git"].get("commit") or "none")[:7] + (" (dirty)" if s["git"].get("dirty") else "") for s in sides}
    )
    return (
        f"{experiment}: {paths.relative(src)} ({origin}); node {', '.join(nodes)}; measured "
        f"{started[0][:16]} to {started[-1][:16]} UTC; commit {', '.join(commits)}; "
        f"{len({int(s['settings']['rep']) for s in sides})} repetitions"
    )


def performance_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Rows fit for performance figures: not from an emulated (TCG) guest."""
    if "accel" not in table.columns:
        return table
    return table[table["accel"] != "tcg"].reset_index(drop=True)


def table_raw_files(table: str | Path) -> list[Path]:
    """The raw files a Parquet table was built from (its .sources.json),
    resolved against the checkout the table lives in (<root>/results/tables/),
    which need not be this one. A table written by other means has no
    sources list: then there is nothing to trace, and the list is empty."""
    table = Path(table)
    root = table.resolve().parent.parent.parent
    return [p if (p := Path(r["raw"])).is_absolute() else root / p for r in table_sources(table)]


def table_sources(table: str | Path) -> list[dict[str, Any]]:
    """The entries of a table's .sources.json ([] when it has none)."""
    listing = sources_path(table)
    return json.loads(listing.read_text())["raw"] if listing.exists() else []


def sources_path(table: str | Path) -> Path:
    table = Path(table)
    return table.with_name(table.stem + ".sources.json")


def write_table(
    experiment: str, raw_files: Sequence[str | Path], output: str | Path, left_out: Mapping[str, str] | None = None
) -> None:
    """The tidy table of ``experiment`` from its raw files, and from the
    nodes the workflow left it out of (node -> reason; iolab.privilege),
    with its ``.sources.json``: the raw files, and those nodes with why."""
    left_out = dict(left_out or {})
    frames = [TABLES[experiment](raw_files)] if raw_files else []
    if left_out:
        rows = ROOMS[experiment].left_out
        if rows is None:
            raise RawFormatError(f"{experiment} is never left out of a node, so it has no rows for one")
        frames.append(rows(left_out))
    if not frames:
        raise RawFormatError("no raw files given")
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    with atomic.atomic_path(output) as tmp:
        frame.to_parquet(tmp, index=False)
    sources = [
        {
            "raw": paths.relative(p),
            "sha256": sha256(p),
            "provenance": paths.relative(sidecar_for(p)),
            # The latency buckets beside it, where the table reads them.
            **(
                {"histograms": paths.relative(h), "histograms_sha256": sha256(h)}
                if "histograms.csv" in REGISTRY[experiment].table_reads and (h := histograms_path(p)).exists()
                else {}
            ),
        }
        for p in sorted(map(Path, raw_files))
    ]
    listing: dict[str, Any] = {"table": paths.relative(output), "raw": sources}
    if left_out:
        listing["left_out"] = dict(sorted(left_out.items()))
    atomic.write_json(sources_path(output), listing)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m iolab.tables", description="Build a tidy Parquet table from raw files."
    )
    ap.add_argument("experiment", choices=sorted(TABLES))
    ap.add_argument("--output", required=True, type=Path)
    ap.add_argument(
        "--left-out",
        action="append",
        default=[],
        metavar="NODE=REASON",
        help="a node the workflow left the experiment out of, and why (iolab.privilege)",
    )
    ap.add_argument("raw", nargs="*", type=Path)
    # Intermixed: raw files may follow the options, and there may be none.
    args = ap.parse_intermixed_args(argv)
    left_out = dict(item.split("=", 1) for item in args.left_out if "=" in item)
    if len(left_out) != len(args.left_out):
        ap.error("--left-out takes NODE=REASON")
    try:
        write_table(args.experiment, args.raw, args.output, left_out)
    except RawFormatError as e:
        print(f"iolab: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
