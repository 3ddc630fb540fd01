"""One figure style for the paper: sizes that print at the paper's text width
with fonts of at least MIN_FONT_PT, a colour-blind-safe palette, legends
outside the data, and a stamp line saying where the numbers were measured.
``smallest_font`` is what tests/test_figures.py checks every figure with.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from cycler import cycler
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.container import Container
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import FuncFormatter, LogFormatter
from numpy.typing import ArrayLike

# A4 with 2 cm margins (paper/paper.typ): figures print this wide.
TEXT_WIDTH_IN = 6.69
# Saving pads a figure's tight box by this on every side, so a figure is drawn
# this much narrower than the text: laid out within its width and padded, it
# is saved no wider than the text, and no font prints below its size. (Drawn
# at the text's width, a figure whose ticks reached its edges saved 6.71 in
# wide and printed its 7 pt stamp at 6.98 pt.)
SAVE_PAD_IN = 0.1
FIGURE_WIDTH_IN = TEXT_WIDTH_IN - 2 * SAVE_PAD_IN
MIN_FONT_PT = 7.0
# Okabe-Ito: distinguishable in colour-blind vision and in grey.
PALETTE = ["#0072b2", "#d55e00", "#009e73", "#e69f00", "#56b4e9", "#cc79a7", "#000000", "#999999"]
EPOLL_COLOR = "#000000"


def apply() -> None:
    """The rcParams every notebook starts with."""
    plt.rcParams.update(
        {
            "figure.figsize": (FIGURE_WIDTH_IN, 2.9),
            "savefig.pad_inches": SAVE_PAD_IN,
            "figure.dpi": 110,
            "savefig.dpi": 200,
            "font.size": 8.5,
            "axes.titlesize": 8.5,
            "axes.labelsize": 8.5,
            "xtick.labelsize": 8,
            "ytick.labelsize": 8,
            "legend.fontsize": 7.5,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.prop_cycle": cycler(color=PALETTE),
            "legend.frameon": False,
            "svg.fonttype": "none",
            "pdf.fonttype": 42,
            # Fixed metadata so re-rendering the same data gives the same bytes.
            "svg.hashsalt": "iolab",
        }
    )


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def legend_below(
    fig: Figure, handles: Sequence[Artist | Container] | None = None, labels: Sequence[str] | None = None, ncol: int = 3
) -> None:
    """One legend under every panel, clear of the data."""
    if handles is None:
        seen: dict[str, Artist | Container] = {}
        for ax in fig.axes:
            for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
                seen.setdefault(lab, h)
        handles, labels = list(seen.values()), list(seen)
    if not handles:
        return
    if labels is None:
        labels = [str(h.get_label()) for h in handles]
    # As many columns as fit the figure's width: a wider legend would widen
    # the saved figure, and print every font smaller.
    width = fig.get_figwidth() * fig.dpi
    for columns in range(min(ncol, len(handles)), 0, -1):
        # matplotlib's stub types handles as Artists only; it draws an
        # errorbar's container as its handle too, which the figures pass.
        legend = fig.legend(  # type: ignore[call-overload]
            handles,
            labels,
            loc="upper center",
            bbox_to_anchor=(0.5, 0.0),
            ncol=columns,
            borderaxespad=0.2,
        )
        if columns == 1 or legend.get_window_extent().width <= width:
            return
        legend.remove()


def size_axes(ax: Axes, xlabel: str, title: str | None = None, ylog: bool = True) -> None:
    """An axis over sizes or batch counts: x in powers of two, y logarithmic
    unless ``ylog`` is False."""
    ax.set_xscale("log", base=2)
    if ylog:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    if title is not None:
        ax.set_title(title)


def plain_ticks(axis: Axis) -> None:
    """Tick labels as plain numbers (0.5, 2, 4), not powers, on a log axis
    of ratios or counts."""
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    # An axis spanning less than a decade is labelled at some of its minor
    # ticks (matplotlib's thresholds), plainly too.
    axis.set_minor_formatter(_PlainLogFormatter(labelOnlyBase=False))


class _PlainLogFormatter(LogFormatter):
    """matplotlib's choice of which minor ticks to label, each as 0.8, not 8e-01."""

    def _num_to_string(self, x: float, vmin: float, vmax: float) -> str:
        return f"{x:g}"


