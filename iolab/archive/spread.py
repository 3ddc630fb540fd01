"""Re-estimate the between-occasion spread (iolab.estimation.occasion_spread) from
your own archived runs, and show the estimate in use.

    python -m iolab.archive.spread estimate CRATE.zip CRATE.zip [...]    (./repro occasions estimate ...)
    python -m iolab.archive.spread show

Each crate is checked first (iolab.archive.untrusted); the estimate, with
which runs it rests on, is written to data/occasions.json, which every
prediction interval and the launch planner then use. Groups
are quantities of one declared kind (iolab.estimation.occasion_spread.KINDS);
crates from before kinds were declared add only what their units tell for
certain (times and rates): reanalyse them first to count the rest.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import atomic, paths
from ..claims.records import future_problem
from ..estimation import occasion_spread as occasions
from . import identity
from .identity import RunIdentity
from .untrusted import Crate, CrateError, crate_commit, shown


@dataclass(frozen=True)
class CrateRun:
    numbers: dict[str, Any]
    # What is printed of it: file, commit, date and CPU, and its run's ident.
    meta: dict[str, str]
    identity: RunIdentity


def crate_numbers(crate_zip: Path) -> CrateRun:
    """A crate's numbers, what identifies its run (iolab.archive.identity),
    and its file, commit, date and CPU, each as it may be printed."""
    with Crate(crate_zip) as crate:
        problems = crate.problems + crate.checksum_problems()
        if problems:
            raise CrateError(f"{crate_zip}: {len(problems)} problem(s), first: {problems[0]}; see ./repro verify")
        if not crate.has("paper/generated/numbers.json"):
            raise CrateError(f"{crate_zip}: no paper/generated/numbers.json: not an iolab run crate")
        numbers = crate.read_json("paper/generated/numbers.json")
        env = crate.read_json("archive/environment.json") if crate.has("archive/environment.json") else {}
        root = crate.root
        # When and by which commit it was measured, not when it was
        # archived: the run's measurement steps and raw sidecars.
        commits: set[str] = set()
        for name in [f for f in crate.files("data/raw/") if f.endswith(".provenance.json")][:50]:
            sidecar = crate.read_json(name, limit=1 << 20)
            git = sidecar.get("git") if isinstance(sidecar, dict) else None
            if isinstance(git, dict) and isinstance(git.get("commit"), str):
                commits.add(git["commit"][:12])
        started = crate.first_started()
        ident = identity.of_crate(crate, crate_commit(root.get("version", ""), crate_zip), env, numbers)
    if problem := future_problem(started):
        raise CrateError(f"{crate_zip}: {problem}: not evidence of a run")
    nodes = env.get("nodes", {}) if isinstance(env, dict) else {}
    cpus = (
        sorted({shown(f.get("cpu_model"), 80) for f in nodes.values() if isinstance(f, dict)})
        if isinstance(nodes, dict)
        else []
    )
    meta = {
        "crate": shown(crate_zip.name),
        "run": ident.ident,
        "commit": shown(", ".join(sorted(commits)) or root.get("version", ""), 80),
        "date": shown(started or root.get("datePublished", ""), 32),
        "cpu": ", ".join(cpus),
    }
    return CrateRun(numbers if isinstance(numbers, dict) else {}, meta, ident)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m iolab.archive.spread",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = ap.add_subparsers(dest="command", required=True)
    e = sub.add_parser("estimate", help="estimate the between-occasion spread from archived runs")
    e.add_argument("crates", nargs="+", type=Path, help="crates written by ./repro archive, of at least two runs")
    e.add_argument(
        "--output",
        type=Path,
        default=occasions.SHIPPED,
        help=f"where to write it (default {paths.relative(occasions.SHIPPED)}, the estimate in use)",
    )
    e.add_argument(
        "--replace",
        action="store_true",
        help="overwrite the output if it exists (the estimate in use is never replaced unasked)",
    )
    sub.add_parser("show", help="print the estimate in use")
    args = ap.parse_args(argv)
    if args.command == "show":
        occ = occasions.load()
        print(occ.source())
        for g, s in sorted(occ.groups.items()):
            print(
                f"  {g:26} sigma_occasion {s.sigma_occasion:.4f} (95 % upper bound {s.upper:.4f}, {s.df} df)  "
                f"sigma_within {s.sigma_within:.4f}  ({s.quantities} quantities, {s.runs} runs)"
            )
        return 0
    if len(args.crates) < 2:
        print("occasions: give the crates of at least two runs on different occasions", file=sys.stderr)
        return 2
    if args.output.exists() and not args.replace:
        print(
            f"occasions: {paths.relative(args.output)} exists (an estimate in use); pass --replace to overwrite "
            "it, or --output to write elsewhere",
            file=sys.stderr,
        )
        return 2
    try:
        loaded, dropped = identity.distinct([crate_numbers(c) for c in args.crates], lambda r: r.identity)
        for twin, first in dropped:
            print(
                f"occasions: {twin.meta['crate']} is the same run as {first.meta['crate']} "
                f"(run {first.identity.ident}): counted once",
                file=sys.stderr,
            )
        loaded, shared = identity.one_per_launch(loaded, lambda r: r.identity)
        for twin, first in shared:
            print(
                f"occasions: {twin.meta['crate']} was measured on the launch of {first.meta['crate']}: one "
                "launch is one occasion, so only the first of its runs is counted",
                file=sys.stderr,
            )
        if len(loaded) < 2:
            raise ValueError(
                f"the crates hold {len(loaded)} distinct run(s); an estimate needs runs of at least two occasions"
            )
        groups = occasions.estimate([r.numbers for r in loaded])
    except (CrateError, ValueError) as err:
        print(f"occasions: {err}", file=sys.stderr)
        return 1
    runs = [r.meta for r in loaded]
    dates = sorted(r["date"][:10] for r in runs if r["date"])
    doc = {
        "method": occasions.METHOD,
        "estimated": f"{dates[0]} to {dates[-1]}" if dates else "undated",
        "machines": "; ".join(sorted({r["cpu"] for r in runs if r["cpu"]})) or "unrecorded",
        "runs": runs,
        "groups": {g: s.to_json() for g, s in groups.items()},
    }
    atomic.write_json(args.output, doc)
    occasions.load.cache_clear()
    print(
        f"occasions: wrote {paths.relative(args.output)} from {len(runs)} runs: "
        + ", ".join(f"{g} {s.sigma_occasion:.3f} (upper {s.upper:.3f})" for g, s in groups.items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
