"""The echo room in the paper: the echo notebook's figures of the closed-loop
cells (every preset against epoll as paired ratios, the servers' CPU per
request against the 2w floor, latency and batch size; every estimate with
its 95 % interval across repetitions) and the numbers it hands the paper.
Captions: echo_*.rst here."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ...estimation.intervals import Estimate
from ...report import labels
from ...report.outputs import Outputs
from ...report.plots.style import (
    EPOLL_COLOR,
    FIGURE_WIDTH_IN,
    HOLLOW_MEW,
    HOLLOW_MS,
    PALETTE,
    color,
    interval_bars,
    legend_below,
    plain_ticks,
    value_ticks,
)
from . import summaries as echostats

# The presets the absolute figures draw (where measured): epoll, the default
# ring, the cheapest ring measured here, and the OpenAnolis server.
KEY_PRESETS = ("epoll", "default", "defer_taskrun_multishot", "poll_first")
GO_BASE = "go_net"


def _key_presets(summary: pd.DataFrame) -> list[str]:
    have = set(summary["preset"])
    return [p for p in KEY_PRESETS if p in have]


def _style(preset: str) -> dict[str, object]:
    i = KEY_PRESETS.index(preset) if preset in KEY_PRESETS else 4
    return {
        "color": EPOLL_COLOR if preset == "epoll" else color(i - 1 if preset != "epoll" else 6),
        "marker": "so^Dv"[min(i, 4)],
    }


def _against_connections(ax: Axes, g: pd.DataFrame, metric: str, preset: str, label: str, lw: float) -> None:
    """One preset's ``metric`` against connections (``g``: its summary rows),
    bars the 95 % interval across repetitions, in the preset's style."""
    st = _style(preset)
    ax.errorbar(
        g["connections"],
        g[metric],
        yerr=interval_bars(g[f"{metric}_low"], g[metric], g[f"{metric}_high"]),
        marker=st["marker"],
        ms=3,
        lw=lw,
        capsize=1.5,
        color=st["color"],
        label=label,
    )


def ratio_figure(ratios: pd.DataFrame, cells: list[tuple[int, int]]) -> Figure:
    """Each preset's requests/s and server CPU per request over epoll's (C
    servers, top) or Go net's (the Go reactor, bottom), formed within each
    repetition: median and 95 % interval, one marker per cell, presets sorted
    by their CPU ratio in the first cell. ``ratios``: echostats.ratios_to_base."""
    c_rows = ratios[ratios["base"] == "epoll"]
    go_rows = ratios[ratios["base"] == GO_BASE]
    first = cells[0]
    order = (
        c_rows[
            (c_rows["metric"] == "server_ns_per_request")
            & (c_rows["connections"] == first[0])
            & (c_rows["bytes"] == first[1])
        ]
        .sort_values("ratio", ascending=False)["preset"]
        .tolist()
    )
    order += sorted(set(c_rows["preset"]) - set(order))
    go_order = sorted(set(go_rows["preset"]))
    heights = [max(len(order), 1), max(len(go_order), 1)] if go_order else [max(len(order), 1)]
    fig, axes = plt.subplots(
        len(heights),
        2,
        figsize=(FIGURE_WIDTH_IN, 0.2 * sum(heights) + 1.6),
        sharex="col",
        squeeze=False,
        gridspec_kw={"height_ratios": heights},
    )
    markers = "os^D"
    for row, (rows, presets) in enumerate(((c_rows, order), (go_rows, go_order))[: len(heights)]):
        for col, (metric, title) in enumerate(
            (("rps", "requests/s over the base's"), ("server_ns_per_request", "server CPU per request over the base's"))
        ):
            ax = axes[row][col]
            for k, (c, b) in enumerate(cells):
                sel = rows[(rows["metric"] == metric) & (rows["connections"] == c) & (rows["bytes"] == b)]
                sel = sel.set_index("preset").reindex(presets)
                y = np.arange(len(presets)) + (k - (len(cells) - 1) / 2) * 0.25
                ax.errorbar(
                    sel["ratio"],
                    y,
                    xerr=interval_bars(sel["low"], sel["ratio"], sel["high"]),
                    fmt=markers[k % 4],
                    ms=3.5,
                    lw=1,
                    capsize=1.5,
                    color=color(k),
                    label=f"c = {c}, {b} B" if row == 0 and col == 0 else None,
                )
            ax.axvline(1.0, color="black", lw=0.7)
            ax.set_yticks(range(len(presets)), [labels.preset(p) for p in presets])
            ax.set_ylim(len(presets) - 0.5, -0.5)
            ax.set_xscale("log", base=2)
            if row == 0:
                ax.set_title(title)
            if col == 0 and row == 0:
                ax.set_ylabel("C servers / epoll")
            elif col == 0:
                # A two-row panel is shorter than its group's name drawn
                # sideways: the name goes above it.
                ax.set_title("Go servers / Go net", loc="left", fontsize="small")
            else:
                ax.tick_params(labelleft=False)
    for ax in axes[-1]:
        ax.set_xlabel("ratio (1: as the base; log scale)")
        plain_ticks(ax.xaxis)
    legend_below(fig, ncol=4)
    fig.tight_layout()
    return fig


