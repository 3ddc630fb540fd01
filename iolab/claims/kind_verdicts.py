"""Verdicts about **this machine kind**, pooled across launches: the launch
is the unit of evidence for a claim about a kind of machine (Kalibera &
Jones, 2013).

A launch (one occasion: a boot of a VM, a node of a cluster, a machine)
gives each claim part one observation: the median of the part's
per-repetition values in its run, or the median of its runs' medians where
several runs measured one launch (they share its CPU placement and its
neighbours, so they add little beyond the first). Repetitions within a run
only make that observation precise; the occasion effect they share
persists, so no number of them decides a claim about the machine kind.
Across launches (runs of distinct identity, iolab.claims.records: a run
counts once, grouped by their boot ids) the part's verdict is an exact
sign test on the launch values, against the rule's bound:

- the estimand is the median, over launches, of a launch's median (the
  typical launch); the sign test is exact for it under any occasion law,
  normal or skewed, with no estimate of the between-launch spread;
- ``planned``: the number of launches was fixed before looking (a cluster
  study of k nodes): the fixed-sample test at exactly k;
- ``accumulating``: launches are added and the verdict looked at again
  with each (records over days): the anytime-valid sign test (Robbins'
  beta-binomial mixture, iolab.estimation.intervals), in the order the launches
  were first measured, valid however often it is looked at.

Each way (a wrong "reproduced", a wrong "not reproduced") a claim errs at
most ``ALPHA`` = 2.5 %: a claim is reproduced only when every counted part
is (an intersection-union test); it is not reproduced when a part is, after
Holm's step-down adjustment over the claim's counted parts. Nothing here
moves a bound by an estimated spread: the spread is in the runs.

A t test (or Wilcoxon's) over runs would decide with fewer runs where the
run medians are symmetric, but a symmetry check on a few runs cannot tell a
skewed occasion law from a symmetric one well enough: in simulation
(iolab.procedure.kind_errors) a symmetry-gated Wilcoxon test errs 3.0-3.5 %
at 16 runs under a slow-tail occasion law. It is printed as a reading
beside the verdict (``symmetric_reading``), never used for it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

import numpy as np
from scipy import stats as sps

from . import evidence
from .gates import BusyGate
from .gates import pooled as pooled_gate
from .verdicts import ClaimVerdict, Finding, Outcome, Rule

ALPHA = evidence.ALPHA_SIDE
Mode = Literal["planned", "accumulating"]
# The most runs the planner looks ahead.
MAX_RUNS = 256


@dataclass(frozen=True)
class RunValue:
    """One run's observation of a part: the median of its repetitions."""

    run: str  # the run's identity (iolab.claims.records)
    measured: str  # when its first measurement started: the order runs came in
    value: float
    reps: int
    launch: str = ""  # its nodes' boot ids ("": unknown, the run is its own launch)

    @property
    def launch_key(self) -> str:
        return self.launch or f"run:{self.run}"


@dataclass(frozen=True)
class LaunchValue:
    """One launch's observation of a part: the median of its runs' medians."""

    launch: str
    measured: str  # its first run's first start
    value: float
    runs: int


def by_launch(values: Sequence[RunValue]) -> list[LaunchValue]:
    """Run values grouped by launch, in the order the launches came in."""
    groups: dict[str, list[RunValue]] = {}
    for v in sorted(values, key=lambda v: (v.measured, v.run)):
        groups.setdefault(v.launch_key, []).append(v)
    return [
        LaunchValue(key, vs[0].measured, float(np.median([v.value for v in vs])), len(vs))
        for key, vs in sorted(groups.items(), key=lambda kv: (kv[1][0].measured, kv[0]))
    ]


def p_side(values: np.ndarray, bound: float, side: evidence.Side, mode: Mode) -> np.ndarray:
    """The sign test's p-value that the median lies ``side`` of ``bound``,
    from run medians (..., k) in the order measured."""
    v = np.asarray(values, dtype=float)
    if v.shape[-1] == 0:
        return np.ones(v.shape[:-1])
    if mode == "planned":
        return np.asarray(evidence.fixed_p(v, bound, side))
    return np.asarray(evidence.anytime_p(v, bound, side))


