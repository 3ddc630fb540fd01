"""The echo sweep: cells and setups, refused or failing configurations,
unbuilt servers, a killed server, port collisions, how it reads the
rescheduling IPIs it counts, and the cells under the io_uring client.
Whether the rings' IPIs differ is a machine-wide count, which any other
process on the server's CPU moves: benchmarks/resched_ipis.py measures it
(tests/test_benchmarks.py runs it)."""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO
from echo_support import SWEEP

from iolab import config as iolab_config
from iolab import readers, tables
from iolab.experiments import echo as echo_exp
from iolab.experiments.echo import cell as echo_cell
from iolab.formats import histograms_path
from iolab.rooms.echo import summaries as echostats
from iolab.runners import LocalRunner
from iolab.settings import EchoSettings


def test_a_sweep_cell_runs_under_the_uring_client(native_build: Path, tmp_path: Path) -> None:
    """experiments.echo.setups may name the io_uring client: the cell passes
    its event-loop settings to it, and its label says which client ran."""
    cell = echo_cell.Cell("default", (), 8, 256, client="event-loop-uring", pipeline=2)
    assert cell.label() == "default c=8 256 B (io_uring client, pipeline 2)"
    run = echo_cell.LoadgenRun(duration=0.3, warmup=0.1, threads=2)
    result = echo_cell.measure_cell(cell, run, {"server": None, "client": None}, tmp_path / "h.csv")
    assert result["requests"] > 0  # loadgen exits 1, a CellError, on any byte wrong
    report = json.loads((tmp_path / "h.report").read_text())
    assert (report["model"], report["pipeline"], report["threads"]) == ("event-loop-uring", 2, 2)
    # The clock started once every connection had one echo: the cell records how long that took.
    assert report["ramp_up"] is True and 0 < result["setup_s"] == report["setup_s"] < 10


def test_a_sweep_resolves_the_auto_client_once_and_records_what_ran(native_build: Path, tmp_path: Path) -> None:
    """The default setup's client "auto" is resolved before the first cell:
    the table names the model that ran, a setup that then repeats another
    is measured once, and the provenance says what "auto" chose."""
    settings = {
        **SWEEP,
        "connections": [2],
        "presets": {"epoll": [], "default": []},
        "setups": [{"client": "auto", "layout": "pinned"}, {"client": "event-loop-uring", "layout": "pinned"}],
    }
    planned, picked = echo_exp.resolve_auto_client(echo_exp.cells(EchoSettings.of(settings), 3), LocalRunner())
    assert picked == {"model": "event-loop-uring", "uring_unavailable": ""}
    assert sorted((c.preset, c.client) for c in planned) == [
        ("default", "event-loop-uring"),
        ("epoll", "event-loop-uring"),
    ]
    # No "auto" anywhere: nothing to resolve, nothing recorded.
    explicit = echo_exp.cells(EchoSettings.of({**settings, "setups": settings["setups"][1:]}), 3)
    assert echo_exp.resolve_auto_client(explicit, LocalRunner()) == (explicit, {})
    raw = tmp_path / "rep1.csv"
    extra = echo_exp.run_sweep(
        EchoSettings.of(settings), {"server": 0, "client": "1"}, 3, raw, histograms_path(raw), progress=False
    )
    assert extra["echo"]["client_auto"] == picked and extra["echo"]["cells"] == 2
    table = readers.read_echo_csv(raw)
    assert (table["status"] == "ok").all() and set(table["client"]) == {"event-loop-uring"}