def value_ticks(axis: Axis, values: ArrayLike) -> None:
    """Ticks at the values the figure measured (connection counts), as
    plain numbers, and no minor labels: on a log axis spanning less than
    two decades matplotlib labels its minor ticks, and "2×10²" printed over
    "10²" (issue 83)."""
    from matplotlib.ticker import FixedLocator, NullFormatter

    axis.set_major_locator(FixedLocator(sorted({float(v) for v in np.asarray(values, dtype=float).ravel()})))
    axis.set_major_formatter(FuncFormatter(lambda v, _: compact(v)))
    axis.set_minor_formatter(NullFormatter())


def compact(value: float) -> str:
    """A tick's value, thousands as "k": on a log axis 500 and 1000 sit a
    label's width apart, and "1000" printed over "500" (issue 83)."""
    if value >= 1000 and value % 100 == 0:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def interval_bars(low: ArrayLike, value: ArrayLike, high: ArrayLike) -> np.ndarray:
    """errorbar's yerr from an interval, zero where it is unbounded (fewer
    than 6 repetitions: the value is drawn without a bar)."""
    low, value, high = (np.asarray(x, dtype=float) for x in (low, value, high))
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(low) & np.isfinite(high) & (low <= value) & (value <= high)
    return np.vstack([np.where(ok, value - low, 0.0), np.where(ok, high - value, 0.0)])


def median_marker(ax: Axes, x: float, value: float, low: float, high: float, label: str | None = None) -> None:
    """The median over repetitions beside their points: a black square with
    its 95 % interval (no bar where the interval is unbounded)."""
    ax.errorbar(
        [x],
        [value],
        yerr=interval_bars([low], [value], [high]),
        fmt="s",
        color="black",
        ms=3.5,
        capsize=3,
        lw=1.2,
        label=label,
    )


def add_stamp(fig: Figure, text: str) -> Text:
    """The figure's identity as a footer line: machine, repetitions, date, commit."""
    return fig.text(
        0.0, 0.0, text, fontsize=MIN_FONT_PT, color="#555555", ha="left", va="top", transform=fig.transFigure
    )


