"""How often a verdict about **this machine** is wrong, and how often it is
right, by simulation in the world one launch shows.

The verdict (iolab.claims.verdicts: exact sign tests on a run's
repetitions, Holm over a claim's parts, 2.5 % each way) is about the launch
the run measured, over the run's time. Its world, measured from runs of
this machine kind (benchmarks/variance_components.py):

- a part's repetitions scatter about the run's level (``REP_SD``, log sd;
  it sets the power, not the error: the sign test is distribution-free);
- in the order measured they follow the run's lag structure (``RHO``, the
  excess lag-1 autocorrelation over shuffled repetitions: a drift or a
  level shift inside a run), here an AR(1) process;
- two parts of a claim measured in the same cells move together within a
  repetition (``SHARE``, the correlation of their noise);
- runs of one launch differ by ``RUN_SD`` (log sd): zero where the
  verdict's population is the launch over the run's own time, the measured
  value where it must hold for another run of the same launch.

Innovations come from a normal law or a skewed one (a fifth of the values
2.5 sd out, and its mirror), scaled to sd 1 and centred on their median,
so that the truth is each part's median. The truth sits at each claim
shape's least-favourable configuration (iolab.procedure.kind_errors.truths):
for a wrong "reproduced", one part on its bound on the failing side and the
others well inside; for a wrong "not reproduced", every part on its bound
on the holding side.

Beside the package's procedure, broken ones serve as negative controls,
each in the same world (``CONTROLS``): Holm dropped, 5 % per side, every
repetition counted twice, and a verdict that reads one launch as the
machine kind (the same test, judged against the kind's median in a world
where launches differ by ``LAUNCH_SD``).

    python -m iolab.procedure.machine_errors [--sims N]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..claims import evidence
from ..claims.evidence import Budget
from ..claims.verdicts import Rule, decide
from .kind_errors import LAWS, SHAPES, Law, Shape, occasion, truths

# Measured on this machine kind, over the runs of data/records/ (3 launches,
# 4 runs; benchmarks/variance_components.py; docs/decisions/0026):
# a decision ratio's repetitions about their run's level: the median over
# 79 (part, run) series of the sd of their logs (quartiles 0.08-0.19);
REP_SD = 0.12
# the excess lag-1 autocorrelation within a run: -0.026 [-0.077, +0.025]
# on the logs, -0.041 [-0.096, +0.015] on the ranks (90 %): none, and the
# larger upper end;
RHO = 0.0
RHO_HIGH = 0.025
# runs of one launch about the launch's level: 0.000 [0, 0.043] for the echo
# ratios, [0, 0.061] for the cost model's (90 %): none, and the upper end;
RUN_SD = 0.0
RUN_SD_HIGH = 0.06
# launches about the machine kind's level: the cost model's ratios, 0.069
# [0, 0.112] (the echo ratios' 0.000 [0, 0.040] rests on 2-3 launches).
LAUNCH_SD = 0.07
# The correlation of two parts' noise in one repetition (both extremes are
# simulated: parts measured in the same cells, and apart).
SHARE = 0.5
# Repetitions a default run plans, and the paper overlay's.
REPS = (6, 12)
# The repetitions at which a source's own table is tried.
SOURCE_LADDER = (6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192)
# How far beyond the bound power is asked at.
BEYOND = (0.10, 0.25)


@dataclass(frozen=True)
class World:
    """How one launch's runs scatter (module docstring)."""

    law: Law = "normal"
    rho: float = RHO
    run_sd: float = 0.0
    rep_sd: float = REP_SD
    share: float = SHARE
    launch_sd: float = 0.0  # a launch's effect about the machine kind's level (the kind's world)

    def text(self) -> str:
        parts = [f"{self.law}", f"rep sd {self.rep_sd:g}", f"lag-1 {self.rho:+.2f}", f"parts share {self.share:g}"]
        if self.run_sd:
            parts.append(f"run sd {self.run_sd:g}")
        if self.launch_sd:
            parts.append(f"launch sd {self.launch_sd:g}")
        return ", ".join(parts)


