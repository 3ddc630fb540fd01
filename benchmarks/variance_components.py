"""How much each decision ratio varies at three levels, from every run you
can gather: repetitions within a run, runs within a launch, and launches
(iolab.procedure.variance_components), and the lag structure within a run.

    python benchmarks/variance_components.py [CRATE ...] [--records DIR] [--boots N]

Runs come from the crates named and the records under --records
(data/records/ by default), each run once, grouped by launch (its boot
ids), as ``./repro verdicts`` pools them (iolab.archive.pooling). For every
counted claim part that at least two runs measured: the three sds (log
scale) with 90 % parametric-bootstrap intervals, and the runs and launches
they rest on; then the same three pooled over each claim family's ratios
(each part its own mean, one set of variances). Last, the lag-1
autocorrelation of each run's repetitions in the order measured against
the same values shuffled: an excess over 0 is a drift or a level shift
within runs that the this-machine verdict's simulation must carry
(iolab.procedure.precision_errors).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iolab.archive import pooling
from iolab.claims import records
from iolab.procedure import variance_components as components


def family(quantity: str) -> str:
    """A part's claim family, from its claim id: the cost model's (C),
    the echo servers' (U), MPI's (M)."""
    return {"C": "cost model (C1-C5)", "U": "echo servers (U1-U6)", "M": "MPI (M1-M3)"}.get(quantity[:1], "other")


def fmt(c: components.Components, level: str) -> str:
    return f"{c.sd[level]:.3f} [{c.low[level]:.3f}, {c.high[level]:.3f}]"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("crates", nargs="*", type=Path)
    ap.add_argument("--records", type=Path, default=records.DIRECTORY, help="records to add (default data/records/)")
    ap.add_argument("--boots", type=int, default=100, help="bootstrap draws per interval (default 100)")
    args = ap.parse_args(argv)
    evidence = pooling.gather(args.crates, args.records, say=lambda s: print(s, file=sys.stderr))
    runs = [(e.identity.ident, e.launch, e.findings) for e in evidence]
    print(f"{len(evidence)} run(s) on {len({e.launch or e.identity.ident for e in evidence})} launch(es):")
    for e in sorted(evidence, key=lambda e: e.measured):
        print(
            f"  run {e.identity.ident} ({e.kind} {e.source}), measured {e.measured[:16]}, launch {e.launch[:8] or '?'}"
        )
    series = components.series_of(runs)
    by_part: dict[str, list[components.Series]] = {}
    for s in series:
        by_part.setdefault(s.quantity, []).append(s)
    print("\nper decision ratio: sd (log) [90 % interval] between launches / runs within a launch / repetitions")
    for name, mine in sorted(by_part.items()):
        c = components.components(mine, boots=args.boots)
        if c is None:
            continue
        print(
            f"  {name[:110]}\n      launches {fmt(c, 'launch')}  runs {fmt(c, 'run')}  reps {fmt(c, 'repetition')}"
            f"  ({c.launches} launches, {c.runs} runs)"
        )
    print("\npooled per claim family (each part its own mean):")
    fams: dict[str, list[components.Series]] = {}
    for s in series:
        fams.setdefault(family(s.quantity), []).append(s)
    for name, mine in sorted(fams.items()):
        c = components.components(mine, boots=args.boots)
        if c is not None:
            print(
                f"  {name:22} launches {fmt(c, 'launch')}  runs {fmt(c, 'run')}  reps {fmt(c, 'repetition')}  "
                f"({c.quantities} parts, {c.runs} runs, {c.launches} launches, {c.observations} values)"
            )
    print()
    for ranks in (False, True):
        lag = components.lag_structure(series, ranks=ranks)
        if lag is not None:
            print(
                f"lag-1 autocorrelation of repetitions within a run ({'ranks' if ranks else 'logs'}): "
                f"{lag.ordered:+.3f} in the order measured, {lag.shuffled:+.3f} shuffled: excess "
                f"{lag.excess:+.3f} [{lag.low:+.3f}, {lag.high:+.3f}] (90 %, {lag.series} series)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
