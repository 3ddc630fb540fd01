"""Zero-copy send in the paper: its numbers (ratios, crossover, copied
shares) and its figure, send_zc_cost (caption: send_zc_cost.rst here)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ...report import labels
from ...report.outputs import Outputs
from ...report.plots.style import FIGURE_WIDTH_IN, PALETTE, color, interval_bars, legend_below, size_axes
from . import stats


def numbers(out: Outputs, summary: pd.DataFrame) -> None:
    """Zero-copy send against plain send (``summary``: stats.ratios):
    each variant's ratio at every size, where it starts to pay, and the
    share of its sends the kernel copied."""
    for row in summary.itertuples():
        out.number(f"zc_ratio_{row.variant}_{row.bytes}", row.ratio, digits=2, estimate=row.estimate, kind="ratio")
        if math.isfinite(row.copied_share):
            out.number(f"zc_copied_pct_{row.variant}_{row.bytes}", 100 * row.copied_share, unit="%")
    for variant in sorted(set(summary["variant"])):
        cross = stats.crossover(summary, variant)
        out.text(f"zc_crossover_{variant}", cross.sentence())
        if cross.bytes is not None:
            out.number(f"zc_crossover_bytes_{variant}", cross.bytes, unit="B")
    shares = summary["copied_share"].dropna()
    if len(shares):
        out.number("zc_copied_pct_min", 100 * float(shares.min()), unit="%")
        least = 100 * float(shares.min())
        out.text(
            "zc_copied_sentence",
            "every one of them did" if least >= 99.95 else f"at every size at least {least:.0f} % of them did",
        )


def figure(summary: pd.DataFrame) -> Figure:
    """Left: ns per byte sent against message size, plain send and each
    zero-copy variant (medians over repetitions). Right: each zero-copy
    variant's time per send over plain send's at the same size (median and
    95 % interval across repetitions), with the share of its sends the
    kernel reported as copied (along the bottom)."""
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(FIGURE_WIDTH_IN, 2.9))
    if summary.empty:
        # The figure is a declared output of every run with send_zc: say why it is empty.
        for a in (ax, ax2):
            a.text(
                0.5,
                0.5,
                "no zero-copy variant measured\nbeside plain send",
                ha="center",
                va="center",
                transform=a.transAxes,
            )
            a.set_axis_off()
        return fig
    plain = summary.drop_duplicates("bytes").sort_values("bytes")
    ax.plot(
        plain["bytes"],
        plain["send_ns_per_byte"],
        marker="o",
        ms=2.5,
        lw=1.3,
        color=PALETTE[6],
        label=labels.variant("send"),
    )
    for i, (variant, g) in enumerate(summary.groupby("variant", sort=True)):
        g = g.sort_values("bytes")
        c = color(i)
        ax.plot(g["bytes"], g["zc_ns_per_byte"], marker="s", ms=2.5, lw=1.1, color=c, label=labels.variant(variant))
        ax2.errorbar(
            g["bytes"] * (1.04 if i else 0.96),
            g["ratio"],
            yerr=interval_bars(g["low"], g["ratio"], g["high"]),
            marker="s",
            ms=3,
            lw=1.1,
            color=c,
            capsize=1.5,
            label=labels.variant(variant),
        )
        # The copied share, along the bottom edge: one row per variant.
        for size, share in zip(g["bytes"], g["copied_share"], strict=True):
            if np.isfinite(share):
                ax2.annotate(
                    f"{share:.0%}",
                    (size, 0.03 + 0.07 * i),
                    xycoords=("data", "axes fraction"),
                    ha="center",
                    color=c,
                    alpha=0.8,
                )
    ax2.axhline(1.0, color="black", lw=0.8, ls=":")
    low, high = ax2.get_ylim()
    ax2.set_ylim(low - 0.2 * (high - low), high)
    size_axes(ax, "message size (bytes)", "sender's ns per byte")
    size_axes(ax2, "message size (bytes)", "zero-copy / plain send (% copied)", ylog=False)
    ax.set_ylabel("ns per byte")
    ax2.set_ylabel("time per send, ratio")
    # Room at both ends for the copied shares written at the first and last
    # size: centred there, "100%" ran over the frame.
    sizes = summary["bytes"].astype(float)
    ax2.set_xlim(sizes.min() / 1.8, sizes.max() * 1.8)
    legend_below(fig, ncol=3)
    fig.tight_layout()
    return fig
