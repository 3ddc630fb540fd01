"""Parts about the extreme of several cells (M2's worst native/VM ratio,
M3's best): each cell tested on its own repetitions, a statement about
*some* cell Bonferroni-adjusted over the cells, one about *every* cell an
intersection-union test (iolab.claims.verdicts has the rest of the
verdict machinery)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from ..estimation.intervals import Estimate
from . import evidence
from .evidence import Budget
from .verdicts import Finding, Rule

if TYPE_CHECKING:
    import pandas as pd


# A rule's kind -> the statements about the extreme that refute it.
REFUTED_BY: dict[str, tuple[Literal["above", "below"], ...]] = {
    "above": ("below",),
    "below": ("above",),
    "within": ("below", "above"),
}


@dataclass
class ExtremeFinding(Finding):
    """A part about the largest (``extreme`` "max") or smallest ("min") of
    several cells' medians: M2's worst ratio over message sizes, M3's best.
    Taking the extreme of noisy cells biases it (the maximum of 63 noisy
    ratios of 1.00 sits well above 1), so each cell is tested on its own
    repetitions: a statement about *some* cell is Bonferroni-adjusted over
    the cells (the null distribution of the maximum or minimum), a statement
    about *every* cell is an intersection-union test at the part's level.
    ``per_rep`` holds each repetition's extreme over the cells, for display."""

    extreme: Literal["max", "min"] = "max"
    cells: dict[str, list[float]] = field(default_factory=dict)

    def _statement(self, direction: Literal["above", "below"], bound: float, b: Budget) -> float:
        """The p-value that the extreme lies ``direction`` of ``bound``."""
        some = (self.extreme == "max") == (direction == "above")
        ps = [
            float(evidence.one_sided(np.asarray(v, dtype=float), self._n0(v), bound, direction, b))
            for v in self.cells.values()
        ]
        if not ps:
            return 1.0
        return min(1.0, len(ps) * min(ps)) if some else max(ps)

    def _n0(self, values: Sequence[float]) -> int:
        return self.n0 if len(values) == len(self.per_rep) else len(values)

    def p_holds(self) -> float:
        assert self.rule is not None
        r = self.rule
        if r.kind == "above":
            return self._statement("above", r.bound, self.budget)
        if r.kind == "below":
            return self._statement("below", r.bound, self.budget)
        return max(self._statement("above", r.band[0], self.budget), self._statement("below", r.band[1], self.budget))

    def p_fails(self) -> float:
        assert self.rule is not None
        r = self.rule
        if r.kind == "above":
            return self._statement("below", r.bound, self.budget)
        if r.kind == "below":
            return self._statement("above", r.bound, self.budget)
        return min(self._statement("below", r.band[0], self.budget), self._statement("above", r.band[1], self.budget))

    def refresh(self) -> None:
        """The interval of the extreme: for the maximum, its low end from the
        cell that clears the most (at the level split over the cells), its
        high end from every cell (at the part's level); the minimum mirrored."""
        if self.estimate is None or not self.cells:
            return
        b, k = self.budget, len(self.cells)
        split = Budget(b.round0 / k, b.later / k)
        wide = [evidence.interval(v, self._n0(v), split) for v in self.cells.values()]
        each = [evidence.interval(v, self._n0(v), b) for v in self.cells.values()]
        if self.extreme == "max":
            low, high = max(w[0] for w in wide), max(e[1] for e in each)
            value = max(float(np.median(v)) for v in self.cells.values())
        else:
            low, high = min(e[0] for e in each), min(w[1] for w in wide)
            value = min(float(np.median(v)) for v in self.cells.values())
        self.estimate = Estimate(
            value, low, high, self.estimate.n, self.estimate.pred_low, self.estimate.pred_high, self.estimate.values
        )

    def _some(self, direction: str) -> bool:
        return (self.extreme == "max") == (direction == "above")

    @property
    def reachable(self) -> tuple[bool, bool]:
        """A statement about some cell needs 2^-n <= level / cells; one about
        every cell, 2^-n <= level (over the claim's parts for a "not
        reproduced")."""
        assert self.rule is not None
        n, k, level = self.n0, max(len(self.cells), 1), self.budget.round0

        def ok(direction: str, family: int) -> bool:
            return 0.5**n <= level / (family * (k if self._some(direction) else 1))

        holds = {"above": ["above"], "below": ["below"], "within": ["above", "below"]}[self.rule.kind]
        return all(ok(d, 1) for d in holds), any(ok(d, self.family) for d in self._fails())

    def _fails(self) -> tuple[Literal["above", "below"], ...]:
        """The statements that would refute the claim."""
        assert self.rule is not None
        return REFUTED_BY[self.rule.kind]

    @property
    def reps_to_refute(self) -> int:
        """The fewest repetitions at which a refuting statement can pass:
        about some cell, its level is split over the cells too."""
        k, level = max(len(self.cells), 1), self.budget.round0
        n = 1
        while not any(0.5**n <= level / (self.family * (k if self._some(d) else 1)) for d in self._fails()):
            n += 1
        return n


def extreme_finding(
    claim: str,
    part: str,
    cells: Mapping[str, pd.Series],
    extreme: Literal["max", "min"],
    rule: Rule,
    quoted: str = "",
    decides: dict[str, list[list[object]]] | None = None,
    context: bool = False,
) -> Finding:
    """An ``ExtremeFinding`` from each cell's per-repetition values (Series
    indexed by repetition); repetitions every cell has, in order."""
    series = [c.dropna() for c in cells.values() if len(c.dropna())]
    if not series:
        return Finding(claim, part, quoted=quoted, reason="nothing was measured for it", context=context)
    common = sorted(set.intersection(*(set(int(r) for r in c.index) for c in series)))
    by_cell = {str(k): [float(c.dropna().loc[r]) for r in common] for k, c in cells.items() if len(c.dropna())}
    if not common:
        return Finding(claim, part, quoted=quoted, reason="no repetition measured every cell", context=context)
    pick = max if extreme == "max" else min
    per_rep = [pick(v[i] for v in by_cell.values()) for i in range(len(common))]
    f = ExtremeFinding(
        claim,
        part,
        rule,
        Estimate(float(np.median(per_rep)), -math.inf, math.inf, len(per_rep), values=tuple(per_rep)),
        per_rep,
        quoted,
        "",
        decides or {},
        context,
        "",
        common,
        extreme=extreme,
        cells=by_cell,
    )
    f.refresh()
    return f
