"""Shared figure style, so every figure in the paper looks the same."""

from __future__ import annotations

# No backend is forced: in Jupyter (and under papermill) the inline backend
# shows each figure in its cell; elsewhere matplotlib falls back to a
# headless one when there is no display.
import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from ..analysis import latency, mpistats

PALETTE = ["#1b6ca8", "#d1495b", "#edae49", "#00798c", "#66a182", "#8d6a9f", "#2e4057"]


def apply_style() -> None:
    plt.rcParams.update({
        "figure.figsize": (7.0, 3.4),
        "figure.dpi": 110,
        "savefig.dpi": 200,
        "font.size": 9,
        "axes.titlesize": 10,
        "axes.labelsize": 9,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.prop_cycle": matplotlib.cycler(color=PALETTE),
        "legend.frameon": False,
        "svg.fonttype": "none",
        "pdf.fonttype": 42,
        # Fixed metadata so re-rendering the same data gives the same bytes.
        "svg.hashsalt": "iolab",
    })


def log_axes(ax, xlabel: str) -> None:  # type: ignore[no-untyped-def]
    """Both axes logarithmic: x in powers of two (sizes and batch sizes are
    swept as powers of two), y in decades."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)


def syscall_cost_figure(measured, overall):  # type: ignore[no-untyped-def]
    """Left: ns/call of every measured batch, by variant and repetition, with
    each repetition's median (tick) and the median over repetitions with its
    95 % interval across repetitions (black bar; none below 6 repetitions).
    Right: ns/call against run order, to show drift and that warm-up was enough."""

    fig, (ax, ax_t) = plt.subplots(1, 2, figsize=(7.2, 3.2), gridspec_kw={"width_ratios": [1.1, 1]})
    variants = sorted(measured["variant"].unique())
    reps = sorted(measured["rep"].unique())
    rng = np.random.default_rng(0)
    width = 0.8 / max(len(reps), 1)
    for vi, variant in enumerate(variants):
        for ri, rep in enumerate(reps):
            rows = measured[(measured["variant"] == variant) & (measured["rep"] == rep)]
            x0 = vi + (ri - (len(reps) - 1) / 2) * width
            ax.scatter(x0 + rng.uniform(-width / 3, width / 3, len(rows)), rows["ns_per_call"],
                       s=3, alpha=0.25, color=PALETTE[vi % len(PALETTE)], linewidths=0)
            if len(rows):
                ax.plot([x0 - width / 3, x0 + width / 3], [rows["ns_per_call"].median()] * 2,
                        color="black", lw=0.8)
        s = overall[overall["variant"] == variant]
        if not s.empty:
            r = s.iloc[0]
            x1 = vi + 0.45
            if np.isfinite(r["ci_low_ns"]) and np.isfinite(r["ci_high_ns"]):
                ax.errorbar([x1], [r["median_ns"]], yerr=[[r["median_ns"] - r["ci_low_ns"]],
                                                          [r["ci_high_ns"] - r["median_ns"]]],
                            fmt="o", color="black", markersize=3, capsize=3, lw=1.2)
            else:
                ax.plot([x1], [r["median_ns"]], "o", color="black", markersize=3)
    ax.set_xticks(range(len(variants)), variants)
    ax.set_ylabel("ns per call")
    ax.set_title(f"per batch, {len(reps)} repetitions")
    lo, hi = measured["ns_per_call"].quantile([0.005, 0.995])
    pad = (hi - lo) * 0.15 + 1
    ax.set_ylim(lo - pad, hi + pad)
    for vi, variant in enumerate(variants):
        rows = measured[(measured["variant"] == variant) & (measured["rep"] == reps[0])]
        ax_t.plot(rows["seq"], rows["ns_per_call"], ".", ms=2, alpha=0.5,
                  color=PALETTE[vi % len(PALETTE)], label=variant)
    ax_t.set_xlabel(f"batch position in run order (repetition {reps[0]})")
    ax_t.set_ylim(lo - pad, hi + pad)
    ax_t.set_title("drift over the run")
    ax_t.legend(markerscale=4)
    fig.tight_layout()
    return fig


def sendrecv_figure(measured):  # type: ignore[no-untyped-def]
    """Median ns per send/recv call against message size, one panel per
    operation; lines per transport, pattern and ACK regime."""
    ops = [op for op in ("send", "recv") if op in set(measured["variant"])]
    fig, axes = plt.subplots(1, len(ops), figsize=(7.2, 3.2), sharey=True, squeeze=False)
    groups = measured.groupby(["transport", "pattern", "ack"], sort=True)
    for ax, op in zip(axes[0], ops):
        for i, ((transport, pattern, ack), g) in enumerate(groups):
            g = g[g["variant"] == op]
            if g.empty:
                continue
            med = g.groupby("bytes")["ns_per_call"].median()
            q = g.groupby("bytes")["ns_per_call"].quantile([0.25, 0.75]).unstack()
            label = f"{transport} {pattern}" + ("" if ack == "-" else f" {ack}")
            style = "-" if transport == "tcp" else "--"
            ax.plot(med.index, med.values, style, marker="o", ms=3, color=PALETTE[i % len(PALETTE)],
                    label=label)
            ax.fill_between(q.index, q[0.25], q[0.75], alpha=0.15, color=PALETTE[i % len(PALETTE)],
                            linewidth=0)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message bytes")
        ax.set_title(f"{op}(2): s + w per call")
        ax.set_ylim(bottom=0)
        ax.set_xticks(sorted(set(measured["bytes"])), [str(b) for b in sorted(set(measured["bytes"]))])
    axes[0][0].set_ylabel("ns per call (median, IQR band)")
    axes[0][-1].legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def uring_batch_figure(uring, nop, inputs):  # type: ignore[no-untyped-def]
    """Left: ns per io_uring_enter against n (log-log) per operation and ring
    preset, with models (A) and (B) fitted to the default ring. Right: ns per
    SQE, with NOPs for io_uring's own share."""

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(7.2, 3.3))
    presets = sorted(set(uring["pattern"]))
    for oi, op in enumerate(("send", "recv")):
        color = PALETTE[oi]
        for preset in presets:
            g = uring[(uring["variant"] == op) & (uring["pattern"] == preset)]
            if g.empty:
                continue
            med = g.groupby("n")["ns_per_call"].median()
            per_sqe = g.groupby("n")["ns_per_sqe"].median()
            # The default ring carries the fit; the other presets are context.
            main = preset == "default"
            kw = dict(marker="o", ms=3, lw=1.3, label=f"{op}, default ring") if main else \
                dict(lw=0.6, alpha=0.45, label=f"{op}, other presets" if preset == presets[-1] or
                     (presets[-1] == "default" and preset == presets[-2]) else None)
            ax.plot(med.index, med.values, color=color, **kw)
            ax2.plot(per_sqe.index, per_sqe.values, color=color, **kw)
        n = np.logspace(0, np.log2(max(uring["n"])), 50, base=2)
        fits = inputs.fits[op]
        ax.plot(n, inputs.s + fits["B"].batch_time(n), ":", color="black", lw=0.9)
        ax.plot(n, inputs.s + fits["A"].batch_time(n), "--", color="grey", lw=0.9)
    nop_n = nop[nop["n"] > 0]
    if not nop_n.empty:
        g = nop_n[nop_n["pattern"] == "default"] if "default" in set(nop_n["pattern"]) else nop_n
        per = g.groupby("n")["ns_per_sqe"].median()
        ax2.plot(per.index, per.values, color="black", marker="s", ms=2.5, lw=1, label="NOP default")
    ax.plot([], [], ":", color="black", label="model B fit (default)")
    ax.plot([], [], "--", color="grey", label="model A fit (default)")
    for a in (ax, ax2):
        log_axes(a, "SQEs per io_uring_enter (n)")
    ax.set_ylabel("ns per io_uring_enter")
    ax.set_title("U(n) = s + T(n)")
    ax2.set_ylabel("ns per SQE")
    ax2.set_title("per SQE; NOP = io_uring's own share")
    ax.legend(fontsize=6, loc="upper left")
    ax2.legend(fontsize=6, loc="upper right")
    fig.tight_layout()
    return fig