def worlds(run_sd: float = RUN_SD) -> list[World]:
    """The worlds the guarantee must hold in: each law at the measured lag
    and at its upper end, with the parts' noise shared and apart, for the
    verdict's population (the launch over the run's own time) and for
    another run of the launch at the measured spread of runs within one
    (``run_sd``; at its upper end the same worlds say how far a verdict
    carries to a re-run of the launch: ``another_run``)."""
    out = []
    for law in LAWS:
        for rho in (RHO, RHO_HIGH):
            for share in (SHARE, 0.0):
                for sd in dict.fromkeys((0.0, run_sd)):
                    out.append(World(law, rho, sd, REP_SD, share))
    return out


def another_run() -> list[World]:
    """The worlds of a re-run of the same launch at the upper end of the
    runs' measured spread: what the verdict is not guaranteed for."""
    return [w for w in worlds(RUN_SD_HIGH) if w.run_sd]


def _ar(innovations: np.ndarray, rho: float) -> np.ndarray:
    """An AR(1) series along the last axis, stationary with the innovations' sd."""
    out = np.empty_like(innovations)
    out[..., 0] = innovations[..., 0]
    scale = math.sqrt(max(1 - rho * rho, 0.0))
    for i in range(1, innovations.shape[-1]):
        out[..., i] = rho * out[..., i - 1] + scale * innovations[..., i]
    return out


def draw(part_truths: Sequence[float], n: int, sims: int, world: World, rng: np.random.Generator) -> list[np.ndarray]:
    """Per part, (sims, n) repetitions: truth x the launch's and the run's
    effects x the run's noise (lag-structured, shared between the parts)."""
    launch = occasion("normal", world.launch_sd, (sims, 1), rng) if world.launch_sd else 0.0
    run = rng.normal(0.0, world.run_sd, (sims, 1)) if world.run_sd else 0.0
    common = occasion(world.law, 1.0, (sims, n), rng)
    out = []
    for t in part_truths:
        own = occasion(world.law, 1.0, (sims, n), rng)
        mixed = math.sqrt(world.share) * common + math.sqrt(1 - world.share) * own
        # Centred again on its median so that the truth is the part's median.
        noise = _ar(mixed, world.rho)
        noise -= np.median(noise)
        out.append(t * np.exp(launch + run + world.rep_sd * noise))
    return out


Procedure = Callable[[Shape, list[np.ndarray]], tuple[np.ndarray, np.ndarray]]


