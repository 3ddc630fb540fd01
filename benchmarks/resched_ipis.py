"""Do rings without COOP_TASKRUN or DEFER_TASKRUN kick their server with
rescheduling IPIs? The counter the echo sweep records per cell, read here
for three rings in interleaved rounds.

    python benchmarks/resched_ipis.py [--rounds N] [--duration S]

io_uring runs a socket completion as task work and, unless the ring has
COOP_TASKRUN or DEFER_TASKRUN, notifies the server's task with a
rescheduling IPI. Each round measures, in a fresh random order, one cell
(c = 50, 128 B, the server on CPU 0, loadgen on CPU 1) of the default
ring, of a SINGLE_ISSUER | DEFER_TASKRUN ring, and of a second such ring,
the negative control. The count is /proc/interrupts' RES line on the
server's CPU: machine-wide, so every other process that wakes a task on
that CPU adds to it. That is why this is a benchmark for a quiet machine
and not a test: beside a test suite the control ring once took 5 814 IPIs
against its twin's 400, and with a compiler on the CPUs the default ring
took 0.004 per request against 0.13-0.88 alone.

Prints each ring's IPIs per round and in all, and whether the bound the
suite once held (the default ring's total above twice the DEFER_TASKRUN
ring's plus 30) is met, by the default ring and by the control; on a
quiet machine the first is "yes" and the second "no". Needs 2 CPUs and the
native programs (``make -C native``).
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
from pathlib import Path

from iolab.experiments.echo import cell as echo_cell

DEFERRED = ("--single-issuer", "--defer-taskrun")
# ring -> flags; "control" is a second DEFER_TASKRUN ring, measured alike.
RINGS: dict[str, tuple[str, ...]] = {"default": (), "defer_taskrun": DEFERRED, "control": DEFERRED}


def kicks_more(ipis: dict[str, int], ring: str) -> bool:
    """The bound: ``ring``'s IPIs above twice the DEFER_TASKRUN ring's plus 30
    (that ring took 0-4 per 1 s cell in quiet runs: timers and other kicks)."""
    return ipis[ring] > 2 * ipis["defer_taskrun"] + 30


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--duration", type=float, default=1.0, help="measured seconds per cell (default 1)")
    args = parser.parse_args()
    if args.rounds < 1 or args.duration <= 0:
        parser.error("--rounds must be >= 1 and --duration > 0")
    if (os.cpu_count() or 1) < 2:
        raise SystemExit("resched_ipis: needs 2 CPUs (server and load generator apart)")
    rng = random.Random(7)
    ipis = dict.fromkeys(RINGS, 0)
    requests = dict.fromkeys(RINGS, 0)
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = list(RINGS)
            rng.shuffle(order)
            for ring in order:
                cell = echo_cell.Cell(ring, RINGS[ring], 50, 128)
                got = echo_cell.measure_cell(
                    cell,
                    echo_cell.LoadgenRun(args.duration, 0.1),
                    {"server": 0, "client": 1},
                    Path(tmp) / f"{r}-{ring}.csv",
                )
                if got["server_resched_ipis"] in ("", None):
                    raise SystemExit("resched_ipis: /proc/interrupts shows no rescheduling IPIs (RES) here")
                ipis[ring] += int(got["server_resched_ipis"])
                requests[ring] += int(got["requests"])
                print(f"round {r + 1}/{args.rounds} {ring}: {got['server_resched_ipis']} IPIs", flush=True)
    print(f"\nc=50, 128 B, {args.rounds} interleaved rounds of {args.duration:g} s; IPIs on the server's CPU")
    print("| ring | IPIs | per request |")
    print("|---|---|---|")
    for ring in RINGS:
        per = ipis[ring] / requests[ring] if requests[ring] else float("nan")
        print(f"| {ring} | {ipis[ring]} | {per:.4f} |")
    print(f"default ring above 2 x DEFER_TASKRUN + 30: {'yes' if kicks_more(ipis, 'default') else 'no'}")
    print(f"control (a second DEFER_TASKRUN ring) above it: {'yes' if kicks_more(ipis, 'control') else 'no'}")


if __name__ == "__main__":
    main()