def per_request_figure(inputs, summary, echo=None):  # type: ignore[no-untyped-def]
    """Predicted CPU ns per echo request (one recv + one send) against the
    batch size n: epoll flat (band: its 95 % interval across repetitions),
    io_uring under models (A) and (B) drawn with each parameter's median over
    repetitions, the 2w floor, and the crossovers n* (medians over
    repetitions, from ``summary``); measured echo servers overlaid when given
    (columns n, server_ns_per_request, label)."""
    from ..analysis import costmodel

    n = np.logspace(0, 9, 200, base=2)
    fig, ax = plt.subplots(figsize=(7.0, 3.4))
    epoll = summary.loc["epoll_request", "value"]
    lo, hi = summary.loc["epoll_request", "low"], summary.loc["epoll_request", "high"]
    ax.axhline(epoll, color=PALETTE[0], lw=1.5, label=f"epoll: 2s + w_send + w_recv = {epoll:.0f} ns")
    if np.isfinite(lo) and np.isfinite(hi):
        ax.axhspan(lo, hi, color=PALETTE[0], alpha=0.15, lw=0)
    ax.plot(n, costmodel.uring_request(inputs, "A", n), "--", color=PALETTE[1],
            label="io_uring, model A: Σ (t + s)/n")
    ax.plot(n, costmodel.uring_request(inputs, "B", n), "-", color=PALETTE[2],
            label="io_uring, model B: Σ (s + a)/n + b")
    floor = summary.loc["floor_request", "value"]
    ax.axhline(floor, color="black", lw=0.8, ls=":", label=f"floor 2w = {floor:.0f} ns (kernel work only)")
    for model, color in (("A", PALETTE[1]), ("B", PALETTE[2])):
        ns = summary.loc[f"nstar_{model}", "value"]
        if np.isfinite(ns) and ns <= n.max():
            ax.axvline(ns, color=color, lw=0.7, alpha=0.7)
            ax.annotate(f"n*={ns:.1f}", (ns, epoll), textcoords="offset points", xytext=(3, 6),
                        fontsize=7, color=color)
    if echo is not None and len(echo):
        uring = echo[echo["server"] == "uring"]
        ax.scatter(uring["n"], uring["server_ns_per_request"], s=12, color="black", zorder=5,
                   label="measured io_uring servers (c ≥ 50), at their n")
        ep = echo[echo["server"] == "epoll"]
        ax.scatter(ep["n"], ep["server_ns_per_request"], s=22, marker="s", facecolors="none",
                   edgecolors="black", zorder=5, label="measured epoll server (c ≥ 50)")
        if len(ep):
            waits = float(ep["events_per_wait"].median())
            ax.axhline(costmodel.epoll_request_with_wait(inputs, waits), color=PALETTE[0], lw=0.8,
                       ls="--", label=f"epoll + wait amortised over {waits:.1f} events")
    log_axes(ax, "batch size n (SQEs per io_uring_enter)")
    ax.set_ylabel("CPU ns per echo request")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _preset_style(preset, i):  # type: ignore[no-untyped-def]
    if preset == "epoll":
        return dict(color="black", lw=2.0, marker="s", ms=3.5, zorder=5)
    if preset == "default":
        return dict(color=PALETTE[0], lw=1.8, marker="o", ms=3.5, zorder=4)
    return dict(color=plt.cm.tab20(i % 20), lw=0.9, marker=".", ms=3)


