"""Making claim parts: a finding from per-repetition values, a part not
testable here with its reason, and the findings as a table
(iolab.claims.verdicts judges them)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import numpy as np

from ..estimation.intervals import Estimate
from .verdicts import Finding, Rule, interval_text

if TYPE_CHECKING:
    import pandas as pd


def finding(
    claim: str,
    part: str,
    per_rep: Sequence[float] | np.ndarray | pd.Series,
    rule: Rule,
    quoted: str = "",
    decides: dict[str, list[list[object]]] | None = None,
    context: bool = False,
    cell: str = "",
    kind: str = "ratio",
    metric: str = "",
) -> Finding:
    """A finding from per-repetition values of the claim's quantity, in the
    order measured (a Series indexed by repetition keeps which repetition
    each came from); ``context``: shown, not counted in the claim's verdict;
    ``cell``: the source's table cell it tests; ``kind``: what the values
    are (iolab.estimation.occasion_spread.KINDS), a paired ratio unless said."""
    reps: list[int] = []
    if hasattr(per_rep, "index") and hasattr(per_rep, "to_numpy"):
        series = cast("pd.Series", per_rep).sort_index()  # index = repetition
        pairs = [
            (int(r), float(v))
            for r, v in zip(series.index, series.to_numpy(float), strict=True)
            if not math.isnan(float(v))
        ]
        reps, values = [r for r, _ in pairs], [v for _, v in pairs]
    else:
        values = [float(v) for v in per_rep if not math.isnan(float(v))]
    if not values:
        return Finding(
            claim, part, quoted=quoted, reason="nothing was measured for it", context=context, cell=cell, kind=kind
        )
    median = float(np.median(values))
    f = Finding(
        claim,
        part,
        rule,
        Estimate(median, -math.inf, math.inf, len(values), values=tuple(values)),
        values,
        quoted,
        "",
        decides or {},
        context,
        cell,
        reps,
        kind=kind,
        metric=metric,
    )
    f.refresh()
    return f


def not_testable(
    claim: str, part: str, reason: str, quoted: str = "", cell: str = "", context: bool = False
) -> Finding:
    return Finding(claim, part, quoted=quoted, reason=reason, cell=cell, context=context)


def table(findings: Sequence[Finding]) -> pd.DataFrame:
    """The findings as a table: claim, part, value [interval], rule, verdict."""
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "claim": f.claim,
                "part": f.part,
                "ours": interval_text(f.estimate) if f.estimate else "",
                "quoted": f.quoted,
                "rule": f.rule.text() if f.rule else "",
                "margin, and why": f.rule.why if f.rule else "",
                "verdict": f.outcome.value,
                "repetitions to decide": f.needed,
                "reason": f.reason,
                "counted": not f.context,
            }
            for f in findings
        ]
    )
