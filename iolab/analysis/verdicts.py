"""Three-valued verdicts, decided by the 95 % interval, with the error of
each claim's verdict controlled (stated once, here; the paper's Method
section quotes ``RULE_TEXT`` and ``ERROR_TEXT``).

- reproduced: the whole interval satisfies the claim;
- not reproduced: the whole interval contradicts it;
- undecided at this precision: otherwise. The finding then says how many
  repetitions would be expected to decide it.

"No visible difference" claims are equivalence claims with an explicit
margin, judged by two one-sided tests: reproduced when the whole interval
lies inside the margin, not reproduced when it lies wholly outside.
A claim whose setup this node cannot provide is "not testable here", with
the reason; that is never a "not reproduced".

Error control. Each part is decided at 2.5 % each way (its 95 % interval).
A claim is reproduced only when every part is (an intersection-union test:
no adjustment is needed for that direction), and not reproduced when any
part is, so that direction is adjusted over the claim's parts with Holm's
step-down procedure: a part whose interval alone contradicts the claim is
"not reproduced" only if its Holm-adjusted p-value (the sign test behind
the interval) is at most 2.5 %. Where adaptive precision chose how many
repetitions to take after looking at the data, the intervals are
anytime-valid confidence sequences (iolab.analysis.stats), with round 0's
fixed-sample level spent first: whatever the rounds did, each claim's
verdict is wrong at most 2.5 % of the time in either direction.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Literal

import numpy as np

from .stats import (CONFIDENCE, MIN_REPS_FOR_CI, Estimate, across_reps, confidence_sequence, expected_cis,
                    fixed_side_alpha, sign_p)

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
# Each way, per claim: a wrong "reproduced", or a wrong "not reproduced".
ALPHA_SIDE = (1 - CONFIDENCE) / 2
ERROR_TEXT = ("Each part is decided by its 95 % interval; a claim is not reproduced only when a part "
              "contradicts it after Holm's adjustment over the claim's parts, so each claim's verdict is "
              "wrong at most 2.5 % of the time in either direction. Where adaptive precision added "
              "repetitions after looking at the data, the intervals are anytime-valid confidence "
              "sequences for the median, which keep that guarantee however many rounds were looked at.")


def anytime_side_alpha(round0_reps: int) -> float:
    """The level left for the confidence sequences of later rounds after
    round 0's fixed-sample look (of ``round0_reps`` repetitions) spent its
    own: together at most ALPHA_SIDE each way."""
    return ALPHA_SIDE - fixed_side_alpha(round0_reps)


class Outcome(str, Enum):
    REPRODUCED = "reproduced"
    NOT_REPRODUCED = "not reproduced"
    UNDECIDED = "undecided at this precision"
    NOT_TESTABLE = "not testable here"
    # A claim (never a part) whose every testable part is reproduced while
    # others could not be tested here: it is not "reproduced", because a
    # claim is reproduced only when every part its source states was tested.
    INCOMPLETE = "reproduced where testable, not testable in part"


@dataclass(frozen=True)
class Rule:
    """What the claim says of a quantity: above or below ``bound``, or
    within ``margin`` (relative) of ``bound``; ``why`` states the practical
    margin: which difference would change the source's conclusion."""

    kind: Literal["above", "below", "within"]
    bound: float
    margin: float = 0.0
    why: str = ""

    @property
    def band(self) -> tuple[float, float]:
        return self.bound * (1 - self.margin), self.bound * (1 + self.margin)

    def text(self) -> str:
        """The rule to 3 significant figures."""
        if self.kind == "above":
            return f"\u2265 {_sig(self.bound)}"
        if self.kind == "below":
            return f"\u2264 {_sig(self.bound)}"
        lo, hi = self.band
        return f"within \u00b1{self.margin * 100:g} % of {_sig(self.bound)} ({_sig(lo)}\u2013{_sig(hi)})"

    def leaning(self, value: float) -> str:
        """Which way an undecided part's median points."""
        holds = (value >= self.bound if self.kind == "above" else value <= self.bound if self.kind == "below"
                 else self.band[0] <= value <= self.band[1])
        return "towards reproduced" if holds else "towards not reproduced"

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