def _per_bytes_panels(summary, metric, ylabel, title, logy=False, extra=None):  # type: ignore[no-untyped-def]
    sizes = sorted(summary["bytes"].unique())
    fig, axes = plt.subplots(1, len(sizes), figsize=(7.4, 3.4), sharey=True, squeeze=False)
    presets = sorted(summary["preset"].unique(), key=lambda p: (p not in ("epoll", "default"), p))
    for ax, size in zip(axes[0], sizes):
        for i, preset in enumerate(presets):
            g = summary[(summary["preset"] == preset) & (summary["bytes"] == size)].sort_values("connections")
            if g.empty or g[metric].isna().all():
                continue
            ax.plot(g["connections"], g[metric], label=preset, **_preset_style(preset, i))
            if f"{metric}_low" in g and np.isfinite(g[[f"{metric}_low", f"{metric}_high"]]).all().all():
                ax.fill_between(g["connections"], g[f"{metric}_low"], g[f"{metric}_high"],
                                alpha=0.12, color=_preset_style(preset, i)["color"], lw=0)
        if extra:
            extra(ax, size)
        ax.set_xscale("log")
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel("connections")
        ax.set_title(f"{title}, {size} B")
    axes[0][0].set_ylabel(ylabel)
    axes[0][-1].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def echo_rps_figure(summary):  # type: ignore[no-untyped-def]
    """Requests/s against connections per server configuration (median over
    repetitions, band: its 95 % interval where 6 or more were measured)."""
    return _per_bytes_panels(summary, "rps", "requests/s", "throughput")


