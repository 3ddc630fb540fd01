"""The benchmarks the decisions and docs/method.md quote still run against
today's code: each is run briefly (a round, cells of a tenth of a second)
and must print its summary. Their numbers are not checked here; timings
live in the benchmarks, not in tests."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, load_benchmark

from iolab.estimation import intervals as stats

RATIO = r"\d+\.\d\d-\d+\.\d\d \(median \d+\.\d\d, n=\d+\)"


def benchmark(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / name), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        check=False,
    )


def test_client_cost_compares_both_clients_and_another_build(native_build: Path) -> None:
    res = benchmark(
        "client_cost.py",
        "--rounds",
        "1",
        "--duration",
        "0.1",
        "--bytes",
        "512",
        "--baseline-loadgen",
        str(native_build / "loadgen"),
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert (
        len(re.findall(r"^round 1 .*: \d+ req/s, server \d+\.\d\d us/req, client \d+\.\d\d us/req$", res.stdout, re.M))
        == 6
    )
    for line in (
        "event-loop-uring client / cheapest ring's server CPU, same cell",
        "io_uring client / epoll client CPU, same server and round",
        "io_uring client / the baseline build's, same server and round",
    ):
        assert re.search(rf"^{re.escape(line)}: {RATIO}$", res.stdout, re.M), line
    missing = benchmark("client_cost.py", "--baseline-loadgen", "/nonexistent/loadgen")
    assert missing.returncode == 2 and "--baseline-loadgen /nonexistent/loadgen: no such file" in missing.stderr


@pytest.mark.full
def test_preset_counters_tabulates_every_preset_that_runs_here(native_build: Path) -> None:
    res = benchmark("preset_counters.py", "--rounds", "1", "--duration", "0.05")
    assert res.returncode == 0, res.stderr[-2000:]
    rows = re.findall(r"^\| (\w+) \| \d+\.\d\d-", res.stdout, re.M)
    assert {"epoll", "default", "multishot", "defer_taskrun_multishot"} <= set(rows)
    # A preset this machine cannot run is named and left out, not a crash.
    for left_out in re.findall(r"^(\w+): unavailable: .*; left out$", res.stdout, re.M):
        assert left_out not in rows


def test_resched_ipis_counts_each_ring_and_says_whether_the_bound_holds(native_build: Path) -> None:
    # The rings' IPIs are a machine-wide count (what once failed the suite
    # beside a load): the benchmark is run, its numbers are not checked.
    res = benchmark("resched_ipis.py", "--rounds", "1", "--duration", "0.1")
    assert res.returncode == 0, res.stderr[-2000:]
    assert re.findall(r"^\| (\w+) \| \d+ \| \d+\.\d{4} \|$", res.stdout, re.M) == [
        "default",
        "defer_taskrun",
        "control",
    ]
    assert re.search(r"^default ring above 2 x DEFER_TASKRUN \+ 30: (yes|no)$", res.stdout, re.M)
    assert re.search(r"^control \(a second DEFER_TASKRUN ring\) above it: (yes|no)$", res.stdout, re.M)
    bad = benchmark("resched_ipis.py", "--rounds", "0")
    assert bad.returncode == 2 and "--rounds must be >= 1" in bad.stderr


def test_pair_length_tabulates_the_paired_spread_by_length_and_distance(native_build: Path, tmp_path: Path) -> None:
    res = benchmark(
        "pair_length.py", "--lengths", "0.1", "--connections", "50", "--quartets", "3", "--out", str(tmp_path)
    )
    assert res.returncode == 0, res.stderr[-2000:]
    rows = re.findall(
        r"^\| 50 \| 0.1 s \| (requests/s|server CPU per request) \| (ABBA quartet|d = \d+) \|", res.stdout, re.M
    )
    assert ("requests/s", "ABBA quartet") in rows and ("server CPU per request", "d = 1") in rows
    assert {p.name for p in tmp_path.iterdir()} == {"cells.csv", "spread.csv", "spread.md", "spread.png"}
    again = benchmark("pair_length.py", "--from-cells", str(tmp_path / "cells.csv"), "--out", str(tmp_path / "again"))
    assert (
        again.returncode == 0 and (tmp_path / "again" / "spread.md").read_text() == (tmp_path / "spread.md").read_text()
    )
    # The sources' setup, in which the claims' decision cells are measured.
    sources = benchmark(
        "pair_length.py",
        *("--lengths", "0.1", "--connections", "50", "--quartets", "3", "--out", str(tmp_path / "sources")),
        *("--client", "thread-per-connection", "--layout", "shared"),
    )
    assert sources.returncode == 0, sources.stderr[-2000:]
    assert "thread-per-connection client, shared CPUs, 3 ABBA quartets per block" in sources.stdout
    with (tmp_path / "sources" / "cells.csv").open() as f:
        assert {(r["client"], r["layout"]) for r in csv.DictReader(f)} == {("thread-per-connection", "shared")}
    few = benchmark("pair_length.py", "--quartets", "2")
    assert few.returncode == 2 and "--quartets must be at least 3" in few.stderr


def test_an_abba_quartet_cancels_a_linear_drift_that_an_adjacent_pair_keeps() -> None:
    import math

    module = load_benchmark("pair_length")
    # B is exactly 1.2 A; the machine slows 3 % per cell throughout.
    seq = [{"side": side, "rps": (1.2 if side == "B" else 1.0) * 0.97**i} for i, side in enumerate("ABBA" * 4)]
    quartets = stats.abba_log_ratios([x["rps"] for x in seq])
    assert all(math.isclose(r, math.log(1.2), abs_tol=1e-12) for r in quartets)
    # The negative control: A then the B right after it carries the drift.
    adjacent = module.distance_ratios(seq, "rps", 1)
    assert all(abs(r - math.log(1.2)) > 0.02 for r in adjacent)


def _pair_table(position: float, noise: list[float]) -> pd.DataFrame:
    """Two cells x len(noise) repetitions of the default ring and epoll under
    the thread-per-connection client: the ring's requests/s is 1.1x epoll's
    times exp(noise[rep]), and whichever cell runs second gets exp(position)."""
    import math

    rows = []
    for c in (50, 500):
        for rep, e in enumerate(noise, start=1):
            ring_first = rep % 2 == 0
            for preset, base, order in (
                ("default", 1.1 * math.exp(e), 0 if ring_first else 1),
                ("epoll", 1.0, 1 if ring_first else 0),
            ):
                rps = 1e5 * base * (math.exp(position) if order == 1 else 1.0)
                rows.append(
                    {"node": "n1", "connections": c, "bytes": 128, "rep": rep, "preset": preset, "status": "ok",
                     "client": "thread-per-connection", "order": 10 * c + order, "rps": rps,
                     "server_ns_per_request": 1e9 / rps}
                )  # fmt: skip
    return pd.DataFrame(rows)


def test_pair_spread_gives_each_cells_sd_and_sees_a_position_effect() -> None:
    import math

    import numpy as np

    module = load_benchmark("pair_spread")
    noise = [0.05, -0.12, 0.02, 0.09, -0.03, 0.11, -0.07, 0.0]
    paired = module.pairs(_pair_table(0.0, noise), "default", "epoll", "thread-per-connection")
    rows, pooled = module.spread(paired)
    assert [r.connections for r in rows] == [50, 500] and all(r.distances == [1] * 8 for r in rows)
    assert all(r.num_first == 4 for r in rows)
    assert "| default first |" in module.report("run", rows, pooled, "default", "epoll")
    assert "| 1, 1, 1, 1, 1, 1, 1, 1 | 4 of 8 |" in module.report("run", rows, pooled, "default", "epoll")
    want = float(np.std(np.log(1.1) + np.array(noise), ddof=1))
    assert all(math.isclose(r.sd["rps"][0], want, rel_tol=1e-9) for r in rows)
    assert math.isclose(pooled["rps"], want, rel_tol=1e-9)
    assert math.isclose(pooled["server_ns_per_request"], want, rel_tol=1e-9)
    # The ring ran first in the even repetitions: with no position effect the
    # estimate is only the noise's imbalance between the two halves.
    imbalance = float(np.mean(noise[1::2]) - np.mean(noise[0::2]))
    assert math.isclose(pooled["rps_position"], imbalance, abs_tol=1e-9)
    # The second cell of a pair 10 % faster: a single A-then-B pair carries it,
    # as the ring's ratio -0.1 when it ran first and +0.1 when second.
    moved = module.spread(module.pairs(_pair_table(0.1, [0.0] * 8), "default", "epoll", "thread-per-connection"))[1]
    assert math.isclose(moved["rps_position"], -0.2, abs_tol=1e-9)
    assert math.isclose(moved["rps"], 0.1 * math.sqrt(16 / 14), rel_tol=1e-9)


def test_warmup_length_measures_briefly_and_summarises_again(native_build: Path, tmp_path: Path) -> None:
    args = ("--presets", "epoll", "--connections", "50", "--warmups", "0", "--quartets", "3", "--length", "0.1")
    res = benchmark("warmup_length.py", *args, "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr[-2000:]
    assert re.search(r"^\| epoll \| 50 \| 0 s \| requests/s \| 3 \| [+-]\d", res.stdout, re.M)
    assert {p.name for p in tmp_path.iterdir()} == {"cells.csv", "bias.csv", "bias.md"}
    again = benchmark("warmup_length.py", "--from-cells", str(tmp_path / "cells.csv"), "--out", str(tmp_path / "b"))
    assert again.returncode == 0 and (tmp_path / "b" / "bias.md").read_text() == (tmp_path / "bias.md").read_text()
    bad = benchmark("warmup_length.py", "--presets", "nosuch")
    assert bad.returncode == 2 and "not in experiments.echo.presets: nosuch" in bad.stderr


def test_warmup_length_finds_a_shift_only_where_the_shorter_warmup_made_one() -> None:
    """Two presets, 8 ABBA quartets each, a slow drift over the block and noise
    of sd 0.03 in log: one preset's server CPU per request 6 % higher after the
    shorter warm-up (the B cells), the other's unmoved."""
    import math
    import random

    module = load_benchmark("warmup_length")
    rng = random.Random(3)
    cells = []
    for preset, shift in (("sqpoll", 0.06), ("epoll", 0.0)):
        for position, side in enumerate("ABBA" * 8):
            drift = 1 + 0.01 * position
            cpu = 1000 * drift * math.exp(rng.gauss(0, 0.03)) * (1 + shift if side == "B" else 1)
            rps = 1e5 / drift * math.exp(rng.gauss(0, 0.03))
            cells.append({"preset": preset, "connections": 50, "warmup_b": 0.1, "position": position, "side": side,
                          "warmup": 0.1 if side == "B" else 0.25, "rps": rps, "server_cpu": cpu})  # fmt: skip
    rows = {(r["preset"], r["quantity"]): r for r in module.summarise(cells, 0.25)}
    moved = rows["sqpoll", "server_cpu"]
    assert moved["bias_low"] > 0 and abs(moved["bias"] - 0.06) < 0.03
    for key in (("epoll", "server_cpu"), ("epoll", "rps"), ("sqpoll", "rps")):
        assert rows[key]["bias_low"] < 0 < rows[key]["bias_high"], key
    # Pooled over both presets the shift is diluted, not lost: half the quartets carry it.
    assert rows["all", "server_cpu"]["n"] == 16 and rows["all", "server_cpu"]["bias"] > 0


def test_variance_components_reads_records_and_gives_each_level(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from iolab.claims import records

    module = load_benchmark("variance_components")
    rng = np.random.default_rng(2)
    for launch in range(4):
        effect = rng.normal(0, 0.1)
        for run in range(2):
            values = [float(np.exp(effect + rng.normal(0, 0.05))) for _ in range(6)]
            findings = (
                {
                    "claim": "U1",
                    "part": "p",
                    "rule_kind": "above",
                    "bound": 0.95,
                    "margin_share": 0.0,
                    "per_rep": values,
                },
            )
            identity = records.RunIdentity(
                "10a8834",
                f"2026-12-0{launch + 1}T0{run}:00:00+00:00",
                launch=f"{launch:08x}-0000-4000-8000-000000000000",
                findings=records.findings_digest(findings),
            )
            records.RunRecord(identity, "vm, 2 CPUs, Linux 6.18, mitigations on", "", "default", findings).write(
                tmp_path
            )
    assert module.main(["--records", str(tmp_path), "--boots", "10"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("8 run(s) on 4 launch(es):")
    assert "U1: p" in out and "(4 launches, 8 runs)" in out
    assert "echo servers (U1-U6)" in out and "lag-1 autocorrelation" in out
