"""How often a verdict about the machine kind, pooled across launches, is
wrong, and how often it is right, by simulation in the world these
machines show: every launch carries an occasion effect that persists
through all its runs and repetitions and is shared by every part of a
claim measured on it (or, the other extreme, drawn apart for each part),
of the between-launch spread of paired ratios (about 0.10 in log,
DESIGN.md) and at 2x and 3x it, from a normal law and from skewed ones (a
slow tail: a fifth of the launches sit 2.5 sd out; and its mirror). Each
part's launch median adds its own imprecision (``WITHIN``). The truth is put
in each claim shape's least-favourable configuration: for a wrong
"reproduced", one part exactly on its bound on the failing side and every
other part well inside (the claim then fails by that part alone); for a
wrong "not reproduced", every part exactly on its bound on the holding
side.

    python -m iolab.procedure.kind_errors [--sims N] [--runs K]

The package's procedures (``pooled.decide``: exact or anytime-valid sign
tests over run medians, Holm over a claim's parts) beside broken ones, each
broken in one way, as negative controls (``CONTROLS``); ``power`` the share
decided right when the truth lies 10 / 25 / 50 % beyond the bound.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as sps

from ..claims.evidence import holm
from ..claims.kind_verdicts import ALPHA, decide, p_fails, p_holds
from ..claims.verdicts import Rule

# The between-run spread of paired ratios on these VMs (log sd), and the
# imprecision of one run's median of its repetitions (about 0.12 within a
# run over 6 repetitions).
SIGMA = 0.10
WITHIN = 0.05
Law = Literal["normal", "slow tail", "fast tail"]
LAWS: tuple[Law, ...] = ("normal", "slow tail", "fast tail")
# The slow-tail law: a fifth of the runs 2.5 sd out; centred on its median
# and scaled to sd 1, so sigma is its sd and the truth its median.
_SLOW_SHARE, _SLOW_SHIFT = 0.2, 2.5


@dataclass(frozen=True)
class Shape:
    """A claim's counted parts, as the real claims have them."""

    name: str
    rules: tuple[Rule, ...]


ONE_PART = Shape("one part", (Rule("above", 1.0),))
C2_LIKE = Shape("C2-like", (Rule("above", 1.0), Rule("above", 1.0), Rule("below", 1.05)))
U1_LIKE = Shape("U1-like", tuple(r for _ in range(6) for r in (Rule("above", 0.95), Rule("within", 1.0, 0.10))))
SHAPES = (ONE_PART, C2_LIKE, U1_LIKE)


def _slow_tail_median() -> float:
    # The mixture's median, solved once: F(m) = 1/2.
    from scipy import optimize

    def cdf(m: float) -> float:
        return (1 - _SLOW_SHARE) * sps.norm.cdf(m) + _SLOW_SHARE * sps.norm.cdf(m - _SLOW_SHIFT)

    return float(optimize.brentq(lambda m: cdf(m) - 0.5, -3.0, 5.0))


_SLOW_MEDIAN = _slow_tail_median()
_SLOW_SD = math.sqrt(1 + _SLOW_SHARE * (1 - _SLOW_SHARE) * _SLOW_SHIFT**2)


