"""Does it hold on another CPU or kernel? Compare runs archived as crates
(./repro archive), side by side.

    python -m iolab.archive.compare A.crate.zip B.crate.zip [...] [--figures DIR]

Prints, as Markdown: the machines (node, CPU, kernel, liburing and MPI
versions, mitigations); every claim part's verdict in each crate, with flips
(iolab.archive.reruns); and every number with its 95 % interval in each crate,
marked "differs" where two crates' intervals do not overlap, the only
differences the intervals support. With --figures, one figure per question:
the cost-model terms, the echo servers' CPU per request, MPI latency.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import reruns
from .reruns import md_cell
from .untrusted import Crate, CrateError, shown

# One figure per question: the numbers (by key) that answer it.
QUESTIONS = {
    "cost_model_terms": (
        "The cost model's terms (ns)",
        re.compile(r"^(s_getppid|w_send|w_recv|t1_send|t1_recv|a_send|b_send|a_recv|b_recv)_ns$"),
    ),
    "echo_cpu_per_request": (
        "Echo servers: server CPU per request (ns), 50 connections",
        re.compile(r"^echo_.+_c50_server_ns_per_request$"),
    ),
    "mpi_latency": ("MPI ping-pong latency (µs)", re.compile(r"^mpi_.+_latency_us$")),
}


@dataclass(frozen=True)
class Run:
    name: str
    numbers: dict[str, Any]
    environment: dict[str, Any]


def load(crate_zip: Path) -> Run:
    """A crate's numbers and environment, once the crate verifies
    (iolab.archive.untrusted: every member listed and matching its SHA-256)."""
    with Crate(crate_zip) as crate:
        problems = crate.problems + crate.checksum_problems()
        if problems:
            raise CrateError(f"{crate_zip}: {len(problems)} problem(s), first: {problems[0]}; see ./repro verify")
        for name in ("paper/generated/numbers.json", "archive/environment.json"):
            if not crate.has(name):
                raise CrateError(f"{crate_zip}: no {name}: not an iolab run crate; make one with ./repro archive")
        numbers = crate.read_json("paper/generated/numbers.json")
        environment = crate.read_json("archive/environment.json")
        version = crate.root.get("version", "")
    if not isinstance(numbers, dict) or not isinstance(environment, dict):
        raise CrateError(f"{crate_zip}: its numbers or environment is not a JSON object")
    return Run(shown(f"{crate_zip.name.removesuffix('.crate.zip')} ({str(version)[:7]})"), numbers, environment)


def machines(runs: Sequence[Run]) -> list[str]:
    lines = [
        "## Machines",
        "",
        "| crate | node | CPU | kernel | liburing | MPI | mitigations |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        nodes = run.environment.get("nodes")
        for node, facts in sorted(nodes.items() if isinstance(nodes, dict) else []):
            facts = facts if isinstance(facts, dict) else {}
            toolchain = facts.get("toolchain")
            tool = toolchain if isinstance(toolchain, dict) else {}
            cells = [
                node,
                f"{facts.get('cpu_model')} ×{facts.get('cpus')}",
                facts.get("kernel"),
                tool.get("liburing"),
                tool.get("mpi"),
                facts.get("mitigations"),
            ]
            lines.append(f"| {md_cell(run.name)} | " + " | ".join(md_cell(c) for c in cells) + " |")
    return lines


def disjoint(a: list[float] | None, b: list[float] | None) -> bool:
    """Whether two 95 % intervals do not overlap (both bounded)."""
    if not a or not b or None in a or None in b or not all(map(math.isfinite, [*a, *b])):
        return False
    return a[1] < b[0] or b[1] < a[0]


def quantities(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Every number with a value in each crate: key, per crate (value,
    interval), and whether some pair of intervals is disjoint."""
    tables = [reruns.intervals(r.numbers, "ci95") for r in runs]
    rows = []
    for key in sorted(set.intersection(*(set(t) for t in tables))):
        cells = [t[key] for t in tables]
        differs = any(disjoint(cells[i][1], cells[j][1]) for i in range(len(cells)) for j in range(i + 1, len(cells)))
        rows.append({"key": key, "cells": cells, "differs": differs})
    return rows


