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
    median_marker,
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
            label = "median, 95 % interval" if vi == 0 else None
            median_marker(ax, vi + 0.25, r["median_ns"], r["ci_low_ns"], r["ci_high_ns"], label)
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
        # The median repetition never crosses; some may: say from where.
        reach = f" (95 % interval {show(r['low'])}–∞)" if np.isfinite(r["low"]) else ""
        return f"n* ({model}): never{reach}"
    interval = f", 95 % interval {show(r['low'])}–{show(r['high'])}" if np.isfinite(r["low"]) else ""
    return f"n* ({model}) = {show(r['value'])}{interval}"


# The height of one server's row in the per-request figure's right panel.
SERVER_ROW_IN = 0.14


def over_epoll(ci: costmodel.CostInputs, model: str, n: np.ndarray) -> np.ndarray:
    """What a model prices io_uring's echo request at, over epoll's: below
    1, io_uring would cost less. It crosses 1 at that model's crossover n*."""
    return costmodel.uring_request(ci, model, n) / costmodel.epoll_request(ci)


def floor_over_epoll(ci: costmodel.CostInputs) -> float:
    """The kernel work of a request's two system calls (2w) over epoll's
    whole request (2s + 2w): what no batching can go below."""
    return (ci.w_many("send") + ci.w_many("recv")) / costmodel.epoll_request(ci)


def median_curve(cis: list[costmodel.CostInputs], model: str, ratios: np.ndarray) -> np.ndarray:
    """The batch size at each price ratio, the median over repetitions of
    each repetition's (``costmodel.batch_at_ratio``). Taken along n, as the
    crossovers are, the curve meets 1 at the median n* the legend prints,
    for an even count of repetitions too (a median taken along the ratio
    meets it only between the middle two)."""
    return np.median(np.array([costmodel.batch_at_ratio(ci, model, ratios) for ci in cis]), axis=0)


def per_request_figure(
    inputs: costmodel.CostInputs,
    summary: pd.DataFrame,
    per_rep: dict[int, costmodel.CostInputs] | None = None,
    echo: pd.DataFrame | None = None,
) -> Figure:
    """Two questions, a panel each. Left: from which batch size n would
    io_uring's request (one recv + one send SQE) cost less CPU than epoll's
    two system calls? Models (A) and (B) price it over epoll's request, each
    repetition's ratio with its median as the line and its 95 % interval
    across repetitions as a band; 2w over epoll's; each crossover n* as a
    line with its interval as a shaded span (named in the legend).
    Right, when the echo servers ran (``echostats.model_overlay``): how far
    each real server's CPU per request sits above what the model prices it
    at (epoll: its two system calls; io_uring: model B at the batch size the
    server reached), a row per server, a marker per connection count, bars
    the measured 95 % interval."""
    n = np.logspace(0, 9, 120, base=2)
    # The price ratios the model lines are drawn at (each finds its batch size).
    ratios = np.logspace(-4, 6, 400, base=2)
    has_servers = echo is not None and len(echo) > 0
    if has_servers:
        assert echo is not None
        # A row per server, each tall enough that its name clears the next.
        height = max(3.4, SERVER_ROW_IN * echo["preset"].nunique() + 1.3)
        fig, (ax, ax_r) = plt.subplots(1, 2, figsize=(FIGURE_WIDTH_IN, height), gridspec_kw={"width_ratios": [1.35, 1]})
    else:
        fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, 3.1))
    ax.axhline(1.0, color=PALETTE[6], lw=1.5, label="epoll: 2s + 2w (1 by definition)")
    drawn: set[str] = set()
    shown = []
    for model, c, ls, label in (
        ("A", PALETTE[1], "--", "io_uring, model A: (t + s)/n"),
        ("B", PALETTE[0], "-", "io_uring, model B: (s + a)/n + b"),
    ):
        along = median_curve(list(per_rep.values()) if per_rep else [inputs], model, ratios)
        inside = np.isfinite(along) & (along >= n.min()) & (along <= n.max())
        shown.append(ratios[inside])
        ax.plot(along[inside], ratios[inside], ls, color=c, lw=1.4, label=label)
        if inside.any() and along[inside].max() < n.max() / 2 and model == "B":
            drawn.add("ends")
        if per_rep:
            curves = np.array([over_epoll(ci, model, n) for ci in per_rep.values()])
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
    floor = float(np.median([floor_over_epoll(ci) for ci in per_rep.values()])) if per_rep else floor_over_epoll(inputs)
    ax.axhline(floor, color="black", lw=0.8, ls=":", label="2w: a request's kernel work through syscalls")
    size_axes(ax, "batch size n (SQEs per io_uring_enter)", "the model: io_uring's price over epoll's")
    # Model A falls as 1/n without end: model B and the floor set the foot.
    low_y = min(float(np.min(shown[1])) if len(shown[1]) else 1.0, floor)
    high_y = max(min(float(np.max(shown[0])) if len(shown[0]) else 1.0, 8.0), 1.0)
    ax.set_ylim(low_y * 0.8, high_y * 1.2)
    ax.set_yscale("log", base=2)
    plain_ticks(ax.yaxis)
    ax.set_ylabel("CPU per request over epoll's")
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
                f"{'Left' if has_servers else 'The model'}: the CPU an io_uring echo request (one receive and one "
                "send SQE) costs over epoll's (two system calls; the line at 1) against the batch size n, under "
                "the source's formula (model A) and the linear-batch model (B), and the kernel work 2w over "
                "epoll's; below 1, io_uring would cost less.",
            ),
            (
                bool(per_rep),
                "Each line is the median over repetitions of that repetition's ratio, so it crosses 1 at the "
                "median crossover.",
            ),
            (
                "ends" in drawn,
                "Model B's line ends where half the repetitions never price a request that low, whatever the batch.",
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
