"""Three-valued verdicts with each claim's error stated, decided in one
place (the paper's Method section quotes ``RULE_TEXT`` and ``error_text``).

- reproduced: the evidence that the claim's side of its bound holds;
- not reproduced: the evidence that it does not, after the adjustment
  over the claim's parts;
- undecided at this precision: neither. The finding then says how many
  repetitions would be expected to decide it, or that none would.

The estimand of a part is the median of its per-repetition values (a
paired ratio, or a cost) on the launch the run measured: these are the
verdicts about **this machine**, whose unit is the repetition. The tests
and their error budget are in iolab.claims.evidence: each claim's
verdict is wrong at most 2.5 % of the time in either direction, per claim,
about this launch over the run's time. The verdict about the machine kind
pools launches (iolab.claims.kind_verdicts). "No visible difference"
claims are equivalence claims with an explicit margin, judged by two
one-sided tests. A claim whose setup this node cannot provide is "not
testable here", with the reason; that is never a "not reproduced".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np

from ..estimation.intervals import MIN_REPS_FOR_CI, Estimate, expected_cis
from . import evidence
from .evidence import ALPHA_SIDE, Budget

if TYPE_CHECKING:
    from ..estimation.occasion_spread import Spread
    from .gates import BusyGate

RULE_TEXT = (
    "A part is reproduced when the evidence says its median lies on the claim's side of the bound "
    "(an interval wholly on that side), not reproduced when it says the opposite after the adjustment "
    "over the claim's parts, and undecided at this precision otherwise. Equivalence parts (\u201cabout "
    "the same\u201d) are judged by two one-sided tests against the margin each rule states."
)
# The most repetitions reps_needed looks ahead; beyond, "more than" this.
MAX_REPS = 200


def error_text(b: Budget) -> str:
    """What each claim's verdict about this machine guarantees."""
    return (
        f"Per claim, a wrong \u201creproduced\u201d and a wrong \u201cnot reproduced\u201d about this machine "
        f"each happen at most {ALPHA_SIDE * 100:g} % of the time: {b.text()}. A claim is not reproduced only "
        "when a part contradicts it after Holm's adjustment over the claim's counted parts."
    )


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
        holds = (
            value >= self.bound
            if self.kind == "above"
            else value <= self.bound
            if self.kind == "below"
            else self.band[0] <= value <= self.band[1]
        )
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


def reps_needed(
    per_rep: Sequence[float] | np.ndarray,
    rule: Rule,
    *,
    b: Budget = evidence.FIXED,
    family: int = 1,
    n0: int | None = None,
) -> int | None:
    """The fewest repetitions expected to decide ``rule`` if further ones
    behave like these: round 0's exact test where the count is planned in
    advance (``n0`` None), else the anytime test over the later rounds; a
    "not reproduced" at Holm's strictest level over ``family`` parts. None
    when no count up to MAX_REPS would (the estimate sits on the bound), or
    there are too few values."""
    a = np.asarray(per_rep, dtype=float)
    a = a[~np.isnan(a)]
    if a.size < 2:
        return None
    first = max(MIN_REPS_FOR_CI, a.size + 1)
    anytime = n0 is not None and b.later > 0
    level = b.later if anytime else b.round0
    ns = np.arange(first, MAX_REPS + 1)
    # One quantile pass for every count (each ``expected_cis`` call sorts once).
    lenient = expected_cis(a, ns, 1 - 2 * level, anytime)
    strict = expected_cis(a, ns, 1 - 2 * level / family, anytime)
    for n, (lo, hi), (slo, shi) in zip(ns, lenient, strict, strict=True):
        if rule.judge(lo, hi) is Outcome.REPRODUCED or rule.judge(slo, shi) is Outcome.NOT_REPRODUCED:
            return int(n)
    return None


