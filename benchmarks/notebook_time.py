"""How long each notebook takes to execute, as the pipeline executes it.

    python benchmarks/notebook_time.py [--rounds N] [NOTEBOOK ...]

Each round runs every notebook (default: all of ``notebooks/*.py``), in
turn, the way rules/notebooks.smk does: ``jupytext --to ipynb`` piped into
``papermill``, in a fresh kernel. Every ``*_table`` parameter is the shipped
reference data (``data/reference``), or "" (not run) for an experiment it
has no raw data of, so the inputs are the same on every machine and
checkout; outputs go to a temporary directory. Prints each
notebook's median and range of wall-clock seconds over the rounds, and the
sum of the medians.

Notebooks run in the pipeline, in the notebook tests and in the browser
tests, so a second here is paid many times over. Run it on a quiet machine;
costs drift 10-30 % between runs minutes apart, so compare two checkouts
by alternating runs of this script, not against a number from another day.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import papermill

from iolab.tables import raw_files_under

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
REFERENCE = "data/reference"
# The kernel imports this checkout's iolab, whichever checkout the venv points to.
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def table_parameters(name: str) -> list[str]:
    """The notebook's ``*_table`` parameters, read by papermill from the paired
    .ipynb's parameters cell (tests/test_notebooks.py keeps the pair in sync)."""
    return [p for p in papermill.inspect_notebook(str(NOTEBOOKS / f"{name}.ipynb")) if p.endswith("_table")]


def tool(name: str) -> str:
    """The environment's jupytext or papermill: beside this Python, else on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        sys.exit(
            f"notebook_time: {name} not found; run this with the environment's Python "
            "(.venv/bin/python, or python inside ./repro shell)"
        )
    return found


def reference_flags(name: str) -> list[str]:
    """papermill -p flags pointing each of the notebook's tables at the reference data."""
    flags = []
    for table in table_parameters(name):
        experiment = table.removesuffix("_table")
        flags += ["-p", table, REFERENCE if raw_files_under(REPO / REFERENCE, experiment) else ""]
    return flags


def run_once(name: str, tables: list[str], jupytext: str, papermill_cli: str, scratch: Path) -> float:
    out = scratch / name
    out.mkdir(parents=True)
    flags = [
        *tables,
        "-p",
        "figure_dir",
        str(out / "figures"),
        "-p",
        "numbers_out",
        str(out / "numbers.json"),
        "-p",
        "manifest_out",
        str(out / "manifest.json"),
    ]
    start = time.monotonic()
    notebook = subprocess.run(
        [jupytext, "--quiet", "--to", "ipynb", "--output", "-", str(NOTEBOOKS / f"{name}.py")],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    res = subprocess.run(
        [papermill_cli, "--no-progress-bar", "--cwd", ".", "-", str(out / f"{name}.ipynb"), *flags],
        cwd=REPO,
        input=notebook,
        capture_output=True,
        env=ENV,
    )
    seconds = time.monotonic() - start
    if res.returncode != 0:
        last = res.stderr.decode(errors="replace").strip().splitlines()[-1:]
        sys.exit(f"notebook_time: {name} failed: {last}")
    return seconds


def main() -> None:
    available = sorted(p.stem for p in NOTEBOOKS.glob("*.py"))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument(
        "notebooks", nargs="*", metavar="NOTEBOOK", help=f"notebooks to time (default: all of {', '.join(available)})"
    )
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    unknown = sorted(set(args.notebooks) - set(available))
    if unknown:
        parser.error(f"no notebook {', '.join(unknown)} (there are: {', '.join(available)})")
    names = args.notebooks or available
    # Tools and parameters are looked up once, outside the timed runs.
    jupytext, papermill_cli = tool("jupytext"), tool("papermill")
    tables = {name: reference_flags(name) for name in names}
    times: dict[str, list[float]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="iolab-notebooks-") as scratch:
        for n in range(args.rounds):
            for name in names:
                times[name].append(run_once(name, tables[name], jupytext, papermill_cli, Path(scratch) / f"round{n}"))
            print(f"round {n + 1}/{args.rounds}", file=sys.stderr)
    for name, values in times.items():
        print(
            f"{name:12s} median {statistics.median(values):5.1f} s  "
            f"({min(values):.1f}-{max(values):.1f} s, {len(values)} rounds)"
        )
    print(f"{'sum':12s} median {sum(statistics.median(v) for v in times.values()):5.1f} s")


if __name__ == "__main__":
    main()