def occasion(law: Law, sigma: float, size: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Occasion effects (log) of sd ``sigma`` and median 0."""
    if law == "normal":
        return rng.normal(0.0, sigma, size)
    x = rng.normal(0.0, 1.0, size) + _SLOW_SHIFT * (rng.random(size) < _SLOW_SHARE)
    z = (x - _SLOW_MEDIAN) / _SLOW_SD
    return sigma * (z if law == "slow tail" else -z)


def truths(shape: Shape, wrong: Literal["reproduced", "not reproduced"], beyond: float = 0.25) -> list[float]:
    """Each part's true median (the median of its run medians) in the
    least-favourable configuration for a wrong ``wrong``."""

    def on_bound(r: Rule, holding: bool) -> float:
        if r.kind == "within":
            return r.band[0] if holding else r.band[0] * (1 - 1e-9)
        return r.bound

    def inside(r: Rule) -> float:
        if r.kind == "above":
            return r.bound * (1 + beyond)
        if r.kind == "below":
            return r.bound * (1 - beyond)
        return r.bound

    if wrong == "not reproduced":
        return [on_bound(r, True) for r in shape.rules]
    return [on_bound(r, False) if j == 0 else inside(r) for j, r in enumerate(shape.rules)]


def run_medians(
    shape_truths: Sequence[float],
    k: int,
    sims: int,
    law: Law,
    sigma: float,
    rng: np.random.Generator,
    shared: bool = True,
    within: float = WITHIN,
) -> list[np.ndarray]:
    """Per part, (sims, k) run medians: truth x the run's occasion effect x
    the run median's own imprecision. ``shared``: one occasion effect per
    run for all parts (measured in the same run); else one per part."""
    common = occasion(law, sigma, (sims, k), rng)
    out = []
    for t in shape_truths:
        a = common if shared else occasion(law, sigma, (sims, k), rng)
        out.append(t * np.exp(a + rng.normal(0.0, within, (sims, k))))
    return out


# --- procedures: the package's, and broken ones --------------------------------

Procedure = Callable[[Shape, list[np.ndarray]], tuple[np.ndarray, np.ndarray]]


def planned(shape: Shape, values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The package's, with the runs fixed in advance: the exact sign test at k."""
    return decide(shape.rules, values, "planned")


def accumulating(shape: Shape, values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The package's, looked at after every run: the anytime-valid sign test
    (its p-values only fall as runs are added, so a verdict reached at any
    look stands at the last)."""
    return decide(shape.rules, values, "accumulating")


def five_percent(shape: Shape, values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Broken: 5 % per side."""
    return decide(shape.rules, values, "planned", alpha=2 * ALPHA)


def no_holm(shape: Shape, values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Broken: "not reproduced" when any part fails, unadjusted."""
    return decide(shape.rules, values, "planned", holm=False)


def t_over_runs(shape: Shape, values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Broken under a skewed law: a t test on the log run medians, which
    tests their mean where the claim is about the typical run (the median)."""
    holds = np.stack([_t_p(r, v, "holds") for r, v in zip(shape.rules, values, strict=True)], axis=-1)
    fails = holm(np.stack([_t_p(r, v, "fails") for r, v in zip(shape.rules, values, strict=True)], axis=-1))
    held, failed = np.all(holds <= ALPHA, axis=-1), np.any(fails <= ALPHA, axis=-1)
    return held & ~failed, failed & ~held


def counted_twice(shape: Shape, values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Broken: every launch counted twice (a second run of the launch, or a
    re-zipped copy of its crate, pooled as another launch): the second run
    shares the launch's occasion and differs only by its own imprecision."""
    rng = np.random.default_rng(11)
    twice = [
        np.stack([v, v * np.exp(rng.normal(0.0, WITHIN, v.shape))], axis=-1).reshape(*v.shape[:-1], -1) for v in values
    ]
    return decide(shape.rules, twice, "planned")


def fixed_rechecked(shape: Shape, values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Broken: the fixed-sample test looked at after every run added, a
    verdict kept once reached (what a store re-judged with each new run does)."""
    k = values[0].shape[-1]
    held = np.zeros(values[0].shape[:-1], dtype=bool)
    failed = np.zeros_like(held)
    for n in range(1, k + 1):
        h, f = decide(shape.rules, [v[..., :n] for v in values], "planned")
        held |= h & ~failed
        failed |= f & ~held
    return held, failed


SINGLE_RUN_REPS = 10


def single_run(shape: Shape, values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Broken: one run's repetitions judged as if each were an occasion (no
    occasion handling at all): the sign test over the first run's
    repetitions, each its run's value with a repetition's own spread."""
    rng = np.random.default_rng(7)
    reps = [
        v[..., :1] * np.exp(rng.normal(0.0, WITHIN * math.sqrt(6), (*v.shape[:-1], SINGLE_RUN_REPS))) for v in values
    ]
    return decide(shape.rules, reps, "planned")


def _t_p(r: Rule, v: np.ndarray, side: str) -> np.ndarray:
    """The one-sided t test's p-value on the log run medians, for the claim
    holding (``side`` "holds") or failing."""
    x = np.log(v)
    n = x.shape[-1]
    se = x.std(axis=-1, ddof=1) / math.sqrt(n)

    def one(bound: float, up: bool) -> np.ndarray:
        z = (x.mean(axis=-1) - math.log(bound)) / se
        return sps.t.sf(z, n - 1) if up else sps.t.cdf(z, n - 1)

    if r.kind == "within":
        lo, hi = r.band
        if side == "holds":
            return np.maximum(one(lo, True), one(hi, False))
        return np.minimum(one(lo, False), one(hi, True))
    return one(r.bound, (r.kind == "above") == (side == "holds"))


def symmetry_z(x: np.ndarray) -> np.ndarray:
    """Miao, Gel and Gastwirth's symmetry statistic on (..., k) log run
    medians: sqrt(k) (mean - median) / J, with J the scaled mean absolute
    deviation from the median, standardised under normality (variance
    0.5708); near 0 where the run medians are symmetric."""
    k = x.shape[-1]
    med = np.median(x, axis=-1, keepdims=True)
    j = math.sqrt(math.pi / 2) * np.mean(np.abs(x - med), axis=-1)
    return math.sqrt(k) * (x.mean(axis=-1) - med[..., 0]) / np.maximum(j, 1e-300) / math.sqrt(0.5708)


def gated(gate: float) -> Procedure:
    """A t over runs where the run medians pass a symmetry check
    (|symmetry_z| <= ``gate``), the sign test otherwise, with Holm over the
    claim's parts: how much power the t buys where runs are symmetric, and
    what it costs in error where they are not (``frontier``)."""

    def procedure(shape: Shape, values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        holds, fails = [], []
        for r, v in zip(shape.rules, values, strict=True):
            symmetric = np.abs(symmetry_z(np.log(v))) <= gate
            sign_h, sign_f = p_holds(r, v, "planned"), p_fails(r, v, "planned")
            holds.append(np.where(symmetric, np.minimum(sign_h, _t_p(r, v, "holds")), sign_h))
            fails.append(np.where(symmetric, np.minimum(sign_f, _t_p(r, v, "fails")), sign_f))
        h = np.stack(holds, axis=-1)
        f = holm(np.stack(fails, axis=-1))
        held, failed = np.all(h <= ALPHA, axis=-1), np.any(f <= ALPHA, axis=-1)
        return held & ~failed, failed & ~held

    return procedure


# Symmetry gates tried for a t over runs (|z| at most this): the frontier
# between power where run medians are symmetric and error where they are not.
GATES = (0.5, 1.0, 2.0)


def frontier(sims: int, k: int = 16) -> list[tuple[str, str, float, float]]:
    """Per procedure (the sign test, the t gated at each of GATES, the t
    ungated) and claim shape: the power to reproduce a truth 10 % beyond
    its bound (normal law, sd 0.10) and the worst wrong-verdict rate over
    the 18 worlds."""
    procs: dict[str, Procedure] = {"sign test (planned)": planned}
    procs |= {f"t where |symmetry z| <= {g:g}": gated(g) for g in GATES}
    procs["t over runs, ungated"] = t_over_runs
    rows = []
    for name, proc in procs.items():
        for shape in SHAPES:
            power_r, _ = power(proc, shape, k, World(), 0.10, sims)
            worst = 0.0
            for law in LAWS:
                for mult in (1, 2, 3):
                    for shared in (True, False):
                        a, b = error_rates(proc, shape, k, World(law, SIGMA * mult, shared), sims)
                        worst = max(worst, a.rate, b.rate)
            rows.append((name, shape.name, power_r, worst))
    return rows


PROCEDURES: dict[str, Procedure] = {"planned": planned, "accumulating": accumulating}
CONTROLS: dict[str, Procedure] = {
    "5 % per side": five_percent,
    "Holm dropped": no_holm,
    "t over runs": t_over_runs,
    "runs of one launch counted as launches": counted_twice,
    "fixed-sample re-checked": fixed_rechecked,
    "a single run, no occasion handling": single_run,
}


@dataclass(frozen=True)
class World:
    law: Law = "normal"
    sigma: float = SIGMA
    shared: bool = True
    within: float = WITHIN

    def text(self) -> str:
        return f"{self.law}, sd {self.sigma:g}, occasion {'shared by' if self.shared else 'drawn apart for'} the parts"


@dataclass(frozen=True)
class Rate:
    rate: float
    sims: int

    @property
    def se(self) -> float:
        return math.sqrt(max(self.rate * (1 - self.rate), 1e-12) / self.sims)

    def holds(self) -> bool:
        """Within the 2.5 % bound, allowing the simulation's own error."""
        return self.rate <= ALPHA + 2 * self.se


def error_rates(
    procedure: Procedure, shape: Shape, k: int, world: World, sims: int = 2000, seed: int = 0
) -> tuple[Rate, Rate]:
    """(wrong reproduced, wrong not reproduced) of ``procedure`` on ``shape``
    with k runs, each in its least-favourable configuration."""
    rng = np.random.default_rng(seed)
    out = []
    for wrong in ("reproduced", "not reproduced"):
        values = run_medians(truths(shape, wrong), k, sims, world.law, world.sigma, rng, world.shared, world.within)
        held, failed = procedure(shape, values)
        out.append(Rate(float(np.mean(held if wrong == "reproduced" else failed)), sims))
    return out[0], out[1]


def power(
    procedure: Procedure, shape: Shape, k: int, world: World, beyond: float, sims: int = 2000, seed: int = 1
) -> tuple[float, float]:
    """(reproduced when it holds, not reproduced when it fails): every part
    ``beyond`` (relative) past its bound on the claim's side, or the first
    part as far past it on the other (an equivalence part: its band's
    centre, or as far outside its lower edge)."""
    rng = np.random.default_rng(seed)

    def holding(r: Rule) -> float:
        if r.kind == "above":
            return r.bound * (1 + beyond)
        if r.kind == "below":
            return r.bound * (1 - beyond)
        return r.bound

    def failing(r: Rule) -> float:
        if r.kind == "above":
            return r.bound * (1 - beyond)
        if r.kind == "below":
            return r.bound * (1 + beyond)
        return r.band[0] * (1 - beyond)

    ok = [holding(r) for r in shape.rules]
    bad = [failing(shape.rules[0]), *ok[1:]]
    held, _ = procedure(shape, run_medians(ok, k, sims, world.law, world.sigma, rng, world.shared, world.within))
    _, failed = procedure(shape, run_medians(bad, k, sims, world.law, world.sigma, rng, world.shared, world.within))
    return float(np.mean(held)), float(np.mean(failed))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m iolab.procedure.kind_errors", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=2000, help="simulated sets of runs per cell (default 2000)")
    ap.add_argument("--runs", type=int, default=16, help="runs per set (default 16)")
    ap.add_argument(
        "--frontier",
        action="store_true",
        help="only the power/error frontier of a t over runs gated by a symmetry check, beside the sign test",
    )
    args = ap.parse_args(argv)
    k = args.runs
    if args.frontier:
        print(f"power at 10 % beyond the bound (normal, sd 0.10) / worst wrong verdict over 18 worlds, {k} runs")
        for proc_name, shape_name, pw, worst_rate in frontier(args.sims, k):
            held = "holds" if worst_rate <= ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / args.sims) else "FAILS"
            print(f"  {proc_name:32} {shape_name:9} power {pw:6.1%}  worst error {worst_rate:6.2%} ({held})")
        return 0
    print(f"wrong reproduced / wrong not reproduced, {k} runs, {args.sims} sets (bound: 2.5 % + 2 SE)")
    for name, proc in {**PROCEDURES, **CONTROLS}.items():
        for shape in SHAPES:
            cells = []
            for law in LAWS:
                for mult in (1, 2, 3):
                    for shared in (True, False):
                        world = World(law, SIGMA * mult, shared)
                        a, b = error_rates(proc, shape, k, world, args.sims)
                        cells.append((world, a, b))
            worst = max(cells, key=lambda c: max(c[1].rate, c[2].rate))
            ok = all(a.holds() and b.holds() for _, a, b in cells)
            print(
                f"{name:36} {shape.name:9} worst {worst[1].rate:6.2%} / {worst[2].rate:6.2%} "
                f"({worst[0].text()}) {'holds' if ok else 'FAILS'}"
            )
    print("\npower (reproduce / refute), normal, sd 0.10, the occasion shared:")
    for shape in SHAPES:
        for beyond in (0.10, 0.25, 0.50):
            row = [
                f"k={n}: {'/'.join(f'{x:.0%}' for x in power(planned, shape, n, World(), beyond, args.sims))}"
                for n in (1, 4, 8, 16)
            ]
            print(f"  {shape.name:9} {beyond:.0%} beyond: " + "  ".join(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
