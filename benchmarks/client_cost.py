"""CPU per request of loadgen's two event loops (epoll, io_uring) against
the epoll server and the cheapest ring, in the same rounds.

    python benchmarks/client_cost.py [--rounds N] [--duration S] [--bytes B]
                                     [--baseline-loadgen PATH]

Each round measures the four (server, client) cells in random order with
``iolab.experiments.echo.cell.measure_cell``: c = 50, 128 B (``--bytes``), server on
CPU 0, client on CPU 1. CPU per request divides each side's CPU time by the
requests the server echoed (warm-up included, as the CPU times are). Prints
every cell, then the ratios DESIGN.md quotes: client/server in the same cell,
and the io_uring client against the epoll client on the same server and round.
``--baseline-loadgen`` adds, in the same rounds, the io_uring client of another
build (e.g. an earlier commit's ``native/build/loadgen``) and compares the two.
Run it on a quiet machine with the native programs built (``make -C native``).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
from pathlib import Path

from iolab.experiments.echo import cell as echo_cell
from iolab.runners import LocalRunner

SERVERS = {
    "epoll": (),
    "single_issuer_defer_taskrun_multishot_buf_ring": (
        "--single-issuer",
        "--defer-taskrun",
        "--multishot-recv",
        "--buf-ring",
    ),
}
CLIENTS = ("event-loop", "event-loop-uring")
BASELINE = "event-loop-uring (baseline)"


class BaselineRunner(LocalRunner):
    """This machine, with the load generator of another build."""

    def __init__(self, loadgen: Path) -> None:
        self.loadgen = loadgen

    def exe(self, program: str) -> str:
        return str(self.loadgen) if program == "loadgen" else super().exe(program)


def spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f} (median {statistics.median(values):.2f}, n={len(values)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=3.0, help="measured seconds per cell")
    parser.add_argument("--bytes", type=int, default=128, help="request size")
    parser.add_argument("--baseline-loadgen", type=Path, help="another build's loadgen, for its io_uring client")
    args = parser.parse_args()
    if args.baseline_loadgen and not args.baseline_loadgen.is_file():
        parser.error(f"--baseline-loadgen {args.baseline_loadgen}: no such file")
    run = echo_cell.LoadgenRun(args.duration, 0.5)
    clients = (*CLIENTS, *((BASELINE,) if args.baseline_loadgen else ()))
    rng = random.Random(7)
    cost: dict[tuple[int, str, str], tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            cells = [(s, c) for s in SERVERS for c in clients]
            rng.shuffle(cells)
            for server, client in cells:
                runner = BaselineRunner(args.baseline_loadgen) if client == BASELINE else LocalRunner()
                cell = echo_cell.Cell(
                    server, SERVERS[server], 50, args.bytes, client="event-loop-uring" if client == BASELINE else client
                )
                got = echo_cell.measure_cell(
                    cell, run, {"server": 0, "client": 1}, Path(tmp) / f"{r}-{server}-{client}.csv", runner
                )
                n = got["server_bytes"] / args.bytes
                cost[r, server, client] = (got["server_cpu_ns"] / n / 1e3, got["client_cpu_ns"] / n / 1e3)
                print(
                    f"round {r + 1} {server} / {client}: {got['rps']:.0f} req/s, server "
                    f"{cost[r, server, client][0]:.2f} us/req, client {cost[r, server, client][1]:.2f} us/req",
                    flush=True,
                )
    rounds = range(args.rounds)
    best = "single_issuer_defer_taskrun_multishot_buf_ring"
    for client in CLIENTS:
        print(
            f"{client} client / cheapest ring's server CPU, same cell:",
            spread([cost[r, best, client][1] / cost[r, best, client][0] for r in rounds]),
        )
    print(
        "io_uring client / epoll client CPU, same server and round:",
        spread([cost[r, s, "event-loop-uring"][1] / cost[r, s, "event-loop"][1] for r in rounds for s in SERVERS]),
    )
    print(
        "cheapest ring's CPU under the io_uring client / under the epoll client:",
        spread([cost[r, best, "event-loop-uring"][0] / cost[r, best, "event-loop"][0] for r in rounds]),
    )
    if args.baseline_loadgen:
        print(
            f"{BASELINE} client / cheapest ring's server CPU, same cell:",
            spread([cost[r, best, BASELINE][1] / cost[r, best, BASELINE][0] for r in rounds]),
        )
        print(
            "io_uring client / the baseline build's, same server and round:",
            spread([cost[r, s, "event-loop-uring"][1] / cost[r, s, BASELINE][1] for r in rounds for s in SERVERS]),
        )


if __name__ == "__main__":
    main()
