"""Verdicts about **this machine kind**, pooled across launches
(iolab.claims.kind_verdicts): the runs in the store or crates named on the
command line, and the records of earlier runs (data/records/), each run
counted once and grouped by its launch.

    python -m iolab.archive.pooling [CRATE.zip ...] [--records DIR | --no-records]
                                    [--planned K] [--json OUT] [--plan] [--run-hours H]
                                    (./repro verdicts ...)

Each crate is checked first (iolab.archive.untrusted), each record too
(iolab.claims.records); copies of one run count once, and the command
says which it dropped. A record whose crate is here is checked against it
(its crate's SHA-256 and its findings) and left out, said, where they
disagree. Runs are judged per machine kind (iolab.claims.records.
machine_kind): a verdict about one kind never counts another's launches.
Every part is judged by this checkout's claims, never by a rule a crate or
a record carries. By default the launches accumulate (records over days,
looked at again with every run): the anytime-valid sign test. ``--planned
K`` says the study fixed its K launches in advance (a cluster of K nodes):
the exact sign test, and only once all K are in. ``--plan`` adds the time
to a verdict: the launches each claim still needs (80 % power) at where
its parts lie and at the spread between launches, times one launch's time
(the short ``claims`` overlay's where records give it, else this
checkout's last run, else ``--run-hours``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import atomic, claims, paths
from ..claims import kind_verdicts as pooled
from ..claims import records
from ..claims.records import RunIdentity
from ..claims.verdicts import Outcome
from ..estimation import occasion_spread as occasions
from ..planning import launches as planning
from ..readers import sha256
from ..report import artifact
from . import compare, identity, store
from .recording import findings_of
from .untrusted import CrateError, shown

# The overlay that measures only what the claims read: what a launch costs.
SHORT_OVERLAY = "claims"


@dataclass(frozen=True)
class PooledRun:
    """A crate's run, checked and read."""

    crate: Path
    run: compare.Run

    @property
    def ident(self) -> RunIdentity:
        assert self.run.identity is not None
        return self.run.identity


@dataclass(frozen=True)
class Evidence:
    """One run pooled: from its crate, or from its record alone."""

    source: str  # the crate's or the record's file name
    identity: RunIdentity
    machine: str
    measured: str
    findings: Sequence[dict[str, Any]]
    run: compare.Run | None = None  # the crate's run, where there is a crate
    overlay: str = ""
    run_seconds: float | None = None
    kind: str = field(default="crate")  # "crate" or "record"

    @property
    def launch(self) -> str:
        return self.identity.launch


def load_runs(crates: Sequence[Path], say: Any = print) -> list[PooledRun]:
    """Each crate checked and read, one per run identity (the first given)."""
    loaded = [PooledRun(c, compare.load(c)) for c in crates]
    kept, dropped = identity.distinct(loaded, lambda r: r.ident)
    for twin, first in dropped:
        say(f"verdicts: {twin.crate.name} is the same run as {first.crate.name}: counted once")
    return kept


def of_crate(r: PooledRun) -> Evidence:
    nodes = r.run.environment.get("nodes")
    seconds = r.run.numbers.get("artifact_run_seconds")
    value = seconds.get("value") if isinstance(seconds, dict) else None
    return Evidence(
        r.crate.name,
        r.ident,
        records.machine_kind(nodes if isinstance(nodes, dict) else {}),
        r.run.measured or r.run.published,
        findings_of(r.run),
        r.run,
        run_seconds=float(value) if isinstance(value, int | float) and value > 0 else None,
    )


def of_record(rec: records.RunRecord, name: str) -> Evidence:
    return Evidence(
        name,
        rec.identity,
        rec.machine,
        rec.identity.first_start,
        list(rec.findings),
        None,
        rec.overlay,
        rec.run_seconds,
        "record",
    )


