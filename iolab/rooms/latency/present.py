"""The open-loop room in the paper: the latency figure by offered load and
the paragraph's numbers (caption: echo_open_loop_latency.rst here)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ...report import labels
from ...report.outputs import Outputs
from ...report.plots.style import EPOLL_COLOR, FIGURE_WIDTH_IN, color, interval_bars, legend_below, plain_ticks
from . import stats as latency


def open_loop_figure(curves: pd.DataFrame, ratios: pd.DataFrame) -> Figure:
    """One question: does a server's tail latency grow with the offered load,
    and is io_uring's above or below epoll's? Left: p99 against the offered
    load (share of each server's closed-loop capacity), median over
    repetitions with its 95 % interval as a band, the closed-loop cell at
    load 1 hollow. Right: each preset's p99 over epoll's, formed within each
    repetition (``latency.paired_ratios``), median and 95 % interval: the
    pairing removes the drift between repetitions that widens the left
    bands. p50 and p99.9 are in the notebook's table and the text."""
    fig, (ax, ax_r) = plt.subplots(1, 2, figsize=(FIGURE_WIDTH_IN, 2.7), sharex=True)
    presets = sorted(curves["preset"].unique(), key=lambda p: (p != "epoll", p))
    colors = {p: EPOLL_COLOR if p == "epoll" else color(i) for i, p in enumerate(presets)}
    for preset in presets:
        c = colors[preset]
        g = curves[(curves["preset"] == preset) & (curves["phase"] == "open")].sort_values("load")
        ax.plot(g["load"], g["p99_us"], color=c, marker="o", ms=3, lw=1.2, label=f"{labels.preset(preset)}, open loop")
        ok = np.isfinite(g["p99_us_low"]) & np.isfinite(g["p99_us_high"])
        ax.fill_between(g["load"][ok], g["p99_us_low"][ok], g["p99_us_high"][ok], color=c, alpha=0.15, lw=0)
        cap = curves[(curves["preset"] == preset) & (curves["phase"] == "capacity")]
        if len(cap):
            ax.errorbar(
                cap["load"],
                cap["p99_us"],
                yerr=interval_bars(cap["p99_us_low"], cap["p99_us"], cap["p99_us_high"]),
                marker="o",
                mfc="none",
                color=c,
                ms=6,
                ls="none",
                capsize=2,
                label=f"{labels.preset(preset)}, closed loop at capacity",
            )
    ax.set_yscale("log")
    ax.set_title("p99 latency")
    ax.set_xlabel("offered load / capacity")
    ax.set_ylabel("p99 latency (µs)")
    for preset, g in ratios.groupby("preset", sort=True):
        g = g.sort_values("load")
        ax_r.errorbar(
            g["load"],
            g["ratio"],
            yerr=interval_bars(g["low"], g["ratio"], g["high"]),
            color=colors.get(preset, color(0)),
            marker="s",
            ms=3,
            lw=1.2,
            capsize=2,
        )
    ax_r.axhline(1.0, color="black", lw=0.8, ls=":")
    ax_r.set_yscale("log")
    plain_ticks(ax_r.yaxis)
    ax_r.set_title("p99 over epoll's, same repetition")
    ax_r.set_xlabel("offered load / capacity")
    ax_r.set_ylabel("ratio (1: as epoll)")
    if ratios.empty:
        ax_r.text(0.5, 0.5, "no preset ran beside epoll", ha="center", va="center", transform=ax_r.transAxes)
    legend_below(fig, ncol=2)
    fig.tight_layout()
    return fig


def fixed_rate_text(fixed: pd.DataFrame) -> str:
    """Server CPU per request over epoll's at each fixed rate, one clause
    per rate: the rate, epoll's cost, and each preset's ratio with its
    interval."""
    clauses = []
    for load, g in fixed.groupby("load", sort=True):
        first = g.iloc[0]
        ratios = "; ".join(
            f"{r.preset} {r.ratio:.2f}"
            + (f" [{r.low:.2f}, {r.high:.2f}]" if r.estimate.bounded else " (no interval: < 6 repetitions)")
            for r in g.itertuples()
        )
        clauses.append(
            f"at {first['offered_rps']:,.0f} requests/s ({load:.0%} of the slowest capacity; epoll "
            f"{first['base_ns'] / 1000:.1f} µs of server CPU per request): {ratios}"
        )
    return "; ".join(clauses) if clauses else "not measured in this run (no fixed-rate cells beside epoll)"


def numbers(out: Outputs, *, table: pd.DataFrame, curves: pd.DataFrame) -> None:
    """The open-loop latency paragraph: the setting, each preset's capacity,
    p50/p99/p99.9 at every offered load, how closely the schedule was kept,
    the io_uring/epoll p99 ratio per load where both ran, and server CPU per
    request over epoll's at the fixed rates."""
    if curves.empty:
        out.text("open_loop_presets", "none measured")
        return
    first = table.iloc[0]
    out.number("open_loop_connections", int(first["connections"]))
    out.number("open_loop_bytes", int(first["bytes"]))
    out.number("open_loop_repeats", int(table["rep"].nunique()))
    out.text("open_loop_presets", ", ".join(sorted(curves["preset"].unique())))
    open_loads = sorted(set(curves.loc[curves["phase"] == "open", "load"]))
    loads = [f"{x * 100:g}" for x in open_loads]
    out.text("open_loop_loads", (", ".join(loads[:-1]) + " and " if len(loads) > 1 else "") + loads[-1] + " %")
    for r in curves.itertuples():
        tag = (
            r.phase if r.phase == "capacity" else f"{'fixed' if r.phase == 'fixed' else 'load'}{round(r.load * 100):d}"
        )
        key = f"open_loop_{r.preset}_{tag}"
        if r.phase == "capacity":
            out.number(f"{key}_rps", r.rps, estimate=r.rps_estimate, kind="rate")
        if r.phase == "open" and math.isfinite(getattr(r, "achieved_over_offered", math.nan)):
            # Each open-loop cell's delivered share of its offered rate:
            # iolab.report.checks flags a cell that fell short.
            out.number(f"{key}_achieved", float(r.achieved_over_offered), digits=3)
        for name in latency.PERCENTILES:
            value = getattr(r, f"{name}_us")
            out.number(
                f"{key}_{name}_us", value, unit="µs", digits=0, estimate=getattr(r, f"{name}_us_estimate"), kind="time"
            )
            out.number(f"{key}_{name}_us_merged", getattr(r, f"{name}_us_merged"), unit="µs", digits=0)
    parts = [
        f"{r.preset}/epoll at {r.load:.0%} of capacity {r.ratio:.2f}"
        + (f" [{r.low:.2f}, {r.high:.2f}]" if r.estimate.bounded else " (no interval: < 6 repetitions)")
        for r in latency.paired_ratios(table).itertuples()
    ]
    out.text("open_loop_p99_vs_epoll", "; ".join(parts) or "no preset ran beside epoll")
    out.text("open_loop_fixed_rate_cpu", fixed_rate_text(latency.fixed_rate_cpu(table)))
    achieved = curves["achieved_over_offered"].dropna() if "achieved_over_offered" in curves else pd.Series([])
    if len(achieved):
        out.number("open_loop_achieved_min", float(achieved.min()), digits=4)
        out.number("open_loop_achieved_max", float(achieved.max()), digits=4)
