"""mpi-probe against the OSU micro-benchmarks 5.3 themselves, launched in
turn on shared memory, 2 ranks: ping-pong (osu_latency) and the collectives
(osu_bcast, osu_allreduce, osu_alltoall), on OSU's statistic. Each round
launches every program once, in a shuffled order; per round, our value over
OSU's; across rounds, the median ratio and its 95 % interval.

    python benchmarks/mpi_vs_osu.py --osu DIR [--rounds 7] [--sizes 1,1024] [--coll-sizes 4,1024,65536]

DIR is an OSU 5.3 build (its mpi/ directory, holding pt2pt/osu_latency and
collective/osu_bcast ...), built by you from OSU's release: this package
carries no OSU code. Ours is timed four ways: our own method (a ready
message, then one timed round trip; a barrier before each collective
iteration; buffers filled and checked every iteration), the same with each
iteration's clock reading taken off (what the analysis does since the
probe records a reading's cost), the collectives with ``--sync window``
(common start times instead of the barrier), and ``--method osu`` (OSU's
loop and counts, buffers reused).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import random
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iolab.estimation.intervals import across_reps

PROBE = Path(__file__).resolve().parents[1] / "native" / "build" / "mpi-probe"
MPIRUN = ["mpirun", "--allow-run-as-root", "-np", "2", "--bind-to", "core", "--mca", "btl", "self,vader"]


def run(argv: list[str]) -> str:
    res = subprocess.run([*MPIRUN, *argv], capture_output=True, text=True, timeout=900)
    if res.returncode != 0:
        raise SystemExit(f"mpi_vs_osu: {' '.join(argv[:2])} failed: {res.stderr.strip()[-300:]}")
    return res.stdout


def osu(program: Path, sizes: list[int]) -> dict[int, float]:
    """The per-size number an OSU program prints (µs). osu_latency 5.3 has
    no size option: it runs every size up to 4 MiB, and the rest are read
    off its table."""
    sized = [] if program.name == "osu_latency" else ["-m", f"{min(sizes)}:{max(sizes)}"]
    out = run([str(program), *sized])
    values = {}
    for line in out.splitlines():
        m = re.match(r"^\s*(\d+)\s+([\d.]+)", line)
        if m and int(m[1]) in sizes:
            values[int(m[1])] = float(m[2])
    return values


def ours(bench: str, sizes: list[int], method: str, sync: str = "barrier") -> tuple[dict[int, float], dict[int, float]]:
    """OSU's statistic from our rows (µs): ping-pong half the mean round
    trip, a collective the mean over ranks of each rank's mean; as read, and
    with each iteration's clock reading taken off."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "out.csv"
        args = ["--bench", bench, "--sizes", ",".join(map(str, sizes)), "--method", method, "--output", str(path)]
        if method == "probe":
            args += [
                "--iterations",
                "1000",
                "--series",
                "5",
                "--warmup",
                "100",
                "--large-iterations",
                "200",
                "--sync",
                sync,
            ]
        run([str(PROBE), *args])
        text = path.read_text()
    meta = json.loads(next(ln for ln in text.splitlines() if ln.startswith("# meta: "))[len("# meta: ") :])
    timer = float(meta.get("timer_overhead_ns", 0.0))
    rows = list(csv.DictReader(ln for ln in text.splitlines() if not ln.startswith("#")))
    by_size: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["bench"] in (bench, f"osu_{bench}", "osu_latency") and int(r.get("late", 0) or 0) == 0:
            by_size[int(r["bytes"])][int(r["rank"])].append(float(r["ns"]))
    plain, corrected = {}, {}
    for size, ranks in by_size.items():
        if bench == "pingpong":
            ns = np.asarray(ranks[0])
            plain[size], corrected[size] = ns.mean() / 2000, (ns - timer).clip(0).mean() / 2000
        else:
            plain[size] = float(np.mean([np.mean(v) for v in ranks.values()])) / 1000
            corrected[size] = float(np.mean([np.mean(np.asarray(v) - timer) for v in ranks.values()])) / 1000
    return plain, corrected


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--osu", type=Path, required=True, help="OSU 5.3's built mpi/ directory")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--sizes", default="1,1024")
    ap.add_argument("--coll-sizes", default="4,1024,65536")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if not PROBE.exists():
        print(f"mpi_vs_osu: {PROBE} is not built: make -C native mpi", file=sys.stderr)
        return 2
    programs = {
        "pingpong": args.osu / "pt2pt" / "osu_latency",
        **{b: args.osu / "collective" / f"osu_{b}" for b in ("bcast", "allreduce", "alltoall")},
    }
    missing = [str(p) for p in programs.values() if not p.exists()]
    if missing:
        print(f"mpi_vs_osu: not built: {', '.join(missing)}", file=sys.stderr)
        return 2
    sizes = {"pingpong": [int(x) for x in args.sizes.split(",")]}
    sizes |= {b: [int(x) for x in args.coll_sizes.split(",")] for b in ("bcast", "allreduce", "alltoall")}
    rng = random.Random(args.seed)
    ratios: dict[tuple[str, int, str], list[float]] = defaultdict(list)
    for r in range(args.rounds):
        jobs = [(b, kind) for b in programs for kind in ("osu", "probe", "probe-window", "osu-method")]
        rng.shuffle(jobs)
        got: dict[tuple[str, str], object] = {}
        for bench, kind in jobs:
            if kind == "osu":
                got[bench, kind] = osu(programs[bench], sizes[bench])
            elif kind == "osu-method":
                got[bench, kind] = ours(bench, sizes[bench], "osu")
            else:
                got[bench, kind] = ours(bench, sizes[bench], "probe", "window" if kind == "probe-window" else "barrier")
        for bench in programs:
            ref = got[bench, "osu"]
            plain, corrected = got[bench, "probe"]
            _, osu_method = got[bench, "osu-method"]
            _, window = got[bench, "probe-window"]
            for size in sizes[bench]:
                if size in ref and size in plain:
                    ratios[bench, size, "ours, as read"].append(plain[size] / ref[size])
                    ratios[bench, size, "ours, clock reading taken off"].append(corrected[size] / ref[size])
                if bench != "pingpong" and size in ref and size in window:
                    ratios[bench, size, "ours, window sync, clock taken off"].append(window[size] / ref[size])
                if size in ref and size in osu_method:
                    ratios[bench, size, "--method osu, clock reading taken off"].append(osu_method[size] / ref[size])
        print(f"round {r + 1} of {args.rounds} done", file=sys.stderr, flush=True)
    print(f"{'benchmark':10} {'size':>7}  {'ours over OSU 5.3 (median [95 % interval] over rounds)':60}")
    for (bench, size, kind), values in sorted(ratios.items()):
        e = across_reps(values, predict=False)
        interval = f"[{e.low:.3f}, {e.high:.3f}]" if math.isfinite(e.low) else "(no interval)"
        print(f"{bench:10} {size:>7}  {kind:40} {e.value:.3f} {interval}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
