"""Line coverage of the C programs after a test run, from gcov's JSON.

``./repro coverage`` builds the native programs with ``--coverage`` (the
optimised and the sanitizer builds), runs the suite, then calls this on
``native/build``. A source file compiled into several programs (the
common/ helpers) or into both builds counts a line as covered when any of
them ran it. Usage: python tests/coverage_c.py NATIVE_BUILD_DIR [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path


def executed_lines(build: Path) -> dict[str, tuple[set[int], set[int]]]:
    """Per source file (relative to native/): its instrumented lines and the
    ones some run executed, over every program under ``build`` (its .gcno
    notes; a program that never ran has no .gcda and counts as unexecuted)."""
    lines: dict[str, tuple[set[int], set[int]]] = defaultdict(lambda: (set(), set()))
    for gcno in sorted(build.rglob("*.gcno")):
        res = subprocess.run(
            ["gcov", "--json-format", "--stdout", gcno.name],
            cwd=gcno.parent,
            capture_output=True,
            text=True,
            check=False,
        )
        if res.returncode != 0:
            raise RuntimeError(f"gcov failed on {gcno}: {res.stderr.strip()}")
        for doc in res.stdout.splitlines():
            for entry in json.loads(doc)["files"]:
                if entry["file"].startswith("/"):  # system headers (liburing.h, bits/)
                    continue
                instrumented, executed = lines[entry["file"]]
                for line in entry["lines"]:
                    instrumented.add(line["line_number"])
                    if line["count"] > 0:
                        executed.add(line["line_number"])
    return dict(lines)


def summary(lines: dict[str, tuple[set[int], set[int]]]) -> dict[str, dict[str, float | int]]:
    out: dict[str, dict[str, float | int]] = {}
    for source, (instrumented, executed) in sorted(lines.items()):
        out[source] = {
            "lines": len(instrumented),
            "covered": len(executed),
            "percent": 100.0 * len(executed) / len(instrumented) if instrumented else 100.0,
        }
    total_lines = sum(int(v["lines"]) for v in out.values())
    total_covered = sum(int(v["covered"]) for v in out.values())
    out["TOTAL"] = {
        "lines": total_lines,
        "covered": total_covered,
        "percent": 100.0 * total_covered / total_lines if total_lines else 0.0,
    }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build", type=Path, help="native/build after a --coverage build and a test run")
    parser.add_argument("--json", type=Path, help="also write the table as JSON here")
    args = parser.parse_args(argv)
    lines = executed_lines(args.build)
    if not lines:
        print(
            f"coverage_c: no .gcno files under {args.build}; build with "
            "`make EXTRA_CFLAGS=--coverage` and run the programs first",
            file=sys.stderr,
        )
        return 1
    table = summary(lines)
    width = max(len(k) for k in table)
    print(f"{'C source':<{width}}  {'lines':>6}  {'covered':>7}  {'%':>6}")
    for source, row in table.items():
        print(f"{source:<{width}}  {row['lines']:>6}  {row['covered']:>7}  {row['percent']:>5.1f}%")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(table, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
