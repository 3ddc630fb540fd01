"""Does a shorter warm-up move an echo cell's value? The bias and the
within-run spread of a cell measured after ``w`` seconds of warm-up against
the same cell after the sweep's warm-up.

    python benchmarks/warmup_length.py [--warmups 0,0.1] [--reference 0.25]
                                       [--presets epoll,default,...] [--connections 1,50,500]
                                       [--quartets N] [--length 0.5] [--client MODEL]
                                       [--layout pinned|shared] [--out DIR] [--from-cells CSV]

Every cell of the default sweep waits ``experiments.echo.warmup`` seconds
after its connections are up before it measures: at 0.25 s, 218 cells per
repetition and 6 repetitions, that is 327 s of every default run spent
measuring nothing. A shorter warm-up is safe only if the cell's value does
not move with it. So for each (preset, connections, candidate warm-up), in a
random order of blocks, the same cell runs as ``--quartets`` ABBA quartets
back to back, A after the reference warm-up and B after the candidate. Two
log ratios are read from every quartet, B over A: requests/s and the
server's CPU per request (the claims' two quantities). Their median is the
warm-up's bias, with its distribution-free interval; their sd is what the
shorter warm-up adds to the cell's own noise (ABBA cells of one preset
carry the same noise on both sides, so only a transient shows).

Writes DIR/cells.csv (every cell, in the order measured), DIR/bias.csv and
DIR/bias.md (by block, and pooled over the presets by connections and
warm-up); ``--from-cells`` summarises a cells.csv again without measuring.
Run it on a quiet machine with the native programs built (``make -C
native``).
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import tempfile
from pathlib import Path

from iolab import config, paths
from iolab.cli import floats, ints, names
from iolab.estimation.intervals import abba_log_ratios, across_reps, sd_interval
from iolab.experiments import echo
from iolab.experiments.echo.cell import rate_and_server_cpu
from iolab.presets import preset_server
from iolab.settings import EchoSetup

QUANTITIES = {"rps": "requests/s", "server_cpu": "server CPU per request"}
# Every preset of the default sweep's largest group is one of these kinds:
# epoll, a ring the server waits on, a ring an SQPOLL thread polls, and the
# cheapest ring (multishot receive into a buffer ring, DEFER_TASKRUN).
DEFAULT_PRESETS = ("epoll", "default", "sqpoll", "defer_taskrun_multishot")


def summary_row(key: dict, values: list[float]) -> dict:
    est = across_reps(values, predict=False)
    sd, low, high = sd_interval(values)
    return {
        **key,
        "n": len(values),
        "bias": math.exp(est.value) - 1,
        "bias_low": math.exp(est.low) - 1,
        "bias_high": math.exp(est.high) - 1,
        "sd": sd,
        "sd_low": low,
        "sd_high": high,
    }


def summarise(cells: list[dict], reference: float) -> list[dict]:
    """One row per block and quantity, then one per (connections, warm-up,
    quantity) over every preset's quartets."""
    blocks = sorted({(c["preset"], c["connections"], c["warmup_b"]) for c in cells})
    rows = []
    pooled: dict[tuple[int, float, str], list[float]] = {}
    for preset, conns, warmup in blocks:
        seq = [c for c in cells if (c["preset"], c["connections"], c["warmup_b"]) == (preset, conns, warmup)]
        for q in QUANTITIES:
            values = abba_log_ratios([x[q] for x in seq])
            if len(values) < 3:
                continue
            pooled.setdefault((conns, warmup, q), []).extend(values)
            rows.append(summary_row({"preset": preset, "connections": conns, "warmup": warmup, "quantity": q}, values))
    for (conns, warmup, q), values in sorted(pooled.items()):
        rows.append(summary_row({"preset": "all", "connections": conns, "warmup": warmup, "quantity": q}, values))
    for r in rows:
        r["reference"] = reference
    return rows


