"""The nodes notebook's figures: the cost-model terms per node and the
native/virtual ratios in the HPC HUB style."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.container import Container
from matplotlib.figure import Figure

from .. import labels
from .style import FIGURE_WIDTH_IN, HOLLOW_MEW, HOLLOW_MS, color, interval_bars, legend_below, transport_style

SMALL_BYTES = 256  # the HPC HUB figures' small-message panels


def costs_figure(costs: pd.DataFrame) -> Figure:
    """s and w per node, coloured by node, each the median over repetitions
    with its 95 % interval."""
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, 2.6))
    metrics = [("s_ns", "s (null syscall)"), ("w_send_ns", "w, send"), ("w_recv_ns", "w, recv")]
    width = 0.8 / max(len(costs), 1)
    for i, row in enumerate(costs.itertuples()):
        values = [getattr(row, m) for m, _ in metrics]
        lows = [getattr(row, f"{m}_low", float("nan")) for m, _ in metrics]
        highs = [getattr(row, f"{m}_high", float("nan")) for m, _ in metrics]
        ax.bar(
            [k + i * width for k in range(len(metrics))],
            values,
            width,
            color=color(i),
            yerr=interval_bars(lows, values, highs),
            capsize=2,
            label=f"{row.node} ({row.kind}, mitigations {row.mitigations})",
        )
    ax.set_xticks([k + width * (len(costs) - 1) / 2 for k in range(len(metrics))], [lab for _, lab in metrics])
    ax.set_ylabel("ns per call")
    legend_below(fig, ncol=2)
    fig.tight_layout()
    return fig


def mpi_ratio_figure(ratios: pd.DataFrame, title: str, seed_lines: dict | None = None) -> Figure:
    """Native/virtual MPI time ratio per size and benchmark, every size (top)
    and up to 256 B (bottom), as HPC HUB drew them; dashed: the source's
    quoted figures."""
    benches = [b for b in ("pingpong", "bcast", "allreduce", "alltoall") if b in set(ratios["bench"])]
    fig, axes = plt.subplots(2, max(len(benches), 1), figsize=(FIGURE_WIDTH_IN, 4.4), sharey="row", squeeze=False)
    handles: dict[str, Artist | Container] = {}
    for col, bench in enumerate(benches):
        for row, ax in enumerate(axes[:, col]):
            sel = ratios[ratios["bench"] == bench]
            if row == 1:
                sel = sel[sel["bytes"] <= SMALL_BYTES]
            for (transport, p), g in sel.groupby(["transport", "ranks"]):
                g = g.sort_values("bytes")
                c, marker = transport_style(transport)
                over = bool(g["oversubscribed"].any())
                h = ax.errorbar(
                    g["bytes"],
                    g["ratio"],
                    yerr=interval_bars(g["low"], g["ratio"], g["high"]) if "low" in g else None,
                    color=c,
                    marker=marker if p == 2 else "v",
                    ms=HOLLOW_MS if over else 2.5,
                    mew=HOLLOW_MEW,
                    lw=0.8,
                    capsize=1,
                    mfc="none" if over else c,
                )
                handles.setdefault(f"{transport}, p = {p}" + (", oversubscribed" if over else ""), h)
            for (value, label), style in zip((seed_lines or {}).get(bench, []), ("--", ":"), strict=False):
                handles.setdefault(label, ax.axhline(value, color="grey", lw=0.7, ls=style))
            ax.axhline(1, color="black", lw=0.6)
            ax.set_xscale("log", base=2)
            ax.set_title(bench if row == 0 else f"{bench}, ≤ {SMALL_BYTES} B")
            ax.set_xlabel("bytes")
    axes[0][0].set_ylabel("time ratio")
    axes[1][0].set_ylabel("time ratio")
    fig.suptitle(title)
    legend_below(fig, list(handles.values()), list(handles), ncol=3)
    fig.tight_layout()
    return fig


def echo_ratio_figure(ratios: pd.DataFrame, title: str) -> Figure:
    """Echo metric ratios per preset between the two node kinds (below 1:
    the second node is worse)."""
    metrics = list(dict.fromkeys(ratios["metric"]))
    fig, axes = plt.subplots(1, max(len(metrics), 1), figsize=(FIGURE_WIDTH_IN, 3.0), sharey=True, squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=False):
        sel = ratios[ratios["metric"] == metric]
        for i, (c, g) in enumerate(sel.groupby("connections")):
            g = g.sort_values("preset")
            ax.plot(g["ratio"], g["preset"].map(labels.preset), "o", ms=3, color=color(i), label=f"c = {c}")
        ax.axvline(1, color="black", lw=0.6)
        ax.set_title(labels.metric(metric))
    fig.suptitle(title)
    legend_below(fig, ncol=4)
    fig.tight_layout()
    return fig
