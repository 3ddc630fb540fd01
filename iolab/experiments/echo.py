"""The echo experiment: every server configuration against the load
generator, over connections x message sizes, in a random order.

One call measures one repetition on one node and writes two raw files:
``rep<N>.csv`` (one row per cell: load-generator and server results, or the
reason a configuration was unavailable) and ``rep<N>.histograms.csv`` (the
raw latency buckets of every cell).
"""

from __future__ import annotations

import contextlib
import csv
import json
import random
import re
import shlex
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .. import atomic, readers
from ..formats import CELL_COLUMNS, URING_COUNTERS, histograms_path, raw_format_line, uring_counter_text
from ..inventory import cpu_list
from ..presets import SERVER_PROGRAMS, SPARE_CPU, SPARE_CPUS, preset_server
from ..registry import REGISTRY
from ..runners import LocalRunner, RunError, Runner, build_failure, runner_for
from ..settings import EchoSettings
from . import Measured, Repetition, settings_of

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
    def for_sweep(cls, settings: EchoSettings) -> LoadgenRun:
        return cls(settings.duration, settings.warmup, settings.loadgen_threads, settings.port)


def cells(settings: EchoSettings, seed: int) -> list[Cell]:
    """Every (preset, setup, connections, bytes) of the sweep, in a seeded
    random order that keeps the cells of one (connections, bytes) together:
    the blocks come in a random order and the presets and setups (client
    model, layout and pipeline depth) in a random order within each. Ratios between presets
    (formed per repetition) then compare cells measured seconds apart.
    ``cells``, when given, restricts the sweep to those [preset,
    connections, bytes], under every setup (an adaptive-precision round)."""
    typed = settings
    presets = typed.presets
    chosen = typed.only or list(presets)
    wanted = set(typed.cells) if typed.cells else None

    def grid(setup: Any) -> set[tuple[int, int]]:
        return {(c, b) for c in (setup.connections or typed.connections) for b in (setup.bytes or typed.bytes)}

    grids = [grid(setup) for setup in typed.setups]
    rng = random.Random(seed)
    blocks = sorted(set().union(*grids))
    rng.shuffle(blocks)
    out = []
    for c, b in blocks:
        # A cell two setup entries share (same preset, client, layout and depth) runs once.
        block = list(
            {
                (name, setup.client, setup.layout, setup.pipeline or typed.pipeline): Cell(
                    name,
                    presets[name].flags,
                    c,
                    b,
                    setup.client,
                    presets[name].server,
                    setup.layout,
                    pipeline=setup.pipeline or typed.pipeline,
                )
                for name in chosen
                for setup, g in zip(typed.setups, grids, strict=True)
                if (c, b) in g and (wanted is None or (name, c, b) in wanted) and name in (setup.only or [name])
            }.values()
        )
        rng.shuffle(block)
        out.extend(block)
    return out


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
        "iowq_workers": server["config"].get("iowq_workers_at_exit", 0),
        "port": port,
        "helper_cpus": helper_cpus,
    }


def build_optional_servers(planned: Sequence[Cell], runner: Runner) -> dict[str, str]:
    """Build the servers only some nodes can build (the Go ones) that the
    sweep uses, on ``runner``'s node; program -> why it is unavailable there."""
    unavailable = {}
    for program in sorted({c.program for c in planned} & set(REGISTRY["echo"].optional_programs)):
        native = Path(runner.exe(program)).parent.parent
        res = runner.shell(f"make -s -C {shlex.quote(str(native))} build/{shlex.quote(program)}", timeout=900)
        if res.returncode != 0:
            unavailable[program] = (
                f"unavailable: {program} could not be built on this node: "
                f"{build_failure(res.stderr + res.stdout, res.returncode)}"
            )
    return unavailable


def resolve_auto_client(planned: Sequence[Cell], runner: Runner) -> tuple[list[Cell], dict[str, str]]:
    """``planned`` with the client model "auto" replaced by the one
    ``loadgen --model auto --check`` picks on the load generator's node (the
    io_uring loop where its kernel allows, else the epoll loop), less any
    cell that then repeats another; and what it picked, and why, for the
    provenance ({} when no cell asks for "auto")."""
    if not any(c.client == "auto" for c in planned):
        return list(planned), {}
    with tempfile.TemporaryDirectory() as tmp:
        answer = Path(tmp) / "check.json"
        runner.run(
            [runner.exe("loadgen"), "--model", "auto", "--check"],
            answer,
            timeout=60,
            name="load generator's model check",
        )
        try:
            picked: dict[str, str] = last_json_line(answer.read_text())
        except ValueError as e:
            raise ValueError(f"loadgen --model auto --check gave no answer ({e})") from e
    resolved = [replace(c, client=picked["model"]) if c.client == "auto" else c for c in planned]
    return list(dict.fromkeys(resolved)), picked


def number_text(value: Any) -> str:
    """A measured number as a progress line shows it; never raises (a
    progress line must not fail a measurement)."""
    try:
        return f"{float(value):,.0f}"
    except (TypeError, ValueError):
        return "?"


