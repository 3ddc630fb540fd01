"""Time to a verdict about the machine kind: how many launches each claim
needs to be decided over launches (the exact sign test, 80 % power), at
the spread between launches, from where its parts' medians lie, how many
of those are still to come, and what they cost in machine-hours at one
launch's measured time.

A part's distance from its bound is its median over the launches pooled so
far (one launch: its median); its spread is the sd of the launches'
medians in log where at least ``MIN_RUNS_FOR_SD`` launches hold them, else
the between-occasion estimate of its quantity group (data/occasions.json).
Runs of one launch share its occasion (its CPU placement), so they count as
one launch and their spread says nothing of the spread between launches. A
claim is reproduced when every counted part is, so it needs the most
launches any of them needs; it is refuted by its part furthest on the
failing side, at Holm's alpha over its parts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..claims.kind_verdicts import ALPHA, MAX_RUNS, PooledPart, runs_needed
from ..claims.verdicts import Rule

# Below this many launches the sd of their medians is too rough to plan on
# (2 degrees of freedom leave its 90 % interval a factor of 4.4 wide).
MIN_RUNS_FOR_SD = 4


def distance(rule: Rule, value: float) -> float:
    """How far (relative) ``value`` lies beyond ``rule``'s bound on the
    claim's side (> 0: it holds there; < 0: it fails by as much). A band
    counts from its nearer edge."""
    if not (math.isfinite(value) and value > 0):
        return math.nan
    if rule.kind == "above":
        return value / rule.bound - 1
    if rule.kind == "below":
        return rule.bound / value - 1
    lo, hi = rule.band
    return min(value / lo, hi / value) - 1


def beyond(rule: Rule, value: float) -> float:
    """The relative distance the sign test's power depends on: how far
    ``value`` lies from ``rule``'s bound in log, as a relative step (0.8
    against a floor of 1 lies 25 % below it, as 1.25 lies 25 % above)."""
    d = distance(rule, value)
    if not math.isfinite(d):
        return math.nan
    return d if d >= 0 else 1 / (1 + d) - 1


@dataclass(frozen=True)
class PartPlan:
    part: PooledPart
    distance: float
    sigma: float | None
    sigma_from: str  # "launches", "estimate", "sides" (every launch on one side, no distance) or "" (unknown)
    runs: int | None  # launches needed in all; None: beyond MAX_RUNS, or no spread known


@dataclass(frozen=True)
class ClaimPlan:
    claim: str
    parts: list[PartPlan]
    direction: str  # "reproduce" or "refute" or "" (no part can be planned)
    runs: int | None
    untested: int = 0  # counted parts no run measured: reproduced, the claim stays incomplete
    have: int = 0  # the launches its parts already hold

    @property
    def still(self) -> int | None:
        """The launches still to come."""
        return None if self.runs is None else max(self.runs - self.have, 0)

    def hours(self, run_hours: float | None) -> float | None:
        return self.still * run_hours if self.still is not None and run_hours is not None else None


def run_spread(part: PooledPart) -> float | None:
    """The sd of the log of the launches' medians, where enough launches
    hold them."""
    values = np.asarray([v.value for v in part.launches], dtype=float)
    if values.size < MIN_RUNS_FOR_SD or not np.all(values > 0):
        return None
    return float(np.std(np.log(values), ddof=1))


def one_sided(part: PooledPart, family: int) -> PartPlan | None:
    """A part whose median has no relative distance (a count that is zero
    in every run, say) but whose runs all lie on one side of its bound:
    the sign test needs its fewest runs, whatever the spread, as long as
    runs keep landing there (a plan, not a promise)."""
    assert part.rule is not None
    sides = {part.rule.leaning(v.value) for v in part.launches}
    if len(sides) != 1:
        return None
    holds = sides == {"towards reproduced"}
    level = ALPHA if holds else ALPHA / family
    k = next(n for n in range(1, MAX_RUNS + 1) if 2.0**-n <= level)
    return PartPlan(part, math.inf if holds else -math.inf, None, "sides", k)


def plan_part(part: PooledPart, estimate: Callable[[PooledPart], float | None], family: int) -> PartPlan:
    assert part.rule is not None
    d = distance(part.rule, part.median)
    if not math.isfinite(d) and (plan := one_sided(part, family)) is not None:
        return plan
    sigma, source = run_spread(part), "launches"
    if sigma is None:
        sigma, source = estimate(part), "estimate"
    if sigma is None or not math.isfinite(d):
        return PartPlan(part, d, sigma, source if sigma is not None else "", None)
    level = ALPHA if d > 0 else ALPHA / family
    return PartPlan(part, d, sigma, source, runs_needed(beyond(part.rule, part.median), sigma, level))


def plan_claim(claim: str, parts: Sequence[PooledPart], estimate: Callable[[PooledPart], float | None]) -> ClaimPlan:
    mine = [p for p in parts if p.claim == claim and not p.context]
    counted = [p for p in mine if p.rule is not None and p.values]
    untested = len(mine) - len(counted)
    have = min((p.k for p in counted), default=0)
    plans = [plan_part(p, estimate, len(counted)) for p in counted]
    failing = [p for p in plans if not math.isnan(p.distance) and p.distance < 0]
    if failing:
        # The claim falls with its first refuted part: the one needing fewest launches.
        known = [p.runs for p in failing if p.runs is not None]
        return ClaimPlan(claim, plans, "refute", min(known) if known else None, untested, have)
    holding = [p for p in plans if not math.isnan(p.distance)]
    if not holding:
        return ClaimPlan(claim, plans, "", None, untested, have)
    needs = [p.runs for p in holding if p.runs is not None]
    runs = max(needs) if len(needs) == len(holding) else None
    return ClaimPlan(claim, plans, "reproduce", runs, untested, have)


def lines(plans: Sequence[ClaimPlan], run_hours: float | None, hours_from: str) -> list[str]:
    """The planner's report: per claim, the launches it needs, how many are
    still to come and their machine-hours; then every testable claim
    together (one launch measures them all, so the study needs the most any
    claim needs)."""
    out = [
        "Time to a verdict about the machine kind (planned launches, the exact sign test, 80 % power, at where "
        "the parts' medians lie now"
        + (
            f"; one launch = {run_hours:.2f} h, {hours_from}"
            if run_hours is not None
            else "; one launch's time unknown"
        )
        + "):"
    ]
    for c in plans:
        if not c.parts:
            continue
        if not c.direction:
            out.append(f"{c.claim}: no part has a median that can be placed against its bound")
            continue
        # The part that sets the count: the fewest launches among the failing
        # parts (refute), the most among the holding ones (reproduce).
        side_parts = [
            p for p in c.parts if not math.isnan(p.distance) and (p.distance < 0) == (c.direction == "refute")
        ]
        runs_of = [p.runs if p.runs is not None else MAX_RUNS + 1 for p in side_parts]
        pick = min if c.direction == "refute" else max
        worst = side_parts[runs_of.index(pick(runs_of))]
        side = "failing" if worst.distance < 0 else "holding"
        name = worst.part.part.split(" [")[0]
        if worst.sigma_from == "sides":
            where = f"every launch of its part {name!r} lies on the {side} side, at a median of {worst.part.median:.3g}"
        else:
            spread = (
                f"spread {worst.sigma:.3f} from the launches' medians"
                if worst.sigma_from == "launches"
                else f"spread {worst.sigma:.3f} from the occasion estimate"
                if worst.sigma is not None
                else "no spread known for its quantity"
            )
            where = f"its part {name!r} lies {abs(worst.distance):.0%} on the {side} side, {spread}"
        if c.runs is None:
            out.append(f"{c.claim}: to {c.direction}, more than {MAX_RUNS} launches or unknown ({where})")
        else:
            h = c.hours(run_hours)
            cost = f" = {h:.1f} machine-hours" if h is not None else ""
            left = (
                f"; {c.untested} more part(s) are not testable here, so reproduced it stays incomplete"
                if c.untested and c.direction == "reproduce"
                else ""
            )
            out.append(
                f"{c.claim}: to {c.direction}, about {c.runs} launches, {c.have} held, {c.still} still to come"
                f"{cost} ({where}){left}"
            )
    finite = [c for c in plans if c.runs is not None and c.still is not None]
    beyond = [c.claim for c in plans if c.parts and c.runs is None]
    if finite:
        k = max(c.still for c in finite if c.still is not None)
        total = f" = {k * run_hours:.1f} machine-hours" if run_hours is not None else ""
        out.append(
            f"Every claim with a finite count: {k} more launch(es){total}"
            + (f"; out of reach or unknown: {', '.join(beyond)}" if beyond else "")
        )
    elif beyond:
        out.append(f"No claim can be planned to a verdict within {MAX_RUNS} launches: {', '.join(beyond)}")
    return out
