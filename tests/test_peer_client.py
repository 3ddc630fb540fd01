"""benchmarks/peer_client.py: the ring-over-epoll ratio under our load
generator and under crates.io's tcp-echo-benchmark, in the same rounds.

The end-to-end case installs the real crate with cargo and drives the real
servers with both clients (the release tier: it needs crates.io). The rest
checks what reads the cells: the peer's report line, the quartet ratio, and
the verdict on whether the two clients agree."""

from __future__ import annotations

import csv
import math
import random
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from conftest import REPO, load_benchmark


def peer_client() -> ModuleType:
    return load_benchmark("peer_client")


def test_the_peer_report_is_read_and_a_missing_one_named() -> None:
    pc = peer_client()
    text = (
        "Benchmarking 127.0.0.1:4000 with 50 clients, 128 bytes, 2 seconds\n"
        "Throughput: 61234 request/sec, 61230 response/sec\n"
        "Total: 122468 requests, 122460 responses\n"
    )
    assert pc.parse_peer(text) == (122468, 122460)
    with pytest.raises(pc.PeerError, match="printed no 'Total:' line"):
        pc.parse_peer("thread 'main' panicked at src/main.rs:52: Connection refused\n")


def test_without_cargo_the_error_says_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pc = peer_client()
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pc.PeerError, match=r"cargo is not on PATH: install Rust \(https://rustup.rs\)"):
        pc.ensure_peer(tmp_path / "peers")


def synthetic_cells(peer_factor: float, rounds: int = 6, noise: float = 0.03, seed: int = 1) -> list[dict]:
    """Cells where the ring costs 0.95x epoll under ours and peer_factor x that
    under the peer, with a drift along each quartet and log-normal noise."""
    rng = random.Random(seed)
    cells = []
    for r in range(1, rounds + 1):
        for client, ratio in (("ours", 0.95), ("peer", 0.95 * peer_factor)):
            for position, preset in enumerate(("epoll", "ring", "ring", "epoll")):
                base = 5000.0 * 1.04**position * (ratio if preset == "ring" else 1.0)
                value = base * math.exp(rng.gauss(0, noise))
                cells.append(
                    {
                        "round": r,
                        "connections": 50,
                        "client": client,
                        "position": position,
                        "preset": preset,
                        "server_ns": value,
                        "client_ns": 3000.0,
                        "waits_per_request": 0.5,
                        "events_per_wait": 2.0,
                        "switches_per_request": math.nan if client == "ours" else 0.4,
                        "rps": 50000.0,
                    }
                )
    return cells


def agreement(summary: str) -> str:
    m = re.search(r"^\| 50 \| \d+ \| (\d\.\d{3}) \| \S+ \| (yes|no) \|$", summary, re.M)
    assert m, summary
    return m.group(2)


def test_the_clients_agree_only_when_their_ratios_do() -> None:
    pc = peer_client()
    same = pc.summarise(synthetic_cells(1.0), "epoll", "ring")
    assert agreement(same) == "yes"
    # Each client's ratio is recovered through the drift (0.95 and 0.95 x 0.75).
    rows = dict(re.findall(r"^\| 50 \| (ours|peer) \| 6 \| (\d\.\d{3}) \|", same, re.M))
    assert math.isclose(float(rows["ours"]), 0.95, abs_tol=0.03)
    # Requests/s from the same quartets: equal in every cell here, so 1 under either client.
    assert re.search(r"^\| 50 \| requests/s \| peer / ours \| 6 \| 1\.000 \| 1\.000–1\.000 \|$", same, re.M)
    # The negative control: the 0.75x under another client is a disagreement.
    apart = pc.summarise(synthetic_cells(0.75), "epoll", "ring")
    assert agreement(apart) == "no"
    rows = dict(re.findall(r"^\| 50 \| (ours|peer) \| 6 \| (\d\.\d{3}) \|", apart, re.M))
    assert math.isclose(float(rows["peer"]) / float(rows["ours"]), 0.75, abs_tol=0.04)


def test_a_quartet_cancels_a_linear_drift() -> None:
    pc = peer_client()
    quartet = [{"server_ns": (1.2 if i in (1, 2) else 1.0) * (1 + 0.05 * i)} for i in range(4)]
    exact = pc.quartet_log_ratio(quartet, "server_ns")
    assert abs(exact - math.log(1.2)) < 0.005
    # The negative control: the first A and B alone carry the drift.
    assert abs(math.log(quartet[1]["server_ns"] / quartet[0]["server_ns"]) - math.log(1.2)) > 0.04


@pytest.mark.full
def test_both_clients_drive_both_servers_in_one_round(native_build: Path, tmp_path: Path) -> None:
    res = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "peer_client.py"),
            *("--rounds", "2", "--duration", "1", "--connections", "50", "--out", str(tmp_path)),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
        check=False,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    with (tmp_path / "cells.csv").open() as f:
        cells = list(csv.DictReader(f))
    assert {(c["client"], c["preset"]) for c in cells} == {
        (client, preset) for client in ("ours", "peer") for preset in ("epoll", "defer_taskrun_multishot")
    }
    assert len(cells) == 16
    for c in cells:
        # Every cell echoed requests at a believable cost: a server CPU per
        # request between 100 ns and 1 ms on any machine this runs on.
        assert 100 < float(c["server_ns"]) < 1e6, c
    for c in (c for c in cells if c["client"] == "peer"):
        assert float(c["switches_per_request"]) > 0
        # The server echoed every request the peer read back, and none it did not write.
        assert float(c["client_responses"]) <= float(c["server_requests"]) <= float(c["client_requests"]), c
    assert re.search(r"^\| 50 \| peer \| 2 \| \d\.\d{3} \|", res.stdout, re.M)
    assert re.search(r"^\| 50 \| 2 \| \d\.\d{3} \| \S+ \| (yes|no) \|$", res.stdout, re.M)
    again = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "peer_client.py"), "--from-cells", str(tmp_path / "cells.csv")],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert again.returncode == 0 and again.stdout == (tmp_path / "summary.md").read_text()
    bad = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "peer_client.py"), "--duration", "0"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert bad.returncode == 2 and "measures whole seconds; give 1 or more" in bad.stderr
