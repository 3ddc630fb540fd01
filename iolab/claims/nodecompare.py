"""Comparing nodes and node kinds (bare metal against VMs, as HPC HUB did).

MPI ratios are formed within each repetition (repetition r of both nodes
runs in the same round of the interleaved schedule) and summarised across
repetitions; echo ratios are of the medians over repetitions. Never by
averaging per-sample ratios. Time ratios are native/virtual, so a
value below 1 is the VM's penalty, as in the HPC HUB figures; throughput
ratios are virtual/native for the same reading.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..estimation.intervals import across_reps
from ..quoted import QUOTED
from ..rooms.cost_probes import cost_model as costmodel
from ..rooms.echo import summaries as echostats
from ..rooms.mpi import stats as mpistats

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


def pick_pair(kinds: dict[str, str], kind_a: str | None = None, kind_b: str | None = None) -> tuple[str, str] | None:
    """(node of kind A, node of kind B): by default the first bare-metal node
    and the first VM; None when the inventory has only one kind."""
    present = sorted(set(kinds.values()))
    if len(present) < 2:
        return None
    a = kind_a or next((k for k in NATIVE_KINDS if k in present), present[0])
    b = kind_b or next((k for k in VIRTUAL_KINDS if k in present and k != a), next(k for k in present if k != a))
    node_a = next(n for n, k in kinds.items() if k == a)
    node_b = next(n for n, k in kinds.items() if k == b)
    return node_a, node_b


def pair_title(kinds: dict[str, str], pair: tuple[str, str] | None) -> str:
    """ "a (bare-metal) / b (vm)" for figure titles; "" without a pair."""
    return f"{pair[0]} ({kinds[pair[0]]}) / {pair[1]} ({kinds[pair[1]]})" if pair else ""


def costs_per_node(syscall: pd.DataFrame, sendrecv: pd.DataFrame, uring: pd.DataFrame) -> pd.DataFrame:
    """s and w (send, recv, mean) per node, estimated as the cost model does,
    with each one's 95 % interval across repetitions (``<name>_low/_high``)."""
    rows = []
    for node in sorted(set(syscall["node"]) & set(sendrecv["node"]) & set(uring["node"])):
        per_rep = costmodel.per_rep(costmodel.per_rep_inputs(syscall, sendrecv, uring, node=node))
        kind = str(syscall.loc[syscall["node"] == node, "kind"].iloc[0])
        mit = str(syscall.loc[syscall["node"] == node, "mitigations"].iloc[0])
        row: dict[str, object] = {"node": node, "kind": kind, "mitigations": mit}
        for name, col in (("s_ns", "s"), ("w_send_ns", "w_send"), ("w_recv_ns", "w_recv"), ("w_mean_ns", "w_mean")):
            e = across_reps(per_rep[col].to_numpy(float), predict=False)
            row.update({name: e.value, f"{name}_low": e.low, f"{name}_high": e.high})
        rows.append(row)
    return pd.DataFrame(rows)


def mpi_ratios(mpi_per_rep: pd.DataFrame, node_a: str, node_b: str) -> pd.DataFrame:
    """Time ratio A/B per (transport, bench, ranks, bytes) measured on both,
    paired by repetition (``mpi_per_rep``: ``mpistats.rep_medians``)."""
    frames = []
    for transport in sorted(set(mpi_per_rep["transport"])):
        sel = mpi_per_rep[mpi_per_rep["transport"] == transport]
        r = mpistats.ratios(sel, node_a, node_b, by="node")
        if len(r):
            frames.append(r.assign(transport=transport))
    cols = [
        "transport",
        "bench",
        "ranks",
        "bytes",
        "ratio",
        "low",
        "high",
        "reps",
        "oversubscribed",
        "per_rep",
        "numerator",
        "denominator",
    ]
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)


def seed_lines() -> dict[str, list[tuple[float, str]]]:
    """HPC HUB's quoted native/VM ratios to draw over ours, per collective:
    the worst ratio and the "mostly at or above" bound (quoted, not measured)."""
    return {
        bench: [
            (QUOTED[f"m2_{bench}_worst_ratio"].value, "HPC HUB worst (quoted)"),
            (QUOTED[f"m2_{bench}_mostly"].value, "HPC HUB mostly \u2265 (quoted)"),
        ]
        for bench in ("bcast", "allreduce", "alltoall")
    }


ECHO_METRICS = {  # metric -> True when larger is better (ratio taken B/A, not A/B)
    "rps": True,
    "server_ns_per_request": False,
    "client_ns_per_request": False,
    "p99_us": False,
}


def echo_ratios(
    echo_summary: pd.DataFrame, node_a: str, node_b: str, metrics: Sequence[str] = tuple(ECHO_METRICS)
) -> pd.DataFrame:
    """Per (preset, connections, bytes): each echo metric's ratio, oriented so
    that below 1 means node B (the VM) is worse."""
    keys = ["client", "preset", "connections", "bytes"]
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


def summaries(echo: pd.DataFrame | None, mpi: pd.DataFrame | None) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """What the ratios are computed from: the echo summary (medians over
    repetitions per configuration) and the MPI per-repetition medians."""
    echo_s = (
        echostats.summarize(echostats.one_setup(echo, echostats.OUR_SETUP)) if echo is not None and len(echo) else None
    )
    # Open MPI's default algorithms where both selections ran, as the seed.
    mpi_r = (
        mpistats.rep_medians(mpistats.iteration_times(mpistats.one_selection(mpi, "default")))
        if mpi is not None and len(mpi)
        else None
    )
    return echo_s, mpi_r
