"""Adaptive precision: the planner on synthetic findings (it stops once
verdicts are decided, at the budget, at max_rounds; it repeats only what an
unsettled verdict needs), and the real checkpoint loop through snakemake."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import snakemake

from iolab.claims.findings import finding, not_testable
from iolab.claims.verdicts import Rule
from iolab.planning.precision import plan_round, wanted

PRECISION = {"enabled": True, "budget_minutes": 10, "reps_per_round": 3, "max_rounds": 4, "target_rel_halfwidth": None}
DECIDED = [0.8, 0.82, 0.85, 0.79, 0.81, 0.84]  # all below 1: "sqpoll slower" reproduced
UNDECIDED = [0.9, 1.05, 0.95, 1.1, 0.97, 1.02]  # straddles 1, centred on it: more repetitions will not decide it
WITHIN_REACH = [0.9, 1.02, 0.93, 1.0, 0.92, 0.99]  # straddles 1, about 9 repetitions would decide it


def echo_finding(values: list[float], c: int) -> object:
    return finding(
        "U3", f"c={c} 128 B", values, Rule("below", 1.0), decides={"echo": [["sqpoll", c, 128], ["default", c, 128]]}
    )


def plan(findings: list, spent: float = 0.0, round_: int = 0, **precision: object):
    return plan_round(
        findings,
        round_=round_,
        repeats=6,
        precision={**PRECISION, **precision},
        spent_seconds=spent,
        seconds_per_rep={"syscall": 10.0, "echo": 100.0},
        seconds_per_cell=2.0,
    )


def test_stops_once_every_verdict_is_decided() -> None:
    p = plan([echo_finding(DECIDED, 50), not_testable("U2", "rings", "not measured")])
    assert p.stop and p.reason == "every verdict is decided" and p.next == {}


def test_repeats_only_the_cells_of_undecided_findings() -> None:
    p = plan([echo_finding(DECIDED, 50), echo_finding(UNDECIDED, 500)])
    assert not p.stop and p.unsettled == ["U3 c=500 128 B"]
    assert p.next == {"echo": {"reps": [7, 8, 9], "cells": [["sqpoll", 500, 128], ["default", 500, 128]]}}
    assert p.next_seconds == pytest.approx(2.0 * 2 * 3)
    # Round 1 numbers its repetitions after round 0's.
    assert plan([echo_finding(WITHIN_REACH, 500)], round_=1).next["echo"]["reps"] == [10, 11, 12]


def test_whole_experiments_for_cost_model_findings() -> None:
    f = finding("C1 (s)", "s", UNDECIDED, Rule("within", 1.0, 0.01), decides={"syscall": [], "sendrecv": []})
    p = plan([f])
    assert p.next == {"sendrecv": {"reps": [7, 8, 9]}, "syscall": {"reps": [7, 8, 9]}}
    assert p.next_seconds == pytest.approx(10.0 * 3)  # sendrecv has no timing yet: counted as 0


def test_stops_at_the_budget() -> None:
    f = echo_finding(UNDECIDED, 500)
    assert not plan([f], spent=0.0, budget_minutes=1).stop  # 12 s of 60 s
    p = plan([f], spent=50.0, budget_minutes=1)  # 50 + 12 s > 60 s
    assert p.stop and "would overrun the budget of 1 min" in p.reason and p.unsettled == ["U3 c=500 128 B"]
    assert "still undecided: U3 c=500 128 B" in p.progress()


def test_an_experiment_too_dear_for_the_budget_does_not_hold_back_cheaper_ones() -> None:
    mpi = finding("M1", "latency", WITHIN_REACH, Rule("below", 1.0), decides={"mpi": []})
    echo = echo_finding(UNDECIDED, 500)
    p = plan_round(
        [mpi, echo],
        round_=0,
        repeats=6,
        precision={**PRECISION, "budget_minutes": 5},
        spent_seconds=0.0,
        seconds_per_rep={"mpi": 500.0},
        seconds_per_cell=2.0,
    )
    # 3 MPI repetitions (1500 s) cannot fit in 300 s; the echo cells (12 s) can.
    assert not p.stop and p.next == {
        "echo": {"reps": [7, 8, 9], "cells": [["sqpoll", 500, 128], ["default", 500, 128]]}
    }
    assert p.deferred == ["mpi"] and p.next_seconds == pytest.approx(12.0)
    assert p.progress().endswith("mpi left out (its repetitions would overrun the budget)")
    # Once only the dear experiment is wanted, the loop stops.
    q = plan_round(
        [mpi],
        round_=1,
        repeats=6,
        precision={**PRECISION, "budget_minutes": 5},
        spent_seconds=12.0,
        seconds_per_rep={"mpi": 500.0},
        seconds_per_cell=2.0,
    )
    assert q.stop and "would overrun the budget of 5 min" in q.reason and q.next == {}


def test_stops_when_what_is_undecided_cannot_be_decided_in_the_rounds_left() -> None:
    on_the_margin = finding(
        "U4",
        "c=1000 128 B, fixed files",
        [0.95, 0.90, 1.0, 0.93, 0.97, 0.96, 0.94, 0.99, 0.92],
        Rule("within", 1.0, 0.05),
        decides={"echo": [["fixed_files", 1000, 128]]},
    )
    assert on_the_margin.outcome.value == "undecided at this precision"
    # Round 0 always measures more; from round 1 on, an estimate on the bound stops the loop.
    assert not plan([on_the_margin], round_=0).stop
    p = plan([on_the_margin], round_=1)
    assert p.stop and p.reason.startswith("the undecided verdicts need more repetitions than the remaining rounds")
    assert p.unsettled == ["U4 c=1000 128 B, fixed files"] and p.next == {}
    # One that can still be decided keeps the loop going, without the hopeless one's cells.
    p = plan([on_the_margin, echo_finding(WITHIN_REACH, 500)], round_=1)
    assert not p.stop and p.next["echo"]["cells"] == [["sqpoll", 500, 128], ["default", 500, 128]]


def test_stops_after_max_rounds() -> None:
    p = plan([echo_finding(UNDECIDED, 500)], round_=4)
    assert p.stop and p.reason == "max_rounds (4) reached"


def test_a_target_half_width_repeats_decided_but_wide_findings() -> None:
    wide = echo_finding(DECIDED, 50)  # decided, half-width about 4 %
    assert plan([wide]).stop
    assert not plan([wide], target_rel_halfwidth=0.01).stop
    assert wanted([wide], 0.01) == {"echo": [["sqpoll", 50, 128], ["default", 50, 128]]}


def test_progress_names_what_is_undecided() -> None:
    line = plan([echo_finding(UNDECIDED, 500)]).progress()
    assert line.startswith(
        "iolab: precision round 0: 1 parts undecided (U3 c=500 128 B); next round adds 3 repetitions of echo (2 cells)"
    )
    # Many parts: counted per claim, each listed in the plan file.
    many = plan(
        [echo_finding(UNDECIDED, c) for c in (50, 100, 500, 1000)]
        + [finding("C1", "t(1)/w", UNDECIDED, Rule("within", 1.0, 0.01), decides={"syscall": []})]
    )
    assert "5 parts undecided (U3: 4, C1); next round" in many.progress()


# --- the checkpoint loop, for real --------------------------------------------------


def overlay(tmp_path: Path, precision: dict, echo: bool = True) -> Path:
    cfg = tmp_path / "precision.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "precision": {"enabled": True, **precision},
                "experiments": {
                    "mpi": {"enabled": False},
                    "trace": {"enabled": False},
                    "echo": {"enabled": echo, "only": ["epoll", "default", "sqpoll"], "connections": [1, 50]},
                },
            }
        )
    )
    return cfg


def test_the_workflow_adds_rounds_until_the_plan_stops(workflow: Path, tmp_path: Path) -> None:
    cfg = overlay(tmp_path, {"budget_minutes": 30, "reps_per_round": 2, "max_rounds": 2})
    res = snakemake(
        workflow,
        "results/tables/syscall.parquet",
        "results/tables/echo.parquet",
        "--cores",
        "all",
        "--configfile",
        "config/overlays/smoke.yaml",
        str(cfg),
    )
    assert res.returncode == 0, res.stderr[-4000:]
    plans = [json.loads((workflow / "results" / "precision" / f"round{k}.json").read_text()) for k in range(3)]
    # Two repetitions give no interval: round 0 and 1 plan more; round 2 is the last one allowed.
    assert [p["stop"] for p in plans] == [False, False, True]
    assert plans[0]["next"]["syscall"]["reps"] == [3, 4] and plans[1]["next"]["syscall"]["reps"] == [5, 6]
    assert "precision round 0:" in res.stdout + res.stderr
    syscall = pd.read_parquet(workflow / "results" / "tables" / "syscall.parquet")
    assert sorted(syscall["rep"].unique()) == [1, 2, 3, 4, 5, 6]
    # An extra echo repetition measures only the cells its plan lists.
    echo = pd.read_parquet(workflow / "results" / "tables" / "echo.parquet")
    planned = {tuple(c) for c in plans[0]["next"]["echo"]["cells"]}
    extra = echo[echo["rep"] == 3]
    assert {(p, c, b) for p, c, b in zip(extra["preset"], extra["connections"], extra["bytes"], strict=True)} == planned
    assert len(planned) < len(echo[echo["rep"] == 1])
    side = json.loads(next((workflow / "data" / "raw" / "local" / "echo").glob("*/rep3.provenance.json")).read_text())
    assert [tuple(c) for c in side["settings"]["cells"]] == [tuple(c) for c in plans[0]["next"]["echo"]["cells"]]


def test_a_spent_budget_adds_nothing(workflow: Path, tmp_path: Path) -> None:
    cfg = overlay(tmp_path, {"budget_minutes": 0}, echo=False)  # the cost probes are enough here
    res = snakemake(
        workflow,
        "results/tables/syscall.parquet",
        "--cores",
        "all",
        "--configfile",
        "config/overlays/smoke.yaml",
        str(cfg),
    )
    assert res.returncode == 0, res.stderr[-4000:]
    plan0 = json.loads((workflow / "results" / "precision" / "round0.json").read_text())
    assert plan0["stop"] and "would overrun the budget" in plan0["reason"]
    assert sorted(pd.read_parquet(workflow / "results" / "tables" / "syscall.parquet")["rep"].unique()) == [1, 2]


def test_turning_precision_on_over_a_finished_run_plans_and_rebuilds_its_tables(workflow: Path, tmp_path: Path) -> None:
    # The README's order: the default config first, then the paper overlay
    # (precision on) in the same checkout. Snakemake keeps a table that exists
    # when the checkpoint it waits for has never run; the paper would then be
    # built from the first run's tables.
    without = tmp_path / "without.yaml"
    without.write_text(
        yaml.safe_dump(
            {
                "precision": {"enabled": False},
                "experiments": {"echo": {"enabled": False}, "mpi": {"enabled": False}, "trace": {"enabled": False}},
            }
        )
    )
    first = snakemake(
        workflow,
        "results/tables/syscall.parquet",
        "--cores",
        "all",
        "--configfile",
        "config/overlays/smoke.yaml",
        str(without),
    )
    assert first.returncode == 0, first.stderr[-4000:]
    table = workflow / "results" / "tables" / "syscall.parquet"
    built = table.stat().st_mtime_ns
    assert not (workflow / "results" / "precision").exists()
    precision = overlay(tmp_path, {"budget_minutes": 30, "reps_per_round": 1, "max_rounds": 1}, echo=False)
    res = snakemake(
        workflow,
        "results/tables/syscall.parquet",
        "--cores",
        "all",
        "--configfile",
        "config/overlays/smoke.yaml",
        str(precision),
    )
    assert res.returncode == 0, res.stderr[-4000:]
    # Two repetitions give no interval, so round 0 plans a third.
    plan0 = json.loads((workflow / "results" / "precision" / "round0.json").read_text())
    assert plan0["next"]["syscall"]["reps"] == [3], plan0
    assert table.stat().st_mtime_ns > built, "the table was kept from the run without precision"
    assert sorted(pd.read_parquet(table)["rep"].unique()) == [1, 2, 3]
