"""The client-bound gate: whether the load generator, not the server, set
the pace in an echo cell, from the CPU the two sides used there.

requests/s in such a cell measure the client, so a part read there is
context. The gate is decided on the figures it reads, which a run records
beside each part it gates (``BusyGate``): a single run decides it on its own
medians, a verdict pooled over runs decides it once on the runs' medians
(``pooled``), so a part near the gate's bounds is counted or context in
every run alike instead of flipping from run to run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# The server had CPU to spare below this share of its CPU...
SERVER_SPARE = 0.9
# ...while server and client together kept at least this share of the
# node's CPUs busy.
NODE_BUSY = 0.9


@dataclass(frozen=True)
class Busy:
    """One preset's medians in the cell: its server's CPU (share of one
    CPU) and the load generator's (CPUs)."""

    preset: str
    server: float
    client: float


@dataclass(frozen=True)
class BusyGate:
    """The figures the gate reads in one cell, for the presets a part
    compares; ``runs``: how many runs' medians they are the median of;
    ``setup``: whether the CPU figures' seconds include the connecting and
    ramp-up that their CPU times hold (iolab.rooms.echo.tidy's busy_s).
    Without those seconds they read 7-11 % high at c >= 500."""

    cell: str  # "c=1000 128 B"
    cpus: float
    busy: tuple[Busy, ...]
    runs: int = 1
    setup: bool = False
    # The runs pooled (0: one run's own gate); above ``runs`` where the
    # medians leave out those whose figures do not cover the setup.
    of: int = 0

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        """What two runs' gates must share to be one gate."""
        return self.cell, tuple(sorted(b.preset for b in self.busy))

    def reason(self) -> str:
        """Why the load generator set the pace ("" when it did not): the
        first preset whose server had CPU to spare while the node was busy."""
        if not (math.isfinite(self.cpus) and self.cpus > 0):
            return ""
        for b in self.busy:
            if b.server < SERVER_SPARE and b.server + b.client >= NODE_BUSY * self.cpus:
                over = f", medians over {self.runs} runs" if self.runs > 1 else ""
                if self.of > self.runs:
                    over = f", medians over {self.runs} of {self.of} runs, those whose CPU figures cover the setup"
                return (
                    f"the load generator, not the server, set the pace ({b.preset}: client {b.client:.2f} CPUs, "
                    f"server {b.server:.2f} of its CPU, of {self.cpus:.0f} CPUs{over})"
                )
        return ""

    def as_json(self) -> dict[str, Any]:
        return {
            "cell": self.cell,
            "cpus": self.cpus,
            "busy": [[b.preset, b.server, b.client] for b in self.busy],
            "setup": self.setup,
        }

    @classmethod
    def from_json(cls, data: Any) -> BusyGate | None:
        """A gate as a run recorded it; None for anything that is not one
        (a crate is untrusted data: every field is checked)."""
        if not isinstance(data, Mapping):
            return None
        cell, cpus, rows = data.get("cell"), data.get("cpus"), data.get("busy")
        if not isinstance(cell, str) or not isinstance(cpus, int | float) or not _number(cpus):
            return None
        if not isinstance(rows, list) or not rows:
            return None
        busy = []
        for row in rows:
            if not (
                isinstance(row, list)
                and len(row) == 3
                and isinstance(row[0], str)
                and _number(row[1])
                and _number(row[2])
            ):
                return None
            busy.append(Busy(row[0][:80], float(row[1]), float(row[2])))
        return cls(cell[:80], float(cpus), tuple(busy), setup=data.get("setup") is True)


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


def pooled(gates: Sequence[BusyGate]) -> BusyGate:
    """One gate over runs: each preset's median server and client CPU over
    the runs that measured it, on the most CPUs any run's node had (the
    runs pooled are of one kind of machine). Where some runs' figures
    include the setup seconds, only theirs: a median over both kinds mixes
    figures that read high with figures that do not."""
    if not gates:
        raise ValueError("no gate to pool")
    given = len(gates)
    gates = [g for g in gates if g.setup] or list(gates)
    presets = list(dict.fromkeys(b.preset for g in gates for b in g.busy))
    busy = tuple(
        Busy(
            p,
            float(np.median([b.server for g in gates for b in g.busy if b.preset == p])),
            float(np.median([b.client for g in gates for b in g.busy if b.preset == p])),
        )
        for p in presets
    )
    return BusyGate(gates[0].cell, max(g.cpus for g in gates), busy, len(gates), gates[0].setup, given)


def over_cells(gates: Sequence[BusyGate], cells: str) -> BusyGate:
    """One gate for a part read over several cells (named ``cells``): it
    trips where any cell's would, and names the cell beside the preset. Its
    presets carry their cell, so runs pooled decide it once on each cell's
    medians, as for a part of one cell."""
    if not gates:
        raise ValueError("no gate to combine")
    busy = tuple(Busy(f"{b.preset} at {g.cell}", b.server, b.client) for g in gates for b in g.busy)
    return BusyGate(cells, max(g.cpus for g in gates), busy, setup=all(g.setup for g in gates))
