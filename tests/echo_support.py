"""What the echo tests share: the servers under test (every preset of the
config and every flag no preset uses, in the optimised and sanitizer
builds), starting and stopping one, and talking to it."""

from __future__ import annotations

import json
import os
import random
import re
import resource
import selectors
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import yaml
from conftest import REPO

from iolab.presets import SERVER_PROGRAMS, SPARE_CPU, SPARE_CPUS, preset_server
from iolab.settings import EchoSetup

BUILD = REPO / "native" / "build"
# The load generator's client models (the schema's, less "auto", which picks one).
CLIENT_MODELS = list(EchoSetup.client_models())
PRESETS = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["experiments"]["echo"]["presets"]
# Every sweep preset, plus every flag no preset uses, so each is proven
# correct (--drain has its own test: it stalls by design).
EXTRA_SERVERS = {
    "send_zc": ["--send-zc"],
    "hardlink": ["--link-timeout", "1000", "--hardlink"],
    "r_disabled": ["--r-disabled"],
    "register_ring_fd": ["--register-ring-fd"],
    "iowq_aff": ["--async", "--iowq-aff", "0"],
    # A tiny SQ: every burst goes through make_room; a clamped, larger CQ.
    "small_sq": ["--entries", "8", "--clamp", "--cq-size", "4096"],
    # So few buffers that receives find none (ENOBUFS) and wait to be re-armed.
    "few_buffers": ["--multishot-recv", "--buf-ring", "--buf-size", "512", "--buf-count", "16"],
    # Two rings, each accepting on its own SO_REUSEPORT listener.
    "reuseport_rings": ["--rings", "2"],
    "sqpoll_idle": ["--sqpoll", "--sq-thread-idle", "10"],
    "multishot_accept": ["--multishot-accept"],
    # Batched waits (min_wait_usec), on the cheapest ring and, through the
    # other enter paths, with a kernel submission thread and a registered fd.
    "batched_wait": [
        "--single-issuer",
        "--defer-taskrun",
        "--multishot-recv",
        "--buf-ring",
        "--wait-nr",
        "16",
        "--min-wait",
        "200",
    ],
    # Receive bundles (Linux 6.10), single-shot and multishot: a completion
    # takes as many buffers as the data fills, in ring order, not id order.
    "recv_bundle_single_shot": ["--buf-ring", "--recv-bundle", "--buf-size", "1024"],
    "recv_bundle_multishot": ["--buf-ring", "--multishot-recv", "--recv-bundle", "--buf-size", "1024"],
    # Incremental buffers (Linux 6.12): buffers shared by connections, each
    # used a message at a time, given back once retired and echoed; few of
    # them, so that receives also wait for buffers.
    "buf_inc_few": ["--buf-ring", "--multishot-recv", "--buf-inc", "--buf-size", "65536", "--buf-count", "16"],
    # Bundles of incremental buffers: a receive starts where the last left
    # its first buffer and runs on through whole buffers into a last one
    # left for more; few, small buffers so that every shape happens (and,
    # with gathered sends, go back in one SENDMSG each).
    "bundle_buf_inc_small": [
        *("--buf-ring", "--multishot-recv", "--recv-bundle", "--buf-inc"),
        *("--buf-size", "4096", "--buf-count", "16"),
    ],
    "bundle_buf_inc_gather": [
        *("--buf-ring", "--recv-bundle", "--buf-inc", "--gather-send"),
        *("--buf-size", "1024", "--buf-count", "32"),
    ],
    # Send bundles: each connection's chunks go into a send ring of its own
    # and one SEND sends them until it is empty, a short pass leaving the
    # rest of a chunk at the ring's head; from the connection's own buffer,
    # from receive bundles (many small chunks a pass) and from incremental
    # buffers (chunks that start inside a buffer).
    "send_bundle_own": ["--send-bundle"],
    "send_bundle_recv_bundle": [
        "--buf-ring",
        "--multishot-recv",
        "--recv-bundle",
        "--send-bundle",
        "--buf-size",
        "1024",
    ],
    "send_bundle_buf_inc": [
        *("--buf-ring", "--multishot-recv", "--buf-inc", "--send-bundle"),
        *("--buf-size", "4096", "--buf-count", "16"),
    ],
    # Gathered sends: one SENDMSG for every queued chunk; with bundles a
    # receive's buffers go back in one send, with short sends resumed
    # mid-vector; and on the readiness path, where chunks queue one by one.
    "gather_send_bundle": [
        "--buf-ring",
        "--multishot-recv",
        "--recv-bundle",
        "--gather-send",
        "--buf-size",
        "1024",
    ],
    "gather_send_poll_first": ["--poll-first", "--gather-send"],
    "batched_wait_sqpoll_regfd": ["--sqpoll", "--register-ring-fd", "--wait-nr", "16", "--min-wait", "200"],
    # Registered wait regions (Linux 6.13): each ring's waits read their
    # timeout and minimum wait from a region registered at setup; ring 0's
    # timeout is how a stop signal is noticed, so a region the kernel
    # ignored would hang the stop these tests end with.
    "reg_wait_batched": [
        *("--single-issuer", "--defer-taskrun", "--multishot-recv", "--buf-ring", "--reg-wait"),
        *("--wait-nr", "16", "--min-wait", "200"),
    ],
    "reg_wait_rings": ["--rings", "2", "--reg-wait"],
    # Zero-copy sends from the registered provided-buffer area.
    "send_zc_fixed": ["--buf-ring", "--multishot-recv", "--send-zc", "--zc-fixed"],
    # The Go servers' flags no preset uses: one ring with a tiny SQ (every
    # burst waits for the publisher to drain it), three rings each owning
    # two consecutive fds, one worker pool, a small buffer (partial echoes),
    # a deadline that a busy connection never reaches, an SQ thread that sleeps.
    "go_uring_small_sq": {"server": "go-uring", "flags": ["--rings", "1", "--entries", "8"]},
    "go_uring_granule": {
        "server": "go-uring",
        "flags": ["--rings", "3", "--granule", "2", "--worker-pools", "1", "--gomaxprocs", "2", "--buf-size", "512"],
    },
    "go_uring_link_timeout": {"server": "go-uring", "flags": ["--link-timeout", "20000"]},
    "go_uring_sqpoll_idle": {"server": "go-uring", "flags": ["--sqpoll", "--sq-thread-idle", "10"]},
    "go_net_small": {"server": "go-net", "flags": ["--gomaxprocs", "1", "--buf-size", "100"]},
}
# These servers run unpinned, so a preset's CPU placeholder ({spare_cpu},
# {spare_cpus}) can be any CPU: CPU 0, which every machine has.
SERVERS = [
    (name, SERVER_PROGRAMS[server], ["0" if f in (SPARE_CPU, SPARE_CPUS) else f for f in flags])
    for name, spec in {**PRESETS, **EXTRA_SERVERS}.items()
    for server, flags in [preset_server(name, spec)]
]
# An extra server named as a preset would replace that preset's tests.
assert not PRESETS.keys() & EXTRA_SERVERS.keys(), sorted(PRESETS.keys() & EXTRA_SERVERS.keys())
BUILDS = ["opt", "san"]
# The sanitizer build: ASan/UBSan for the C servers, Go's race detector for
# the Go ones (each ignores the other's variables). By default the race
# detector sleeps a second at exit (atexit_sleep_ms), a last chance for
# goroutines still running to race; these tests race the servers while they
# serve, not while they exit, and the sleep cost a second per stopped server.
SAN_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:exitcode=23:abort_on_error=0",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
    "GORACE": "halt_on_error=1 exitcode=66 atexit_sleep_ms=0",
}
# Configurations whose code paths differ in structure (readiness vs
# completion, provided buffers with multishot, a kernel submission thread,
# several rings, registered files, zero-copy sends, a wait through a ring):
# the stress tests run on these by default. The other presets differ in ring
# flags the stress tests exercise no differently; they get the correctness
# tests by default and the stress tests in the release tier (--full).
STRUCTURAL = {
    "epoll",
    "epoll_uring_wait",
    "default",
    "multishot",
    "sqpoll",
    "rings_granule",
    "fixed_files",
    "send_zc",
    "few_buffers",
    "recv_bundle_multishot",
    "buf_inc_few",
    "bundle_buf_inc_small",
    "send_bundle_recv_bundle",
    "send_bundle_buf_inc",
    "gather_send_bundle",
    "go_net",
    "go_uring",
    "go_uring_sqpoll",
    "go_uring_small_sq",
    "poll_first",
}


