"""The open-loop latency experiment: the load generator keeps its schedule,
a server stall shows in the open-loop tail (and is hidden closed loop),
merged histograms equal the pooled samples' histogram, and one repetition
runs from plan to tidy table to curves and figure with real servers."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from echo_support import schedule_bounds

from iolab import readers, tables
from iolab.config import ConfigError, check_semantics, load
from iolab.experiments import echo as echo_exp
from iolab.experiments import latency as latency_exp
from iolab.experiments.echo import cell as echo_cell
from iolab.formats import histograms_path
from iolab.rooms.latency import present as latency_present
from iolab.rooms.latency import stats as latency
from iolab.runners import LocalRunner
from iolab.settings import LatencySettings

TWO_CPUS = (os.cpu_count() or 1) >= 2


def start_epoll(native_build: Path) -> tuple[subprocess.Popen[str], int]:
    cell = echo_cell.Cell("epoll", (), 1, 64)
    return echo_cell.start_server(cell, 0 if TWO_CPUS else None, LocalRunner())


def loadgen(native_build: Path, port: int, *args: str, hist: Path | None = None) -> dict:
    argv = [
        *(["taskset", "-c", "1"] if TWO_CPUS else []),
        str(native_build / "loadgen"),
        "--port",
        str(port),
        "--bytes",
        "64",
        *args,
        *(["--histogram", str(hist)] if hist else []),
    ]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def buckets(path: Path) -> tuple[list[int], list[int]]:
    rows = [line.split(",") for line in path.read_text().splitlines()[1:]]
    return [int(r[0]) for r in rows], [int(r[2]) for r in rows]


def test_open_loop_keeps_its_schedule_below_capacity(native_build: Path) -> None:
    """5000 requests/s is far below an echo server's capacity here (about
    90 000 at 50 connections): every scheduled request is sent and answered,
    so the run counts what its schedule holds (schedule_bounds)."""
    proc, port = start_epoll(native_build)
    run = ("--connections", "50", "--duration", "2", "--warmup", "0.3")
    try:
        report = loadgen(native_build, port, *run, "--rate", "5000")
        # The negative controls, in the same interleaving: a client that
        # keeps no schedule (closed loop), and one at half the rate.
        unscheduled = loadgen(native_build, port, *run)
        half = loadgen(native_build, port, *run, "--rate", "2500")
    finally:
        echo_cell.stop_server(proc, LocalRunner())
    assert report["rate"] == 5000
    low, high = schedule_bounds(report)
    assert low <= report["requests"] <= high, (low, report["requests"], high)
    assert unscheduled["requests"] > high and half["requests"] < low, (unscheduled["requests"], half["requests"])


def stalled_run(native_build: Path, hist: Path, *args: str) -> dict:
    """A 2 s measured run during which the server is stopped for 100 ms."""
    proc, port = start_epoll(native_build)

    def stall() -> None:
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(0.1)
        os.kill(proc.pid, signal.SIGCONT)

    timer = threading.Timer(0.3 + 1.0, stall)  # warm-up, then mid-window
    timer.start()
    try:
        return loadgen(native_build, port, "--duration", "2", "--warmup", "0.3", *args, hist=hist)
    finally:
        timer.join()
        echo_cell.stop_server(proc, LocalRunner())


def slow_requests(hist: Path, at_least_ns: int) -> int:
    """The requests of a run's histogram that took ``at_least_ns`` or more."""
    low, counts = buckets(hist)
    return sum(c for lo, c in zip(low, counts, strict=True) if lo >= at_least_ns)


def test_a_stall_shows_in_the_open_loop_tail_and_hides_closed_loop(native_build: Path, tmp_path: Path) -> None:
    """Open loop at 2000 requests/s, about 200 requests fall due during a
    100 ms stall (5 % of 4000): each waits for the rest of it, so the 100
    due in its first half take 50 ms or more, p99 is tens of ms and p99.9
    close to the whole stall. Closed loop with one connection, the stall
    delays the one request in flight (coordinated omission). A busy machine
    only delays more requests, in both runs: but one connection's requests
    follow each other, so in its 2 s at most 40 can take 50 ms or more,
    however busy the machine, while open loop shows 100 for the stall alone."""
    open_hist, closed_hist = tmp_path / "open.csv", tmp_path / "closed.csv"
    opened = stalled_run(native_build, open_hist, "--connections", "10", "--rate", "2000")
    closed = stalled_run(native_build, closed_hist, "--connections", "1")
    assert opened["p999_us"] >= 80_000 and opened["p99_us"] >= 50_000
    assert opened["max_us"] >= 95_000
    assert closed["max_us"] >= 95_000  # the stall happened there too ...
    # ... and the closed loop counts it once, where open loop counts it in
    # every request that fell due during its first half.
    assert slow_requests(closed_hist, 50_000_000) <= 2.0 / 0.05 < 90 <= slow_requests(open_hist, 50_000_000)
    # The merged HdrHistogram view agrees with the load generator's own percentiles.
    h = latency.histogram(*buckets(open_hist))
    assert h.get_total_count() == opened["requests"]
    for name, pct in latency.PERCENTILES.items():
        assert latency.percentile_us(h, pct) == pytest.approx(opened[f"{name}_us"], rel=0.02)


