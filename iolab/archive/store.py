"""A store of archived runs: an SQLite file that indexes crates (no server to
start). The crates stay the source of truth; the store can always be rebuilt
from them.

    python -m iolab.archive.store add CRATE.zip [...]     index crates (once each)
    python -m iolab.archive.store list                    the runs it holds
    python -m iolab.archive.store rebuild CRATE.zip [...] start over from crates

Each run: its crate's SHA-256 (so re-adding the same crate changes nothing),
commit, date, name, its comparison key and code digests (iolab.archive.compare);
every number with its value, 95 % interval, repetitions and unit; every claim
part's verdict. A crate that fails verification is refused with one line.
`./repro archive` adds the crate it writes.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import paths
from ..estimation import occasion_spread as occasions
from ..readers import sha256
from . import compare, identity, reruns
from .untrusted import CrateError

DEFAULT_STORE = paths.REPO / "archive" / "store.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    crate_sha256 TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    file TEXT NOT NULL,
    name TEXT NOT NULL,
    git_commit TEXT NOT NULL,
    published TEXT NOT NULL,
    measured TEXT NOT NULL,
    comparison_key TEXT NOT NULL,
    code TEXT,
    environment TEXT NOT NULL,
    settings TEXT NOT NULL,
    path TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS raw (
    crate_sha256 TEXT NOT NULL REFERENCES runs,
    sha256 TEXT NOT NULL,
    PRIMARY KEY (crate_sha256, sha256)
);
CREATE INDEX IF NOT EXISTS raw_by_digest ON raw (sha256);
CREATE TABLE IF NOT EXISTS identity (
    crate_sha256 TEXT PRIMARY KEY REFERENCES runs,
    first_start TEXT NOT NULL,
    launch TEXT NOT NULL,
    findings TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS numbers (
    crate_sha256 TEXT NOT NULL REFERENCES runs,
    key TEXT NOT NULL,
    value REAL,
    low REAL,
    high REAL,
    n INTEGER,
    unit TEXT,
    reps TEXT,
    notebook TEXT,
    kind TEXT,
    PRIMARY KEY (crate_sha256, key)
);
CREATE TABLE IF NOT EXISTS verdicts (
    crate_sha256 TEXT NOT NULL REFERENCES runs,
    claim TEXT NOT NULL,
    part TEXT NOT NULL,
    outcome TEXT NOT NULL,
    value REAL,
    low REAL,
    high REAL,
    PRIMARY KEY (crate_sha256, claim, part)
);
"""


class StoreError(Exception):
    """A store this code cannot read; the message says how to rebuild it."""


@dataclass(frozen=True)
class StoredRun:
    crate_sha256: str
    name: str
    git_commit: str
    measured: str
    numbers: int
    verdicts: int


@contextmanager
def opened(db: Path) -> Iterator[sqlite3.Connection]:
    """The store at ``db``, created if new; one transaction, committed on success."""
    db.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(db)) as conn:
        conn.executescript(SCHEMA)
        for table, column in (
            ("runs", "settings"),
            ("runs", "run_id"),
            ("numbers", "notebook"),
            ("numbers", "kind"),
            ("verdicts", "value"),
            ("identity", "findings"),
        ):
            if column not in {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}:
                raise StoreError(
                    f"{db} was written by an older iolab (its {table} have no {column}): "
                    "rebuild it from the crates, ./repro store rebuild archive/*.crate.zip"
                )
        held, known = conn.execute("SELECT (SELECT COUNT(*) FROM runs), (SELECT COUNT(*) FROM identity)").fetchone()
        if held != known:
            raise StoreError(
                f"{db} was written by an older iolab ({held - known} of its runs have no identity): "
                "rebuild it from the crates, ./repro store rebuild archive/*.crate.zip"
            )
        with conn:
            yield conn


ADDED = "added"


