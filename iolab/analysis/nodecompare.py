"""Comparing nodes and node kinds (bare metal against VMs, as HPC HUB did).

Every ratio is computed from summarised costs (medians per configuration),
never by averaging per-sample ratios. Time ratios are native/virtual, so a
value below 1 is the VM's penalty, as in the HPC HUB figures; throughput
ratios are virtual/native for the same reading.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from . import costmodel, echostats, mpistats

NATIVE_KINDS = ("bare-metal",)
VIRTUAL_KINDS = ("vm",)


def node_kinds(*tables: pd.DataFrame) -> dict[str, str]:
    """node -> kind, over every table given."""
    out: dict[str, str] = {}
    for t in tables:
        if t is not None and len(t):
            for node, kind in t[["node", "kind"]].drop_duplicates().itertuples(index=False):
                out[str(node)] = str(kind)
    return dict(sorted(out.items()))


def pick_pair(kinds: dict[str, str], kind_a: str | None = None,
              kind_b: str | None = None) -> tuple[str, str] | None:
    """(node of kind A, node of kind B): by default the first bare-metal node
    and the first VM; None when the inventory has only one kind."""
    present = sorted(set(kinds.values()))
    if len(present) < 2:
        return None
    a = kind_a or next((k for k in NATIVE_KINDS if k in present), present[0])
    b = kind_b or next((k for k in VIRTUAL_KINDS if k in present and k != a),
                       next(k for k in present if k != a))
    node_a = next(n for n, k in kinds.items() if k == a)
    node_b = next(n for n, k in kinds.items() if k == b)
    return node_a, node_b


def costs_per_node(syscall: pd.DataFrame, sendrecv: pd.DataFrame, uring: pd.DataFrame) -> pd.DataFrame:
    """s and w (send, recv, mean) per node, estimated as the cost model does."""
    rows = []
    for node in sorted(set(syscall["node"]) & set(sendrecv["node"]) & set(uring["node"])):
        ci = costmodel.estimate(costmodel.collect(syscall, sendrecv, uring, node=node))
        kind = str(syscall.loc[syscall["node"] == node, "kind"].iloc[0])
        mit = str(syscall.loc[syscall["node"] == node, "mitigations"].iloc[0])
        rows.append({"node": node, "kind": kind, "mitigations": mit, "s_ns": ci.s,
                     "w_send_ns": ci.w["send"], "w_recv_ns": ci.w["recv"],
                     "w_mean_ns": (ci.w["send"] + ci.w["recv"]) / 2})
    return pd.DataFrame(rows)


def mpi_ratios(mpi_summary: pd.DataFrame, node_a: str, node_b: str) -> pd.DataFrame:
    """Time ratio A/B per (transport, bench, ranks, bytes) measured on both."""
    keys = ["transport", "bench", "ranks", "bytes"]
    a = mpi_summary[mpi_summary["node"] == node_a]
    b = mpi_summary[mpi_summary["node"] == node_b]
    both = a.merge(b, on=keys, suffixes=("_a", "_b"))
    out = both[keys].copy()
    out["ratio"] = both["median_ns_a"] / both["median_ns_b"]
    out["low"] = both["low_ns_a"] / both["high_ns_b"]
    out["high"] = both["high_ns_a"] / both["low_ns_b"]
    out["oversubscribed"] = both["oversubscribed_a"] | both["oversubscribed_b"]
    out["numerator"], out["denominator"] = node_a, node_b
    return out


ECHO_METRICS = {  # metric -> True when larger is better (ratio taken B/A, not A/B)
    "rps": True, "server_ns_per_request": False, "client_ns_per_request": False, "p99_us": False,
}


def echo_ratios(echo_summary: pd.DataFrame, node_a: str, node_b: str,
                metrics: Sequence[str] = tuple(ECHO_METRICS)) -> pd.DataFrame:
    """Per (preset, connections, bytes): each echo metric's ratio, oriented so
    that below 1 means node B (the VM) is worse."""
    keys = ["preset", "connections", "bytes"]
    a = echo_summary[echo_summary["node"] == node_a]
    b = echo_summary[echo_summary["node"] == node_b]
    both = a.merge(b, on=keys, suffixes=("_a", "_b"))
    rows = []
    for m in metrics:
        if f"{m}_a" not in both:
            continue
        higher_better = ECHO_METRICS.get(m, False)
        ratio = both[f"{m}_b"] / both[f"{m}_a"] if higher_better else both[f"{m}_a"] / both[f"{m}_b"]
        rows.append(both[keys].assign(metric=m, ratio=ratio))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=[*keys, "metric", "ratio"])


def summaries(echo: pd.DataFrame | None, mpi: pd.DataFrame | None) -> tuple[pd.DataFrame | None,
                                                                              pd.DataFrame | None]:
    """The per-configuration summaries the ratios are computed from."""
    echo_s = echostats.summarize(echo) if echo is not None and len(echo) else None
    mpi_s = mpistats.summarize(mpistats.iteration_times(mpi)) if mpi is not None and len(mpi) else None
    return echo_s, mpi_s
