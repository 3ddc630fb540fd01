"""Does it hold on another CPU or kernel? Compare runs archived as crates
(./repro archive), side by side.

    python -m iolab.archive.compare A.crate.zip B.crate.zip [...] [--figures DIR]

Prints, as Markdown: the machines (node, CPU, kernel, liburing and MPI
versions, mitigations); the fields of the comparison key (machine, software,
each experiment's settings) on which the crates differ; every claim part's verdict in each crate, with flips
(iolab.archive.reruns); and every number with its 95 % interval in each crate.
Each later crate's number is set against the first's as a ratio B/A with a 95 %
interval from both crates' repetitions (iolab.estimation.intervals.ratio_interval):
"differs" where that interval excludes 1, "equivalent" where it lies within
the stated margin (--margin, default ±10 %). Disjoint intervals, the older and
more conservative test, are counted beside it. The ratio's interval holds the
two runs' own repetitions only, not the drift between occasions
(data/occasions.json): two runs of one machine days apart "differ" by it
wherever that drift exceeds their repetitions' spread. With --figures, one figure per
question: the cost-model terms, the echo servers' CPU per request, MPI latency.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import paths
from ..claims.records import future_problem
from ..codehash import analysing_digest, measuring_digest
from ..estimation.intervals import Estimate, ratio_interval
from ..registry import REGISTRY
from ..report.artifact import HEADLINES
from . import identity, reruns
from .identity import RunIdentity
from .reruns import md_cell
from .untrusted import Crate, CrateError, crate_commit, shown

# Parts one claim may carry in a crate. The shipped reference run reports
# at most 15 for any claim (U1; tests/data/reference_numbers.json); more
# than this many are cut, so that made-up parts, like made-up claims, cannot
# swamp what is printed (20 000 made-up claims once took `verdicts` 69 s
# and 40 004 lines).
MAX_PARTS_PER_CLAIM = 200

# One figure per question: the numbers (by key) that answer it.
# The headline quantities a run is compared on, declared once (the paper's
# appendix asks where a re-run lands for the same ones).
QUESTIONS = HEADLINES


@dataclass(frozen=True)
class Run:
    name: str
    numbers: dict[str, Any]
    environment: dict[str, Any]
    # experiment -> a digest of the settings it measured with (its raw files'
    # provenance), for the comparison key.
    settings: dict[str, str] = field(default_factory=dict)
    # archive/code.json: digests of the code that measured each experiment
    # and of the analysis; None for a crate archived before it was recorded.
    code: dict[str, Any] | None = None
    # The crate's commit and when it was archived (its root entity).
    commit: str = ""
    published: str = ""
    # When its first measurement or notebook started (its actions' earliest
    # startTime): the date a timeline places it at; "" if none is recorded.
    measured: str = ""
    # experiment -> the settings themselves (what ``settings`` digests), so
    # that a diff can name the options that changed.
    setting_values: dict[str, Any] = field(default_factory=dict)
    # What makes two crates one run (iolab.archive.identity); None for a
    # Run made without a crate.
    identity: RunIdentity | None = None
    # One line on the claim parts of its crate left out of ``numbers``
    # (registered_findings): "" when none were.
    left_out: str = ""


# What must be equal for two runs' numbers to share an axis: per node, the
# machine and its software; per experiment, the settings it measured with.
# Code may differ (that is what a series over commits shows).
NODE_KEY_FIELDS = ("cpu_model", "cpus", "kind", "kernel", "mitigations", "liburing", "mpi", "cc")


def _settings_digest(settings: Any) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:12]


def node_facts(run: Run) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(node, its facts, its toolchain) for each node of the run's environment, by name."""
    nodes = run.environment.get("nodes")
    out = []
    for node, facts in sorted(nodes.items() if isinstance(nodes, dict) else []):
        facts = facts if isinstance(facts, dict) else {}
        toolchain = facts.get("toolchain")
        out.append((node, facts, toolchain if isinstance(toolchain, dict) else {}))
    return out


def comparison_key(run: Run) -> dict[str, str]:
    """The run's comparison key, field by field ("node local: kernel",
    "settings: echo", ...)."""
    key: dict[str, str] = {}
    for node, facts, tool in node_facts(run):
        for name in NODE_KEY_FIELDS:
            value = tool.get(name) if name in ("liburing", "mpi", "cc") else facts.get(name)
            key[f"node {node}: {name}"] = shown(str(value), 80)
    for experiment, digest in sorted(run.settings.items()):
        key[f"settings: {experiment}"] = digest
    return key