def test_a_node_without_go_records_the_go_servers_unavailable(
    native_build: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Go servers are built by the sweep where the node has Go; on a node
    without it their cells are unavailable, with make's one-line reason, and
    the C servers are measured as usual."""
    native = tmp_path / "native"
    shutil.copytree(REPO / "native", native, ignore=shutil.ignore_patterns("build"))

    class CopyRunner(LocalRunner):  # the real local runner, on a checkout without Go binaries
        def exe(self, program: str) -> str:
            return str(native / "build" / program)

    monkeypatch.setenv("GO", "go-not-installed-here")
    settings = {**SWEEP, "presets": {"epoll": [], "go_net": {"server": "go-net"}}}
    runner = CopyRunner()
    assert (
        subprocess.run(
            ["make", "-s", "-C", str(native), "build/echo-epoll", "build/loadgen"], capture_output=True
        ).returncode
        == 0
    )
    csv_path = tmp_path / "rep1.csv"
    echo_exp.run_sweep(
        EchoSettings.of(settings),
        {"server": None, "client": None},
        1,
        csv_path,
        histograms_path(csv_path),
        progress=False,
        server_runner=runner,
    )
    rows = {r["preset"]: r for r in readers.read_echo_csv(csv_path).to_dict("records")}
    assert rows["epoll"]["status"] == "ok"
    assert rows["go_net"]["status"] == "unavailable" and rows["go_net"]["server"] == "go-net"
    assert rows["go_net"]["reason"] == (
        "unavailable: echo-go-net could not be built on this node: missing "
        "dependency: Go toolchain 'go-not-installed-here'; install it with: "
        "apt-get install golang-go, or set GO="
    )


def test_a_sweep_puts_helpers_on_a_spare_cpu_or_records_why_not(native_build: Path, tmp_path: Path) -> None:
    settings = {**SWEEP, "presets": {"async_iowq_spare": ["--async", "--iowq-aff", "{spare_cpus}"]}}
    echo_exp.run_sweep(
        EchoSettings.of(settings),
        {"server": 0, "client": 0},
        1,
        tmp_path / "a.csv",
        tmp_path / "a.hist",
        progress=False,
    )
    row = readers.read_echo_csv(tmp_path / "a.csv").iloc[0]
    assert row["status"] == "ok" and row["helper_cpus"] == "1" and row["iowq_workers"] > 0
    echo_exp.run_sweep(
        EchoSettings.of(settings),
        {"server": 0, "client": 1},
        1,
        tmp_path / "b.csv",
        tmp_path / "b.hist",
        progress=False,
    )
    row = readers.read_echo_csv(tmp_path / "b.csv").iloc[0]
    assert row["status"] == "unavailable" and "besides the server's (0) and the load generator's (1)" in row["reason"]


def test_sweep_records_refused_presets_as_unavailable(native_build: Path, tmp_path: Path) -> None:
    settings = {**SWEEP, "presets": {"epoll": [], "bad": ["--sqpoll", "--coop-taskrun"]}}
    csv_path, hist = tmp_path / "rep1.csv", tmp_path / "rep1.histograms.csv"
    echo_exp.run_sweep(EchoSettings.of(settings), {"server": None, "client": None}, 1, csv_path, hist, progress=False)
    rows = {r["preset"]: r for r in readers.read_echo_csv(csv_path).to_dict("records")}
    assert rows["epoll"]["status"] == "ok" and float(rows["epoll"]["rps"]) > 0
    assert rows["bad"]["status"] == "unavailable"
    assert "cannot be combined with --coop-taskrun" in rows["bad"]["reason"]
    assert hist.read_text().count("\n") > 1


def test_port_collision_is_retried_on_a_new_port(native_build: Path, tmp_path: Path) -> None:
    taken = socket.create_server(("127.0.0.1", 0))
    port = taken.getsockname()[1]
    cell = echo_cell.Cell("default", (), 2, 32)
    with pytest.raises(echo_cell.CellError, match="port in use"):
        echo_cell.start_server(cell, None, LocalRunner(), port=port)
    result = echo_cell.measure_cell(cell, echo_cell.LoadgenRun(0.3, 0.1, port=port), {}, tmp_path / "h.csv")
    assert result["port"] != port and result["rps"] > 0
    taken.close()


def test_a_server_killed_mid_run_fails_the_cell_clearly(native_build: Path, tmp_path: Path) -> None:
    cell = echo_cell.Cell("default", (), 4, 64)
    runner = LocalRunner()
    proc, port = echo_cell.start_server(cell, None, runner)
    threading.Timer(0.3, proc.kill).start()
    with pytest.raises(echo_cell.CellError, match="load generator failed"):
        echo_cell.run_loadgen(port, cell, echo_cell.LoadgenRun(2, 0.1), None, tmp_path / "h.csv", runner)
    proc.wait()
    with pytest.raises(echo_cell.CellError, match="server died during the run"):
        echo_cell.stop_server(proc, runner)


def test_a_killed_servers_cell_blames_the_server_not_the_load_generator(native_build: Path, tmp_path: Path) -> None:
    # The load generator fails too ("early closes"): the cell says why it failed.
    cell = echo_cell.Cell("default", (), 50, 64)
    timer = threading.Timer(0.5, lambda: subprocess.run(["pkill", "-KILL", "-f", "echo-uring --port"]))
    timer.start()
    try:
        with pytest.raises(echo_cell.CellError) as e:
            echo_cell.measure_cell(cell, echo_cell.LoadgenRun(3, 0.1), {}, tmp_path / "h.csv", LocalRunner())
    finally:
        timer.cancel()
    assert str(e.value) == "the server died during the run: it was killed by signal 9"


def test_sweep_runs_every_cell_under_each_setup(native_build: Path, tmp_path: Path) -> None:
    """Three setups (our client pinned, the same with 4 requests in flight,
    the sources' client unpinned): each cell three times, told apart in the
    raw file and the tidy table, with the CPUs each side ran on; ratios pair
    cells of one setup only, and each side picks its own (the claims the
    sources', the figures ours, both one request in flight)."""
    settings = {
        **SWEEP,
        "connections": [3],
        "presets": {"epoll": [], "default": []},
        "setups": [
            {"client": "event-loop", "layout": "pinned"},
            {"client": "thread-per-connection", "layout": "shared", "duration": 0.5, "warmup": 0.2},
            {"client": "event-loop", "layout": "pinned", "pipeline": 4},
        ],
    }
    planned = echo_exp.cells(EchoSettings.of(settings), 5)
    # A setup's own cell length and warm-up; the others run the sweep's.
    assert {(c.layout, c.duration, c.warmup) for c in planned} == {("pinned", 0.0, None), ("shared", 0.5, 0.2)}
    assert sorted((c.preset, c.client, c.layout, c.pipeline) for c in planned) == [
        ("default", "event-loop", "pinned", 1),
        ("default", "event-loop", "pinned", 4),
        ("default", "thread-per-connection", "shared", 1),
        ("epoll", "event-loop", "pinned", 1),
        ("epoll", "event-loop", "pinned", 4),
        ("epoll", "thread-per-connection", "shared", 1),
    ]
    # A setup may run only some presets (the paper overlay's sources' setup).
    narrow = {**settings, "setups": [settings["setups"][0], {**settings["setups"][1], "only": ["epoll"]}]}
    narrow["setups"].append({**settings["setups"][0], "pipeline": 1})  # the first again: runs once
    assert sorted((c.preset, c.client) for c in echo_exp.cells(EchoSettings.of(narrow), 5)) == [
        ("default", "event-loop"),
        ("epoll", "event-loop"),
        ("epoll", "thread-per-connection"),
    ]
    raw = tmp_path / "n1" / "echo" / "k" / "rep1.csv"
    raw.parent.mkdir(parents=True)
    echo_exp.run_sweep(
        EchoSettings.of(settings), {"server": 0, "client": "1"}, 5, raw, histograms_path(raw), progress=False
    )
    raw.with_name("rep1.provenance.json").write_text(
        json.dumps(
            {
                "node": {"name": "n1", "kind": "vm"},
                "mitigations": {"state": "on"},
                "host": {"kernel": "test"},
                "settings": {**settings, "rep": 1},
            }
        )
    )
    table = tables.load("echo", tmp_path)
    assert (table["status"] == "ok").all()
    # CPU seconds over the 0.4 or 0.7 loaded seconds of each cell: CPUs kept busy. Pinned, the
    # client has one CPU for its whole life, which is the loaded seconds plus connecting
    # and closing: its rusage counts those too (1.04-1.06 beside another run on both
    # CPUs, 2026-12-01), so one CPU reads somewhat above 1, never near the 2 that a
    # client spread over two CPUs can reach.
    pinned = table["layout"] == "pinned"
    assert ((table["client_busy"] > 0) & (table["client_busy"] <= (os.cpu_count() or 1) + 0.1)).all()
    assert (table.loc[pinned, "client_busy"] <= 1.25).all()
    assert ((table["server_busy"] > 0) & (table["server_busy"] < (os.cpu_count() or 1) + 0.5)).all()
    placed = {
        (r.client, r.layout, *("-" if pd.isna(v) else v for v in (r.server_cpu, r.client_cpu)))
        for r in table.itertuples()
    }
    assert placed == {("event-loop", "pinned", "0", "1"), ("thread-per-connection", "shared", "-", "-")}
    assert sorted(table["pipeline"]) == [1, 1, 1, 1, 4, 4]
    # Each cell's loaded seconds are its own: the shared setup's 0.5 s after 0.2 s of
    # warm-up, the sweep's 0.3 s after 0.1 s; the raw file records both per cell.
    assert dict(table.groupby("layout")["loaded_s"].max()) == pytest.approx({"pinned": 0.4, "shared": 0.7})
    assert dict(table.groupby("layout")["loaded_s"].min()) == pytest.approx({"pinned": 0.4, "shared": 0.7})
    assert dict(table.groupby("layout")["warmup"].max()) == pytest.approx({"pinned": 0.1, "shared": 0.2})
    # The CPU figures cover what the processes' CPU times do: the connecting and
    # ramp-up before the clock (setup_s) too. At c = 1000 that is 7 % of a cell,
    # and without it a one-thread server read up to 1.06 of a CPU.
    assert (table["setup_s"] > 0).all()
    assert list(table["busy_s"]) == pytest.approx(list(table["loaded_s"] + table["setup_s"]))
    assert list(table["server_busy"]) == pytest.approx(list(table["server_cpu_ns"] / 1e9 / table["busy_s"]))
    # IPIs per request where the server had its own CPUs; unpinned, the count mixes both sides.
    assert table.loc[table["layout"] == "pinned", "resched_ipis_per_request"].notna().all()
    assert table.loc[table["layout"] == "shared", "resched_ipis_per_request"].isna().all()
    ratios = echostats.paired_ratios(table, "default", "epoll")
    assert sorted(zip(ratios["layout"], ratios["pipeline"], strict=True)) == [
        ("pinned", 1),
        ("pinned", 4),
        ("shared", 1),
    ]
    with pytest.raises(ValueError, match="keep one setup"):
        echostats.ratio_per_rep(ratios, 3, 64)
    # Ours prefers the io_uring client; this node ran the epoll one, so that is ours here.
    for setup, client in (echostats.OUR_SETUP, "event-loop"), (echostats.SOURCE_SETUP, "thread-per-connection"):
        one = echostats.one_setup(table, setup)
        assert set(one["client"]) == {client} and set(one["layout"]) == {setup["layout"]}
        assert set(one["pipeline"]) == {1}
        assert len(echostats.ratio_per_rep(echostats.paired_ratios(one, "default", "epoll"), 3, 64)) == 1
    assert echostats.seed_table(table)["our setup"].iloc[0].startswith("thread-per-connection client, shared")
    # Files written before the client model, the layout and a setup's depth
    # were recorded: the event-loop client, pinned where a server CPU was
    # recorded, the sweep's one pipeline setting.
    old = [ln for ln in raw.read_text().splitlines() if not ln.startswith("#")]  # no format line then either
    header = old[0].split(",")
    drop = {header.index(c) for c in ("client", "layout", "pipeline", "duration", "warmup", "setup_s")}
    raw.write_text("\n".join(",".join(f for i, f in enumerate(ln.split(",")) if i not in drop) for ln in old) + "\n")
    legacy = readers.read_echo_csv(raw)
    assert set(legacy["client"]) == {"event-loop"}
    assert sorted(legacy["layout"]) == ["pinned"] * 4 + ["shared", "shared"]
    legacy_table = tables.load("echo", tmp_path)
    assert set(legacy_table["pipeline"]) == {SWEEP.get("pipeline", 1)}
    assert list(legacy_table["loaded_s"]) == pytest.approx([0.4] * 6)
    assert list(legacy_table["busy_s"]) == pytest.approx([0.4] * 6)


def test_rescheduling_ipis_are_read_per_cpu_set() -> None:
    # CPU1 offline: /proc/interrupts has no column for it.
    text = (
        "           CPU0       CPU2       CPU3\n"
        "  0:         40          0          0   IO-APIC   2-edge      timer\n"
        "RES:        100         20          3   Rescheduling interrupts\n"
        "CAL:          5          6          7   Function call interrupts\n"
    )
    assert echo_cell.resched_ipis(text, None) == 123
    assert echo_cell.resched_ipis(text, 0) == 100
    assert echo_cell.resched_ipis(text, "2-3") == 23
    assert echo_cell.resched_ipis(text, "1") == 0
    assert echo_cell.resched_ipis("           CPU0\n  0:  1  IO-APIC\n", 0) is None


def test_what_could_not_run_is_one_clause_per_preset_and_kind_of_reason() -> None:
    failed = [
        {"preset": "go_net", "connections": 500, "status": "failed", "reason": f"the server answered {n} of 500"}
        for n in (135, 211, 243)
    ]
    rows = [
        *failed,
        {"preset": "epoll", "connections": 50, "status": "ok", "reason": ""},
        {"preset": "spare", "connections": 1, "status": "unavailable", "reason": "no spare CPU"},
        {"preset": "spare", "connections": 50, "status": "unavailable", "reason": "no spare CPU"},
    ]
    text = echostats.unavailable_text(pd.DataFrame(rows))
    assert text == (
        "go_net (3 cells at c = 500; the others alike, with other counts): the server answered 135 of 500; "
        "spare (2 cells at c = 1, 50): no spare CPU"
    )
    assert echostats.unavailable_text(pd.DataFrame(rows[3:4])) == "none"


def test_a_setups_cells_run_back_to_back_and_a_decision_pair_adjacent() -> None:
    """Within a (connections, bytes) block the cells of one setup run
    together, so the default config's two-preset setups (the claims'
    thread-per-connection cells) measure their pair in adjacent cells; the
    blocks' and setups' order still changes with the seed."""
    settings = EchoSettings.of(iolab_config.load()["experiments"]["echo"])
    firsts = set()
    for seed in range(8):
        planned = echo_exp.cells(settings, seed)
        firsts.add((planned[0].connections, planned[0].bytes, planned[0].client))
        positions: dict[tuple[int, int, str, str, int], list[int]] = {}
        for i, c in enumerate(planned):
            positions.setdefault((c.connections, c.bytes, c.client, c.layout, c.pipeline), []).append(i)
        for key, where in positions.items():
            assert where == list(range(where[0], where[0] + len(where))), f"seed {seed}: {key} split at {where}"
        pairs = [w for (c, _, client, _, _), w in positions.items() if client == "thread-per-connection" and c == 50]
        assert pairs and all(len(w) == 2 and w[1] - w[0] == 1 for w in pairs)
    assert len(firsts) > 1
    # The negative control: the whole block in one random order (the sweep
    # before) puts the c = 50 pair apart for most seeds.
    apart = 0
    for seed in range(8):
        block = [c for c in echo_exp.cells(settings, seed) if (c.connections, c.bytes) == (50, 128)]
        random.Random(seed).shuffle(block)
        where = [i for i, c in enumerate(block) if c.client == "thread-per-connection"]
        apart += where[1] - where[0] > 1
    assert apart >= 4


def _pair_orders(
    settings: EchoSettings, seeds: list[int], run_seed: int | None
) -> dict[tuple[object, ...], list[tuple[bool, int]]]:
    """For each (block, setup, preset A, preset B) with A < B: in each of
    repetitions 1..len(seeds), whether A ran before B, and how far apart."""
    counts: dict[tuple[object, ...], list[tuple[bool, int]]] = {}
    for rep, seed in enumerate(seeds, start=1):
        where: dict[tuple[object, ...], dict[str, int]] = {}
        for i, c in enumerate(echo_exp.cells(settings, seed, rep, run_seed)):
            where.setdefault((c.connections, c.bytes, c.client, c.layout, c.pipeline), {})[c.preset] = i
        for key, at in where.items():
            for a in at:
                for b in at:
                    if a < b:
                        counts.setdefault((*key, a, b), []).append((at[a] < at[b], abs(at[a] - at[b])))
    return counts


def test_each_pair_runs_as_often_either_way_round_over_a_runs_repetitions() -> None:
    """ABBA over repetitions: with the seed a run's repetitions share, every
    pair of presets within a setup runs A first in half of repetitions 1-2,
    1-4 and 1-6, and always at the same distance, while the blocks' order
    still changes with each repetition's seed. The negative control, each
    repetition shuffling its own setups (the sweep before), leaves most
    pairs unbalanced over 6 repetitions."""
    settings = EchoSettings.of(iolab_config.load()["experiments"]["echo"])
    seeds = [101, 202, 303, 404, 505, 606]
    assert [echo_exp.reversed_in(r) for r in range(1, 9)] == [False, True, True, False, False, True, True, False]
    for reps in (2, 4, 6):
        orders = _pair_orders(settings, seeds[:reps], run_seed=77)
        assert len(orders) > 100
        for key, seen in orders.items():
            firsts = sum(first for first, _ in seen)
            assert firsts == reps // 2, f"{key}: A first in {firsts} of {reps} repetitions"
            assert len({d for _, d in seen}) == 1, f"{key}: distances {[d for _, d in seen]}"
    assert len({tuple((c.connections, c.bytes) for c in echo_exp.cells(settings, s, 1, 77)) for s in seeds}) > 1
    # Another run (another shared seed) draws another order.
    other = echo_exp.cells(settings, seeds[0], 1, 78)
    assert [c.preset for c in other] != [c.preset for c in echo_exp.cells(settings, seeds[0], 1, 77)]
    # The negative control.
    before = _pair_orders(settings, seeds, run_seed=None)
    unbalanced = sum(sum(first for first, _ in seen) != 3 for seen in before.values())
    assert unbalanced > len(before) / 2


def test_paired_ratios_carries_both_cells_columns_and_keys_on_the_setup() -> None:
    rows = [
        {"node": "n1", "rep": rep, "connections": 50, "bytes": 128, "preset": preset, "status": "ok",
         "client": client, "layout": "pinned", "pipeline": 1, "order": order, "rps": rps,
         "server_ns_per_request": 1e9 / rps}
        for rep in (1, 2)
        for client in ("event-loop", "thread-per-connection")
        for preset, order, rps in (("default", 3 * rep, 2e5), ("epoll", 3 * rep + 1, 1e5))
    ]  # fmt: skip
    ratios = echostats.paired_ratios(pd.DataFrame(rows), "default", "epoll", carry=["order", "rps", "order"])
    # One row per repetition and client: a client's cell never pairs with another's.
    assert len(ratios) == 4 and (ratios["ratio"] == 2.0).all()
    assert list(ratios.columns[-4:]) == ["order_numerator", "order_denominator", "rps_numerator", "rps_denominator"]
    assert (ratios["order_denominator"] - ratios["order_numerator"] == 1).all()
    assert (ratios["rps_numerator"] == ratios["numerator"]).all()
    assert list(echostats.paired_ratios(pd.DataFrame(rows), "default", "epoll").columns)[-3:] == [
        "ratio",
        "numerator",
        "denominator",
    ]