def cpu_figure(summary: pd.DataFrame, floor_ns: float | None = None) -> Figure:
    """Server CPU ns per request against connections for epoll and the key
    rings (band: 95 % interval across repetitions), the 2w floor and the load
    generator's own CPU per request, one panel per message size."""
    sizes = sorted(summary["bytes"].unique())
    # Each size on its own scale: 64 KiB costs 20x what 128 B does, and on
    # one shared axis the small sizes' panels were a flat line at the foot.
    fig, axes = plt.subplots(1, len(sizes), figsize=(FIGURE_WIDTH_IN, 2.8), squeeze=False)
    for ax, size in zip(axes[0], sizes, strict=True):
        ax.set_ylim(bottom=0, auto=True)
        for preset in _key_presets(summary):
            g = summary[(summary["preset"] == preset) & (summary["bytes"] == size)].sort_values("connections")
            _against_connections(ax, g, "server_ns_per_request", preset, labels.preset(preset), lw=1.2)
        client = summary[(summary["preset"] == "epoll") & (summary["bytes"] == size)].sort_values("connections")
        if len(client):
            ax.plot(
                client["connections"],
                client["client_ns_per_request"],
                "--",
                color=PALETTE[7],
                lw=1,
                label="load generator (epoll cells)",
            )
        if floor_ns is not None:
            ax.axhline(floor_ns, color="black", ls=":", lw=0.9, label="2w: kernel work of two system calls")
        ax.set_xscale("log")
        value_ticks(ax.xaxis, summary["connections"])
        ax.set_xlabel("connections")
        ax.set_title(f"{size} B")
        ax.set_ylim(bottom=0)
    axes[0][0].set_ylabel("server CPU ns per request")
    legend_below(fig, ncol=3)
    fig.tight_layout()
    return fig


def latency_figure(summary: pd.DataFrame) -> Figure:
    """p50, p99 and p99.9 closed-loop latency at the smallest message size
    for the key presets, median and 95 % interval across repetitions (each
    connection sends again only when its echo is back, so the tail is
    understated)."""
    size = sorted(summary["bytes"].unique())[0]
    sub = summary[summary["bytes"] == size]
    fig, axes = plt.subplots(1, 3, figsize=(FIGURE_WIDTH_IN, 2.6), sharey=True)
    for ax, metric, title in zip(axes, ("p50_us", "p99_us", "p999_us"), ("p50", "p99", "p99.9"), strict=True):
        for preset in _key_presets(sub):
            g = sub[sub["preset"] == preset].sort_values("connections")
            _against_connections(ax, g, metric, preset, labels.preset(preset), lw=1.1)
        ax.set_xscale("log")
        value_ticks(ax.xaxis, sub["connections"])
        ax.set_yscale("log")
        ax.set_xlabel("connections")
        ax.set_title(title)
    axes[0].set_ylabel(f"latency, µs ({size} B, closed loop)")
    legend_below(fig, ncol=4)
    fig.tight_layout()
    return fig


def batch_figure(summary: pd.DataFrame) -> Figure:
    """The batch size each server reached at the smallest message size:
    SQEs per io_uring_enter (rings) and events per epoll_wait (epoll), median
    and 95 % interval across repetitions."""
    size = sorted(summary["bytes"].unique())[0]
    sub = summary[summary["bytes"] == size]
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, 2.6))
    for preset in _key_presets(sub):
        g = sub[sub["preset"] == preset].sort_values("connections")
        metric = "events_per_wait" if preset == "epoll" else "sqes_per_enter"
        label = "epoll (events per wait)" if preset == "epoll" else f"{labels.preset(preset)} (SQEs per enter)"
        _against_connections(ax, g, metric, preset, label, lw=1.1)
    ax.set_xscale("log")
    value_ticks(ax.xaxis, sub["connections"])
    ax.set_yscale("log")
    ax.set_xlabel("connections")
    ax.set_ylabel(f"batch size n ({size} B)")
    legend_below(fig, ncol=2)
    fig.tight_layout()
    return fig


