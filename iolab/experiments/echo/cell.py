"""One echo cell: a server configuration under the load generator at one
number of connections and one message size.

This module places each side on its CPUs (and picks the spare CPUs a
preset's flags may ask for), starts the server, drives it with loadgen, stops
it, and merges both reports into the cell's raw row. A cell that cannot be
measured raises CellError with the reason its row records. The sweep of
cells is iolab.experiments.echo's; iolab.experiments.latency drives the
same cells open loop.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ...formats import URING_COUNTERS, uring_counter_text
from ...inventory import cpu_list
from ...presets import SERVER_PROGRAMS, SPARE_CPU, SPARE_CPUS, preset_server
from ...runners import LocalRunner, RunError, Runner
from ...settings import EchoSettings

_LISTENING = re.compile(r"listening on [0-9.]+:(\d+)")


class CellError(RuntimeError):
    """A cell could not be measured; the message says why in one line."""


def last_json_line(output: str) -> Any:
    """The JSON a native program printed as its last line (its report);
    ValueError when it printed nothing, or not JSON."""
    lines = output.strip().splitlines()
    if not lines:
        raise ValueError("no output")
    return json.loads(lines[-1])


def failed_status(reason: str) -> str:
    """A cell's status from why it was not measured: "unavailable" when the
    configuration cannot run there (the kernel refused it, a server could
    not be built), "failed" otherwise."""
    return "unavailable" if reason.startswith("unavailable") else "failed"


# How a cell's label names a client other than the default (epoll) one.
CLIENT_LABELS = {"thread-per-connection": "thread-per-connection client", "event-loop-uring": "io_uring client"}


@dataclass(frozen=True)
class Cell:
    preset: str
    flags: tuple[str, ...]
    connections: int
    bytes: int
    client: str = "event-loop"  # loadgen --model ("auto": resolved before a sweep)
    server: str = ""  # presets.SERVER_PROGRAMS key; "" -> from the preset's name
    layout: str = "pinned"  # pinned: the node's cpus.server/client; shared: unpinned
    rate: float = 0.0  # open loop at this many requests/s (loadgen --rate); 0: closed loop
    pipeline: int = 1  # requests in flight per connection (loadgen --pipeline)
    duration: float = 0.0  # measured seconds (loadgen --duration); 0: the sweep's
    warmup: float | None = None  # seconds before measuring (loadgen --warmup); None: the sweep's

    def __post_init__(self) -> None:
        if not self.server:
            object.__setattr__(self, "server", preset_server(self.preset, self.flags)[0])

    def label(self) -> str:
        setup = [
            *([CLIENT_LABELS[self.client]] if self.client in CLIENT_LABELS else []),
            *(["shared CPUs"] if self.layout == "shared" else []),
            *([f"pipeline {self.pipeline}"] if self.pipeline > 1 else []),
        ]
        if self.rate:
            setup.append(f"open loop at {self.rate:,.0f} req/s")
        return f"{self.preset} c={self.connections} {self.bytes} B" + (f" ({', '.join(setup)})" if setup else "")

    def placement(self, cpus: Mapping[str, int | str | None]) -> dict[str, int | str | None]:
        """Where the server and the load generator run: the node's CPU sets
        (pinned), or nowhere in particular (shared)."""
        if self.layout == "shared":
            return {"server": None, "client": None}
        return {"server": cpus.get("server"), "client": cpus.get("client")}

    @property
    def program(self) -> str:
        return SERVER_PROGRAMS[self.server]


@dataclass(frozen=True)
class LoadgenRun:
    """How the load generator drives a sweep's cells: for how long and with
    how many event-loop threads, against a server listening on ``port`` (0:
    any free port). Requests in flight per connection are the cell's."""

    duration: float
    warmup: float
    threads: int = 1
    port: int = 0

    @classmethod
    def for_sweep(cls, settings: EchoSettings, cell: Cell | None = None) -> LoadgenRun:
        """The sweep's run, at ``cell``'s own duration and warm-up where its
        setup sets them."""
        duration = cell.duration if cell is not None and cell.duration else settings.duration
        warmup = cell.warmup if cell is not None and cell.warmup is not None else settings.warmup
        return cls(duration, warmup, settings.loadgen_threads, settings.port)


