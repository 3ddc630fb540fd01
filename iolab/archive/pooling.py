"""Verdicts pooled across archived runs (iolab.analysis.pooled): the runs in
the store, or crates named on the command line, each counted once.

    python -m iolab.archive.pooling [CRATE.zip ...] [--planned K] [--json OUT]
                                    [--plan] [--run-hours H]          (./repro verdicts ...)

Each crate is checked first (iolab.archive.untrusted). Crates of one run
(iolab.archive.identity) count once, and the command says which it dropped.
By default the runs accumulate (a store over days, looked at again with
every run): the anytime-valid sign test. ``--planned K`` says the study
fixed its K runs in advance (a cluster of K nodes): the exact sign test,
and only once all K are in. ``--plan`` adds the time to a verdict: the
runs each claim needs (80 % power) at where its parts lie and at the
spread between runs, times one run's time on this machine (its last run's
benchmark files, else the runs' own, else ``--run-hours``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import atomic, paths
from ..analysis import occasions, planning, pooled
from ..analysis.verdicts import Outcome
from ..report import artifact
from . import compare, identity, store
from .untrusted import CrateError, shown


@dataclass(frozen=True)
class PooledRun:
    crate: Path
    run: compare.Run

    @property
    def ident(self) -> identity.RunIdentity:
        assert self.run.identity is not None
        return self.run.identity


def findings_of(run: compare.Run) -> list[dict[str, Any]]:
    entry = run.numbers.get("findings")
    rows = entry.get("value") if isinstance(entry, dict) else None
    return [f for f in rows if isinstance(f, dict)] if isinstance(rows, list) else []


def load_runs(crates: Sequence[Path], say: Any = print) -> list[PooledRun]:
    """Each crate checked and read, one per run identity (the first given)."""
    loaded = [PooledRun(c, compare.load(c)) for c in crates]
    kept, dropped = identity.distinct(loaded, lambda r: r.ident)
    for twin, first in dropped:
        say(f"verdicts: {twin.crate.name} is the same run as {first.crate.name}: counted once")
    return kept


def shared_launches(runs: Sequence[tuple[str, Any]]) -> list[tuple[str, list[str]]]:
    """(boot id, runs) for each kernel boot that two or more of ``runs``
    ((ident, archive/environment.json) pairs) measured under; crates from
    before the boot id was recorded name none."""

    def boots(environment: Any) -> list[str]:
        nodes = environment.get("nodes") if isinstance(environment, dict) else None
        found = {n.get("boot_id") for n in nodes.values() if isinstance(n, dict)} if isinstance(nodes, dict) else set()
        return sorted(b for b in found if isinstance(b, str))

    return list(identity.sharing((ident, boot) for ident, environment in runs for boot in boots(environment)).items())


def pool_runs(runs: Sequence[PooledRun], mode: pooled.Mode) -> list[pooled.PooledPart]:
    return pooled.pool(
        [pooled.RunFindings(r.ident.ident, r.run.measured or r.run.published, findings_of(r.run)) for r in runs], mode
    )


def report(runs: Sequence[PooledRun], parts: Sequence[pooled.PooledPart], mode: pooled.Mode) -> list[str]:
    """The verdict of every claim over the runs, then its parts."""
    lines = [
        f"{len(runs)} run(s), each counted once ({'planned' if mode == 'planned' else 'accumulating'}: "
        + (
            "the exact sign test over runs fixed in advance"
            if mode == "planned"
            else "the anytime-valid sign test, valid however often it is looked at"
        )
        + "):"
    ]
    for r in runs:
        lines.append(f"  run {r.ident.ident}: {shown(r.crate.name, 80)}, measured {r.run.measured[:16] or '?'}")
    for boot, idents in shared_launches([(r.ident.ident, r.run.environment) for r in runs]):
        lines.append(
            f"  runs {', '.join(idents)} were measured under one boot of their machine (boot id {shown(boot, 40)}): "
            "occasions of one launch, which share its CPU placement (docs/method.md)"
        )
    differ = compare.key_differences([r.run for r in runs]) if len(runs) > 1 else []
    if differ:
        lines.append(
            f"  the runs differ in {len(differ)} field(s) of their comparison key: {', '.join(differ[:6])}"
            + (", …" if len(differ) > 6 else "")
        )
    return lines + claim_lines(parts, mode)


def claim_lines(parts: Sequence[pooled.PooledPart], mode: pooled.Mode) -> list[str]:
    """Each claim's pooled verdict, then its parts, one line each."""
    lines = [
        f"A part is reproduced from {pooled.runs_to_reach(pooled.ALPHA, mode)} runs on; "
        "a claim of m parts is not reproduced from the runs Holm's alpha/m needs."
    ]
    for claim in sorted({p.claim for p in parts}):
        mine = [p for p in parts if p.claim == claim]
        verdict = pooled.claim_verdict(claim, mine)
        counted = [p for p in mine if not p.context]
        k = max((p.k for p in counted), default=0)
        lines.append(f"{claim}: {verdict.line()}, over {k} run(s)")
        for p in mine:
            why = p.gate.reason() if p.context and p.gate is not None else ""
            mark = f" (context: {why})" if why else " (context)" if p.context else ""
            lines.append(f"  - {shown(p.summary(), 300)}{mark}")
    return lines


def as_json(runs: Sequence[PooledRun], parts: Sequence[pooled.PooledPart], mode: pooled.Mode) -> dict[str, Any]:
    return {
        "mode": mode,
        "runs": [{"run": r.ident.ident, "crate": r.crate.name, "measured": r.run.measured} for r in runs],
        "claims": claims_json(parts),
    }