def echo_cpu_figure(summary, floor_ns=None):  # type: ignore[no-untyped-def]
    """Server CPU ns per request against connections, with the 2w floor and
    the load generator's own CPU per request (grey, dashed: epoll runs)."""
    def extra(ax, size):  # type: ignore[no-untyped-def]
        client = summary[(summary["preset"] == "epoll") & (summary["bytes"] == size)].sort_values("connections")
        if len(client):
            ax.plot(client["connections"], client["client_ns_per_request"], "--", color="grey",
                    lw=1, label="load generator (epoll runs)")
        if floor_ns is not None:
            ax.axhline(floor_ns, color="black", ls=":", lw=0.9, label=f"floor 2w = {floor_ns:.0f} ns")

    return _per_bytes_panels(summary, "server_ns_per_request", "CPU ns per request",
                             "server CPU", logy=True, extra=extra)


def echo_latency_figure(summary):  # type: ignore[no-untyped-def]
    """p50, p99 and p99.9 request latency for the smallest message size,
    closed loop (each connection sends its next request when the echo is
    back, so a stall hides the requests that would have queued behind it)."""
    size = sorted(summary["bytes"].unique())[0]
    sub = summary[summary["bytes"] == size]
    fig, axes = plt.subplots(1, 3, figsize=(7.4, 3.0), sharey=True)
    presets = sorted(sub["preset"].unique(), key=lambda p: (p not in ("epoll", "default"), p))
    for ax, metric, title in zip(axes, ("p50_us", "p99_us", "p999_us"), ("p50", "p99", "p99.9")):
        for i, preset in enumerate(presets):
            g = sub[sub["preset"] == preset].sort_values("connections")
            ax.plot(g["connections"], g[metric], label=preset, **_preset_style(preset, i))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("connections")
        ax.set_title(f"{title}, closed loop, {size} B")
    axes[0].set_ylabel("µs")
    axes[-1].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def open_loop_latency_figure(curves):  # type: ignore[no-untyped-def]
    """p50, p99 and p99.9 against the offered load (share of each server's
    closed-loop capacity), open loop: median over repetitions with its 95 %
    interval as error bars, the merged-histogram value as a small cross.
    The closed-loop capacity cell is drawn at load 1 as a hollow marker."""
    fig, axes = plt.subplots(1, 3, figsize=(7.4, 3.0), sharey=True)
    presets = sorted(curves["preset"].unique(), key=lambda p: (p != "epoll", p))
    for ax, name in zip(axes, latency.PERCENTILES):
        for i, preset in enumerate(presets):
            style = _preset_style(preset, i + 1)
            color = style["color"]
            g = curves[(curves["preset"] == preset) & (curves["phase"] == "open")].sort_values("load")
            y, low, high = g[f"{name}_us"], g[f"{name}_us_low"], g[f"{name}_us_high"]
            bounded = np.isfinite(low) & np.isfinite(high)
            ax.errorbar(g["load"], y, yerr=[np.where(bounded, y - low, 0), np.where(bounded, high - y, 0)],
                        color=color, marker=style["marker"], ms=3.5, lw=1.4, capsize=2, label=f"{preset} (open loop)")
            ax.plot(g["load"], g[f"{name}_us_merged"], "x", color=color, ms=4, alpha=0.7)
            cap = curves[(curves["preset"] == preset) & (curves["phase"] == "capacity")]
            if len(cap):
                ax.plot(cap["load"], cap[f"{name}_us"], marker="o", mfc="none", color=color, ms=6, ls="none",
                        label=f"{preset} (closed loop at capacity)")
        ax.set_yscale("log")
        ax.set_title(f"{latency.PERCENTILE_LABELS[name]}, open loop")
    axes[0].set_ylabel("latency (µs)")
    fig.supxlabel("offered load / the server's closed-loop capacity", fontsize=8)
    axes[-1].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def echo_batch_figure(summary):  # type: ignore[no-untyped-def]
    """The batch size each server reached: SQEs per io_uring_enter (uring
    presets) and events per epoll_wait (epoll)."""
    size = sorted(summary["bytes"].unique())[0]
    sub = summary[summary["bytes"] == size]
    fig, ax = plt.subplots(figsize=(7.0, 3.2))
    presets = sorted(sub["preset"].unique(), key=lambda p: (p not in ("epoll", "default"), p))
    for i, preset in enumerate(presets):
        g = sub[sub["preset"] == preset].sort_values("connections")
        metric = "events_per_wait" if preset == "epoll" else "sqes_per_enter"
        label = "epoll (events per wait)" if preset == "epoll" else preset
        ax.plot(g["connections"], g[metric], label=label, **_preset_style(preset, i))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("connections")
    ax.set_ylabel("SQEs per io_uring_enter")
    ax.set_title(f"measured batch size n, {size} B")
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


