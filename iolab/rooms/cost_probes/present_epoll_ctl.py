"""epoll_ctl's figure, epoll_ctl_cost (caption: epoll_ctl_cost.rst here):
one EPOLL_CTL_MOD of a TCP socket beside s, the null system call."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ...estimation.intervals import across_reps
from ...report.plots.style import FIGURE_WIDTH_IN, color, legend_below, median_marker


def figure(epoll_ctl: pd.DataFrame, syscall: pd.DataFrame) -> Figure:
    """Each repetition's median ns per call (points) and their median with
    its 95 % interval (black): getppid (s), then the MOD, from the measured
    (not warm-up) batches of one node."""
    rows = [("getppid (s)", syscall[syscall["variant"] == "getppid"]), ("epoll_ctl MOD", epoll_ctl)]
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, 2.4))
    for i, (_, frame) in enumerate(rows):
        per_rep = frame.groupby("rep")["ns_per_call"].median().to_numpy(float)
        jitter = np.linspace(-0.12, 0.12, per_rep.size) if per_rep.size > 1 else np.zeros(per_rep.size)
        ax.plot(i - 0.1 + jitter, per_rep, "o", ms=3, alpha=0.7, color=color(i))
        e = across_reps(per_rep, predict=False)
        median_marker(ax, i + 0.22, e.value, e.low, e.high, "median, 95 % interval" if i == 0 else None)
    ax.set_xticks(range(len(rows)), [name for name, _ in rows])
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("ns per call")
    ax.set_title(f"a repetition's median (points), {epoll_ctl['rep'].nunique()} repetitions")
    legend_below(fig, ncol=1)
    fig.tight_layout()
    return fig
