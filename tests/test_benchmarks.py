"""The benchmarks DESIGN.md quotes still run against today's code: each is
run briefly (a round, cells of a tenth of a second) and must print its
summary. Their numbers are not checked here; timings live in the
benchmarks, not in tests."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

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
