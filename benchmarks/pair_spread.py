"""Within-run spread of a paired echo ratio in runs already made, beside how
far apart the sweep put the pair's two cells.

    python benchmarks/pair_spread.py TABLE [TABLE ...] [--num default] [--den epoll]
                                     [--client thread-per-connection]

Each TABLE is a run's echo table: a checkout's results/tables/echo.parquet
or a raw-data root (what ``iolab.tables.load`` reads). For every cell
(connections, bytes) of ``--client``'s setup where both presets ran, over
the run's repetitions: the sd of log(num/den) for requests/s and for the
server's CPU per request, with its 90 % interval (chi-square), and the
distance between the two cells in the sweep's order, per repetition. Then
the sd pooled over the cells (root mean square, each cell's own mean
removed), and the position effect: the mean of the centred log ratio when
``--num`` ran first against when it ran second. A single A-then-B pair
carries that effect into its ratio; an ABBA quartet cancels it, and so do
a run's repetitions taken together when, as the sweep orders them since
ABBA over repetitions, ``--num`` ran first in half of them (the table's
last column says in how many).

Repetitions of one run share a launch, so this is the within-run spread;
the between-run (occasion) spread is ``iolab.archive.spread``'s.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from iolab import tables
from iolab.estimation.intervals import sd_interval
from iolab.rooms.echo import summaries as echostats

QUANTITIES = {"rps": "requests/s", "server_ns_per_request": "server CPU per request"}


def pairs(echo: pd.DataFrame, num: str, den: str, client: str) -> pd.DataFrame:
    """One row per (node, connections, bytes, rep) where both presets ran
    under ``client``: each quantity's log(num/den), the distance between
    the two cells in the sweep and whether ``num`` ran first."""
    both = echostats.paired_ratios(echo, num, den, "rps", carry=["order", *QUANTITIES])
    both = both[both["client"] == client]
    key = ["node", "connections", "bytes", "rep"]
    out = both[key].copy()
    for q in QUANTITIES:
        out[q] = np.log(both[f"{q}_numerator"].astype(float) / both[f"{q}_denominator"].astype(float))
    num_order, den_order = both["order_numerator"].astype(int), both["order_denominator"].astype(int)
    out["distance"] = (num_order - den_order).abs()
    out["num_first"] = num_order < den_order
    return out


@dataclass(frozen=True)
class CellSpread:
    node: str
    connections: int
    bytes: int
    reps: int
    sd: dict[str, tuple[float, float, float]]  # quantity -> (sd, low, high)
    distances: list[int]  # per repetition, in order
    num_first: int  # repetitions in which the numerator ran first


def spread(paired: pd.DataFrame) -> tuple[list[CellSpread], dict[str, float]]:
    """Per cell: each quantity's sd over repetitions and its interval, and
    the pair's distances; then, over every cell, the pooled sd and the
    position effect (centred log ratio, num first minus num second)."""
    rows: list[CellSpread] = []
    centred = paired.copy()
    for (node, c, b), g in paired.groupby(["node", "connections", "bytes"], sort=True):
        if len(g) < 3:
            continue
        sds = {}
        for q in QUANTITIES:
            sds[q] = sd_interval(list(g[q]))
            centred.loc[g.index, q] = g[q] - g[q].mean()
        distances = [int(d) for d in g.sort_values("rep")["distance"]]
        rows.append(CellSpread(str(node), int(c), int(b), len(g), sds, distances, int(g["num_first"].sum())))
    kept = centred[
        centred.set_index(["node", "connections", "bytes"]).index.isin([(r.node, r.connections, r.bytes) for r in rows])
    ]
    pooled: dict[str, float] = {}
    for q in QUANTITIES:
        cells = len(rows)
        dof = len(kept) - cells
        pooled[q] = math.sqrt(float((kept[q] ** 2).sum()) / dof) if dof > 0 else math.nan
        first, second = kept.loc[kept["num_first"], q], kept.loc[~kept["num_first"], q]
        pooled[f"{q}_position"] = float(first.mean() - second.mean()) if len(first) and len(second) else math.nan
    pooled["cells"] = len(rows)
    return rows, pooled


def report(name: str, rows: list[CellSpread], pooled: dict[str, float], num: str, den: str) -> str:
    lines = [
        f"{name}: {num} / {den}, sd over repetitions of the log ratio (90 % interval)",
        "",
        f"| c | bytes | reps | requests/s | server CPU per request | distance per rep | {num} first |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [f"{r.sd[q][0]:.3f} ({r.sd[q][1]:.3f}–{r.sd[q][2]:.3f})" for q in QUANTITIES]
        lines.append(
            f"| {r.connections} | {r.bytes} | {r.reps} | {cells[0]} | {cells[1]} | "
            f"{', '.join(str(d) for d in r.distances)} | {r.num_first} of {r.reps} |"
        )
    position = (
        f"requests/s {pooled['rps_position']:+.3f}, "
        f"server CPU per request {pooled['server_ns_per_request_position']:+.3f}"
        if math.isfinite(pooled["rps_position"])
        else f"not estimable ({num} ran on one side of its pair in every repetition)"
    )
    lines += [
        "",
        f"Pooled over {pooled['cells']} cells: requests/s {pooled['rps']:.3f}, server CPU per request "
        f"{pooled['server_ns_per_request']:.3f}; {num} first minus {num} second (centred log ratio): {position}",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tables", nargs="+", type=Path, help="echo tables (Parquet) or raw-data roots")
    parser.add_argument("--num", default="default", help="the ratio's numerator preset")
    parser.add_argument("--den", default="epoll", help="the ratio's denominator preset")
    parser.add_argument("--client", default="thread-per-connection", help="the setup's load generator model")
    args = parser.parse_args()
    for path in args.tables:
        if not path.exists():
            parser.error(f"{path}: no such table or raw-data root")
        paired = pairs(tables.load("echo", str(path)), args.num, args.den, args.client)
        if paired.empty:
            parser.error(f"{path}: no cell of the {args.client} setup has both {args.num} and {args.den}")
        rows, pooled = spread(paired)
        print(report(str(path), rows, pooled, args.num, args.den))


if __name__ == "__main__":
    main()