# Each headline metric: its unit, digits and kind (iolab.estimation.occasion_spread.KINDS).
ECHO_METRICS = (
    ("rps", "", 0, "rate"),
    ("server_ns_per_request", "ns", 0, "time"),
    ("client_ns_per_request", "ns", 0, "time"),
    ("p99_us", "µs", 1, "time"),
    ("sqes_per_enter", "", 2, "count"),
    ("resched_ipis_per_request", "", 3, "count"),
)


def _echo_estimate(summary: pd.DataFrame, preset: str, c: int, size: int, metric: str) -> Estimate | None:
    row = summary[(summary["preset"] == preset) & (summary["connections"] == c) & (summary["bytes"] == size)]
    if not len(row) or f"{metric}_low" not in row:
        return None
    r = row.iloc[0]
    if isinstance(r.get(f"{metric}_estimate"), Estimate):
        return r[f"{metric}_estimate"]
    return Estimate(
        float(r[metric]),
        float(r[f"{metric}_low"]),
        float(r[f"{metric}_high"]),
        int(r["reps"]),
        float(r[f"{metric}_pred_low"]),
        float(r[f"{metric}_pred_high"]),
    )


def numbers(
    out: Outputs,
    *,
    echo_table: pd.DataFrame,
    summary: pd.DataFrame,
    floor: float,
    ratios: pd.DataFrame | None = None,
    flags: pd.DataFrame | None = None,
) -> None:
    """The echo section: every configuration's medians at the smallest size,
    the floor, what could not run, each preset's flags and its paired
    ratios to epoll (``ratios``: echostats.ratios_to_base)."""
    if flags is not None:
        out.rows("echo_preset_flags", flags)
    if ratios is not None:
        for r in ratios.itertuples():
            metric = "rps" if r.metric == "rps" else "cpu"
            out.number(
                f"echo_ratio_{r.preset}_c{r.connections}_{metric}", r.ratio, digits=2, estimate=r.estimate, kind="ratio"
            )
    conns = sorted(summary["connections"].unique())
    size = int(sorted(summary["bytes"].unique())[0])
    for preset in sorted(summary["preset"].unique()):
        for c in conns:
            for metric, unit, digits, kind in ECHO_METRICS:
                v = echostats.value(summary, preset, int(c), size, metric)
                if v == v:
                    out.number(
                        f"echo_{preset}_c{c}_{metric}",
                        v,
                        unit=unit,
                        digits=digits,
                        estimate=_echo_estimate(summary, preset, int(c), size, metric),
                        kind=kind,
                    )
    for c in conns:
        # The median over configurations: how busy each side kept its CPU.
        cell = summary[(summary["connections"] == c) & (summary["bytes"] == size)]
        for side in ("client", "server"):
            busy = cell[f"{side}_busy"].dropna() if f"{side}_busy" in cell else cell.iloc[0:0]
            if len(busy):
                out.number(f"echo_{side}_busy_c{int(c)}_pct", 100 * float(busy.median()), unit="%")
    out.number("echo_floor_ns", floor, unit="ns")
    out.text("echo_setup", echostats.setup_note(echo_table))
    out.number("echo_bytes", size)
    out.text("echo_connections", ", ".join(str(int(c)) for c in conns))
    out.number("echo_repeats", int(echo_table["rep"].nunique()))
    out.number("echo_cells", len(echo_table))
    out.number("echo_cells_ok", int((echo_table["status"] == "ok").sum()))
    out.text("echo_unavailable", echostats.unavailable_text(echo_table))


def cell_lengths(out: Outputs, every_setup: pd.DataFrame) -> None:
    """How long the run's echo cells ran (warm-up included), against the
    sources' 60 s, over every setup (``every_setup``: the node's whole echo
    table): the shortest, and the longest where a setup ran longer cells."""
    if "loaded_s" not in every_setup:
        return
    loaded = every_setup["loaded_s"].dropna()
    if len(loaded):
        out.number("echo_cell_seconds", float(loaded.min()), unit="s", digits=2)
        if loaded.max() > loaded.min():
            out.number("echo_cell_seconds_max", float(loaded.max()), unit="s", digits=2)


