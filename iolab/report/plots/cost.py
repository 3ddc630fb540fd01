"""The cost-model notebook's figures: s, w, t(n) and the per-request model."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ...estimation.intervals import across_reps
from ...rooms.cost_probes import cost_model as costmodel
from .. import labels
from .style import (
    FIGURE_WIDTH_IN,
    HOLLOW_MEW,
    HOLLOW_MS,
    PALETTE,
    color,
    drawn_caption,
    interval_bars,
    legend_below,
    plain_ticks,
    size_axes,
)


def rep_medians(measured: pd.DataFrame, by: list[str], value: str) -> pd.DataFrame:
    """Per group: each repetition's median of ``value``, then their median
    with its 95 % interval across repetitions (columns value, low, high)."""
    per_rep = measured.groupby([*by, "rep"])[value].median().reset_index()
    rows = []
    for key, g in per_rep.groupby(by, sort=True):
        e = across_reps(g[value].to_numpy(float), predict=False)
        rows.append(
            {
                **dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True)),
                "value": e.value,
                "low": e.low,
                "high": e.high,
                "reps": e.n,
            }
        )
    return pd.DataFrame(rows)


def syscall_cost_figure(measured: pd.DataFrame, overall: pd.DataFrame) -> Figure:
    """Left: each repetition's median ns per call, by variant, with the
    median over repetitions and its 95 % interval (black). Right: every batch
    of the first repetition in run order: drift, and that warm-up sufficed."""
    fig, (ax, ax_t) = plt.subplots(1, 2, figsize=(FIGURE_WIDTH_IN, 2.7), gridspec_kw={"width_ratios": [1, 1.2]})
    variants = sorted(measured["variant"].unique())
    per_rep = measured.groupby(["variant", "rep"])["ns_per_call"].median().reset_index()
    for vi, variant in enumerate(variants):
        pts = per_rep[per_rep["variant"] == variant]
        jitter = np.linspace(-0.15, 0.15, len(pts)) if len(pts) > 1 else np.zeros(len(pts))
        ax.plot(
            vi - 0.1 + jitter,
            pts["ns_per_call"],
            "o",
            ms=3,
            color=color(vi),
            alpha=0.7,
            label="a repetition's median" if vi == 0 else None,
        )
        s = overall[overall["variant"] == variant]
        if not s.empty:
            r = s.iloc[0]
            ax.errorbar(
                [vi + 0.25],
                [r["median_ns"]],
                yerr=interval_bars([r["ci_low_ns"]], [r["median_ns"]], [r["ci_high_ns"]]),
                fmt="s",
                color="black",
                ms=3.5,
                capsize=3,
                lw=1.2,
                label="median, 95 % interval" if vi == 0 else None,
            )
    ax.set_xticks(range(len(variants)), [labels.variant(v) for v in variants])
    ax.set_xlim(-0.6, len(variants) - 0.4)
    ax.set_ylabel("ns per call")
    ax.set_title(f"across {per_rep['rep'].nunique()} repetitions")
    first = measured[measured["rep"] == measured["rep"].min()]
    for vi, variant in enumerate(variants):
        rows = first[first["variant"] == variant]
        ax_t.plot(
            rows["seq"], rows["ns_per_call"], ".", ms=1.5, alpha=0.5, color=color(vi), label=labels.variant(variant)
        )
    lo, hi = first["ns_per_call"].quantile([0.005, 0.995])
    ax_t.set_ylim(lo - 0.1 * (hi - lo) - 1, hi + 0.1 * (hi - lo) + 1)
    ax_t.set_xlabel("batch in run order (first repetition)")
    ax_t.set_title("every batch: drift over one run")
    legend_below(fig, ncol=4)
    fig.tight_layout()
    return fig


def sendrecv_figure(measured: pd.DataFrame) -> Figure:
    """Median ns per send/recv call against message size, a panel per
    operation, a line per transport, pattern and ACK regime; band: the 95 %
    interval across repetitions of each repetition's median."""
    ops = [op for op in ("send", "recv") if op in set(measured["variant"])]
    fig, axes = plt.subplots(1, len(ops), figsize=(FIGURE_WIDTH_IN, 2.7), sharey=True, squeeze=False)
    table = rep_medians(measured, ["variant", "transport", "pattern", "ack", "bytes"], "ns_per_call")
    groups = list(table.groupby(["transport", "pattern", "ack"], sort=True))
    for ax, op in zip(axes[0], ops, strict=True):
        for i, ((transport, pattern, ack), g) in enumerate(groups):
            g = g[g["variant"] == op].sort_values("bytes")
            if g.empty:
                continue
            label = f"{transport}, {pattern}" + ("" if ack == "-" else f", {ack}")
            ax.plot(
                g["bytes"],
                g["value"],
                "-" if transport == "tcp" else "--",
                marker="o",
                ms=2.5,
                color=color(i),
                label=label,
            )
            ok = np.isfinite(g["low"]) & np.isfinite(g["high"])
            ax.fill_between(g["bytes"][ok], g["low"][ok], g["high"][ok], alpha=0.15, color=color(i), lw=0)
        ax.set_xscale("log", base=2)
        sizes = sorted(set(measured["bytes"]))
        ax.set_xticks(sizes, [str(b) for b in sizes])
        ax.set_xlabel("message bytes")
        ax.set_title(f"{op}(2): s + w per call")
        ax.set_ylim(bottom=0)
    axes[0][0].set_ylabel("ns per call")
    legend_below(fig, ncol=3)
    fig.tight_layout()
    return fig


