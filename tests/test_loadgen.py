"""The load generator's own paths: its threads' start line, counts,
histogram and open-loop rate, under the sanitizers, and the auto client's
choice (what it checks of a server: test_loadgen_checks.py)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from echo_support import CLIENT_MODELS, SAN_ENV, TSAN_ENV, Server, raise_nofile, schedule_bounds, tsan_program


def threads_asleep(pid: int) -> bool:
    """Whether every thread of ``pid`` is asleep (state S) right now."""
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):
            return False
    return bool(states) and all(state == "S" for state in states)


def context_switches_and_cpu_ticks(pid: int) -> tuple[int, int]:
    """All of a process's threads' context switches, and its CPU time in clock ticks."""
    switches = 0
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
        switches += int(fields["voluntary_ctxt_switches"]) + int(fields["nonvoluntary_ctxt_switches"])
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return switches, int(stat[11]) + int(stat[12])  # utime, stime


@pytest.mark.parametrize("model", CLIENT_MODELS)
def test_threads_at_the_start_line_sleep_until_every_connection_is_up(native_build: Path, model: str) -> None:
    """A listener that never accepts, its queue full, holds two of four
    connect()s and so the start line; the threads that got through, and
    loadgen's main thread, must sleep there. A thousand threads polling
    every millisecond once cost 20 s of CPU to start a 1.5 s run; polling
    adds about 500 switches per thread per half second, spinning about 50
    ticks. The counts are the process's own and its threads are asleep
    when they are read, so a busy machine cannot raise them: it only delays
    the start line, which the test waits for rather than a fixed time."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)  # two connections fill the queue; later SYNs are dropped, their connect() retries
    argv = [
        str(native_build / "loadgen"),
        "--port",
        str(listener.getsockname()[1]),
        "--bytes",
        "64",
        "--duration",
        "1",
        "--warmup",
        "0",
        "--model",
        model,
    ]
    # Four threads of one connection each: the queue takes two, two wait in connect().
    argv += ["--connections", "4"] + ([] if model == "thread-per-connection" else ["--threads", "4"])
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while len(list(Path(f"/proc/{proc.pid}/task").iterdir())) < 5:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "loadgen did not start its 4 threads within 30 s"
            time.sleep(0.05)
        while not threads_asleep(proc.pid):  # every thread at the start line, or in connect()
            assert proc.poll() is None and time.monotonic() < deadline, "loadgen's threads never all slept"
            time.sleep(0.05)
        before = context_switches_and_cpu_ticks(proc.pid)
        time.sleep(0.5)
        after = context_switches_and_cpu_ticks(proc.pid)
        assert proc.poll() is None
        assert after[0] - before[0] < 20 and after[1] - before[1] < 5, (before, after)
    finally:
        proc.kill()
        proc.wait()
        listener.close()