def _preset_points(ax: Axes, x: np.ndarray, g: pd.DataFrame, i: int, label: str | None, hollow: bool = False) -> None:
    """One preset's ratios (``g``: ratio, low, high) at ``x`` with their
    intervals, in the marker and colour of its place ``i`` among the modern
    figure's presets."""
    ax.errorbar(
        x,
        g["ratio"],
        yerr=interval_bars(g["low"], g["ratio"], g["high"]),
        fmt="so^Dv<>"[i % 7],
        ms=HOLLOW_MS if hollow else 4,
        mew=HOLLOW_MEW,
        mfc="none" if hollow else None,
        capsize=1.5,
        color=color(i),
        label=label,
    )


def _offsets(ticks: int, i: int, presets: int) -> np.ndarray:
    """Preset ``i``'s x positions beside the others' at each tick."""
    return np.arange(ticks) + (i - (presets - 1) / 2) * 0.12


def _epoll_and_goal(ax: Axes, goal: float) -> None:
    ax.axhline(1.0, color=EPOLL_COLOR, lw=1, label="epoll")
    ax.axhline(goal, color="black", ls="--", lw=0.8, label=f"goal: {goal:.2f}x epoll")


def _fixed_rate_panel(
    ax: Axes, fixed: pd.DataFrame, loads: list[float], presets: list[str], goal: float, cell: str
) -> None:
    """modern_figure's last panel: each preset at each fixed offered rate,
    the same colours and markers as the saturated panels."""
    for i, preset in enumerate(presets):
        g = fixed[fixed["preset"] == preset].set_index("load").reindex(loads)
        if not g["ratio"].isna().all():
            _preset_points(ax, _offsets(len(loads), i, len(presets)), g, i, labels.preset(preset))
    rates = fixed.groupby("load")["offered_rps"].median()
    _epoll_and_goal(ax, goal)
    ax.set_xticks(range(len(loads)))
    ax.set_xticklabels([f"{load:.0%}\n{rates[load] / 1000:.1f}k" for load in loads], fontsize=6)
    ax.set_xlim(-0.6, len(loads) - 0.4)
    ax.set_title(f"fixed rate\n{cell}" if cell else "fixed rate", fontsize=8)


def clients_figure(view: pd.DataFrame) -> Figure:
    """The default ring over epoll against connections under each client
    setup the node ran (echostats.clients_view): requests/s (left) and
    server CPU per request (right), the median paired ratio over
    repetitions with its 95 % interval; 1 dotted."""
    if view.empty:
        fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, 1.0))
        ax.axis("off")
        ax.text(
            0.5,
            0.5,
            "The default ring and epoll were planned under two client setups, and measured under fewer",
            ha="center",
            va="center",
            fontsize=8,
        )
        return fig
    fig, axes = plt.subplots(1, 2, figsize=(FIGURE_WIDTH_IN, 2.6), sharex=True)
    for ax, metric, title in zip(
        axes, ("rps", "server_ns_per_request"), ("requests/s", "server CPU per request"), strict=True
    ):
        for i, (setup, g) in enumerate(view[view["metric"] == metric].groupby("setup", sort=True)):
            g = g.sort_values("connections")
            ax.errorbar(
                g["connections"],
                g["ratio"],
                yerr=interval_bars(g["low"], g["ratio"], g["high"]),
                marker="os"[i % 2],
                ms=3,
                lw=1,
                capsize=1.5,
                color=color(i),
                label=setup if metric == "rps" else None,
            )
        ax.axhline(1.0, color="black", lw=0.8, ls=":")
        ax.set_xscale("log")
        value_ticks(ax.xaxis, view["connections"])
        ax.set_xlabel("connections")
        ax.set_title(title)
    axes[0].set_ylabel("default ring / epoll")
    legend_below(fig, ncol=2)
    fig.tight_layout()
    return fig