def uring_batch_figure(uring: pd.DataFrame, nop: pd.DataFrame, inputs: costmodel.CostInputs) -> Figure:
    """Left: ns per io_uring_enter against n per operation on the default
    ring (band: 95 % interval across repetitions), the other ring presets
    thin, and models (A) and (B) fitted. Right: ns per SQE, and NOPs for
    io_uring's own share."""
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(FIGURE_WIDTH_IN, 2.9))
    table = rep_medians(uring, ["variant", "pattern", "n"], "ns_per_call")
    for oi, op in enumerate(("send", "recv")):
        c = color(oi)
        for preset in sorted(set(table["pattern"])):
            g = table[(table["variant"] == op) & (table["pattern"] == preset)].sort_values("n")
            if g.empty:
                continue
            if preset == "default":
                ax.plot(g["n"], g["value"], marker="o", ms=2.5, lw=1.3, color=c, label=f"{op}, default ring")
                ok = np.isfinite(g["low"]) & np.isfinite(g["high"])
                ax.fill_between(g["n"][ok], g["low"][ok], g["high"][ok], color=c, alpha=0.2, lw=0)
                ax2.errorbar(
                    g["n"],
                    g["value"] / g["n"],
                    yerr=interval_bars(g["low"], g["value"], g["high"]) / g["n"].to_numpy(),
                    marker="o",
                    ms=2.5,
                    lw=1.3,
                    color=c,
                    capsize=1.5,
                    label=f"{op}, default ring",
                )
            else:
                ax.plot(
                    g["n"],
                    g["value"],
                    lw=0.6,
                    alpha=0.45,
                    color=c,
                    label=f"{op}, other ring presets"
                    if preset == sorted(set(table["pattern"]) - {"default"})[0]
                    else None,
                )
        n = np.logspace(0, np.log2(max(uring["n"])), 50, base=2)
        ax.plot(
            n,
            inputs.s + inputs.fits[op]["B"].batch_time(n),
            ":",
            color="black",
            lw=0.9,
            label="model B fit" if oi == 0 else None,
        )
        ax.plot(
            n,
            inputs.s + inputs.fits[op]["A"].batch_time(n),
            "--",
            color="grey",
            lw=0.9,
            label="model A fit" if oi == 0 else None,
        )
    nop_n = nop[nop["n"] > 0]
    if not nop_n.empty:
        g = nop_n[nop_n["pattern"] == "default"] if "default" in set(nop_n["pattern"]) else nop_n
        t = rep_medians(g, ["n"], "ns_per_sqe").sort_values("n")
        ax2.errorbar(
            t["n"],
            t["value"],
            yerr=interval_bars(t["low"], t["value"], t["high"]),
            color=PALETTE[6],
            marker="s",
            ms=2.5,
            lw=1,
            capsize=1.5,
            label="NOP, default ring",
        )
    size_axes(ax, "SQEs per io_uring_enter (n)", "one enter: U(n) = s + T(n)")
    size_axes(ax2, "SQEs per io_uring_enter (n)", "per SQE (NOP: io_uring's own share)")
    ax.set_ylabel("ns per io_uring_enter")
    ax2.set_ylabel("ns per SQE")
    legend_below(fig, ncol=3)
    fig.tight_layout()
    return fig


