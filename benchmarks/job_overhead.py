"""The fixed cost of one measurement job: what every ``measure_<experiment>``
rule pays besides measuring (the dependency check, make, Python start-up and
imports, the config checks, host facts, provenance).

    python benchmarks/job_overhead.py [--rounds N]

Each round runs, in this order, the three steps of a measurement job's shell
command (rules/probes.smk) for the syscall experiment with the smallest
settings the schema allows (10 batches of 5 µs), and times each with the
wall clock:

- ``python -m iolab.deps check build``;
- ``make -s -C native build/cost-probe`` (up to date: nothing is rebuilt);
- ``python -m iolab.measure syscall ...`` into a temporary directory.

Prints each step's median and range over the rounds. The measure step's own
measuring takes well under a millisecond, so its time is overhead. A number that grows
between commits is a cost every job of every run pays: 54 jobs in the
default config, more in the paper overlay. Run it on a quiet machine with
the native programs built (``make -C native``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NODE = {"name": "local", "runner": "local"}
SETTINGS = {"batches": 10, "warmup_batches": 0, "batch_us": 5, "variants": ["getppid"]}


def timed(argv: list[str]) -> float:
    start = time.monotonic()
    res = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if res.returncode != 0:
        sys.exit(f"job_overhead: {' '.join(argv[:4])} … failed: {res.stderr.strip().splitlines()[-1:]}")
    return seconds


def one_round(scratch: Path, n: int) -> dict[str, float]:
    out = scratch / f"round{n}" / "rep1.csv"
    return {
        "deps check": timed([sys.executable, "-m", "iolab.deps", "check", "build"]),
        "make (up to date)": timed(["make", "-s", "-C", "native", "build/cost-probe"]),
        "iolab.measure": timed(
            [
                sys.executable,
                "-m",
                "iolab.measure",
                "syscall",
                "--node",
                json.dumps(NODE),
                "--settings",
                json.dumps(SETTINGS),
                "--rep",
                "1",
                "--seed",
                "1",
                "--output",
                str(out),
            ]
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="rounds (default 7)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    rounds = []
    with tempfile.TemporaryDirectory(prefix="iolab-overhead-") as scratch:
        for n in range(args.rounds):
            rounds.append(one_round(Path(scratch), n))
            print(f"round {n + 1}/{args.rounds}", file=sys.stderr)
    for step in rounds[0]:
        values = [r[step] for r in rounds]
        print(
            f"{step:18s} median {statistics.median(values):.2f} s  ({min(values):.2f}-{max(values):.2f} s, "
            f"{len(values)} rounds)"
        )
    totals = [sum(r.values()) for r in rounds]
    print(f"{'per job':18s} median {statistics.median(totals):.2f} s  ({min(totals):.2f}-{max(totals):.2f} s)")


if __name__ == "__main__":
    main()