def modern_figure(
    view: pd.DataFrame,
    goal: float,
    inert: set[tuple[str, int, int]] | None = None,
    floor: dict[tuple[int, int], float] | None = None,
    fixed: pd.DataFrame | None = None,
    fixed_cell: str = "",
) -> Figure:
    """Server CPU per request over epoll's for the modern presets and the
    older ring (``stats.ratios``): one panel per requests in flight, one
    marker per cell (connections and message size) and preset, bars the
    95 % interval across repetitions; epoll at 1 and the study's goal
    dashed. Cells in ``inert`` ((preset, depth, bytes) whose every feature
    the counters show idle: ``stats.all_inert_cells``) are drawn hollow.
    ``floor`` ((connections, bytes) -> the 2w floor over epoll's cost:
    ``stats.floor_ratios``) marks each one-in-flight cell with a dotted
    dash: no server goes below it on the kernel work of a recv and a send.
    ``fixed`` (``latency.fixed_rate_cpu``: each preset's server CPU per
    request over epoll's when every preset is offered the same requests/s)
    adds a last panel beside the saturated ones, one tick per offered rate,
    titled with ``fixed_cell`` (its connections and message size)."""
    cpu = view[view["metric"] == "server_ns_per_request"] if len(view) else view
    if not len(cpu):
        # Presets configured, no cell of theirs measured (the echo table's
        # reason column says why): the figure says so rather than vanish.
        fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, 1.2))
        ax.text(0.5, 0.5, "no cell of a modern preset was measured in this run", ha="center", va="center")
        ax.set_axis_off()
        return fig
    depths = sorted(cpu["pipeline"].unique())
    widths = [cpu[cpu["pipeline"] == d][["connections", "bytes"]].drop_duplicates().shape[0] for d in depths]
    fixed = fixed if fixed is not None and len(fixed) else None
    loads = sorted(fixed["load"].unique()) if fixed is not None else []
    fig, axes = plt.subplots(
        1,
        len(depths) + bool(loads),
        figsize=(FIGURE_WIDTH_IN, 3.2),
        sharey=True,
        squeeze=False,
        gridspec_kw={"width_ratios": widths + ([max(len(loads), 3)] if loads else [])},
    )
    # One colour and marker per preset across the panels.
    presets = sorted(set(cpu["preset"]) | (set(fixed["preset"]) if fixed is not None else set()))
    for ax, depth in zip(axes[0], depths, strict=False):
        here = cpu[cpu["pipeline"] == depth]
        cells = sorted({(int(c), int(b)) for c, b in zip(here["connections"], here["bytes"], strict=True)})
        for i, preset in enumerate(presets):
            if preset not in set(here["preset"]):
                continue
            g = here[here["preset"] == preset].set_index(["connections", "bytes"]).reindex(cells)
            x = _offsets(len(cells), i, len(presets))
            idle = np.array([(preset, int(depth), b) in (inert or set()) for _, b in cells])
            label: str | None = labels.preset(preset)  # on the first of the two draws
            for show, hollow in ((~idle, False), (idle, True)):
                if show.any():
                    _preset_points(ax, x[show], g[show], i, label, hollow)
                    label = None
        marks = [(x, (floor or {}).get(cell)) for x, cell in enumerate(cells)] if depth == 1 else []
        marks = [(x, y) for x, y in marks if y is not None]
        if marks:
            xs, ys = zip(*marks, strict=True)
            ax.hlines(ys, np.array(xs) - 0.35, np.array(xs) + 0.35, color="black", ls=":", lw=1.2, label="2w floor")
        _epoll_and_goal(ax, goal)
        ax.set_xticks(range(len(cells)))
        ax.set_xticklabels([f"{c}\n{b // 1024}K" if b >= 1024 else f"{c}\n{b}" for c, b in cells], fontsize=6)
        ax.set_yscale("log", base=2)
        plain_ticks(ax.yaxis)
        ax.set_title("one request in flight" if depth == 1 else f"{depth} in flight", fontsize=8)
    if fixed is not None:
        _fixed_rate_panel(axes[0][-1], fixed, loads, presets, goal, fixed_cell)
    axes[0][0].set_ylabel("server CPU per request / epoll's")
    # One label under the panels: the narrow pipelined panels cannot hold one each.
    keys = ["connections / message (B; K: KiB)", "hollow: every feature of the preset inert"]
    if loads:
        keys.insert(1, "fixed rate: share of the slowest capacity, thousand requests/s")
    fig.supxlabel("; ".join(keys), fontsize=7)
    legend_below(fig, ncol=4)
    fig.tight_layout()
    return fig
