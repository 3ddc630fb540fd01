"""Three-valued verdicts, decided by the 95 % interval (stated once, here;
the paper's Method section quotes ``RULE_TEXT``).

- reproduced: the whole interval satisfies the claim;
- not reproduced: the whole interval contradicts it;
- undecided at this precision: otherwise. The finding then says how many
  repetitions would be expected to decide it.

"No visible difference" claims are equivalence claims with an explicit
margin, judged by two one-sided tests: reproduced when the whole interval
lies inside the margin, not reproduced when it lies wholly outside.
A claim whose setup this node cannot provide is "not testable here", with
the reason; that is never a "not reproduced".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Literal

import numpy as np

from .stats import MIN_REPS_FOR_CI, Estimate, across_reps, expected_ci

if TYPE_CHECKING:
    import pandas as pd

RULE_TEXT = ("A claim is reproduced when the whole 95 % interval satisfies it, not reproduced "
             "when the whole interval contradicts it, and undecided at this precision otherwise. "
             "Equivalence claims (\u201cno visible difference\u201d) use a margin of \u00b15 % and two "
             "one-sided tests: the interval must lie wholly inside the margin, or wholly outside "
             "it for \u201cnot reproduced\u201d.")
EQUIVALENCE_MARGIN = 0.05
# The most repetitions reps_needed looks ahead; beyond, "more than" this.
MAX_REPS = 200


class Outcome(str, Enum):
    REPRODUCED = "reproduced"
    NOT_REPRODUCED = "not reproduced"
    UNDECIDED = "undecided at this precision"
    NOT_TESTABLE = "not testable here"


@dataclass(frozen=True)
class Rule:
    """What the claim says of a quantity: above or below ``bound``, or
    within ``margin`` (relative) of ``bound``."""

    kind: Literal["above", "below", "within"]
    bound: float
    margin: float = 0.0

    @property
    def band(self) -> tuple[float, float]:
        return self.bound * (1 - self.margin), self.bound * (1 + self.margin)

    def text(self) -> str:
        if self.kind == "above":
            return f"\u2265 {self.bound:g}"
        if self.kind == "below":
            return f"\u2264 {self.bound:g}"
        lo, hi = self.band
        return f"within \u00b1{self.margin * 100:g} % of {self.bound:g} ({lo:g}\u2013{hi:g})"

    def judge(self, low: float, high: float) -> Outcome:
        if self.kind == "above":
            if low >= self.bound:
                return Outcome.REPRODUCED
            return Outcome.NOT_REPRODUCED if high < self.bound else Outcome.UNDECIDED
        if self.kind == "below":
            if high <= self.bound:
                return Outcome.REPRODUCED
            return Outcome.NOT_REPRODUCED if low > self.bound else Outcome.UNDECIDED
        lo, hi = self.band
        if lo <= low and high <= hi:
            return Outcome.REPRODUCED
        return Outcome.NOT_REPRODUCED if high < lo or low > hi else Outcome.UNDECIDED


def reps_needed(per_rep: Sequence[float] | np.ndarray, rule: Rule) -> int | None:
    """The fewest repetitions expected to decide ``rule`` if further ones
    behave like these; None when no count up to MAX_REPS would (the
    estimate sits on the bound) or there are too few values to tell."""
    a = np.asarray(per_rep, dtype=float)
    a = a[~np.isnan(a)]
    if a.size < 2:
        return None
    # More than are at hand: the interval of those at hand did not decide it.
    for n in range(max(MIN_REPS_FOR_CI, a.size + 1), MAX_REPS + 1):
        if rule.judge(*expected_ci(a, n)) is not Outcome.UNDECIDED:
            return n
    return None


@dataclass
class Finding:
    """One testable part of a claim, with everything the claims table shows."""

    claim: str                        # "U1"
    part: str                         # "c=50 128 B, io_uring/epoll requests/s"
    rule: Rule | None = None
    estimate: Estimate | None = None
    per_rep: list[float] = field(default_factory=list)
    quoted: str = ""                  # the source's value, as printed
    reason: str = ""                  # why not testable
    # What would decide it: experiment -> cells to repeat (experiment-specific keys).
    decides: dict[str, list[list[object]]] = field(default_factory=dict)
    # Shown beside the claim's parts (e.g. the same quantity under another
    # condition than the source's) but not counted in the claim's verdict.
    context: bool = False

    @property
    def outcome(self) -> Outcome:
        if self.rule is None or self.estimate is None:
            return Outcome.NOT_TESTABLE
        return self.rule.judge(self.estimate.low, self.estimate.high)

    @property
    def needed(self) -> int | None:
        if self.outcome is not Outcome.UNDECIDED or self.rule is None:
            return None
        return reps_needed(self.per_rep, self.rule)

    def summary(self, digits: int = 3) -> str:
        """One line: verdict, value with interval, and the rule."""
        if self.outcome is Outcome.NOT_TESTABLE:
            return f"{Outcome.NOT_TESTABLE.value}: {self.reason}"
        assert self.estimate is not None and self.rule is not None
        text = f"{self.outcome.value}: {self.part} = {interval_text(self.estimate, digits)}, claim {self.rule.text()}"
        if self.outcome is Outcome.UNDECIDED:
            n = self.needed
            text += (f"; about {n} repetitions would decide it" if n is not None
                     else f"; more than {MAX_REPS} repetitions would be needed")
        return text


def _sig(x: float, digits: int = 3) -> str:
    """``x`` to ``digits`` significant figures, without exponent notation."""
    if not math.isfinite(x):
        return "\u221e" if x > 0 else "\u2212\u221e"
    if x == 0:
        return "0"
    decimals = max(digits - 1 - math.floor(math.log10(abs(x))), 0)
    return f"{x:,.{decimals}f}".replace(",", "\u2009")


def interval_text(est: Estimate, digits: int = 3) -> str:
    """"value [low, high]" to ``digits`` significant figures."""
    if not est.bounded and est.n < MIN_REPS_FOR_CI:
        return f"{_sig(est.value, digits)} (no interval: {est.n} repetitions, {MIN_REPS_FOR_CI} needed)"
    return f"{_sig(est.value, digits)} [{_sig(est.low, digits)}, {_sig(est.high, digits)}]"


def finding(claim: str, part: str, per_rep: Sequence[float] | np.ndarray, rule: Rule,
            quoted: str = "", decides: dict[str, list[list[object]]] | None = None,
            context: bool = False) -> Finding:
    """A finding from per-repetition values of the claim's quantity
    (``context``: shown, not counted in the claim's verdict)."""
    values = [float(v) for v in per_rep if not math.isnan(float(v))]
    if not values:
        return Finding(claim, part, quoted=quoted, reason="nothing was measured for it", context=context)
    return Finding(claim, part, rule, across_reps(values), values, quoted, "", decides or {}, context)


def not_testable(claim: str, part: str, reason: str, quoted: str = "") -> Finding:
    return Finding(claim, part, quoted=quoted, reason=reason)


def table(findings: Sequence[Finding]) -> pd.DataFrame:
    """The findings as a table: claim, part, value [interval], rule, verdict."""
    import pandas as pd

    return pd.DataFrame([{"claim": f.claim, "part": f.part,
                          "ours": interval_text(f.estimate) if f.estimate else "",
                          "quoted": f.quoted, "rule": f.rule.text() if f.rule else "",
                          "verdict": f.outcome.value, "repetitions to decide": f.needed,
                          "reason": f.reason, "counted": not f.context} for f in findings])


def combine(findings: Sequence[Finding]) -> Outcome:
    """A claim of several parts: reproduced when every testable part is, not
    reproduced when any part is not, otherwise undecided; not testable when
    no part is testable. Context findings are not counted."""
    testable = [f.outcome for f in findings if f.outcome is not Outcome.NOT_TESTABLE and not f.context]
    if not testable:
        return Outcome.NOT_TESTABLE
    if Outcome.NOT_REPRODUCED in testable:
        return Outcome.NOT_REPRODUCED
    if all(o is Outcome.REPRODUCED for o in testable):
        return Outcome.REPRODUCED
    return Outcome.UNDECIDED
