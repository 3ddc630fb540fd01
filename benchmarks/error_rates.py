"""The verdicts' error rates, the package's procedure beside the broken ones
that serve as negative controls: python benchmarks/error_rates.py [--runs N]
[--procedure NAME ...]. Each row: a procedure, a drift scenario (iid, a
random effect per round of the measured between-occasion spread, a trend of
+-2 % per round), a claim's shape (one part, C2's 3, U1's 12), and how
often a part or the whole claim was wrongly reported reproduced or not
reproduced with the truth on its bound, over N simulated paper-overlay runs
(iolab.procedure.precision_errors); "holds" says whether each rate is within 2.5 %
plus two Monte Carlo standard errors."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iolab.procedure import precision_errors as error_rates

COLUMNS = (
    "part false reproduced",
    "part false not reproduced",
    "claim false reproduced",
    "claim false not reproduced",
    "repetitions per part",
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--procedure",
        action="append",
        choices=sorted(error_rates.PROCEDURES),
        help="only these procedures (default: all)",
    )
    args = ap.parse_args()
    print(f"round effect sd (log) {error_rates.measured_round_sd():.4f}; {args.runs} runs per row")
    print(f"{'procedure':32} {'scenario':13} {'claim':9} " + " ".join(f"{c[:14]:>14}" for c in COLUMNS) + "  holds")
    for name in args.procedure or error_rates.PROCEDURES:
        for row in error_rates.table(args.runs, error_rates.PROCEDURES[name], seed=args.seed):
            cells = " ".join(f"{row[c]:>14.3f}" for c in COLUMNS)
            print(f"{name:32} {row['scenario']:13} {row['claim']:9} {cells}  {row['holds']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
