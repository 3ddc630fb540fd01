"""How often a verdict about this machine is wrong when adaptive precision
adds rounds (the paper overlay), by simulation, under the drift these
machines show within a launch: per-repetition values drawn from the
reference run's residuals, plus a random effect per round or a trend per
round, with the true median placed on a claim's bound; then the real
verdict code (findings, the error budget, Holm over a claim's parts) and
the real planner of adaptive precision, round after round, as the paper
overlay runs them. The verdict at a fixed number of repetitions, with the
lag structure and the runs of one launch, is iolab.procedure.machine_errors'.

    python -m iolab.procedure.precision_errors [--runs N] [--procedure NAME] [--scenario NAME]

Besides the package's procedure, broken ones serve as negative controls: a
test that passes them proves nothing (``PROCEDURES``).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

from ..claims import evidence
from ..claims.evidence import Budget
from ..claims.findings import finding
from ..claims.verdicts import Finding, Outcome, Rule, combine, settle
from ..planning.precision import plan_round
from ..settings import PrecisionSettings

# The paper overlay's rounds (config/overlays/paper.yaml).
PAPER_PRECISION = PrecisionSettings(enabled=True, budget_minutes=30, reps_per_round=3, max_rounds=10)
# A trend of 2 % per round, either way: a machine warming up or cooling down.
TREND = 0.02


@dataclass(frozen=True)
class Claim:
    """A synthetic claim: its parts' rules (all parts of one truth) and its
    round-0 repetitions."""

    name: str
    rules: tuple[Rule, ...]
    repeats: int = 6


# The shapes of the real claims: U1's 12 parts (six cells, each
# non-inferiority on requests/s and equivalence on load); C2's three
# one-sided parts; a single-part claim. Round 0 at the repetitions that make
# every outcome reachable (iolab.claims.evidence.reps_to_reach).
U1_LIKE = Claim(
    "U1-like",
    tuple(r for _ in range(6) for r in (Rule("above", 0.95), Rule("within", 1.0, 0.10))),
    evidence.reps_to_reach(12, evidence.ADAPTIVE),
)
C2_LIKE = Claim(
    "C2-like", (Rule("above", 1.0),) * 2 + (Rule("below", 1.05),), evidence.reps_to_reach(3, evidence.ADAPTIVE)
)
ONE_PART = Claim("one part", (Rule("above", 1.0),), evidence.reps_to_reach(1, evidence.ADAPTIVE))
CLAIMS = (ONE_PART, C2_LIKE, U1_LIKE)


@dataclass(frozen=True)
class Scenario:
    """How values drift within a run: a random effect per round (log sd)
    and a trend per round (relative)."""

    name: str
    round_sd: float = 0.0
    trend: float = 0.0


def scenarios(round_sd: float) -> tuple[Scenario, ...]:
    """iid values; a per-round random effect of the measured size; a trend
    of +-2 % per round."""
    return (
        Scenario("iid"),
        Scenario("round effect", round_sd=round_sd),
        Scenario("trend -2 %", trend=-TREND),
        Scenario("trend +2 %", trend=TREND),
    )


@dataclass(frozen=True)
class Procedure:
    """A verdict procedure. The package's: ``PROCEDURES["iolab"]``; the rest
    are broken on purpose, each in one way."""

    name: str
    budget: Budget
    holm: bool = True  # Holm over a claim's parts for "not reproduced"
    rounds: bool = True  # False: every value counted as planned in advance, re-checked each round
    t_interval: bool = False  # a plain t interval of the log values instead of the sign tests

    def __str__(self) -> str:
        return self.name


PROCEDURES = {
    p.name: p
    for p in (
        Procedure("iolab", evidence.ADAPTIVE),
        # Holm, with a fixed-sample interval re-checked every round.
        Procedure("holm, fixed-sample re-checked", Budget(evidence.ADAPTIVE.tests, 0.0), rounds=False),
        # The anytime-valid tests without Holm over a claim's parts.
        Procedure("anytime, no holm", evidence.ADAPTIVE, holm=False),
        # A plain 95 % t interval re-checked every round, no Holm.
        Procedure("t interval re-checked", Budget(evidence.ALPHA_SIDE, 0.0), holm=False, rounds=False, t_interval=True),
        # No correction at all: the fixed-sample interval every round, no Holm.
        Procedure("uncorrected", Budget(evidence.ALPHA_SIDE, 0.0), holm=False, rounds=False),
    )
}


class TFinding(Finding):
    """A finding judged by a plain t interval of its log values (a broken
    procedure: parametric, re-checked every round, no adjustment)."""

    @property
    def outcome(self) -> Outcome:
        if self.rule is None or len(self.per_rep) < 2:
            return Outcome.UNDECIDED if self.rule is not None else Outcome.NOT_TESTABLE
        x = np.log(np.asarray(self.per_rep, dtype=float))
        half = float(sps.t.ppf(1 - self.budget.tests, x.size - 1)) * float(x.std(ddof=1)) / math.sqrt(x.size)
        return self.rule.judge(math.exp(x.mean() - half), math.exp(x.mean() + half))

    @property
    def needed(self) -> int | None:
        return None


def reference_residuals() -> np.ndarray:
    """Log deviations of the shipped reference data's paired echo ratios
    (every preset against epoll, requests/s) from each cell's median:
    how far one repetition's ratio strays from the middle of its cell."""
    from .. import tables
    from ..rooms.echo import summaries as echostats

    # The shipped data, never "auto": a checkout's latest run would make the
    # simulated rates (and the negative controls' failures) depend on it.
    echo = tables.load("echo", tables.REFERENCE)
    out = []
    for preset in sorted(set(echo["preset"]) - {"epoll"}):
        r = echostats.paired_ratios(echo, preset, "epoll")
        for _, g in r.groupby(["node", *echostats.SETUP, "connections", "bytes"]):
            v = np.log(g["ratio"].to_numpy(float))
            if v.size >= 3:
                out.append(v - np.median(v))
    pooled = np.concatenate(out)
    # Centred on its median, so that the true median of a draw is exact.
    return pooled - np.median(pooled)


