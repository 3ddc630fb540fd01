"""What one run contributes to a verdict about the machine, in words: a
claim about a machine is decided across runs (iolab.claims.kind_verdicts), so a
single run's paper says how many runs each claim needs at the spread
between runs, from how far this run's medians lie from their bounds."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..claims import kind_verdicts as pooled
from ..claims.verdicts import Finding
from ..planning.launches import beyond, distance


def part_runs(f: Finding) -> tuple[float, int | None]:
    """(distance, runs needed at 80 % power) of one part, at its group's
    spread between runs."""
    assert f.rule is not None and f.estimate is not None
    d = distance(f.rule, f.estimate.value)
    return d, (pooled.runs_needed(beyond(f.rule, f.estimate.value), f.sigma) if f.sigma is not None else None)


def runs_text(claim: str, findings: Sequence[Finding]) -> str:
    """One sentence: the runs a verdict about the machine needs."""
    parts = [
        f for f in findings if f.claim == claim and not f.context and f.rule is not None and f.estimate is not None
    ]
    if not parts:
        return ""
    sigmas = sorted({round(f.sigma, 3) for f in parts if f.sigma is not None})
    spread = " and ".join(f"{s:g}" for s in sigmas)
    first = pooled.runs_to_reach(pooled.ALPHA, "planned")
    lead = (
        f"Over runs, this run is one of at least {first} that a verdict about this machine needs "
        f"(the sign test over runs, ./repro verdicts)"
    )
    if not any(f.sigma for f in parts):
        return lead + "; no spread between runs is estimated for its parts, so how many more cannot be said."
    # A part whose values are not all positive (a difference) has no
    # relative distance from its bound, and one of a kind with no estimate
    # no count: both are left out.
    each = [(f, d, k) for f in parts if f.sigma for d, k in [part_runs(f)] if math.isfinite(d)]
    if not each:
        return lead + "."
    failing = [(f, d, k) for f, d, k in each if d < 0]
    if failing:
        f, d, k = min(failing, key=lambda x: x[2] if x[2] is not None else pooled.MAX_RUNS + 1)
        said = f"; its part furthest from holding ({f.part.split(' [')[0]}) lies {abs(d):.0%} on the failing side, " + (
            f"so about {k} runs would refute the claim (80 % power"
            if k is not None
            else f"too near its bound for {pooled.MAX_RUNS} runs to refute it ("
        )
    else:
        needs = [k for _, _, k in each]
        worst = max(each, key=lambda x: x[2] if x[2] is not None else pooled.MAX_RUNS + 1)
        said = (
            f"; every part lies on its claim's side, the nearest ({worst[0].part.split(' [')[0]}) "
            f"{worst[1]:.0%} from its bound, "
            + (
                f"so about {max(k for k in needs if k is not None)} runs would reproduce it (80 % power"
                if all(k is not None for k in needs)
                else f"too near for {pooled.MAX_RUNS} runs to reproduce it ("
            )
        )
    return lead + said + f", at a spread between runs of {spread} in log)."
