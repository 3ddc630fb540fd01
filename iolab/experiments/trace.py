"""The kernel-side view: bpftrace tracepoints around the probes' syscalls.

Times sys_enter -> sys_exit of sendto, recvfrom and io_uring_enter, and of
getppid for calibration (getppid does almost nothing, so its traced duration
is the tracing overhead itself), and counts io_uring_submit_req events per
io_uring_enter. Inside the echo servers it times their request syscalls
(echo-epoll's recvfrom and sendto, echo-uring's io_uring_enter) on the CPU,
for C1's premise, with what tracing costs per call, in the window and in
all. Only tracepoints are used: kprobes are often unavailable.

Where bpftrace is missing or we are not root, the workflow leaves the
experiment out when it plans (iolab.privilege), with the reason, and
nothing runs; a repetition asked for anyway, or one whose kernel lacks the
tracepoints or tracefs, fails with one line and writes no raw file.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from .. import paths, privilege, readers
from ..formats import raw_format_line
from ..registry import REGISTRY
from ..runners import LocalRunner, RunError
from ..settings import TraceSettings
from . import Measured, Repetition, echo, settings_of

TRACEFS = Path("/sys/kernel/tracing")
SYSCALLS = ("getppid", "sendto", "recvfrom", "io_uring_enter")

# BEGIN runs once every probe is attached ("Attaching N probes" is printed
# before attaching): the workload starts only after this line.
ATTACHED = "iolab: probes attached"

# Only the processes this measurement started: its own children, the
# process that runs bpftrace passing its PID as $1. A name alone (comm)
# also counted the servers and probes of any other run on the machine.
MINE = "curtask->real_parent->tgid == $1"

# The io_uring tracepoints counted under the echo workloads.
ECHO_TRACEPOINTS = ("task_work_run", "local_work_run", "poll_arm", "queue_async_work")

SCRIPT = "\n".join(
    [f'BEGIN {{ printf("{ATTACHED}\\n"); }}']
    + [
        f"""tracepoint:syscalls:sys_enter_{sc} /comm == "cost-probe" && {MINE}/ {{ @t_{sc}[tid] = nsecs; }}
tracepoint:syscalls:sys_exit_{sc} /@t_{sc}[tid]/ {{
  @ns_{sc} = stats(nsecs - @t_{sc}[tid]); delete(@t_{sc}[tid]);
}}"""
        for sc in SYSCALLS
    ]
    + [f"""tracepoint:io_uring:io_uring_submit_req /comm == "cost-probe" && {MINE}/ {{ @submit_req = count(); }}"""]
    # The echo workloads: how often the server ran io_uring task work, in its
    # own task (task_work_run: after being kicked, the notification the
    # rescheduling IPIs carry) or deferred to its next wait (local_work_run:
    # DEFER_TASKRUN); how often a receive or send did not complete in its
    # submission, so io_uring armed a poll for it (poll_arm), whose wake-up
    # completes it later as task work; and how often io_uring handed a
    # request to an io-wq worker (queue_async_work).
    + [
        f"""tracepoint:io_uring:io_uring_{tp} /comm == "echo-uring" && {MINE}/ {{ @{tp} = count(); }}"""
        for tp in ECHO_TRACEPOINTS
    ]
    + ["END { " + " ".join(f"clear(@t_{sc});" for sc in SYSCALLS) + " }"]
)

# C1's premise, as the source measured it ("perf shows the read/write
# requests themselves take the vast majority of the cost"): the time a
# server spends inside its request syscalls, on the CPU only, under a
# script of its own that attaches nothing else (no other program runs inside
# the windows, so the tracing's own cost inside one is what the same window
# around getppid shows). echo-epoll's recv(2) and send(2) (recvfrom,
# sendto); echo-uring's io_uring_enter, where its receives and sends run
# and where it may also sleep waiting for completions: the time switched out
# inside a window is subtracted, from the scheduler's switch tracepoint. One
# window per thread at a time, so one start map serves every syscall.
# (process name, syscall, the map its windows go to)
SERVER_WINDOWS = (
    ("cost-probe", "getppid", "cal"),
    ("echo-epoll", "recvfrom", "rw"),
    ("echo-epoll", "sendto", "rw"),
    ("echo-uring", "io_uring_enter", "enter"),
)
PREMISE_SCRIPT = "\n".join(
    [f'BEGIN {{ printf("{ATTACHED}\\n"); }}']
    + [
        f"""tracepoint:syscalls:sys_enter_{sc} /comm == "{comm}" && {MINE}/ {{ @w[tid] = nsecs; @off[tid] = 0; }}