def measured_round_sd() -> float:
    """A round's effect (log sd), at the most the lag structure measured
    within runs allows: repetitions that shared a round's effect of sd tau
    over noise of sd sigma would correlate by tau^2 / (tau^2 + sigma^2),
    and the excess lag-1 autocorrelation measured within runs is at most
    ``RHO_HIGH`` (iolab.procedure.machine_errors). Sigma: the robust sd
    (1.4826 MAD) of the reference residuals this simulation draws: the
    sign tests see the bulk of the values, not their outliers, and the
    residuals' plain sd (0.26) is twice their robust one (0.15)."""
    from .machine_errors import RHO_HIGH

    res = reference_residuals()
    sigma = 1.4826 * float(np.median(np.abs(res - np.median(res))))
    return sigma * math.sqrt(RHO_HIGH / (1 - RHO_HIGH))


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


@dataclass
class Rates:
    runs: int
    part_false_reproduced: float
    part_false_not_reproduced: float
    claim_false_reproduced: float
    claim_false_not_reproduced: float
    claim_reproduced: float
    claim_not_reproduced: float
    mean_reps: float


def _draw(rng: np.random.Generator, residuals: np.ndarray, truth: float, n: int, shift: float) -> list[float]:
    # Resampled residuals, smoothed a little so that ties are rare; ``shift``:
    # the round's effect on the log scale.
    e = rng.choice(residuals, n) + rng.normal(0, 1e-3, n)
    return (truth * np.exp(e + shift)).tolist()


def _settle(found: list[Finding], p: Procedure, round_of_rep: dict[int, int]) -> None:
    """The procedure's statistics on one claim's findings."""
    settle(found, p.budget, 0.0, {"echo": round_of_rep} if p.rounds else {}, predict=False)
    if not p.holm:
        for f in found:
            f.family, f.p_fails_adjusted = 1, None


def run_claim(
    claim: Claim,
    where: str,
    residuals: np.ndarray,
    rng: np.random.Generator,
    *,
    procedure: Procedure,
    scenario: Scenario,
    precision: PrecisionSettings = PAPER_PRECISION,
) -> tuple[list[Finding], int]:
    """One claim through every round the planner asks for; its final
    findings and the repetitions taken. Repetitions are numbered as the
    workflow numbers them: round 0's 1..n0, then each round's next ones,
    whichever parts it repeats."""
    truths = [truth_at(r, where) for r in claim.rules]
    effects = [
        float(rng.normal(0, scenario.round_sd)) if scenario.round_sd else 0.0 for _ in range(precision.max_rounds + 1)
    ]

    def shift(round_: int) -> float:
        return effects[round_] + round_ * math.log1p(scenario.trend)

    values = [_draw(rng, residuals, t, claim.repeats, shift(0)) for t in truths]
    reps = [list(range(1, claim.repeats + 1)) for _ in truths]
    round_of_rep = {r: 0 for r in range(1, claim.repeats + 1)}
    kind = TFinding if procedure.t_interval else Finding
    for round_ in range(precision.max_rounds + 1):
        found = []
        for j, rule in enumerate(claim.rules):
            f = finding(
                "X", f"part {j}", pd.Series(values[j], index=reps[j]), rule, decides={"echo": [[f"p{j}", 0, 0]]}
            )
            found.append(kind(**{k: getattr(f, k) for k in f.__dataclass_fields__}))
        _settle(found, procedure, round_of_rep)
        plan = plan_round(
            found,
            round_=round_,
            repeats=claim.repeats,
            precision=precision,
            spent_seconds=0.0,
            seconds_per_rep={"echo": 0.0},
            seconds_per_cell=0.0,
        )
        if plan.stop:
            break
        new = plan.next["echo"]["reps"]
        round_of_rep.update({r: round_ + 1 for r in new})
        for cell in plan.next["echo"]["cells"]:
            j = int(str(cell[0])[1:])
            values[j] += _draw(rng, residuals, truths[j], len(new), shift(round_ + 1))
            reps[j] += new
    return found, sum(len(v) for v in values)


