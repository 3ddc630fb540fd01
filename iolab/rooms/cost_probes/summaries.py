"""Summaries the notebooks report: medians over repetitions with their
intervals, per-repetition estimates, and the smaller derived quantities (ACK
cost, UNIX-socket w, the kernel-side view). The cost-model fits are in
iolab.rooms.cost_probes.cost_model; the statistics in iolab.estimation.intervals."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ... import paths, tables
from ...estimation.intervals import Estimate, across_reps, spread_pct
from . import cost_model as costmodel


def primary_node(table: pd.DataFrame) -> str:
    """The node the paper reports first: the first in name order."""
    return str(sorted(table["node"].unique())[0])


def choose_node(table: pd.DataFrame, wanted: str = "") -> str:
    """``wanted`` (a notebook's ``node`` parameter), or the first node in name
    order when it is ""; a node the table does not have is a one-line error."""
    nodes = sorted(str(n) for n in table["node"].unique())
    if not wanted:
        return nodes[0]
    if wanted not in nodes:
        raise ValueError(
            f"node {wanted!r} is not in this table (nodes: {', '.join(nodes)}); "
            "set the notebook's node parameter to one of them"
        )
    return wanted


def cost_node(cost_table: pd.DataFrame, wanted: str) -> str:
    """``wanted`` if the cost probes ran there, else the first node they ran on."""
    nodes = set(cost_table["node"])
    return wanted if wanted in nodes else primary_node(cost_table)


def measured(table: pd.DataFrame, node: str | None = None) -> pd.DataFrame:
    """The timed rows (warm-up excluded), of ``node`` if given."""
    rows = table[~table["warmup"]]
    return rows if node is None else rows[rows["node"] == node]


def rows_of(table: pd.DataFrame, node: str) -> pd.DataFrame:
    """``node``'s rows."""
    return table[table["node"] == node]


def floor_request(syscall: pd.DataFrame, sendrecv: pd.DataFrame, uring: pd.DataFrame, node: str) -> float:
    """The kernel-work floor of an echo request, w_send + w_recv: the median
    over repetitions."""
    per_rep = costmodel.per_rep(costmodel.per_rep_inputs(syscall, sendrecv, uring, node=node))
    return float(per_rep["floor_request"].median())


def inline_note(uring: pd.DataFrame, node: str) -> str:
    """How many SQEs did not complete inline (the probe fails above 1 %)."""
    rows = measured(uring, node)
    return f"SQEs not completed inline: {int(rows['not_inline'].sum())} of {int((rows['n'] * rows['calls']).sum())}"


def node_context(table: pd.DataFrame, node: str) -> dict[str, str]:
    rows = table[table["node"] == node]
    return {
        "node_kind": str(rows["kind"].iloc[0]),
        "mitigations": str(rows["mitigations"].iloc[0]),
        "kernel": str(rows["kernel"].iloc[0]),
    }


def median_summary(measured: pd.DataFrame, by: Sequence[str], column: str = "ns_per_call") -> pd.DataFrame:
    """Per group: the median of each repetition's batches, then the median
    over repetitions with its 95 % interval (iolab.estimation.intervals). The
    Estimate object stays in ``estimate`` for the numbers file."""
    per_rep = measured.groupby([*by, "rep"], sort=True)[column].agg(["median", "size"]).reset_index()
    rows = []
    for key, group in per_rep.groupby(list(by), sort=True):
        est = across_reps(group["median"].to_numpy())
        rows.append(
            {
                **dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True)),
                "median_ns": est.value,
                "ci_low_ns": est.low,
                "ci_high_ns": est.high,
                "reps": est.n,
                "batches": int(group["size"].sum()),
                "estimate": est,
            }
        )
    return pd.DataFrame(rows)


def as_estimate(summary: pd.DataFrame, quantity: str) -> Estimate:
    """A row of costmodel.summarize as an Estimate."""
    r = summary.loc[quantity]
    if isinstance(r.get("estimate"), Estimate):
        return r["estimate"]
    return Estimate(
        float(r["value"]), float(r["low"]), float(r["high"]), int(r["n"]), float(r["pred_low"]), float(r["pred_high"])
    )


def per_rep_estimates(syscall: pd.DataFrame, sendrecv: pd.DataFrame, uring: pd.DataFrame, node: str) -> pd.DataFrame:
    """s, w (TCP and UNIX), a and b estimated from each repetition alone."""
    rows = []
    for rep, ci in costmodel.per_rep_inputs(syscall, sendrecv, uring, node=node).items():
        row = {"rep": rep, "s": ci.s, "w_tcp": (ci.w["send"] + ci.w["recv"]) / 2}
        for op in costmodel.OPS:
            row[f"a_{op}"] = ci.fits[op]["B"].params["a"]
            row[f"b_{op}"] = ci.fits[op]["B"].params["b"]
        unix = unix_w(sendrecv[sendrecv["rep"] == rep], node, ci.s)
        if unix:
            row["w_unix"] = (unix["w_unix_send_ns"] + unix["w_unix_recv_ns"]) / 2
        rows.append(row)
    return pd.DataFrame(rows).set_index("rep")


def spreads(per_rep: pd.DataFrame) -> dict[str, float]:
    """(max - min) / median across repetitions, per quantity, in percent."""
    if len(per_rep) < 2:
        return {}
    return {
        col: spread_pct(per_rep[col].to_numpy(float))
        for col in per_rep.columns
        if per_rep[col].notna().all() and per_rep[col].median() > 0
    }


