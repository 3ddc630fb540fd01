"""How long the tools the pipeline and the tests start many times take to
start: Snakemake (a dry run of this checkout's default config), papermill and
jupytext, each from this interpreter's environment.

    python benchmarks/tool_start.py [--rounds N] [--with-path DIR]

Every rule that runs a notebook starts jupytext and papermill, and every test
that runs the workflow starts Snakemake, so a second here is paid dozens of
times per suite. ``--with-path DIR`` adds an A/B: each round also runs every
command with DIR on PYTHONPATH, interleaved with the plain runs. For example,
the two packages requirements.lock leaves out (DESIGN, entry point):

    python -m pip install --no-deps --target /tmp/left-out rfc3987-syntax==1.1.0 lark==1.3.1
    python benchmarks/tool_start.py --with-path /tmp/left-out

Prints each command's median and range over the rounds. Run it on a quiet
machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
COMMANDS = {
    "snakemake -n": [str(BIN / "snakemake"), "-n", "--cores", "1", "--quiet"],
    "papermill --help": [str(BIN / "papermill"), "--help"],
    "jupytext --version": [str(BIN / "jupytext"), "--version"],
}


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.monotonic()
    res = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if res.returncode != 0:
        sys.exit(f"tool_start: {' '.join(argv)} failed: {res.stderr.strip().splitlines()[-1:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    parser.add_argument(
        "--with-path", type=Path, metavar="DIR", help="also run every command with DIR on PYTHONPATH, interleaved"
    )
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    if args.with_path is not None and not args.with_path.is_dir():
        parser.error(f"--with-path {args.with_path}: no such directory")
    plain = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    conditions = {"as installed": plain}
    if args.with_path is not None:
        conditions[f"with {args.with_path}"] = {**plain, "PYTHONPATH": str(args.with_path)}
    times: dict[tuple[str, str], list[float]] = {}
    for n in range(args.rounds):
        for cond, env in conditions.items():
            for name, argv in COMMANDS.items():
                times.setdefault((name, cond), []).append(timed(argv, env))
        print(f"round {n + 1}/{args.rounds}", file=sys.stderr)
    for (name, cond), values in times.items():
        print(
            f"{name:20s} {cond:24s} median {statistics.median(values):.2f} s  "
            f"({min(values):.2f}-{max(values):.2f} s, {len(values)} rounds)"
        )


if __name__ == "__main__":
    main()