def gather(crates: Sequence[Path], record_dir: Path | None, say: Callable[[str], None] = print) -> list[Evidence]:
    """The crates' runs and the records', each run once: a record of a run
    whose crate is here is checked against that crate; one that disagrees
    with it is left out, said."""
    runs = load_runs(crates, say=say)
    for r in runs:
        if r.run.left_out:
            say(f"verdicts: {r.crate.name}: {r.run.left_out}")
    out = [of_crate(r) for r in runs]
    digests = {r.crate.name: sha256(r.crate) for r in runs}
    if record_dir is None:
        return out
    for path in sorted(record_dir.glob(f"*{records.SUFFIX}")) if record_dir.is_dir() else []:
        try:
            rec = records.read(path, claims.CLAIM_TESTS)
        except records.RecordError as e:
            say(f"verdicts: record {e}: left out")
            continue
        twin = next((e for e in out if e.identity.same_run(rec.identity)), None)
        if twin is None:
            out.append(of_record(rec, path.name))
            continue
        if twin.kind == "crate" and (
            (rec.crate_sha256 and rec.crate_sha256 != digests[twin.source])
            or (rec.identity.findings != twin.identity.findings)
        ):
            say(f"verdicts: record {path.name} does not match its run's crate {twin.source}: the record is left out")
        elif twin.kind == "record":
            say(f"verdicts: record {path.name} is the same run as record {twin.source}: counted once")
    return out


def by_machine(evidence: Sequence[Evidence]) -> list[tuple[str, list[Evidence]]]:
    """The runs grouped by machine kind, the kind with the most launches first."""
    groups: dict[str, list[Evidence]] = {}
    for e in evidence:
        groups.setdefault(e.machine, []).append(e)

    def launches(es: Sequence[Evidence]) -> int:
        return len({e.launch or e.identity.ident for e in es})

    return sorted(groups.items(), key=lambda kv: (-launches(kv[1]), kv[0]))


def pool_evidence(evidence: Sequence[Evidence], mode: pooled.Mode) -> list[pooled.PooledPart]:
    return pooled.pool([pooled.RunFindings(e.identity.ident, e.measured, e.findings, e.launch) for e in evidence], mode)


def pool_runs(runs: Sequence[PooledRun], mode: pooled.Mode) -> list[pooled.PooledPart]:
    return pool_evidence([of_crate(r) for r in runs], mode)


def report(
    machine: str, evidence: Sequence[Evidence], parts: Sequence[pooled.PooledPart], mode: pooled.Mode
) -> list[str]:
    """The verdict of every claim over one machine kind's launches, then its parts."""
    launches = {e.launch or e.identity.ident for e in evidence}
    lines = [
        f"This machine kind ({shown(machine, 120)}): {len(evidence)} run(s) on {len(launches)} launch(es), each run "
        f"counted once, a launch's runs as one value ({'planned' if mode == 'planned' else 'accumulating'}: "
        + (
            "the exact sign test over launches fixed in advance"
            if mode == "planned"
            else "the anytime-valid sign test, valid however often it is looked at"
        )
        + "):"
    ]
    for e in sorted(evidence, key=lambda e: (e.measured, e.identity.ident)):
        lines.append(
            f"  run {e.identity.ident}: {e.kind} {shown(e.source, 80)}, measured {e.measured[:16] or '?'}, "
            f"launch {shown(e.launch[:8], 12) or 'unknown'}"
        )
    with_runs = [e.run for e in evidence if e.run is not None]
    differ = compare.key_differences(with_runs) if len(with_runs) > 1 else []
    if differ:
        lines.append(
            f"  the crates differ in {len(differ)} field(s) of their comparison key: {', '.join(differ[:6])}"
            + (", …" if len(differ) > 6 else "")
        )
    return lines + claim_lines(parts, mode, machine_verdicts(evidence))


def machine_verdicts(evidence: Sequence[Evidence]) -> dict[str, str]:
    """Per claim: the runs' verdicts about their own machines, counted by
    outcome ("undecided at this precision in 3 runs, reproduced in 1"),
    each run judged again from its repetitions by this checkout's rules."""
    counts: dict[str, dict[str, int]] = {}
    for e in evidence:
        for claim, outcome in pooled.run_verdicts(e.findings).items():
            by = counts.setdefault(claim, {})
            by[outcome.value] = by.get(outcome.value, 0) + 1
    return {
        claim: ", ".join(f"{o} in {n} run{'s' if n != 1 else ''}" for o, n in sorted(by.items(), key=lambda x: -x[1]))
        for claim, by in counts.items()
    }