def smallest_font(fig: Figure, width_in: float) -> float:
    """The smallest font of any visible text, in points at print size, for
    a figure saved ``width_in`` wide and printed at TEXT_WIDTH_IN."""
    scale = TEXT_WIDTH_IN / width_in
    sizes = [float(t.get_fontsize()) for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return min(sizes) * scale if sizes else float("inf")


def draws_intervals(fig: Figure) -> bool:
    """Whether the figure draws any interval: error bars, or a band
    (fill_between, axhspan)."""
    from matplotlib.collections import PolyCollection
    from matplotlib.container import ErrorbarContainer
    from matplotlib.patches import Polygon, Rectangle

    for ax in fig.axes:
        if any(isinstance(c, ErrorbarContainer) for c in ax.containers):
            return True
        if any(isinstance(c, PolyCollection) for c in ax.collections):
            return True
        if any(isinstance(p, (Polygon, Rectangle)) and p is not ax.patch for p in ax.patches):
            return True
    return False


def overlapping_labels(fig: Figure) -> list[str]:
    """Tick labels drawn over another panel's plotting area or over another
    label of their own axis, and axis labels drawn over any tick label or
    another panel (a group's name taller than its panel): either is
    unreadable at any size."""
    fig.canvas.draw()
    boxes = [(ax, ax.get_window_extent()) for ax in fig.axes if ax.get_visible()]
    hits = []
    every_tick = []
    for ax, _ in boxes:
        for ticks in (
            ax.get_xticklabels() + ax.get_xticklabels(minor=True),
            ax.get_yticklabels() + ax.get_yticklabels(minor=True),
        ):
            shown = [(t.get_text(), t.get_window_extent()) for t in ticks if t.get_visible() and t.get_text()]
            every_tick += [e for _, e in shown]
            for i, (text, extent) in enumerate(shown):
                # A hair of slack: labels may touch the next panel's frame.
                if any(other is not ax and extent.overlaps(box.shrunk(0.98, 0.98)) for other, box in boxes):
                    hits.append(text)
                elif any(extent.shrunk(0.98, 0.9).overlaps(e) for _, e in shown[i + 1 :]):
                    hits.append(text)
    for ax, box in boxes:
        # A note written in a panel must stay inside it: half over the frame,
        # "100%" read as part of the axis.
        for note in ax.texts:
            if note.get_visible() and note.get_text():
                e = note.get_window_extent()
                if e.overlaps(box) and not (box.x0 <= e.x0 + 0.5 and e.x1 - 0.5 <= box.x1):
                    hits.append(note.get_text())
        for label in (ax.xaxis.label, ax.yaxis.label):
            if not (label.get_visible() and label.get_text()):
                continue
            extent = label.get_window_extent().shrunk(0.98, 0.98)
            if any(extent.overlaps(e) for e in every_tick) or any(
                other is not ax and extent.overlaps(box) for other, box in boxes
            ):
                hits.append(label.get_text())
    return hits


# Each MPI transport's colour, marker and name, shared by the MPI room's
# figures and the nodes figure.
TRANSPORT_STYLE = {
    "shm": (PALETTE[0], "o"),
    "tcp": (PALETTE[1], "s"),
    "netns": (PALETTE[2], "^"),
    "netns_tbf": (PALETTE[3], "D"),
    "nodes": (PALETTE[5], "v"),
}
TRANSPORT_LABEL = {
    "shm": "shared memory",
    "tcp": "TCP, loopback",
    "netns": "TCP between namespaces",
    "netns_tbf": "namespaces, tbf-shaped",
    "nodes": "TCP between nodes",
}


def transport_style(transport: str) -> tuple[str, str]:
    return TRANSPORT_STYLE.get(transport, (PALETTE[6], "x"))


def drawn_caption(fig: Figure, parts: Sequence[tuple[bool, str]]) -> None:
    """Give ``fig`` the caption of what it drew: each (drawn, sentence) part
    whose element is in the figure, in order; Outputs.figure uses it
    instead of the static caption file, which describes every element."""
    text = ""
    for drawn, part in parts:
        if drawn:
            # Punctuation closes the sentence before it: no space in front.
            text += part if not text or part[:1] in ".,;:)" else f" {part}"
    fig.iolab_caption = text  # type: ignore[attr-defined]  # a Figure takes attributes


# Markers that may be drawn hollow: large enough, with a thin enough edge,
# that the hole prints at MIN_HOLLOW_PT (4.5 - 0.8 = 3.7 pt).
HOLLOW_MS = 4.5
HOLLOW_MEW = 0.8
# A hollow marker's hole at print size, in points, below which it prints
# as filled: the 3 pt markers of a transport-ratio figure (a 2 pt hole,
# crossed by 0.8 pt error bars) read as filled on the page (issue 83).
MIN_HOLLOW_PT = 3.0
# Markers with an inside that can be left empty.
FILLABLE = set("os^v<>Dd8pPhH*X")
# Words a caption uses to promise an element, and the element each names
# (``drawn_elements``); "no band" and the like promise nothing.
PROMISES = {
    "hollow": "hollow",
    "filled": "filled",
    "dashed": "dashed",
    "dotted": "dotted",
    "shaded": "shaded",
    "band": "shaded",
    "bands": "shaded",
    "triangles": "triangles",
    "circles": "circles",
    "arrows": "arrows",
    "bars": "bars",
    "vertical lines": "vertical lines",
}


def _line_kind(style: object, width: float) -> str:
    """ "dashed", "dotted" or "" for a line style, a string or an (offset,
    dashes) pair whose dashes are scaled by the line's width."""
    if style in ("--", "dashed", "-.", "dashdot"):
        return "dashed"
    if style in (":", "dotted"):
        return "dotted"
    if isinstance(style, tuple) and len(style) == 2 and style[1]:
        on = float(style[1][0]) / max(width, 1e-9)
        return "dotted" if on < 2 else "dashed"
    return ""


def drawn_elements(fig: Figure, width_in: float | None = None) -> dict[str, bool]:
    """What the figure draws in its panels (its legend left out): each
    element a caption may promise (PROMISES), a hollow marker only where
    its hole prints at MIN_HOLLOW_PT or more at the paper's text width
    (``width_in``: the width the figure is saved at)."""
    from matplotlib.collections import LineCollection, PolyCollection
    from matplotlib.colors import to_rgba
    from matplotlib.container import ErrorbarContainer
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch, Polygon, Rectangle

    scale = TEXT_WIDTH_IN / (width_in or fig.get_figwidth())
    found = dict.fromkeys(sorted(set(PROMISES.values())), False)
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        lines = [ln for ln in ax.get_lines() if isinstance(ln, Line2D) and ln.get_visible()]
        for ln in lines:
            x = np.asarray(ln.get_xdata(), dtype=float)
            kind = _line_kind(ln.get_linestyle(), ln.get_linewidth())
            if kind and len(x) > 1:
                found[kind] = True
            if len(x) > 1 and np.all(x == x[0]) and ln.get_linestyle() not in ("None", "", " "):
                found["vertical lines"] = True
            marker = ln.get_marker()
            if not isinstance(marker, str) or marker not in FILLABLE or not len(x) or ln.get_markersize() <= 0:
                continue
            found["triangles"] |= marker in "^v<>"
            found["circles"] |= marker == "o"
            found["arrows"] |= marker in "<>"
            face = ln.get_markerfacecolor()
            rgba = (0.0, 0.0, 0.0, 0.0) if str(face).lower() == "none" else to_rgba(face)
            empty = rgba[3] == 0 or rgba[:3] == (1.0, 1.0, 1.0)
            if empty and (ln.get_markersize() - ln.get_markeredgewidth()) * scale >= MIN_HOLLOW_PT:
                found["hollow"] = True
            found["filled"] |= not empty
        for coll in ax.collections:
            if not coll.get_visible():
                continue
            if isinstance(coll, PolyCollection) and len(coll.get_paths()):
                found["shaded"] = True
            if isinstance(coll, LineCollection):
                # LineCollection's stubs omit the Collection getters it has.
                widths = list(coll.get_linewidth()) or [1.0]  # type: ignore[arg-type]
                for style in coll.get_linestyle():
                    kind = _line_kind(style, float(widths[0]))
                    if kind:
                        found[kind] = True
        for p in ax.patches:
            if isinstance(p, (Polygon, Rectangle)) and p is not ax.patch and p.get_visible():
                found["shaded"] = True
            found["arrows"] |= isinstance(p, FancyArrowPatch)
        found["arrows"] |= any(getattr(t, "arrow_patch", None) is not None for t in ax.texts)
        found["bars"] |= any(isinstance(c, ErrorbarContainer) for c in ax.containers)
    return found


def promised(caption: str) -> set[str]:
    """The elements a caption promises (PROMISES), leaving out a word that
    follows "no", "not" or "without" (a caption saying what is absent), and
    one its own clause makes conditional ("dotted, where it differs")."""
    flat = " ".join(caption.lower().split())
    out = set()
    for word, element in PROMISES.items():
        for m in re.finditer(rf"\b{re.escape(word)}\b", flat):
            before = flat[: m.start()].split()[-2:]
            clause = re.split(r"[;.:]", flat[m.end() :], maxsplit=1)[0]
            conditional = re.search(r"\b(where|when|if)\b", clause) is not None
            if not {"no", "not", "without"} & set(before) and not conditional:
                out.add(element)
    return out


def broken_promises(caption: str, drawn: dict[str, bool]) -> list[str]:
    """The elements a caption promises that the figure did not draw."""
    return sorted(e for e in promised(caption) if not drawn.get(e, False))
