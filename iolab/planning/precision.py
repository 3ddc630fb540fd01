"""Adaptive precision: add repetitions of only what decides the undecided
verdicts, until every verdict is decided or the time budget is spent.

The workflow runs the configured repetitions (round 0), then asks ``plan``,
through a Snakemake checkpoint (rules/precision.smk), what the next round
should measure. A round adds ``reps_per_round`` repetitions of the
experiments (and, for the echo sweep, only the cells) that feed a finding
that is not yet settled: undecided, or decided with an interval wider than
the target relative half-width. The plan stops when nothing is unsettled,
when what is unsettled needs more repetitions than the remaining rounds can
add (judged from round 1 on, so one extra round has been measured),
when nothing it wants fits in the rest of the budget, or after
``max_rounds``; an experiment too expensive for the rest of the budget is
left out of a round while cheaper ones still fit.
Raw data already measured is never discarded: every round only adds files.

    python -m iolab.planning.precision plan --round K --repeats '{"echo": N, ...}' --precision JSON \
        --output round<K>.json RAW...
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import atomic, readers, tables
from ..claims import evaluate_tables
from ..claims.verdicts import Finding, Outcome
from ..estimation.intervals import MIN_REPS_FOR_CI
from ..provenance import sidecar_for
from ..registry import REGISTRY, claim_experiments
from ..settings import PrecisionSettings

CLAIM_EXPERIMENTS = tuple(claim_experiments())


@dataclass
class Plan:
    round: int
    stop: bool
    reason: str
    unsettled: list[str] = field(default_factory=list)
    # experiment -> {"reps": [...], "cells": [[preset, c, b], ...] (echo only)}
    next: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Experiments an unsettled finding wants that the rest of the budget cannot pay for.
    deferred: list[str] = field(default_factory=list)
    spent_seconds: float = 0.0
    next_seconds: float = 0.0
    budget_seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "stop": self.stop,
            "reason": self.reason,
            "unsettled": self.unsettled,
            "next": self.next,
            "deferred": self.deferred,
            "spent_seconds": round(self.spent_seconds, 1),
            "next_seconds": round(self.next_seconds, 1),
            "budget_seconds": self.budget_seconds,
        }

    def undecided_by_claim(self) -> str:
        """The unsettled parts, counted per claim ("C1: 2, U1: 10"); the plan
        file lists each part."""
        counts: dict[str, int] = {}
        for part in self.unsettled:
            claim = part.split(" ", 1)[0]
            counts[claim] = counts.get(claim, 0) + 1
        return ", ".join(f"{claim}: {n}" if n > 1 else claim for claim, n in counts.items())

    def progress(self) -> str:
        """One line for the terminal: what is undecided, per claim (the
        parts themselves when few), and what the next round measures."""
        head = f"iolab: precision round {self.round}: "
        spent = f"{self.spent_seconds / 60:.1f} of {self.budget_seconds / 60:.0f} min of extra measuring spent"
        parts = ", ".join(self.unsettled) if len(self.unsettled) <= 3 else self.undecided_by_claim()
        if self.stop:
            still = f"; still undecided: {parts}" if self.unsettled else ""
            return head + f"stopping ({self.reason}); {spent}{still}"
        what = ", ".join(f"{e} ({len(v['cells'])} cells)" if "cells" in v else e for e, v in self.next.items())
        left = (
            f"; {', '.join(self.deferred)} left out (its repetitions would overrun the budget)" if self.deferred else ""
        )
        return (
            head + f"{len(self.unsettled)} parts undecided ({parts}); next round adds "
            f"{len(next(iter(self.next.values()))['reps'])} repetitions of {what}, about "
            f"{self.next_seconds / 60:.1f} min; {spent}{left}"
        )


def settled(f: Finding, target: float | None) -> bool:
    """Decided, and (with a target) its interval narrow enough; context
    findings decide no verdict, so they never ask for more repetitions."""
    if f.context or f.outcome in (Outcome.NOT_TESTABLE,):
        return True
    if f.outcome is Outcome.UNDECIDED:
        return False
    return target is None or f.estimate is None or f.estimate.rel_halfwidth <= target


def out_of_reach(f: Finding, round_: int, precision: PrecisionSettings) -> bool:
    """Undecided, and, judged after at least one extra round, needing more
    repetitions than the remaining rounds can add (or more than
    verdicts.MAX_REPS: its estimate sits on the claim's bound); without an
    interval yet (too few repetitions) it is never judged so. Repeating it
    would spend rounds without deciding it."""
    if round_ < 1 or f.outcome is not Outcome.UNDECIDED or len(f.per_rep) < MIN_REPS_FOR_CI:
        return False
    reachable = len(f.per_rep) + (precision.max_rounds - round_) * precision.reps_per_round
    n = f.needed
    return n is None or n > reachable


def wanted(findings: Sequence[Finding], target: float | None) -> dict[str, list[list[Any]]]:
    """experiment -> cells to repeat ([] = the whole experiment), over every
    unsettled finding."""
    out: dict[str, list[list[Any]]] = defaultdict(list)
    for f in findings:
        if settled(f, target):
            continue
        for experiment, cells in f.decides.items():
            for cell in cells:
                if cell not in out[experiment]:
                    out[experiment].append(cell)
            out.setdefault(experiment, [])
    return dict(out)


def _label(f: Finding) -> str:
    return f"{f.claim} {f.part}"


def _round_costs(
    to_repeat: Mapping[str, list[Any]],
    next_reps: Callable[[str], list[int]],
    seconds_per_rep: Mapping[str, float],
    seconds_per_cell: float | None,
) -> list[tuple[float, str, dict[str, Any]]]:
    """(seconds, experiment, what to measure) for each experiment's share of
    a round (``next_reps``: its repetitions): whole repetitions, or for echo
    only its unsettled cells."""
    costed = []
    for experiment, cells in sorted(to_repeat.items()):
        reps = next_reps(experiment)
        if experiment == "echo" and cells and seconds_per_cell is not None:
            costed.append((seconds_per_cell * len(cells) * len(reps), experiment, {"reps": reps, "cells": cells}))
        else:
            costed.append((seconds_per_rep.get(experiment, 0.0) * len(reps), experiment, {"reps": reps}))
    return costed


def plan_round(
    findings: Sequence[Finding],
    *,
    round_: int,
    repeats: int | Mapping[str, int],
    precision: Mapping[str, Any] | PrecisionSettings,
    spent_seconds: float,
    seconds_per_rep: Mapping[str, float],
    seconds_per_cell: float | None,
) -> Plan:
    """Decide what round ``round_ + 1`` measures, if anything.

    ``repeats``: round 0's repetitions (per experiment, or one for all);
    ``seconds_per_rep``: measured seconds of one repetition per experiment;
    ``seconds_per_cell``: of one echo cell (for partial echo repetitions)."""
    precision = PrecisionSettings.of(precision)
    target = precision.target_rel_halfwidth
    per_round = precision.reps_per_round
    budget = float(precision.budget_minutes) * 60
    unsettled = [_label(f) for f in findings if not settled(f, target)]
    plan = Plan(round_, True, "", unsettled, spent_seconds=spent_seconds, budget_seconds=budget)
    if not unsettled:
        plan.reason = "every verdict is decided" + (f" within ±{target:.0%}" if target else "")
        return plan
    if round_ >= precision.max_rounds:
        plan.reason = f"max_rounds ({precision.max_rounds}) reached"
        return plan
    within_reach = [f for f in findings if not out_of_reach(f, round_, precision)]
    if all(settled(f, target) for f in within_reach):
        plan.reason = (
            "the undecided verdicts need more repetitions than the remaining rounds can add "
            "(the claims table gives each one's estimate)"
        )
        return plan
    to_repeat = wanted(within_reach, target)

    def next_reps(experiment: str) -> list[int]:
        n0 = repeats if isinstance(repeats, int) else repeats.get(experiment, max(repeats.values(), default=0))
        first = n0 + round_ * per_round + 1
        return list(range(first, first + per_round))

    # The cheapest go first, so one expensive experiment (MPI, minutes a
    # repetition) that no longer fits the budget does not keep the cheap echo
    # cells and cost probes from being decided.
    costed = _round_costs(to_repeat, next_reps, seconds_per_rep, seconds_per_cell)
    cost = 0.0
    nxt: dict[str, dict[str, Any]] = {}
    for seconds, experiment, what in sorted(costed, key=lambda t: (t[0], t[1])):
        if spent_seconds + cost + seconds > budget:
            plan.deferred.append(experiment)
            continue
        nxt[experiment] = what
        cost += seconds
    if not nxt:
        whole = sum(t[0] for t in costed)
        plan.next_seconds = whole
        plan.reason = f"the next round (about {whole / 60:.1f} min) would overrun the budget of {budget / 60:.0f} min"
        return plan
    plan.next_seconds = cost
    plan.stop, plan.reason, plan.next = False, "unsettled findings remain", nxt
    return plan


def _timings(raw_files: Sequence[Path]) -> tuple[float, dict[str, float], float | None]:
    """Seconds already spent on extra rounds (the repetitions a round added,
    as their sidecars record), mean seconds per repetition of round 0 by
    experiment, and mean seconds per echo cell."""
    spent, per_rep, cell_seconds, cells = 0.0, defaultdict(list), 0.0, 0
    for raw in raw_files:
        side = json.loads(Path(sidecar_for(raw)).read_text())
        seconds = float(side.get("run_seconds", 0.0))
        experiment = side["experiment"]
        if int(side["settings"].get("round", 0)) > 0:
            spent += seconds
        else:
            per_rep[experiment].append(seconds)
        if experiment == "echo":
            n = len(readers.read_echo_csv(raw))
            cell_seconds, cells = cell_seconds + seconds, cells + n
    means = {e: sum(v) / len(v) for e, v in per_rep.items() if v}
    return spent, means, (cell_seconds / cells if cells else None)


def plan_from_raw(
    raw_files: Sequence[Path], *, round_: int, repeats: Mapping[str, int], precision: Mapping[str, Any]
) -> Plan:
    by_experiment: dict[str, list[Path]] = defaultdict(list)
    for raw in raw_files:
        by_experiment[Path(raw).parent.parent.name].append(Path(raw))
    loaded = {
        e: tables.performance_rows(tables.TABLES[e](files))
        for e, files in by_experiment.items()
        if e in CLAIM_EXPERIMENTS
    }
    missing = [e for e in CLAIM_EXPERIMENTS if REGISTRY[e].probe_mode and e not in loaded]
    if missing:
        raise ValueError(f"precision planning needs the cost probes' raw files; missing: {', '.join(missing)}")
    # The verdicts' error budget is the adaptive one from round 0 on: the
    # notebook judges the finished run with it, so a part decided here stays
    # decided there (iolab.claims.evidence).
    findings = evaluate_tables(loaded, anytime_after=min(repeats.values()))
    spent, per_rep, per_cell = _timings(raw_files)
    return plan_round(
        findings,
        round_=round_,
        repeats=repeats,
        precision=precision,
        spent_seconds=spent,
        seconds_per_rep=per_rep,
        seconds_per_cell=per_cell,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m iolab.planning.precision",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("action", choices=["plan"])
    ap.add_argument("--round", type=int, required=True)
    ap.add_argument("--repeats", required=True, help="repetitions of round 0 per experiment, as JSON")
    ap.add_argument("--precision", required=True, help="the config's precision block, as JSON")
    ap.add_argument("--output", type=Path, required=True)
    ap.add_argument("raw", nargs="+", type=Path)
    args = ap.parse_args(argv)
    try:
        plan = plan_from_raw(
            args.raw, round_=args.round, repeats=json.loads(args.repeats), precision=json.loads(args.precision)
        )
    except (ValueError, readers.RawFormatError) as e:
        print(f"iolab: {e}", file=sys.stderr)
        return 1
    print(plan.progress(), file=sys.stderr)
    atomic.write_json(args.output, plan.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