# ---- MPI ---------------------------------------------------------------------

TRANSPORT_STYLE = {"shm": ("#1b6ca8", "o"), "tcp": ("#d1495b", "s"), "netns": ("#00798c", "^"),
                   "netns_tbf": ("#edae49", "D"), "nodes": ("#6a4c93", "v")}
TRANSPORT_LABEL = {"shm": "shared memory", "tcp": "TCP (loopback)", "netns": "TCP across netns (veth)",
                   "netns_tbf": "netns + tbf", "nodes": "TCP across nodes"}


def _transport_style(transport):  # type: ignore[no-untyped-def]
    return TRANSPORT_STYLE.get(transport, ("#2e4057", "x"))


def _points(ax, g, x, y, color, marker, label):  # type: ignore[no-untyped-def]
    """Median points with 95 % interval bars (none where the interval is
    unbounded: fewer than 6 repetitions); oversubscribed points hollow."""
    for over, part in g.groupby("oversubscribed"):
        below = (part[y] - part["low_us"]).where(np.isfinite(part["low_us"]), 0.0)
        above = (part["high_us"] - part[y]).where(np.isfinite(part["high_us"]), 0.0)
        ax.errorbar(part[x], part[y], yerr=[below, above],
                    fmt=marker, ms=3.5, color=color, capsize=1.5, lw=0.8,
                    mfc="none" if over else color,
                    label=(label + (" (oversubscribed)" if over else "")) if label else None)


def mpi_pingpong_figure(summary, hockney, rate_mbit=None):  # type: ignore[no-untyped-def]
    """One-way latency and bandwidth against size per transport, with the
    piecewise Hockney fits; the tbf rate as a horizontal line."""
    fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(7.2, 3.3))
    pp = summary[summary["bench"] == "pingpong"].copy()
    for c in ("median_ns", "low_ns", "high_ns"):
        pp[c.replace("_ns", "_us")] = pp[c] / 1e3
    for transport, g in pp.groupby("transport"):
        color, marker = _transport_style(transport)
        g = g.sort_values("bytes")
        _points(ax_t, g, "bytes", "median_us", color, marker, TRANSPORT_LABEL.get(transport, transport))
        if transport in hockney:
            m = np.geomspace(g["bytes"].min(), g["bytes"].max(), 200)
            ax_t.plot(m, hockney[transport].predict(m) / 1e3, color=color, lw=0.8, alpha=0.7)
        ax_b.plot(g["bytes"], g["bytes"] / g["median_ns"] * 1e3, marker=marker, ms=3.5, color=color,
                  lw=0.8)
    if rate_mbit:
        ax_b.axhline(rate_mbit / 8, color=TRANSPORT_STYLE["netns_tbf"][0], ls="--", lw=0.8)
        ax_b.annotate(f"tbf {rate_mbit:g} Mbit/s", (ax_b.get_xlim()[0], rate_mbit / 8), fontsize=7,
                      xytext=(4, 3), textcoords="offset points")
    for ax in (ax_t, ax_b):
        log_axes(ax, "message size (bytes)")
    ax_t.set_ylabel("one-way latency (µs)")
    ax_t.set_title("Ping-pong latency (lines: Hockney fits)")
    ax_b.set_ylabel("bandwidth (MB/s)")
    ax_b.set_title("Ping-pong bandwidth m / T(m)")
    ax_t.legend(fontsize=7)
    fig.tight_layout()
    return fig


def mpi_collectives_figure(summary, curves):  # type: ignore[no-untyped-def]
    """Collective time against size per benchmark, a line per (transport, p),
    with the fitted paper formula (dashed) and algorithm formula (dotted).
    ``curves``: (transport, bench, model) -> callable(p, m) in ns."""
    benches = [b for b in ("bcast", "allreduce", "alltoall") if b in set(summary["bench"])]
    fig, axes = plt.subplots(1, max(len(benches), 1), figsize=(7.2, 3.2), sharey=True, squeeze=False)
    coll = summary[summary["bench"].isin(benches)].copy()
    for c in ("median_ns", "low_ns", "high_ns"):
        coll[c.replace("_ns", "_us")] = coll[c] / 1e3
    for ax, bench in zip(axes[0], benches, strict=False):
        for (transport, p), g in coll[coll["bench"] == bench].groupby(["transport", "ranks"]):
            color, marker = _transport_style(transport)
            g = g.sort_values("bytes")
            label = f"{TRANSPORT_LABEL.get(transport, transport)}, p={p}" if bench == benches[0] else None
            _points(ax, g, "bytes", "median_us", color, marker if p == 2 else "v", label)
            m = np.geomspace(g["bytes"].min(), g["bytes"].max(), 100)
            for model, ls in (("paper", "--"), ("algorithm", ":")):
                f = curves.get((transport, bench, model))
                if f is not None:
                    ax.plot(m, f(np.full_like(m, p), m) / 1e3, color=color, ls=ls, lw=0.7)
        log_axes(ax, "bytes per rank")
        ax.set_title(bench)
    axes[0][0].set_ylabel("time, max over ranks (µs)")
    fig.legend(loc="lower center", ncol=3, fontsize=6.5, bbox_to_anchor=(0.5, -0.12))
    fig.tight_layout()
    return fig


