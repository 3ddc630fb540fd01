"""Do the single-run prediction intervals cover a re-run as often as they
say? Checked on archived runs of distinct identity, each held out in turn.

    python -m iolab.archive.calibration CRATE.zip CRATE.zip CRATE.zip [...] [--json OUT]

For every ordered pair of runs (A, B): B's median of each quantity A
recorded with its repetitions is checked against A's prediction interval
for it at 50, 80, 90, 95 and 99 %, where the between-occasion spread is
estimated (iolab.estimation.occasion_spread) from every run except B, so that the
run being predicted never informs its own interval. Each quantity is
judged in its declared kind's group; a quantity whose group the other runs
do not cover has no interval and is counted apart. The answer is the share
of checks inside, per level and per kind: a 95 % interval that holds a
re-run 92-98 % of the time is calibrated. Crates are checked first and a
run counts once (iolab.archive.identity).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import atomic
from ..estimation import occasion_spread as occasions
from .pooling import PooledRun, load_runs
from .untrusted import CrateError, shown

LEVELS = (0.50, 0.80, 0.90, 0.95, 0.99)
# What a calibrated 95 % interval holds of re-runs.
GOAL_95 = (0.92, 0.98)


@dataclass(frozen=True)
class Quantity:
    group: str
    kind: str
    values: tuple[float, ...]


def quantities(numbers: Mapping[str, Any]) -> dict[str, Quantity]:
    """Every quantity a run recorded with its repetitions, in its group:
    numbers (by key) and claim parts (by "claim: part"); what has no
    declared kind on a log scale is left out."""
    out: dict[str, Quantity] = {}
    for (group, key), logs in occasions.observations(numbers).items():
        out[key] = Quantity(group, group.rsplit(":", 1)[-1], tuple(float(v) for v in np.exp(logs)))
    return out


@dataclass
class Coverage:
    """Checks inside, and made, per level; per kind as well."""

    inside: dict[float, int] = field(default_factory=lambda: dict.fromkeys(LEVELS, 0))
    # Misses at 95 %: the re-run above the interval, and below it (a skew
    # between occasions shows as one outweighing the other).
    above: int = 0
    below: int = 0
    checked: int = 0
    by_kind: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    unknown: int = 0  # quantities whose group the other runs did not cover

    def share(self, level: float) -> float:
        return self.inside[level] / self.checked if self.checked else math.nan


def coverage(runs: Sequence[Mapping[str, Any]], with_occasion: bool = True) -> Coverage:
    """Leave-one-out coverage over ``runs`` (each a numbers file), at
    ``LEVELS``; the per-kind counts are at 95 %. ``with_occasion`` False:
    the same intervals without the occasion term, each run's repetitions
    alone (what an interval that ignores the occasion would hold)."""
    if len(runs) < 3:
        raise ValueError(
            f"{len(runs)} distinct run(s): calibration needs at least 3 (two to estimate the spread "
            "without the run that is predicted, and that run)"
        )
    per_run = [quantities(r) for r in runs]
    medians = [{k: occasions.RunMedian.of(q.values, seed=0) for k, q in qs.items()} for qs in per_run]
    out = Coverage()
    for b in range(len(runs)):
        others = [r for i, r in enumerate(runs) if i != b]
        try:
            spreads = occasions.estimate(others)
        except ValueError:
            continue
        for a, qs in enumerate(per_run):
            if a == b:
                continue
            for key, q in qs.items():
                theirs = per_run[b].get(key)
                mine = medians[a][key]
                if theirs is None or mine is None or not mine.logs:
                    continue
                spread = spreads.get(q.group)
                if spread is None:
                    out.unknown += 1
                    continue
                value = float(np.median(theirs.values))
                out.checked += 1
                for level in LEVELS:
                    low, high = mine.interval(spread, level, within_only=not with_occasion)
                    if low <= value <= high:
                        out.inside[level] += 1
                        if level == 0.95:
                            out.by_kind[q.kind][0] += 1
                    elif level == 0.95:
                        out.above += value > high
                        out.below += value < low
                out.by_kind[q.kind][1] += 1
    return out


def report(runs: Sequence[PooledRun], c: Coverage) -> list[str]:
    lines = [f"{len(runs)} run(s), each counted once, each held out in turn:"]
    lines += [f"  run {r.ident.ident}: {shown(r.crate.name, 80)}, measured {r.run.measured[:16] or '?'}" for r in runs]
    lines.append(
        f"{c.checked} checks (a run's median against another run's prediction interval; {c.unknown} more had "
        "no estimate of their kind's spread from the other runs)"
    )
    lines.append("  level   inside")
    for level in LEVELS:
        lines.append(f"  {level:5.0%}   {c.share(level):6.1%}")
    lines.append("  at 95 %, by kind: " + ", ".join(f"{k} {i}/{n}" for k, (i, n) in sorted(c.by_kind.items())))
    lines.append(f"  at 95 %, misses above the interval {c.above}, below it {c.below}")
    lo, hi = GOAL_95
    share = c.share(0.95)
    verdict = "calibrated" if lo <= share <= hi else "too narrow" if share < lo else "too wide"
    lines.append(f"95 % intervals hold {share:.1%} of re-runs: {verdict} (goal {lo:.0%}-{hi:.0%})")
    return lines


def reliability_figure(c: Coverage, runs: int) -> Any:
    """Share of re-runs inside against the nominal level, beside the diagonal."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 4))
    ax.plot([0.45, 1.0], [0.45, 1.0], color="0.6", lw=1, label="calibrated")
    ax.plot(LEVELS, [c.share(level) for level in LEVELS], "o-", label="re-runs inside")
    ax.set_xlabel("nominal level of the prediction interval")
    ax.set_ylabel("share of another run's values inside")
    ax.set_title(f"{runs} runs, each held out in turn, {c.checked} checks", fontsize=9)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    return fig


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m iolab.archive.calibration",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("crates", nargs="+", type=Path, help="crates of at least three distinct runs")
    ap.add_argument("--json", type=Path, help="also write the coverage as JSON here")
    ap.add_argument("--figure", type=Path, help="also draw the reliability diagram here (PNG)")
    args = ap.parse_args(argv)
    try:
        runs = load_runs(args.crates, say=lambda s: print(s.replace("verdicts:", "calibration:"), file=sys.stderr))
        c = coverage([r.run.numbers for r in runs])
    except (CrateError, OSError, ValueError) as e:
        print(f"calibration: {e}", file=sys.stderr)
        return 1
    print("\n".join(report(runs, c)))
    if args.figure:
        reliability_figure(c, len(runs)).savefig(args.figure, dpi=150)
        print(f"calibration: wrote {args.figure}", file=sys.stderr)
    if args.json:
        atomic.write_json(
            args.json,
            {
                "runs": [{"run": r.ident.ident, "crate": r.crate.name} for r in runs],
                "checked": c.checked,
                "unknown": c.unknown,
                "coverage": {f"{level:.2f}": c.share(level) for level in LEVELS},
                "by_kind_95": {k: {"inside": i, "checked": n} for k, (i, n) in c.by_kind.items()},
                "misses_95": {"above": c.above, "below": c.below},
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