def claim_lines(
    parts: Sequence[pooled.PooledPart], mode: pooled.Mode, machines: dict[str, str] | None = None
) -> list[str]:
    """Each claim's pooled verdict (and, given ``machines``, its runs'
    verdicts about their own machines), then its parts, one line each."""
    lines = [
        f"A part is reproduced from {pooled.runs_to_reach(pooled.ALPHA, mode)} launches on; "
        "a claim of m parts is not reproduced from the launches Holm's alpha/m needs."
    ]
    for claim in sorted({p.claim for p in parts}):
        mine = [p for p in parts if p.claim == claim]
        verdict = pooled.claim_verdict(claim, mine)
        counted = [p for p in mine if not p.context]
        k = max((p.k for p in counted), default=0)
        each = f"; this machine, run by run: {machines[claim]}" if machines and claim in machines else ""
        lines.append(f"{claim}: this machine kind: {verdict.line()}, over {k} launch(es){each}")
        for p in mine:
            why = p.gate.reason() if p.context and p.gate is not None else ""
            mark = f" (context: {why})" if why else " (context)" if p.context else ""
            lines.append(f"  - {shown(p.summary(), 300)}{mark}")
    return lines


def as_json(
    groups: Sequence[tuple[str, Sequence[Evidence], Sequence[pooled.PooledPart]]], mode: pooled.Mode
) -> dict[str, Any]:
    return {
        "mode": mode,
        "machine_kinds": [
            {
                "machine": machine,
                "runs": [
                    {
                        "run": e.identity.ident,
                        "source": e.source,
                        "kind": e.kind,
                        "measured": e.measured,
                        "launch": e.launch,
                    }
                    for e in evidence
                ],
                "launches": len({e.launch or e.identity.ident for e in evidence}),
                "claims": claims_json(parts),
            }
            for machine, evidence, parts in groups
        ],
    }


def claims_json(parts: Sequence[pooled.PooledPart]) -> dict[str, Any]:
    """Each claim's pooled verdict and its parts, as data."""
    out: dict[str, Any] = {}
    for c in sorted({p.claim for p in parts}):
        verdict = pooled.claim_verdict(c, [p for p in parts if p.claim == c])
        out[c] = {
            "outcome": verdict.outcome.value,
            "line": verdict.line(),
            "parts": [
                {
                    "part": p.part,
                    "outcome": p.outcome.value,
                    "launches": p.k,
                    "runs": p.runs,
                    "median": p.median if p.values else None,
                    "rule": p.rule.text() if p.rule else "",
                    "context": p.context,
                    "summary": p.summary(),
                }
                for p in parts
                if p.claim == c
            ],
        }
    return out


def run_hours(evidence: Sequence[Evidence], given: float | None) -> tuple[float | None, str]:
    """One launch's hours, and where the figure comes from: as given; the
    short overlay's runs where records give their time; this checkout's
    last run; else the pooled runs' own."""
    if given is not None:
        return given, "as given (--run-hours)"
    short = sorted(e.run_seconds for e in evidence if e.overlay == SHORT_OVERLAY and e.run_seconds)
    if short:
        return statistics.median(short) / 3600, f"the median of {len(short)} run(s) of the {SHORT_OVERLAY} overlay"
    here = artifact.run_seconds()
    if here is not None:
        return here / 3600, "this checkout's last run (its measurement and notebook jobs)"
    seen = sorted(e.run_seconds for e in evidence if e.run_seconds)
    if seen:
        return statistics.median(seen) / 3600, f"the median of {len(seen)} pooled run(s)' measurement and notebook jobs"
    return None, ""