def claims_json(parts: Sequence[pooled.PooledPart]) -> dict[str, Any]:
    """Each claim's pooled verdict and its parts, as data."""
    claims = sorted({p.claim for p in parts})
    return {
        c: {
            "outcome": pooled.claim_verdict(c, [p for p in parts if p.claim == c]).outcome.value,
            "line": pooled.claim_verdict(c, [p for p in parts if p.claim == c]).line(),
            "parts": [
                {
                    "part": p.part,
                    "outcome": p.outcome.value,
                    "runs": p.k,
                    "median": p.median if p.values else None,
                    "rule": p.rule.text() if p.rule else "",
                    "context": p.context,
                    "summary": p.summary(),
                }
                for p in parts
                if p.claim == c
            ],
        }
        for c in claims
    }


def run_hours(runs: Sequence[PooledRun], given: float | None) -> tuple[float | None, str]:
    """One run's hours on this machine, and where the figure comes from."""
    if given is not None:
        return given, "as given (--run-hours)"
    here = artifact.run_seconds()
    if here is not None:
        return here / 3600, "this checkout's last run (its measurement and notebook jobs)"
    seen = [
        float(v["value"])
        for r in runs
        for v in [r.run.numbers.get("artifact_run_seconds")]
        if isinstance(v, dict) and isinstance(v.get("value"), int | float) and v["value"] > 0
    ]
    if seen:
        seen.sort()
        return seen[len(seen) // 2] / 3600, f"the median of {len(seen)} pooled run(s)' measurement and notebook jobs"
    return None, ""


def run_launches(runs: Sequence[PooledRun]) -> Callable[[str], str]:
    """A run's launch: the kernel boot it shares with another of ``runs``,
    else the run itself."""
    launch = {
        ident: boot
        for boot, idents in shared_launches([(r.ident.ident, r.run.environment) for r in runs])
        for ident in idents
    }
    return lambda run: launch.get(run, run)


def plan_lines(runs: Sequence[PooledRun], parts: Sequence[pooled.PooledPart], given: float | None) -> list[str]:
    return time_to_verdict(parts, *run_hours(runs, given), launch_of=run_launches(runs))


def time_to_verdict(
    parts: Sequence[pooled.PooledPart],
    hours: float | None,
    source: str,
    launch_of: Callable[[str], str] = planning.own_launch,
) -> list[str]:
    """The runs and machine-hours each claim needs, at the spread between
    its parts' runs where they come from enough launches (``launch_of``: a
    run's launch), else at the shipped between-run spread."""
    estimate = occasions.load()
    plans = [
        planning.plan_claim(c, parts, lambda p: estimate.sigma(p.group) if p.group else None, launch_of)
        for c in sorted({p.claim for p in parts})
    ]
    return planning.lines(plans, hours, source)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m iolab.archive.pooling",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("crates", nargs="*", type=Path, help="crates to pool (default: every run in the store)")
    ap.add_argument(
        "--db",
        type=Path,
        default=store.DEFAULT_STORE,
        help=f"the store (default {paths.relative(store.DEFAULT_STORE)})",
    )
    ap.add_argument(
        "--planned",
        type=int,
        metavar="K",
        help="the study fixed K runs in advance: the exact test, once all K are in",
    )
    ap.add_argument("--json", type=Path, help="also write the verdicts as JSON here")
    ap.add_argument("--plan", action="store_true", help="also print the runs and machine-hours each claim needs")
    ap.add_argument(
        "--run-hours", type=float, metavar="H", help="one run's hours on this machine (default: from its last run)"
    )
    args = ap.parse_args(argv)
    crates = list(args.crates)
    if not crates:
        if not args.db.exists():
            print(
                f"verdicts: {paths.relative(args.db)} holds no run: archive runs with ./repro archive, "
                "add crates with ./repro store add, or name crates",
                file=sys.stderr,
            )
            return 1
        crates = [Path(r.path) for r in store.records(args.db)]
    try:
        runs = load_runs(crates, say=lambda s: print(s, file=sys.stderr))
    except (CrateError, OSError, store.StoreError) as e:
        print(f"verdicts: {e}", file=sys.stderr)
        return 1
    mode: pooled.Mode = "planned" if args.planned else "accumulating"
    if args.planned and len(runs) != args.planned:
        print(
            f"verdicts: the study planned {args.planned} runs and {len(runs)} distinct run(s) are here: a planned "
            "test is judged once, on exactly its runs (drop --planned to judge them as they accumulate)",
            file=sys.stderr,
        )
        return 2
    parts = pool_runs(runs, mode)
    print("\n".join(report(runs, parts, mode)))
    if args.plan or args.run_hours is not None:
        if args.run_hours is not None and not args.run_hours > 0:
            print(f"verdicts: --run-hours {args.run_hours}: give a positive number of hours", file=sys.stderr)
            return 2
        print("\n".join(plan_lines(runs, parts, args.run_hours)))
    if args.json:
        atomic.write_json(args.json, as_json(runs, parts, mode))
    decided = sum(
        pooled.claim_verdict(c, [p for p in parts if p.claim == c]).outcome
        in (Outcome.REPRODUCED, Outcome.NOT_REPRODUCED)
        for c in {p.claim for p in parts}
    )
    print(f"verdicts: {decided} claim(s) decided over {len(runs)} run(s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