TSAN_ENV = {"TSAN_OPTIONS": "halt_on_error=1:exitcode=66:second_deadlock_stack=1"}


class Server:
    def __init__(
        self, exe: Path, flags: list[str], san: bool, env_extra: dict | None = None, nofile: int | None = None
    ) -> None:
        """``nofile``: the server may open only that many descriptors (soft
        and hard limit), so that it cannot raise its own."""
        env = dict(os.environ, **(SAN_ENV if san else {}), **(env_extra or {}))
        self.preset = ""  # set by the fixtures that start a named configuration

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc = subprocess.Popen(
            [str(exe), "--port", "0", *flags],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            preexec_fn=limit if nofile is not None else None,
        )
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        m = re.search(r"listening on [0-9.]+:(\d+)", line)
        assert m, f"server did not start: {line}{self.proc.stderr.read()}"
        self.port = int(m.group(1))

    def stop(self) -> dict:
        assert self.proc.poll() is None, "the server died during the test"
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, f"exit {self.proc.returncode}: {err[-3000:]}"
        return json.loads(out.strip().splitlines()[-1])


def raise_nofile(n: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(n, hard), hard))


def connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def exchange(port: int, payloads: list[bytes], rng: random.Random, deadline_s: float = 60) -> None:
    """Send each payload on its own connection and read the echo back with
    small random reads, interleaved, without ever blocking; assert every byte."""
    sel = selectors.DefaultSelector()
    conns = []
    for data in payloads:
        s = connect(port)
        s.setblocking(False)
        st = {"sock": s, "data": data, "sent": 0, "got": bytearray()}
        conns.append(st)
        sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE, st)
    pending = len(conns)
    deadline = time.monotonic() + deadline_s
    while pending:
        assert time.monotonic() < deadline, "echo did not complete in time"
        for key, events in sel.select(timeout=1):
            st = key.data
            s = st["sock"]
            if events & selectors.EVENT_WRITE and st["sent"] < len(st["data"]):
                try:
                    st["sent"] += s.send(st["data"][st["sent"] : st["sent"] + rng.randint(1, 70000)])
                except BlockingIOError:
                    pass
                if st["sent"] == len(st["data"]):
                    sel.modify(s, selectors.EVENT_READ, st)
            if events & selectors.EVENT_READ:
                try:
                    chunk = s.recv(rng.choice([1, 7, 100, 1500, 65536]))  # partial reads
                except BlockingIOError:
                    continue
                assert chunk, "server closed the connection early"
                st["got"] += chunk
                assert len(st["got"]) <= len(st["data"]), "more bytes came back than were sent"
                if len(st["got"]) == len(st["data"]):
                    assert bytes(st["got"]) == st["data"], "echo differs from what was sent"
                    sel.unregister(s)
                    s.close()
                    pending -= 1
    sel.close()