@dataclass
class Finding:
    """One testable part of a claim, with everything the claims table shows.
    Its statistics (``budget``, ``sigma``, ``family``, ``rounds``) are set
    by ``settle`` over the whole claim; ``refresh`` recomputes its interval."""

    claim: str  # "U1"
    part: str  # "c=50 128 B, io_uring/epoll requests/s"
    rule: Rule | None = None
    estimate: Estimate | None = None
    per_rep: list[float] = field(default_factory=list)  # in the order measured
    quoted: str = ""  # the source's value, as printed
    reason: str = ""  # why not testable
    # What would decide it: experiment -> cells to repeat (experiment-specific keys).
    decides: dict[str, list[list[object]]] = field(default_factory=dict)
    # Shown beside the claim's parts (e.g. the same quantity under another
    # condition than the source's) but not counted in the claim's verdict.
    context: bool = False
    # The source's table cell this part tests ("c=50 128 B"), for coverage.
    cell: str = ""
    # The repetition of each value (where the quantity's table gave them),
    # and its round: 0 for the repetitions planned in advance.
    reps: list[int] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)
    budget: Budget = evidence.FIXED
    # What its per-repetition values are (iolab.estimation.occasion_spread.KINDS):
    # most parts are paired ratios; an absolute cost or a count says so.
    kind: str = "ratio"
    # Its group's between-occasion sd (log scale), for planning how many
    # launches a verdict about the machine kind needs and for prediction
    # intervals; None: unknown (no runs of its kind were estimated).
    sigma: float | None = 0.0
    group: str = ""  # its occasion group (iolab.estimation.occasion_spread)
    family: int = 1  # the claim's counted parts
    p_fails_adjusted: float | None = None
    # Later rounds drifted away from round 0 (set by ``settle``): their
    # evidence is left out.
    withheld: bool = False
    # The ratio of the two sides' means over repetitions, beside the median
    # of per-repetition ratios (the estimand), where the part is a ratio.
    ratio_of_means: float | None = None
    # "against": a necessary condition only, so it can count against its
    # claim (a "not reproduced") but never for it.
    role: Literal["both", "against"] = "both"
    # The echo metric a paired-ratio part divides ("rps", "server_busy", ...):
    # what the same part reads under another setup (iolab.claims).
    metric: str = ""
    # A not-testable part that stands for parts this run measured under
    # another setup than the claim's (the sources'): over runs it drops out
    # wherever another run measured them (iolab.claims.kind_verdicts).
    stand_in: bool = False
    # The client-bound gate it is counted under (iolab.claims.gates):
    # context in a run where it trips; over runs, decided once on the runs'
    # figures. ``gate_note``: the not-testable part saying the gate tripped.
    gate: BusyGate | None = None
    gate_note: bool = False
    # What this run says beside the part ("the trace counted at most 0.0003
    # polls ..."): shown after it, never part of its name, so that runs
    # pooled find the same part under the same name.
    note: str = ""

    @property
    def n0(self) -> int:
        """How many of its values were planned in advance (round 0)."""
        return sum(r == 0 for r in self.rounds) if self.rounds else len(self.per_rep)

    def _values(self) -> np.ndarray:
        return np.asarray(self.per_rep, dtype=float)

    def p_holds(self) -> float:
        """The combined p-value against the claim failing for this part."""
        assert self.rule is not None
        r = self.rule
        return float(evidence.p_holds(r.kind, r.bound, r.band, self._values(), self.n0, self.budget, self.withheld))

    def p_fails(self) -> float:
        """The combined p-value against the claim holding for this part,
        before the adjustment over the claim's parts."""
        assert self.rule is not None
        r = self.rule
        return float(evidence.p_fails(r.kind, r.bound, r.band, self._values(), self.n0, self.budget, self.withheld))

    def refresh(self) -> None:
        """The verdict interval, from the values and the current statistics."""
        if self.estimate is None or not self.per_rep:
            return
        low, high = evidence.interval(self.per_rep, self.n0, self.budget, self.withheld)
        self.estimate = Estimate(
            self.estimate.value,
            low,
            high,
            self.estimate.n,
            self.estimate.pred_low,
            self.estimate.pred_high,
            self.estimate.values,
        )

    @property
    def interval_outcome(self) -> Outcome:
        """What the part's verdict interval alone says."""
        if self.rule is None or self.estimate is None:
            return Outcome.NOT_TESTABLE
        return self.rule.judge(self.estimate.low, self.estimate.high)

    @property
    def outcome(self) -> Outcome:
        if self.rule is None or self.estimate is None:
            return Outcome.NOT_TESTABLE
        level = self.budget.tests
        holds = self.p_holds() <= level
        fails = (self.p_fails_adjusted if self.p_fails_adjusted is not None else self.p_fails()) <= level
        if holds and fails:  # later rounds contradict round 0: neither stands
            return Outcome.UNDECIDED
        return Outcome.REPRODUCED if holds else Outcome.NOT_REPRODUCED if fails else Outcome.UNDECIDED

    @property
    def held_back(self) -> bool:
        """Its interval contradicts the claim, but not after the adjustment
        over the claim's parts."""
        return self.interval_outcome is Outcome.NOT_REPRODUCED and self.outcome is Outcome.UNDECIDED

    @property
    def held_back_text(self) -> str:
        """Why a held-back part is not "not reproduced", from its own test:
        Holm's adjustment where the unadjusted test would have refuted it
        (a claim of several parts), else the test's own p-value against
        the level ("" for a part not held back)."""
        if not self.held_back:
            return ""
        level, p = self.budget.tests, self.p_fails()
        if self.family > 1 and p <= level:
            return (
                f"its interval contradicts the claim, but not after the adjustment over the claim's {self.family} parts"
            )
        return (
            f"its interval contradicts the claim, but its test does not reach the level a verdict needs "
            f"(p = {p:.3g} against {level:.3g})"
        )

    @property
    def reachable(self) -> tuple[bool, bool]:
        """(reproduced, not reproduced): what round 0's exact test can reach."""
        return evidence.reachable(self.n0, self.family, self.budget)

    @property
    def reps_to_refute(self) -> int:
        """The fewest repetitions planned in advance at which this part can
        be "not reproduced" (``reachable``'s second, as a count)."""
        return evidence.reps_to_reach(self.family, self.budget)

    @property
    def needed(self) -> int | None:
        if self.outcome is not Outcome.UNDECIDED or self.rule is None:
            return None
        return reps_needed(
            self.per_rep,
            self.rule,
            b=self.budget,
            family=self.family,
            n0=self.n0 if len(self.per_rep) > self.n0 else None,
        )

    def summary(self, digits: int = 3) -> str:
        """One line: verdict, value with interval, and the rule."""
        if self.outcome is Outcome.NOT_TESTABLE:
            return f"{Outcome.NOT_TESTABLE.value}: {self.reason}"
        assert self.estimate is not None and self.rule is not None
        text = f"{self.outcome.value}: {self.part} = {interval_text(self.estimate, digits)}, claim {self.rule.text()}"
        if self.held_back:
            text += f"; {self.held_back_text}"
        if self.withheld:
            text += "; its later rounds drifted from round 0 and were left out"
        if self.outcome is Outcome.UNDECIDED:
            n = self.needed
            text += (
                f"; about {n} repetitions would decide it"
                if n is not None
                else f"; more than {MAX_REPS} repetitions would be needed"
            )
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
    """ "value [low, high]" to ``digits`` significant figures."""
    if not est.bounded and est.n < MIN_REPS_FOR_CI:
        return f"{_sig(est.value, digits)} (no interval: {est.n} repetitions, {MIN_REPS_FOR_CI} needed)"
    return f"{_sig(est.value, digits)} [{_sig(est.low, digits)}, {_sig(est.high, digits)}]"