def cpu_text(cpus: Sequence[int]) -> str:
    """[2, 3, 4, 6] -> "2-4,6" (taskset -c style)."""
    parts: list[str] = []
    for c in sorted(cpus):
        if parts and int(parts[-1].rpartition("-")[2]) == c - 1:
            parts[-1] = f"{parts[-1].partition('-')[0]}-{c}"
        else:
            parts.append(str(c))
    return ",".join(parts)


def resolve_flags(cell: Cell, placed: Mapping[str, int | str | None], online: Callable[[], str]) -> tuple[Cell, str]:
    """The cell with its CPU placeholders ({spare_cpu}, {spare_cpus}) replaced
    by CPUs outside the server's and the load generator's sets (``placed``;
    in the shared layout nothing is pinned, so every CPU ``online()`` lists
    is spare), and the CPUs put in ("" without placeholders). No spare CPU:
    CellError "unavailable", with the placement."""
    used = [f for f in cell.flags if f in (SPARE_CPU, SPARE_CPUS)]
    if not used:
        return cell, ""
    taken = {
        c for pinned in (placed.get("server"), placed.get("client")) if pinned is not None for c in cpu_list(pinned)
    }
    node_cpus = online().strip()
    spare = [c for c in cpu_list(node_cpus) if c not in taken]
    if not spare:
        raise CellError(
            f"unavailable: {cell.preset} runs a helper on a CPU besides the server's "
            f"({placed.get('server')}) and the load generator's ({placed.get('client')}); "
            f"this node's CPUs are {node_cpus}"
        )
    values = {SPARE_CPU: str(spare[0]), SPARE_CPUS: cpu_text(spare)}
    flags = tuple(values.get(f, f) for f in cell.flags)
    # {spare_cpus} holds {spare_cpu}: the CPUs used are the larger one's.
    return replace(cell, flags=flags), values[SPARE_CPUS if SPARE_CPUS in used else SPARE_CPU]


def _taskset(cpu: int | str | None) -> list[str]:
    return ["taskset", "-c", str(cpu)] if cpu is not None else []


def start_server(
    cell: Cell, cpu: int | str | None, runner: Runner, bind: str = "127.0.0.1", port: int = 0
) -> tuple[subprocess.Popen[str], int]:
    """Start the cell's server on ``runner``'s node; return it and its port.

    Raises CellError with the server's own one-line reason when it refuses
    the configuration (exit 2) or the port is taken (exit 3)."""
    exe = runner.exe(cell.program)
    argv = [*_taskset(cpu), exe, "--port", str(port), "--bind", bind, *cell.flags]
    proc = runner.popen(argv)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    m = _LISTENING.search(line)
    if not m:
        runner.terminate(proc)
        proc.wait(timeout=30)
        rest = (line + proc.stderr.read()).strip().splitlines()
        reason = rest[-1] if rest else f"exited with status {proc.returncode}"
        kind = "port in use" if proc.returncode == 3 else "unavailable"
        raise CellError(f"{kind}: {reason}")
    return proc, int(m.group(1))


def server_death(proc: subprocess.Popen[str]) -> str | None:
    """Why the server is no longer running ("" detail when it said nothing),
    or None while it runs."""
    if proc.poll() is None:
        return None
    err = proc.stderr.read().strip() if proc.stderr else ""
    how = f"was killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exited with status {proc.returncode}"
    last = err.splitlines()[-1] if err else ""
    return f"the server died during the run: it {how}" + (f" ({last[-200:]})" if last else "")


def stop_server(proc: subprocess.Popen[str], runner: Runner) -> dict[str, Any]:
    """Stop the server (SIGTERM on its node) and parse its final JSON line of counters."""
    death = server_death(proc)
    if death is not None:
        raise CellError(death)
    runner.terminate(proc)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired as e:
        proc.kill()
        proc.wait()
        raise CellError("server did not exit within 30 s of SIGTERM") from e
    if proc.returncode != 0:
        raise CellError(f"server exited with status {proc.returncode}: {err.strip()[-200:]}")
    try:
        return last_json_line(out)
    except ValueError as e:
        raise CellError("server printed no final counters") from e


