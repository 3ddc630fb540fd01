"""The paper's first figure: io_uring against epoll on this machine
(iolab.claims.headline), two panels side by side: server CPU per request
and requests/s as io_uring/epoll ratios per cell, each with its 95 %
interval over repetitions, and beside the CPU the cost model's prediction
(hollow)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ...claims.headline import METRICS
from . import style


def figure(rows: pd.DataFrame) -> Figure:
    """The two panels from ``headline.table``'s rows."""
    fig, axes = plt.subplots(1, 2, figsize=(style.FIGURE_WIDTH_IN, 2.6), sharey=False)
    cells = sorted({(int(c), int(b)) for c, b in zip(rows["connections"], rows["bytes"], strict=True)})
    sizes = sorted({b for _, b in cells})
    conns = sorted({c for c, _ in cells})
    width = 0.8 / max(len(sizes), 1)
    for ax, (metric, title) in zip(axes, METRICS.items(), strict=True):
        mine = rows[rows["metric"] == metric]
        for j, b in enumerate(sizes):
            sel = mine[mine["bytes"] == b].set_index("connections").reindex(conns)
            x = np.arange(len(conns)) + (j - (len(sizes) - 1) / 2) * width
            ok = sel["value"].notna().to_numpy()
            low = sel["low"].where(np.isfinite(sel["low"]), sel["value"])
            high = sel["high"].where(np.isfinite(sel["high"]), sel["value"])
            ax.errorbar(
                x[ok],
                sel["value"][ok],
                yerr=style.interval_bars(low[ok], sel["value"][ok], high[ok]),
                fmt="o",
                color=style.color(j),
                ms=4,
                capsize=2,
                label=f"{b} B, measured",
            )
            pred = sel["predicted"].notna().to_numpy()
            if pred.any():
                ax.errorbar(
                    x[pred] + width / 3,
                    sel["predicted"][pred],
                    yerr=style.interval_bars(
                        sel["predicted_low"][pred], sel["predicted"][pred], sel["predicted_high"][pred]
                    ),
                    fmt="D",
                    mfc="none",
                    color=style.color(j),
                    ms=4,
                    capsize=2,
                    label=f"{b} B, cost model B",
                )
        ax.axhline(1.0, color=style.EPOLL_COLOR, lw=0.8, ls="--")
        ax.set_xticks(np.arange(len(conns)), [str(c) for c in conns])
        ax.set_xlabel("connections")
        ax.set_ylabel(f"{title}, io_uring / epoll")
        ax.set_yscale("log")
        style.plain_ticks(ax.yaxis)
    fig.tight_layout()
    style.legend_below(fig, ncol=4)
    return fig