def mpi_prediction_error_figure(errors):  # type: ignore[no-untyped-def]
    """Relative prediction error per size, per benchmark; colour = transport,
    dashed = paper's formula, dotted = the algorithm's."""
    benches = [b for b in ("bcast", "allreduce", "alltoall") if b in set(errors["bench"])]
    fig, axes = plt.subplots(1, max(len(benches), 1), figsize=(7.2, 2.9), sharey=True, squeeze=False)
    for ax, bench in zip(axes[0], benches, strict=False):
        sel = errors[errors["bench"] == bench]
        for (transport, model, p), g in sel.groupby(["transport", "model", "ranks"]):
            color, marker = _transport_style(transport)
            g = g.sort_values("bytes")
            ax.plot(g["bytes"], 100 * g["error"], color=color, ls="--" if model == "paper" else ":",
                    marker=marker if p == 2 else "v", ms=2.5, lw=0.8,
                    label=f"{transport}, {model}, p={p}" if bench == benches[0] else None)
        ax.axhline(0, color="black", lw=0.6)
        ax.set_xscale("log", base=2)
        ax.set_title(bench)
        ax.set_xlabel("bytes per rank")
    axes[0][0].set_ylabel("(model − measured) / measured (%)")
    fig.legend(loc="lower center", ncol=4, fontsize=6, bbox_to_anchor=(0.5, -0.2))
    fig.tight_layout()
    return fig


def _ratio_panel(ax, title, fontsize=None):  # type: ignore[no-untyped-def]
    """A ratio-per-message-size panel: 1 marked, sizes on a log2 axis."""
    ax.axhline(1, color="black", lw=0.6)
    ax.set_xscale("log", base=2)
    ax.set_title(title, fontsize=fontsize)
    ax.set_xlabel("bytes")


def mpi_ratio_figure(ratio_tables):  # type: ignore[no-untyped-def]
    """A/B time ratio per size, a panel per benchmark, like the HPC HUB
    native/VM figures; 1 = no difference. Colour: the pair; circles p = 2,
    triangles larger p; hollow: oversubscribed. With no pair measured (e.g.
    ``experiments.mpi.transports: [shm]``) the figure says so, since the
    workflow lists it whatever the transports."""
    import pandas as pd
    if not any(len(t) for t in ratio_tables):
        fig, ax = plt.subplots(figsize=(7.2, 1.2))
        ax.axis("off")
        pairs = ", ".join(f"{a}/{b}" for a, b in mpistats.TRANSPORT_PAIRS)
        ax.text(0.5, 0.5, f"No transport pair was measured: a ratio needs both transports of one of "
                f"{pairs} (experiments.mpi.transports).", ha="center", va="center", fontsize=8, wrap=True)
        return fig
    r = pd.concat(ratio_tables, ignore_index=True)
    benches = [b for b in ("pingpong", "bcast", "allreduce", "alltoall") if b in set(r["bench"])]
    pairs = list(dict.fromkeys(zip(r["numerator"], r["denominator"], strict=True)))
    colors = {pair: PALETTE[i % len(PALETTE)] for i, pair in enumerate(pairs)}
    fig, axes = plt.subplots(1, max(len(benches), 1), figsize=(7.2, 3.0), sharey=True, squeeze=False)
    handles = {}
    for ax, bench in zip(axes[0], benches, strict=False):
        for (num, den, p), g in r[r["bench"] == bench].groupby(["numerator", "denominator", "ranks"]):
            g = g.sort_values("bytes")
            color = colors[(num, den)]
            over = bool(g["oversubscribed"].any())
            label = f"{num}/{den}, p={p}" + (" (oversubscribed)" if over else "")
            (line,) = ax.plot(g["bytes"], g["ratio"], color=color, lw=0.8, marker="o" if p == 2 else "v",
                              ms=2.5, mfc="none" if over else color)
            handles.setdefault(label, line)
        _ratio_panel(ax, bench)
        ax.set_yscale("log")
    axes[0][0].set_ylabel("time ratio A/B")
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=3, fontsize=6.5,
               bbox_to_anchor=(0.5, -0.16))
    fig.tight_layout()
    return fig


