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
import random
import shlex
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ... import atomic, readers
from ...formats import CELL_COLUMNS, histograms_path, raw_format_line
from ...registry import REGISTRY
from ...runners import LocalRunner, Runner, build_failure, runner_for
from ...settings import EchoSettings
from .. import Measured, Repetition, settings_of
from .cell import Cell, CellError, LoadgenRun, failed_status, last_json_line, measure_cell


def reversed_in(rep: int) -> bool:
    """Whether repetition ``rep`` (1-based) runs each setup's presets in the
    reverse of the run's order: ABBA over repetitions (forward, reversed,
    reversed, forward, ...), so every even number of repetitions from the
    first runs each order equally often."""
    return (rep // 2) % 2 == 1


def cells(settings: EchoSettings, seed: int, rep: int = 1, run_seed: int | None = None) -> list[Cell]:
    """Every (preset, setup, connections, bytes) of the sweep, in a seeded
    random order that keeps the cells of one (connections, bytes) together,
    and within it the cells of one setup (client model, layout and pipeline
    depth): the blocks come in a random order (``seed``, one repetition's),
    and the setups in a random order within each. Ratios between presets
    (formed per repetition, within one setup) then compare cells measured
    back to back: a two-preset setup's pair is always adjacent. Pairs
    further apart share less of the machine's state: at c = 1000, 1 s
    cells, the log ratio's sd grew from 0.065 for adjacent cells to
    0.20-0.24 five to nine cells apart
    (docs/decisions/0018-a-setups-cells-run-back-to-back.md).

    Within a setup the presets come in one random order per run
    (``run_seed``, which every repetition of a run shares; default
    ``seed``), forward or reversed by ``reversed_in(rep)``. So over
    repetitions 1-2, 1-4, 1-6, ... each pair of presets runs as often A
    first as B first, and at the same distance: a position or carry-over
    effect cancels in a run's ratios instead of landing in their spread.

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
    base = seed if run_seed is None else run_seed
    blocks = sorted(set().union(*grids))
    rng.shuffle(blocks)
    out: list[Cell] = []
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
                    duration=float(setup.duration or 0.0),
                    warmup=None if setup.warmup is None else float(setup.warmup),
                )
                for name in chosen
                for setup, g in zip(typed.setups, grids, strict=True)
                if (c, b) in g and (wanted is None or (name, c, b) in wanted) and name in (setup.only or [name])
            }.values()
        )
        groups: dict[tuple[str, str, int], list[Cell]] = {}
        for cell in block:
            groups.setdefault((cell.client, cell.layout, cell.pipeline), []).append(cell)
        order = list(groups.items())
        rng.shuffle(order)
        for (client, layout, pipeline), group in order:
            # A string seeds the same way in every process (Random hashes it).
            within = random.Random(f"{base}/{c}/{b}/{client}/{layout}/{pipeline}")
            group.sort(key=lambda cell: cell.preset)
            within.shuffle(group)
            out.extend(reversed(group) if reversed_in(rep) else group)
    return out


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
    rep: int = 1,
    run_seed: int | None = None,
    server_runner: Runner | None = None,
    client_runner: Runner | None = None,
    bind: str = "127.0.0.1",
    address: str = "127.0.0.1",
) -> dict[str, Any]:
    """Measure every cell into out_csv and out_hist (both written by the
    caller's atomic paths). Returns provenance extras."""
    typed = settings
    planned, auto_client = resolve_auto_client(
        cells(typed, seed, rep, run_seed), client_runner or server_runner or LocalRunner()
    )
    unbuilt = build_optional_servers(planned, server_runner or LocalRunner())
    failures: list[str] = []
    with SweepFiles(out_csv, out_hist, CELL_COLUMNS, REGISTRY["echo"].raw_format) as files:
        for i, cell in enumerate(planned):
            row: dict[str, Any] = {c: "" for c in CELL_COLUMNS}
            run = LoadgenRun.for_sweep(typed, cell)
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
                duration=run.duration,
                warmup=run.warmup,
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
                        run,
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
            # Each setup's preset order: the run's, reversed in this repetition or not.
            "preset_order": {"run_seed": seed if run_seed is None else run_seed, "reversed": reversed_in(rep)},
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
            rep=rep.index,
            run_seed=rep.run_seed,
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