def p_holds(rule: Rule, values: np.ndarray, mode: Mode) -> np.ndarray:
    """Small: the run medians put the claim's side of its bound."""
    if rule.kind == "above":
        return p_side(values, rule.bound, "above", mode)
    if rule.kind == "below":
        return p_side(values, rule.bound, "below", mode)
    lo, hi = rule.band
    return np.maximum(p_side(values, lo, "above", mode), p_side(values, hi, "below", mode))


def p_fails(rule: Rule, values: np.ndarray, mode: Mode) -> np.ndarray:
    """Small: the run medians put the other side (for a band: outside it)."""
    if rule.kind == "above":
        return p_side(values, rule.bound, "below", mode)
    if rule.kind == "below":
        return p_side(values, rule.bound, "above", mode)
    lo, hi = rule.band
    return np.minimum(p_side(values, lo, "below", mode), p_side(values, hi, "above", mode))


def decide(
    rules: Sequence[Rule], values: Sequence[np.ndarray], mode: Mode, alpha: float = ALPHA, holm: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """(reproduced, not reproduced) of a claim whose counted parts have
    ``rules``, from each part's run medians (..., k): reproduced when every
    part holds at ``alpha``, not reproduced when a part fails after Holm's
    adjustment over the parts. The same tests ``PooledPart`` and ``settle``
    apply, on arrays (the error simulation's path)."""
    holds = np.stack([p_holds(r, v, mode) for r, v in zip(rules, values, strict=True)], axis=-1)
    fails = np.stack([p_fails(r, v, mode) for r, v in zip(rules, values, strict=True)], axis=-1)
    if holm:
        fails = evidence.holm(fails)
    held, failed = np.all(holds <= alpha, axis=-1), np.any(fails <= alpha, axis=-1)
    return held & ~failed, failed & ~held


@cache
def runs_to_reach(level: float, mode: Mode) -> int:
    """The fewest runs at which the sign test can reject at ``level``: every
    run on one side (fixed: 2^-k <= level)."""
    for k in range(1, MAX_RUNS + 1):
        if float(p_side(np.ones(k), 0.0, "above", mode)) <= level:
            return k
    return MAX_RUNS + 1


def reachable(k: int, family: int, mode: Mode) -> tuple[bool, bool]:
    """(reproduced, not reproduced): what k runs can reach for a part of a
    claim of ``family`` counted parts (a "not reproduced" at Holm's
    strictest level, ALPHA / family)."""
    return k >= runs_to_reach(ALPHA, mode), k >= runs_to_reach(ALPHA / max(family, 1), mode)


@dataclass
class PooledPart:
    """One claim part over runs: one part under one setup (a part measured
    under another client or layout is another quantity), counted or shown
    as context (a run where the part was context, because its instrument was
    unsound there or its setup was not the claim's, adds to the context
    part only)."""

    claim: str
    part: str
    rule: Rule | None
    context: bool = False
    cell: str = ""
    role: Literal["both", "against"] = "both"
    values: list[RunValue] = field(default_factory=list)
    reason: str = ""  # why no run tested it (or why its runs cannot pool)
    mode: Mode = "accumulating"
    family: int = 1
    p_fails_adjusted: float | None = None
    setup: str = ""
    group: str = ""  # the quantity group of its spread between runs ("" in crates from before groups)
    # The client-bound gate over its runs (None: not gated), decided once.
    gate: BusyGate | None = None

    @property
    def launches(self) -> list[LaunchValue]:
        return by_launch(self.values)

    @property
    def k(self) -> int:
        """The launches behind it: the sign test's count."""
        return len({v.launch_key for v in self.values})

    @property
    def runs(self) -> int:
        return len(self.values)

    def _array(self) -> np.ndarray:
        return np.asarray([v.value for v in self.launches], dtype=float)

    @property
    def median(self) -> float:
        return float(np.median(self._array())) if self.values else math.nan

    def p_holds(self) -> float:
        assert self.rule is not None
        return float(p_holds(self.rule, self._array(), self.mode))

    def p_fails(self) -> float:
        assert self.rule is not None
        return float(p_fails(self.rule, self._array(), self.mode))

    @property
    def outcome(self) -> Outcome:
        if self.rule is None or not self.values:
            return Outcome.NOT_TESTABLE
        holds = self.p_holds() <= ALPHA
        fails = (self.p_fails_adjusted if self.p_fails_adjusted is not None else self.p_fails()) <= ALPHA
        if holds and not fails:
            return Outcome.REPRODUCED
        if fails and not holds:
            return Outcome.NOT_REPRODUCED
        return Outcome.UNDECIDED

    @property
    def reachable(self) -> tuple[bool, bool]:
        return reachable(self.k, self.family, self.mode)

    def interval(self) -> tuple[float, float]:
        """The sign test's 95 % interval for the median over runs (planned:
        the exact order-statistic interval; accumulating: the confidence
        sequence's); unbounded where k runs cannot bound it."""
        v = np.sort(self._array())
        if self.mode == "accumulating":
            from ..estimation.intervals import confidence_sequence

            return confidence_sequence(self._array(), 1 - 2 * ALPHA) if v.size else (-math.inf, math.inf)
        k = _rank(v.size)
        if k is None:
            return -math.inf, math.inf
        return float(v[v.size - k]), float(v[k - 1])

    def symmetric_reading(self) -> float | None:
        """Wilcoxon's signed-rank p-value for the claim's side, valid only
        where the run medians are symmetric: printed beside the verdict."""
        if self.rule is None or self.k < 6 or self.rule.kind == "within":
            return None
        x = np.log(self._array()) - math.log(self.rule.bound)
        if np.all(x == 0):
            return None
        alternative = "greater" if self.rule.kind == "above" else "less"
        return float(sps.wilcoxon(x, alternative=alternative).pvalue)

    def summary(self) -> str:
        if self.outcome is Outcome.NOT_TESTABLE:
            return f"{Outcome.NOT_TESTABLE.value}: {self.reason}"
        assert self.rule is not None
        low, high = self.interval()
        bounded = math.isfinite(low) and math.isfinite(high)
        shown = f"{self.median:.3g} [{low:.3g}, {high:.3g}]" if bounded else f"{self.median:.3g} (no interval yet)"
        part = f"{self.part} [{self.setup}]" if self.setup else self.part
        over = f"{self.k} launch(es)" + (f" ({self.runs} runs)" if self.runs != self.k else "")
        text = f"{self.outcome.value}: {part} = {shown} over {over}, claim {self.rule.text()}"
        if self.outcome is Outcome.UNDECIDED:
            can_hold, can_fail = self.reachable
            if not (can_hold or can_fail):
                text += f"; {runs_to_reach(ALPHA, self.mode)} launches are the fewest that can decide it"
        if self.reason and self.values and not self.context:
            text += f"; {self.reason}"
        return text


@cache
def _rank(n: int) -> int | None:
    """The exact sign interval's order statistic at ALPHA per side."""
    for k in range(1, n + 1):
        if float(evidence.sign_tail(k, n)) <= ALPHA:
            return k
    return None


def settle(parts: Sequence[PooledPart], mode: Mode) -> None:
    """Each part's mode and family, and Holm's adjustment of "not
    reproduced" over each claim's counted, testable parts."""
    families: dict[str, list[PooledPart]] = {}
    for p in parts:
        p.mode = mode
        if not p.context and p.rule is not None and p.values:
            families.setdefault(p.claim, []).append(p)
    for family in families.values():
        adjusted = evidence.holm(np.array([p.p_fails() for p in family]))
        for p, a in zip(family, adjusted, strict=True):
            p.family = len(family)
            p.p_fails_adjusted = float(a)


def claim_verdict(claim: str, parts: Sequence[PooledPart], source_cells: Sequence[str] = ()) -> ClaimVerdict:
    """The claim's verdict from its pooled parts (verdicts.claim_verdict's
    rule: reproduced only when every counted part is, a part not testable
    leaves it incomplete)."""
    from .verdicts import claim_verdict as judge

    return judge(claim, parts, source_cells)


# --- reading runs' findings ------------------------------------------------------

_NUM = r"([0-9][0-9\u2009,]*(?:\.[0-9]+)?)"
_RULE_TEXT = {
    "above": re.compile(rf"^\u2265 {_NUM}$"),
    "below": re.compile(rf"^\u2264 {_NUM}$"),
    "within": re.compile(rf"^within \u00b1{_NUM} % of {_NUM}"),
}


def _number(text: str) -> float:
    return float(text.replace("\u2009", "").replace(",", ""))


def recorded_rule(entry: Mapping[str, Any]) -> Rule | None:
    """A finding's rule as a run recorded it: the structured fields where
    the run wrote them, else read back from its text (crates from before
    they were written); None where neither is a rule. Only ever compared
    with this checkout's rules (``code_rule``), never used to judge."""
    kind, bound, margin = entry.get("rule_kind"), entry.get("bound"), entry.get("margin_share")
    if kind in ("above", "below", "within") and isinstance(bound, int | float) and math.isfinite(bound):
        m = float(margin) if isinstance(margin, int | float) and math.isfinite(margin) and margin >= 0 else 0.0
        return Rule(kind, float(bound), m)
    text = entry.get("rule")
    if not isinstance(text, str):
        return None
    if found := _RULE_TEXT["within"].match(text.strip()):
        return Rule("within", _number(found.group(2)), _number(found.group(1)) / 100)
    if found := _RULE_TEXT["above"].match(text.strip()):
        return Rule("above", _number(found.group(1)))
    if found := _RULE_TEXT["below"].match(text.strip()):
        return Rule("below", _number(found.group(1)))
    return None


def _same_rule(a: Rule, b: Rule) -> bool:
    """Equal to the 3 significant figures a run's text keeps."""

    def sig(x: float) -> float:
        return float(f"{x:.3g}")

    return a.kind == b.kind and sig(a.bound) == sig(b.bound) and sig(a.margin) == sig(b.margin)


def code_rule(claim: str, recorded: Rule, rules: Mapping[str, Sequence[Rule]]) -> Rule | None:
    """The rule of this checkout's that a run's part was judged by: the one
    of ``claim``'s rules equal to what the run recorded; None where this
    checkout states no such rule (another version of the rule, or one a
    crate made up), and the run's part is left out."""
    return next((r for r in rules.get(claim, ()) if _same_rule(r, recorded)), None)


def checkout_rules() -> Mapping[str, Sequence[Rule]]:
    """Every claim's rules as this checkout states them (iolab.claims)."""
    from . import RULES

    return RULES


@dataclass(frozen=True)
class RunFindings:
    """One run's findings, as its numbers recorded them, and its launch."""

    run: str
    measured: str
    findings: Sequence[Mapping[str, Any]]
    launch: str = ""


def entry_of(f: Finding) -> dict[str, Any]:
    """A finding as a run's numbers record it (what ``pool`` reads)."""
    return {
        "claim": f.claim,
        "part": f.part,
        "context": f.context,
        "cell": f.cell,
        "role": f.role,
        "stand_in": f.stand_in,
        "gate": f.gate.as_json() if f.gate is not None else None,
        "gate_note": f.gate_note,
        "note": f.note,
        "reason": f.reason,
        "rule_kind": f.rule.kind if f.rule else None,
        "bound": f.rule.bound if f.rule else None,
        "margin_share": f.rule.margin if f.rule else None,
        "per_rep": list(f.per_rep) if f.estimate is not None else [],
        # The quantity group whose between-run spread the part's verdict used.
        "group": f.group,
    }


# Crates from before stand-ins were marked name theirs by this part.
LEGACY_STAND_IN = "echo servers under the sources' setup"


def _stand_in(f: Mapping[str, Any]) -> bool:
    return bool(f.get("stand_in")) or (str(f.get("part", "")) == LEGACY_STAND_IN and not f.get("per_rep"))


def pool(
    runs: Sequence[RunFindings], mode: Mode, rules: Mapping[str, Sequence[Rule]] | None = None
) -> list[PooledPart]:
    """Every claim part any run recorded, over the runs that measured it,
    grouped by launch (``PooledPart.launches``). A run counts once (the
    caller keeps one copy per run identity). A part is one part under one
    setup and one rule, counted or context as the run judged it: values
    measured under another setup, or where the part was context, never pool
    with the counted ones. The rule is this checkout's (``rules``, default
    iolab.claims.RULES): a run that recorded a rule this checkout
    does not state (another version of it, or one its crate made up) is
    left out of the part, and the part says how many runs were left out and
    why. A stand-in (a run that measured the claim under another setup)
    drops out where another run measured the claim's own.

    A part a run recorded with its client-bound gate's figures
    (iolab.claims.gates) is counted or context by one gate over all its
    runs, on the runs' medians of those figures, not by each run's own: a
    part near the gate's bounds would otherwise pool the runs that happened
    to test it. The gate's not-testable note stands only where that gate
    trips. Crates from before the figures were recorded keep their runs'
    own gate."""
    stated = checkout_rules() if rules is None else rules
    seen: dict[tuple[str, str, str, bool], PooledPart] = {}
    # part key -> the runs left out of it: their recorded rule is not one this checkout states
    unstated: dict[tuple[str, str, str, bool], int] = {}
    stand_ins: dict[str, PooledPart] = {}
    # (claim, gate key) -> run -> its gate; part key -> (claim, gate key), is it the note
    gates: dict[tuple[str, tuple[str, tuple[str, ...]]], dict[str, BusyGate]] = {}
    gated: dict[tuple[str, str, str, bool], tuple[tuple[str, tuple[str, tuple[str, ...]]], bool]] = {}
    ordered = sorted(runs, key=lambda r: (r.measured, r.run))
    for run in ordered:
        for f in run.findings:
            claim, part = str(f.get("claim", "")), str(f.get("part", ""))
            if not claim or not part:
                continue
            context = bool(f.get("context", False))
            if _stand_in(f):
                stand_ins.setdefault(claim, PooledPart(claim, part, None, context, reason=str(f.get("reason", ""))))
                continue
            setup = str(f.get("setup", "") or "")
            gate = BusyGate.from_json(f.get("gate")) if f.get("gate") is not None else None
            if gate is not None:
                context = False  # decided below, over the runs
                gates.setdefault((claim, gate.key), {}).setdefault(run.run, gate)
            key = (claim, part, setup, context)
            if gate is not None:
                gated[key] = ((claim, gate.key), bool(f.get("gate_note")))
            entry = seen.setdefault(
                key,
                PooledPart(
                    claim,
                    part,
                    None,
                    context,
                    str(f.get("cell", "") or ""),
                    "against" if f.get("role") == "against" else "both",
                    # A gated part's reason is its gate's, said below from
                    # the runs' medians, not from the first run's.
                    reason=str(f.get("reason", "") or "") if gate is None else "",
                    setup=setup,
                ),
            )
            recorded = recorded_rule(f)
            values = [float(v) for v in f.get("per_rep") or [] if isinstance(v, int | float) and math.isfinite(v)]
            if recorded is None or not values:
                if f.get("reason") and not entry.reason:
                    entry.reason = str(f["reason"])
                continue
            rule = code_rule(claim, recorded, stated)
            if rule is None or (entry.rule is not None and entry.rule != rule):
                # Judged by a rule this checkout does not state, or by another
                # of its rules than the part's first run: never pooled with it.
                unstated[key] = unstated.get(key, 0) + 1
                continue
            entry.rule = rule
            entry.group = str(f.get("group") or "") or entry.group
            entry.values.append(RunValue(run.run, run.measured, float(np.median(values)), len(values), run.launch))
    for key, left in unstated.items():
        entry = seen[key]
        said = f"{left} run(s) recorded a rule this checkout does not state for it and are left out"
        entry.reason = f"{entry.reason}; {said}" if entry.reason else said
    for key, (gate_key, note) in gated.items():
        entry = seen[key]
        entry.gate = pooled_gate(list(gates[gate_key].values()))
        reason = entry.gate.reason()
        entry.context = bool(reason) and not note
        if reason:
            entry.reason = reason if note or not entry.reason else f"{reason}; {entry.reason}"
        elif note:
            del seen[key]
    parts = list(seen.values())
    # A counted part no run measured, where another part of the same cell
    # and claim was measured under the claim's setup in some run, is the
    # trace of a run that measured it elsewhere: it adds nothing.
    measured = {(p.claim, p.part) for p in parts if not p.context and p.values}
    parts = [p for p in parts if p.context or p.values or (p.claim, p.part) not in measured]
    for claim, stand_in in stand_ins.items():
        if not any(p.claim == claim and not p.context and p.values for p in parts):
            parts.insert(0, stand_in)
    settle(parts, mode)
    return parts


def run_verdicts(
    findings: Sequence[Mapping[str, Any]], rules: Mapping[str, Sequence[Rule]] | None = None
) -> dict[str, Outcome]:
    """One run's verdicts about its own machine (its launch), from its
    findings as recorded, judged again by this checkout's rules and error
    budget (iolab.claims.verdicts): per claim, from its repetitions
    planned in advance (a part's later adaptive rounds are left out, which
    only costs power). A part recorded under a rule this checkout does not
    state is not judged, and its claim counts it as not testable."""
    from .evidence import FIXED
    from .findings import finding, not_testable
    from .verdicts import claim_verdict, settle

    stated = checkout_rules() if rules is None else rules
    found: list[Finding] = []
    for f in findings:
        claim, part = str(f.get("claim", "")), str(f.get("part", ""))
        if not claim or not part or _stand_in(f):
            continue
        values = [float(v) for v in f.get("per_rep") or [] if isinstance(v, int | float) and math.isfinite(v)]
        n0 = f.get("round0")
        if isinstance(n0, int | float) and 0 < n0 < len(values):
            values = values[: int(n0)]
        recorded = recorded_rule(f)
        rule = code_rule(claim, recorded, stated) if recorded is not None else None
        if rule is None or not values:
            judged = not_testable(claim, part, str(f.get("reason") or "no rule of this checkout"))
        else:
            judged = finding(claim, part, values, rule)
        judged.context = bool(f.get("context"))
        found.append(judged)
    settle(found, FIXED, 0.0, predict=False)
    return {
        c: claim_verdict(c, [f for f in found if f.claim == c]).outcome for c in dict.fromkeys(f.claim for f in found)
    }


# --- how many runs a claim needs --------------------------------------------------


def side_power(p_beyond: float, k: int, level: float = ALPHA) -> float:
    """The exact sign test's power with k runs when each run's median lies
    beyond the bound with probability ``p_beyond``."""
    c = _count_needed(k, level)
    return 0.0 if c is None else float(sps.binom.sf(c - 1, k, p_beyond))


@cache
def _count_needed(k: int, level: float) -> int | None:
    for c in range(1, k + 1):
        if float(evidence.sign_tail(c, k)) <= level:
            return c
    return None


def runs_needed(distance: float, sigma: float, level: float = ALPHA, target: float = 0.8) -> int | None:
    """The fewest planned runs whose exact sign test decides, with
    probability ``target``, a part whose typical run lies ``distance``
    (relative, > 0) beyond its bound, where run medians spread ``sigma``
    (log sd, normal); None beyond MAX_RUNS (a truth on its bound is never
    decided)."""
    if not math.isfinite(distance) or distance <= 0 or sigma <= 0:
        return None if not (sigma <= 0 < distance) else runs_to_reach(level, "planned")
    p_beyond = float(sps.norm.cdf(math.log1p(distance) / sigma))
    for k in range(runs_to_reach(level, "planned"), MAX_RUNS + 1):
        if side_power(p_beyond, k, level) >= target:
            return k
    return None
