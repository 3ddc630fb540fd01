"""Duet against sequential ABBA for a cost-probe ratio: which measures the
ratio of two probes with less spread between repetitions.

    python benchmarks/duet.py [--reps N] [--batches N] [--bytes B] [--out DIR]
                              [--from-cells CSV]

The ratio is C1's t(1)/w at B bytes over TCP loopback: one io_uring_enter
with one SEND SQE (``cost-probe uring-batch --n 1``) over one send(2)
(``cost-probe sendrecv``, single connection, ACKs as in an echo server),
each side the median over its batches of the time per call.

Each repetition measures the ratio three ways, in a random order:

- ABBA: A B B A one after another on CPU 1 (a linear drift cancels);
- duet: A on CPU 0 and B on CPU 1 at once, then B on 0 and A on 1 at once
  (Bulej et al., ICPE 2020: both sides share whatever the VM's neighbours
  do while they run; swapping the CPUs cancels a difference between them);
- the duet's two orientations apart, to check the equal-share assumption:
  if the two vCPUs give a side different speeds, the orientations differ.

Writes DIR/cells.csv (every probe run: repetition, method, side, CPU,
value), DIR/spread.csv and DIR/spread.md: the sd across repetitions of
each method's log ratio with its 90 % interval (chi-square), the mean
ratio of each, and the orientations' mean log difference. Run it on a
quiet machine with the native programs built (``make -C native``).
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import statistics
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from iolab import paths
from iolab.estimation.intervals import sd_interval

PROBE = paths.REPO / "native" / "build" / "cost-probe"
SIDES = ("A", "B")
LABEL = {"A": "send(2), per call", "B": "io_uring_enter with one SEND SQE"}


def argv(side: str, cpu: int, batches: int, size: int, out: Path, seed: int) -> list[str]:
    common = ["--batches", str(batches), "--warmup-batches", "5", "--cpu", str(cpu), "--output", str(out)]
    common += ["--seed", str(seed)]
    if side == "A":
        sendrecv = [
            "sendrecv",
            "--transports",
            "tcp",
            "--ops",
            "send",
            "--patterns",
            "single",
            "--ack-modes",
            "pingpong",
        ]
        return [str(PROBE), *sendrecv, "--bytes", str(size), *common]
    return [str(PROBE), "uring-batch", "--ops", "send", "--n", "1", "--bytes", str(size), *common]


def per_call(csv_path: Path) -> float:
    """The median time per call over the measured batches, in ns."""
    rows = [r for r in csv.DictReader(ln for ln in csv_path.read_text().splitlines() if not ln.startswith("#"))]
    values = [int(r["ns"]) / int(r["calls"]) for r in rows if r["warmup"] == "0"]
    if not values:
        raise SystemExit(f"duet: {csv_path.name} holds no measured batch")
    return statistics.median(values)


def run_together(jobs: Sequence[tuple[str, int]], batches: int, size: int, tmp: Path, seed: int) -> dict[str, float]:
    """``jobs`` (side, CPU) started at once; each side's time per call."""
    outs = {side: tmp / f"{side}{cpu}.csv" for side, cpu in jobs}
    procs = [
        (side, subprocess.Popen(argv(side, cpu, batches, size, outs[side], seed), stderr=subprocess.PIPE, text=True))
        for side, cpu in jobs
    ]
    for side, p in procs:
        _, err = p.communicate(timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"duet: cost-probe ({side}) failed: {err.strip().splitlines()[-1:]}")
    return {side: per_call(outs[side]) for side, _ in jobs}


def measure(reps: int, batches: int, size: int, seed: int) -> list[dict[str, object]]:
    rng = random.Random(seed)
    cells: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        for rep in range(1, reps + 1):
            methods = ["abba", "duet"]
            rng.shuffle(methods)
            for method in methods:
                if method == "abba":
                    for order, side in enumerate("ABBA"):
                        v = run_together([(side, 1)], batches, size, tmp, rep * 10 + order)
                        cells.append(
                            {"rep": rep, "method": "abba", "order": order, "side": side, "cpu": 1, "ns": v[side]}
                        )
                else:
                    for order, (cpu_a, cpu_b) in enumerate(((0, 1), (1, 0))):
                        v = run_together([("A", cpu_a), ("B", cpu_b)], batches, size, tmp, rep * 10 + order)
                        for side, cpu in (("A", cpu_a), ("B", cpu_b)):
                            cells.append(
                                {"rep": rep, "method": "duet", "order": order, "side": side, "cpu": cpu, "ns": v[side]}
                            )
                print(f"duet: repetition {rep}/{reps}: {method} done", flush=True)
    return cells