def simulate(
    claim: Claim,
    where: str,
    runs: int,
    residuals: np.ndarray,
    *,
    procedure: Procedure = PROCEDURES["iolab"],
    scenario: Scenario = Scenario("iid"),
    seed: int = 0,
) -> Rates:
    """The error rates of ``claim`` with every part's truth at ``where``."""
    rng = np.random.default_rng(seed)
    truth_holds = [holds(r, truth_at(r, where)) for r in claim.rules]
    part_r = part_n = claim_r = claim_n = any_r = any_n = 0
    reps = 0
    for _ in range(runs):
        found, taken = run_claim(claim, where, residuals, rng, procedure=procedure, scenario=scenario)
        reps += taken
        for f, ok in zip(found, truth_holds, strict=True):
            # At the bound both verdicts are unsupported (each test's null
            # holds there); beside it, the one that contradicts the truth.
            part_r += f.outcome is Outcome.REPRODUCED and (where == "bound" or not ok)
            part_n += f.outcome is Outcome.NOT_REPRODUCED and (where == "bound" or ok)
        verdict = combine(found)
        any_r += verdict is Outcome.REPRODUCED
        any_n += verdict is Outcome.NOT_REPRODUCED
        claim_r += verdict is Outcome.REPRODUCED and (where == "bound" or not all(truth_holds))
        claim_n += verdict is Outcome.NOT_REPRODUCED and (where == "bound" or all(truth_holds))
    parts = runs * len(claim.rules)
    return Rates(
        runs,
        part_r / parts,
        part_n / parts,
        claim_r / runs,
        claim_n / runs,
        any_r / runs,
        any_n / runs,
        reps / runs / len(claim.rules),
    )


def within_budget(rate: float, runs: int, side: float = evidence.ALPHA_SIDE) -> bool:
    """At most the stated rate, allowing two Monte Carlo standard errors at it."""
    return rate <= side + 2 * math.sqrt(side * (1 - side) / runs)


def table(
    runs: int,
    procedure: Procedure,
    claims: Sequence[Claim] = CLAIMS,
    seed: int = 0,
    scenario_names: Sequence[str] | None = None,
    round_sd: float | None = None,
) -> list[dict[str, object]]:
    """Rates per scenario and claim shape. ``round_sd``: the round effect of
    the "round effect" scenario (default: the measured one)."""
    residuals = reference_residuals()
    sd = measured_round_sd() if round_sd is None else round_sd
    rows = []
    for scenario in scenarios(sd):
        if scenario_names and scenario.name not in scenario_names:
            continue
        for claim in claims:
            r = simulate(claim, "bound", runs, residuals, procedure=procedure, scenario=scenario, seed=seed)
            rows.append(
                {
                    "procedure": procedure.name,
                    "scenario": scenario.name,
                    "claim": claim.name,
                    "runs": runs,
                    "part false reproduced": r.part_false_reproduced,
                    "part false not reproduced": r.part_false_not_reproduced,
                    "claim false reproduced": r.claim_false_reproduced,
                    "claim false not reproduced": r.claim_false_not_reproduced,
                    "repetitions per part": r.mean_reps,
                    "holds": all(
                        within_budget(float(r.__dict__[k]), runs)
                        for k in (
                            "part_false_reproduced",
                            "part_false_not_reproduced",
                            "claim_false_reproduced",
                            "claim_false_not_reproduced",
                        )
                    ),
                }
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m iolab.procedure.precision_errors",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--runs", type=int, default=400, help="simulated runs per claim and scenario (default 400)")
    ap.add_argument("--procedure", choices=sorted(PROCEDURES), default="iolab")
    ap.add_argument("--scenario", action="append", help="only this scenario (repeatable)")
    ap.add_argument("--claim", action="append", choices=[c.name for c in CLAIMS], help="only this claim shape")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print(f"round effect sd (log) {measured_round_sd():.4f}; stated rate {evidence.ALPHA_SIDE:.3f} each way")
    claims = [c for c in CLAIMS if not args.claim or c.name in args.claim]
    for row in table(
        args.runs,
        PROCEDURES[args.procedure],
        claims,
        seed=args.seed,
        scenario_names=args.scenario,
    ):
        print("  ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