def mpi_method_ratio_figure(ratios):  # type: ignore[no-untyped-def]
    """Our timing method against OSU's, on OSU's statistic (average over
    ranks of each rank's mean), per size: a panel per operation, a line per
    transport and rank count, the 95 % interval across repetitions as a band;
    1 = the methods agree. ``ratios``: ``mpistats.method_ratios``."""
    ops = [b for b in ("pingpong", "bcast", "allreduce", "alltoall") if b in set(ratios["operation"])]
    fig, axes = plt.subplots(1, max(len(ops), 1), figsize=(7.2, 3.0), sharey=True, squeeze=False)
    handles = {}
    for ax, op in zip(axes[0], ops, strict=False):
        for (transport, p), g in ratios[ratios["operation"] == op].groupby(["transport", "ranks"]):
            g = g.sort_values("bytes")
            color, marker = _transport_style(transport)
            (line,) = ax.plot(g["bytes"], g["ratio"], color=color, marker=marker if p == 2 else "v", ms=2.5, lw=0.8)
            bounded = g[np.isfinite(g["low"]) & np.isfinite(g["high"])]
            ax.fill_between(bounded["bytes"], bounded["low"], bounded["high"], color=color, alpha=0.15, lw=0)
            handles.setdefault(f"{transport}, p={p}", line)
        _ratio_panel(ax, op)
        for edge in (0.9, 1.1):
            ax.axhline(edge, color="grey", lw=0.5, ls=":")
    axes[0][0].set_ylabel("ours / OSU's method")
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=4, fontsize=6.5,
               bbox_to_anchor=(0.5, -0.12))
    fig.tight_layout()
    return fig


# ---- node comparison ----------------------------------------------------------

def node_costs_figure(costs):  # type: ignore[no-untyped-def]
    """s and w per node, coloured by kind."""
    fig, ax = plt.subplots(figsize=(7.0, 3.0))
    metrics = [("s_ns", "s (null syscall)"), ("w_send_ns", "w send"), ("w_recv_ns", "w recv")]
    x = np.arange(len(metrics))
    width = 0.8 / max(len(costs), 1)
    for i, row in enumerate(costs.itertuples()):
        ax.bar(x + i * width, [getattr(row, m) for m, _ in metrics], width,
               color=PALETTE[i % len(PALETTE)], label=f"{row.node} ({row.kind}, mitigations {row.mitigations})")
    ax.set_xticks(x + width * (len(costs) - 1) / 2, [label for _, label in metrics])
    ax.set_ylabel("ns per call")
    ax.set_title("Cost-model components per node")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


SMALL_BYTES = 256  # the HPC HUB figures' small-message panels


def node_mpi_ratio_figure(ratios, title, seed_lines=None):  # type: ignore[no-untyped-def]
    """Native/virtual MPI time ratio per size, a panel per benchmark, as
    HPC HUB drew them: every size (top row) and sizes up to 256 B (bottom
    row). ``seed_lines``: bench -> [(value, label)] drawn as dashed lines,
    the source's quoted figures (worst ratio, "mostly" bound)."""
    benches = [b for b in ("pingpong", "bcast", "allreduce", "alltoall") if b in set(ratios["bench"])]
    fig, axes = plt.subplots(2, max(len(benches), 1), figsize=(7.2, 5.0), sharey="row", squeeze=False)
    handles = {}
    for col, bench in enumerate(benches):
        for row, ax in enumerate(axes[:, col]):
            sel = ratios[ratios["bench"] == bench]
            if row == 1:
                sel = sel[sel["bytes"] <= SMALL_BYTES]
            for (transport, p), g in sel.groupby(["transport", "ranks"]):
                g = g.sort_values("bytes")
                color, marker = _transport_style(transport)
                (line,) = ax.plot(g["bytes"], g["ratio"], color=color, marker=marker if p == 2 else "v", ms=2.5,
                                  lw=0.8, mfc="none" if g["oversubscribed"].any() else color)
                handles.setdefault(f"{transport}, p={p}", line)
            for (value, label), style in zip((seed_lines or {}).get(bench, []), ("--", ":"), strict=False):
                handles.setdefault(label, ax.axhline(value, color="grey", lw=0.7, ls=style))
            _ratio_panel(ax, bench if row == 0 else f"{bench}, \u2264 {SMALL_BYTES} B", fontsize=8)
    axes[0][0].set_ylabel("time ratio")
    axes[1][0].set_ylabel("time ratio")
    fig.suptitle(title, fontsize=9)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=4, fontsize=6.5,
               bbox_to_anchor=(0.5, -0.08))
    fig.tight_layout()
    return fig


