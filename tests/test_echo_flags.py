"""The servers' flags: refused combinations, --help, io-wq placement, and
the CPU placeholders a preset's flags may use."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import REPO
from echo_support import BUILDS, SAN_ENV, Server, connect, echoed_within, exchange

from iolab.experiments.echo import cell as echo_cell
from iolab.presets import SERVER_PROGRAMS, server_flags

# --- server flags and the sweep ---------------------------------------------------------


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--sqpoll", "--single-issuer", "--defer-taskrun"], "--sqpoll cannot be combined with --defer-taskrun"),
        (["--defer-taskrun"], "--defer-taskrun needs --single-issuer"),
        (["--multishot-recv"], "--multishot-recv needs provided buffers"),
        (["--granule", "75"], "--granule routes connections between rings"),
        (["--buf-count", "3"], "--buf-count must be a power of two"),
        (["--wait-nr", "8"], "--wait-nr above 1 would wait for that many completions however long they take"),
        (["--zc-fixed", "--buf-ring"], "--zc-fixed registers the buffers zero-copy sends go out from: add --send-zc"),
        (["--send-zc", "--zc-fixed"], "--zc-fixed registers the provided buffers: add --buf-ring or --buf-select"),
        (["--send-bundle", "--gather-send"], "--send-bundle sends from a buffer ring per connection"),
    ],
)
def test_refused_combinations_exit_2_with_one_line(native_build: Path, flags: list[str], message: str) -> None:
    res = subprocess.run(
        [str(native_build / "echo-uring"), "--port", "0", *flags], capture_output=True, text=True, timeout=30
    )
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]


def test_help_documents_every_flag(native_build: Path) -> None:
    src = (REPO / "native" / "echo" / "loadgen.c").read_text()
    declared = {
        "loadgen": {f"--{d}" for d in re.findall(r'\{ "([a-z-]+)", (?:required|no)_argument', src)},
        **server_flags(),
    }
    for program, flags in declared.items():
        res = subprocess.run([str(native_build / program), "--help"], capture_output=True, text=True)
        assert res.returncode == 0, program
        # Go's flag package lists "-name"; the servers accept --name as well.
        shown = (res.stdout + res.stderr).replace("\n  -", "\n  --")
        assert flags and all(f in shown for f in flags), (program, sorted(f for f in flags if f not in shown))
    assert set(SERVER_PROGRAMS.values()) <= set(declared)


@pytest.mark.parametrize("build", BUILDS)
def test_a_batched_wait_returns_a_lone_completion_after_its_minimum_wait(native_build: Path, build: str) -> None:
    # Each wait asks for 64 completions; a lone echo is one. The minimum wait
    # (IORING_ENTER_EXT_ARG's min_wait_usec) must hand it back: without it
    # ring 1, which waits with no timeout, would hold the echo forever.
    exe = native_build / ("san" if build == "san" else "") / "echo-uring"
    srv = Server(exe, ["--rings", "2", "--granule", "1", "--wait-nr", "64", "--min-wait", "500"], build == "san")
    socks = [connect(srv.port) for _ in range(4)]  # consecutive fds: both rings get some
    try:
        for i, s in enumerate(socks):
            s.sendall(b"lone %d" % i)
            assert echoed_within(s, b"lone %d" % i, 10), f"connection {i}: the echo never came back"
        exchange(srv.port, [bytes([i]) * 4096 for i in range(32)], random.Random(7))
    finally:
        for s in socks:
            s.close()
    counters = srv.stop()
    assert counters["config"]["wait_nr"] == 64 and counters["config"]["min_wait_us"] == 500
    assert counters["bytes"] >= 32 * 4096 + sum(len(b"lone %d" % i) for i in range(4))


def iowq_worker_cpus(pid: int) -> set[str]:
    """Cpus_allowed_list of each io-wq worker thread (iou-wrk-*) of ``pid``."""
    out = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        if (task / "comm").read_text().startswith("iou-wrk"):
            m = re.search(r"^Cpus_allowed_list:\s*(\S+)", (task / "status").read_text(), re.M)
            assert m
            out.add(m.group(1))
    return out


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 CPUs: io-wq apart from the server")
@pytest.mark.parametrize("build", BUILDS)
def test_iowq_aff_moves_io_wq_workers_off_the_servers_cpu(native_build: Path, build: str) -> None:
    """U4's ASYNC gain comes from io-wq workers on other CPUs. Pinned with
    taskset, a server's workers inherit its CPU; --iowq-aff moves them."""
    exe = native_build / ("san" if build == "san" else "") / "echo-uring"
    seen = {}
    for flags in ([], ["--iowq-aff", "1"]):
        env = dict(os.environ, **(SAN_ENV if build == "san" else {}))
        proc = subprocess.Popen(
            ["taskset", "-c", "0", str(exe), "--port", "0", "--async", *flags],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            assert proc.stderr is not None
            m = re.search(r"listening on [0-9.]+:(\d+)", proc.stderr.readline())
            assert m
            exchange(int(m.group(1)), [os.urandom(4096) for _ in range(8)], random.Random(3))
            seen[tuple(flags)] = iowq_worker_cpus(proc.pid)
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err[-2000:]
        config = json.loads(out.strip().splitlines()[-1])["config"]
        assert config["iowq_aff"] == (flags[1] if flags else "") and config["iowq_workers_at_exit"] > 0
    assert seen[()] == {"0"}  # inherited from the pinned server
    assert seen[("--iowq-aff", "1")] == {"1"}  # moved


@pytest.mark.parametrize("bad", ["", "1-", "3-2", "0,,1", "0,", "x", "99999"])
def test_a_bad_iowq_cpu_list_is_one_line(native_build: Path, bad: str) -> None:
    res = subprocess.run(
        [str(native_build / "echo-uring"), "--port", "0", "--iowq-aff", bad], capture_output=True, text=True, timeout=30
    )
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "--iowq-aff" in res.stderr


def test_cpu_placeholders_take_cpus_besides_the_servers_and_the_clients() -> None:
    cell = echo_cell.Cell("u4", ("--sqpoll", "--sq-aff", "{spare_cpu}", "--iowq-aff", "{spare_cpus}"), 50, 128)
    resolved, helpers = echo_cell.resolve_flags(cell, {"server": "0", "client": "1,3"}, lambda: "0-5\n")
    assert resolved.flags == ("--sqpoll", "--sq-aff", "2", "--iowq-aff", "2,4-5") and helpers == "2,4-5"
    shared, helpers = echo_cell.resolve_flags(cell, {"server": None, "client": None}, lambda: "0-1")
    assert shared.flags[2] == "0" and shared.flags[4] == "0-1" and helpers == "0-1"
    plain = echo_cell.Cell("default", (), 50, 128)
    assert echo_cell.resolve_flags(plain, {"server": 0, "client": 1}, lambda: pytest.fail("read")) == (plain, "")
    with pytest.raises(
        echo_cell.CellError,
        match=r"^unavailable: u4 runs a helper on a CPU besides the server's "
        r"\(0\) and the load generator's \(1\); this node's CPUs are 0-1$",
    ):
        echo_cell.resolve_flags(cell, {"server": 0, "client": 1}, lambda: "0-1")