def _nstar_label(summary: pd.DataFrame, model: str) -> str:
    """n* with its 95 % interval across repetitions, as the legend gives it."""
    r = summary.loc[f"nstar_{model}"]

    def show(x: float) -> str:
        return "∞" if not np.isfinite(x) else f"{x:.1f}"

    if not np.isfinite(r["value"]):
        return f"n* ({model}): never"
    interval = f", 95 % interval {show(r['low'])}–{show(r['high'])}" if np.isfinite(r["low"]) else ""
    return f"n* ({model}) = {show(r['value'])}{interval}"


def per_request_figure(
    inputs: costmodel.CostInputs,
    summary: pd.DataFrame,
    per_rep: dict[int, costmodel.CostInputs] | None = None,
    echo: pd.DataFrame | None = None,
) -> Figure:
    """Two questions, a panel each. Left: from which batch size n would
    io_uring's request (one recv + one send SQE) cost less CPU than epoll's
    two system calls? Epoll flat, io_uring under models (A) and (B), each
    with its 95 % interval across repetitions (the model fitted to each
    repetition alone) as a band, the kernel work 2w, and each crossover n*
    as a line with its interval as a shaded span (named in the legend).
    Right, when the echo servers ran (``echostats.model_overlay``): how far
    each real server's CPU per request sits above what the model prices it
    at (epoll: its two system calls; io_uring: model B at the batch size the
    server reached), a row per server, a marker per connection count, bars
    the measured 95 % interval."""
    n = np.logspace(0, 9, 120, base=2)
    has_servers = echo is not None and len(echo) > 0
    if has_servers:
        fig, (ax, ax_r) = plt.subplots(1, 2, figsize=(FIGURE_WIDTH_IN, 3.4), gridspec_kw={"width_ratios": [1.35, 1]})
    else:
        fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, 3.1))
    epoll = summary.loc["epoll_request", "value"]
    ax.axhline(epoll, color=PALETTE[6], lw=1.5, label="epoll: 2s + 2w")
    lo, hi = summary.loc["epoll_request", "low"], summary.loc["epoll_request", "high"]
    drawn: set[str] = set()
    if np.isfinite(lo) and np.isfinite(hi):
        ax.axhspan(lo, hi, color=PALETTE[6], alpha=0.1, lw=0)
        drawn.add("epoll band")
    for model, c, ls, label in (
        ("A", PALETTE[1], "--", "io_uring, model A: (t + s)/n"),
        ("B", PALETTE[0], "-", "io_uring, model B: (s + a)/n + b"),
    ):
        ax.plot(n, costmodel.uring_request(inputs, model, n), ls, color=c, lw=1.4, label=label)
        if per_rep:
            curves = np.array([costmodel.uring_request(ci, model, n) for ci in per_rep.values()])
            bands = [across_reps(curves[:, j], predict=False) for j in range(len(n))]
            low = np.array([b.low for b in bands])
            high = np.array([b.high for b in bands])
            ok = np.isfinite(low) & np.isfinite(high)
            if ok.any():
                ax.fill_between(n[ok], low[ok], high[ok], color=c, alpha=0.15, lw=0)
                drawn.add("bands")
        ns, ns_low, ns_high = (summary.loc[f"nstar_{model}", k] for k in ("value", "low", "high"))
        if np.isfinite(ns) and ns <= n.max():
            ax.axvline(ns, color=c, lw=0.9, ls=ls, alpha=0.8, label=_nstar_label(summary, model))
            drawn.add("crossover")
            if np.isfinite(ns_low):
                ax.axvspan(ns_low, min(ns_high, n.max()), ymax=0.06, color=c, alpha=0.5, lw=0)
                drawn.add("crossover span")
        else:
            ax.plot([], [], ls, color=c, lw=0.9, label=_nstar_label(summary, model))
    floor = summary.loc["floor_request", "value"]
    ax.axhline(floor, color="black", lw=0.8, ls=":", label="2w: a request's kernel work through syscalls")
    ys = [costmodel.uring_request(inputs, "B", n).min(), floor, epoll]
    size_axes(ax, "batch size n (SQEs per io_uring_enter)", "the model: CPU per request")
    ax.set_ylim(min(ys) * 0.7, max(ys) * 1.3 + costmodel.uring_request(inputs, "A", 1.0) * 0.2)
    ax.set_ylabel("CPU ns per echo request")
    if has_servers:
        assert echo is not None
        drawn |= _servers_over_model(ax_r, inputs, echo)
    legend_below(fig, ncol=2)
    fig.tight_layout()
    drawn_caption(
        fig,
        (
            (
                True,
                f"{'Left' if has_servers else 'The model'}: predicted CPU ns per echo request (one receive and one "
                "send) against the batch size n: epoll (two system calls), io_uring under the source's formula "
                "(model A) and the linear-batch model (B), and the kernel work 2w.",
            ),
            (
                "bands" in drawn,
                "Bands: each model's 95 % interval across repetitions (the model fitted to each repetition alone).",
            ),
            ("crossover" in drawn, "Vertical lines: the crossovers n*, given in the legend"),
            ("crossover span" in drawn, "with their 95 % intervals shaded along the bottom"),
            ("crossover" in drawn, "."),
            (
                "crossover" not in drawn,
                "No crossover lies within the batch sizes drawn (the legend says where each model's would be).",
            ),
            (
                has_servers,
                "Right: each measured C server's CPU per request over what the model prices it at (epoll: its two "
                "system calls; io_uring: model B at the batch size the server reached), a row per server, a "
                "colour per connection count, the model taken at its median",
            ),
            (has_servers and "hollow" in drawn, "; filled markers for the smallest message size, hollow for larger"),
            (has_servers and "bars" in drawn, "; bars: the measured 95 % interval across repetitions"),
            (has_servers and "bars" not in drawn, "; no measured interval (too few repetitions)"),
            (has_servers, "."),
        ),
    )
    return fig


