"""Where an io_uring preset's extra cost at large messages comes from, read
from the servers' own counters (issue 83: explain the 16-64 KiB cost of
the older ring): per preset, at the two largest sizes, the server CPU per
byte it spends beyond epoll's (paired within each repetition, median), and
per echoed request the operations it counted (SQEs, CQEs, provided
receive and send buffers, ENOBUFS, rearms, short writes) beside the same
counts at the smallest size. A "request" is one echoed message, as in
server CPU per request (iolab.rooms.echo.tidy): a server that receives a
message in several buffers counts several operations for it.

The sentence says, for each preset whose extra cost is clearly above
epoll's own cost, whether its counts per request stayed those of the
smallest size (then the extra cost grows with the bytes, not with the
operations, and its cause is not measured here) or grew with the size
(then it comes with more operations per request)."""

from __future__ import annotations

import math

import pandas as pd

from . import summaries as echostats
from .modern_stats import CPU, LOADED

# The servers' counters an echoed request is read by.
COUNTERS = ("sqes", "cqes", "recv_buffers", "send_buffers", "nobufs", "rearms", "short_writes")
COUNTER_WORDS = {
    "sqes": "SQEs",
    "cqes": "CQEs",
    "recv_buffers": "provided receive buffers",
    "send_buffers": "send buffers",
    "nobufs": "ENOBUFS",
    "rearms": "rearms",
    "short_writes": "short writes",
}
# A preset's extra cost is clear when its median over repetitions is at
# least this share of epoll's own cost per request at that size, and every
# repetition's is above 0: a difference no reader would put down to noise.
CLEAR_SHARE = 0.5
# Counts per request equal to the smallest size's within this (relative,
# or absolute for counts near 0): the same operations, not more.
SAME_COUNT = 0.1


def _per_request(rows: pd.DataFrame) -> pd.DataFrame:
    """Each cell's counters per echoed request (server_bytes / bytes)."""
    echoed = rows["server_bytes"] / rows["bytes"]
    present = [c for c in COUNTERS if c in rows]
    per = rows[present].apply(pd.to_numeric, errors="coerce").div(echoed, axis=0)
    return pd.concat([rows[["preset", "bytes", "rep", CPU]], per], axis=1)


def excess_per_byte(echo: pd.DataFrame, connections: int = LOADED) -> pd.DataFrame:
    """Per io_uring preset and each of the two largest sizes, in our setup
    at ``connections``, one request in flight: the server CPU per byte
    beyond epoll's (per repetition (preset - epoll) / bytes, median, ns/B),
    both medians per request (ns), the repetitions paired, and each counter
    per echoed request (median) with its value at the smallest size
    (``<counter>_smallest``). Empty where epoll or the sizes are missing."""
    ours = echostats.one_setup(echostats.with_setup(echo), {**echostats.OUR_SETUP, "pipeline": 1})
    ok = ours[(ours["status"] == "ok") & (ours["connections"] == connections) & ours["server"].isin(["uring", "epoll"])]
    sizes = sorted(set(ok["bytes"]))
    if "epoll" not in set(ok["preset"]) or len(sizes) < 3:
        return pd.DataFrame()
    per = _per_request(ok)
    base = per[per["preset"] == "epoll"].set_index(["bytes", "rep"])[CPU]
    counts = per.groupby(["preset", "bytes"]).median(numeric_only=True)
    rows = []
    for preset, g in per[per["preset"] != "epoll"].groupby("preset"):
        for size in sizes[-2:]:
            mine = g[g["bytes"] == size].set_index("rep")[CPU]
            theirs = base.xs(size, level="bytes") if size in base.index.get_level_values("bytes") else pd.Series()
            paired = mine.index.intersection(theirs.index)
            if not len(paired) or (str(preset), sizes[0]) not in counts.index:
                continue
            excess = (mine[paired] - theirs[paired]) / size
            row = {
                "preset": str(preset),
                "bytes": int(size),
                "reps": len(paired),
                "excess_ns_per_byte": float(excess.median()),
                "excess_all_positive": bool((excess > 0).all()),
                "preset_ns": float(mine[paired].median()),
                "epoll_ns": float(theirs[paired].median()),
                "smallest": int(sizes[0]),
            }
            for c in COUNTERS:
                if c in counts:
                    row[c] = float(counts.loc[(preset, size), c])
                    row[f"{c}_smallest"] = float(counts.loc[(preset, sizes[0]), c])
            rows.append(row)
    return pd.DataFrame(rows)


