"""Verdicts about the machine kind, pooled across launches
(iolab.claims.kind_verdicts): the sign tests over launch medians reach every
outcome at a finite number of launches (their error, and the sources' own
tables through them, are tested in tests/test_pooled_errors.py); runs of
one launch count as one, every part is judged by this checkout's rules;
`./repro verdicts` pools crates and records, each run once."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import tool_env
from crate_support import another_run, craft, raw_copy

from iolab.claims import faithful
from iolab.claims import kind_verdicts as pooled
from iolab.claims.verdicts import Finding, Outcome, Rule


def part(values: list[float], rule: Rule, mode: pooled.Mode = "planned", claim: str = "X") -> pooled.PooledPart:
    runs = [pooled.RunValue(f"r{i}", f"{i:03d}", v, 6) for i, v in enumerate(values)]
    p = pooled.PooledPart(claim, "p", rule, values=runs)
    pooled.settle([p], mode)
    return p


def test_each_outcome_is_reached_at_the_runs_the_sign_test_needs() -> None:
    above = Rule("above", 1.0)
    # Planned: 6 runs all above decide it (2^-6 <= 2.5 %); 5 cannot.
    assert pooled.runs_to_reach(pooled.ALPHA, "planned") == 6
    assert part([1.1] * 6, above).outcome is Outcome.REPRODUCED
    assert part([1.1] * 5, above).outcome is Outcome.UNDECIDED
    assert part([0.9] * 6, above).outcome is Outcome.NOT_REPRODUCED
    assert part([1.1] * 5 + [0.9], above).outcome is Outcome.UNDECIDED
    # Accumulating (looked at with every run): the anytime test needs more.
    k = pooled.runs_to_reach(pooled.ALPHA, "accumulating")
    assert k > 6
    assert part([1.1] * k, above, "accumulating").outcome is Outcome.REPRODUCED
    assert part([1.1] * (k - 1), above, "accumulating").outcome is Outcome.UNDECIDED
    # A band: inside on both sides; outside on either.
    band = Rule("within", 1.0, 0.1)
    assert part([1.0, 1.02, 0.98, 1.05, 0.95, 1.01], band).outcome is Outcome.REPRODUCED
    assert part([1.3] * 6, band).outcome is Outcome.NOT_REPRODUCED
    # Holm: a claim of 3 parts needs 2^-k <= 2.5 % / 3 to refute: 7 runs.
    assert pooled.reachable(6, 3, "planned") == (True, False)
    assert pooled.reachable(7, 3, "planned") == (True, True)


def test_a_run_reads_its_rule_back_from_its_numbers_old_or_new() -> None:
    # The text old crates recorded, with the thin space of thousands.
    assert pooled.recorded_rule({"rule": "\u2265 0.950"}) == Rule("above", 0.95)
    assert pooled.recorded_rule({"rule": "\u2264 1.05"}) == Rule("below", 1.05)
    r = pooled.recorded_rule({"rule": "within \u00b125 % of 1\u2009500 (1\u2009125\u20131\u2009875)"})
    assert r is not None and r.kind == "within" and r.bound == 1500 and math.isclose(r.margin, 0.25)
    # Structured fields win; nonsense is no rule.
    assert pooled.recorded_rule({"rule_kind": "below", "bound": 2.0, "rule": "\u2265 9"}) == Rule("below", 2.0)
    assert pooled.recorded_rule({"rule": "rm -rf"}) is None
    assert pooled.recorded_rule({"rule_kind": "x", "bound": 1}) is None


def test_every_part_is_judged_by_this_checkouts_rule_never_a_crates() -> None:
    # The rule this checkout states for X's part: >= 0.95, with its reason.
    stated = {"X": (Rule("above", 0.95, why="this checkout's"),)}

    def run(i: int, text: str, measured: str | None = None) -> pooled.RunFindings:
        entry = {"claim": "X", "part": "p", "rule": text, "per_rep": [1.2]}
        return pooled.RunFindings(f"r{i}", measured or f"{i:03d}", [entry], f"boot{i}")

    parts = pooled.pool([run(0, "\u2265 0.900"), *(run(i, "\u2265 0.950") for i in range(1, 7))], "planned", stated)
    (p,) = parts
    assert p.rule is stated["X"][0] and p.k == 6 and p.outcome is Outcome.REPRODUCED
    assert "1 run(s) recorded a rule this checkout does not state for it and are left out" in p.reason
    assert p.reason in p.summary()
    # A crate dated 2099 with a loosened rule no longer becomes every run's
    # rule (it once did: "over 1 run(s)"): it is left out, and said.
    loose = run(9, "\u2265 0.000000667", measured="2099-01-01T00:00:00")
    (p,) = pooled.pool([*(run(i, "\u2265 0.950") for i in range(1, 7)), loose], "planned", stated)
    assert p.rule is stated["X"][0] and p.k == 6 and "1 run(s) recorded a rule" in p.reason
    # Negative control: judged by the newest run's recorded rule (the old
    # code), the loosened one would decide with its one run.
    newest = pooled.recorded_rule(loose.findings[0])
    assert newest is not None and newest.bound < 1e-6
    # A claim this checkout states no rule for pools nothing.
    (none,) = pooled.pool([run(i, "\u2265 0.950") for i in range(6)], "planned", {})
    assert none.values == [] and none.outcome is Outcome.NOT_TESTABLE and "6 run(s) recorded a rule" in none.reason


def test_runs_of_one_launch_give_one_value_and_the_test_counts_launches() -> None:
    above = Rule("above", 1.0)
    stated = {"X": (above,)}

    def run(i: int, launch: str, value: float) -> pooled.RunFindings:
        entry = {"claim": "X", "part": "p", "rule_kind": "above", "bound": 1.0, "per_rep": [value] * 6}
        return pooled.RunFindings(f"r{i}", f"{i:03d}", [entry], launch)

    # Twelve runs of one launch are one observation: undecided, 1 launch.
    (one,) = pooled.pool([run(i, "boot-a", 1.2) for i in range(12)], "planned", stated)
    assert (one.k, one.runs, one.outcome) == (1, 12, Outcome.UNDECIDED)
    assert "over 1 launch(es) (12 runs)" in one.summary()
    # Six launches decide it; a launch's value is the median of its runs'.
    runs = [run(i, f"boot-{i}", 1.2) for i in range(6)] + [run(9, "boot-0", 1.3), run(10, "boot-0", 0.5)]
    (six,) = pooled.pool(runs, "planned", stated)
    assert (six.k, six.runs, six.outcome) == (6, 8, Outcome.REPRODUCED)
    (first,) = [v for v in six.launches if v.launch == "boot-0"]
    assert (first.value, first.runs) == (pytest.approx(1.2), 3)
    # Negative control: counted as runs, the one launch would have decided it.
    as_runs = [
        pooled.RunFindings(r.run, r.measured, r.findings, "") for r in [run(i, "boot-a", 1.2) for i in range(12)]
    ]
    (apart,) = pooled.pool(as_runs, "planned", stated)
    assert apart.k == 12 and apart.outcome is Outcome.REPRODUCED


def test_a_part_pools_only_runs_that_measured_it_under_the_claims_setup_and_counted_it() -> None:
    # Run 0 measured U1 under our pinned client (its parts context, and a
    # stand-in for the sources' setup); runs 1-6 under the sources' setup,
    # counted. The context values once pooled into the counted part, and the
    # stand-in made the claim read "not testable" however many runs measured it.
    ours = pooled.RunFindings(
        "r0",
        "000",
        [
            {"claim": "U1", "part": "echo servers under the sources' setup", "stand_in": True, "reason": "not ours"},
            {
                "claim": "U1",
                "part": "c=50 128 B, rps",
                "setup": "pinned",
                "context": True,
                "rule": "\u2265 0.950",
                "per_rep": [0.5],
            },
        ],
    )
    theirs = [
        pooled.RunFindings(
            f"r{i}",
            f"{i:03d}",
            [{"claim": "U1", "part": "c=50 128 B, rps", "setup": "shared", "rule": "\u2265 0.950", "per_rep": [1.2]}],
        )
        for i in range(1, 7)
    ]
    parts = pooled.pool([ours, *theirs], "planned")
    counted = [p for p in parts if not p.context]
    assert [(p.setup, p.k) for p in counted] == [("shared", 6)]
    assert pooled.claim_verdict("U1", parts).outcome is Outcome.REPRODUCED
    (shown,) = [p for p in parts if p.context]
    assert shown.setup == "pinned" and shown.k == 1
    # With no run of the sources' setup, the stand-in says why the claim is not testable.
    alone = pooled.pool([ours], "planned")
    assert pooled.claim_verdict("U1", alone).outcome is Outcome.NOT_TESTABLE
    assert any(p.reason == "not ours" for p in alone)


def gated_runs(servers: list[float], keep_gate: bool = True) -> list[pooled.RunFindings]:
    """U1 in the c = 1000, 128 B cell over runs whose io_uring server used
    ``servers`` of its CPU beside a client of 0.95 CPUs on 2: the
    client-bound gate (server below 0.9, node at 1.8 or more) trips in a run
    whose server read below 0.9. io_uring leads epoll by 10 % throughout."""
    from claims_support import echo_table

    from iolab.claims import habr

    runs = []
    for i, server in enumerate(servers):
        table = echo_table(
            {"default": 110.0, "epoll": 100.0},
            [(1000, 128)],
            busy={"default": server, "epoll": server},
            client_busy=0.95,
            cpus=2,
        )
        runs.append(as_run(i, habr.u1(table), keep_gate))
    return runs


def as_run(i: int, findings: list[Finding], keep_gate: bool) -> pooled.RunFindings:
    """Run i's findings as its crate records them; without ``keep_gate``, as
    a crate from before the gate's figures (each run's own gate)."""
    entries = [pooled.entry_of(f) for f in findings]
    if not keep_gate:
        entries = [{k: v for k, v in e.items() if k not in ("gate", "gate_note")} for e in entries]
    return pooled.RunFindings(f"r{i}", f"{i:03d}", entries)


def test_the_client_bound_gate_is_decided_once_over_the_runs() -> None:
    # On this VM the gate's figures straddle its bounds from run to run (U4's
    # parts read 1.75-1.86 CPUs against 1.8): each run's own gate pooled a
    # part over the runs that happened to test it.
    servers = [0.92, 0.88, 0.92, 0.92, 0.88, 0.92]
    parts = pooled.pool(gated_runs(servers), "planned")
    rps = [p for p in parts if p.part.endswith("io_uring/epoll requests/s")]
    assert [(p.context, p.k) for p in rps] == [(False, 6)]
    assert rps[0].gate is not None and rps[0].gate.runs == 6 and rps[0].gate.reason() == ""
    counted = [p for p in parts if not p.context and p.values]
    assert len(counted) == 2 and all(p.outcome is Outcome.REPRODUCED for p in counted)
    assert not [p for p in parts if "set the pace" in p.reason]
    # Where the runs' medians trip it, every run's part is context, and the
    # note says so from those medians.
    tripped = pooled.pool(gated_runs([0.88, 0.92, 0.88, 0.88, 0.92, 0.88]), "planned")
    rps = [p for p in tripped if p.part.endswith("io_uring/epoll requests/s")]
    assert [(p.context, p.k) for p in rps] == [(True, 6)]
    # The reason is the runs' gate, not the first run's beside it.
    assert rps[0].reason.count("set the pace") == 1 and "medians over 6 runs" in rps[0].reason
    (note,) = [p for p in tripped if p.outcome is Outcome.NOT_TESTABLE and p.cell == "c=1000 128 B"]
    assert not note.context and note.cell == "c=1000 128 B"
    assert note.reason.startswith("the load generator, not the server, set the pace")
    assert "server 0.88 of its CPU" in note.reason and "medians over 6 runs" in note.reason
    assert not [p for p in tripped if not p.context and p.values]
    # Negative control: each run's own gate (crates without the figures)
    # splits the part into 4 counted runs and 2 of context, too few to
    # decide it, and keeps a note from two runs that the cell is not testable.
    split = pooled.pool(gated_runs(servers, keep_gate=False), "planned")
    rps = [p for p in split if p.part.endswith("io_uring/epoll requests/s")]
    assert sorted((p.context, p.k) for p in rps) == [(False, 4), (True, 2)]
    assert [p.outcome for p in rps if not p.context] == [Outcome.UNDECIDED]
    assert [p for p in split if "set the pace" in p.reason and p.outcome is Outcome.NOT_TESTABLE]


def u2_runs(servers: list[float], keep_gate: bool = True) -> list[pooled.RunFindings]:
    """U2 on the source's part 3 table (2 % noise per side) over runs whose
    Go reactor at c = 1000, 128 B used ``servers`` of its CPU beside a
    client of 0.95 CPUs on 2: that cell trips its gate in a run whose server
    read below 0.9; the other cells never do."""
    from iolab.claims import habr

    runs = []
    for i, server in enumerate(servers):
        table = faithful.part3(10, 0.02, np.random.default_rng(i), cpus=4)
        table["cpus"] = 2
        cell = (table["connections"] == 1000) & (table["bytes"] == 128) & table["preset"].isin(["go_uring", "go_net"])
        table.loc[cell, "server_busy"] = server
        table.loc[cell, "client_busy"] = 0.95
        runs.append(as_run(i, habr.u2(table), keep_gate))
    return runs


def test_a_part_over_several_cells_keeps_its_name_and_one_gate_over_the_runs() -> None:
    # U2's geometric mean over the c >= 500 cells once counted the cells its
    # run's own gate let through, so its name said 3 cells in one run and 4
    # in the next, and the two never pooled.
    servers = [0.92, 0.88, 0.92, 0.92, 0.88, 0.92]
    runs = u2_runs(servers)
    names = {e["part"] for r in runs for e in r.findings if "geometric mean" in e["part"]}
    assert names == {
        "Go reactor/Go net requests/s, geometric mean over the 4 cells with c \u2265 500 ('more or less large')"
    }
    parts = pooled.pool(runs, "planned")
    (mean,) = [p for p in parts if "geometric mean" in p.part]
    assert (mean.context, mean.k, mean.outcome) == (False, 6, Outcome.REPRODUCED)
    assert mean.gate is not None and mean.gate.runs == 6 and mean.gate.reason() == ""
    # Where the runs' medians trip one of its cells, the mean is context in
    # all of them, and says which cell.
    tripped = pooled.pool(u2_runs([0.88, 0.92, 0.88, 0.88, 0.92, 0.88]), "planned")
    (mean,) = [p for p in tripped if "geometric mean" in p.part]
    assert (mean.context, mean.k) == (True, 6)
    assert mean.reason.startswith("the load generator, not the server, set the pace (go_net at c=1000 128 B")
    assert mean.reason.count("set the pace") == 1 and "medians over 6 runs" in mean.reason
    # Negative control: each run's own gate splits it 4 + 2, undecided.
    split = pooled.pool(u2_runs(servers, keep_gate=False), "planned")
    means = [p for p in split if "geometric mean" in p.part]
    assert sorted((p.context, p.k) for p in means) == [(False, 4), (True, 2)]
    assert [p.outcome for p in means if not p.context] == [Outcome.UNDECIDED]


def test_the_gate_pools_only_figures_over_the_seconds_their_cpu_times_cover() -> None:
    from iolab.claims.gates import Busy, BusyGate
    from iolab.claims.gates import pooled as pooled_gate

    def gate(server: float, client: float, setup: bool) -> BusyGate:
        return BusyGate("c=1000 128 B", 2, (Busy("epoll", server, client),), setup=setup)

    # Four runs from before the load generator reported its setup read 7 %
    # high at c = 1000 and trip the gate; two runs with it do not.
    old, new = [gate(0.85, 1.0, False)] * 4, [gate(0.80, 0.95, True)] * 2
    assert all(g.reason() for g in old) and not any(g.reason() for g in new)
    both = pooled_gate(old + new)
    assert (both.runs, both.setup, both.reason()) == (2, True, "")
    # Where they trip, the reason says which runs' medians it gives.
    hot = pooled_gate(old + [gate(0.85, 1.0, True)] * 2)
    assert hot.reason().endswith("medians over 2 of 6 runs, those whose CPU figures cover the setup)")
    # Runs of one kind pool as before.
    assert pooled_gate(old).runs == 4 and pooled_gate(old).reason()
    # The figures' kind travels with a crate, and a crate without it is of
    # the old kind.
    assert BusyGate.from_json(new[0].as_json()) == new[0]
    legacy = {k: v for k, v in new[0].as_json().items() if k != "setup"}
    assert BusyGate.from_json(legacy) == gate(0.80, 0.95, False)
    # A run's gate says which kind its table's figures are.
    from claims_support import echo_table

    from iolab.claims import rules

    table = echo_table({"default": 110.0, "epoll": 100.0}, [(1000, 128)], cpus=2)
    assert not rules.client_gate(table, ("default", "epoll"), (1000, 128)).setup
    table["setup_s"] = 0.09
    assert rules.client_gate(table, ("default", "epoll"), (1000, 128)).setup


def test_a_gate_read_from_a_crate_is_checked_as_data() -> None:
    from iolab.claims.gates import BusyGate

    good = {"cell": "c=1000 128 B", "cpus": 2, "busy": [["default", 0.88, 0.95]]}
    gate = BusyGate.from_json(good)
    assert gate is not None and gate.reason().startswith("the load generator")
    for bad in (
        None,
        "x",
        {**good, "cpus": "2"},
        {**good, "cpus": float("nan")},
        {**good, "busy": []},
        {**good, "busy": [["default", 0.88]]},
        {**good, "busy": [["default", True, 0.95]]},
        {**good, "busy": [[1, 0.88, 0.95]]},
    ):
        assert BusyGate.from_json(bad) is None, bad


# --- ./repro verdicts ------------------------------------------------------------


def test_repro_verdicts_pools_crates_each_run_once(smoke_crate: Path, tmp_path: Path) -> None:
    again = craft(smoke_crate, tmp_path / "again.crate.zip")
    out = tmp_path / "verdicts.json"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "iolab.archive.pooling",
            str(smoke_crate),
            str(again),
            "--no-records",
            "--json",
            str(out),
        ],
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert f"{again.name} is the same run as {smoke_crate.name}: counted once" in res.stderr
    assert res.stdout.startswith("This machine kind (vm, ") or res.stdout.startswith("This machine kind (")
    assert "1 run(s) on 1 launch(es), each run counted once" in res.stdout.splitlines()[0]
    (kind,) = json.loads(out.read_text())["machine_kinds"]
    doc = kind
    with zipfile.ZipFile(smoke_crate) as z:
        findings = json.loads(z.read("paper/generated/numbers.json"))["findings"]["value"]
    assert set(doc["claims"]) == {f["claim"] for f in findings}
    # The crate names the kernel boot each node measured under.
    with zipfile.ZipFile(smoke_crate) as z:
        environment = json.loads(z.read("archive/environment.json"))
    assert environment["nodes"]["local"]["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    # One run decides nothing, and says so.
    assert all(c["outcome"] != Outcome.REPRODUCED.value for c in doc["claims"].values())
    planned = subprocess.run(
        [sys.executable, "-m", "iolab.archive.pooling", str(smoke_crate), "--no-records", "--planned", "4"],
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert planned.returncode == 2 and "the study planned 4 launches and 1 distinct launch(es) of" in planned.stderr
    plan = subprocess.run(
        [
            sys.executable,
            "-m",
            "iolab.archive.pooling",
            str(smoke_crate),
            "--no-records",
            "--plan",
            "--run-hours",
            "0.5",
        ],
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert plan.returncode == 0, plan.stderr
    planned_lines = plan.stdout.split("Time to a verdict", 1)[1].splitlines()
    assert "one launch = 0.50 h, as given (--run-hours)" in planned_lines[0]
    counted = {f["claim"] for f in findings if not f.get("context") and f.get("per_rep")}
    assert counted and all(any(line.startswith(f"{c}: ") for line in planned_lines) for c in counted)
    bad = subprocess.run(
        [sys.executable, "-m", "iolab.archive.pooling", str(smoke_crate), "--no-records", "--run-hours", "0"],
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and "--run-hours 0.0: give a positive number of hours" in bad.stderr


def test_copies_of_one_run_count_once_and_a_run_from_the_future_is_refused(smoke_crate: Path, tmp_path: Path) -> None:
    # Twelve copies of one crate, each raw file a byte longer and every
    # checksum recomputed: once 13 runs that decided claims from one. Now one
    # run (same launch, first start and findings), said for each copy.
    copies = [
        craft(smoke_crate, tmp_path / f"copy{i}.crate.zip", replace=raw_copy(smoke_crate, str(i))) for i in range(12)
    ]
    res = subprocess.run(
        [sys.executable, "-m", "iolab.archive.pooling", str(smoke_crate), *map(str, copies), "--no-records"],
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("is the same run as") == 12
    assert "1 run(s) on 1 launch(es)" in res.stdout.splitlines()[0]
    # Negative control: another launch (other boot id, start and values) is another run.
    replace, edit = another_run(smoke_crate, 3)
    other = craft(smoke_crate, tmp_path / "other.crate.zip", replace=replace, edit_metadata=edit)
    two = subprocess.run(
        [sys.executable, "-m", "iolab.archive.pooling", str(smoke_crate), str(other), "--no-records"],
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert two.returncode == 0 and "2 run(s) on 2 launch(es)" in two.stdout.splitlines()[0], two.stderr

    # A crate whose run starts in 2099 is not evidence: refused in one line.
    def future(meta: dict) -> None:
        for e in meta["@graph"]:
            if e.get("@type") == "CreateAction" and isinstance(e.get("startTime"), str):
                e["startTime"] = "2099-01-01T00:00:00+00:00"

    late = craft(smoke_crate, tmp_path / "late.crate.zip", edit_metadata=future)
    res = subprocess.run(
        [sys.executable, "-m", "iolab.archive.pooling", str(late), "--no-records"],
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 1 and "lies in the future: not evidence of a run" in res.stderr
    assert res.stderr.count("\n") == 1


def test_a_single_runs_paper_says_how_many_runs_each_claim_needs() -> None:
    from iolab.claims.findings import finding
    from iolab.report import over_runs

    def judged(value: float, sigma: float) -> list:
        f = finding("X", "p [setup]", [value] * 6, Rule("above", 1.0))
        f.sigma = sigma
        return [f]

    holds = over_runs.runs_text("X", judged(1.10, 0.10))
    assert "one of at least 6" in holds and "10% from its bound, so about 17 runs would reproduce it" in holds
    fails = over_runs.runs_text("X", judged(0.80, 0.10))
    assert "20% on the failing side, so about 6 runs would refute the claim" in fails
    # The spread halved, a tenth beyond its bound takes 6 runs, not 17.
    assert "so about 6 runs would reproduce it" in over_runs.runs_text("X", judged(1.10, 0.05))
    on_bound = over_runs.runs_text("X", judged(1.0, 0.10))
    assert "too near for 256 runs to reproduce it" in on_bound
    # A quantity that is not positive has no relative distance: no number is made up.
    negative = over_runs.runs_text("X", judged(-0.5, 0.10))
    assert negative.endswith("./repro verdicts).") and "nan" not in negative


def test_the_planner_prices_each_claim_in_runs_and_machine_hours() -> None:
    from iolab.planning import launches as planning

    def pooled_part(
        claim: str, name: str, values: list[float], rule: Rule, launches: list[str] | None = None
    ) -> pooled.PooledPart:
        runs = [
            pooled.RunValue(f"r{i}", f"{i:03d}", v, 6, (launches or [f"boot{i}" for i in range(len(values))])[i])
            for i, v in enumerate(values)
        ]
        return pooled.PooledPart(claim, name, rule, values=runs, group="claims:echo:ratio")

    above = Rule("above", 1.0)
    parts = [
        pooled_part("X", "near", [1.10, 1.10], above),
        pooled_part("X", "far", [1.30, 1.30], above),
        pooled_part("Y", "fails", [0.80, 0.80], above),
        pooled_part("Y", "holds", [1.50, 1.50], above),
    ]
    estimate = {"claims:echo:ratio": 0.10}
    plans = {c: planning.plan_claim(c, parts, lambda p: estimate.get(p.group)) for c in ("X", "Y")}
    # Reproduced only when every part is: the nearer part sets the count.
    assert plans["X"].direction == "reproduce"
    assert plans["X"].runs == pooled.runs_needed(0.10, 0.10) == 17
    # Refuted by its failing part, at Holm's alpha over its two parts.
    assert plans["Y"].direction == "refute"
    # 0.8 against a floor of 1 lies as far (in log) as 1.25 above it.
    assert plans["Y"].runs == pooled.runs_needed(0.25, 0.10, pooled.ALPHA / 2)
    assert plans["Y"].runs > pooled.runs_needed(0.25, 0.10)
    text = planning.lines(list(plans.values()), 0.5, "as given")
    assert "X: to reproduce, about 17 launches, 2 held, 15 still to come = 7.5 machine-hours" in text[1]
    assert text[-1] == "Every claim with a finite count: 15 more launch(es) = 7.5 machine-hours"
    # Four runs or more: the spread of their own medians, not the estimate.
    wide = pooled_part("Z", "p", [1.1 * math.exp(x) for x in (-0.3, -0.1, 0.1, 0.3)], above)
    plan = planning.plan_claim("Z", [wide], lambda p: 0.01)
    assert plan.parts[0].sigma_from == "launches"
    assert plan.parts[0].sigma == pytest.approx(np.std([-0.3, -0.1, 0.1, 0.3], ddof=1))
    # Three of the four runs under one launch: their spread is not the
    # spread between launches, so the estimate plans (the negative control:
    # counted as four launches, the runs' own spread would).
    values = [1.1 * math.exp(x) for x in (-0.3, -0.1, 0.1, 0.3)]
    shared_part = pooled_part("Z", "p", values, above, ["boot-a", "boot-a", "boot-a", "boot-b"])
    shared = planning.plan_claim("Z", [shared_part], lambda p: 0.01)
    assert shared.parts[0].sigma_from == "estimate" and shared.parts[0].sigma == 0.01
    # No spread known for its quantity: no count is made up.
    unknown = planning.plan_claim("X", parts, lambda p: None)
    assert unknown.runs is None and "more than 256 launches or unknown" in planning.lines([unknown], 0.5, "")[1]
