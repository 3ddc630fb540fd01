"""Summaries of the echo experiment: per configuration, connections and
message size, the median over repetitions (with its 95 % interval) of
throughput, CPU per request, latency percentiles and the batch size each
server reached; and paired ratios between configurations, formed within
each repetition (cells of one repetition run close together in time) and
then summarised across repetitions.

Cells measured under both load-generator client models are kept apart
(``client`` is part of every key); ``one_client`` keeps one per node:
the sources' (thread-per-connection, rust_echo_bench's) for the claims,
ours (event-loop) for the figures, each where it ran."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .sources import U1_RPS
from .stats import across_reps

KEYS = ["node", "client", "preset", "server", "connections", "bytes"]
SOURCE_CLIENT = "thread-per-connection"   # rust_echo_bench's model, which every source used
OUR_CLIENT = "event-loop"


def with_client(echo: pd.DataFrame) -> pd.DataFrame:
    """``echo`` with a ``client`` column (tables from before it existed were
    measured with the event-loop client)."""
    return echo if "client" in echo else echo.assign(client=OUR_CLIENT)


def one_client(echo: pd.DataFrame, prefer: str) -> pd.DataFrame:
    """Per node, the cells of the ``prefer`` client model where that node
    ran it, else the other's."""
    echo = with_client(echo)
    has = set(echo.loc[echo["client"] == prefer, "node"])
    keep = (echo["client"] == prefer) | ~echo["node"].isin(has)
    return echo[keep.to_numpy()]


def client_note(echo: pd.DataFrame) -> str:
    """A short label of the client model, for a claim part measured on ``echo``."""
    clients = sorted(set(with_client(echo)["client"]))
    if clients == [SOURCE_CLIENT]:
        return "thread-per-connection client, as the sources"
    return f"{' and '.join(clients)} client; the sources used thread-per-connection"

METRICS = ["rps", "server_ns_per_request", "client_ns_per_request", "p50_us", "p99_us",
           "p999_us", "sqes_per_enter", "events_per_wait"]


def summarize(echo: pd.DataFrame) -> pd.DataFrame:
    """Per configuration and cell: each metric's median over repetitions, its
    95 % interval (``<metric>_low``/``_high``; infinite with fewer than 6
    repetitions) and the interval a re-run is expected in (``_pred_low``/
    ``_pred_high``), and the number of repetitions."""
    ok = with_client(echo)
    ok = ok[ok["status"] == "ok"]
    rows = []
    for key, g in ok.groupby(KEYS, sort=True):
        row: dict[str, object] = dict(zip(KEYS, key, strict=True))
        for m in METRICS:
            values = g[m].dropna().to_numpy(float)
            if values.size == 0:
                row.update({m: math.nan, f"{m}_low": math.nan, f"{m}_high": math.nan,
                            f"{m}_pred_low": math.nan, f"{m}_pred_high": math.nan})
                continue
            e = across_reps(values)
            row.update({m: e.value, f"{m}_low": e.low, f"{m}_high": e.high,
                        f"{m}_pred_low": e.pred_low, f"{m}_pred_high": e.pred_high})
        row["reps"] = len(g)
        rows.append(row)
    return pd.DataFrame(rows)


def paired_ratios(echo: pd.DataFrame, numerator: str, denominator: str,
                  metric: str = "rps") -> pd.DataFrame:
    """numerator/denominator of ``metric`` per node, repetition and cell
    (connections, bytes), from the two presets' cells of the same repetition
    and client model."""
    ok = with_client(echo)
    ok = ok[ok["status"] == "ok"]
    cell = ["node", "client", "rep", "connections", "bytes"]
    a = ok[ok["preset"] == numerator][[*cell, metric]]
    b = ok[ok["preset"] == denominator][[*cell, metric]]
    both = a.merge(b, on=cell, suffixes=("_a", "_b"))
    both["ratio"] = both[f"{metric}_a"] / both[f"{metric}_b"]
    return both[[*cell, "ratio"]]


