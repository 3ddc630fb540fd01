"""From the tidy MPI table (one row per iteration and rank) to summarised costs.

- ``iteration_times``: one time per timed iteration. A collective's time is
  the maximum over ranks (the last rank to finish ends it); a ping-pong's is
  half rank 0's round trip (one-way latency); the reference ping-pong's rows
  already hold the loop's mean round trip, also halved. Iterations that
  started late under window synchronisation are dropped.
- ``summarize``: per node, transport, benchmark, ranks and size, the median
  with its nonparametric 95 % CI over every iteration of every series and
  repetition, and the seed's estimator (mean of the 3 smallest series means).
- ``ratios``: A/B per size between two transports (or node kinds), from the
  summarised medians, never by averaging per-iteration ratios.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..formats import REFERENCE_BENCH
from .stats import Estimate, mean_of_smallest, median_ci

GROUP = ["node", "kind", "transport", "bench", "ranks", "bytes"]
COLLECTIVES = ("bcast", "allreduce", "alltoall", "barrier")


def iteration_times(table: pd.DataFrame) -> pd.DataFrame:
    """One row per timed iteration, ``time_ns`` as described in the module doc."""
    valid = table[~table["late"]]
    keys = [*GROUP, "rep", "series", "iteration"]
    carry = ["oversubscribed", "algorithm", "pinned", "sync", "hosts", "rate_mbit", "peers"]
    p2p = valid[valid["bench"].isin(["pingpong", REFERENCE_BENCH]) & (valid["rank"] == 0)]
    p2p = p2p.assign(time_ns=p2p["ns"] / 2.0)[[*keys, *carry, "time_ns"]]
    coll = valid[valid["bench"].isin(COLLECTIVES)]
    if coll.empty:
        return p2p.reset_index(drop=True)
    agg = coll.groupby(keys, sort=False).agg(time_ns=("ns", "max"), ranks_seen=("rank", "nunique"),
                                              **{c: (c, "first") for c in carry}).reset_index()
    incomplete = agg["ranks_seen"] != agg["ranks"]
    if incomplete.any():
        raise ValueError(f"{int(incomplete.sum())} collective iterations miss some ranks' times")
    agg = agg.drop(columns="ranks_seen")
    return pd.concat([p2p, agg], ignore_index=True)


def summarize(times: pd.DataFrame) -> pd.DataFrame:
    """Median + 95 % CI and the seed's estimator per (node, transport, bench, p, m)."""
    rows = []
    for key, g in times.groupby(GROUP, sort=True):
        est = median_ci(g["time_ns"].to_numpy())
        series_means = g.groupby(["rep", "series"])["time_ns"].mean().to_numpy()
        rows.append({
            **dict(zip(GROUP, key, strict=True)),
            "median_ns": est.value, "low_ns": est.low, "high_ns": est.high, "n": est.n,
            "mean3_ns": mean_of_smallest(series_means, 3) if len(series_means) >= 3 else float("nan"),
            "series": len(series_means),
            "oversubscribed": bool(g["oversubscribed"].iloc[0]),
            "algorithm": g["algorithm"].iloc[0], "pinned": bool(g["pinned"].iloc[0]),
            "sync": g["sync"].iloc[0], "hosts": int(g["hosts"].iloc[0]),
            "rate_mbit": g["rate_mbit"].iloc[0], "peers": g["peers"].iloc[0],
        })
    return pd.DataFrame(rows)


def report_rows(frame: pd.DataFrame, node: str) -> pd.DataFrame:
    """The rows a one-node report shows: ``node``'s, plus the ``nodes``
    transport of the first node (name order) that ran it, if ``node`` did not:
    launches across nodes start on whichever node has the peers."""
    mine = frame[frame["node"] == node]
    if (mine["transport"] == "nodes").any():
        return mine
    across = frame[frame["transport"] == "nodes"]
    if across.empty:
        return mine
    first = sorted(across["node"].unique())[0]
    return pd.concat([mine, across[across["node"] == first]], ignore_index=True)


def ratios(summary: pd.DataFrame, numerator: str, denominator: str, by: str = "transport",
           estimator: str = "median_ns") -> pd.DataFrame:
    """numerator/denominator per (bench, ranks, bytes) where both were measured.

    ``low``/``high`` combine the two medians' CIs conservatively (lowest over
    highest, highest over lowest); with the seed's estimator there is no CI.
    """
    keys = ["bench", "ranks", "bytes"]
    a = summary[summary[by] == numerator]
    b = summary[summary[by] == denominator]
    both = a.merge(b, on=keys, suffixes=("_a", "_b"), how="inner").set_index(keys)
    out = pd.DataFrame({
        "ratio": both[f"{estimator}_a"] / both[f"{estimator}_b"],
        "low": both["low_ns_a"] / both["high_ns_b"],
        "high": both["high_ns_a"] / both["low_ns_b"],
        "oversubscribed": both["oversubscribed_a"] | both["oversubscribed_b"],
    }).reset_index()
    out["numerator"], out["denominator"] = numerator, denominator
    return out


def bandwidth_mb_s(summary: pd.DataFrame) -> pd.DataFrame:
    """Ping-pong bandwidth m / T(m) in MB/s (10^6 bytes per second)."""
    pp = summary[summary["bench"] == "pingpong"].copy()
    pp["mb_s"] = pp["bytes"] / pp["median_ns"] * 1e3
    return pp


def reference_agreement(times: pd.DataFrame) -> pd.DataFrame:
    """mpi-probe's ping-pong against the OSU-style reference, per transport
    and size, on the same statistic: the median over series of each series'
    mean one-way latency (the reference's loop mean is osu_latency's number)."""
    keys = ["node", "transport", "bytes"]
    pp = times[times["bench"].isin(["pingpong", REFERENCE_BENCH])]
    per_series = pp.groupby([*keys, "bench", "rep", "series"])["time_ns"].mean().reset_index()
    med = per_series.groupby([*keys, "bench"])["time_ns"].median().unstack("bench")
    if "pingpong" not in med or REFERENCE_BENCH not in med:
        return pd.DataFrame(columns=[*keys, "probe_ns", "reference_ns", "ratio"])
    both = med.rename(columns={"pingpong": "probe_ns", REFERENCE_BENCH: "reference_ns"})
    both = both[["probe_ns", "reference_ns"]].dropna().reset_index()
    both["ratio"] = both["probe_ns"] / both["reference_ns"]
    return both


def worst_ratio(r: pd.DataFrame, benches: Sequence[str] | None = None) -> pd.Series:
    """The smallest ratio (largest penalty of the denominator) per benchmark."""
    sel = r if benches is None else r[r["bench"].isin(benches)]
    idx = sel.groupby("bench")["ratio"].idxmin()
    return sel.loc[idx].set_index("bench")["ratio"] if len(idx) else pd.Series(dtype=float)


def geometric_mean(values: Sequence[float] | np.ndarray) -> float:
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    return float(np.exp(np.mean(np.log(v)))) if v.size else float("nan")


def estimate_us(row: pd.Series) -> Estimate:
    """A summary row's median and CI in microseconds."""
    return Estimate(row["median_ns"] / 1e3, row["low_ns"] / 1e3, row["high_ns"] / 1e3, int(row["n"]))


def pingpong_row(summary: pd.DataFrame, transport: str, size: int) -> pd.Series | None:
    """The summarised ping-pong at one size over one transport, if measured."""
    row = summary[(summary["bench"] == "pingpong") & (summary["transport"] == transport)
                  & (summary["bytes"] == size)]
    return row.iloc[0] if len(row) else None