def time_to_verdict(parts: Sequence[pooled.PooledPart], hours: float | None, source: str) -> list[str]:
    """The launches and machine-hours each claim still needs, at the spread
    between its parts' launches where they come from enough of them, else
    at the shipped between-occasion spread."""
    estimate = occasions.load()
    plans = [
        planning.plan_claim(c, parts, lambda p: estimate.sigma(p.group) if p.group else None)
        for c in sorted({p.claim for p in parts})
    ]
    return planning.lines(plans, hours, source)


# What ``./repro verdicts --help`` tells a user (the module's docstring
# is for its maintainers).
HELP = """\
Verdicts about this machine kind, pooled over launches: the runs in the
store, or the crates named, and the records of earlier runs in
data/records/. Each run counts once however it is copied; runs are
grouped by their launch (boot) and judged per machine kind, every part
by this checkout's claims.

By default launches accumulate over days and the anytime-valid sign test
decides. --planned K fixes K launches in advance: the exact sign test,
once all K are in. --plan adds what each claim still needs: the launches
at 80 % power and the machine-hours they take.
"""


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m iolab.archive.pooling",
        description=HELP,
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
        "--records",
        type=Path,
        default=records.DIRECTORY,
        help=f"the records of earlier runs to pool too (default {paths.relative(records.DIRECTORY)})",
    )
    ap.add_argument("--no-records", action="store_true", help="pool the crates alone")
    ap.add_argument(
        "--planned",
        type=int,
        metavar="K",
        help="the study fixed K launches in advance: the exact test, once all K are in",
    )
    ap.add_argument("--json", type=Path, help="also write the verdicts as JSON here")
    ap.add_argument("--plan", action="store_true", help="also print the launches and machine-hours each claim needs")
    ap.add_argument(
        "--run-hours", type=float, metavar="H", help="one launch's hours (default: the claims overlay's, from records)"
    )
    args = ap.parse_args(argv)
    if args.run_hours is not None and not args.run_hours > 0:
        print(f"verdicts: --run-hours {args.run_hours}: give a positive number of hours", file=sys.stderr)
        return 2
    crates = list(args.crates)
    if not crates and args.db.exists():
        crates = [Path(r.path) for r in store.records(args.db)]
    try:
        evidence = gather(crates, None if args.no_records else args.records, say=lambda s: print(s, file=sys.stderr))
    except (CrateError, OSError, store.StoreError) as e:
        print(f"verdicts: {e}", file=sys.stderr)
        return 1
    if not evidence:
        print(
            "verdicts: no run to pool: archive runs with ./repro archive (which also writes their records), "
            "add crates with ./repro store add, or name crates",
            file=sys.stderr,
        )
        return 1
    mode: pooled.Mode = "planned" if args.planned else "accumulating"
    groups = []
    for machine, mine in by_machine(evidence):
        launches = len({e.launch or e.identity.ident for e in mine})
        if args.planned and launches != args.planned:
            print(
                f"verdicts: the study planned {args.planned} launches and {launches} distinct launch(es) of "
                f"{shown(machine, 80)} are here: a planned test is judged once, on exactly its launches "
                "(drop --planned to judge them as they accumulate)",
                file=sys.stderr,
            )
            return 2
        parts = pool_evidence(mine, mode)
        groups.append((machine, mine, parts))
        print("\n".join(report(machine, mine, parts, mode)))
        if args.plan or args.run_hours is not None:
            print("\n".join(time_to_verdict(parts, *run_hours(mine, args.run_hours))))
    if args.json:
        atomic.write_json(args.json, as_json(groups, mode))
    for machine, mine, parts in groups:
        decided = sum(
            pooled.claim_verdict(c, [p for p in parts if p.claim == c]).outcome
            in (Outcome.REPRODUCED, Outcome.NOT_REPRODUCED)
            for c in {p.claim for p in parts}
        )
        launches = len({e.launch or e.identity.ident for e in mine})
        print(
            f"verdicts: {decided} claim(s) decided over {launches} launch(es) of {shown(machine, 80)}", file=sys.stderr
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
