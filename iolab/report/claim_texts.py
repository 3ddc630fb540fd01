"""The claims table's words, from the findings: each claim's verdict line,
which outcomes its repetitions can reach, the between-run spread it was
judged with, and what a faithful replication of its source's table would
give here."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .. import claims
from ..claims import faithful
from ..claims.verdicts import ClaimVerdict, Finding, Outcome, claim_verdict
from ..estimation import occasion_spread as occasions

# The claims, in the claims table's order: declared once, with their tests.
CLAIM_IDS = tuple(claims.CLAIM_TESTS)


def claim_verdict_objects(findings: Sequence[Finding]) -> dict[str, ClaimVerdict]:
    """Per claim id with findings: its verdict (outcome, counts, reason)."""
    out = {}
    for claim in CLAIM_IDS:
        parts = [f for f in findings if f.claim == claim]
        if parts:
            out[claim] = claim_verdict(claim, parts, claims.SOURCE_CELLS.get(claim, ()))
    return out


def claim_verdicts(findings: Sequence[Finding], short: bool = False) -> dict[str, str]:
    """Per claim id: its verdict line (iolab.claims.verdicts.ClaimVerdict):
    the outcome, the parts decided and not testable, the source cells
    covered; ``short``: a claim not testable at all gives its first reason
    only, to its first parenthesis (the findings table has them whole)."""
    return {
        claim: f"{v.outcome.value}: {short_reason(v.reason)}"
        if short and v.outcome is Outcome.NOT_TESTABLE
        else v.line()
        for claim, v in claim_verdict_objects(findings).items()
    }


def short_reason(reason: str) -> str:
    """A reason's first clause: up to its first semicolon, without what it
    puts in parentheses."""
    first = reason.split("; ")[0]
    depth, kept = 0, []
    for ch in first:
        depth += ch == "("
        if depth == 0:
            kept.append(ch)
        depth -= ch == ")" and depth > 0
    return " ".join("".join(kept).split()).replace(" ,", ",")


def claims_by_outcome(outcomes: Mapping[str, Outcome]) -> str:
    """The abstract's sentence: every claim under its one outcome."""
    words = {o: [c for c, v in outcomes.items() if v is o] for o in Outcome}
    return "Of the sources' claims, " + "; ".join(f"{o.value}: {', '.join(cs)}" for o, cs in words.items() if cs) + "."


# A part whose rule's margin is this narrow or narrower shows the ratio of
# the two sides' means beside its median of paired ratios: there the two
# estimands can fall on opposite sides of the band.
MEANS_MARGIN = 0.05
ESTIMAND = (
    "Each part estimates the median over repetitions of a per-repetition quantity: for a comparison, "
    "the ratio of the two configurations measured in the same repetition; the table of tested parts in "
    "the appendix shows the ratio of their means over repetitions beside it where the rule's margin is "
    f"{MEANS_MARGIN:.0%} or less."
).replace("%", " %")


def reach_text(claim: str, findings: Sequence[Finding]) -> str:
    """Which outcomes a claim can reach at the run's repetitions, in words
    ("with 6 repetitions U1 can be reproduced or undecided, not 'not
    reproduced'")."""
    parts = [
        f for f in findings if f.claim == claim and not f.context and f.rule is not None and f.estimate is not None
    ]
    if not parts:
        return f"{claim} was not tested here."
    reach_r = all(f.reachable[0] for f in parts)
    reach_n = any(f.reachable[1] for f in parts)
    reps = sorted({f.n0 for f in parts})
    counts = " or ".join(str(n) for n in reps)
    can = ["reproduced"] * reach_r + ["not reproduced"] * reach_n + ["undecided"]
    cannot = ["reproduced"] * (not reach_r) + ["not reproduced"] * (not reach_n)
    text = (
        f"with {counts} repetitions planned in advance, {claim} can be "
        + ", ".join(can[:-1])
        + (" or " if len(can) > 1 else "")
        + can[-1]
    )
    if cannot:
        why = []
        if "not reproduced" in cannot:
            # The part that could refute it soonest; its count exceeds every
            # part's repetitions (else "not reproduced" would be reachable).
            needed = min(f.reps_to_refute for f in parts)
            family = parts[0].family
            why.append(
                f"its {family} parts need {needed} repetitions to refute it"
                if family > 1
                else f"its one part needs {needed} repetitions to refute it"
            )
        text += ", not " + " or ".join(f"\u201c{c}\u201d" for c in cannot) + (f" ({'; '.join(why)})" if why else "")
    return text[0].upper() + text[1:] + "."