def ratio_per_rep(ratios: pd.DataFrame, connections: int, bytes_: int) -> np.ndarray:
    """The per-repetition ratios of one cell (of one node and client model:
    ``one_client`` first where both ran)."""
    sel = ratios[(ratios["connections"] == connections) & (ratios["bytes"] == bytes_)]
    if sel[["node", "client"]].drop_duplicates().shape[0] > 1:
        raise ValueError("ratios of several nodes or client models in one cell; select one node "
                         "and keep one client with echostats.one_client")
    return sel.sort_values("rep")["ratio"].to_numpy(float)


def select(echo: pd.DataFrame, node: str, presets: list[str] | None = None) -> pd.DataFrame:
    """``node``'s cells, of ``presets`` only when given (a notebook parameter)."""
    rows = echo[echo["node"] == node]
    if presets:
        unknown = sorted(set(presets) - set(rows["preset"]))
        if unknown:
            raise ValueError(f"preset {unknown[0]!r} was not measured on {node} "
                             f"(measured: {', '.join(sorted(set(rows['preset'])))})")
        rows = rows[rows["preset"].isin(presets)]
    return rows


def describe(echo: pd.DataFrame, node: str, floor: float, cost_node: str) -> str:
    """One line on what the echo table holds."""
    return (f"node {node}: {len(echo)} cells, {int((echo['status'] == 'ok').sum())} measured, "
            f"{echo['rep'].nunique()} repetitions; floor 2w = {floor:.0f} ns (cost probes of node {cost_node})")


def unavailable(echo: pd.DataFrame) -> pd.DataFrame:
    """Configurations that could not run, and why (one row per preset and reason)."""
    bad = echo[echo["status"] != "ok"]
    return bad.groupby(["preset", "status", "reason"]).size().rename("cells").reset_index()


def value(summary: pd.DataFrame, preset: str, connections: int, bytes_: int,
          metric: str = "rps") -> float:
    row = summary[(summary["preset"] == preset) & (summary["connections"] == connections)
                  & (summary["bytes"] == bytes_)]
    return float(row[metric].iloc[0]) if len(row) else float("nan")


def seed_table(echo: pd.DataFrame) -> pd.DataFrame:
    """The part-1 table (connections x bytes, io_uring and epoll): the
    article's requests/s, quoted, beside ours where we measured the cell,
    under the source's client model where it ran (``client`` says which)."""
    chosen = one_client(echo, SOURCE_CLIENT)
    summary = summarize(chosen)
    client = client_note(chosen)
    rows = []
    for (c, b), quoted_uring in sorted(U1_RPS["io_uring"].items()):
        rows.append({"connections": c, "bytes": b,
                     "io_uring (quoted)": quoted_uring, "epoll (quoted)": U1_RPS["epoll"][(c, b)],
                     "io_uring (ours)": value(summary, "default", c, b),
                     "epoll (ours)": value(summary, "epoll", c, b), "our client": client})
    return pd.DataFrame(rows)


def node_overlay(echo: pd.DataFrame, node: str) -> pd.DataFrame | None:
    """``model_overlay`` of one node's servers; None where the echo
    experiment ran on other nodes only."""
    summary = summarize(one_client(echo, OUR_CLIENT))
    overlay = model_overlay(summary[summary["node"] == node])
    return overlay if len(overlay) else None


def model_overlay(summary: pd.DataFrame, min_connections: int = 50) -> pd.DataFrame:
    """Measured server CPU per request against the batch size each server
    reached, for the cost-model figure: io_uring presets at their SQEs per
    io_uring_enter; epoll at n = 1 (one syscall per operation)."""
    rows = summary[summary["connections"] >= min_connections]
    out = pd.DataFrame({
        "n": rows["sqes_per_enter"].where(rows["server"] == "uring", 1.0),
        "server_ns_per_request": rows["server_ns_per_request"],
        "events_per_wait": rows["events_per_wait"],
        "label": rows["preset"] + " c=" + rows["connections"].astype(str),
        "server": rows["server"],
    })
    return out.dropna(subset=["n", "server_ns_per_request"]).reset_index(drop=True)