def reps_needed(per_rep: Sequence[float] | np.ndarray, rule: Rule, *, anytime: bool = False,
                alpha_side: float = ALPHA_SIDE, family: int = 1) -> int | None:
    """The fewest repetitions expected to decide ``rule`` if further ones
    behave like these (``anytime``: with a confidence sequence at
    ``alpha_side``; a "not reproduced" must also survive the adjustment over
    a ``family`` of parts, taken at alpha_side / family); None when no count
    up to MAX_REPS would (the estimate sits on the bound) or there are too
    few values to tell."""
    a = np.asarray(per_rep, dtype=float)
    a = a[~np.isnan(a)]
    if a.size < 2:
        return None
    # More than are at hand: the interval of those at hand did not decide it.
    # In chunks, most parts decide within a few more.
    first = max(MIN_REPS_FOR_CI, a.size + 1)
    for start in range(first, MAX_REPS + 1, 16):
        ns = np.arange(start, min(start + 16, MAX_REPS + 1))
        lenient = expected_cis(a, ns, 1 - 2 * alpha_side, anytime)
        strict = expected_cis(a, ns, 1 - 2 * alpha_side / family, anytime)
        for n, (lo, hi), (slo, shi) in zip(ns, lenient, strict, strict=True):
            if rule.judge(lo, hi) is Outcome.REPRODUCED or rule.judge(slo, shi) is Outcome.NOT_REPRODUCED:
                return int(n)
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
    # The source's table cell this part tests ("c=50 128 B"), for coverage.
    cell: str = ""
    # Error control: the interval is a confidence sequence (``anytime``) at
    # ``alpha_side`` each way; the p-value against the claim adjusted over
    # the claim's ``family`` of counted parts (None: not adjusted).
    anytime: bool = False
    alpha_side: float = ALPHA_SIDE
    p_fails_adjusted: float | None = None
    family: int = 1

    @property
    def interval_outcome(self) -> Outcome:
        """What the part's interval alone says."""
        if self.rule is None or self.estimate is None:
            return Outcome.NOT_TESTABLE
        return self.rule.judge(self.estimate.low, self.estimate.high)

    @property
    def outcome(self) -> Outcome:
        """The interval's verdict, a "not reproduced" kept only where it
        survives the adjustment over the claim's parts."""
        o = self.interval_outcome
        if o is Outcome.NOT_REPRODUCED and self.p_fails_adjusted is not None \
                and self.p_fails_adjusted > self.alpha_side:
            return Outcome.UNDECIDED
        return o

    @property
    def held_back(self) -> bool:
        """Its interval contradicts the claim, but not after the adjustment."""
        return self.interval_outcome is Outcome.NOT_REPRODUCED and self.outcome is Outcome.UNDECIDED

    def p_fails(self) -> float:
        """The sign test's p-value against the claim holding for this part
        (the evidence its interval wholly contradicts it rests on)."""
        assert self.rule is not None
        r, v, anytime = self.rule, self.per_rep, self.anytime
        if r.kind == "above":
            return sign_p(v, "below", r.bound, anytime)
        if r.kind == "below":
            return sign_p(v, "above", r.bound, anytime)
        lo, hi = r.band
        return min(sign_p(v, "below", lo, anytime), sign_p(v, "above", hi, anytime))

    @property
    def needed(self) -> int | None:
        if self.outcome is not Outcome.UNDECIDED or self.rule is None:
            return None
        return reps_needed(self.per_rep, self.rule, anytime=self.anytime, alpha_side=self.alpha_side,
                           family=self.family)

    def summary(self, digits: int = 3) -> str:
        """One line: verdict, value with interval, and the rule."""
        if self.outcome is Outcome.NOT_TESTABLE:
            return f"{Outcome.NOT_TESTABLE.value}: {self.reason}"
        assert self.estimate is not None and self.rule is not None
        text = f"{self.outcome.value}: {self.part} = {interval_text(self.estimate, digits)}, claim {self.rule.text()}"
        if self.held_back:
            text += (f"; its interval contradicts the claim, but not after the adjustment over the "
                     f"claim's {self.family} parts")
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
            context: bool = False, cell: str = "", predict: bool = True) -> Finding:
    """A finding from per-repetition values of the claim's quantity, in the
    order measured (``context``: shown, not counted in the claim's verdict;
    ``cell``: the source's table cell it tests; ``predict``: with the
    interval a re-run is expected in)."""
    values = [float(v) for v in per_rep if not math.isnan(float(v))]
    if not values:
        return Finding(claim, part, quoted=quoted, reason="nothing was measured for it", context=context,
                       cell=cell)
    return Finding(claim, part, rule, across_reps(values, predict=predict), values, quoted, "", decides or {},
                   context, cell)


