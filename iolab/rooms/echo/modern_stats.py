"""The modern io_uring view's numbers (presented by ``modern``): the
echo cells of the presets that use a feature of Linux 6.9+ or a gathered
send, beside epoll and the cheapest older ring, as paired ratios to epoll
per setup depth; the counters that show whether each feature was in effect;
the 2w floor; and the cost model's price of each preset's request.

The presets are found from their flags (the table's ``flags`` column), not
from a list: a new preset with one of these flags joins the view."""

from __future__ import annotations

import math

import pandas as pd

from ...presets import modern_features
from ..cost_probes.cost_model import OPS, CostInputs
from . import summaries as echostats

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


def all_inert_cells(counts: pd.DataFrame) -> set[tuple[str, int, int]]:
    """(preset, pipeline, bytes) where the counters show every feature of
    the preset inert (``counters``' all_inert)."""
    if not len(counts):
        return set()
    idle = counts[counts["all_inert"]]
    return {(str(p), int(d), int(b)) for p, d, b in zip(idle["preset"], idle["pipeline"], idle["bytes"], strict=True)}
