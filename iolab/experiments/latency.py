"""The latency experiment: open-loop latency curves of chosen echo servers.

Closed-loop ping-pong hides part of the tail: a slow response delays the next
request, so the requests that would have waited behind a stall are never
sent (coordinated omission). Here the load generator sends on a fixed
schedule (``loadgen --rate``) and times each request from when it was due.

One repetition on one node, with the server and the load generator pinned
to the node's ``cpus.server`` and ``cpus.client``:

1. each preset's capacity: a closed-loop cell at the same connections and
   size, the presets in a random order, back to back;
2. every (preset, load) cell at ``load`` x that capacity requests/s, and
   every (preset, fixed-rate load) cell at that load x the slowest preset's
   capacity (one rate for every preset: equal work, so server CPU per
   request compares like for like), all shuffled together, so the curves
   compare cells measured seconds apart.

It writes ``rep<N>.csv`` (one row per cell, ``LATENCY_COLUMNS``) and
``rep<N>.histograms.csv`` (every cell's latency buckets, as the echo sweep).
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import atomic, readers
from ..formats import LATENCY_COLUMNS, histograms_path
from ..registry import REGISTRY
from ..runners import LocalRunner, Runner
from ..settings import LatencySettings
from . import Measured, Repetition, settings_of
from .echo import SweepFiles, build_optional_servers, number_text
from .echo.cell import Cell, CellError, LoadgenRun, failed_status, measure_cell


@dataclass(frozen=True)
class LoadCell:
    preset: str
    load: float  # share of the capacity offered; 0 for the capacity cell
    fixed_rate: bool = False  # load is a share of the slowest preset's capacity

    @property
    def phase(self) -> str:
        return "capacity" if self.load == 0 else "fixed" if self.fixed_rate else "open"


def plan(settings: LatencySettings, seed: int) -> list[LoadCell]:
    """The capacity cells (presets shuffled), then every open-loop and
    fixed-rate cell (shuffled together)."""
    rng = random.Random(seed)
    presets = list(settings.presets)
    rng.shuffle(presets)
    opened = [LoadCell(p, float(load)) for p in presets for load in settings.loads]
    opened += [LoadCell(p, float(load), fixed_rate=True) for p in presets for load in settings.fixed_rate_loads]
    rng.shuffle(opened)
    return [LoadCell(p, 0.0) for p in presets] + opened


def offered_rate(cell: LoadCell, capacity: Mapping[str, float]) -> float:
    """Requests/s to offer: load x the preset's capacity, or for a
    fixed-rate cell load x the slowest capacity measured; 0 for a capacity
    cell. CellError where the capacity it needs was not measured."""
    if cell.phase == "capacity":
        return 0.0
    if cell.phase == "fixed":
        if not capacity:
            raise CellError("no preset's capacity was measured, so there is no common rate to offer")
        return cell.load * min(capacity.values())
    return cell.load * capacity.get(cell.preset, 0.0)


def echo_cell(cell: LoadCell, settings: LatencySettings, rate: float) -> Cell:
    server, flags = settings.preset_specs[cell.preset]
    return Cell(cell.preset, flags, settings.connections, settings.bytes, server=server, rate=rate)


def run(
    settings: LatencySettings,
    cpus: Mapping[str, int | str | None],
    seed: int,
    out_csv: Path,
    out_hist: Path,
    runner: Runner | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Measure one repetition into out_csv and out_hist (the caller's atomic
    paths). Returns provenance extras."""
    runner = runner or LocalRunner()
    # One request in flight per connection: the open loop sets the rate.
    loadgen = LoadgenRun(settings.duration, settings.warmup, threads=1, port=settings.port)
    planned = plan(settings, seed)
    unbuilt = build_optional_servers([echo_cell(c, settings, 0.0) for c in planned], runner)
    capacity: dict[str, float] = {}
    no_capacity: dict[str, str] = {}
    failures: list[str] = []
    with SweepFiles(out_csv, out_hist, LATENCY_COLUMNS, REGISTRY["latency"].raw_format) as files:
        for i, cell in enumerate(planned):
            row: dict[str, Any] = {c: "" for c in LATENCY_COLUMNS}
            row.update(
                order=i,
                preset=cell.preset,
                phase=cell.phase,
                load=cell.load,
                connections=settings.connections,
                bytes=settings.bytes,
                server_cpu=cpus.get("server"),
                client_cpu=cpus.get("client"),
            )
            start = time.monotonic()
            try:
                if cell.phase != "capacity" and cell.preset in no_capacity:
                    raise CellError(no_capacity[cell.preset])
                rate = offered_rate(cell, capacity)
                row["offered_rps"] = round(rate, 1) if rate else ""
                measured_cell = echo_cell(cell, settings, rate)
                row["server"] = measured_cell.server
                if measured_cell.program in unbuilt:
                    raise CellError(unbuilt[measured_cell.program])
                result = measure_cell(measured_cell, loadgen, cpus, files.histogram(i), runner)
                row.update({k: result[k] for k in LATENCY_COLUMNS if k in result}, status="ok")
                if cell.phase == "capacity":
                    capacity[cell.preset] = float(result["rps"])
            except CellError as e:
                reason = str(e)
                row.update(status=failed_status(reason), reason=reason)
                if cell.phase == "capacity":
                    no_capacity[cell.preset] = (
                        reason if row["status"] == "unavailable" else f"its capacity could not be measured ({reason})"
                    )
                if row["status"] == "failed":
                    failures.append(f"{cell.preset} load {cell.load:g}: {reason}")
            files.write(row)
            if progress:
                what = {
                    "capacity": "capacity",
                    "open": f"{cell.load:.0%} of capacity",
                    "fixed": f"{cell.load:.0%} of the slowest capacity",
                }[cell.phase]
                done = (
                    f"{number_text(row['rps'])} req/s, p99 {number_text(row['p99_us'])} us"
                    if row["status"] == "ok"
                    else row["reason"]
                )
                print(
                    f"iolab: latency [{i + 1}/{len(planned)}] {cell.preset} {what}: {row['status']} "
                    f"{done} [{time.monotonic() - start:.1f} s]",
                    flush=True,
                )
    return {
        "latency": {
            "cells": len(planned),
            "failed": failures,
            "order_seed": seed,
            "capacity_rps": capacity,
            "placement": dict(cpus),
        }
    }


def run_repetition(rep: Repetition) -> Measured:
    """The open-loop sweep with the server and the load generator on the node."""
    cpus = rep.server_client_cpus()
    with atomic.atomic_path(histograms_path(rep.output)) as hist_tmp:
        extra = run(settings_of(rep, LatencySettings), cpus, rep.seed, rep.raw, hist_tmp, runner=rep.runner)
    frame = readers.read_latency_csv(rep.raw)
    return Measured(
        extra,
        ["echo server + loadgen --rate", "(one run per cell)"],
        f"{int((frame['status'] == 'ok').sum())} of {len(frame)} cells measured",
        cpus,
    )
