"""The MPI room in the paper: the collectives notebook's figures and the
numbers it hands the paper (captions: mpi_*.rst here). Points: median over
repetitions with its 95 % interval. Oversubscribed launches (more ranks than
CPUs) are drawn hollow where drawn at all; the model figures leave them out,
as the fits do."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.container import Container
from matplotlib.figure import Figure

from ...report.outputs import Outputs
from ...report.plots.style import (
    FIGURE_WIDTH_IN,
    HOLLOW_MEW,
    HOLLOW_MS,
    TRANSPORT_LABEL,
    TRANSPORT_STYLE,
    color,
    drawn_caption,
    interval_bars,
    legend_below,
    size_axes,
    transport_style,
)
from . import latency_models as mpimodels
from . import stats as mpistats

# How launches with more ranks than CPUs are drawn (the paper says so from here).
OVERSUBSCRIBED_DRAWN = "drawn hollow in the transport-ratio figure and left out of the collectives figures"


def _over(value: object) -> bool:
    """A table's oversubscribed flag, whatever its column's type."""
    return str(value).strip().lower() in ("true", "1")


def _points(
    ax: plt.Axes,
    g: pd.DataFrame,
    y: str,
    low: str,
    high: str,
    c: str,
    marker: str,
    label: str | None,
    scale: float = 1.0,
) -> None:
    """Median points with interval bars, hollow where oversubscribed."""
    for over, part in g.groupby(g["oversubscribed"].map(_over)):
        ax.errorbar(
            part["bytes"],
            part[y] / scale,
            yerr=interval_bars(part[low], part[y], part[high]) / scale,
            fmt=marker,
            ms=HOLLOW_MS if over else 3,
            mew=HOLLOW_MEW,
            color=c,
            capsize=1.5,
            lw=0.8,
            mfc="none" if over else c,
            label=(label + (", oversubscribed" if over else "")) if label else None,
        )


def pingpong_figure(summary: pd.DataFrame, hockney: dict, rate_mbit: float | None = None) -> Figure:
    """One-way latency and bandwidth against size per transport, with the
    piecewise Hockney fits; the tbf rate as a horizontal line."""
    fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(FIGURE_WIDTH_IN, 2.8))
    pp = summary[summary["bench"] == "pingpong"]
    for transport, g in pp.groupby("transport"):
        c, marker = transport_style(transport)
        g = g.sort_values("bytes")
        _points(ax_t, g, "median_ns", "low_ns", "high_ns", c, marker, TRANSPORT_LABEL.get(transport, transport), 1e3)
        if transport in hockney:
            m = np.geomspace(g["bytes"].min(), g["bytes"].max(), 200)
            ax_t.plot(m, hockney[transport].predict(m) / 1e3, color=c, lw=0.8, alpha=0.7)
        # Bandwidth's interval from the time's, ends swapped (unbounded
        # times give no bar).
        bw = g.assign(
            bw=g["bytes"] / g["median_ns"] * 1e3,
            bw_low=g["bytes"] / g["high_ns"] * 1e3,
            bw_high=(g["bytes"] / g["low_ns"] * 1e3).where(g["low_ns"] > 0, np.inf),
        )
        ax_b.errorbar(
            bw["bytes"],
            bw["bw"],
            yerr=interval_bars(bw["bw_low"], bw["bw"], bw["bw_high"]),
            marker=marker,
            ms=3,
            color=c,
            lw=0.8,
            capsize=1.5,
        )
    if rate_mbit:
        ax_b.axhline(
            rate_mbit / 8,
            color=TRANSPORT_STYLE["netns_tbf"][0],
            ls="--",
            lw=0.8,
            label=f"tbf rate, {rate_mbit:g} Mbit/s",
        )
    size_axes(ax_t, "message size (bytes)", "latency (lines: Hockney fits)")
    size_axes(ax_b, "message size (bytes)", "bandwidth m / T(m)")
    ax_t.set_ylabel("one-way latency (µs)")
    ax_b.set_ylabel("bandwidth (MB/s)")
    legend_below(fig, ncol=3)
    fig.tight_layout()
    return fig


def _fitted(g: pd.DataFrame) -> pd.DataFrame:
    """The launches the model fits use: ranks that fit on the CPUs."""
    return g[~g["oversubscribed"].map(_over)]


def _formulas_differ(curves: dict, transport: str, bench: str, p: int, m: np.ndarray, tol: float = 0.01) -> bool:
    """Whether the algorithm's fitted formula departs from the HPC HUB one by
    more than ``tol`` anywhere in the range: at p = 2 they coincide, and
    drawing both would draw one curve twice."""
    paper, algorithm = curves.get((transport, bench, "paper")), curves.get((transport, bench, "algorithm"))
    if paper is None or algorithm is None:
        return algorithm is not None
    a, b = paper(np.full_like(m, p), m), algorithm(np.full_like(m, p), m)
    return bool(np.nanmax(np.abs(b / a - 1)) > tol)


def collectives_figure(summary: pd.DataFrame, curves: dict) -> Figure:
    """One question: does the fitted HPC HUB formula follow the measured
    collective time across message sizes? A panel per benchmark; per
    transport and rank count that fits on the CPUs, the median time (max
    over ranks) with its 95 % interval across repetitions, and the fitted
    HPC HUB formula (dashed); the formula of the algorithm that ran
    (dotted) only where it differs from it (at p = 2 the two coincide).
    Oversubscribed launches are left out, as the fits leave them out; the
    transport-ratio figure shows them. ``curves``: (transport, bench, model)
    -> callable(p, m) in ns."""
    benches = [b for b in ("bcast", "allreduce", "alltoall") if b in set(summary["bench"])]
    fig, axes = plt.subplots(1, max(len(benches), 1), figsize=(FIGURE_WIDTH_IN, 2.8), sharey=True, squeeze=False)
    coll = _fitted(summary[summary["bench"].isin(benches)])
    dotted = False
    for ax, bench in zip(axes[0], benches, strict=False):
        for (transport, p), g in coll[coll["bench"] == bench].groupby(["transport", "ranks"]):
            c, marker = transport_style(transport)
            g = g.sort_values("bytes")
            _points(
                ax,
                g,
                "median_ns",
                "low_ns",
                "high_ns",
                c,
                marker if p == 2 else "v",
                f"{TRANSPORT_LABEL.get(transport, transport)}, p = {p}",
                1e3,
            )
            m = np.geomspace(g["bytes"].min(), g["bytes"].max(), 100)
            paper = curves.get((transport, bench, "paper"))
            if paper is not None:
                ax.plot(m, paper(np.full_like(m, p), m) / 1e3, color=c, ls="--", lw=0.9)
            algorithm = curves.get((transport, bench, "algorithm"))
            if algorithm is not None and _formulas_differ(curves, transport, bench, p, m):
                ax.plot(m, algorithm(np.full_like(m, p), m) / 1e3, color=c, ls=":", lw=0.9)
                dotted = True
        size_axes(ax, "bytes per rank", bench)
    axes[0][0].set_ylabel("time, max over ranks (µs)")
    axes[0][0].plot([], [], "--", color="grey", lw=0.9, label="HPC HUB formula, fitted")
    if dotted:
        axes[0][0].plot([], [], ":", color="grey", lw=0.9, label="the algorithm's formula, fitted")
    legend_below(fig, ncol=3)
    fig.tight_layout()
    return fig


def prediction_error_figure(errors: pd.DataFrame, summary: pd.DataFrame, curves: dict) -> Figure:
    """One question: at which sizes does a fitted formula miss the measured
    time by more than the measurement's own spread? Each model's relative
    error per size against the measured median, at p = 2; band: the error
    against the ends of the median's 95 % interval across repetitions.
    Solid: the HPC HUB formula; dotted: the algorithm's formula, only where
    it differs from it (``_formulas_differ``)."""
    benches = [b for b in ("bcast", "allreduce", "alltoall") if b in set(errors["bench"])]
    fig, axes = plt.subplots(1, max(len(benches), 1), figsize=(FIGURE_WIDTH_IN, 2.6), sharey=True, squeeze=False)
    keys = ["transport", "bench", "ranks", "bytes"]
    merged = errors.merge(summary[[*keys, "median_ns", "low_ns", "high_ns"]], on=keys, how="left")
    model_ns = (1 + merged["error"]) * merged["median_ns"]
    merged["err_low"] = model_ns / merged["high_ns"] - 1
    merged["err_high"] = model_ns / merged["low_ns"] - 1
    banded = clear_of_zero = False
    for ax, bench in zip(axes[0], benches, strict=False):
        for (transport, model), g in merged[(merged["bench"] == bench) & (merged["ranks"] == 2)].groupby(
            ["transport", "model"]
        ):
            g = g.sort_values("bytes")
            if model != "paper" and not _formulas_differ(curves, transport, bench, 2, g["bytes"].to_numpy(float)):
                continue
            c, marker = transport_style(transport)
            lo, hi = np.minimum(g["err_low"], g["err_high"]), np.maximum(g["err_low"], g["err_high"])
            ax.plot(
                g["bytes"],
                100 * g["error"],
                color=c,
                ls="-" if model == "paper" else ":",
                marker=marker,
                ms=2.5,
                lw=0.9,
                label=f"{TRANSPORT_LABEL.get(transport, transport)}, "
                f"{'HPC HUB formula' if model == 'paper' else 'algorithm formula'}",
            )
            ok = np.isfinite(lo) & np.isfinite(hi)
            if ok.any():
                ax.fill_between(g["bytes"][ok], 100 * lo[ok], 100 * hi[ok], color=c, alpha=0.15, lw=0)
                banded = True
                clear_of_zero |= bool(((lo[ok] > 0) | (hi[ok] < 0)).any())
        ax.axhline(0, color="black", lw=0.6)
        size_axes(ax, "bytes per rank", bench, ylog=False)
    # (model − measured) / measured; said in full in the caption, as the
    # full form ran taller than the panel.
    axes[0][0].set_ylabel("model error, % of measured")
    legend_below(fig, ncol=2)
    fig.tight_layout()
    drawn_caption(
        fig,
        (
            (
                True,
                "Each fitted collective model's relative prediction error, (model − measured) / measured, per "
                "message size at 2 ranks (the HPC "
                "HUB formula; the algorithm's formula only where it differs, as at 2 ranks the two coincide).",
            ),
            (
                banded,
                "Band: the error against the ends of the measured median's 95 % interval across repetitions; "
                "where a band excludes 0, the formula misses by more than the repetitions spread",
            ),
            (banded and clear_of_zero, "(some bands here do)."),
            (banded and not clear_of_zero, "(no band here does)."),
            (not banded, "No band: the measured medians have no interval from these repetitions."),
        ),
    )
    return fig


def ratio_figure(ratio_tables: list[pd.DataFrame]) -> Figure:
    """Time ratio A/B of the transport pairs (each A the faster path by
    design, so a ratio above 1 is where it was slower), per size and
    benchmark, formed within each repetition: median and 95 % interval;
    circles p = 2, triangles larger p, hollow where oversubscribed."""
    if not any(len(t) for t in ratio_tables):
        fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, 1.0))
        ax.axis("off")
        known = ", ".join(f"{a}/{b}" for a, b in mpistats.TRANSPORT_PAIRS)
        ax.text(
            0.5,
            0.5,
            f"No transport pair was measured: a ratio needs both transports of one of {known}.",
            ha="center",
            va="center",
            wrap=True,
        )
        return fig
    r = pd.concat(ratio_tables, ignore_index=True)
    benches = [b for b in ("pingpong", "bcast", "allreduce", "alltoall") if b in set(r["bench"])]
    pairs = list(dict.fromkeys(zip(r["numerator"], r["denominator"], strict=True)))
    colors = {pair: color(i) for i, pair in enumerate(pairs)}
    fig, axes = plt.subplots(1, max(len(benches), 1), figsize=(FIGURE_WIDTH_IN, 2.6), sharey=True, squeeze=False)
    handles: dict[str, Artist | Container] = {}
    for ax, bench in zip(axes[0], benches, strict=False):
        for (num, den, p), g in r[r["bench"] == bench].groupby(["numerator", "denominator", "ranks"]):
            g = g.sort_values("bytes")
            over = bool(g["oversubscribed"].map(_over).any())
            c = colors[(num, den)]
            label = f"{num}/{den}, p = {p}" + (", oversubscribed" if over else "")
            h = ax.errorbar(
                g["bytes"],
                g["ratio"],
                yerr=interval_bars(g["low"], g["ratio"], g["high"]),
                color=c,
                lw=0.8,
                marker="o" if p == 2 else "v",
                ms=HOLLOW_MS if over else 3,
                mew=HOLLOW_MEW,
                capsize=1,
                mfc="none" if over else c,
            )
            handles.setdefault(label, h)
        ax.axhline(1, color="black", lw=0.6)
        size_axes(ax, "bytes", bench)
    axes[0][0].set_ylabel("time ratio A/B")
    legend_below(fig, list(handles.values()), list(handles), ncol=3)
    fig.tight_layout()
    return fig


def method_ratio_figure(ratios: pd.DataFrame) -> Figure:
    """Our timing method against OSU's on OSU's statistic, per size: a panel
    per operation, a line per transport and rank count, band: the 95 %
    interval across repetitions; 1 = the methods agree, dotted: +-10 %."""
    ops = [b for b in ("pingpong", "bcast", "allreduce", "alltoall") if b in set(ratios["operation"])]
    fig, axes = plt.subplots(1, max(len(ops), 1), figsize=(FIGURE_WIDTH_IN, 2.6), sharey=True, squeeze=False)
    for ax, op in zip(axes[0], ops, strict=False):
        for (transport, p), g in ratios[ratios["operation"] == op].groupby(["transport", "ranks"]):
            g = g.sort_values("bytes")
            c, marker = transport_style(transport)
            ax.plot(
                g["bytes"],
                g["ratio"],
                color=c,
                marker=marker if p == 2 else "v",
                ms=2.5,
                lw=0.8,
                label=f"{TRANSPORT_LABEL.get(transport, transport)}, p = {p}",
            )
            ok = np.isfinite(g["low"]) & np.isfinite(g["high"])
            ax.fill_between(g["bytes"][ok], g["low"][ok], g["high"][ok], color=c, alpha=0.15, lw=0)
        ax.axhline(1, color="black", lw=0.6)
        for edge in (0.9, 1.1):
            ax.axhline(edge, color="grey", lw=0.5, ls=":")
        size_axes(ax, "bytes", op, ylog=False)
    axes[0][0].set_ylabel("ours / OSU's method")
    legend_below(fig, ncol=3)
    fig.tight_layout()
    return fig


def method_agreement(out: Outputs, ratios: pd.DataFrame) -> None:
    """Our timing method against OSU's (``mpistats.method_ratios``): how many
    cells agree within 10 %, and the range of the ratios."""
    if ratios.empty:
        return
    within = ((ratios["ratio"] - 1).abs() <= 0.10).sum()
    out.number("mpi_osu_method_cells", len(ratios))
    out.number("mpi_osu_method_within_10pct", int(within))
    out.number("mpi_osu_method_ratio_min", float(ratios["ratio"].min()), digits=2)
    out.number("mpi_osu_method_ratio_max", float(ratios["ratio"].max()), digits=2)


def collectives(
    out: Outputs,
    *,
    raw: pd.DataFrame,
    summary: pd.DataFrame,
    transports: Sequence[str],
    hockney: Mapping[str, mpimodels.Hockney],
    rate_mbit: float | None,
    agreement: pd.DataFrame,
    fits: pd.DataFrame,
    ratio_tables: Sequence[pd.DataFrame],
) -> None:
    """The MPI section: latency at the smallest and bandwidth at the largest
    size every unshaped transport measured, the fits, the tbf check, the
    probe/reference agreement and the transport comparison."""
    unshaped = summary[(summary["bench"] == "pingpong") & (summary["transport"] != "netns_tbf")]
    sizes = sorted(set.intersection(*(set(g["bytes"]) for _, g in unshaped.groupby("transport"))))
    for transport in transports:
        small = mpistats.pingpong_row(summary, transport, sizes[0]) if transport != "netns_tbf" else None
        if small is not None:
            out.number(
                f"mpi_{transport}_latency_us",
                small["median_ns"] / 1e3,
                unit="µs",
                digits=2,
                estimate=mpistats.estimate_us(small),
                kind="time",
            )
            out.number(f"mpi_{transport}_latency_mean3_us", small["mean3_ns"] / 1e3, unit="µs", digits=2)
        large = mpistats.pingpong_row(summary, transport, sizes[-1])
        if large is not None:
            out.number(
                f"mpi_{transport}_bandwidth_mb_s", large["bytes"] / large["median_ns"] * 1e3, unit="MB/s", digits=0
            )
        if transport in hockney:
            h = hockney[transport]
            out.number(f"mpi_{transport}_hockney_ts_us", h.small.ts_ns / 1e3, unit="µs", digits=2)
            big = h.large or h.small
            out.number(f"mpi_{transport}_hockney_bw_mb_s", big.bandwidth_mb_s, unit="MB/s", digits=0)
            out.number(f"mpi_{transport}_hockney_breakpoint", h.breakpoint, unit="B")
    out.number("mpi_latency_bytes", int(sizes[0]), unit="B")
    out.number("mpi_bandwidth_bytes", int(sizes[-1]), unit="B")
    if rate_mbit and "netns_tbf" in transports:
        shaped = summary[(summary["bench"] == "pingpong") & (summary["transport"] == "netns_tbf")]
        fitted = mpimodels.transfer_rate(shaped["bytes"], shaped["median_ns"])[0] * 8  # Mbit/s
        out.number("mpi_tbf_rate_mbit", rate_mbit, unit="Mbit/s")
        out.number("mpi_tbf_fitted_mbit", fitted, unit="Mbit/s")
        out.number("mpi_tbf_fitted_ratio", fitted / rate_mbit, digits=3)
    for r in agreement.itertuples():
        if r.bytes == agreement["bytes"].min():
            out.number(f"mpi_{r.transport}_reference_latency_us", r.reference_ns / 1e3, unit="µs", digits=2)
            out.number(f"mpi_{r.transport}_probe_over_reference", r.ratio, digits=3)
    for r in fits.itertuples():
        key = f"mpi_fit_{r.transport}_{r.bench}_{r.model}"
        out.number(f"{key}_ts_us", r.ts_ns / 1e3, unit="µs", digits=2)
        out.number(f"{key}_tw_ns_per_byte", r.tw_ns_per_byte, unit="ns/B", digits=3)
        out.number(f"{key}_median_abs_error_pct", 100 * r.median_abs_error, unit="%", digits=0)
        out.text(f"mpi_algorithm_{r.bench}", r.algorithm)
    measured_ranks = sorted(summary["ranks"].unique())
    out.text("mpi_ranks", ", ".join(str(int(p)) for p in measured_ranks))
    out.text(
        "mpi_oversubscribed_ranks",
        ", ".join(str(int(p)) for p in sorted(summary.loc[summary["oversubscribed"], "ranks"].unique())) or "none",
    )
    out.text("mpi_transports", ", ".join(transports))
    if "nodes" in transports:
        across = summary[summary["transport"] == "nodes"]
        out.text("mpi_nodes_first", str(across["node"].iloc[0]))
        out.text("mpi_nodes_peers", str(across["peers"].iloc[0]).replace(",", ", "))
    out.number("mpi_repeats", int(raw["rep"].nunique()))
    out.number("mpi_series", int(raw["series"].nunique()))
    out.text("mpi_transport_comparison", transport_comparison(ratio_tables))
    out.text("mpi_oversubscribed_drawn", OVERSUBSCRIBED_DRAWN)
    fitted_ranks = sorted({int(p) for ranks in fits["ranks_fitted"] for p in ranks}) if "ranks_fitted" in fits else []
    out.text("mpi_fit_shapes_sentence", fit_shapes_sentence(fits, fitted_ranks))


def fit_shapes_sentence(fits: pd.DataFrame, ranks: Sequence[int]) -> str:
    """Whether the fits can tell the HPC HUB formula from the algorithm's:
    not at p = 2 alone, where log2 p = 1 and both are a start-up plus a
    per-byte term; else their median errors side by side."""
    if not len(fits) or (ranks and max(ranks) <= 2):
        return (
            "The fits used p = 2 only (the rank counts that fit on the CPUs): there log2 p = 1 and each "
            "algorithm's formula is, like the HPC HUB formula, a start-up plus a per-byte term, so the two "
            "cannot be told apart here."
        )
    by_model = fits.groupby("model")["median_abs_error"].median()
    return (
        "Median error over transports and collectives: "
        + "; ".join(f"{m} formula {100 * v:.0f} %" for m, v in by_model.items())
        + "."
    )


def transport_comparison(ratio_tables: Sequence[pd.DataFrame]) -> str:
    """The worst faster/slower time ratio per collective at p = 2, per
    transport pair (what the paper shows in place of M1/M2 on one node kind)."""
    worst = []
    for tab in ratio_tables:
        coll = tab[tab["bench"].isin(["bcast", "allreduce", "alltoall"]) & (tab["ranks"] == 2) & ~tab["oversubscribed"]]
        for bench, g in coll.groupby("bench"):
            i = g["ratio"].idxmin()
            worst.append(
                f"{tab['numerator'].iloc[0]}/{tab['denominator'].iloc[0]} {bench} "
                f"{g.loc[i, 'ratio']:.2f} at {int(g.loc[i, 'bytes'])} B"
            )
    return "; ".join(worst) if worst else "no transport comparison was measured"
