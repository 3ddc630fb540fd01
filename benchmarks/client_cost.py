"""CPU per request of loadgen's two event loops (epoll, io_uring) against
the epoll server and the cheapest ring, in the same rounds.

    python benchmarks/client_cost.py [--rounds N] [--duration S]

Each round measures the four (server, client) cells in random order with
``iolab.experiments.echo.measure_cell``: c = 50, 128 B, server on CPU 0, client on
CPU 1. CPU per request divides each side's CPU time by the requests the
server echoed (warm-up included, as the CPU times are). Prints every cell,
then the ratios DESIGN.md quotes: client/server in the same cell, and the
io_uring client against the epoll client on the same server and round.
Run it on a quiet machine with the native programs built (``make -C native``).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
from pathlib import Path

from iolab.experiments import echo

SERVERS = {"epoll": (), "single_issuer_defer_taskrun_multishot_buf_ring":
           ("--single-issuer", "--defer-taskrun", "--multishot-recv", "--buf-ring")}
CLIENTS = ("event-loop", "event-loop-uring")


def spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f} (median {statistics.median(values):.2f}, n={len(values)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=3.0, help="measured seconds per cell")
    args = parser.parse_args()
    settings = {"duration": args.duration, "warmup": 0.5, "pipeline": 1, "loadgen_threads": 1, "port": 0}
    rng = random.Random(7)
    cost: dict[tuple[int, str, str], tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            cells = [(s, c) for s in SERVERS for c in CLIENTS]
            rng.shuffle(cells)
            for server, client in cells:
                cell = echo.Cell(server, SERVERS[server], 50, 128, client=client)
                got = echo.measure_cell(cell, settings, {"server": 0, "client": 1},
                                        Path(tmp) / f"{r}-{server}-{client}.csv")
                n = got["server_bytes"] / 128
                cost[r, server, client] = (got["server_cpu_ns"] / n / 1e3, got["client_cpu_ns"] / n / 1e3)
                print(f"round {r + 1} {server} / {client}: {got['rps']:.0f} req/s, server "
                      f"{cost[r, server, client][0]:.2f} us/req, client {cost[r, server, client][1]:.2f} us/req",
                      flush=True)
    rounds = range(args.rounds)
    best = "single_issuer_defer_taskrun_multishot_buf_ring"
    for client in CLIENTS:
        print(f"{client} client / cheapest ring's server CPU, same cell:",
              spread([cost[r, best, client][1] / cost[r, best, client][0] for r in rounds]))
    print("io_uring client / epoll client CPU, same server and round:",
          spread([cost[r, s, "event-loop-uring"][1] / cost[r, s, "event-loop"][1] for r in rounds for s in SERVERS]))
    print("cheapest ring's CPU under the io_uring client / under the epoll client:",
          spread([cost[r, best, "event-loop-uring"][0] / cost[r, best, "event-loop"][0] for r in rounds]))


if __name__ == "__main__":
    main()