def add(db: Path, crate_zip: Path) -> str:
    """Index one crate: ``ADDED``, or why nothing changed (the store holds
    this crate, or another crate of the same run: iolab.archive.identity).
    A crate that does not verify raises CrateError, and nothing is written."""
    digest = sha256(crate_zip)
    with opened(db) as conn:
        if conn.execute("SELECT 1 FROM runs WHERE crate_sha256 = ?", (digest,)).fetchone():
            return "already held, unchanged"
        run = compare.load(crate_zip)
        assert run.identity is not None  # load() reads it from the crate
        twin = _same_run(conn, run.identity)
        if twin is not None:
            return f"the same run as {twin}, held once, unchanged"
        conn.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                digest,
                run.identity.ident,
                crate_zip.name,
                run.name,
                run.commit,
                run.published,
                run.measured or run.published,
                json.dumps(compare.comparison_key(run), sort_keys=True),
                None if run.code is None else json.dumps(run.code, sort_keys=True),
                json.dumps(run.environment, sort_keys=True),
                json.dumps(run.setting_values, sort_keys=True, default=str),
                str(crate_zip.resolve()),
            ),
        )
        rows = []
        for key, entry in sorted(run.numbers.items()):
            if not isinstance(entry, dict) or reruns.finite_number(entry.get("value")) is None:
                continue
            ci95 = entry.get("ci95")
            ci: list[Any] = ci95 if isinstance(ci95, list) else [None, None]
            rows.append(
                (
                    digest,
                    key,
                    reruns.finite_number(entry.get("value")),
                    reruns.finite_number(ci[0]) if len(ci) == 2 else None,
                    reruns.finite_number(ci[1]) if len(ci) == 2 else None,
                    entry.get("n") if isinstance(entry.get("n"), int) else None,
                    str(entry.get("unit", "")),
                    json.dumps(compare.repetitions(run.numbers, key)),
                    str(entry.get("notebook", "")),
                    occasions.kind_of(entry),
                )
            )
        conn.executemany("INSERT INTO raw VALUES (?, ?)", [(digest, r) for r in sorted(run.identity.raw)])
        conn.execute(
            "INSERT INTO identity VALUES (?, ?, ?, ?)",
            (digest, run.identity.first_start, run.identity.launch, run.identity.findings),
        )
        conn.executemany("INSERT INTO numbers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        estimates = reruns.intervals(run.numbers, "ci95")
        verdicts = []
        for claim_part, outcome in reruns.verdicts(run.numbers).items():
            value, bounds = estimates.get(claim_part, (None, None))
            low, high = bounds or (None, None)
            verdicts.append((digest, *claim_part.split(": ", 1), outcome, value, low, high))
        conn.executemany("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?)", verdicts)
    return ADDED


def _same_run(conn: sqlite3.Connection, ident: identity.RunIdentity) -> str | None:
    """The file of a stored crate of the same run as ``ident``, or None:
    one that shares its first start on one launch or its findings
    (iolab.claims.records.RunIdentity), else a raw file."""
    for file, first_start, launch, findings in conn.execute(
        "SELECT r.file, i.first_start, i.launch, i.findings FROM identity i JOIN runs r USING (crate_sha256)"
    ):
        if ident.same_run(identity.RunIdentity("", str(first_start), launch=str(launch), findings=str(findings))):
            return str(file)
    if not ident.raw:
        row = conn.execute("SELECT file FROM runs WHERE run_id = ?", (ident.ident,)).fetchone()
        return None if row is None else str(row[0])
    digests = sorted(ident.raw)
    # In slices: SQLite bounds the parameters of one statement.
    for i in range(0, len(digests), 500):
        part = digests[i : i + 500]
        row = conn.execute(
            "SELECT r.file FROM raw JOIN runs r USING (crate_sha256)"
            f" WHERE raw.sha256 IN ({','.join('?' * len(part))}) LIMIT 1",
            part,
        ).fetchone()
        if row is not None:
            return str(row[0])
    return None


def runs(db: Path) -> list[StoredRun]:
    """The runs the store holds, in the order they were measured."""
    with opened(db) as conn:
        return [
            StoredRun(*row)
            for row in conn.execute(
                "SELECT r.crate_sha256, r.name, r.git_commit, r.measured,"
                " (SELECT COUNT(*) FROM numbers n WHERE n.crate_sha256 = r.crate_sha256),"
                " (SELECT COUNT(*) FROM verdicts v WHERE v.crate_sha256 = r.crate_sha256)"
                " FROM runs r ORDER BY r.measured, r.name"
            )
        ]


@dataclass(frozen=True)
class Record:
    """One stored run, whole: what the site shows of it."""

    crate_sha256: str
    file: str
    path: str
    name: str
    git_commit: str
    published: str
    measured: str
    comparison_key: dict[str, str]
    code: dict[str, Any] | None
    environment: dict[str, Any]
    settings: dict[str, Any]

    @property
    def short(self) -> str:
        """An identifier for file names and links: the crate's digest, cut."""
        return self.crate_sha256[:12]

    def as_run(self) -> compare.Run:
        """Enough of a compare.Run to ask what of it is stale."""
        return compare.Run(
            self.name,
            {},
            self.environment,
            {},
            self.code,
            self.git_commit,
            self.published,
            self.measured,
            self.settings,
        )


@dataclass(frozen=True)
class StoredNumber:
    key: str
    value: float
    low: float | None
    high: float | None
    n: int | None
    unit: str
    notebook: str
    kind: str | None  # iolab.estimation.occasion_spread.KINDS; None: unknown (an old crate)


@dataclass(frozen=True)
class StoredVerdict:
    claim: str
    part: str
    outcome: str
    value: float | None
    low: float | None
    high: float | None


def records(db: Path) -> list[Record]:
    """Every run the store holds, oldest first, whole."""
    with opened(db) as conn:
        rows = conn.execute(
            "SELECT crate_sha256, file, path, name, git_commit, published, measured, comparison_key, code,"
            " environment, settings FROM runs ORDER BY measured, name"
        ).fetchall()
    return [
        Record(
            crate_sha256=sha,
            file=file,
            path=path,
            name=name,
            git_commit=commit,
            published=published,
            measured=measured,
            comparison_key=json.loads(key),
            code=None if code is None else json.loads(code),
            environment=json.loads(environment),
            settings=json.loads(settings),
        )
        for sha, file, path, name, commit, published, measured, key, code, environment, settings in rows
    ]


def numbers_of(db: Path, crate_sha256: str) -> dict[str, StoredNumber]:
    """A stored run's numbers, by key."""
    with opened(db) as conn:
        rows = conn.execute(
            "SELECT key, value, low, high, n, unit, notebook, kind FROM numbers WHERE crate_sha256 = ? ORDER BY key",
            (crate_sha256,),
        ).fetchall()
    return {row[0]: StoredNumber(*row) for row in rows}


def verdicts_of(db: Path, crate_sha256: str) -> list[StoredVerdict]:
    """A stored run's claim parts and their outcomes, by claim and part."""
    with opened(db) as conn:
        rows = conn.execute(
            "SELECT claim, part, outcome, value, low, high FROM verdicts WHERE crate_sha256 = ? ORDER BY claim, part",
            (crate_sha256,),
        ).fetchall()
    return [StoredVerdict(*row) for row in rows]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m iolab.archive.store",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--db", type=Path, default=DEFAULT_STORE, help=f"the store (default: {paths.relative(DEFAULT_STORE)})"
    )
    sub = ap.add_subparsers(dest="command", required=True)
    a = sub.add_parser("add", help="index crates; one already held changes nothing")
    a.add_argument("crates", nargs="+", type=Path)
    sub.add_parser("list", help="the runs the store holds")
    r = sub.add_parser("rebuild", help="remove the store and index these crates again")
    r.add_argument("crates", nargs="+", type=Path)
    args = ap.parse_args(argv)
    try:
        return _command(args)
    except StoreError as e:
        print(f"store: {e}", file=sys.stderr)
        return 1


def _command(args: argparse.Namespace) -> int:
    if args.command == "list":
        held = runs(args.db)
        for run in held:
            counts = f"{run.numbers} numbers, {run.verdicts} verdicts"
            print(f"{run.measured[:19]}  {run.git_commit[:7]}  {counts}  {run.name}")
        print(f"{len(held)} run(s) in {paths.relative(args.db)}", file=sys.stderr)
        return 0
    if args.command == "rebuild":
        args.db.unlink(missing_ok=True)
    status = 0
    for crate_zip in args.crates:
        try:
            added = add(args.db, crate_zip)
        except (CrateError, OSError) as e:
            print(f"store: {crate_zip}: refused: {e}", file=sys.stderr)
            status = 1
            continue
        print(f"store: {crate_zip.name}: {added}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