def run_loadgen(
    port: int,
    cell: Cell,
    run: LoadgenRun,
    cpu: int | str | None,
    histogram: Path,
    runner: Runner,
    host: str = "127.0.0.1",
) -> dict[str, Any]:
    """Drive the server from ``runner``'s node; the histogram is copied back."""
    remote_hist = runner.scratch("loadgen-histogram.csv")
    argv = [
        *_taskset(cpu),
        runner.exe("loadgen"),
        "--host",
        host,
        "--port",
        str(port),
        "--connections",
        str(cell.connections),
        "--bytes",
        str(cell.bytes),
        "--duration",
        str(run.duration),
        "--warmup",
        str(run.warmup),
        "--model",
        cell.client,
        "--histogram",
        remote_hist,
    ]
    if cell.client != "thread-per-connection":  # the event loops, on epoll or io_uring
        argv += ["--threads", str(run.threads), "--pipeline", str(cell.pipeline)]
    if cell.rate:
        argv += ["--rate", f"{cell.rate:.1f}"]
    budget = run.duration + run.warmup + 120
    report_path = histogram.with_suffix(".report")
    try:
        runner.run(argv, report_path, timeout=budget, name="load generator")
        report = last_json_line(report_path.read_text())
        histogram.write_text(runner.read_file(remote_hist))
    except RunError as e:
        raise CellError(f"load generator failed: {str(e).split(': ', 1)[-1]}") from e
    except ValueError as e:
        raise CellError("load generator failed: it printed no report") from e
    return report


def resched_ipis(interrupts: str, cpus: int | str | None) -> int | None:
    """Rescheduling interrupts (the RES line of /proc/interrupts) received so
    far by ``cpus`` (a CPU or taskset list; None: every CPU). io_uring
    completes a socket operation in the softirq of whichever CPU processed
    the packet and, unless the ring was set up with COOP_TASKRUN or
    DEFER_TASKRUN, kicks the server's task with one of these to run the
    completion: an inter-processor interrupt, a VM exit in a guest. None
    where the file has no such line."""
    lines = interrupts.splitlines()
    if not lines:
        return None
    columns = {name: i for i, name in enumerate(lines[0].split())}
    for line in lines[1:]:
        fields = line.split()
        if fields and fields[0] == "RES:":
            counts = [int(f) for f in fields[1 : 1 + len(columns)] if f.isdigit()]
            wanted = (
                range(len(counts))
                if cpus is None
                else [columns[f"CPU{c}"] for c in cpu_list(cpus) if f"CPU{c}" in columns]
            )
            return sum(counts[i] for i in wanted if i < len(counts))
    return None


def _online_cpus(runner: Runner) -> str:
    """The node's online CPUs, e.g. "0-3"."""
    try:
        return runner.read_file("/sys/devices/system/cpu/online")
    except (OSError, RunError) as e:
        raise CellError(f"cannot read the node's online CPUs: {e}") from e


def _interrupts(runner: Runner) -> str:
    try:
        return runner.read_file("/proc/interrupts")
    except (OSError, RunError):
        return ""


# The load generator's report fields a measured cell needs.
REPORT_FIELDS = ("rps", "requests", "p50_us", "p99_us", "p999_us", "max_us", "client_user_cpu_ns", "client_sys_cpu_ns")
# An open-loop cell that completes less than this share of the requests it
# was offered ran beyond its server's capacity (the capacity drifts 10-30 %
# between cells on a shared VM) or behind its client: it was not measured
# at its load.
RATE_KEPT = 0.8


def rate_and_server_cpu(measured: Mapping[str, Any], size: int) -> dict[str, float]:
    """A measured cell's two paired quantities: requests/s, and the server's
    CPU time per request it echoed (its bytes over the message size), the
    sweep's "server CPU per request"."""
    echoed = measured["server_bytes"] / size
    return {"rps": float(measured["rps"]), "server_cpu": measured["server_cpu_ns"] / echoed}


