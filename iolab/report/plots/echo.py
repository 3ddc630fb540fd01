"""The echo notebook's figures: every preset against epoll as paired ratios,
the servers' CPU per request against the 2w floor, latency and batch size.
Every estimate is drawn with its 95 % interval across repetitions."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .style import EPOLL_COLOR, PALETTE, TEXT_WIDTH_IN, color, interval_bars, legend_below, plain_ticks

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
        figsize=(TEXT_WIDTH_IN, 0.2 * sum(heights) + 1.6),
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
            ax.set_yticks(range(len(presets)), presets)
            ax.set_ylim(len(presets) - 0.5, -0.5)
            ax.set_xscale("log", base=2)
            if row == 0:
                ax.set_title(title)
            if col == 0:
                ax.set_ylabel("C servers / epoll" if row == 0 else "Go servers / Go net")
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
    fig, axes = plt.subplots(1, len(sizes), figsize=(TEXT_WIDTH_IN, 2.8), sharey=True, squeeze=False)
    for ax, size in zip(axes[0], sizes, strict=True):
        for preset in _key_presets(summary):
            g = summary[(summary["preset"] == preset) & (summary["bytes"] == size)].sort_values("connections")
            st = _style(preset)
            ax.errorbar(
                g["connections"],
                g["server_ns_per_request"],
                yerr=interval_bars(
                    g["server_ns_per_request_low"], g["server_ns_per_request"], g["server_ns_per_request_high"]
                ),
                marker=st["marker"],
                ms=3,
                lw=1.2,
                capsize=1.5,
                color=st["color"],
                label=preset,
            )
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
        ax.set_xlabel("connections")
        ax.set_title(f"{size} B")
    axes[0][0].set_ylabel("server CPU ns per request")
    axes[0][0].set_ylim(bottom=0)
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
    fig, axes = plt.subplots(1, 3, figsize=(TEXT_WIDTH_IN, 2.6), sharey=True)
    for ax, metric, title in zip(axes, ("p50_us", "p99_us", "p999_us"), ("p50", "p99", "p99.9"), strict=True):
        for preset in _key_presets(sub):
            g = sub[sub["preset"] == preset].sort_values("connections")
            st = _style(preset)
            ax.errorbar(
                g["connections"],
                g[metric],
                yerr=interval_bars(g[f"{metric}_low"], g[metric], g[f"{metric}_high"]),
                marker=st["marker"],
                ms=3,
                lw=1.1,
                capsize=1.5,
                color=st["color"],
                label=preset,
            )
        ax.set_xscale("log")
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
    fig, ax = plt.subplots(figsize=(TEXT_WIDTH_IN, 2.6))
    for preset in _key_presets(sub):
        g = sub[sub["preset"] == preset].sort_values("connections")
        metric = "events_per_wait" if preset == "epoll" else "sqes_per_enter"
        st = _style(preset)
        ax.errorbar(
            g["connections"],
            g[metric],
            yerr=interval_bars(g[f"{metric}_low"], g[metric], g[f"{metric}_high"]),
            marker=st["marker"],
            ms=3,
            lw=1.1,
            capsize=1.5,
            color=st["color"],
            label="epoll (events per wait)" if preset == "epoll" else f"{preset} (SQEs per enter)",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("connections")
    ax.set_ylabel(f"batch size n ({size} B)")
    legend_below(fig, ncol=2)
    fig.tight_layout()
    return fig


def open_loop_figure(curves: pd.DataFrame, ratios: pd.DataFrame) -> Figure:
    """One question: does a server's tail latency grow with the offered load,
    and is io_uring's above or below epoll's? Left: p99 against the offered
    load (share of each server's closed-loop capacity), median over
    repetitions with its 95 % interval as a band, the closed-loop cell at
    load 1 hollow. Right: each preset's p99 over epoll's, formed within each
    repetition (``latency.paired_ratios``), median and 95 % interval: the
    pairing removes the drift between repetitions that widens the left
    bands. p50 and p99.9 are in the notebook's table and the text."""
    fig, (ax, ax_r) = plt.subplots(1, 2, figsize=(TEXT_WIDTH_IN, 2.7), sharex=True)
    presets = sorted(curves["preset"].unique(), key=lambda p: (p != "epoll", p))
    colors = {p: EPOLL_COLOR if p == "epoll" else color(i) for i, p in enumerate(presets)}
    for preset in presets:
        c = colors[preset]
        g = curves[(curves["preset"] == preset) & (curves["phase"] == "open")].sort_values("load")
        ax.plot(g["load"], g["p99_us"], color=c, marker="o", ms=3, lw=1.2, label=f"{preset}, open loop")
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
                label=f"{preset}, closed loop at capacity",
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