def make_anytime(findings: Sequence[Finding], round0_reps: int) -> None:
    """Adaptive precision chose the repetitions after looking at the data:
    replace each interval by the median's confidence sequence at the level
    round 0's look left (``anytime_side_alpha``)."""
    alpha = anytime_side_alpha(round0_reps)
    for f in findings:
        f.anytime, f.alpha_side = True, alpha
        if f.estimate is not None:
            low, high = confidence_sequence(f.per_rep, 1 - 2 * alpha)
            f.estimate = dataclasses.replace(f.estimate, low=low, high=high)


def control_family(findings: Sequence[Finding]) -> None:
    """Holm's step-down adjustment of each claim's counted parts' p-values
    against the claim (``Finding.p_fails``): the family-wise error of "not
    reproduced" stays at each part's level."""
    families: dict[str, list[Finding]] = {}
    for f in findings:
        if not f.context and f.rule is not None and f.estimate is not None:
            families.setdefault(f.claim, []).append(f)
    for family in families.values():
        k = len(family)
        ordered = sorted(family, key=lambda f: f.p_fails())
        running = 0.0
        for i, f in enumerate(ordered):
            running = max(running, min(1.0, (k - i) * f.p_fails()))
            f.p_fails_adjusted, f.family = running, k


def not_testable(claim: str, part: str, reason: str, quoted: str = "", cell: str = "",
                 context: bool = False) -> Finding:
    return Finding(claim, part, quoted=quoted, reason=reason, cell=cell, context=context)


def table(findings: Sequence[Finding]) -> pd.DataFrame:
    """The findings as a table: claim, part, value [interval], rule, verdict."""
    import pandas as pd

    return pd.DataFrame([{"claim": f.claim, "part": f.part,
                          "ours": interval_text(f.estimate) if f.estimate else "",
                          "quoted": f.quoted, "rule": f.rule.text() if f.rule else "",
                          "margin, and why": f.rule.why if f.rule else "",
                          "verdict": f.outcome.value, "repetitions to decide": f.needed,
                          "reason": f.reason, "counted": not f.context} for f in findings])


def combine(findings: Sequence[Finding]) -> Outcome:
    """A claim of several parts (context findings are not counted): not
    reproduced when any part is not; reproduced only when every part is
    (a part not testable here leaves it incomplete); not testable when no
    part is testable; otherwise undecided."""
    counted = [f.outcome for f in findings if not f.context]
    testable = [o for o in counted if o is not Outcome.NOT_TESTABLE]
    if not testable:
        return Outcome.NOT_TESTABLE
    if Outcome.NOT_REPRODUCED in testable:
        return Outcome.NOT_REPRODUCED
    if all(o is Outcome.REPRODUCED for o in testable):
        return Outcome.REPRODUCED if len(testable) == len(counted) else Outcome.INCOMPLETE
    return Outcome.UNDECIDED


@dataclass(frozen=True)
class ClaimVerdict:
    """A claim's verdict with what it rests on: its counted parts, how many
    were decided and how many could not be tested here, and how many of the
    source's table cells were tested."""

    claim: str
    outcome: Outcome
    parts: int
    decided: int
    not_testable: int
    cells_covered: int
    cells_total: int
    reason: str = ""     # a claim not testable at all: its parts' reasons

    def line(self) -> str:
        if self.outcome is Outcome.NOT_TESTABLE:
            return f"{self.outcome.value}: {self.reason}"
        text = (f"{self.outcome.value} (decided {self.decided} of {self.parts} parts, "
                f"{self.not_testable} not testable here")
        if self.cells_total:
            text += f"; source cells covered {self.cells_covered} of {self.cells_total}"
        return text + ")"


def claim_verdict(claim: str, findings: Sequence[Finding], source_cells: Sequence[str] = ()) -> ClaimVerdict:
    """``claim``'s verdict from its findings; ``source_cells``: the cells of
    the source's table the claim covers (empty: the source gave no table)."""
    counted = [f for f in findings if not f.context]
    untestable = [f for f in counted if f.outcome is Outcome.NOT_TESTABLE]
    decided = sum(f.outcome in (Outcome.REPRODUCED, Outcome.NOT_REPRODUCED) for f in counted)
    tested_cells = {f.cell for f in counted if f.cell and f.outcome is not Outcome.NOT_TESTABLE}
    reasons = list(dict.fromkeys(f.reason for f in untestable))
    return ClaimVerdict(claim, combine(counted), len(counted), decided, len(untestable),
                        len(tested_cells & set(source_cells)), len(source_cells), "; ".join(reasons))