def unix_w(sendrecv: pd.DataFrame, node: str, s: float, bytes_: int = 16) -> dict[str, float]:
    """w of send and recv over AF_UNIX stream sockets (single connection)."""
    rows = sendrecv[
        (sendrecv["node"] == node)
        & ~sendrecv["warmup"]
        & (sendrecv["transport"] == "unix")
        & (sendrecv["pattern"] == "single")
        & (sendrecv["bytes"] == bytes_)
    ]
    return {f"w_unix_{op}_ns": float(g["ns_per_call"].median()) - s for op, g in rows.groupby("variant")}


def ack_cost(sendrecv: pd.DataFrame, node: str, bytes_: int = 16) -> float:
    """Extra ns of a TCP recv that empties its queue and sends an ACK: every
    round-robin recv under quickack minus the same under ping-pong."""
    rows = sendrecv[
        (sendrecv["node"] == node)
        & ~sendrecv["warmup"]
        & (sendrecv["transport"] == "tcp")
        & (sendrecv["variant"] == "recv")
        & (sendrecv["pattern"] == "roundrobin")
        & (sendrecv["bytes"] == bytes_)
    ]
    med = rows.groupby("ack")["ns_per_call"].median()
    if not {"quickack", "pingpong"} <= set(med.index):
        return math.nan
    return float(med["quickack"] - med["pingpong"])


def unavailable_text(source: str | Path) -> str:
    """'preset: reason' for every ring preset the probe could not measure."""
    src = paths.resolve(source)
    if src.suffix == ".parquet":
        raws = tables.table_raw_files(src)
    else:
        raws = tables.raw_files_under(src, "uring_batch")
    found = tables.unavailable_configurations(raws).drop_duplicates(["preset", "reason"])
    if found.empty:
        return "none"
    return "; ".join(f"{r.preset}: {r.reason}" for r in found.itertuples())


def kernel_view(trace: pd.DataFrame, node: str) -> dict[str, Any]:
    """Traced syscall durations with the tracing overhead (calibrated on
    getppid, which does almost nothing) subtracted."""
    rows = trace[trace["node"] == node]
    if rows["map"].isna().all():
        reason = next((r for r in rows["skipped"] if r), "no data")
        return {"trace_status": f"skipped: {reason}"}

    def avg(workload: str, name: str) -> float:
        r = rows[(rows["workload"] == workload) & (rows["map"] == name)]
        total, count = r["total_ns"].astype(float).sum(), r["count"].astype(float).sum()
        return total / count if count else math.nan

    def count(workload: str, name: str) -> float:
        return float(rows[(rows["workload"] == workload) & (rows["map"] == name)]["count"].astype(float).sum())

    calib = avg("getppid", "ns_getppid")
    out: dict[str, Any] = {
        "trace_status": "measured",
        "trace_calibration_ns": calib,
        "trace_w_send_ns": avg("sendrecv", "ns_sendto") - calib,
        "trace_w_recv_ns": avg("sendrecv", "ns_recvfrom") - calib,
    }
    for n in (1, 16):
        enter = avg(f"uring_n{n}", "ns_io_uring_enter") - calib
        enters = count(f"uring_n{n}", "ns_io_uring_enter")
        subs = count(f"uring_n{n}", "submit_req")
        out[f"trace_enter_n{n}_ns"] = enter
        out[f"trace_sqes_per_enter_n{n}"] = subs / enters if enters else math.nan
    # The echo workloads (rows from before they were traced have none): per
    # request echoed, io_uring task-work runs (in the server's task or
    # deferred), polls io_uring armed for a receive or send that did not
    # complete in its submission, and requests handed to io-wq. A run traced
    # before the last two were counted (it has no echo_poll_first workload)
    # reports only the first two: bpftrace omits a count that stayed 0, so
    # a missing map cannot tell "none" from "not traced".
    workloads = set(rows["workload"].dropna())
    maps = ("task_work_run", "local_work_run") + (
        ("poll_arm", "queue_async_work") if "echo_poll_first" in workloads else ()
    )
    for workload in sorted(w for w in workloads if str(w).startswith("echo_")):
        echoed = count(workload, "echoed_requests")
        if echoed:
            for name in maps:
                out[f"trace_{workload}_{name}_per_request"] = count(workload, name) / echoed
    return out


def trace_not_run(trace: pd.DataFrame | None, node: str) -> str:
    """Why the trace experiment has no counts of ``node`` (its table's rows
    say, from the workflow's planning, e.g. "bpftrace attaches kernel
    tracepoints, which needs root; ..."), as a clause for a part that is
    "not testable here"; "" where it has counts or says nothing."""
    if trace is None or "skipped" not in trace or "node" not in trace:
        return ""
    rows = trace[trace["node"] == node]
    if rows.empty or not rows["map"].isna().all():
        return ""
    reason = next((str(r) for r in rows["skipped"] if isinstance(r, str) and r), "")
    return f"the trace experiment did not run here: {reason}" if reason else ""


def trace_rates(trace: pd.DataFrame, node: str, workload: str, name: str) -> dict[int, float]:
    """Per repetition, one traced count per echoed request of an echo
    workload (e.g. io-wq requests under the default ring); empty where the
    run did not count it (traced before the echo_poll_first workload and
    its counts were added: bpftrace omits a count that stayed 0, so only
    that marker tells "none" from "not traced")."""
    rows = trace[(trace["node"] == node)]
    if "rep" not in rows or "echo_poll_first" not in set(rows["workload"].dropna()):
        return {}
    out = {}
    for rep, g in rows.groupby("rep"):
        echoed = g.loc[(g["workload"] == workload) & (g["map"] == "echoed_requests"), "count"].astype(float).sum()
        if echoed:
            hits = g.loc[(g["workload"] == workload) & (g["map"] == name), "count"].astype(float).sum()
            out[int(rep)] = float(hits / echoed)
    return out
