"""Do independent runs agree? Compare the numbers files of two or more runs.

    python -m iolab.archive.reruns RUN1/paper/generated/numbers.json RUN2/... [RUN3/...]

Prints, as Markdown:
- every claim part's verdict in each run, flagging a part that is
  "reproduced" in one run and "not reproduced" in another (a flip; an
  "undecided" is never a flip);
- calibration: for every number with a prediction interval in the first
  run, whether each later run's value falls inside it, and the fraction;
- the same for the confidence intervals (which describe the median of the
  repetitions' distribution, not a re-run's value, and are expected to hold
  it less often).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Numbers = Mapping[str, Any]
DECIDED = ("reproduced", "not reproduced")
# Characters that Markdown would read as markup in a table cell.
_MARKUP = str.maketrans({c: "\\" + c for c in "\\|*_`[]<>#~"})


def md_cell(text: object, limit: int = 200) -> str:
    """Text from a run's files as one Markdown table cell: on one line,
    control characters escaped, markup characters escaped, cut at ``limit``."""
    s = " ".join(str(text).split())
    s = "".join(c if c.isprintable() else repr(c)[1:-1] for c in s[:limit]) + ("…" if len(s) > limit else "")
    return s.translate(_MARKUP)


def finite_number(x: Any) -> float | None:
    """A finite real number from a numbers file, else None."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def _bounds(x: Any) -> list[float] | None:
    """[low, high] from a numbers file (infinite ends allowed), else None."""
    if not isinstance(x, (list, tuple)) or len(x) != 2:
        return None
    ends = [
        float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v) else None for v in x
    ]
    low, high = ends
    return None if low is None or high is None else [low, high]


def _findings(numbers: Numbers) -> list[dict[str, Any]]:
    """The claim parts a numbers file holds, each an object with a claim and a part."""
    entry = numbers.get("findings")
    found = entry.get("value") if isinstance(entry, dict) else None
    return (
        [f for f in found if isinstance(f, dict) and isinstance(f.get("claim"), str) and isinstance(f.get("part"), str)]
        if isinstance(found, list)
        else []
    )


def load(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def verdicts(numbers: Numbers) -> dict[str, str]:
    """``claim: part`` -> outcome, from a numbers file's findings."""
    return {f"{f['claim']}: {f['part']}": str(f.get("outcome", "")) for f in _findings(numbers)}


def flips(runs: Sequence[Numbers]) -> list[str]:
    """Parts reproduced in one run and not reproduced in another."""
    table = [verdicts(r) for r in runs]
    parts = sorted(set().union(*table))
    return [p for p in parts if {"reproduced", "not reproduced"} <= {t.get(p) for t in table}]


@dataclass(frozen=True)
class Calibration:
    checked: int
    inside: int
    misses: tuple[str, ...]

    @property
    def fraction(self) -> float:
        return self.inside / self.checked if self.checked else float("nan")


def intervals(numbers: Numbers, interval: str) -> dict[str, tuple[float | None, list | None]]:
    """key -> (value, [low, high]) for every number, and for every claim
    part's estimate (keyed ``claim: part``)."""
    out: dict[str, tuple[float | None, list | None]] = {}
    for key, entry in numbers.items():
        value = finite_number(entry.get("value")) if isinstance(entry, dict) else None
        if value is not None:
            out[str(key)] = (value, _bounds(entry.get(interval)))
    ends = {"pi95": ("pred_low", "pred_high"), "ci95": ("low", "high")}[interval]
    for f in _findings(numbers):
        est = f.get("estimate")
        if not isinstance(est, dict):
            continue
        value = finite_number(est.get("value"))
        if value is not None:
            out[f"{f['claim']}: {f['part']}"] = (value, _bounds([est.get(ends[0]), est.get(ends[1])]))
    return out


def calibration(first: Numbers, later: Numbers, interval: str = "pi95") -> Calibration:
    """How many of ``first``'s values with a bounded ``interval`` hold
    ``later``'s value for the same key."""
    checked, inside, misses = 0, 0, []
    ours, theirs = intervals(first, interval), intervals(later, interval)
    for key, (_, bounds) in sorted(ours.items()):
        value = theirs.get(key, (None, None))[0]
        if not bounds or None in bounds or value is None:
            continue
        checked += 1
        slack = 1e-9 * max(abs(bounds[0]), abs(bounds[1]), 1.0)  # rounding, not a tolerance
        if bounds[0] - slack <= value <= bounds[1] + slack:
            inside += 1
        else:
            misses.append(f"{key}: {value:.4g} outside [{bounds[0]:.4g}, {bounds[1]:.4g}]")
    return Calibration(checked, inside, tuple(misses))


def report(runs: Sequence[Numbers], names: Sequence[str]) -> str:
    names = [md_cell(n) for n in names]
    lines = ["## Verdicts", "", "| part | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    table = [verdicts(r) for r in runs]
    flipped = set(flips(runs))
    for part in sorted(set().union(*table)):
        mark = " **(flip)**" if part in flipped else ""
        lines.append(f"| {md_cell(part)}{mark} | " + " | ".join(md_cell(t.get(part, "")) for t in table) + " |")
    lines += ["", f"Flips (reproduced in one run, not reproduced in another): {len(flipped)}", ""]
    for interval, title in (("pi95", "prediction intervals"), ("ci95", "confidence intervals")):
        lines += [f"## Calibration: {title} of {names[0]}", ""]
        for name, later in zip(names[1:], runs[1:], strict=True):
            c = calibration(runs[0], later, interval)
            lines.append(f"- {name}: {c.inside} of {c.checked} values inside ({c.fraction:.0%})")
            lines += [f"  - {md_cell(m)}" for m in c.misses]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m iolab.archive.reruns", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("numbers", nargs="+", type=Path, help="paper/generated/numbers.json of each run")
    args = ap.parse_args(argv)
    if len(args.numbers) < 2:
        print("iolab: give the numbers files of at least two runs", file=sys.stderr)
        return 2
    try:
        runs = [load(p) for p in args.numbers]
    except (OSError, json.JSONDecodeError) as e:
        print(f"iolab: {e}", file=sys.stderr)
        return 1
    print(report(runs, [f"run {i + 1}" for i in range(len(runs))]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