def test_merged_histograms_equal_the_pooled_samples_histogram() -> None:
    rng = np.random.default_rng(7)
    groups = [rng.lognormal(mean=10 + i * 0.1, sigma=0.8, size=5000).astype(int) + 1 for i in range(6)]

    def hist_of(samples: np.ndarray):
        values, counts = np.unique(samples, return_counts=True)
        return latency.histogram(values.tolist(), counts.tolist())

    pooled = hist_of(np.concatenate(groups))
    merged = latency.merged(hist_of(g) for g in groups)
    assert merged.get_total_count() == pooled.get_total_count() == 30_000
    assert latency.recorded(merged) == latency.recorded(pooled)
    for pct in (0, 10, 50, 90, 99, 99.9, 99.99, 100):
        assert merged.get_value_at_percentile(pct) == pooled.get_value_at_percentile(pct)


def test_merging_two_real_runs_equals_their_summed_buckets(native_build: Path, tmp_path: Path) -> None:
    """Two load-generator histograms merged as HdrHistograms equal the
    histogram of their bucket counts added: no bucket is moved or lost."""
    proc, port = start_epoll(native_build)
    files = [tmp_path / f"{i}.csv" for i in range(2)]
    try:
        for f in files:
            loadgen(native_build, port, "--connections", "4", "--duration", "0.3", "--warmup", "0.1", hist=f)
    finally:
        echo_cell.stop_server(proc, LocalRunner())
    summed: dict[int, int] = {}
    for f in files:
        for low, count in zip(*buckets(f), strict=True):
            summed[low] = summed.get(low, 0) + count
    direct = latency.histogram(list(summed), list(summed.values()))
    merged = latency.merged(latency.histogram(*buckets(f)) for f in files)
    assert latency.recorded(merged) == latency.recorded(direct)


SETTINGS = {
    "duration": 0.3,
    "warmup": 0.1,
    "connections": 8,
    "bytes": 64,
    "port": 0,
    "loads": [0.2, 0.6],
    "fixed_rate_loads": [0.4],
    "presets": ["epoll", "default", "refused"],
    "preset_specs": {"epoll": [], "default": [], "refused": ["--sqpoll", "--coop-taskrun"]},
}


def test_the_plan_measures_capacity_first_then_shuffles_every_load() -> None:
    planned = latency_exp.plan(LatencySettings.of(SETTINGS), 3)
    assert [c.phase for c in planned[:3]] == ["capacity"] * 3
    assert sorted((c.phase, c.preset, c.load) for c in planned[3:]) == sorted(
        [("open", p, x) for p in SETTINGS["presets"] for x in SETTINGS["loads"]]
        + [("fixed", p, x) for p in SETTINGS["presets"] for x in SETTINGS["fixed_rate_loads"]]
    )
    # Fixed-rate cells are shuffled in among the open-loop ones, not after them.
    assert [c.phase for c in planned[3:]] != sorted(c.phase for c in planned[3:])
    assert planned == latency_exp.plan(LatencySettings.of(SETTINGS), 3)
    assert any(latency_exp.plan(LatencySettings.of(SETTINGS), s) != planned for s in range(4, 10))