def report(rows: list[dict], client: str, layout: str) -> str:
    reference = rows[0]["reference"]
    lines = [
        f"A cell after w s of warm-up over the same cell after {reference:g} s ({client} client, {layout} CPUs): "
        "bias = median of the ABBA quartets' ratio - 1 (95 % interval), sd = sd of their log ratio (90 % interval)",
        "",
        "| preset | c | w | quantity | quartets | bias | sd |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['preset']} | {r['connections']} | {r['warmup']:g} s | {QUANTITIES[r['quantity']]} | {r['n']} | "
            f"{r['bias']:+.1%} [{r['bias_low']:+.1%}, {r['bias_high']:+.1%}] | "
            f"{r['sd']:.3f} ({r['sd_low']:.3f}–{r['sd_high']:.3f}) |"
        )
    return "\n".join(lines) + "\n"


def write(out: Path, cells: list[dict], rows: list[dict]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, table in (("cells.csv", cells), ("bias.csv", rows)):
        with (out / name).open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(table[0]))
            w.writeheader()
            w.writerows(table)
    text = report(rows, cells[0]["client"], cells[0]["layout"])
    (out / "bias.md").write_text(text)
    print(text, end="")


def read_cells(path: Path) -> list[dict]:
    with path.open() as f:
        return [
            {
                **row,
                "connections": int(row["connections"]),
                "warmup": float(row["warmup"]),
                "warmup_b": float(row["warmup_b"]),
                **{q: float(row[q]) for q in QUANTITIES},
            }
            for row in csv.DictReader(f)
        ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warmups", type=floats, default=[0.0, 0.1], help="candidate warm-ups (B), s")
    parser.add_argument("--reference", type=float, default=0.25, help="the sweep's warm-up (A), s")
    parser.add_argument("--presets", type=names, default=list(DEFAULT_PRESETS))
    parser.add_argument("--connections", type=ints, default=[1, 50, 500])
    parser.add_argument("--quartets", type=int, default=6, help="ABBA quartets per block")
    parser.add_argument("--length", type=float, default=0.5, help="measured seconds per cell (the sweep's)")
    parser.add_argument("--bytes", type=int, default=128)
    parser.add_argument(
        "--client", choices=EchoSetup.client_models(), default="event-loop-uring", help="the load generator's model"
    )
    parser.add_argument("--layout", choices=EchoSetup.layouts(), default="pinned", help="CPUs pinned apart or not")
    parser.add_argument("--out", type=Path, default=paths.REPO / "results" / "warmup-length")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--from-cells", type=Path, help="summarise this cells.csv instead of measuring")
    args = parser.parse_args()
    if args.from_cells:
        cells = read_cells(args.from_cells)
        write(args.out, cells, summarise(cells, float(cells[0]["warmup"])))
        return
    if args.quartets < 3:
        parser.error("--quartets must be at least 3 (an sd needs two degrees of freedom to mean anything)")
    if any(w < 0 for w in args.warmups) or args.reference < 0:
        parser.error("a warm-up is a number of seconds, 0 or more")
    presets = config.load()["experiments"]["echo"]["presets"]
    unknown = [p for p in args.presets if p not in presets]
    if unknown:
        parser.error(f"not in experiments.echo.presets: {', '.join(unknown)}; choose from {', '.join(presets)}")
    blocks = [(p, c, w) for p in args.presets for c in args.connections for w in args.warmups]
    random.Random(args.seed).shuffle(blocks)
    cells: list[dict] = []
    warmups = {"A": args.reference}
    with tempfile.TemporaryDirectory() as tmp:
        for n, (preset, conns, w) in enumerate(blocks, 1):
            warmups["B"] = w
            cell = echo.Cell(
                preset, preset_server(preset, presets[preset])[1], conns, args.bytes, args.client, layout=args.layout
            )
            for position, side in enumerate("ABBA" * args.quartets):
                run = echo.LoadgenRun(args.length, warmups[side])
                got = echo.measure_cell(cell, run, {"server": 0, "client": 1}, Path(tmp) / "h.csv")
                cells.append(
                    {
                        "preset": preset,
                        "connections": conns,
                        "warmup_b": w,
                        "position": position,
                        "side": side,
                        "warmup": warmups[side],
                        "client": cell.client,
                        "layout": cell.layout,
                        **rate_and_server_cpu(got, args.bytes),
                    }
                )
            print(
                f"block {n}/{len(blocks)}: {preset} c={conns}, warm-up {w:g} s against {args.reference:g} s", flush=True
            )
    write(args.out, cells, summarise(cells, args.reference))


if __name__ == "__main__":
    main()
