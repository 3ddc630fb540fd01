"""How likely each claim's verdict comes out right, at this run's
repetitions: the power the claims table prints beside the error rate.

For a claim, every counted part's truth is put 10 % beyond its bound, on the
claim's side (power to reproduce) or on the other side (power to refute);
an equivalence part's truth is its band's centre, or 10 % outside its lower
edge. Each part's repetitions are drawn from its own spread (its values'
log deviations from their median, resampled), as many as round 0 planned,
and the claim is judged by the same tests, budget and Holm adjustment as the real verdict (iolab.claims.evidence).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..claims import evidence
from ..claims.verdicts import Finding

# How far beyond its bound the truth is put.
EFFECT = 0.10
RUNS = 400


@dataclass(frozen=True)
class Power:
    """The chance of the right verdict when the claim holds by ``EFFECT``
    (reproduced) and when it fails by as much (not reproduced), from
    ``runs`` simulated runs; None where no part is testable."""

    reproduce: float
    refute: float
    runs: int

    def text(self) -> str:
        return (
            f"Power in one run: {self.reproduce:.0%} to reproduce, {self.refute:.0%} to refute (truth "
            f"{EFFECT:.0%} beyond the bound, {self.runs} simulated runs)."
        )


def _truth(f: Finding, holds: bool) -> float:
    assert f.rule is not None
    r = f.rule
    if r.kind == "above":
        return r.bound * (1 + EFFECT) if holds else r.bound * (1 - EFFECT)
    if r.kind == "below":
        return r.bound * (1 - EFFECT) if holds else r.bound * (1 + EFFECT)
    return r.bound if holds else r.band[0] * (1 - EFFECT)


def _residuals(f: Finding, pooled: np.ndarray) -> np.ndarray:
    v = np.asarray(f.per_rep, dtype=float)
    if v.size >= 3 and np.all(v > 0) and np.ptp(v) > 0:
        x = np.log(v)
        return x - np.median(x)
    return pooled


def claim_power(findings: Sequence[Finding], runs: int = RUNS, seed: int = 0) -> Power | None:
    """The power of one claim's verdict (its counted, testable parts, as
    ``settle`` left them)."""
    parts = [f for f in findings if not f.context and f.rule is not None and f.estimate is not None]
    if not parts:
        return None
    rng = np.random.default_rng(seed)
    logs = [np.log(np.asarray(f.per_rep, dtype=float)) for f in parts if all(x > 0 for x in f.per_rep)]
    pooled = np.concatenate([x - np.median(x) for x in logs]) if logs else np.zeros(1)
    b, level = parts[0].budget, parts[0].budget.tests
    out = []
    for holds in (True, False):
        p_holds, p_fails = [], []
        for f in parts:
            assert f.rule is not None
            res = _residuals(f, pooled)
            n = max(f.n0, 1)
            values = _truth(f, holds) * np.exp(rng.choice(res, (runs, n)))
            r = f.rule
            p_holds.append(evidence.p_holds(r.kind, r.bound, r.band, values, n, b))
            p_fails.append(evidence.p_fails(r.kind, r.bound, r.band, values, n, b))
        if holds:
            out.append(float(np.mean(np.all(np.stack(p_holds, axis=-1) <= level, axis=-1))))
        else:
            adjusted = evidence.holm(np.stack(p_fails, axis=-1))
            out.append(float(np.mean(np.any(adjusted <= level, axis=-1))))
    return Power(out[0], out[1], runs)