def test_one_repetition_from_servers_to_curves(native_build: Path, tmp_path: Path) -> None:
    raw = tmp_path / "n1" / "latency" / "k" / "rep1.csv"
    raw.parent.mkdir(parents=True)
    cpus = {"server": 0, "client": 1} if TWO_CPUS else {"server": None, "client": None}
    extra = latency_exp.run(LatencySettings.of(SETTINGS), cpus, 3, raw, histograms_path(raw), progress=False)
    rows = readers.read_latency_csv(raw).to_dict("records")
    capacity = extra["latency"]["capacity_rps"]
    assert set(capacity) == {"epoll", "default"} and min(capacity.values()) > 0
    for r in rows:
        if r["preset"] == "refused":
            # The kernel's refusal is the capacity cell's reason and every load's.
            assert r["status"] == "unavailable" and "cannot be combined with --coop-taskrun" in r["reason"]
        elif r["phase"] == "open":
            assert r["status"] == "ok"
            assert float(r["offered_rps"]) == pytest.approx(float(r["load"]) * capacity[r["preset"]], abs=0.1)
        elif r["phase"] == "fixed":
            # One rate for every preset: a share of the slowest capacity.
            assert r["status"] == "ok" and int(r["server_bytes"]) > 0
            assert float(r["offered_rps"]) == pytest.approx(0.4 * min(capacity.values()), abs=0.1)
    raw.with_name("rep1.provenance.json").write_text(
        json.dumps(
            {
                "node": {"name": "n1", "kind": "vm"},
                "mitigations": {"state": "on"},
                "host": {"kernel": "test"},
                "settings": {"rep": 1},
            }
        )
    )
    table = tables.load("latency", tmp_path)
    ok = table[table["status"] == "ok"]
    assert len(ok) == 8 and all(sum(c) == n for c, n in zip(ok["hist_count"], ok["requests"], strict=True))
    curves = latency.curves(table)
    assert sorted(zip(curves["preset"], curves["phase"], curves["load"], strict=True)) == [
        ("default", "capacity", 1.0),
        ("default", "fixed", 0.4),
        ("default", "open", 0.2),
        ("default", "open", 0.6),
        ("epoll", "capacity", 1.0),
        ("epoll", "fixed", 0.4),
        ("epoll", "open", 0.2),
        ("epoll", "open", 0.6),
    ]
    fixed = latency.fixed_rate_cpu(table)
    assert fixed[["preset", "load", "reps"]].values.tolist() == [["default", 0.4, 1]]
    assert 0 < fixed["ratio"].iloc[0] < np.inf and fixed["base_ns"].iloc[0] > 0
    # One repetition: a value, no interval; the merged view is that repetition's.
    assert (curves["p99_us"] == curves["p99_us_merged"]).all() and np.isinf(curves["p99_us_low"]).all()
    fig = latency_present.open_loop_figure(curves, latency.paired_ratios(table))
    assert [ax.get_title() for ax in fig.axes] == ["p99 latency", "p99 over epoll's, same repetition"]
    ratio = latency.paired_ratio(table, "default", "epoll", 0.6)
    assert len(ratio) == 1 and ratio[0] > 0
    out = tmp_path / "latency.parquet"
    tables.write_table("latency", [raw], out)
    listing = json.loads(tables.sources_path(out).read_text())["raw"][0]
    assert listing["histograms_sha256"] == tables.sha256(histograms_path(raw))


def curves_table(reps: int) -> pd.DataFrame:
    """A synthetic table: two presets at one load, one cell per repetition,
    latencies drawn around 100 µs (epoll) and 80 µs (the other)."""
    rng = random.Random(1)
    rows = []
    for rep in range(1, reps + 1):
        for preset, centre in (("epoll", 100_000), ("uring", 80_000)):
            samples = [int(rng.gauss(centre, centre / 10)) for _ in range(2000)]
            values, counts = np.unique(samples, return_counts=True)
            rows.append(
                {
                    "node": "n1",
                    "rep": rep,
                    "preset": preset,
                    "phase": "open",
                    "load": 0.5,
                    "status": "ok",
                    "rps": 1000.0,
                    "requests": 2000,
                    "achieved_over_offered": 1.0,
                    "hist_low_ns": values.tolist(),
                    "hist_count": counts.tolist(),
                }
            )
    return pd.DataFrame(rows)


def test_curves_give_intervals_across_repetitions_and_a_merged_tail() -> None:
    curves = latency.curves(curves_table(6)).set_index("preset")
    for preset, centre in (("epoll", 100.0), ("uring", 80.0)):
        row = curves.loc[preset]
        assert row["p50_us_low"] <= row["p50_us"] <= row["p50_us_high"]
        assert row["p50_us"] == pytest.approx(centre, rel=0.03)
        assert np.isfinite(row["p99_us_low"]) and np.isfinite(row["p99_us_high"])
        assert row["p999_us_merged"] >= row["p99_us_merged"] >= row["p50_us_merged"]
    ratios = latency.paired_ratio(curves_table(6), "uring", "epoll", 0.5)
    assert len(ratios) == 6 and np.all((ratios > 0.7) & (ratios < 0.9))
    summary = latency.paired_ratios(curves_table(6))
    assert list(summary["preset"]) == ["uring"] and summary["reps"].tolist() == [6]
    row = summary.iloc[0]
    assert row["low"] <= row["ratio"] <= row["high"] < 1 and row["ratio"] == pytest.approx(0.8, rel=0.05)