def _servers_over_model(ax: plt.Axes, inputs: costmodel.CostInputs, echo: pd.DataFrame) -> set[str]:
    """The right panel of the per-request figure: measured over priced;
    returns which optional elements it drew ("bars", "hollow")."""
    price = costmodel.overlay_prices(inputs, echo)
    rows = echo.assign(
        ratio=echo["server_ns_per_request"] / price, r_low=echo["low"] / price, r_high=echo["high"] / price
    )
    order = rows.groupby("preset")["ratio"].median().sort_values().index.tolist()
    y_of = {p: i for i, p in enumerate(order)}
    drawn: set[str] = set()
    cells = sorted(set(zip(rows["connections"], rows["bytes"], strict=True)))
    conns = sorted({c for c, _ in cells})
    smallest = min(b for _, b in cells)
    for k, (c_count, size) in enumerate(cells):
        g = rows[(rows["connections"] == c_count) & (rows["bytes"] == size)]
        y = g["preset"].map(y_of).to_numpy(float) + (k - (len(cells) - 1) / 2) * 0.13
        c = color(conns.index(c_count))
        ax.errorbar(
            g["ratio"],
            y,
            xerr=interval_bars(g["r_low"], g["ratio"], g["r_high"]),
            fmt="os^Dv"[k % 5],
            ms=3 if size == smallest else HOLLOW_MS,
            mew=HOLLOW_MEW,
            lw=0.6,
            capsize=1,
            color=c,
            mfc=c if size == smallest else "none",
            label=f"server, c = {c_count}, {size} B",
        )
        if size != smallest:
            drawn.add("hollow")
        if (np.isfinite(g["r_low"]) & np.isfinite(g["r_high"])).any():
            drawn.add("bars")
    ax.axvline(1.0, color="black", lw=0.8, ls=":")
    ax.set_yticks(range(len(order)), [labels.preset(p) for p in order])
    ax.set_xscale("log", base=2)
    plain_ticks(ax.xaxis)
    ax.set_xlabel("measured / model's price")
    ax.set_title("real servers over the model")
    return drawn
