"""Do the prediction intervals cover a re-run on another occasion? Given the
crates of at least four independent runs, for every ordered pair (A, B) it
builds A's prediction interval for each number at nominal 50, 80, 90, 95 and
99 % and counts how often B's value falls inside, and on which side it
misses. The between-occasion spread is estimated without B (from the other
runs: B is the new occasion), so B's own value never shapes its interval.

    python benchmarks/calibration.py CRATE CRATE CRATE CRATE [...] [--figure reliability.png] [--old]

``--old`` gives the intervals as they were before the occasion was a unit
(symmetric on the original scale, this run's repetitions only).
"""

from __future__ import annotations

import argparse
import math
import sys
from itertools import permutations
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iolab.analysis import occasions
from iolab.archive.occasions import crate_numbers

LEVELS = (0.50, 0.80, 0.90, 0.95, 0.99)


def quantities(numbers: dict) -> dict[str, tuple[str, list[float], float]]:
    """key -> (group, this run's repetition values, its reported value)."""
    out = {}
    for key, entry in numbers.items():
        if (
            isinstance(entry, dict)
            and isinstance(entry.get("reps"), list)
            and isinstance(entry.get("value"), (int, float))
        ):
            reps = [float(v) for v in entry["reps"] if isinstance(v, (int, float))]
            if len(reps) >= 3 and all(math.isfinite(v) for v in reps):
                out[key] = (
                    occasions.group_of(entry.get("notebook", ""), str(entry.get("unit", ""))),
                    reps,
                    float(entry["value"]),
                )
    return out


def old_interval(values: list[float], level: float) -> tuple[float, float]:
    """Before: symmetric on the original scale, no occasion term."""
    from scipy import stats as sps

    a = np.asarray(values)
    res = sps.bootstrap(
        (a,), np.median, confidence_level=level, n_resamples=2000, method="percentile", rng=np.random.default_rng(0)
    )
    half = float(sps.t.ppf(0.5 + level / 2, a.size - 1)) * math.sqrt(2) * float(res.standard_error)
    return float(np.median(a)) - half, float(np.median(a)) + half


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("crates", nargs="+", type=Path)
    ap.add_argument("--figure", type=Path, help="draw the reliability diagram here (PNG)")
    ap.add_argument("--old", action="store_true", help="the intervals before the occasion was a unit")
    args = ap.parse_args()
    if len(args.crates) < 4:
        print("calibration: give at least four crates (runs on different occasions)", file=sys.stderr)
        return 2
    runs = [crate_numbers(c)[0] for c in args.crates]
    per_run = [quantities(r) for r in runs]
    inside = {lv: 0 for lv in LEVELS}
    upper = {lv: 0 for lv in LEVELS}
    lower = {lv: 0 for lv in LEVELS}
    checked = 0
    for a, b in permutations(range(len(runs)), 2):
        others = [runs[i] for i in range(len(runs)) if i != b]
        spread = occasions.estimate(others)
        for key, (group, reps, _) in per_run[a].items():
            if key not in per_run[b]:
                continue
            value = per_run[b][key][2]
            checked += 1
            sigma = (spread.get(group) or spread.get("all")).sigma_occasion if spread else 0.0
            for lv in LEVELS:
                lo, hi = old_interval(reps, lv) if args.old else occasions.prediction_interval(reps, sigma, lv)
                if value > hi:
                    upper[lv] += 1
                elif value < lo:
                    lower[lv] += 1
                else:
                    inside[lv] += 1
    pairs = len(runs) * (len(runs) - 1)
    how = "before: symmetric, one occasion" if args.old else "log scale, occasion spread estimated without the re-run"
    print(f"{len(runs)} runs, {pairs} ordered pairs, {checked} values checked ({how})")
    print(f"{'nominal':>8} {'inside':>8} {'above':>7} {'below':>7} {'above:below':>12}")
    for lv in LEVELS:
        ratio = upper[lv] / lower[lv] if lower[lv] else math.inf
        print(
            f"{lv:>8.0%} {inside[lv] / checked:>8.1%} {upper[lv] / checked:>7.1%} {lower[lv] / checked:>7.1%} "
            f"{ratio:>12.2f}"
        )
    if args.figure:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(4, 4))
        ax.plot([0.45, 1.0], [0.45, 1.0], color="0.6", lw=1, label="perfect calibration")
        ax.plot(LEVELS, [inside[lv] / checked for lv in LEVELS], "o-", label="re-runs inside")
        ax.set_xlabel("nominal coverage of the prediction interval")
        ax.set_ylabel("share of a re-run's values inside")
        ax.set_title(f"{len(runs)} runs, {pairs} ordered pairs, {checked} values", fontsize=9)
        ax.legend(loc="upper left", fontsize=8)
        fig.tight_layout()
        fig.savefig(args.figure, dpi=150)
        print(f"wrote {args.figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
