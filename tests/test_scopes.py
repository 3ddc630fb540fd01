"""Each claim's two verdicts in the paper (iolab.report.scopes): the claims
table's one line per claim, the part that decides it, this run pooled
with the records of its machine kind (each run once, other kinds left
out), and the title that states the run's first answer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from iolab.claims import evidence, records
from iolab.claims.findings import finding
from iolab.claims.verdicts import Outcome, Rule, settle
from iolab.report import numbers, scopes

MACHINE = "vm, 2 CPUs, Linux 6.18, mitigations on"


def judged(parts: list) -> list:
    settle(parts, evidence.FIXED, 0.0, predict=False)
    return parts


def test_the_part_that_decides_a_claim_leads_its_line() -> None:
    # Twelve repetitions: every part is decided after the adjustment over three.
    holds = finding("U1", "far", [1.5] * 12, Rule("above", 0.95), quoted="1.12")
    near = finding("U1", "near", [1.0, 0.97, 1.1, 0.99, 1.02, 0.96] * 2, Rule("above", 0.95), quoted="1.05")
    parts = judged([holds, near])
    assert scopes.lead_part(parts) is near
    fails = finding("U1", "fails", [0.5] * 12, Rule("above", 0.95), quoted="1.01")
    parts = judged([holds, near, fails])
    assert scopes.lead_part(parts) is fails
    table = scopes.claims_table(parts, {}, {"U1": "io_uring is at least a worthy competitor of epoll"})
    (row,) = table.to_dict("records")
    assert (
        row["source"] == "1.01" and row["ours"].endswith(": fails") and row["this machine"].startswith("not reproduced")
    )
    assert len(row["says"].split()) <= 12
    # A source with no figure for the part: its words as the rule quotes them.
    words = finding("C4", "same", [2.9] * 12, Rule("within", 1.0, 0.05, "0.950–1.05: 'about the same'"))
    (row,) = scopes.claims_table(judged([words]), {}, {}).to_dict("records")
    assert row["source"] == "\u201cabout the same\u201d"


def record_of(start: str, launch: str, value: float, machine: str = MACHINE) -> records.RunRecord:
    findings = (
        {"claim": "U1", "part": "p", "rule_kind": "above", "bound": 0.95, "margin_share": 0.0, "per_rep": [value] * 6},
    )
    identity = records.RunIdentity("10a8834", start, launch=launch, findings=records.findings_digest(findings))
    return records.RunRecord(identity, machine, "", "default", findings)


def test_this_run_pools_with_the_records_of_its_kind_each_run_once(tmp_path: Path) -> None:
    here = record_of("2026-12-06T04:50:00+00:00", "06c58a43-0000-4000-8000-000000000000", 1.2)
    this_run = scopes.pooled.RunFindings(
        here.identity.ident, here.identity.first_start, list(here.findings), here.identity.launch
    )
    # Its own record (archived before the notebook ran again), two launches of
    # its kind, one of another kind.
    here.write(tmp_path)
    record_of("2026-12-01T00:00:00+00:00", "377f8510-0000-4000-8000-000000000000", 1.1).write(tmp_path)
    record_of("2026-12-02T00:00:00+00:00", "377f8510-0000-4000-8000-000000000000", 1.3).write(tmp_path)
    record_of("2026-12-03T00:00:00+00:00", "aaaaaaaa-0000-4000-8000-000000000000", 0.5, "bare-metal, 64 CPUs").write(
        tmp_path
    )
    pool = scopes.pool_kind(this_run, MACHINE, tmp_path)
    assert (pool.runs, pool.launches) == (3, 2)
    verdicts = scopes.kind_verdicts(pool)
    assert verdicts["U1"].outcome is Outcome.UNDECIDED and verdicts["U1"].launches == 2
    assert "2 launches" in verdicts["U1"].text()
    # None: this run alone.
    alone = scopes.pool_kind(this_run, MACHINE, None)
    assert (alone.runs, alone.launches) == (1, 1)


def test_the_title_states_the_first_answer_from_its_interval() -> None:
    def rows(value: float, low: float, high: float) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {
                    "metric": "server_ns_per_request",
                    "connections": 50,
                    "bytes": 128,
                    "value": 0.9,
                    "low": 0.8,
                    "high": 0.95,
                },
                {
                    "metric": "server_ns_per_request",
                    "connections": 500,
                    "bytes": 128,
                    "value": value,
                    "low": low,
                    "high": high,
                },
                {"metric": "rps", "connections": 500, "bytes": 128, "value": 2.0, "low": 1.9, "high": 2.1},
            ]
        )

    machine = "a 2-vCPU Intel Xeon virtual machine"
    more = numbers.title(machine, "6.18.44", rows(1.25, 1.1, 1.4))
    assert more == (
        "On a 2-vCPU Intel Xeon virtual machine (Linux 6.18.44), io_uring's default ring cost 1.25\u00d7 "
        "epoll's CPU per echoed request at 500 connections in one run: the sources' claims re-measured"
    )
    assert "one run showed no difference between io_uring's default ring and epoll in CPU per echoed request" in (
        numbers.title(machine, "6.18", rows(1.02, 0.9, 1.1))
    )
    assert numbers.title("a 2-vCPU Intel(R) Xeon(R) Processor virtual machine", "6.18", None).startswith(
        "io_uring against epoll on a 2-vCPU Intel Xeon Processor virtual machine (Linux"
    )
    assert "used 0.80\u00d7 epoll's CPU per echoed request at 500 connections in one run" in numbers.title(
        machine, "6.18", rows(0.8, 0.7, 0.9)
    )
    # Negative control: no bounded interval, no finding in the title.
    unbounded = rows(1.25, -np.inf, np.inf)
    unbounded = unbounded[unbounded["connections"] == 500]
    assert numbers.title(machine, "6.18", unbounded).startswith("io_uring against epoll on a 2-vCPU")
    assert numbers.title(machine, "6.18", None).startswith("io_uring against epoll on")


@pytest.mark.parametrize("n,expected", [(6, "reproduced, undecided (at 6 repetitions)")])
def test_the_machinery_table_says_what_the_repetitions_can_reach(n: int, expected: str) -> None:
    parts = judged([finding("C1", f"p{i}", [1.2] * n, Rule("above", 1.0)) for i in range(2)])
    assert numbers.reach_words(parts) == expected
    assert numbers.decide_words(Outcome.REPRODUCED, parts) == "decided"
    near = judged([finding("C1", "p", [1.0, 1.05, 0.98, 1.02, 0.99, 1.01], Rule("above", 1.0))])
    assert numbers.decide_words(Outcome.UNDECIDED, near).startswith(("about", "more than"))
