"""How often a claim's verdict is wrong, by simulation: per-repetition values
drawn with the spread the reference data show, the true value placed at a
claim's bound or beside it, then the real verdict code (findings, the
adjustment over a claim's parts, confidence sequences) and the real planner
of adaptive precision, round after round, as the paper profile runs them.

    python -m iolab.analysis.error_rates [--runs N] [--uncorrected]

``--uncorrected`` runs the procedure as it was before error control: every
round's fixed-sample interval, no adjustment over a claim's parts
(benchmarks/error_rates.py prints both side by side).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .precision import plan_round
from .verdicts import Finding, Outcome, Rule, combine, control_family, finding, make_anytime
from ..settings import PrecisionSettings

# The paper profile's rounds (config/profiles/paper.yaml).
PAPER_PRECISION = PrecisionSettings(enabled=True, budget_minutes=30, reps_per_round=3, max_rounds=10)
PAPER_REPEATS = 6


@dataclass(frozen=True)
class Claim:
    """A synthetic claim: its parts' rules (all parts of one truth)."""

    name: str
    rules: tuple[Rule, ...]


# The shapes of the real claims: U1's 12 parts (six cells, each
# non-inferiority on requests/s and equivalence on load); C2's three
# one-sided parts; a single-part claim.
U1_LIKE = Claim("U1-like", tuple(r for _ in range(6) for r in (Rule("above", 0.95), Rule("within", 1.0, 0.10))))
C2_LIKE = Claim("C2-like", (Rule("above", 1.0),) * 2 + (Rule("below", 1.05),))
ONE_PART = Claim("one part", (Rule("above", 1.0),))
CLAIMS = (U1_LIKE, C2_LIKE, ONE_PART)


def truth_at(rule: Rule, where: str) -> float:
    """The true median for a placement: on the bound (for an equivalence,
    its lower edge), or 10 % below or above it."""
    bound = rule.band[0] if rule.kind == "within" else rule.bound
    return bound * {"bound": 1.0, "0.9x": 0.9, "1.1x": 1.1}[where]


def holds(rule: Rule, value: float) -> bool:
    if rule.kind == "above":
        return value >= rule.bound
    if rule.kind == "below":
        return value <= rule.bound
    lo, hi = rule.band
    return lo <= value <= hi


def reference_residuals() -> np.ndarray:
    """Log deviations of the shipped reference data's paired echo ratios
    (every preset against epoll, requests/s) from each cell's median:
    how far one repetition's ratio strays from the middle."""
    from .. import tables
    from . import echostats

    echo = tables.load("echo", "auto")
    out = []
    for preset in sorted(set(echo["preset"]) - {"epoll"}):
        r = echostats.paired_ratios(echo, preset, "epoll")
        for _, g in r.groupby(["node", "client", "layout", "connections", "bytes"]):
            v = np.log(g["ratio"].to_numpy(float))
            if v.size >= 3:
                out.append(v - np.median(v))
    return np.concatenate(out)


@dataclass
class Rates:
    runs: int
    part_false_reproduced: float
    part_false_not_reproduced: float
    claim_false_reproduced: float
    claim_false_not_reproduced: float
    mean_reps: float

    def mc_error(self, rate: float) -> float:
        return math.sqrt(max(rate * (1 - rate), 1e-12) / self.runs)


def _draw(rng: np.random.Generator, residuals: np.ndarray, truth: float, n: int) -> list[float]:
    # Symmetrised (a random sign) and smoothed, so the true median is exact.
    e = rng.choice(residuals, n) * rng.choice([-1.0, 1.0], n) + rng.normal(0, 1e-3, n)
    return (truth * np.exp(e)).tolist()


def run_claim(claim: Claim, where: str, residuals: np.ndarray, rng: np.random.Generator, *,
              corrected: bool = True, precision: PrecisionSettings = PAPER_PRECISION,
              repeats: int = PAPER_REPEATS) -> tuple[list[Finding], int]:
    """One claim through every round the planner asks for; its final
    findings and the repetitions taken."""
    truths = [truth_at(r, where) for r in claim.rules]
    values = [_draw(rng, residuals, t, repeats) for t in truths]
    for round_ in range(precision.max_rounds + 1):
        found = [finding("X", f"part {j}", values[j], rule, decides={"echo": [[f"p{j}", 0, 0]]}, predict=False)
                 for j, rule in enumerate(claim.rules)]
        if corrected:
            if round_ > 0:
                make_anytime(found, repeats)
            control_family(found)
        plan = plan_round(found, round_=round_, repeats=repeats, precision=precision, spent_seconds=0.0,
                          seconds_per_rep={"echo": 0.0}, seconds_per_cell=0.0)
        if plan.stop:
            break
        for cell in plan.next["echo"]["cells"]:
            j = int(str(cell[0])[1:])
            values[j] += _draw(rng, residuals, truths[j], precision.reps_per_round)
    return found, sum(len(v) for v in values)


def simulate(claim: Claim, where: str, runs: int, residuals: np.ndarray, *, corrected: bool = True,
             seed: int = 0) -> Rates:
    """The error rates of ``claim`` with every part's truth at ``where``."""
    rng = np.random.default_rng(seed)
    truth_holds = [holds(r, truth_at(r, where)) for r in claim.rules]
    part_r = part_n = claim_r = claim_n = 0
    reps = 0
    for _ in range(runs):
        found, taken = run_claim(claim, where, residuals, rng, corrected=corrected)
        reps += taken
        for f, ok in zip(found, truth_holds, strict=True):
            # At the bound both verdicts are unsupported; beside it, the one
            # that contradicts the truth.
            part_r += f.outcome is Outcome.REPRODUCED and (where == "bound" or not ok)
            part_n += f.outcome is Outcome.NOT_REPRODUCED and (where == "bound" or ok)
        verdict = combine(found)
        claim_r += verdict is Outcome.REPRODUCED and (where == "bound" or not all(truth_holds))
        claim_n += verdict is Outcome.NOT_REPRODUCED and (where == "bound" or all(truth_holds))
    parts = runs * len(claim.rules)
    return Rates(runs, part_r / parts, part_n / parts, claim_r / runs, claim_n / runs, reps / runs / len(claim.rules))


def table(runs: int, corrected: bool, claims: Sequence[Claim] = CLAIMS, seed: int = 0) -> list[dict[str, object]]:
    residuals = reference_residuals()
    rows = []
    for claim in claims:
        for where in ("bound", "0.9x", "1.1x"):
            r = simulate(claim, where, runs, residuals, corrected=corrected, seed=seed)
            rows.append({"claim": claim.name, "truth": where, "runs": runs,
                         "part false reproduced": r.part_false_reproduced,
                         "part false not reproduced": r.part_false_not_reproduced,
                         "claim false reproduced": r.claim_false_reproduced,
                         "claim false not reproduced": r.claim_false_not_reproduced,
                         "repetitions per part": r.mean_reps})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m iolab.analysis.error_rates", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=400, help="simulated runs per claim and truth (default 400)")
    ap.add_argument("--uncorrected", action="store_true", help="the procedure before error control")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    for row in table(args.runs, not args.uncorrected, seed=args.seed):
        print("  ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