def _cell(value: float | None, bounds: list | None) -> str:
    if value is None:
        return ""
    if bounds and None not in bounds and all(map(math.isfinite, bounds)):
        return f"{value:.4g} [{bounds[0]:.4g}, {bounds[1]:.4g}]"
    return f"{value:.4g}"


def report(runs: Sequence[Run]) -> str:
    names = [r.name for r in runs]
    lines = [*machines(runs), ""]
    lines += reruns.report([r.numbers for r in runs], names).split("\n## Calibration")[0].splitlines()
    rows = quantities(runs)
    supported = [r for r in rows if r["differs"]]
    lines += [
        "## Numbers",
        "",
        f"{len(rows)} numbers in every crate; {len(supported)} differ with disjoint 95 % intervals (marked).",
        "",
        "| number | " + " | ".join(md_cell(n) for n in names) + " | |",
        "|---|" + "---|" * (len(names) + 1),
    ]
    for r in rows:
        lines.append(
            f"| {md_cell(r['key'])} | "
            + " | ".join(_cell(*c) for c in r["cells"])
            + f" | {'**differs**' if r['differs'] else ''} |"
        )
    return "\n".join(lines) + "\n"


def short_labels(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The keys without what they all share before the first and after the
    last underscore-separated part ("echo_epoll_c50_server_ns" -> "epoll")."""
    parts = [r["key"].split("_") for r in rows]
    if len(parts) < 2:
        return [r["key"] for r in rows]
    head = 0
    while all(len(p) > head + 1 and p[head] == parts[0][head] for p in parts):
        head += 1
    tail = 0
    while all(len(p) > head + tail + 1 and p[-1 - tail] == parts[0][-1 - tail] for p in parts):
        tail += 1
    return ["_".join(p[head : len(p) - tail]) for p in parts]


def figures(runs: Sequence[Run], out: Path) -> list[Path]:
    """One figure per question: each number's value and interval per crate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..report.plots.style import PALETTE, TEXT_WIDTH_IN, apply, interval_bars

    apply()
    out.mkdir(parents=True, exist_ok=True)
    written = []
    rows = quantities(runs)
    for name, (title, pattern) in QUESTIONS.items():
        mine = [r for r in rows if pattern.match(r["key"])]
        if not mine:
            continue
        fig, ax = plt.subplots(figsize=(TEXT_WIDTH_IN, 0.8 + 0.28 * len(mine) * len(runs)))
        for i, run in enumerate(runs):
            ys = [k * (len(runs) + 1) + i for k in range(len(mine))]
            values = [r["cells"][i][0] for r in mine]
            bounds = [r["cells"][i][1] or [math.nan, math.nan] for r in mine]
            err = interval_bars(
                [b[0] if b[0] is not None else math.nan for b in bounds],
                values,
                [b[1] if b[1] is not None else math.nan for b in bounds],
            )
            ax.errorbar(
                values,
                ys,
                xerr=err,
                fmt="o",
                ms=3,
                capsize=2,
                color=PALETTE[i % len(PALETTE)],
                label=run.name.replace("$", r"\$"),
            )
        ax.set_yticks(
            [k * (len(runs) + 1) + (len(runs) - 1) / 2 for k in range(len(mine))],
            [label + (" *" if r["differs"] else "") for label, r in zip(short_labels(mine), mine, strict=True)],
        )
        ax.invert_yaxis()
        ax.set_title(f"{title}\n* the crates' 95 % intervals are disjoint")
        ax.legend(loc="best")
        fig.tight_layout()
        path = out / f"compare_{name}.svg"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m iolab.archive.compare",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("crates", nargs="+", type=Path, help="crates written by ./repro archive")
    ap.add_argument("--figures", type=Path, help="also draw one figure per question into this directory")
    args = ap.parse_args(argv)
    if len(args.crates) < 2:
        print("compare: give at least two crates", file=sys.stderr)
        return 2
    try:
        runs = [load(c) for c in args.crates]
    except CrateError as e:
        print(f"compare: {e}", file=sys.stderr)
        return 1
    print(report(runs))
    if args.figures:
        for path in figures(runs, args.figures):
            print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
