"""Summaries of the echo experiment: per configuration, connections and
message size, the median over repetitions (with min and max) of throughput,
CPU per request, latency percentiles and the batch size each server reached."""

from __future__ import annotations

import pandas as pd

from .sources import U1_RPS

KEYS = ["node", "preset", "server", "connections", "bytes"]
METRICS = ["rps", "server_ns_per_request", "client_ns_per_request", "p50_us", "p99_us",
           "p999_us", "sqes_per_enter", "events_per_wait"]


def summarize(echo: pd.DataFrame) -> pd.DataFrame:
    ok = echo[echo["status"] == "ok"]
    agg = ok.groupby(KEYS)[METRICS].agg(["median", "min", "max"])
    agg.columns = [f"{m}_{s}" if s != "median" else m for m, s in agg.columns]
    agg["reps"] = ok.groupby(KEYS).size()
    return agg.reset_index()


def unavailable(echo: pd.DataFrame) -> pd.DataFrame:
    """Configurations that could not run, and why (one row per preset and reason)."""
    bad = echo[echo["status"] != "ok"]
    return bad.groupby(["preset", "status", "reason"]).size().rename("cells").reset_index()


def value(summary: pd.DataFrame, preset: str, connections: int, bytes_: int,
          metric: str = "rps") -> float:
    row = summary[(summary["preset"] == preset) & (summary["connections"] == connections)
                  & (summary["bytes"] == bytes_)]
    return float(row[metric].iloc[0]) if len(row) else float("nan")


def seed_table(summary: pd.DataFrame) -> pd.DataFrame:
    """The part-1 table (connections x bytes, io_uring and epoll): the
    article's requests/s, quoted, beside ours where we measured the cell."""
    rows = []
    for (c, b), quoted_uring in sorted(U1_RPS["io_uring"].items()):
        rows.append({"connections": c, "bytes": b,
                     "io_uring (quoted)": quoted_uring, "epoll (quoted)": U1_RPS["epoll"][(c, b)],
                     "io_uring (ours)": value(summary, "default", c, b),
                     "epoll (ours)": value(summary, "epoll", c, b)})
    return pd.DataFrame(rows)


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