tracepoint:syscalls:sys_exit_{sc} /comm == "{comm}" && @w[tid]/ {{
  @ns_server_{kind} = stats(nsecs - @w[tid] - @off[tid]); delete(@w[tid]); delete(@off[tid]);
}}"""
        for comm, sc, kind in SERVER_WINDOWS
    ]
    + [
        """tracepoint:sched:sched_switch /@w[args->prev_pid]/ { @out[args->prev_pid] = nsecs; }
tracepoint:sched:sched_switch /@out[args->next_pid]/ {
  @off[args->next_pid] += nsecs - @out[args->next_pid]; delete(@out[args->next_pid]);
}"""
    ]
    + ["END { clear(@w); clear(@off); clear(@out); }"]
)

# The workloads traced, each a cost-probe invocation (16 B, echo conditions).
WORKLOADS: dict[str, list[str]] = {
    "getppid": ["syscall", "--variants", "getppid"],
    "sendrecv": ["sendrecv", "--transports", "tcp", "--patterns", "single", "--ack-modes", "pingpong", "--bytes", "16"],
    "uring_n1": ["uring-batch", "--n", "1", "--bytes", "16"],
    "uring_n16": ["uring-batch", "--n", "16", "--bytes", "16"],
}

# The echo workloads: a server (echo-uring with these ring flags, or
# echo-epoll), 50 connections of 128 B for the workload's seconds, server
# and load generator pinned apart.
ECHO_WORKLOADS: dict[str, tuple[str, list[str]]] = {
    "echo_default": ("uring", []),
    "echo_coop_taskrun": ("uring", ["--coop-taskrun", "--taskrun-flag"]),
    "echo_defer_taskrun": ("uring", ["--single-issuer", "--defer-taskrun"]),
    # The OpenAnolis server (C3): receives and sends complete in their submission.
    "echo_poll_first": ("uring", ["--poll-first"]),
}
# C1's premise, under PREMISE_SCRIPT: the calibration (getppid as the cost
# probe runs it: the tracing's cost inside a window, and per call in all, as
# the probe times it), then each server, traced, with its CPU time.
PREMISE_CALIBRATION = "premise_getppid"
PREMISE_SERVERS: dict[str, tuple[str, list[str]]] = {
    "premise_epoll": ("epoll", []),
    "premise_poll_first": ("uring", ["--poll-first"]),
}
PREMISE_WORKLOADS = (PREMISE_CALIBRATION, *PREMISE_SERVERS)
ECHO_CONNECTIONS, ECHO_BYTES = 50, 128

_STATS = re.compile(
    r"^@(ns_\w+|submit_req|task_work_run|local_work_run|poll_arm|queue_async_work):\s*"
    r"(?:count (\d+), average (\d+), total (\d+)|(\d+))\s*$"
)


@dataclass(frozen=True)
class Availability:
    available: bool
    reason: str


# Seconds bpftrace may take to attach every probe: 0.1-0.3 s on a quiet
# machine. Waits of more than 60 s (five on 2026-11-28, on busy machines)
# and of 300 s (2026-12-03, quiet) were most likely wait_attached's
# buffered-read bug, not bpftrace; the bound is there to catch a hung
# bpftrace, not a slow one.
ATTACH_TIMEOUT = 300


def availability() -> Availability:
    """Whether tracing can run here, mounting tracefs if that is all it takes."""
    left_out = privilege.experiment_left_out("trace")
    if left_out:
        return Availability(False, left_out)
    if not (TRACEFS / "events").is_dir():
        res = subprocess.run(
            ["mount", "-t", "tracefs", "nodev", str(TRACEFS)], capture_output=True, text=True, check=False
        )
        if res.returncode != 0 or not (TRACEFS / "events").is_dir():
            return Availability(
                False, f"tracefs is not mounted and mounting it failed: {res.stderr.strip() or res.returncode}"
            )
    missing = [sc for sc in SYSCALLS if not (TRACEFS / "events" / "syscalls" / f"sys_enter_{sc}").is_dir()]
    if missing:
        return Availability(False, f"syscall tracepoints missing: {', '.join(missing)}")
    return Availability(True, "bpftrace with syscall and io_uring tracepoints")


def parse_output(text: str) -> dict[str, dict[str, int]]:
    """bpftrace's printed maps -> {map: {count, avg_ns, total_ns}}."""
    out: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        m = _STATS.match(line.strip())
        if not m:
            continue
        name = m.group(1)
        if m.group(5) is not None:
            out[name] = {"count": int(m.group(5)), "avg_ns": 0, "total_ns": 0}
        else:
            out[name] = {"count": int(m.group(2)), "avg_ns": int(m.group(3)), "total_ns": int(m.group(4))}
    return out