def mean_log(cells: Sequence[dict[str, object]], method: str, side: str, order: int | None = None) -> float:
    vals = [
        math.log(float(str(c["ns"])))
        for c in cells
        if c["method"] == method and c["side"] == side and (order is None or int(str(c["order"])) == order)
    ]
    return sum(vals) / len(vals)


def log_ratios(cells: Sequence[dict[str, object]]) -> dict[str, list[float]]:
    """Per repetition, log(B/A) by method: "abba", "duet" (both
    orientations), "duet A@0" and "duet A@1" (one orientation each)."""
    out: dict[str, list[float]] = {"abba": [], "duet": [], "duet A@0": [], "duet A@1": []}
    for rep in sorted({int(str(c["rep"])) for c in cells}):
        mine = [c for c in cells if int(str(c["rep"])) == rep]
        out["abba"].append(mean_log(mine, "abba", "B") - mean_log(mine, "abba", "A"))
        out["duet"].append(mean_log(mine, "duet", "B") - mean_log(mine, "duet", "A"))
        out["duet A@0"].append(mean_log(mine, "duet", "B", 0) - mean_log(mine, "duet", "A", 0))
        out["duet A@1"].append(mean_log(mine, "duet", "B", 1) - mean_log(mine, "duet", "A", 1))
    return out


def summary(cells: Sequence[dict[str, object]], size: int) -> tuple[list[dict[str, object]], list[str]]:
    ratios = log_ratios(cells)
    rows = []
    for method, values in ratios.items():
        sd, low, high = sd_interval(values)
        rows.append(
            {
                "method": method,
                "reps": len(values),
                "ratio": math.exp(sum(values) / len(values)),
                "sd_log": sd,
                "sd_low": low,
                "sd_high": high,
            }
        )
    swap = [a - b for a, b in zip(ratios["duet A@0"], ratios["duet A@1"], strict=True)]
    lines = [
        f"t(1)/w at {size} B (B = {LABEL['B']}, A = {LABEL['A']}), {len(ratios['abba'])} repetitions:",
        "",
        "| method | ratio (geometric mean) | sd of log ratio [90 % interval] |",
        "|---|---|---|",
        *(
            f"| {r['method']} | {r['ratio']:.3f} | {r['sd_log']:.3f} [{r['sd_low']:.3f}, {r['sd_high']:.3f}] |"
            for r in rows
        ),
        "",
        f"Equal share: the orientations' log ratios differ by {statistics.mean(swap):+.3f} on average "
        f"(sd {statistics.stdev(swap):.3f}); a difference far from 0 means the two vCPUs ran a side at "
        "different speeds, which the swap cancels in the duet's ratio but not in one orientation.",
    ]
    return rows, lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--batches", type=int, default=150)
    ap.add_argument("--bytes", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=paths.REPO / "results" / "benchmarks" / "duet")
    ap.add_argument("--from-cells", type=Path, help="summarise a cells.csv again without measuring")
    args = ap.parse_args()
    if args.reps < 3:
        ap.error("--reps must be at least 3 (an sd across repetitions)")
    if args.from_cells:
        with args.from_cells.open() as f:
            cells: list[dict[str, object]] = list(csv.DictReader(f))
        for c in cells:
            c["order"] = int(str(c["order"]))
    else:
        if not PROBE.exists():
            ap.error(f"{paths.relative(PROBE)} is not built: make -C native")
        cells = measure(args.reps, args.batches, args.bytes, args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.from_cells:
        with (args.out / "cells.csv").open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["rep", "method", "order", "side", "cpu", "ns"])
            w.writeheader()
            w.writerows(cells)
    rows, lines = summary(cells, args.bytes)
    with (args.out / "spread.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    (args.out / "spread.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
