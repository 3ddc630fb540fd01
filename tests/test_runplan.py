"""The workflow's logic (iolab.runplan), without Snakemake: which nodes and
experiments a run measures, the keys its raw files live under, the order
of its repetitions, and the precision rounds' bookkeeping. The rule files
only bind these names (rules/common.smk)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

from iolab import runplan
from iolab.config import ConfigError, load, merge, validate_config


def plan_of(*overlays: Path, extra: Mapping[str, Any] | None = None) -> runplan.RunPlan:
    config = load(*overlays)
    if extra:
        config = merge(config, extra)
    run = validate_config(config)
    return runplan.RunPlan(run, config, REPO, cores=lambda: 2)


def test_a_measurement_runs_where_its_node_lists_it_and_its_runner_can_host_it() -> None:
    plan = plan_of()
    assert plan.nodes == ["local"] and plan.skipped == {}
    assert {"syscall", "echo", "trace"} <= set(plan.experiments_on)
    only = plan_of(extra={"nodes": [{"name": "local", "runner": "local", "experiments": ["syscall"]}]})
    assert only.measures("local", "syscall") and not only.measures("local", "echo")
    assert "echo" not in only.experiments_on


def test_a_run_key_changes_with_the_settings_and_nothing_else() -> None:
    plan = plan_of()
    same = plan_of()
    assert plan.run_key("syscall", "local") == same.run_key("syscall", "local")
    more = plan_of(extra={"experiments": {"syscall": {"batches": 1999}}})
    assert more.run_key("syscall", "local") != plan.run_key("syscall", "local")
    # Another experiment's settings leave this key alone.
    assert more.run_key("sendrecv", "local") == plan.run_key("sendrecv", "local")
    files = plan.raw_files("syscall")
    assert files == [
        f"data/raw/local/syscall/{plan.run_key('syscall', 'local')}/rep{r}.csv" for r in plan.reps("syscall")
    ]


def test_a_part_left_out_is_never_measured_and_moves_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    before = plan_of()
    monkeypatch.setattr(runplan, "experiment_left_out", lambda e: "needs root" if e == "trace" else "")
    monkeypatch.setattr(
        runplan, "transports_left_out", lambda ts: {t: "needs root" for t in ts if t.startswith("netns")}
    )
    plan = plan_of()
    assert plan.left_out["local"]["trace"] == "needs root" and "mpi netns" in plan.left_out["local"]
    assert not plan.measures("local", "trace") and plan.raw_files("trace") == []
    assert "--left-out=local=needs root" in plan.left_out_flags("trace")
    # MPI measured without netns is not the directory a run with it fills.
    assert plan.run_key("mpi", "local") != before.run_key("mpi", "local")
    assert plan.run_key("syscall", "local") == before.run_key("syscall", "local")
    # Negative control: a plan that forgets what was left out would measure it.
    monkeypatch.setattr(runplan.RunPlan, "measures", lambda self, n, e: self.node_runs(n, e))
    assert plan.raw_files("trace") != []
    monkeypatch.undo()
    monkeypatch.setattr(runplan, "experiment_left_out", lambda e: "")
    monkeypatch.setattr(runplan, "transports_left_out", lambda ts: {t: "needs root" for t in ts})
    # MPI over nothing but transports that are left out: one line, a config error.
    with pytest.raises(ConfigError, match="add shm or tcp to its transports"):
        plan_of(extra={"experiments": {"mpi": {"transports": ["netns"]}}})


def test_every_first_repetition_runs_before_any_second() -> None:
    experiments = ["syscall", "echo", "mpi", "trace"]
    first = [runplan.rep_priority(7, e, "local", 1) for e in experiments]
    second = [runplan.rep_priority(7, e, "local", 2) for e in experiments]
    assert min(first) > max(second)
    # The order within a round is the seed's, and stable.
    assert runplan.rep_seed(7, "echo", "local", 3) == runplan.rep_seed(7, "echo", "local", 3)
    assert runplan.rep_seed(7, "echo", "local", 3) != runplan.rep_seed(8, "echo", "local", 3)


def test_the_precision_rounds_add_only_what_their_plans_list() -> None:
    plan = plan_of(extra={"precision": {"enabled": True}})
    plans = {
        0: {"stop": False, "next": {"echo": {"reps": [7, 8], "cells": ["a"]}}},
        1: {"stop": False, "next": {"echo": {"reps": [9]}, "syscall": {"reps": [7]}}},
        2: {"stop": True, "next": {}},
    }
    rounds = runplan.Rounds(plan, plans.__getitem__)
    assert rounds.enabled and rounds.final_round() == 2
    key = plan.run_key("echo", rounds.claim_node)
    inputs = rounds.table_inputs("echo", exists=lambda p: True)
    assert inputs[-3:] == [f"data/raw/local/echo/{key}/rep{r}.csv" for r in (7, 8, 9)]
    assert rounds.rep_round("echo", 8) == (1, plans[0]["next"]["echo"])
    assert rounds.rep_round("echo", 3) == (0, None)
    assert rounds.rep_settings("echo", 7)["cells"] == ["a"] and "cells" not in rounds.rep_settings("echo", 9)
    # Before round 0's plan exists, the table waits on it as a plain input.
    assert rounds.table_inputs("echo", exists=lambda p: False)[-1] == runplan.PRECISION_PLAN.format(round=0)
    # Negative control: without precision nothing is added.
    off = runplan.Rounds(plan_of(extra={"precision": {"enabled": False}}), plans.__getitem__)
    assert off.table_inputs("echo") == plan.raw_files("echo")


def test_the_node_status_says_what_ran_and_what_was_left_out() -> None:
    status = plan_of().node_status()
    assert status["local"]["status"] == "measured" and status["local"]["left_out"] == {}
    assert set(status["local"]["experiments"]) == set(plan_of().experiments_on)


def test_the_config_is_read_again_in_snakemakes_order(tmp_path: Path) -> None:
    from iolab.config import read_as_snakemake

    base, overlay = tmp_path / "config.yaml", tmp_path / "overlay.yaml"
    base.write_text("seed: 1\nrepeats: 6\n")
    overlay.write_text("repeats: 2\n")
    # The Snakefile's file, then --configfile's, then --config: later wins.
    got = read_as_snakemake([base], [overlay], {"seed": 7})
    assert got == {"seed": 7, "repeats": 2}
    # A file both declared and given is read once, in the given place.
    assert read_as_snakemake([base, overlay], [overlay], {}) == {"seed": 1, "repeats": 2}
    # --replace-workflow-config drops the Snakefile's.
    assert read_as_snakemake([base], [overlay], {}, replace_workflow_config=True) == {"repeats": 2}
    # Read as iolab reads a file: an alias is refused in one line, where
    # Snakemake's own loader would have expanded it.
    overlay.write_text("a: &x [1]\nb: *x\n")
    with pytest.raises(ConfigError, match=r"overlay\.yaml"):
        read_as_snakemake([base], [overlay], {})


def test_the_tools_beside_the_interpreter_come_first_once() -> None:
    path = runplan.tool_path("/venv/bin/python", "/usr/bin:/bin")
    assert path == "/venv/bin:/usr/bin:/bin"
    assert runplan.tool_path("/venv/bin/python", path) == path
    assert runplan.tool_path("/venv/bin/python", "") == "/venv/bin"