def occasions_sentence() -> str:
    """Where the between-occasion spread comes from, and its size, for the
    claims' groups: what plans the launches a verdict about the machine
    kind needs and widens every prediction interval."""
    occ = occasions.load()
    if not occ.groups:
        return (
            "No between-occasion spread is estimated (data/occasions.json is absent): the intervals describe "
            "this run's launch only, and no re-run on another launch is predicted."
        )
    parts = [
        f"{g.removeprefix('claims:').replace(':', ' ')} {s.sigma_occasion:.3f} ({s.df} df)"
        for g, s in sorted(occ.groups.items())
        if g.startswith("claims:")
    ]
    return (
        "The between-occasion spread (log sd) of the claims' quantities, by family and kind: "
        + ("; ".join(parts) if parts else "none estimated")
        + "; it plans how many launches a verdict about the machine kind needs and widens every prediction "
        f"interval, and never moves a verdict's bound; {occ.source()}."
    )


def log_spread(findings: Sequence[Finding]) -> float:
    """The median over parts of the log standard deviation of their
    per-repetition values: the spread between repetitions they show."""
    sds = [
        float(np.std(np.log(f.per_rep), ddof=1))
        for f in findings
        if f.estimate is not None and len(f.per_rep) >= 3 and all(v > 0 and math.isfinite(v) for v in f.per_rep)
    ]
    return float(np.median(sds)) if sds else math.nan


FAITHFUL_GOAL = 0.8


@dataclass(frozen=True)
class Replication:
    """A faithful replication of a claim's source table at this run's spread
    and repetitions: the share of simulated runs that reproduce the claim,
    or why none was simulated (``why``)."""

    claim: str
    share: float | None = None
    reps: int = 0
    spread: float = math.nan
    runs: int = 0
    why: str = ""

    def text(self) -> str:
        if self.share is None:
            return self.why
        text = (
            f"At this run's spread between repetitions (log sd {self.spread:.3f}) and {self.reps} repetitions, a "
            f"faithful replication of the source's own table reproduces {self.claim} in {self.share:.0%} of "
            f"{self.runs} simulated runs"
        )
        if self.share >= FAITHFUL_GOAL:
            return text + "."
        return text + ": a \u201creproduced\u201d cannot be expected from one run at this spread and these repetitions."

    def short(self) -> str:
        """For the machinery table: the share at the repetitions, or why none."""
        if self.share is None:
            return "not simulated"
        return f"{self.share:.0%} at {self.reps} repetitions (log sd {self.spread:.2f})"


def replication(claim: str, findings: Sequence[Finding], runs: int = faithful.RUNS) -> Replication | None:
    """``Replication`` of ``claim``; None for a claim whose source gave no table."""
    if faithful.replications(claim) is None:
        return None
    kind = "echo" if claim.startswith("U") else "cost"
    mine = [f for f in findings if f.claim == claim and not f.context and f.estimate is not None]
    alike = mine or [f for f in findings if f.estimate is not None and f.group.startswith(f"claims:{kind}:")]
    spread = log_spread(alike)
    if not alike:
        why = f"No part of {claim} or its kind was measured, so no replication of its source's table was simulated."
        return Replication(claim, why=why)
    if not math.isfinite(spread):
        most = max(len(f.per_rep) for f in alike)
        return Replication(
            claim,
            why=(
                f"{claim}'s parts have at most {most} repetitions here, too few for a spread between repetitions "
                "(3 are needed), so no replication of its source's table was simulated."
            ),
        )
    reps, b = max(f.n0 for f in alike), alike[0].budget
    share = faithful.reproduce_share(claim, reps, spread, adaptive=b.later > 0, runs=runs)
    assert share is not None
    return Replication(claim, share, reps, spread, runs)


def faithful_text(claim: str, findings: Sequence[Finding], runs: int = faithful.RUNS) -> str:
    """What a faithful replication of the source's own table would give here
    (``Replication.text``); "" for a claim whose source gave no table."""
    r = replication(claim, findings, runs)
    return r.text() if r is not None else ""