def settle(
    findings: Sequence[Finding],
    b: Budget,
    sigma: Mapping[str, Spread] | float | None = None,
    rounds: Mapping[str, Mapping[int, int]] | None = None,
    predict: bool = True,
) -> None:
    """Give every testable finding its statistics and decide the claims'
    "not reproduced" with Holm over each claim's counted parts.
    ``sigma``: per occasion group (``occasions.claims_group`` of the
    experiments a part decides and its kind) the between-occasion estimate,
    which plans the launches a verdict about the machine kind needs and
    widens prediction intervals (it never moves a bound); a number: every
    group's spread, known exactly (simulations); None: the shipped estimate.
    ``rounds``: experiment -> repetition -> round (0: planned in advance);
    ``predict``: with the interval a re-run on another occasion is expected in."""
    from ..estimation.occasion_spread import Spread as _Spread
    from ..estimation.occasion_spread import claims_group, load, prediction_interval

    spreads = load().groups if sigma is None else sigma
    families: dict[str, list[Finding]] = {}
    for f in findings:
        if f.rule is None or f.estimate is None:
            continue
        f.budget = b
        f.group = claims_group(f.decides, f.kind)
        if isinstance(spreads, (int, float)):
            f.sigma = float(spreads)
        else:
            got = spreads.get(f.group)
            f.sigma = got.sigma_occasion if got is not None else None
        experiment = next(iter(f.decides), "")
        table = (rounds or {}).get(experiment, {})
        f.rounds = [int(table.get(r, 0)) for r in f.reps] if f.reps and table else [0] * len(f.per_rep)
        f.withheld = (
            b.later > 0 and len(f.per_rep) > f.n0 and evidence.trend_p(f.per_rep, f.rounds) <= evidence.TREND_LEVEL
        )
        if not f.context:
            families.setdefault(f.claim, []).append(f)
    for family in families.values():
        for f in family:
            f.family = len(family)
        adjusted = evidence.holm(np.array([f.p_fails() for f in family]))
        for f, p in zip(family, adjusted, strict=True):
            f.p_fails_adjusted = float(p)
    for f in findings:
        if f.rule is not None and f.estimate is not None:
            f.refresh()
            if not predict:
                continue
            occasion: _Spread | None
            if isinstance(spreads, (int, float)):
                occasion = _Spread(float(spreads), 0.0, 1, 1_000_000, 0)
            else:
                occasion = spreads.get(f.group)
            pred = prediction_interval(f.per_rep, occasion)
            f.estimate = Estimate(
                f.estimate.value, f.estimate.low, f.estimate.high, f.estimate.n, *pred, f.estimate.values
            )