class SweepFiles:
    """A sweep's two raw files, written a cell at a time as it is measured:
    one CSV row per cell, and the cell's latency buckets (``histogram(i)``,
    where the load generator writes them) prefixed with its order."""

    def __init__(self, out_csv: Path, out_hist: Path, columns: Sequence[str], raw_format: str) -> None:
        self._stack = contextlib.ExitStack()
        self._csv = self._stack.enter_context(open(out_csv, "w", newline=""))
        self._csv.write(raw_format_line(raw_format))
        self._hist = self._stack.enter_context(open(out_hist, "w"))
        self._tmp = Path(self._stack.enter_context(tempfile.TemporaryDirectory()))
        self._writer = csv.DictWriter(self._csv, fieldnames=list(columns))
        self._writer.writeheader()
        self._hist.write("order,low_ns,high_ns,count\n")

    def __enter__(self) -> SweepFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def histogram(self, order: int) -> Path:
        return self._tmp / f"{order}.csv"

    def write(self, row: Mapping[str, Any]) -> None:
        """The cell's row, and its buckets when it was measured."""
        if row["status"] == "ok":
            for line in self.histogram(int(row["order"])).read_text().splitlines()[1:]:
                self._hist.write(f"{row['order']},{line}\n")
        self._writer.writerow(row)
        self._csv.flush()


def run_sweep(
    settings: EchoSettings,
    cpus: Mapping[str, int | str | None],
    seed: int,
    out_csv: Path,
    out_hist: Path,
    progress: bool = True,
    server_runner: Runner | None = None,
    client_runner: Runner | None = None,
    bind: str = "127.0.0.1",
    address: str = "127.0.0.1",
) -> dict[str, Any]:
    """Measure every cell into out_csv and out_hist (both written by the
    caller's atomic paths). Returns provenance extras."""
    typed = settings
    planned, auto_client = resolve_auto_client(cells(typed, seed), client_runner or server_runner or LocalRunner())
    unbuilt = build_optional_servers(planned, server_runner or LocalRunner())
    failures: list[str] = []
    with SweepFiles(out_csv, out_hist, CELL_COLUMNS, REGISTRY["echo"].raw_format) as files:
        for i, cell in enumerate(planned):
            row: dict[str, Any] = {c: "" for c in CELL_COLUMNS}
            placed = cell.placement(cpus)
            row.update(
                order=i,
                server=cell.server,
                preset=cell.preset,
                client=cell.client,
                layout=cell.layout,
                pipeline=cell.pipeline,
                connections=cell.connections,
                bytes=cell.bytes,
                server_cpu=placed["server"],
                client_cpu=placed["client"],
            )
            start = time.monotonic()
            try:
                if cell.program in unbuilt:
                    raise CellError(unbuilt[cell.program])
                row.update(
                    measure_cell(
                        cell,
                        LoadgenRun.for_sweep(typed),
                        cpus,
                        files.histogram(i),
                        server_runner,
                        client_runner,
                        bind,
                        address,
                    ),
                    status="ok",
                )
            except CellError as e:
                reason = str(e)
                row.update(status=failed_status(reason), reason=reason)
                if row["status"] == "failed":
                    failures.append(f"{cell.label()}: {reason}")
            files.write(row)
            if progress:
                print(
                    f"iolab: echo [{i + 1}/{len(planned)}] {cell.label()}: {row['status']}"
                    + (f" {number_text(row['rps'])} req/s" if row["status"] == "ok" else f" ({row['reason']})")
                    + f" [{time.monotonic() - start:.1f} s]",
                    flush=True,
                )
    return {
        "echo": {
            "cells": len(planned),
            "failed": failures,
            "order_seed": seed,
            "placement": dict(cpus),
            "bind": bind,
            "address": address,
            **({"client_auto": auto_client} if auto_client else {}),
        }
    }


def run_repetition(rep: Repetition) -> Measured:
    """The closed-loop sweep with the server on the node and the load
    generator there too, or on ``rep.client_entry``'s node (then the server
    listens on all addresses and the client connects to the node's
    ``address``)."""
    cpus = rep.server_client_cpus()
    node_entry, client_entry = rep.entry, rep.client_entry
    if client_entry is None or client_entry.name == node_entry.name:
        client_cm: Any = contextlib.nullcontext(rep.runner)
        bind = address = "127.0.0.1"
    else:
        client_cm = runner_for(client_entry).session(REGISTRY["echo"].programs)
        bind = "0.0.0.0"
        address = node_entry.reach or "127.0.0.1"
        cpus["client"] = client_entry.cpus.client
    with client_cm as client_runner, atomic.atomic_path(histograms_path(rep.output)) as hist_tmp:
        extra = run_sweep(
            settings_of(rep, EchoSettings),
            cpus,
            rep.seed,
            rep.raw,
            hist_tmp,
            server_runner=rep.runner,
            client_runner=client_runner,
            bind=bind,
            address=address,
        )
    extra["echo"]["client_node"] = (client_entry or node_entry).name
    frame = readers.read_echo_csv(rep.raw)
    ok = int((frame["status"] == "ok").sum())
    return Measured(
        extra, ["echo-epoll/echo-uring + loadgen", "(one run per cell)"], f"{ok} of {len(frame)} cells measured", cpus
    )