def package(shape: Shape, values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The package's verdict about this machine, at a fixed count."""
    return decide(shape.rules, values, evidence.FIXED)


def no_holm(shape: Shape, values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Broken: "not reproduced" when any part fails, unadjusted."""
    return decide(shape.rules, values, evidence.FIXED, holm=False)


def five_percent(shape: Shape, values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Broken: 5 % per side."""
    return decide(shape.rules, values, Budget(2 * evidence.ALPHA_SIDE, 0.0))


def counted_twice(shape: Shape, values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Broken: every repetition counted twice (a raw file read twice)."""
    return decide(shape.rules, [np.repeat(v, 2, axis=-1) for v in values], evidence.FIXED)


@dataclass(frozen=True)
class Control:
    """A broken procedure, and how it changes the world it is judged in."""

    procedure: Procedure
    world: Callable[[World], World] = lambda w: w


CONTROLS: dict[str, Control] = {
    "Holm dropped": Control(no_holm),
    "5 % per side": Control(five_percent),
    "each repetition counted twice": Control(counted_twice),
    # The package's own test, read as a verdict about the machine kind: the
    # truth is the kind's median, and this launch sits LAUNCH_SD from it.
    "one launch read as the machine kind": Control(package, lambda w: replace(w, launch_sd=LAUNCH_SD)),
}


@dataclass(frozen=True)
class Rate:
    rate: float
    sims: int

    @property
    def se(self) -> float:
        return math.sqrt(max(self.rate * (1 - self.rate), 1e-12) / self.sims)

    def holds(self) -> bool:
        """Within 2.5 %, allowing the simulation's own error (two SEs)."""
        return self.rate <= evidence.ALPHA_SIDE + 2 * self.se


def error_rates(
    procedure: Procedure, shape: Shape, n: int, world: World, sims: int = 4000, seed: int = 0
) -> tuple[Rate, Rate]:
    """(wrong reproduced, wrong not reproduced) with n repetitions, each in
    the shape's least-favourable configuration."""
    rng = np.random.default_rng(seed)
    out = []
    for wrong in ("reproduced", "not reproduced"):
        held, failed = procedure(shape, draw(truths(shape, wrong), n, sims, world, rng))
        out.append(Rate(float(np.mean(held if wrong == "reproduced" else failed)), sims))
    return out[0], out[1]


def worst(procedure: Procedure, shape: Shape, n: int, worlds_: Sequence[World], sims: int) -> tuple[Rate, World]:
    """The highest wrong-verdict rate over ``worlds_``, and the world it came from."""
    found = []
    for i, w in enumerate(worlds_):
        a, b = error_rates(procedure, shape, n, w, sims, seed=i)
        found += [(a, w), (b, w)]
    return max(found, key=lambda x: x[0].rate)


def power(
    shape: Shape, n: int, beyond: float, world: World = World(), sims: int = 4000, seed: int = 1
) -> tuple[float, float]:
    """(reproduced when it holds, not reproduced when it fails) with n
    repetitions: every part ``beyond`` past its bound on the claim's side,
    or the first part as far past it on the other."""
    rng = np.random.default_rng(seed)

    def holding(r: Rule) -> float:
        return r.bound * (1 + beyond) if r.kind == "above" else r.bound * (1 - beyond) if r.kind == "below" else r.bound

    def failing(r: Rule) -> float:
        if r.kind == "above":
            return r.bound * (1 - beyond)
        if r.kind == "below":
            return r.bound * (1 + beyond)
        return r.band[0] * (1 - beyond)

    ok = [holding(r) for r in shape.rules]
    bad = [failing(shape.rules[0]), *ok[1:]]
    held, _ = package(shape, draw(ok, n, sims, world, rng))
    _, failed = package(shape, draw(bad, n, sims, world, rng))
    return float(np.mean(held)), float(np.mean(failed))


def source_reps(claim: str, spread: float = REP_SD, runs: int = 200, goal: float = 0.8) -> int | None:
    """The fewest repetitions (of ``SOURCE_LADDER``) at which a faithful
    replication of ``claim``'s source table, at ``spread`` between
    repetitions, reaches its source's verdict about this machine
    (reproduced) in ``goal`` of runs; None for a claim without a table or
    beyond the ladder."""
    from ..claims import faithful

    for n in SOURCE_LADDER:
        share = faithful.reproduce_share(claim, n, spread, adaptive=False, runs=runs)
        if share is None:
            return None
        if share >= goal:
            return n
    return None


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m iolab.procedure.machine_errors", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=4000, help="simulated runs per world and shape (default 4000)")
    args = ap.parse_args(argv)
    every = worlds()
    print(f"worst wrong verdict over {len(every)} worlds (bound 2.5 % + 2 SE), {args.sims} runs each:")
    for n in REPS:
        for shape in SHAPES:
            rate, w = worst(package, shape, n, every, args.sims)
            verdict = "holds" if rate.holds() else "FAILS"
            print(f"  package  n={n:2} {shape.name:9} {rate.rate:6.2%} ({verdict}; {w.text()})")
    for n in REPS:
        for shape in SHAPES:
            rate, w = worst(package, shape, n, another_run(), args.sims)
            print(f"  another run of the launch (run sd {RUN_SD_HIGH}) n={n:2} {shape.name:9} {rate.rate:6.2%}")
    for name, control in CONTROLS.items():
        for shape in SHAPES:
            rate, w = worst(control.procedure, shape, 6, [control.world(x) for x in every], args.sims)
            print(f"  {name:36} n=6 {shape.name:9} {rate.rate:6.2%} ({'holds' if rate.holds() else 'FAILS'})")
    print(f"power (reproduce / refute) at rep sd {REP_SD}:")
    for shape in SHAPES:
        for n in REPS:
            row = "  ".join(f"{b:.0%} beyond: " + "/".join(f"{x:.0%}" for x in power(shape, n, b)) for b in BEYOND)
            print(f"  {shape.name:9} n={n:2}  {row}")
    print("the sources' own tables, faithfully replicated: repetitions to their verdict (80 % of runs)")
    for claim in ("C1", "C2", "C3", "U1", "U2", "U3"):
        print(f"  {claim}: {source_reps(claim)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