def fixed_rate_table(shuffle_pairs: bool = False) -> pd.DataFrame:
    """Synthetic fixed-rate cells: epoll at 10 µs of server CPU per request,
    the other preset at 0.85 of that, both times a drift shared within a
    repetition of up to +-30 % (these machines' drift between runs), plus
    2 % noise. ``shuffle_pairs``: the other preset's repetitions relabelled,
    so cells measured apart are paired (the broken version)."""
    rng = np.random.default_rng(7)
    drift = rng.uniform(0.7, 1.3, size=8)
    reps = np.arange(1, 9)
    other_reps = rng.permutation(reps) if shuffle_pairs else reps
    rows = []
    for preset, cost, labels in (("epoll", 10_000.0, reps), ("uring", 8_500.0, other_reps)):
        for rep, d in zip(labels, drift, strict=True):
            rows.append(
                {
                    "rep": int(rep),
                    "preset": preset,
                    "phase": "fixed",
                    "load": 0.5,
                    "status": "ok",
                    "offered_rps": 20_000.0,
                    "server_ns_per_request": cost * d * rng.normal(1, 0.02),
                }
            )
    return pd.DataFrame(rows)


def test_fixed_rate_cpu_pairs_cells_within_a_repetition() -> None:
    """With the drift shared within a repetition, the paired ratio's interval
    is narrow around 0.85 and excludes 1. Negative control: pair cells from
    different repetitions and the same data give an interval too wide to
    place the ratio (the check below fails on it)."""

    def narrow_around_085(row: pd.Series) -> bool:
        return bool(row["low"] <= 0.85 <= row["high"] and row["high"] - row["low"] < 0.1 and row["high"] < 1)

    paired = latency.fixed_rate_cpu(fixed_rate_table()).iloc[0]
    assert paired["preset"] == "uring" and paired["reps"] == 8 and paired["base_ns"] > 0
    assert narrow_around_085(paired)
    assert not narrow_around_085(latency.fixed_rate_cpu(fixed_rate_table(shuffle_pairs=True)).iloc[0])
    text = latency_present.fixed_rate_text(latency.fixed_rate_cpu(fixed_rate_table()))
    assert text.startswith("at 20,000 requests/s (50% of the slowest capacity; epoll") and "uring 0.8" in text
    assert latency_present.fixed_rate_text(latency.fixed_rate_cpu(curves_table(2).assign(phase="open"))).startswith(
        "not measured"
    )


def test_a_latency_preset_must_be_an_echo_preset() -> None:
    config = load()
    config["experiments"]["latency"]["presets"] = ["epoll", "no_such_preset"]
    with pytest.raises(ConfigError, match=r"experiments\.latency\.presets: 'no_such_preset' is not"):
        check_semantics(config)


def test_a_cell_without_its_result_or_its_rate_is_a_failed_cell_with_its_reason() -> None:
    # The report loadgen prints when no request completed in the window.
    nothing = {
        "requests": 0,
        "rps": 0.0,
        "p50_us": None,
        "p99_us": None,
        "p999_us": None,
        "max_us": None,
        "client_user_cpu_ns": 1000,
        "client_sys_cpu_ns": 1000,
    }
    open_loop = echo_cell.Cell("epoll", (), 50, 128, rate=20_000.0)
    assert "no request completed" in (echo_cell.report_problem(open_loop, nothing) or "")
    assert echo_cell.failed_status(echo_cell.report_problem(open_loop, nothing) or "") == "failed"
    measured = nothing | {
        "requests": 1634,
        "rps": 1634.0,
        "p50_us": 80.0,
        "p99_us": 900.0,
        "p999_us": 2e3,
        "max_us": 5e3,
    }
    # Several times under its offered rate: not measured at its load.
    assert "overloaded: completed 1,634 of the 20,000 requests/s offered" in (
        echo_cell.report_problem(open_loop, measured) or ""
    )
    # The same report closed loop, or open loop at a rate it kept, is a measurement.
    assert echo_cell.report_problem(echo_cell.Cell("epoll", (), 50, 128), measured) is None
    assert echo_cell.report_problem(echo_cell.Cell("epoll", (), 50, 128, rate=1700.0), measured) is None
    assert "no number for p99_us" in (echo_cell.report_problem(open_loop, measured | {"p99_us": "12"}) or "")
    # A progress line shows what it cannot format, and never raises.
    assert echo_exp.number_text(None) == "?" and echo_exp.number_text("") == "?"
    assert echo_exp.number_text(1234.4) == "1,234"


def test_snakemakes_restore_warning_is_said_in_this_packages_words() -> None:
    from iolab.progress import explained

    said = explained("Cannot restore data/raw/local/latency/abc/rep3.csv: no backup found.")
    assert said.startswith("data/raw/local/latency/abc/rep3.csv: not written") and "measured again" in said
    assert explained("Some other warning") == "Some other warning"
