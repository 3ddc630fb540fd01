"""The verdicts' error rates before and after error control, side by side:
python benchmarks/error_rates.py [--runs N]. Each row: a claim's shape (U1's
12 parts, C2's 3, one part), where the truth sits (on the bound, 10 % below,
10 % above), and how often a part or the whole claim was wrongly reported
reproduced or not reproduced, over N simulated paper-profile runs
(iolab.analysis.error_rates)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iolab.analysis import error_rates  # noqa: E402

COLUMNS = ("part false reproduced", "part false not reproduced", "claim false reproduced",
           "claim false not reproduced")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    before = error_rates.table(args.runs, corrected=False, seed=args.seed)
    after = error_rates.table(args.runs, corrected=True, seed=args.seed)
    print(f"{'claim':9} {'truth':6} " + " ".join(f"{c:>28}" for c in COLUMNS))
    for b, a in zip(before, after, strict=True):
        cells = " ".join(f"{b[c]:>13.3f} -> {a[c]:<11.3f}" for c in COLUMNS)
        print(f"{b['claim']:9} {b['truth']:6} {cells}")
    print(f"(before -> after; {args.runs} runs each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