def report_problem(cell: Cell, client: Mapping[str, Any]) -> str | None:
    """Why the load generator's report does not measure ``cell`` (None: it
    does): a field missing or not a number, no request completed in the
    measured window, or an open-loop rate not kept."""
    bad = [k for k in REPORT_FIELDS if isinstance(client.get(k), bool) or not isinstance(client.get(k), int | float)]
    if "requests" not in bad and client["requests"] <= 0:
        return "no request completed in the measured window (a busy or stalled machine): no latency to report"
    if bad:
        return f"the load generator's report has no number for {', '.join(bad)}"
    if cell.rate and float(client["rps"]) < RATE_KEPT * cell.rate:
        return (
            f"overloaded: completed {float(client['rps']):,.0f} of the {cell.rate:,.0f} requests/s offered "
            f"(under {RATE_KEPT:.0%}), so the cell was not measured at its load"
        )
    return None


def measure_cell(
    cell: Cell,
    run: LoadgenRun,
    cpus: Mapping[str, int | str | None],
    histogram: Path,
    server_runner: Runner | None = None,
    client_runner: Runner | None = None,
    bind: str = "127.0.0.1",
    address: str = "127.0.0.1",
) -> dict[str, Any]:
    """One cell: start the server, drive it, stop it, and merge the reports.
    A port collision is retried once on a fresh port. The server and the load
    generator may run on different nodes (``address`` reaches the server)."""
    server_runner = server_runner or LocalRunner()
    client_runner = client_runner or server_runner
    cpus = cell.placement(cpus)
    cell, helper_cpus = resolve_flags(cell, cpus, lambda: _online_cpus(server_runner))
    for attempt in (1, 2):
        try:
            proc, port = start_server(cell, cpus.get("server"), server_runner, bind=bind, port=run.port)
            break
        except CellError as e:
            if str(e).startswith("port in use") and attempt == 1:
                run = replace(run, port=0)
                continue
            raise
    ipis_before = resched_ipis(_interrupts(server_runner), cpus.get("server"))
    try:
        client = run_loadgen(port, cell, run, cpus.get("client"), histogram, client_runner, host=address)
    except (CellError, subprocess.TimeoutExpired) as e:
        # A server that died takes the load generator down with it: blame the server.
        death = server_death(proc)
        if death is None:
            proc.kill()
            proc.wait()
        raise CellError(death or str(e)) from e
    ipis_after = resched_ipis(_interrupts(server_runner), cpus.get("server"))
    server = stop_server(proc, server_runner)
    problem = report_problem(cell, client)
    if problem:
        raise CellError(problem)
    return {
        "server_resched_ipis": (ipis_after - ipis_before if ipis_before is not None and ipis_after is not None else ""),
        "rps": client["rps"],
        "requests": client["requests"],
        "p50_us": client["p50_us"],
        "p99_us": client["p99_us"],
        "p999_us": client["p999_us"],
        "max_us": client["max_us"],
        "client_cpu_ns": client["client_user_cpu_ns"] + client["client_sys_cpu_ns"],
        "server_cpu_ns": server["user_cpu_ns"] + server["sys_cpu_ns"],
        "server_requests": server["requests"],
        "server_bytes": server["bytes"],
        "waits": server["waits"],
        "events": server["events"],
        "io_uring_enter": server["io_uring_enter"],
        "sqes": server["sqes"],
        "cqes": server["cqes"],
        "short_writes": server["short_writes"],
        "async_sqes": server["async_sqes"],
        "nobufs": server["nobufs"],
        **{name: uring_counter_text(server, name) for name in URING_COUNTERS},
        "connections_answered": client.get("connections_answered", ""),
        "setup_s": client.get("setup_s", ""),
        "iowq_workers": server["config"].get("iowq_workers_at_exit", 0),
        "port": port,
        "helper_cpus": helper_cpus,
    }