def test_the_start_line_check_catches_threads_that_poll() -> None:
    # The negative control: four threads that poll every millisecond, as
    # loadgen's once did, cross the bound above even on a quiet machine.
    code = (
        "import threading, time\n"
        "def poll():\n"
        "    while True:\n"
        "        time.sleep(0.001)\n"
        "for _ in range(4):\n"
        "    threading.Thread(target=poll, daemon=True).start()\n"
        "time.sleep(30)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 30
        while len(list(Path(f"/proc/{proc.pid}/task").iterdir())) < 5 or not threads_asleep(proc.pid):
            assert time.monotonic() < deadline, "the polling threads did not start"
            time.sleep(0.05)
        before = context_switches_and_cpu_ticks(proc.pid)
        time.sleep(0.5)
        after = context_switches_and_cpu_ticks(proc.pid)
        assert after[0] - before[0] >= 20, (before, after)
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("flags", [["--pipeline", "2"], ["--rate", "100"], ["--threads", "2"]])
def test_thread_per_connection_refuses_event_loop_flags(native_build: Path, flags: list[str]) -> None:
    res = subprocess.run(
        [str(native_build / "loadgen"), "--port", "1", "--model", "thread-per-connection", *flags],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.returncode == 2
    assert res.stderr.strip() == (
        "loadgen: --model thread-per-connection is closed-loop ping-pong with one "
        "thread per connection; drop --pipeline, --rate and --threads"
    )


@pytest.fixture(scope="module")
def tsan_loadgen() -> Path:
    return tsan_program("loadgen")


def test_loadgen_counts_and_histogram_agree(native_build: Path, tmp_path: Path) -> None:
    srv = Server(native_build / "echo-epoll", [], False)
    hist = tmp_path / "h.csv"
    res = subprocess.run(
        [
            str(native_build / "loadgen"),
            "--port",
            str(srv.port),
            "--connections",
            "8",
            "--bytes",
            "512",
            "--duration",
            "0.5",
            "--warmup",
            "0.2",
            "--pipeline",
            "2",
            "--histogram",
            str(hist),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    counters = srv.stop()
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    rows = [line.split(",") for line in hist.read_text().splitlines()[1:]]
    assert sum(int(r[2]) for r in rows) == report["requests"] > 0
    assert report["p50_us"] <= report["p99_us"] <= report["p999_us"] <= report["max_us"]
    # The server echoed at least what was measured (warm-up comes on top).
    assert counters["bytes"] >= report["bytes"]
    assert report["client_user_cpu_ns"] + report["client_sys_cpu_ns"] > 0


def test_loadgen_says_when_its_histogram_cannot_be_written(native_build: Path) -> None:
    srv = Server(native_build / "echo-epoll", [], False)
    res = subprocess.run(
        [
            str(native_build / "loadgen"),
            "--port",
            str(srv.port),
            "--connections",
            "2",
            "--duration",
            "0.2",
            "--warmup",
            "0",
            "--histogram",
            "/dev/full",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    srv.stop()
    assert res.returncode == 2
    assert res.stderr.strip() == "loadgen: writing /dev/full: No space left on device"


@pytest.mark.parametrize("model", ["event-loop", "event-loop-uring"])
def test_loadgen_open_loop_rate(native_build: Path, model: str) -> None:
    srv = Server(native_build / "echo-epoll", [], False)
    res = subprocess.run(
        [
            str(native_build / "loadgen"),
            "--port",
            str(srv.port),
            "--connections",
            "10",
            "--bytes",
            "64",
            "--duration",
            "1",
            "--warmup",
            "0.2",
            "--rate",
            "2000",
            "--model",
            model,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    srv.stop()
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    low, high = schedule_bounds(report)
    assert report["rate"] == 2000 and low <= report["requests"] <= high, (low, report["requests"], high)


# Client runs under the sanitizers. The thread-per-connection model: many
# threads, one shared histogram. The io_uring client's paths: ping-pong;
# pipelined requests packed several to a send; requests larger than its
# 16 KiB send buffer (sent in pieces) and than one provided buffer (echoes
# over several completions); several loop threads; more connections than
# one SQ holds (the full-SQ submit).
SANITIZED_CLIENT_RUNS = {
    "thread-per-connection": ["--model", "thread-per-connection", "--connections", "40", "--bytes", "300"],
    "uring-ping-pong": ["--model", "event-loop-uring", "--connections", "20", "--bytes", "128"],
    "uring-pipelined": ["--model", "event-loop-uring", "--connections", "6", "--bytes", "100", "--pipeline", "8"],
    "uring-large": ["--model", "event-loop-uring", "--connections", "4", "--bytes", "70000", "--pipeline", "2"],
    "uring-threads": ["--model", "event-loop-uring", "--connections", "30", "--bytes", "1000", "--threads", "3"],
    "uring-many": ["--model", "event-loop-uring", "--connections", "3000", "--bytes", "32"],
}


@pytest.mark.parametrize("build", ["san", "tsan"])
@pytest.mark.parametrize("run", SANITIZED_CLIENT_RUNS)
def test_client_counts_every_request_under_sanitizers(
    native_build: Path, tsan_loadgen: Path, tmp_path: Path, build: str, run: str
) -> None:
    """Against the epoll server: every byte verified, nothing lost,
    ASan/UBSan (leaks at exit included) and ThreadSanitizer find nothing,
    and the histogram holds every measured request."""
    argv = SANITIZED_CLIENT_RUNS[run]
    model = argv[argv.index("--model") + 1]
    exe = native_build / "san" / "loadgen" if build == "san" else tsan_loadgen
    env = dict(os.environ, **(SAN_ENV if build == "san" else TSAN_ENV))
    raise_nofile(3000 + 200)
    srv = Server(native_build / "echo-epoll", [], False)
    hist = tmp_path / "h.csv"
    res = subprocess.run(
        [str(exe), "--port", str(srv.port), *argv, "--duration", "0.5", "--warmup", "0.2", "--histogram", str(hist)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    counters = srv.stop()
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads(res.stdout)
    assert report["model"] == model
    if model == "thread-per-connection":
        assert report["threads"] == report["connections"] == 40
    assert report["mismatches"] == report["timeouts"] == report["short_closes"] == report["connect_errors"] == 0
    rows = [line.split(",") for line in hist.read_text().splitlines()[1:]]
    assert sum(int(r[2]) for r in rows) == report["requests"] > 0
    assert counters["accepted"] == report["connections"] and counters["bytes"] >= report["bytes"]


def loadgen_check(exe: Path, model: str, uid: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(exe), "--model", model, "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        user=uid,
        group=uid,
        extra_groups=[] if uid is not None else None,
        check=False,
    )


IO_URING_DISABLED = Path("/proc/sys/kernel/io_uring_disabled")


@pytest.mark.skipif(not IO_URING_DISABLED.exists(), reason="needs kernel.io_uring_disabled (Linux 6.6)")
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to set kernel.io_uring_disabled")
def test_the_auto_client_takes_io_uring_where_the_kernel_allows_it_else_epoll(native_build: Path) -> None:
    """--model auto is the io_uring loop on a kernel that allows its ring, and
    the epoll loop, with the kernel's reason, on one that refuses it: here a
    process the kernel denies io_uring (kernel.io_uring_disabled = 1 denies
    it to processes without CAP_SYS_ADMIN outside io_uring_group)."""
    here = loadgen_check(native_build / "loadgen", "auto")
    assert here.returncode == 0, here.stderr
    assert json.loads(here.stdout) == {"model": "event-loop-uring", "uring_unavailable": ""}
    # A copy that uid 65534 can run: the checkout may sit under a directory only root enters.
    outside = Path(tempfile.mkdtemp(prefix="iolab-loadgen-"))
    try:
        outside.chmod(0o755)
        exe = Path(shutil.copy2(native_build / "loadgen", outside / "loadgen"))
        before = IO_URING_DISABLED.read_text().strip()
        IO_URING_DISABLED.write_text("1")
        try:
            denied_auto = loadgen_check(exe, "auto", uid=65534)
            denied_uring = loadgen_check(exe, "event-loop-uring", uid=65534)
        finally:
            IO_URING_DISABLED.write_text(before)
    finally:
        shutil.rmtree(outside)
    assert denied_auto.returncode == 0, denied_auto.stderr
    picked = json.loads(denied_auto.stdout)
    assert picked["model"] == "event-loop"
    assert "refused a SINGLE_ISSUER|DEFER_TASKRUN ring: Operation not permitted" in picked["uring_unavailable"]
    assert "kernel.io_uring_disabled" in picked["uring_unavailable"]
    # Asked for by name, the io_uring loop is refused in one line rather than replaced.
    assert denied_uring.returncode == 2 and denied_uring.stdout == ""
    assert (
        denied_uring.stderr.count("\n") == 1 and "--model event-loop-uring: the kernel refused" in denied_uring.stderr
    )


def test_uring_client_sees_a_server_that_closes(native_build: Path) -> None:
    """The server goes away mid-run: every connection ends as an early
    close (a receive of 0 bytes or a failed send), nothing hangs. The
    server goes once it holds all five connections (its descriptors say),
    not after a fixed time a busy machine may not have connected them in."""
    srv = Server(native_build / "echo-epoll", [], False)
    before = len(list(Path(f"/proc/{srv.proc.pid}/fd").iterdir()))
    proc = subprocess.Popen(
        [
            str(native_build / "loadgen"),
            "--port",
            str(srv.port),
            "--connections",
            "5",
            "--bytes",
            "64",
            "--duration",
            "2",
            "--warmup",
            "0",
            "--model",
            "event-loop-uring",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while len(list(Path(f"/proc/{srv.proc.pid}/fd").iterdir())) < before + 5:
        assert proc.poll() is None and time.monotonic() < deadline, "the server never held the five connections"
        time.sleep(0.02)
    srv.proc.kill()
    srv.proc.wait(timeout=30)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    report = json.loads(out)
    assert report["short_closes"] == 5 and report["mismatches"] == 0


def test_more_connections_than_source_ports_is_refused_in_one_line(native_build: Path) -> None:
    # One address to one server port: each connection needs a source port of
    # its own, so the local port range bounds the connections (28,232 on a
    # default Linux); past it the load generator says so before connecting.
    lo, hi = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    res = subprocess.run(
        [str(native_build / "loadgen"), "--port", "1", "--connections", str(hi - lo + 2), "--duration", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert f"the local port range {lo}-{hi} gives {hi - lo + 1}" in res.stderr
