"""The spread between runs of each decision ratio, over crates: what the
pooled verdict's sign test sees.

    python benchmarks/run_spread.py CRATE [CRATE ...] [--min-runs 4]

The crates' findings are pooled as ``./repro verdicts`` pools them (one
gate over the runs, one name per part). For every counted part that at
least ``--min-runs`` runs measured: the sd of the log of the runs' medians
(each run's median over its repetitions), with its 90 % interval
(chi-square on runs - 1 degrees of freedom), and the kernel boots (launches)
the runs came from. Then the median of those sds and how many parts are
at or below the 0.05 that issue 66 aims for.

A run's median carries its own repetitions' noise as well as the occasion,
so this is the spread the test works against, not a pure occasion
variance. Runs of one launch share its vCPU placement: their spread is
the spread between runs on one VM, which says nothing of the spread
between launches (iolab.analysis.planning counts launches for the same
reason).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from iolab.analysis import pooled
from iolab.analysis.stats import sd_interval
from iolab.archive import pooling

GOAL = 0.05


@dataclass(frozen=True)
class PartSpread:
    claim: str
    part: str
    runs: int
    launches: int
    sd: float
    low: float
    high: float


def part_spreads(
    parts: Sequence[pooled.PooledPart], launch_of: Callable[[str], str], min_runs: int
) -> list[PartSpread]:
    """Each counted part's sd of log run medians, with its 90 % interval,
    where at least ``min_runs`` runs measured it (all medians positive)."""
    out = []
    for p in parts:
        values = [v.value for v in p.values]
        if p.context or len(values) < min_runs or not all(v > 0 and math.isfinite(v) for v in values):
            continue
        sd, low, high = sd_interval(list(np.log(values)))
        launches = len({launch_of(v.run) for v in p.values})
        out.append(PartSpread(p.claim, p.part, len(values), launches, sd, low, high))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("crates", nargs="+", type=Path, help="crates written by ./repro archive")
    parser.add_argument("--min-runs", type=int, default=4, help="the fewest runs a part needs (default 4)")
    args = parser.parse_args(argv)
    if args.min_runs < 2:
        parser.error("--min-runs must be at least 2: an sd needs two runs")
    runs = pooling.load_runs(args.crates)
    launch = pooling.run_launches(runs)
    for r in runs:
        boot = launch(r.ident.ident)
        shown = "its own" if boot == r.ident.ident else boot[:8]
        print(f"run {r.ident.ident} ({r.crate.name}, measured {r.run.measured}): launch {shown}")
    parts = pooling.pool_runs(runs, "planned")
    rows = part_spreads(parts, launch, args.min_runs)
    if not rows:
        print(f"no counted part was measured by {args.min_runs} runs or more")
        return 1
    print(f"\n{'claim':5} {'runs':>4} {'launches':>8} {'sd of log run medians [90 %]':>30}  part")
    for row in sorted(rows, key=lambda r: (r.claim, -r.sd)):
        print(
            f"{row.claim:5} {row.runs:4d} {row.launches:8d} {row.sd:10.3f} [{row.low:.3f}, {row.high:.3f}]"
            f"        {row.part[:90]}"
        )
    sds = [r.sd for r in rows]
    print(
        f"\n{len(rows)} counted parts: median sd {float(np.median(sds)):.3f} "
        f"(range {min(sds):.3f}-{max(sds):.3f}); {sum(s <= GOAL for s in sds)} at or below {GOAL}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
