"""The paper's artifact appendix, from the run itself: what it took (each
job's wall time and peak memory, as Snakemake's benchmark files recorded
them, and the disk its raw data hold), how to rebuild it, and
where a re-run is expected to land (each headline number's prediction
interval, the between-run spread included).

Written at the merge of the notebooks' numbers (iolab.report.paper), so it
sees the run's results/ but not the paper it is part of.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import paths
from ..analysis.mpistats import TRANSPORT_NAMES
from . import labels

Numbers = Mapping[str, Any]
BENCHMARKS = paths.REPO / "results" / "benchmarks"
# The numbers a re-run is asked about: the cost model's terms and the echo
# servers' CPU per request at 50 connections (the site's headline
# quantities, iolab.archive.compare.QUESTIONS, which read this list).
# Each pattern's group "what" names the quantity within its headline
# (readable by ``quantity_words``).
HEADLINES = {
    "cost_model_terms": (
        "The cost model's terms (ns)",
        re.compile(r"^(?P<what>s_getppid|w_send|w_recv|t1_send|t1_recv|a_send|b_send|a_recv|b_recv)_ns$"),
    ),
    "echo_cpu_per_request": (
        "Echo servers: server CPU per request (ns), 50 connections",
        re.compile(r"^echo_(?P<what>.+)_c50_server_ns_per_request$"),
    ),
    "mpi_latency": ("MPI ping-pong latency (µs)", re.compile(r"^mpi_(?P<what>.+)_latency_us$")),
}
TERM_WORDS = {"s": "s", "w": "w", "t1": "t(1)", "a": "a", "b": "b"}


def quantity_words(headline: str, what: str) -> str:
    """A headline quantity as the reader reads it, not its key: a cost
    term as "t(1), send", an echo server by its preset, an MPI transport
    in words."""
    if headline == "cost_model_terms":
        term, _, side = what.partition("_")
        return f"{TERM_WORDS.get(term, term)}, {side}" if side != "getppid" else "s (getppid)"
    if headline == "mpi_latency":
        return TRANSPORT_NAMES.get(what, what)
    return labels.preset(what)


def raw_bytes(repo: Path) -> int:
    """The bytes of the raw files (and sidecars) the run's tables read: the
    same in the run and in a re-analysis of its crate, which unpacks them."""
    total = 0
    for sources in sorted((repo / "results" / "tables").glob("*.sources.json")):
        try:
            rows = json.loads(sources.read_text()).get("raw", [])
        except (OSError, ValueError, AttributeError):
            continue
        for row in rows if isinstance(rows, list) else []:
            for key in ("raw", "provenance"):
                f = repo / str(row.get(key, "")) if isinstance(row, dict) and row.get(key) else None
                if f is not None and f.is_file() and not f.is_symlink():
                    total += f.stat().st_size
    return total


def _jobs(root: Path) -> list[tuple[str, float, float]]:
    """(job, seconds, peak RSS in MB) of every benchmark file under ``root``."""
    out = []
    for f in sorted(root.rglob("*.tsv")) if root.exists() else []:
        with f.open() as handle:
            rows = list(csv.DictReader(handle, delimiter="\t"))
        for row in rows[:1]:
            try:
                seconds = float(row.get("s", "nan"))
                rss = float(row.get("max_rss", "nan"))
            except ValueError:
                continue
            out.append((str(f.relative_to(root)), seconds, rss))
    return out


def run_seconds(repo: Path = paths.REPO) -> float | None:
    """The seconds this checkout's last run spent in its measurement and
    notebook jobs (Snakemake's benchmark files); None where none were kept."""
    root = repo / "results" / "benchmarks"
    jobs = [s for sub in ("measure", "notebooks") for _, s, _ in _jobs(root / sub) if math.isfinite(s)]
    return sum(jobs) if jobs else None


def measure_seconds(node: str, repo: Path = paths.REPO) -> float | None:
    """The seconds this checkout's last run spent measuring on ``node``
    (its measurement jobs' benchmark files); None where none were kept."""
    jobs = [s for _, s, _ in _jobs(repo / "results" / "benchmarks" / "measure" / node) if math.isfinite(s)]
    return sum(jobs) if jobs else None


def resources(repo: Path = paths.REPO) -> str:
    """What the run took, in one sentence; "" where nothing was recorded."""
    root = repo / "results" / "benchmarks"
    measured = _jobs(root / "measure")
    notebooks = _jobs(root / "notebooks")
    raw = raw_bytes(repo)
    parts = []
    if measured:
        peak = max((r for _, _, r in measured if math.isfinite(r)), default=math.nan)
        parts.append(
            f"its {len(measured)} measurement jobs ran {sum(s for _, s, _ in measured) / 60:.1f} min in all"
            + (f" (peak memory of one job {peak:.0f} MB)" if math.isfinite(peak) else "")
        )
    if notebooks:
        peak = max((r for _, _, r in notebooks if math.isfinite(r)), default=math.nan)
        parts.append(
            f"its {len(notebooks)} notebooks {sum(s for _, s, _ in notebooks) / 60:.1f} min"
            + (f" (peak {peak:.0f} MB)" if math.isfinite(peak) else "")
        )
    if raw:
        parts.append(f"the raw data its tables read take {raw / 2**20:.1f} MiB of disk")
    if not parts:
        return ""
    return "This run: " + "; ".join(parts) + " (Snakemake's benchmark files, results/benchmarks/)."


def expected_rerun(numbers: Numbers) -> list[dict[str, str]]:
    """Each headline number with a prediction interval: where a re-run of
    as many repetitions, on another occasion, is expected (95 %)."""
    rows = []
    for headline, (title, pattern) in HEADLINES.items():
        for key in sorted(k for k in numbers if pattern.match(k)):
            e = numbers[key]
            pi = e.get("pi95") if isinstance(e, dict) else None
            match = pattern.match(key)
            if match is None or not isinstance(pi, list) or len(pi) != 2 or None in pi:
                continue
            rows.append(
                {
                    "quantity": f"{title}: {quantity_words(headline, match['what'])}",
                    "this run": str(e.get("text", "")),
                    "a re-run, 95 %": f"{_num(pi[0])}\u2013{_num(pi[1])}",
                }
            )
    return rows


def _num(x: float) -> str:
    return f"{x:,.0f}".replace(",", "\u2009") if abs(x) >= 100 else f"{x:.3g}"


def entries(numbers: Numbers, repo: Path = paths.REPO) -> dict[str, dict[str, Any]]:
    """The appendix's entries for numbers.json."""
    out: dict[str, dict[str, Any]] = {}
    said = resources(repo)
    if said:
        out["artifact_resources"] = {"value": said, "text": said}
    seconds = run_seconds(repo)
    if seconds is not None:
        out["artifact_run_seconds"] = {"value": round(seconds, 1), "text": f"{seconds / 60:.1f} min"}
    rows = expected_rerun(numbers)
    if rows:
        out["artifact_rerun"] = {"value": rows, "text": f"{len(rows)} rows"}
    for entry in out.values():
        entry.update({"unit": "", "notebook": None, "note": "written from the run"})
    return out
