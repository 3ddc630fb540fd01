"""The shipped reference data gives the recorded tidy tables, value for value.

A restructuring must not change what a raw file means. tests/data/
reference_tables.json records, for each experiment with data under
data/reference, the rows, the columns and a digest of every column of the
tidy table iolab builds from it. After a deliberate change to a table,
rewrite the record and say what changed in the commit:

    .venv/bin/python tests/test_reference_data.py --record
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
RECORD = REPO / "tests" / "data" / "reference_tables.json"
sys.path.insert(0, str(REPO))

from iolab import tables  # noqa: E402 (this checkout first on the path, above)


def column_digest(column: pd.Series) -> str:
    # str() of each value: exact for floats (repr), and it covers list cells.
    return hashlib.sha256("\n".join(column.map(str)).encode()).hexdigest()[:16]


def summary(experiment: str) -> dict[str, Any]:
    table = tables.load(experiment, tables.REFERENCE, include_emulated=True)
    return {"rows": len(table), "columns": {c: column_digest(table[c]) for c in table.columns}}


def shipped_experiments() -> list[str]:
    return sorted(e for e in tables.TABLES if tables.raw_files_under(REPO / tables.REFERENCE, e))


def test_every_shipped_experiment_is_recorded() -> None:
    recorded = json.loads(RECORD.read_text())
    assert sorted(recorded) == shipped_experiments()
    assert len(recorded) >= 8  # syscall, sendrecv, uring_batch, nop, trace, echo, latency, mpi


@pytest.mark.parametrize("experiment", shipped_experiments())
def test_the_reference_data_gives_the_recorded_table(experiment: str) -> None:
    want = json.loads(RECORD.read_text())[experiment]
    got = summary(experiment)
    assert got["rows"] == want["rows"]
    assert list(got["columns"]) == list(want["columns"])
    changed = [c for c in want["columns"] if got["columns"][c] != want["columns"][c]]
    assert changed == [], f"{experiment}: these columns changed value: {changed}"


def test_a_changed_value_is_caught() -> None:
    # The digest sees one value in one row move in its last digit.
    table = tables.load("syscall", tables.REFERENCE, include_emulated=True)
    moved = table["ns_per_call"].copy()
    moved.iloc[len(moved) // 2] = float(moved.iloc[len(moved) // 2]) * (1 + 1e-12)
    assert column_digest(moved) != column_digest(table["ns_per_call"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--record", action="store_true", help=f"rewrite {RECORD.relative_to(REPO)}")
    if not ap.parse_args().record:
        ap.print_help()
        return 2
    RECORD.write_text(json.dumps({e: summary(e) for e in shipped_experiments()}, indent=1) + "\n")
    print(f"wrote {RECORD.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
