"""Does modern io_uring beat epoll here? The echo cells of the presets that
use a feature of Linux 6.9+ (receive bundles, incremental buffer rings,
batched waits, NAPI, registered waits, send bundles, the epoll-wait
bridge) or a gathered send, beside epoll and the cheapest older ring, as
paired ratios to epoll per setup depth (requests in flight), with the
counters that show whether each feature was in effect, and the one
paragraph that answers the question from them.

The presets are found from their flags (the table's ``flags`` column), not
from a list: a new preset with one of these flags joins the view."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ...analysis import echostats, latency
from ...analysis.costmodel import OPS, CostInputs
from ...presets import modern_features
from ...report.outputs import Outputs

# The older ring the new features are compared beside: the cheapest measured here.
OLDER_RING = "defer_taskrun_multishot"
# What the study asked of a modern ring: at most this share of epoll's CPU
# per request at a loaded cell (c >= LOADED).
GOAL = 0.85
LOADED = 50
CPU = "server_ns_per_request"


def modern_presets(echo: pd.DataFrame) -> dict[str, list[str]]:
    """Preset -> the modern features its flags turn on, for every preset of
    ``echo`` that has one."""
    out: dict[str, list[str]] = {}
    for preset, flags in echo[["preset", "flags"]].drop_duplicates().itertuples(index=False):
        features = modern_features(str(flags).split())
        if features:
            out[str(preset)] = features
    return out


def features_text(presets: dict[str, list[str]]) -> str:
    """The modern features the run measured, each once, in the order its
    presets name them (the paper's list)."""
    return ", ".join(dict.fromkeys(f for features in presets.values() for f in features))


def ratios(echo: pd.DataFrame) -> pd.DataFrame:
    """Server CPU per request and requests/s over epoll's, per setup depth
    (``pipeline``), preset (the modern ones and the older ring) and cell:
    median and 95 % interval over repetitions (echostats.ratios_to_base on
    each depth's cells of our setup). Empty where no modern preset ran."""
    modern = modern_presets(echo)
    if not modern:
        return pd.DataFrame()
    keep = {*modern, OLDER_RING, "epoll"}
    echo = echostats.with_setup(echo)
    echo = echo[echo["preset"].isin(keep)]
    frames = []
    for depth, rows in echo.groupby("pipeline"):
        ours = echostats.one_setup(rows, {**echostats.OUR_SETUP, "pipeline": int(depth)})
        ok = ours[ours["status"] == "ok"]
        cells = sorted({(int(c), int(b)) for c, b in zip(ok["connections"], ok["bytes"], strict=True)})
        r = echostats.ratios_to_base(ours, cells)
        if len(r):
            frames.append(r.assign(pipeline=int(depth)))
    if not frames:
        return pd.DataFrame()
    out = pd.concat(frames, ignore_index=True)
    return out[out["metric"].isin([CPU, "rps"])].drop(columns="estimate")


def counters(echo: pd.DataFrame) -> pd.DataFrame:
    """Per preset, depth and message size, the medians over cells and
    repetitions of what each feature did: buffers per receive and per send,
    SQEs per echoed message, completions reaped per io_uring_enter, and the
    completions that left a buffer for more (sums). ``inert`` names a
    feature whose counters show it did nothing there (a bundle, send bundle
    or gathered send of one buffer each, incremental buffers never partly
    used, NAPI busy polling on sockets without a NAPI id, as on loopback)."""
    modern = modern_presets(echo)
    ok = echostats.with_setup(echo)
    ok = ok[(ok["status"] == "ok") & ok["preset"].isin({*modern, OLDER_RING})]
    if not len(ok):
        return pd.DataFrame()
    ok = ok.assign(
        sqes_per_message=ok["sqes"] * ok["bytes"] / ok["server_bytes"],
        cqes_per_enter=ok["cqes"] / ok["io_uring_enter"],
        # Not counted before the --napi flag: NaN, summed as 0 (only --napi
        # presets are judged by it).
        napi_conns=pd.to_numeric(ok["napi_conns"], errors="coerce") if "napi_conns" in ok else math.nan,
    )
    grouped = ok.groupby(["preset", "pipeline", "bytes"]).agg(
        buffers_per_recv=("buffers_per_recv", "median"),
        buffers_per_send=("buffers_per_send", "median"),
        sqes_per_message=("sqes_per_message", "median"),
        cqes_per_enter=("cqes_per_enter", "median"),
        buf_more=("buf_more", "sum"),
        napi_conns=("napi_conns", "sum"),
    )
    out = grouped.reset_index()

    def inert(row: pd.Series) -> list[str]:
        features = modern.get(str(row["preset"]), [])
        return [
            name
            for name, unused in (
                ("receive bundles", row["buffers_per_recv"] <= 1.0),
                ("gathered sends", row["buffers_per_send"] <= 1.0),
                ("send bundles", row["buffers_per_send"] <= 1.0),
                ("incremental buffer rings", row["buf_more"] == 0),
                ("NAPI busy polling", row["napi_conns"] == 0),
            )
            if name in features and unused
        ]

    idle = out.apply(inert, axis=1)
    out["inert"] = idle.map(", ".join)
    # Every feature of the preset idle: its cells measured the older ring
    # under another name, and are not counted as the modern feature's.
    out["all_inert"] = [
        bool(names) and len(names) == len(modern.get(str(p), [])) for names, p in zip(idle, out["preset"], strict=True)
    ]
    return out


def fixed_rate_view(open_loop: pd.DataFrame | None, presets: set[str]) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """The fixed-rate ratios to epoll (latency.fixed_rate_cpu) of
    ``presets``, the latency table's fixed-rate rows behind them, and their
    cell ("c 50, 16 KiB"); empty, and "", where the run measured none."""
    if open_loop is None or not len(open_loop) or "phase" not in open_loop:
        return pd.DataFrame(columns=latency.FIXED_RATE_COLUMNS), pd.DataFrame(), ""
    fixed = latency.fixed_rate_cpu(open_loop)
    fixed = fixed[fixed["preset"].isin(presets)]
    rows = open_loop[(open_loop["phase"] == "fixed") & open_loop["preset"].isin({*presets, "epoll"})]
    if not len(fixed) or not len(rows):
        return fixed, pd.DataFrame(), ""
    return fixed, rows, f"c {int(rows['connections'].iloc[0])}, {_size(int(rows['bytes'].iloc[0]))}"


def figure_rows(echo: pd.DataFrame, presets: dict[str, list[str]], fixed_rows: pd.DataFrame) -> pd.DataFrame:
    """The tidy rows the modern figure draws (for its stamp): the modern
    presets', the older ring's and epoll's echo cells, and the fixed-rate
    rows."""
    drawn = echo[echo["preset"].isin([*presets, OLDER_RING, "epoll"])]
    return pd.concat([drawn, fixed_rows], ignore_index=True) if len(fixed_rows) else drawn


def floor_ratios(echo: pd.DataFrame, floor_ns: float) -> dict[tuple[int, int], float]:
    """(connections, bytes) -> the 2w floor over epoll's CPU per request
    (median over repetitions) at one request in flight under our setup: how
    far below epoll any server could go on the kernel work of one recv and
    one send. The floor comes from 16-byte probes, so at larger messages it
    is a looser lower bound (the copies add to it)."""
    if not math.isfinite(floor_ns):
        return {}
    ok = echostats.one_setup(echostats.with_setup(echo), echostats.OUR_SETUP)
    ok = ok[(ok["status"] == "ok") & (ok["preset"] == "epoll")]
    medians = ok.groupby(["connections", "bytes"])[CPU].median()
    return {(int(c), int(b)): floor_ns / float(ns) for (c, b), ns in medians.items() if ns > 0}


COST_VIEW_COLUMNS = [
    "preset",
    "pipeline",
    "bytes",
    "sqes_per_request",
    "enters_per_request",
    "model_b_ns",
    "measured_ns",
    "measured_over_model",
]


def cost_view(echo: pd.DataFrame, ci: CostInputs) -> pd.DataFrame:
    """The cost model's view of each modern preset and the older ring, per
    depth and message size at c >= LOADED (medians over cells and
    repetitions): SQEs and io_uring_enter calls per request, model B's price
    of a request at those counts (each enter s + a, each SQE b: the cost
    probes' fits, a and b averaged over send and recv, 16-byte operations),
    the measured server CPU per request, and measured over that price (what
    the SQE and enter counts do not explain: copies, buffer bookkeeping)."""
    modern = modern_presets(echo)
    ok = echostats.with_setup(echo)
    # io_uring servers only: the epoll-wait bridge enters the ring only to
    # wait, and its reads and writes are system calls model B does not price.
    ok = ok[
        (ok["status"] == "ok")
        & ok["preset"].isin({*modern, OLDER_RING})
        & (ok["connections"] >= LOADED)
        & (ok["server"] == "uring")
    ]
    if not len(ok):
        return pd.DataFrame(columns=COST_VIEW_COLUMNS)
    per_request = ok["bytes"] / ok["server_bytes"]
    ok = ok.assign(sqes_per_request=ok["sqes"] * per_request, enters_per_request=ok["io_uring_enter"] * per_request)
    out = (
        ok.groupby(["preset", "pipeline", "bytes"])
        .agg(
            sqes_per_request=("sqes_per_request", "median"),
            enters_per_request=("enters_per_request", "median"),
            measured_ns=(CPU, "median"),
        )
        .reset_index()
    )
    per_enter = ci.s + sum(ci.fits[op]["B"].params["a"] for op in OPS) / len(OPS)
    per_sqe = sum(ci.fits[op]["B"].params["b"] for op in OPS) / len(OPS)
    out["model_b_ns"] = out["enters_per_request"] * per_enter + out["sqes_per_request"] * per_sqe
    out["measured_over_model"] = out["measured_ns"] / out["model_b_ns"]
    return out[COST_VIEW_COLUMNS]


def cost_sentence(view: pd.DataFrame, idle: set[tuple[str, int, int]] | None = None) -> str:
    """One sentence from ``cost_view`` at the largest message size, one
    request in flight: model B's price of each preset's request and the
    measured cost over it, leaving out cells in ``idle`` (every feature
    inert)."""
    one = view[view["pipeline"] == 1] if len(view) else view
    one = one[_active(one, idle or set())] if len(one) else one
    if not len(one):
        return ""
    size = int(one["bytes"].max())
    rows = one[one["bytes"] == size].sort_values("model_b_ns")
    return (
        f" Model B (each io_uring_enter s + a, each SQE b, from the cost probes) prices a {_size(size)} "
        f"request at the SQEs and enters it used (c \u2265 {LOADED}): "
        + "; ".join(
            f"{r.preset} {r.model_b_ns / 1000:.1f} µs ({r.sqes_per_request:.1f} SQEs, "
            f"{r.enters_per_request:.2f} enters), measured {r.measured_over_model:.1f}x that"
            for r in rows.itertuples()
        )
        + "."
    )


def all_inert_cells(counts: pd.DataFrame) -> set[tuple[str, int, int]]:
    """(preset, pipeline, bytes) where the counters show every feature of
    the preset inert (``counters``' all_inert)."""
    if not len(counts):
        return set()
    idle = counts[counts["all_inert"]]
    return {(str(p), int(d), int(b)) for p, d, b in zip(idle["preset"], idle["pipeline"], idle["bytes"], strict=True)}


def _active(view: pd.DataFrame, idle: set[tuple[str, int, int]]) -> pd.Series:
    """Which of view's rows are cells where some feature took effect."""
    keys = zip(view["preset"], view["pipeline"], view["bytes"], strict=True)
    return pd.Series([(str(p), int(d), int(b)) not in idle for p, d, b in keys], index=view.index, dtype=bool)


def _size(size: float) -> str:
    n = int(size)
    return f"{n // 1024} KiB" if n >= 1024 and n % 1024 == 0 else f"{n} B"


def _cell(row: pd.Series) -> str:
    depth = int(row["pipeline"])
    return f"c = {int(row['connections'])}, {_size(row['bytes'])}" + (f", {depth} in flight" if depth > 1 else "")


def answer(view: pd.DataFrame, counts: pd.DataFrame, goal: float = GOAL, cost: pd.DataFrame | None = None) -> str:
    """The paragraph: does a modern ring beat epoll's CPU per request here,
    where and by how much (a cell whose whole 95 % interval is at or under
    ``goal`` at c >= 50 counts), and otherwise how close the best came and
    where the cost goes, from the counters and (``cost``: ``cost_view``)
    the cost model."""
    if view.empty:
        return (
            "No preset with a feature of Linux 6.9+ ran in this run, so the question is not answered "
            "here; the modern profile (config/profiles/modern.yaml) measures them."
        )
    cpu = view[(view["metric"] == CPU) & (view["connections"] >= LOADED) & (view["preset"] != OLDER_RING)]
    cpu = cpu[cpu["high"].map(math.isfinite)]
    measured = set(cpu["preset"])
    idle = all_inert_cells(counts)
    active = _active(cpu, idle)
    left_out = int((~active).sum())
    cpu = cpu[active]
    reps = int(view["reps"].min())
    lead = (
        f"Over {reps} or more interleaved repetitions, server CPU per request as a ratio to epoll's "
        f"(median [95 % interval]) at {LOADED} connections and more"
        + (
            f", leaving out {left_out} cells where the counters show every feature of the preset inert:"
            if left_out
            else ":"
        )
    )
    if not len(cpu):
        return f"{lead} no cell had a modern feature in effect, so the question is not answered here." + (
            _inert_sentence(counts, measured)
        )
    wins = cpu[cpu["high"] <= goal].sort_values("ratio")
    if len(wins):
        cells = "; ".join(
            f"{r['preset']} at {_cell(r)}: {r['ratio']:.2f} [{r['low']:.2f}, {r['high']:.2f}]"
            for _, r in wins.head(4).iterrows()
        )
        return (
            f"{lead} yes, modern io_uring beats epoll here in {len(wins)} of {len(cpu)} cells, "
            f"its whole interval at or under {goal:.2f}: {cells}." + _inert_sentence(counts, measured)
        )
    best = cpu.sort_values("ratio").iloc[0]
    worst = cpu.sort_values("ratio").iloc[-1]
    text = (
        f"{lead} no; no modern preset reached {goal:.2f} in any of {len(cpu)} cells. The closest was "
        f"{best['preset']} at {_cell(best)}, {best['ratio']:.2f} [{best['low']:.2f}, {best['high']:.2f}]; "
        f"the farthest {worst['preset']} at {_cell(worst)}, {worst['ratio']:.2f}."
    )
    if len(counts):
        c = counts[counts["preset"].isin({*cpu["preset"], OLDER_RING}) & (counts["pipeline"] == 1)]
        largest = c[c["bytes"] == c["bytes"].max()].sort_values("sqes_per_message")
        if len(largest):
            text += (
                f" Where the cost goes, at {_size(largest['bytes'].iloc[0])} one request in flight: "
                + "; ".join(_where_the_cost_goes(r) for r in largest.itertuples())
                + "."
            )
    cost_text = cost_sentence(cost, idle) if cost is not None else ""
    return text + cost_text + _inert_sentence(counts, measured)


def _where_the_cost_goes(r: Any) -> str:
    """One preset's SQEs, buffers and completions per enter (a ``counters``
    row); a server without provided buffers (the epoll-wait bridge, whose
    ring only waits) has no buffer counts to give."""
    if math.isnan(r.buffers_per_recv):
        return (
            f"{r.preset} {r.sqes_per_message:.1f} SQEs per message (its ring only waits: "
            f"{r.cqes_per_enter:.0f} completion per enter)"
        )
    return (
        f"{r.preset} {r.sqes_per_message:.1f} SQEs per message ({r.buffers_per_recv:.1f} buffers per "
        f"receive, {r.buffers_per_send:.1f} per send, {r.cqes_per_enter:.0f} completions per enter)"
    )


def _inert_sentence(counts: pd.DataFrame, presets: set[str]) -> str:
    """Where the counters show a feature of one of ``presets`` idle."""
    c = counts[counts["preset"].isin(presets)] if len(counts) else counts
    idle = c[c["inert"] != ""] if len(c) else c
    if not len(idle):
        return ""
    where: dict[tuple[str, str], list[str]] = {(r["preset"], r["inert"]): [] for _, r in idle.iterrows()}
    for _, r in idle.iterrows():
        depth = int(r["pipeline"])
        where[(r["preset"], r["inert"])].append(_size(r["bytes"]) + (f" x{depth}" if depth > 1 else ""))
    return (
        " Inert (the counters show the feature did nothing; xN: N requests in flight): "
        + "; ".join(f"{inert} in {preset} at {', '.join(cells)}" for (preset, inert), cells in where.items())
        + "."
    )


def numbers(out: Outputs, view: pd.DataFrame) -> None:
    """What the paper reads besides the paragraph: how many cells the
    modern view has, and each modern preset's lowest CPU ratio at c >= 50."""
    cpu = view[(view["metric"] == CPU) & (view["connections"] >= LOADED)] if len(view) else view
    out.text("echo_modern_cells", str(len(cpu)))
    for preset, rows in cpu.groupby("preset") if len(cpu) else ():
        best = rows.sort_values("ratio").iloc[0]
        out.text(
            f"echo_modern_{preset}_best_cpu_ratio",
            f"{best['ratio']:.2f} [{best['low']:.2f}, {best['high']:.2f}] at {_cell(best)}",
        )