def node_echo_ratio_figure(ratios, title):  # type: ignore[no-untyped-def]
    """Echo metric ratios per preset (below 1: the second node is worse)."""
    metrics = list(dict.fromkeys(ratios["metric"]))
    fig, axes = plt.subplots(1, max(len(metrics), 1), figsize=(7.2, 3.4), sharey=True, squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=False):
        sel = ratios[ratios["metric"] == metric]
        for i, (c, g) in enumerate(sel.groupby("connections")):
            g = g.sort_values("preset")
            ax.plot(g["ratio"], g["preset"], "o", ms=3, color=PALETTE[i % len(PALETTE)], label=f"c={c}")
        ax.axvline(1, color="black", lw=0.6)
        ax.set_title(metric, fontsize=8)
    axes[0][0].legend(fontsize=6.5)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


OUTCOME_COLORS = {"reproduced": "#2e7d32", "not reproduced": "#c62828",
                  "undecided at this precision": "#ef8f00"}


def claims_forest_figure(findings):  # type: ignore[no-untyped-def]
    """Every testable finding's value and 95 % interval, divided by the
    claim's bound so that every threshold sits at 1 (shaded: an equivalence
    or agreement margin); colour: the verdict. Arrows: an interval that is
    unbounded on that side (fewer than 6 repetitions)."""
    rows = [f for f in findings if f.estimate is not None and f.rule is not None]
    fig, ax = plt.subplots(figsize=(7.2, 0.28 * max(len(rows), 4) + 1.0))
    lo_lim, hi_lim = 0.25, 4.0
    for i, f in enumerate(reversed(rows)):
        b = f.rule.bound
        v, lo, hi = f.estimate.value / b, f.estimate.low / b, f.estimate.high / b
        color = OUTCOME_COLORS[f.outcome.value]
        if f.rule.kind == "within":
            ax.fill_between([1 - f.rule.margin, 1 + f.rule.margin], i - 0.4, i + 0.4, color="grey",
                            alpha=0.15, lw=0)
        left, right = max(lo, lo_lim), min(hi, hi_lim)
        ax.plot([left, right], [i, i], color=color, lw=1.6)
        for end, limit, marker in ((lo, lo_lim, "<"), (hi, hi_lim, ">")):
            if not np.isfinite(end) or (end < limit if marker == "<" else end > limit):
                ax.plot([limit], [i], marker=marker, color=color, ms=4)
        ax.plot([min(max(v, lo_lim), hi_lim)], [i], "o", color=color, ms=4)
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlim(lo_lim * 0.9, hi_lim * 1.1)
    # Labels at factors of 2 only: 0.8 and 1.25 (the common margins) as
    # unlabelled ticks, which at this width would overlap the label of 1.
    ticks = [0.25, 0.5, 1.0, 2.0, 4.0]
    ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FixedFormatter([f"{t:g}" for t in ticks]))
    ax.xaxis.set_minor_locator(matplotlib.ticker.FixedLocator([0.8, 1.25]))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_ylim(-0.7, len(rows) - 0.3)
    labels = [f"{f.claim}: {f.part}" for f in reversed(rows)]
    # A setup note ("[event-loop client, ...]") that several rows share is
    # said once, below the axis, rather than on each row.
    notes = {label[label.rindex(" ["):] for label in labels if label.endswith("]") and " [" in label}
    shared = notes.pop() if len(notes) == 1 else ""
    if shared:
        labels = [label.removesuffix(shared) + (" *" if label.endswith(shared) else "") for label in labels]
    ax.set_yticks(range(len(rows)), labels, fontsize=6)
    ax.set_xlabel("our value / the claim's bound (1: the threshold; log scale)"
                  + (f"\n* {shared.strip()[1:-1]}" if shared else ""), fontsize=7)
    handles = [plt.Line2D([], [], color=c, lw=2, label=k) for k, c in OUTCOME_COLORS.items()]
    ax.legend(handles=handles, fontsize=6, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=3, frameon=False)
    fig.tight_layout()
    return fig
