"""Does modern io_uring beat epoll here? The words of the modern view
(its numbers: ``stats``): the features measured, the fixed-rate cell, the
cost model's sentence, and the one paragraph that answers the question
from the ratios to epoll and the counters that show whether each feature
was in effect (receive bundles, incremental buffer rings, batched waits,
NAPI, registered waits, send bundles, the epoll-wait bridge, gathered
sends)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ...report.outputs import Outputs
from ..latency import stats as latency
from .modern_stats import CPU, GOAL, LOADED, OLDER_RING, all_inert_cells


def features_text(presets: dict[str, list[str]]) -> str:
    """The modern features the run measured, each once, in the order its
    presets name them (the paper's list)."""
    return ", ".join(dict.fromkeys(f for features in presets.values() for f in features))


def fixed_rate_view(open_loop: pd.DataFrame | None, presets: set[str]) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """The fixed-rate ratios to epoll (latency.fixed_rate_cpu) of
    ``presets``, the latency table's fixed-rate rows behind them, and their
    cell ("c 50, 16 KiB"); empty, and "", where the run measured none."""
    if open_loop is None or not len(open_loop) or "phase" not in open_loop:
        return pd.DataFrame(columns=latency.FIXED_RATE_COLUMNS), pd.DataFrame(), ""
    fixed = latency.fixed_rate_cpu(open_loop)
    fixed = fixed[fixed["preset"].isin(presets)]
    rows = open_loop[(open_loop["phase"] == "fixed") & open_loop["preset"].isin({*presets, "epoll"})]
    if not len(fixed) or not len(rows):
        return fixed, pd.DataFrame(), ""
    return fixed, rows, f"c {int(rows['connections'].iloc[0])}, {_size(int(rows['bytes'].iloc[0]))}"


def cost_sentence(view: pd.DataFrame, idle: set[tuple[str, int, int]] | None = None) -> str:
    """One sentence from ``cost_view`` at the largest message size, one
    request in flight: model B's price of each preset's request and the
    measured cost over it, leaving out cells in ``idle`` (every feature
    inert)."""
    one = view[view["pipeline"] == 1] if len(view) else view
    one = one[_active(one, idle or set())] if len(one) else one
    if not len(one):
        return ""
    size = int(one["bytes"].max())
    rows = one[one["bytes"] == size].sort_values("model_b_ns")
    return (
        f" Model B (each io_uring_enter s + a, each SQE b, from the cost probes) prices a {_size(size)} "
        f"request at the SQEs and enters it used (c \u2265 {LOADED}): "
        + "; ".join(
            f"{r.preset} {r.model_b_ns / 1000:.1f} µs ({r.sqes_per_request:.1f} SQEs, "
            f"{r.enters_per_request:.2f} enters), measured {r.measured_over_model:.1f}x that"
            for r in rows.itertuples()
        )
        + "."
    )


def _active(view: pd.DataFrame, idle: set[tuple[str, int, int]]) -> pd.Series:
    """Which of view's rows are cells where some feature took effect."""
    keys = zip(view["preset"], view["pipeline"], view["bytes"], strict=True)
    return pd.Series([(str(p), int(d), int(b)) not in idle for p, d, b in keys], index=view.index, dtype=bool)


def _size(size: float) -> str:
    n = int(size)
    return f"{n // 1024} KiB" if n >= 1024 and n % 1024 == 0 else f"{n} B"


def _cell(row: pd.Series) -> str:
    depth = int(row["pipeline"])
    return f"c = {int(row['connections'])}, {_size(row['bytes'])}" + (f", {depth} in flight" if depth > 1 else "")


def answer(view: pd.DataFrame, counts: pd.DataFrame, goal: float = GOAL, cost: pd.DataFrame | None = None) -> str:
    """The paragraph: does a modern ring beat epoll's CPU per request here,
    where and by how much (a cell whose whole 95 % interval is at or under
    ``goal`` at c >= 50 counts), and otherwise how close the best came and
    where the cost goes, from the counters and (``cost``: ``cost_view``)
    the cost model."""
    if view.empty:
        return (
            "No preset with a feature of Linux 6.9+ ran in this run, so the question is not answered "
            "here; the modern overlay (config/overlays/modern.yaml) measures them."
        )
    cpu = view[(view["metric"] == CPU) & (view["connections"] >= LOADED) & (view["preset"] != OLDER_RING)]
    cpu = cpu[cpu["high"].map(math.isfinite)]
    measured = set(cpu["preset"])
    idle = all_inert_cells(counts)
    active = _active(cpu, idle)
    left_out = int((~active).sum())
    cpu = cpu[active]
    reps = int(view["reps"].min())
    lead = (
        f"Over {reps} or more interleaved repetitions, server CPU per request as a ratio to epoll's "
        f"(median [95 % interval]) at {LOADED} connections and more"
        + (
            f", leaving out {left_out} cells where the counters show every feature of the preset inert:"
            if left_out
            else ":"
        )
    )
    if not len(cpu):
        return f"{lead} no cell had a modern feature in effect, so the question is not answered here." + (
            _inert_sentence(counts, measured)
        )
    wins = cpu[cpu["high"] <= goal].sort_values("ratio")
    if len(wins):
        cells = "; ".join(
            f"{r['preset']} at {_cell(r)}: {r['ratio']:.2f} [{r['low']:.2f}, {r['high']:.2f}]"
            for _, r in wins.head(4).iterrows()
        )
        return (
            f"{lead} yes, modern io_uring beats epoll here in {len(wins)} of {len(cpu)} cells, "
            f"its whole interval at or under {goal:.2f}: {cells}." + _inert_sentence(counts, measured)
        )
    best = cpu.sort_values("ratio").iloc[0]
    worst = cpu.sort_values("ratio").iloc[-1]
    near = near_misses(cpu, goal)
    if len(near):
        cells = "; ".join(
            f"{r['preset']} at {_cell(r)}: {r['ratio']:.2f} [{r['low']:.2f}, {r['high']:.2f}]"
            for _, r in near.head(4).iterrows()
        )
        reached = (
            f"no modern preset's whole interval reached {goal:.2f} or under in any of {len(cpu)} cells; the "
            f"median did in {len(near)} of them, each interval reaching above {goal:.2f} ({cells})."
        )
    else:
        reached = f"no modern preset reached {goal:.2f}, not even by its median, in any of {len(cpu)} cells."
    text = (
        f"{lead} no; {reached} The closest was "
        f"{best['preset']} at {_cell(best)}, {best['ratio']:.2f} [{best['low']:.2f}, {best['high']:.2f}]; "
        f"the farthest {worst['preset']} at {_cell(worst)}, {worst['ratio']:.2f}."
    )
    if len(counts):
        c = counts[counts["preset"].isin({*cpu["preset"], OLDER_RING}) & (counts["pipeline"] == 1)]
        largest = c[c["bytes"] == c["bytes"].max()].sort_values("sqes_per_message")
        if len(largest):
            text += (
                f" Where the cost goes, at {_size(largest['bytes'].iloc[0])} one request in flight: "
                + "; ".join(_where_the_cost_goes(r) for r in largest.itertuples())
                + "."
            )
    cost_text = cost_sentence(cost, idle) if cost is not None else ""
    return text + cost_text + _inert_sentence(counts, measured)


def near_misses(cpu: pd.DataFrame, goal: float) -> pd.DataFrame:
    """The cells whose median CPU ratio is at or under ``goal`` while their
    interval reaches above it (not a win by the interval), best first."""
    return cpu[(cpu["ratio"] <= goal) & (cpu["high"] > goal)].sort_values("ratio")


def _where_the_cost_goes(r: Any) -> str:
    """One preset's SQEs, buffers and completions per enter (a ``counters``
    row); a server without provided buffers (the epoll-wait bridge, whose
    ring only waits) has no buffer counts to give."""
    if math.isnan(r.buffers_per_recv):
        return (
            f"{r.preset} {r.sqes_per_message:.1f} SQEs per message (its ring only waits: "
            f"{r.cqes_per_enter:.0f} completion per enter)"
        )
    return (
        f"{r.preset} {r.sqes_per_message:.1f} SQEs per message ({r.buffers_per_recv:.1f} buffers per "
        f"receive, {r.buffers_per_send:.1f} per send, {r.cqes_per_enter:.0f} completions per enter)"
    )


def _inert_sentence(counts: pd.DataFrame, presets: set[str]) -> str:
    """Where the counters show a feature of one of ``presets`` idle."""
    c = counts[counts["preset"].isin(presets)] if len(counts) else counts
    idle = c[c["inert"] != ""] if len(c) else c
    if not len(idle):
        return ""
    where: dict[tuple[str, str], list[str]] = {(r["preset"], r["inert"]): [] for _, r in idle.iterrows()}
    for _, r in idle.iterrows():
        depth = int(r["pipeline"])
        where[(r["preset"], r["inert"])].append(_size(r["bytes"]) + (f" x{depth}" if depth > 1 else ""))
    return (
        " Inert (the counters show the feature did nothing; xN: N requests in flight): "
        + "; ".join(f"{inert} in {preset} at {', '.join(cells)}" for (preset, inert), cells in where.items())
        + "."
    )


def numbers(out: Outputs, view: pd.DataFrame) -> None:
    """What the paper reads besides the paragraph: how many cells the
    modern view has, and each modern preset's lowest CPU ratio at c >= 50."""
    cpu = view[(view["metric"] == CPU) & (view["connections"] >= LOADED)] if len(view) else view
    out.text("echo_modern_cells", str(len(cpu)))
    for preset, rows in cpu.groupby("preset") if len(cpu) else ():
        best = rows.sort_values("ratio").iloc[0]
        out.text(
            f"echo_modern_{preset}_best_cpu_ratio",
            f"{best['ratio']:.2f} [{best['low']:.2f}, {best['high']:.2f}] at {_cell(best)}",
        )
