"""The claims notebook's forest plot."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ...claims.verdicts import Finding, Outcome
from .style import FIGURE_WIDTH_IN, HOLLOW_MEW, HOLLOW_MS, legend_below

OUTCOME_COLORS = {Outcome.REPRODUCED: "#009e73", Outcome.NOT_REPRODUCED: "#d55e00", Outcome.UNDECIDED: "#e69f00"}
LIMITS = (0.25, 4.0)
# One column fits a page up to this many rows; beyond, two columns, each
# with labels wrapped to half the width so that no label runs into the
# other column's axis.
ROWS_PER_COLUMN = 46
LABEL_CHARS = {1: 84, 2: 30}
ROW_IN = 0.145  # one row unit, inches at print size


def _label(f: Finding, shared: str, columns: int = 1) -> str:
    part = f.part.removesuffix(shared) if shared and f.part.endswith(shared) else f.part
    # Whole, over as many lines as it needs: a cut label hides what the row is.
    return "\n".join(textwrap.wrap(f"{f.claim}: {part}", LABEL_CHARS.get(columns, 30)))


def _shared_note(rows: Sequence[Finding]) -> str:
    """A setup note (" [...]") every row that has one shares, said once."""
    notes = {f.part[f.part.rindex(" [") :] for f in rows if f.part.endswith("]") and " [" in f.part}
    return notes.pop() if len(notes) == 1 else ""


def _clip(x: float) -> float:
    return min(max(x, LIMITS[0]), LIMITS[1])


def _heights(labels: Sequence[str]) -> np.ndarray:
    """Each row's height in row units: a label of several lines needs more
    than one row's room, or it is drawn over its neighbours."""
    return np.array([max(1.0, 0.85 * (label.count("\n") + 1)) for label in labels])


def _draw(ax: plt.Axes, rows: Sequence[Finding], shared: str, columns: int) -> None:
    lo_lim, hi_lim = LIMITS
    labels = [_label(f, shared, columns) for f in rows]
    heights = _heights(labels)
    centres = np.cumsum(heights) - heights / 2
    for f, i in zip(rows, centres, strict=True):
        assert f.rule is not None and f.estimate is not None
        b = f.rule.bound
        v, lo, hi = f.estimate.value / b, f.estimate.low / b, f.estimate.high / b
        c = OUTCOME_COLORS.get(f.outcome, "#999999")
        # The side of the bound where the claim holds, shaded faintly.
        side = {"above": (1.0, hi_lim), "below": (lo_lim, 1.0)}.get(f.rule.kind, (1 - f.rule.margin, 1 + f.rule.margin))
        ax.fill_between(side, i - 0.42, i + 0.42, color="#009e73", alpha=0.08, lw=0)
        # Everything drawn is clipped to the axis, and an interval that lies
        # wholly off it collapses onto its edge (its arrow says which way).
        left = _clip(lo if math.isfinite(lo) else lo_lim)
        right = _clip(hi if math.isfinite(hi) else hi_lim)
        mid = min(max(_clip(v), left), right)
        bars = ax.errorbar(
            [mid],
            [i],
            xerr=[[mid - left], [right - mid]],
            fmt="none",
            ecolor=c,
            elinewidth=0.9 if f.context else 1.6,
            capsize=0,
        )
        if f.context:
            bars.lines[2][0].set_linestyle(":")
        for end, limit, marker in ((lo, lo_lim, "<"), (hi, hi_lim, ">")):
            if not np.isfinite(end) or (end < limit if marker == "<" else end > limit):
                ax.plot([limit], [i], marker=marker, color=c, ms=3.5)
        ax.plot(
            [mid],
            [i],
            "o",
            ms=HOLLOW_MS if f.context else 3.5,
            mew=HOLLOW_MEW,
            color=c,
            mfc="white" if f.context else c,
        )
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlim(lo_lim * 0.9, hi_lim * 1.1)
    ticks = [0.25, 0.5, 1.0, 2.0, 4.0]
    ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FixedFormatter([f"{t:g}" for t in ticks]))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_ylim(float(heights.sum()), 0.0)
    ax.set_yticks(centres, labels, fontsize=7)
    ax.set_xlabel("our value / the claim's bound")
    ax.grid(axis="y", visible=False)


def forest_figure(findings: Sequence[Finding]) -> Figure:
    """Every part with a value: the median and 95 % interval across
    repetitions divided by the claim's bound, so every threshold sits at 1;
    shaded, the side where the claim holds (an equivalence: its margin);
    colour, the verdict; hollow and dotted, context rows, which no verdict
    counts. Arrows: an interval that runs off the axis or is unbounded."""
    rows = [f for f in findings if f.estimate is not None and f.rule is not None]
    shared = _shared_note(rows)
    columns = max(1, math.ceil(len(rows) / ROWS_PER_COLUMN))
    per = math.ceil(len(rows) / columns) if rows else 1
    # A wrapped label takes the room of its lines.
    units = max(
        (_heights([_label(f, shared, columns) for f in rows[k * per : (k + 1) * per]]).sum() for k in range(columns)),
        default=0.0,
    )
    fig, axes = plt.subplots(1, columns, figsize=(FIGURE_WIDTH_IN, ROW_IN * max(units, 4) + 1.0), squeeze=False)
    for k, ax in enumerate(axes[0]):
        _draw(ax, rows[k * per : (k + 1) * per], shared, columns)
    handles = [plt.Line2D([], [], color=c, marker="o", lw=1.6, label=o.value) for o, c in OUTCOME_COLORS.items()]
    handles.append(
        plt.Line2D([], [], color="#777777", marker="o", mfc="white", lw=0.9, ls=":", label="context, not counted")
    )
    legend_below(fig, handles, ncol=4)
    if shared:
        fig.text(0.5, 1.0, f"echo parts: {shared.strip()[1:-1]}", ha="center", va="bottom", fontsize=7.5)
    fig.tight_layout()
    return fig