def _same(a: float, b: float) -> bool:
    if not (math.isfinite(a) and math.isfinite(b)):
        return True  # a counter this server does not keep says nothing
    return abs(a - b) <= SAME_COUNT * max(abs(b), 1.0)


def clear(view: pd.DataFrame) -> pd.DataFrame:
    """The rows whose extra cost is clearly above epoll's (CLEAR_SHARE)."""
    if not len(view):
        return view
    over = view["excess_ns_per_byte"] * view["bytes"] >= CLEAR_SHARE * view["epoll_ns"]
    return view[over & view["excess_all_positive"]]


def grown(row: pd.Series) -> list[str]:
    """The counters whose count per request at this size is not that of
    the smallest size."""
    return [c for c in COUNTERS if c in row and not _same(float(row[c]), float(row[f"{c}_smallest"]))]


def _counts(row: pd.Series, suffix: str = "") -> str:
    return ", ".join(
        f"{float(row[c + suffix]):.3g} {COUNTER_WORDS[c]}"
        for c in COUNTERS
        if c + suffix in row and math.isfinite(float(row[c + suffix]))
    )


def _size(n: int) -> str:
    return f"{n // 1024} KiB" if n >= 1024 and n % 1024 == 0 else f"{n} B"


def sentence(view: pd.DataFrame) -> str:
    """The paper's sentence on the presets whose extra cost at the largest
    sizes is clear (module docstring); "" where none is."""
    shown = clear(view)
    # A preset is said once, if its cost is clear at both sizes.
    both = shown.groupby("preset").filter(lambda g: len(g) == 2) if len(shown) else shown
    if not len(both):
        return ""
    said = []
    for preset, g in both.groupby("preset", sort=False):
        g = g.sort_values("bytes")
        a, b = g.iloc[0], g.iloc[-1]
        cost = (
            f"{preset} spent {a.preset_ns / 1000:.1f} and {b.preset_ns / 1000:.1f} µs of server CPU per request at "
            f"{_size(int(a.bytes))} and {_size(int(b.bytes))} against epoll's {a.epoll_ns / 1000:.1f} and "
            f"{b.epoll_ns / 1000:.1f} µs, {a.excess_ns_per_byte:.2f} and {b.excess_ns_per_byte:.2f} ns per byte more"
        )
        more = sorted({c for _, r in g.iterrows() for c in grown(r)}, key=COUNTERS.index)
        if not more:
            said.append(
                f"{cost}, while its counts per request were those at {_size(int(a.smallest))} ({_counts(b)}): the "
                "extra cost grows with the bytes and is not more operations; its cause is not measured here "
                "(unexplained)"
            )
        else:
            changes = "; ".join(
                f"{COUNTER_WORDS[c]} {float(a[c + '_smallest']):.3g}, {float(a[c]):.3g} and {float(b[c]):.3g}"
                for c in more
            )
            # The buffers' size, read from the counts: a message split over
            # small provided buffers is what multiplies the operations.
            held = float(b.bytes) / float(b["recv_buffers"]) if "recv_buffers" in more and b["recv_buffers"] > 0 else 0
            split = (
                f", each receive buffer holding about {_size(int(round(held / 512) * 512))} of the message"
                if held >= 512
                else ""
            )
            said.append(
                f"{cost}, and its counts per request grew with the size (at {_size(int(a.smallest))}, "
                f"{_size(int(a.bytes))} and {_size(int(b.bytes))}: {changes}){split}: the extra cost comes "
                "with more operations per request"
            )
    return (
        f"From the servers' counters, per echoed request at c = {LOADED} (one request in flight): "
        + "; ".join(said)
        + "."
    )
