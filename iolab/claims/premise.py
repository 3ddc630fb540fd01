"""C1's premise, "perf shows the read/write requests themselves take the
vast majority of the cost" (OpenAnolis, seed 003): timed inside the epoll and
the poll-first io_uring servers by the trace experiment, and, as context,
the cost probes' 2s + 2w over a whole epoll server's cost."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..rooms.cost_probes.summaries import trace_not_run
from .findings import finding, not_testable
from .rules import COST_EXPERIMENTS, above, paired_by_rep
from .verdicts import Finding

# "The vast majority": at least two thirds.
VAST_MAJORITY = 2 / 3
MOST_OF_THE_COST = above(VAST_MAJORITY, "'the vast majority' of the server's cost read as at least two thirds")
PREMISE_RULES = (MOST_OF_THE_COST,)


def premise(cost: pd.DataFrame, echo: pd.DataFrame | None) -> Finding:
    """ "The read/write requests themselves take the vast majority of the
    cost": the model's price of one recv and one send through system calls
    (s + w each, one connection) over the epoll server's measured CPU per
    request at the fewest connections measured, smallest message, paired by
    repetition; at least two thirds."""
    rule = MOST_OF_THE_COST
    label = "(2s + 2w)/epoll server CPU per request: the requests' share of the server's cost"
    if echo is None:
        return not_testable("C1", label, "the echo experiment did not run")
    ok = echo[(echo["status"] == "ok") & (echo["preset"] == "epoll")]
    if ok.empty:
        return not_testable("C1", label, "the epoll server was not measured")
    c = int(ok["connections"].min())
    b = int(ok.loc[ok["connections"] == c, "bytes"].min())
    cell = ok[(ok["connections"] == c) & (ok["bytes"] == b)]
    server = cell.groupby("rep")["server_ns_per_request"].median()
    share = paired_by_rep(cost["epoll_request_single"], server)
    return finding(
        "C1",
        f"{label}, c = {c}, {b} B (the probes' 2s + 2w over a whole server's cost: context; the premise is "
        "timed inside the servers)",
        share,
        rule,
        "the vast majority",
        {**COST_EXPERIMENTS, "echo": [["epoll", c, b]]},
        context=True,
    )


# The servers whose request syscalls the trace times (iolab.experiments.trace):
# workload -> (what the label calls it, the map of its windows); and the
# calibration window around getppid under the same script.
PREMISE_SERVERS = {
    "premise_epoll": ("epoll server (recv/send)", "ns_server_rw"),
    "premise_poll_first": ("poll-first io_uring server (io_uring_enter, on the CPU)", "ns_server_enter"),
}
PREMISE_CALIBRATION = ("premise_getppid", "ns_server_cal")
PREMISE_SETUP = "event-loop client, pinned CPUs, 50 connections of 128 B, timed by bpftrace"


def _trace_value(g: pd.DataFrame, workload: str, name: str, column: str) -> float:
    v = g.loc[(g["workload"] == workload) & (g["map"] == name), column]
    return float(v.iloc[0]) if len(v) else float("nan")


def premise_in_servers(trace: pd.DataFrame | None, node: str, cost: pd.DataFrame) -> list[Finding]:
    """C1's premise as the source measured it, inside the running servers:
    the CPU time each server spends in its request syscalls per echoed
    request, over its CPU time per request, for the epoll server and the
    source's io_uring server, both from one traced run (one operating
    point). Per trace repetition, with N traced calls: the windows (on the
    CPU only) less the tracing's cost inside each (c, the same window around
    getppid, which does nearly nothing else), plus s per call (the switch
    the window does not see, from the cost probes of the same repetition),
    over the server's CPU less the tracing's whole cost per call (the traced
    getppid as the probe timed it, less s). What tracing adds besides (the
    scheduler's switch probes) stays in the CPU, so the share leans low:
    against "the vast majority", two thirds or more, that is conservative."""
    rule = MOST_OF_THE_COST
    cal_workload, cal_window = PREMISE_CALIBRATION
    out = []
    for workload, (what, window) in PREMISE_SERVERS.items():
        label = f"the request syscalls' share of the {what} CPU per request, inside the server [{PREMISE_SETUP}]"
        rows = trace[trace["node"] == node] if trace is not None and "node" in trace else None
        if rows is None or rows.empty or workload not in set(rows["workload"].dropna()):
            out.append(
                not_testable(
                    "C1",
                    label,
                    trace_not_run(trace, node)
                    or "the trace experiment did not time this server's request syscalls in this run (it needs "
                    "bpftrace, root and tracefs; runs from before the premise was timed lack it)",
                )
            )
            continue
        per_rep = {}
        for rep, g in rows.groupby("rep"):
            calls, windows = _trace_value(g, workload, window, "count"), _trace_value(g, workload, window, "total_ns")
            cpu = _trace_value(g, workload, "server_cpu", "total_ns")
            c = _trace_value(g, cal_workload, cal_window, "avg_ns")
            traced_call = _trace_value(g, cal_workload, "traced_ns_per_call", "avg_ns")
            s_rep = float(cost["s"].get(int(rep), float("nan"))) if "s" in cost else float("nan")
            whole = traced_call - s_rep  # tracing's cost per call, in the window and around it
            own = cpu - calls * whole
            if not all(np.isfinite([calls, windows, cpu, c, whole, s_rep])) or calls <= 0 or own <= 0:
                continue
            per_rep[int(rep)] = (windows - calls * c + calls * s_rep) / own
        if not per_rep:
            out.append(
                not_testable("C1", label, "no repetition timed the server with its calibration and the probes' s")
            )
            continue
        out.append(
            finding(
                "C1",
                label,
                pd.Series(per_rep).sort_index(),
                rule,
                "the vast majority",
                {**COST_EXPERIMENTS, "trace": []},
            )
        )
    return out