def key_differences(runs: Sequence[Run]) -> list[str]:
    """The comparison key's fields on which the runs differ (a field one run
    lacks counts as different)."""
    keys = [comparison_key(r) for r in runs]
    fields = sorted(set().union(*keys))
    return [f for f in fields if len({k.get(f, "(none)") for k in keys}) > 1]


def flat_environment(environment: Any, prefix: str = "") -> dict[str, str]:
    """A run's environment (archive/environment.json) field by field:
    "python", "apt / liburing-dev", "nodes / local / toolchain / cc"."""
    if isinstance(environment, dict):
        out: dict[str, str] = {}
        for name, value in environment.items():
            out.update(flat_environment(value, f"{prefix}{shown(name, 80)} / "))
        return out
    return {prefix.removesuffix(" / ") or "(value)": shown(environment, 200)}


def flat_diff(a: Any, b: Any) -> list[tuple[str, str, str]]:
    """(field, in a, in b) for each field of two nested records that
    differs (flat_environment's names); a field one lacks shows as "(none)"."""
    fa, fb = flat_environment(a), flat_environment(b)
    return [
        (f, fa.get(f, "(none)"), fb.get(f, "(none)"))
        for f in sorted(set(fa) | set(fb))
        if fa.get(f, "(none)") != fb.get(f, "(none)")
    ]


def environment_diff(a: Run, b: Run) -> list[tuple[str, str, str]]:
    """The environment fields (software, nodes) on which two runs differ."""
    return flat_diff(a.environment, b.environment)


def settings_diff(a: Run, b: Run) -> list[tuple[str, str, str]]:
    """The experiment settings (options, sweeps) on which two runs differ,
    as "<experiment> / <option>"."""
    return flat_diff(a.setting_values, b.setting_values)


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
        version = crate_commit(crate.root.get("version", ""), crate_zip)
        published = crate.root.get("datePublished", "")
        # One sidecar per experiment is enough: a run key directory holds one setting.
        settings: dict[str, str] = {}
        values: dict[str, Any] = {}
        for name in crate.files("data/raw/"):
            parts = name.split("/")
            if len(parts) == 6 and parts[5].endswith(".provenance.json") and parts[3] not in settings:
                sidecar = crate.read_json(name)
                if isinstance(sidecar, dict):
                    settings[parts[3]] = _settings_digest(sidecar.get("settings"))
                    values[parts[3]] = sidecar.get("settings")
        code = crate.read_json("archive/code.json") if crate.has("archive/code.json") else None
        started = crate.first_started()
        ident = identity.of_crate(crate, version, environment, numbers)
    if problem := future_problem(started):
        raise CrateError(f"{crate_zip}: {problem}: not evidence of a run")
    if not isinstance(numbers, dict) or not isinstance(environment, dict):
        raise CrateError(f"{crate_zip}: its numbers or environment is not a JSON object")
    name = shown(f"{crate_zip.name.removesuffix('.crate.zip')} ({str(version)[:7]})")
    code = code if isinstance(code, dict) else None
    measured = shown(started, 40)
    numbers, left_out = registered_findings(numbers)
    return Run(name, numbers, environment, settings, code, version, str(published), measured, values, ident, left_out)


