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