def decide(
    rules: Sequence[Rule], values: Sequence[np.ndarray], b: Budget, holm: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """(reproduced, not reproduced) of a claim whose counted parts have
    ``rules``, from each part's repetitions (..., n), all planned in advance:
    what ``settle`` and ``Finding.outcome`` decide, on arrays (the error
    simulation's path, iolab.procedure.machine_errors). Reproduced when every
    part holds at the budget's level; not reproduced when a part fails after
    Holm's adjustment over the parts (``holm`` False: unadjusted, a broken
    procedure); a part that reads both stays undecided."""
    holds = np.stack(
        [evidence.p_holds(r.kind, r.bound, r.band, v, v.shape[-1], b) for r, v in zip(rules, values, strict=True)],
        axis=-1,
    )
    fails = np.stack(
        [evidence.p_fails(r.kind, r.bound, r.band, v, v.shape[-1], b) for r, v in zip(rules, values, strict=True)],
        axis=-1,
    )
    if holm:
        fails = evidence.holm(fails)
    part_holds, part_fails = holds <= b.tests, fails <= b.tests
    both = part_holds & part_fails
    part_holds, part_fails = part_holds & ~both, part_fails & ~both
    failed = np.any(part_fails, axis=-1)
    return np.all(part_holds, axis=-1) & ~failed, failed


class Judged(Protocol):
    """What a claim's verdict reads of each part: a finding within one run,
    or a part pooled over runs (iolab.claims.kind_verdicts)."""

    context: bool
    cell: str
    reason: str
    role: Literal["both", "against"]

    @property
    def outcome(self) -> Outcome: ...


def combine(findings: Sequence[Judged]) -> Outcome:
    """A claim of several parts (context findings are not counted): not
    reproduced when any part is not; reproduced only when every part is
    (a part not testable here leaves it incomplete); not testable when no
    part is testable; otherwise undecided."""
    counted = [f for f in findings if not f.context]
    testable = [f for f in counted if f.outcome is not Outcome.NOT_TESTABLE]
    if not testable:
        return Outcome.NOT_TESTABLE
    if any(f.outcome is Outcome.NOT_REPRODUCED for f in testable):
        return Outcome.NOT_REPRODUCED
    # A part that can only count against its claim neither needs to be
    # reproduced nor, when it is, makes the claim so.
    supporting = [f for f in testable if f.role == "both"]
    if supporting and all(f.outcome is Outcome.REPRODUCED or f.role == "against" for f in testable):
        both = [f for f in counted if f.role == "both"]
        return Outcome.REPRODUCED if len(supporting) == len(both) else Outcome.INCOMPLETE
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
    reason: str = ""  # a claim not testable at all: its parts' reasons

    def line(self) -> str:
        if self.outcome is Outcome.NOT_TESTABLE:
            return f"{self.outcome.value}: {self.reason}"
        text = (
            f"{self.outcome.value} (decided {self.decided} of {self.parts} parts, {self.not_testable} not testable here"
        )
        if self.cells_total:
            text += f"; source cells covered {self.cells_covered} of {self.cells_total}"
        return text + ")"


def claim_verdict(claim: str, findings: Sequence[Judged], source_cells: Sequence[str] = ()) -> ClaimVerdict:
    """``claim``'s verdict from its findings; ``source_cells``: the cells of
    the source's table the claim covers (empty: the source gave no table)."""
    counted = [f for f in findings if not f.context]
    untestable = [f for f in counted if f.outcome is Outcome.NOT_TESTABLE]
    decided = sum(f.outcome in (Outcome.REPRODUCED, Outcome.NOT_REPRODUCED) for f in counted)
    tested_cells = {f.cell for f in counted if f.cell and f.outcome is not Outcome.NOT_TESTABLE}
    reasons = list(dict.fromkeys(f.reason for f in untestable))
    return ClaimVerdict(
        claim,
        combine(counted),
        len(counted),
        decided,
        len(untestable),
        len(tested_cells & set(source_cells)),
        len(source_cells),
        "; ".join(reasons),
    )
