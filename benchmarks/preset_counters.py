"""Server CPU and the server's own counters per request, for every C-server
preset in config/config.yaml, in the same interleaved rounds.

    python benchmarks/preset_counters.py [--rounds N] [--duration S] [--csv FILE]

Each round measures every preset in a fresh random order with
``iolab.experiments.echo.cell.measure_cell``: c = 50, 128 B, closed loop, the server on
CPU 0 and loadgen's epoll client on CPU 1. Per request means per request
the server echoed (warm-up included, as its CPU time and counters are).
Prints one row per preset: server and client CPU per request (spread over
the rounds), the server's ratio to the default ring within each round, and
the medians of its counters per request: io_uring_enter calls, SQEs,
events (CQEs reaped, or epoll events), waits, receives that found no
buffer, SQEs sent to io-wq, and rescheduling IPIs on the server's CPU. The Go presets are left
out: their servers keep no such counters. Run it on a quiet machine with
the native programs built (``make -C native``).
"""

from __future__ import annotations

import argparse
import csv
import random
import statistics
import tempfile
from pathlib import Path

from iolab import config
from iolab.experiments.echo import cell as echo_cell
from iolab.presets import preset_server

# measure_cell's "cqes" repeats "events" (CQEs reaped; epoll events for epoll).
COUNTERS = ("io_uring_enter", "sqes", "events", "waits", "nobufs", "async_sqes", "server_resched_ipis")
C_SERVERS = {"epoll", "uring"}


def c_presets() -> dict[str, tuple[str, ...]]:
    presets = config.load()["experiments"]["echo"]["presets"]
    out = {}
    for name, spec in presets.items():
        server, flags = preset_server(name, spec)
        if server in C_SERVERS:
            out[name] = flags
    return out


def spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f} ({statistics.median(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--duration", type=float, default=2.0, help="measured seconds per cell (default 2)")
    parser.add_argument("--csv", type=Path, help="also write every cell's numbers to this CSV file")
    args = parser.parse_args()
    if args.rounds < 1 or args.duration <= 0:
        parser.error("--rounds must be >= 1 and --duration > 0")
    presets = c_presets()
    run = echo_cell.LoadgenRun(args.duration, 0.5)
    rng = random.Random(11)
    rows: list[dict[str, float | int | str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = list(presets)
            rng.shuffle(order)
            for name in order:
                cell = echo_cell.Cell(name, presets[name], 50, 128)
                try:
                    got = echo_cell.measure_cell(cell, run, {"server": 0, "client": 1}, Path(tmp) / f"{r}-{name}.csv")
                except echo_cell.CellError as e:
                    if echo_cell.failed_status(str(e)) != "unavailable":
                        raise
                    print(f"{name}: {e}; left out", flush=True)
                    del presets[name]  # e.g. a helper CPU this machine does not have
                    continue
                n = got["server_bytes"] / 128
                row: dict[str, float | int | str] = {
                    "round": r + 1,
                    "preset": name,
                    "rps": got["rps"],
                    "requests": n,
                    "server_us": got["server_cpu_ns"] / n / 1e3,
                    "client_us": got["client_cpu_ns"] / n / 1e3,
                }
                for k in COUNTERS:
                    row[k] = float(got[k]) / n if got[k] != "" else float("nan")
                rows.append(row)
                print(
                    f"round {r + 1}/{args.rounds} {name}: {got['rps']:.0f} req/s, server "
                    f"{row['server_us']:.2f} us/req, client {row['client_us']:.2f} us/req",
                    flush=True,
                )
    if args.csv:
        with args.csv.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    by = {(row["round"], row["preset"]): row for row in rows}
    rounds = range(1, args.rounds + 1)
    if not presets:
        raise SystemExit("preset_counters: no preset could run here")
    reference = "default" if "default" in presets else next(iter(presets))
    print(
        f"\nc=50, 128 B, {args.rounds} rounds of {args.duration:g} s; CPU in us per request as "
        f"min-max (median); ratio to {reference} within each round; counters per request (median)"
    )
    print(f"| preset | server CPU | / {reference} | client CPU | " + " | ".join(COUNTERS) + " |")
    print("|---" * (4 + len(COUNTERS)) + "|")
    for name in presets:
        server = [float(by[r, name]["server_us"]) for r in rounds]
        client = [float(by[r, name]["client_us"]) for r in rounds]
        ratio = [float(by[r, name]["server_us"]) / float(by[r, reference]["server_us"]) for r in rounds]
        counts = [statistics.median(float(by[r, name][k]) for r in rounds) for k in COUNTERS]
        print(
            f"| {name} | {spread(server)} | {spread(ratio)} | {spread(client)} | "
            + " | ".join(f"{c:.2f}" for c in counts)
            + " |"
        )


if __name__ == "__main__":
    main()