def _run_probe(name: str, seconds: int, cpu: int | None, seed: int, timed: bool = False) -> dict[str, dict[str, int]]:
    """The cost probe's workload, run again and again for ``seconds``;
    ``timed``: also return what one call cost, traced, as the probe timed it
    (the median over its batches of ns per call, warm-up left out): the
    whole tracing cost per syscall, in the window and around it."""
    argv = [str(paths.NATIVE_BUILD / "cost-probe"), *WORKLOADS[name], "--seed", str(seed)]
    if cpu is not None:
        argv += ["--cpu", str(cpu)]
    per_call: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        res = subprocess.run(
            [*argv, "--batches", "50", "--warmup-batches", "5"],
            stdout=subprocess.PIPE if timed else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
        if res.returncode != 0:
            raise RuntimeError(f"traced probe failed: {res.stderr.strip()[-300:]}")
        if timed:
            per_call += _ns_per_call(res.stdout)
    if not timed:
        return {}
    if not per_call:
        raise RuntimeError("the traced calibration probe reported no batch")
    median = sorted(per_call)[len(per_call) // 2]
    return {"traced_ns_per_call": {"count": len(per_call), "avg_ns": round(median), "total_ns": 0}}


def _ns_per_call(text: str) -> list[float]:
    """ns per call of each measured batch of the cost probe's CSV output."""
    rows = [ln.split(",") for ln in text.splitlines() if ln and not ln.startswith("#")]
    if not rows:
        return []
    head = rows[0]
    warm, ns, calls = head.index("warmup"), head.index("ns"), head.index("calls")
    return [float(r[ns]) / float(r[calls]) for r in rows[1:] if r[warm] == "0" and float(r[calls]) > 0]


def _run_echo(name: str, seconds: int, cpus: Mapping[str, int | str | None]) -> dict[str, dict[str, int]]:
    """An echo workload; returns the requests the server echoed and, for C1's
    premise, the server's CPU time."""
    server, flags = {**ECHO_WORKLOADS, **PREMISE_SERVERS}[name]
    cell = echo.Cell(name, tuple(flags), ECHO_CONNECTIONS, ECHO_BYTES, server=server)
    with TemporaryDirectory() as tmp:
        try:
            result = echo.measure_cell(cell, echo.LoadgenRun(seconds, 0), cpus, Path(tmp) / "h.csv", LocalRunner())
        except echo.CellError as e:
            raise RuntimeError(f"traced echo workload {name}: {e}") from e
    out = {"echoed_requests": {"count": int(result["server_bytes"]) // ECHO_BYTES, "avg_ns": 0, "total_ns": 0}}
    if name in PREMISE_SERVERS:
        out["server_cpu"] = {"count": 1, "avg_ns": 0, "total_ns": int(result["server_cpu_ns"])}
    return out


def wait_attached(bt: subprocess.Popen[str], timeout: float) -> None:
    """Return once bpftrace has printed ATTACHED; fail in one line when it
    exits first or prints nothing for ``timeout`` seconds. It reads the
    pipe's descriptor itself: a buffered readline takes in whatever the
    pipe holds, so when "Attaching N probes..." and ATTACHED arrived
    together, the second sat in Python's buffer while select() waited on
    the empty pipe until the deadline (most likely why trace repetitions
    failed after 60 s or 300 s, on busy and quiet machines alike)."""
    assert bt.stdout is not None
    fd = bt.stdout.fileno()
    deadline = time.monotonic() + timeout
    seen = b""
    while ATTACHED.encode() not in seen:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise RuntimeError(f"bpftrace did not attach its probes within {timeout:g} s")
        chunk = os.read(fd, 65536)
        if not chunk:
            bt.wait()
            err = bt.stderr.read() if bt.stderr else ""
            raise RuntimeError(f"bpftrace exited before attaching: {err.strip()[:300]}")
        seen += chunk


def run_workload(
    name: str, seconds: int, cpu: int | None, seed: int, cpus: Mapping[str, int | str | None] | None = None
) -> dict[str, dict[str, int]]:
    """Trace one workload: start bpftrace, wait until attached, run the probe
    (or the echo server and load generator) long enough, stop bpftrace with
    SIGINT so it prints its maps. Only this process's children are counted
    (``MINE``): the workloads are started here, directly."""
    script = PREMISE_SCRIPT if name in PREMISE_WORKLOADS else SCRIPT
    bt = subprocess.Popen(
        ["bpftrace", "-e", script, str(os.getpid())],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        wait_attached(bt, ATTACH_TIMEOUT)
        if name in ECHO_WORKLOADS or name in PREMISE_SERVERS:
            extra = _run_echo(name, seconds, cpus or {})
        else:
            calibration = name == PREMISE_CALIBRATION
            extra = _run_probe("getppid" if calibration else name, seconds, cpu, seed, timed=calibration)
        # A SIGINT that arrives while bpftrace is busy can go unanswered
        # (seen as a 60 s hang once in several suite runs): ask again.
        for _ in range(6):
            bt.send_signal(signal.SIGINT)
            try:
                out, _ = bt.communicate(timeout=10)
                break
            except subprocess.TimeoutExpired:
                continue
        else:
            raise RuntimeError("bpftrace did not stop within 60 s of SIGINT")
    finally:
        if bt.poll() is None:
            bt.kill()
            bt.wait()
    return {**parse_output(out), **extra}


def measure(
    settings: TraceSettings,
    cpu: int | None,
    seed: int,
    out_path: Path,
    cpus: Mapping[str, int | str | None] | None = None,
) -> dict[str, Any]:
    """Write the trace raw CSV (one row per workload and traced map);
    returns what the provenance sidecar should record."""
    seconds = settings.seconds
    avail = availability()
    if not avail.available:
        # A measurement that cannot happen is no measurement: nothing is written.
        raise RunError(f"cannot trace here: {avail.reason}")
    with open(out_path, "w") as f:
        f.write(raw_format_line(REGISTRY["trace"].raw_format))
        f.write("workload,map,count,avg_ns,total_ns\n")
        for name in [*WORKLOADS, *ECHO_WORKLOADS, *PREMISE_WORKLOADS]:
            maps = run_workload(name, seconds, cpu, seed, cpus)
            for key, st in sorted(maps.items()):
                f.write(f"{name},{key},{st['count']},{st['avg_ns']},{st['total_ns']}\n")
    return {
        "trace": {
            "available": True,
            "reason": avail.reason,
            "bpftrace": _bpftrace_version(),
            "script": SCRIPT,
            "premise_script": PREMISE_SCRIPT,
        }
    }


def _bpftrace_version() -> str | None:
    res = subprocess.run(["bpftrace", "--version"], capture_output=True, text=True, check=False)
    return res.stdout.strip() or None


def run_repetition(rep: Repetition) -> Measured:
    """The bpftrace run on this machine."""
    if rep.remote:
        raise RunError(f"trace on {rep.node.name}: bpftrace runs on local nodes only")
    probe = rep.node.cpus.get("probe")
    cpu = None if probe is None else int(probe)
    try:
        extra = measure(settings_of(rep, TraceSettings), cpu, rep.seed, rep.raw, rep.server_client_cpus())
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        raise RunError(f"trace on {rep.node.name}: {e}") from e
    frame = readers.read_trace_csv(rep.raw)
    if frame.empty:
        raise RunError(f"trace on {rep.node.name}: bpftrace reported no counts")
    summary = f"{len(frame)} rows"
    return Measured(extra, ["bpftrace", "-e", "<script in provenance>"], summary, {"probe_cpu": cpu})