def registered_findings(numbers: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """``numbers`` with only the claim parts of this checkout's claims
    (iolab.claims.CLAIM_TESTS), at most MAX_PARTS_PER_CLAIM of
    each, and one line saying what was left out ("" when nothing was): a
    claim this checkout does not know has no test here to be judged by."""
    from ..claims import CLAIM_TESTS

    entry = numbers.get("findings")
    if not isinstance(entry, dict) or not isinstance(found := entry.get("value"), list):
        return numbers, ""
    kept: list[Any] = []
    per_claim: dict[str, int] = {}
    unknown: dict[str, int] = {}
    cut = 0
    for f in found:
        claim = f.get("claim") if isinstance(f, dict) else None
        if not isinstance(claim, str) or claim not in CLAIM_TESTS:
            key = shown(claim, 20) if isinstance(claim, str) else "(none)"
            unknown[key] = unknown.get(key, 0) + 1
        elif per_claim.get(claim, 0) >= MAX_PARTS_PER_CLAIM:
            cut += 1
        else:
            per_claim[claim] = per_claim.get(claim, 0) + 1
            kept.append(f)
    said = []
    if unknown:
        first = sorted(unknown)[:3]
        said.append(
            f"{sum(unknown.values())} part(s) of {len(unknown)} claim(s) this checkout does not know "
            f"({', '.join(repr(c) for c in first)}{', …' if len(unknown) > 3 else ''})"
        )
    if cut:
        said.append(f"{cut} part(s) beyond {MAX_PARTS_PER_CLAIM} per claim")
    if not said:
        return numbers, ""
    return {**numbers, "findings": {**entry, "value": kept}}, "left out " + " and ".join(said)


def stale(run: Run, root: Path = paths.REPO) -> list[str]:
    """What of ``run`` today's checkout at ``root`` would measure or analyse
    with other code: "measured: <experiment>" per experiment whose measuring
    sources changed, "unrecorded: <experiment>" per experiment whose crate
    could not say which code measured it (raw files re-analysed from another
    run), "analysed" if the analysis changed; ["unknown"] for a crate that
    recorded no digests."""
    if run.code is None:
        return ["unknown"]
    measured = run.code.get("measured")
    unrecorded = run.code.get("unrecorded")
    out = [
        f"measured: {experiment}"
        for experiment, digest in sorted(measured.items() if isinstance(measured, dict) else [])
        if experiment in REGISTRY and digest != measuring_digest(experiment, root)
    ]
    out += [f"unrecorded: {shown(e, 40)}" for e in sorted(unrecorded if isinstance(unrecorded, dict) else [])]
    if run.code.get("analysed") != analysing_digest(root):
        out.append("analysed")
    return out


def code_section(runs: Sequence[Run], root: Path = paths.REPO) -> list[str]:
    """Which crates' numbers came from other code than this checkout's."""
    lines = ["## Code", ""]
    for run in runs:
        marks = stale(run, root)
        if marks == ["unknown"]:
            lines.append(f"- {md_cell(run.name)}: records no code digests (archived before they were): unknown.")
            continue
        older = [m.removeprefix("measured: ") for m in marks if m.startswith("measured: ")]
        unknown = [m.removeprefix("unrecorded: ") for m in marks if m.startswith("unrecorded: ")]
        said = []
        if older:
            said.append(f"measured with other code than this checkout's: {', '.join(older)}")
        if unknown:
            said.append(f"measured with code its crate could not name: {', '.join(unknown)}")
        if "analysed" in marks:
            said.append("analysed with other code (./repro reanalyse rebuilds its numbers with today's)")
        lines.append(
            f"- {md_cell(run.name)}: "
            + ("; ".join(said) if said else "measured and analysed with this checkout's code")
            + "."
        )
    return [*lines, ""]


def machines(runs: Sequence[Run]) -> list[str]:
    lines = [
        "## Machines",
        "",
        "| crate | node | CPU | kernel | liburing | MPI | mitigations |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        for node, facts, tool in node_facts(run):
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


# How far apart two runs' numbers may be and still count as the same, by default.
MARGIN = 0.10


def repetitions(numbers: dict[str, Any], key: str) -> list[float]:
    """A number's per-repetition values as its crate recorded them."""
    entry = numbers.get(key)
    reps = entry.get("reps") if isinstance(entry, dict) else None
    if not isinstance(reps, list):
        return []
    return [v for v in map(reruns.finite_number, reps) if v is not None]


def ratio_says(ratio: Estimate | None, margin: float = MARGIN) -> str:
    """ "differs" where the ratio's interval excludes 1, "equivalent" where
    it lies within [1/(1 + margin), 1 + margin], else "" (undecided)."""
    if ratio is None or not math.isfinite(ratio.high):
        return ""
    if ratio.high < 1 or ratio.low > 1:
        return "differs"
    if ratio.low >= 1 / (1 + margin) and ratio.high <= 1 + margin:
        return "equivalent"
    return ""


def quantities(runs: Sequence[Run], margin: float = MARGIN) -> list[dict[str, Any]]:
    """Every number with a value in each crate: key, per crate (value,
    interval), whether some pair of intervals is disjoint, and each later
    crate's ratio to the first with what its interval says."""
    tables = [reruns.intervals(r.numbers, "ci95") for r in runs]
    rows = []
    for key in sorted(set.intersection(*(set(t) for t in tables))):
        cells = [t[key] for t in tables]
        differs = any(disjoint(cells[i][1], cells[j][1]) for i in range(len(cells)) for j in range(i + 1, len(cells)))
        first = repetitions(runs[0].numbers, key)
        ratios = [ratio_interval(first, repetitions(r.numbers, key)) if first else None for r in runs[1:]]
        says = [ratio_says(x, margin) for x in ratios]
        rows.append({"key": key, "cells": cells, "differs": differs, "ratios": ratios, "says": says})
    return rows


def _ratio_cell(ratio: Estimate | None, says: str) -> str:
    if ratio is None:
        return ""
    high = f"{ratio.high:.3g}" if math.isfinite(ratio.high) else "∞"
    return f"{ratio.value:.3g} [{ratio.low:.3g}, {high}]" + (f" **{says}**" if says else "")


def _cell(value: float | None, bounds: list | None) -> str:
    if value is None:
        return ""
    if bounds and None not in bounds and all(map(math.isfinite, bounds)):
        return f"{value:.4g} [{bounds[0]:.4g}, {bounds[1]:.4g}]"
    return f"{value:.4g}"


def report(runs: Sequence[Run], margin: float = MARGIN) -> str:
    names = [r.name for r in runs]
    lines = [*machines(runs), ""]
    differ = key_differences(runs)
    lines += ["## Comparison key", ""]
    if differ:
        keys = [comparison_key(r) for r in runs]
        lines += [
            f"These runs differ in {len(differ)} field(s) of the comparison key (machine, software, "
            "experiment settings): a ratio between them compares these, not only the code. "
            "Numbers of different keys are shown side by side, never on one axis.",
            "",
            "| field | " + " | ".join(md_cell(n) for n in names) + " |",
            "|---|" + "---|" * len(names),
        ]
        lines += [f"| {md_cell(f)} | " + " | ".join(md_cell(k.get(f, "(none)")) for k in keys) + " |" for f in differ]
    else:
        lines.append("These runs share one comparison key: the same machine, software and experiment settings.")
    lines.append("")
    notes = [f"{md_cell(r.name)}: {md_cell(r.left_out, 300)}." for r in runs if r.left_out]
    lines += [*notes, ""] if notes else []
    lines += code_section(runs)
    lines += reruns.report([r.numbers for r in runs], names).split("\n## Calibration")[0].splitlines()
    rows = quantities(runs, margin)
    supported = [r for r in rows if r["differs"]]
    with_ratio = [r for r in rows if any(x is not None for x in r["ratios"])]
    ratio_differs = [r for r in rows if "differs" in r["says"]]
    equivalent = [r for r in rows if r["says"] and all(s == "equivalent" for s in r["says"])]
    lines += [
        "## Numbers",
        "",
        f"{len(rows)} numbers in every crate; {len(supported)} differ with disjoint 95 % intervals (marked).",
        f"Against {md_cell(names[0])}, as a ratio with its 95 % interval from both crates' repetitions "
        f"({len(with_ratio)} numbers have them): {len(ratio_differs)} differ (the interval excludes 1), "
        f"{len(equivalent)} are equivalent within ±{margin * 100:g} % (the interval lies inside).",
        "",
        "| number | "
        + " | ".join(md_cell(n) for n in names)
        + " | disjoint | "
        + " | ".join(f"{md_cell(n)} / {md_cell(names[0])}" for n in names[1:])
        + " |",
        "|---|" + "---|" * (2 * len(names)),
    ]
    for r in rows:
        lines.append(
            f"| {md_cell(r['key'])} | "
            + " | ".join(_cell(*c) for c in r["cells"])
            + f" | {'**differs**' if r['differs'] else ''} | "
            + " | ".join(_ratio_cell(x, s) for x, s in zip(r["ratios"], r["says"], strict=True))
            + " |"
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

    from ..report.plots.style import FIGURE_WIDTH_IN, PALETTE, apply, interval_bars

    apply()
    out.mkdir(parents=True, exist_ok=True)
    written = []
    rows = quantities(runs)
    for name, (title, pattern) in QUESTIONS.items():
        mine = [r for r in rows if pattern.match(r["key"])]
        if not mine:
            continue
        fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, 0.8 + 0.28 * len(mine) * len(runs)))
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
    ap.add_argument(
        "--margin",
        type=float,
        default=MARGIN,
        help=f"the ratio's margin of equivalence, as a fraction (default {MARGIN}: within ±10 %%)",
    )
    args = ap.parse_args(argv)
    if len(args.crates) < 2:
        print("compare: give at least two crates", file=sys.stderr)
        return 2
    try:
        runs = [load(c) for c in args.crates]
    except CrateError as e:
        print(f"compare: {e}", file=sys.stderr)
        return 1
    if not 0 < args.margin < 1:
        print(
            f"compare: --margin {args.margin} is not a fraction between 0 and 1 (e.g. 0.1 for ±10 %)", file=sys.stderr
        )
        return 2
    print(report(runs, args.margin))
    if args.figures:
        for path in figures(runs, args.figures):
            print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