def echoed_within(s: socket.socket, data: bytes, seconds: float) -> bool:
    """Whether ``data`` comes back on ``s`` within ``seconds``; a stalled
    echo is an answer here, not an error."""
    got = b""
    deadline = time.monotonic() + seconds
    with selectors.DefaultSelector() as sel:
        sel.register(s, selectors.EVENT_READ)
        while len(got) < len(data):
            if not sel.select(timeout=max(deadline - time.monotonic(), 0)):
                return False
            chunk = s.recv(len(data) - len(got))
            if not chunk:
                return False
            got += chunk
    return got == data


def tsan_program(name: str) -> Path:
    """The ThreadSanitizer build of one native program."""
    res = subprocess.run(
        ["make", "-C", str(REPO / "native"), "TSAN=1", f"build/tsan/{name}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return REPO / "native" / "build" / "tsan" / name


SWEEP = {
    "duration": 0.3,
    "warmup": 0.1,
    "connections": [4],
    "bytes": [64],
    "pipeline": 1,
    "loadgen_threads": 1,
    "port": 0,
}


def start_server(param: tuple[tuple[str, str, list[str]], str], native_build: Path) -> Iterator[Server]:
    (name, program, flags), build = param
    exe = native_build / ("san" if build == "san" else "") / program
    srv = Server(exe, flags, build == "san")
    srv.preset = name
    try:
        yield srv
    finally:
        if srv.proc.poll() is None:
            counters = srv.stop()
            assert counters["closed"] <= counters["accepted"]


def schedule_bounds(report: dict) -> tuple[float, float]:
    """The requests an open-loop run may count: those due inside its
    measured window and answered inside it. Never more than the schedule
    holds (rate x duration, plus one per connection for where its first due
    time falls), however busy the machine; fewer only by those due near the
    end and answered after it, which took about as long as the slowest it
    did count (its max_us, twice over for margin): so a busy machine widens
    the lower bound by its own delays, and a client that keeps no schedule,
    or sends at another rate, falls outside."""
    due = report["rate"] * report["duration_s"]
    late = report["rate"] * 2 * report["max_us"] / 1e6
    return due - late - report["connections"], due + report["connections"]
