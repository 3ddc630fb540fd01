"""Within-run spread of a paired echo ratio against cell length and the
distance between the pair's two cells.

    python benchmarks/pair_length.py [--lengths 0.5,1,2,4] [--connections 50,500]
                                     [--quartets N] [--a epoll] [--b defer_taskrun_multishot]
                                     [--client MODEL] [--layout pinned|shared]
                                     [--out DIR] [--from-cells CSV]

For each connection count and cell length (in a random order of blocks),
the two presets run as ``--quartets`` ABBA quartets back to back: A B B A
A B B A ... (c, 128 B, 0.25 s of warm-up per cell; by default our
event-loop client with the server on CPU 0 and the client on CPU 1;
``--client thread-per-connection --layout shared`` gives the sources'
setup, in which the claims' decision cells are measured). Two ratios are read from every quartet: requests/s and
the server's CPU per request, B over A. Their log's sd across quartets is
the within-run spread of a close ABBA pair at that length; pairs of one A
and one B cell ``d`` places apart in the same sequence give its spread
against distance (adjacent pairs are d = 1).

Writes DIR/cells.csv (every cell, in the order measured), DIR/spread.csv
(sd by connections, length, quantity and distance, with its 90 % interval
from the chi-square law), DIR/spread.md and DIR/spread.png;
``--from-cells`` summarises a cells.csv again without measuring. Run it on
a quiet machine with the native programs built (``make -C native``).
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from iolab import config, paths
from iolab.cli import floats, ints
from iolab.estimation.intervals import abba_log_ratios, sd_interval
from iolab.experiments import echo
from iolab.experiments.echo.cell import rate_and_server_cpu
from iolab.presets import preset_server
from iolab.settings import EchoSetup

QUANTITIES = {"rps": "requests/s", "server_cpu": "server CPU per request"}
DISTANCES = (1, 3, 5, 9)


def distance_ratios(seq: Sequence[dict], q: str, d: int) -> list[float]:
    """log(B/A) of each A cell and the B cell d places after it (each A
    counted once)."""
    return [
        math.log(seq[i + d][q]) - math.log(seq[i][q])
        for i in range(len(seq) - d)
        if seq[i]["side"] == "A" and seq[i + d]["side"] == "B"
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=floats, default=[0.5, 1.0, 2.0, 4.0], help="cell lengths, s")
    parser.add_argument("--connections", type=ints, default=[50, 500])
    parser.add_argument("--quartets", type=int, default=6, help="ABBA quartets per (connections, length)")
    parser.add_argument("--bytes", type=int, default=128)
    parser.add_argument("--a", default="epoll", help="preset A (the denominator)")
    parser.add_argument("--b", default="defer_taskrun_multishot", help="preset B (the numerator)")
    parser.add_argument(
        "--client", choices=EchoSetup.client_models(), default="event-loop", help="the load generator's model"
    )
    parser.add_argument("--layout", choices=EchoSetup.layouts(), default="pinned", help="CPUs pinned apart or not")
    parser.add_argument("--out", type=Path, default=paths.REPO / "results" / "pair-length")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--from-cells", type=Path, help="summarise this cells.csv instead of measuring")
    args = parser.parse_args()
    if args.from_cells:
        with args.from_cells.open() as f:
            saved: list[dict] = [
                {
                    **row,
                    "connections": int(row["connections"]),
                    "length": float(row["length"]),
                    **{q: float(row[q]) for q in QUANTITIES},
                }
                for row in csv.DictReader(f)
            ]
        args.connections = sorted({c["connections"] for c in saved})
        args.lengths = sorted({c["length"] for c in saved})
        args.a, args.b = (
            next(c["preset"] for c in saved if c["side"] == "A"),
            next(c["preset"] for c in saved if c["side"] == "B"),
        )
        # Files from before the setup was recorded: our pinned event loop.
        args.client = saved[0].get("client", "event-loop")
        args.layout = saved[0].get("layout", "pinned")
        args.out.mkdir(parents=True, exist_ok=True)
        summarise(saved, args)
        return
    if args.quartets < 3:
        parser.error("--quartets must be at least 3 (an sd needs two degrees of freedom to mean anything)")
    presets = config.load()["experiments"]["echo"]["presets"]
    for name in (args.a, args.b):
        if name not in presets:
            parser.error(f"preset {name!r} is not in experiments.echo.presets; choose one of {', '.join(presets)}")
    sides = {
        side: echo.Cell(name, preset_server(name, presets[name])[1], 0, args.bytes, args.client, layout=args.layout)
        for side, name in (("A", args.a), ("B", args.b))
    }
    blocks = [(c, length) for c in args.connections for length in args.lengths]
    rng = random.Random(args.seed)
    rng.shuffle(blocks)
    args.out.mkdir(parents=True, exist_ok=True)
    cells: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, (c, length) in enumerate(blocks, 1):
            run = echo.LoadgenRun(length, 0.25)
            for position, side in enumerate("ABBA" * args.quartets):
                cell = replace(sides[side], connections=c)
                got = echo.measure_cell(cell, run, {"server": 0, "client": 1}, Path(tmp) / "h.csv")
                cells.append(
                    {
                        "connections": c,
                        "length": length,
                        "position": position,
                        "side": side,
                        "preset": cell.preset,
                        "client": cell.client,
                        "layout": cell.layout,
                        **rate_and_server_cpu(got, args.bytes),
                    }
                )
            print(f"block {n}/{len(blocks)}: c={c}, {length} s cells measured", flush=True)
    with (args.out / "cells.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(cells[0]))
        w.writeheader()
        w.writerows(cells)
    summarise(cells, args)


def summarise(cells: list[dict], args: argparse.Namespace) -> None:
    quartets = sum(1 for c in cells if c["side"] == "A") // (2 * len(args.connections) * len(args.lengths))
    rows = []
    for c, length in sorted({(c, length) for c in args.connections for length in args.lengths}):
        seq = [x for x in cells if x["connections"] == c and x["length"] == length]
        for q in QUANTITIES:
            for d, values in (
                ("ABBA", abba_log_ratios([x[q] for x in seq])),
                *((str(d), distance_ratios(seq, q, d)) for d in DISTANCES),
            ):
                if len(values) < 3:
                    continue
                sd, low, high = sd_interval(values)
                mean = sum(values) / len(values)
                rows.append(
                    {
                        "connections": c,
                        "length": length,
                        "quantity": q,
                        "distance": d,
                        "n": len(values),
                        "ratio": math.exp(mean),
                        "sd": sd,
                        "sd_low": low,
                        "sd_high": high,
                    }
                )
    with (args.out / "spread.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = [
        f"{args.b} / {args.a}, {args.client} client, {args.layout} CPUs, {quartets} ABBA quartets per block; "
        "sd of the log ratio (90 % interval)",
        "",
        "| c | cell | quantity | pair | n | ratio | sd |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        pair = "ABBA quartet" if r["distance"] == "ABBA" else f"d = {r['distance']}"
        lines.append(
            f"| {r['connections']} | {r['length']:g} s | {QUANTITIES[r['quantity']]} | {pair} | {r['n']} | "
            f"{r['ratio']:.3f} | {r['sd']:.3f} ({r['sd_low']:.3f}–{r['sd_high']:.3f}) |"
        )
    (args.out / "spread.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    figure(rows, args)


def figure(rows: list[dict], args: argparse.Namespace) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
    for ax, q in zip(axes, QUANTITIES, strict=True):
        for c in args.connections:
            for d, style in (("ABBA", "-o"), ("1", "--s"), (str(DISTANCES[-1]), ":^")):  # close, next, far
                pts = sorted(
                    (r["length"], r["sd"], r["sd_low"], r["sd_high"])
                    for r in rows
                    if r["connections"] == c and r["quantity"] == q and r["distance"] == d
                )
                if not pts:
                    continue
                x = [p[0] for p in pts]
                label = f"c={c}, " + ("ABBA quartet" if d == "ABBA" else f"pair {d} apart")
                ax.errorbar(
                    x,
                    [p[1] for p in pts],
                    yerr=[[p[1] - p[2] for p in pts], [p[3] - p[1] for p in pts]],
                    fmt=style,
                    capsize=2,
                    label=label,
                )
        ax.set_xscale("log", base=2)
        ax.set_xticks(args.lengths, [f"{x:g}" for x in args.lengths])
        ax.set_xlabel("cell length (s)")
        ax.set_title(f"{args.b} / {args.a}: {QUANTITIES[q]}", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("within-run sd of log ratio")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out / "spread.png", dpi=150)


if __name__ == "__main__":
    main()
