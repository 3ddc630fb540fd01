"""From the tidy MPI table (one row per iteration and rank) to summarised costs.

- ``iteration_times``: one time per timed iteration. A collective's time is
  the maximum over ranks (the last rank to finish ends it); a ping-pong's is
  half rank 0's round trip (one-way latency); the reference ping-pong's rows
  already hold the loop's mean round trip, also halved. Iterations that
  started late under window synchronisation are dropped.
- ``rep_medians``: per repetition (one launch per transport and rank count),
  the median over its iterations of every series.
- ``summarize``: per node, transport, benchmark, ranks and size, the median
  of the per-repetition medians with its 95 % interval across repetitions
  (iolab.estimation.intervals), and the seed's estimator (mean of the 3 smallest
  series means).
- ``ratios``: A/B per size between two transports (or nodes), formed within
  each repetition from its medians and summarised across repetitions, never
  by averaging per-iteration ratios.
- ``osu_values``: what an OSU program prints for each series (each rank's
  mean time, then the average, minimum and maximum over ranks; osu_latency:
  half rank 0's mean round trip), for rows of either timing method;
  ``method_ratios`` compares the two methods on that statistic, size by size.

Rows timed with ``mpi-probe --method osu`` are named after the OSU program
(``osu_bcast``); ``operation`` strips the prefix.

A launch ran the pinned collective algorithms or Open MPI's default
selection (``selection``); where both ran, ``one_selection`` keeps one per
cell before anything is summarised, and ``iteration_times`` refuses to pool
them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...estimation.intervals import Estimate, across_reps, mean_of_smallest
from ...formats import OSU_PREFIX, REFERENCE_BENCH
from ...schema import subschema

GROUP = ["node", "kind", "transport", "bench", "ranks", "bytes"]
CARRY = ["oversubscribed", "selection", "algorithm", "pinned", "sync", "hosts", "rate_mbit", "peers"]
COLLECTIVES = ("bcast", "allreduce", "alltoall", "barrier")
OSU_COLLECTIVES = tuple(OSU_PREFIX + c for c in COLLECTIVES)
OSU_LATENCY = "osu_latency"
POINT_TO_POINT = ("pingpong", REFERENCE_BENCH, OSU_LATENCY)


def operation(bench: str) -> str:
    """The MPI operation a row times, whichever method timed it."""
    return "pingpong" if bench == OSU_LATENCY else bench.removeprefix(OSU_PREFIX)


SELECTIONS = ("pinned", "default")
CELL = ["node", "transport", "ranks", "bench"]


def with_selection(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with a ``selection`` column (tables from before selections
    existed: pinned where the probe read a pinned algorithm)."""
    if "selection" in table:
        return table
    return table.assign(selection=np.where(table["pinned"].astype(bool), "pinned", "default"))


def one_selection(table: pd.DataFrame, prefer: str = "pinned") -> pd.DataFrame:
    """The rows of one algorithm selection per node, transport, rank count
    and benchmark: ``prefer`` where it ran, else the other. Our figures and
    models prefer pinned algorithms (they need to know the algorithm), the
    seed comparisons Open MPI's default selection (what HPC HUB ran)."""
    if prefer not in SELECTIONS:
        raise ValueError(f"selection {prefer!r}: pinned or default")
    table = with_selection(table)
    if table.empty:
        return table
    has = table[table["selection"] == prefer][CELL].drop_duplicates().assign(_has=True)
    marked = table.merge(has, on=CELL, how="left")
    keep = (marked["selection"] == prefer).to_numpy() | marked["_has"].isna().to_numpy()
    return table[keep]


def without_timer(rows: pd.DataFrame) -> pd.DataFrame:
    """Every timed iteration holds one clock reading's cost (each launch
    measured it: ``timer_ns``, 0 where not recorded): taken off, as OSU's
    own loop reads the clock twice in thousands of iterations."""
    if "timer_ns" not in rows:
        return rows
    return rows.assign(ns=(rows["ns"] - rows["timer_ns"].fillna(0.0)).clip(lower=0.0))


def iteration_times(table: pd.DataFrame) -> pd.DataFrame:
    """One row per timed iteration, ``time_ns`` as described in the module doc."""
    table = with_selection(table)
    if table.groupby(CELL)["selection"].nunique().gt(1).any():
        raise ValueError(
            "both algorithm selections (pinned and default) ran in one cell; keep one with mpistats.one_selection first"
        )
    valid = table[~table["late"]]
    keys = [*GROUP, "rep", "series", "iteration"]
    carry = CARRY
    valid = without_timer(valid)
    p2p = valid[valid["bench"].isin(POINT_TO_POINT) & (valid["rank"] == 0)]
    p2p = p2p.assign(time_ns=p2p["ns"] / 2.0)[[*keys, *carry, "time_ns"]]
    coll = valid[valid["bench"].isin(COLLECTIVES + OSU_COLLECTIVES)]
    if coll.empty:
        return p2p.reset_index(drop=True)
    agg = (
        coll.groupby(keys, sort=False)
        .agg(time_ns=("ns", "max"), ranks_seen=("rank", "nunique"), **{c: (c, "first") for c in carry})
        .reset_index()
    )
    incomplete = agg["ranks_seen"] != agg["ranks"]
    if incomplete.any():
        raise ValueError(f"{int(incomplete.sum())} collective iterations miss some ranks' times")
    agg = agg.drop(columns="ranks_seen")
    return pd.concat([p2p, agg], ignore_index=True)


def rep_medians(times: pd.DataFrame) -> pd.DataFrame:
    """One row per (node, ..., bytes, rep): the median time of that
    repetition's iterations (``time_ns``), how many there were, and what its
    launch decided."""
    agg = times.groupby([*GROUP, "rep"], sort=True).agg(
        time_ns=("time_ns", "median"), iterations=("time_ns", "size"), **{c: (c, "first") for c in CARRY}
    )
    return agg.reset_index()


def summarize(times: pd.DataFrame) -> pd.DataFrame:
    """Median over repetitions + 95 % interval, and the seed's estimator, per
    (node, transport, bench, p, m)."""
    per_rep = rep_medians(times)
    series_means = times.groupby([*GROUP, "rep", "series"], sort=True)["time_ns"].mean()
    rows = []
    for key, g in per_rep.groupby(GROUP, sort=True):
        est = across_reps(g["time_ns"].to_numpy())
        means = series_means.loc[key].to_numpy()
        rows.append(
            {
                **dict(zip(GROUP, key, strict=True)),
                "median_ns": est.value,
                "low_ns": est.low,
                "high_ns": est.high,
                "reps": est.n,
                "pred_low_ns": est.pred_low,
                "pred_high_ns": est.pred_high,
                "estimate": est,
                "iterations": int(g["iterations"].sum()),
                "mean3_ns": mean_of_smallest(means, 3) if len(means) >= 3 else float("nan"),
                "series": len(means),
                "oversubscribed": bool(g["oversubscribed"].iloc[0]),
                "algorithm": g["algorithm"].iloc[0],
                "pinned": bool(g["pinned"].iloc[0]),
                "sync": g["sync"].iloc[0],
                "hosts": int(g["hosts"].iloc[0]),
                "rate_mbit": g["rate_mbit"].iloc[0],
                "peers": g["peers"].iloc[0],
            }
        )
    return pd.DataFrame(rows)


# The paper's order is the schema's, where a node lists the transports it runs.
TRANSPORT_ORDER: tuple[str, ...] = tuple(subschema("nodes", "[]", "mpi", "transports")["items"]["enum"])
# What each transport is, in words (the paper's text and reasons).
TRANSPORT_NAMES = {
    "shm": "shared memory",
    "tcp": "TCP on loopback",
    "netns": "TCP between network namespaces",
    "netns_tbf": "TCP between rate-shaped namespaces",
    "nodes": "TCP between nodes",
}
# (faster, slower) transport pairs the ratio figure compares.
TRANSPORT_PAIRS = (("shm", "tcp"), ("tcp", "netns"), ("shm", "netns"), ("tcp", "nodes"))


def transports(summary: pd.DataFrame) -> list[str]:
    """The transports measured, in the paper's order."""
    return [t for t in TRANSPORT_ORDER if t in set(summary["transport"])]


def select(raw: pd.DataFrame, transports: list[str] | None = None) -> pd.DataFrame:
    """The rows of ``transports`` only, when given (a notebook parameter)."""
    if not transports:
        return raw
    unknown = sorted(set(transports) - set(raw["transport"]))
    if unknown:
        raise ValueError(
            f"transport {unknown[0]!r} was not measured (measured: {', '.join(sorted(set(raw['transport'])))})"
        )
    return raw[raw["transport"].isin(transports)]


def describe(raw: pd.DataFrame, times: pd.DataFrame, node: str, transports: list[str]) -> str:
    return (
        f"node {node}: {len(raw):,} rank-iteration samples, {len(times):,} iterations, "
        f"{raw['rep'].nunique()} repetitions; transports {', '.join(transports)}"
    )


def overview(summary: pd.DataFrame) -> pd.DataFrame:
    """What was measured, per transport, benchmark and rank count."""
    return summary.groupby(["transport", "bench", "ranks"]).agg(
        sizes=("bytes", "nunique"),
        iterations=("iterations", "sum"),
        reps=("reps", "max"),
        algorithm=("algorithm", "first"),
        oversubscribed=("oversubscribed", "first"),
    )


def tbf_rate(summary: pd.DataFrame) -> float | None:
    """The rate imposed on the tbf-shaped cluster (Mbit/s), if it ran."""
    rate = summary.loc[summary["transport"] == "netns_tbf", "rate_mbit"].dropna()
    return float(rate.iloc[0]) if len(rate) else None


def transport_ratios(per_rep: pd.DataFrame, measured: list[str]) -> list[pd.DataFrame]:
    """``ratios`` for every transport pair both sides of which were measured."""
    return [ratios(per_rep, a, b) for a, b in TRANSPORT_PAIRS if a in measured and b in measured]


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


def ratios(per_rep: pd.DataFrame, numerator: str, denominator: str, by: str = "transport") -> pd.DataFrame:
    """numerator/denominator per (bench, ranks, bytes) where both were
    measured: each repetition's ratio of its two medians (the launches of one
    repetition run minutes apart at most), then the median of those ratios
    with its 95 % interval across repetitions (``per_rep``: ``rep_medians``)."""
    keys = ["bench", "ranks", "bytes"]
    a = per_rep[per_rep[by] == numerator]
    b = per_rep[per_rep[by] == denominator]
    both = a.merge(b, on=[*keys, "rep"], suffixes=("_a", "_b"), how="inner")
    both["ratio"] = both["time_ns_a"] / both["time_ns_b"]
    both["oversubscribed"] = both["oversubscribed_a"] | both["oversubscribed_b"]
    rows = []
    for key, g in both.groupby(keys, sort=True):
        est = across_reps(g["ratio"].to_numpy())
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "ratio": est.value,
                "low": est.low,
                "high": est.high,
                "reps": est.n,
                "oversubscribed": bool(g["oversubscribed"].any()),
                "per_rep": g.sort_values("rep")["ratio"].tolist(),
            }
        )
    out = pd.DataFrame(rows, columns=[*keys, "ratio", "low", "high", "reps", "oversubscribed", "per_rep"])
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


def estimate_us(row: pd.Series) -> Estimate:
    """A summary row's median and CI in microseconds."""
    if isinstance(row.get("estimate"), Estimate):
        return row["estimate"].scaled(1e-3)
    return Estimate(
        row["median_ns"], row["low_ns"], row["high_ns"], int(row["reps"]), row["pred_low_ns"], row["pred_high_ns"]
    ).scaled(1e-3)


def pingpong_row(summary: pd.DataFrame, transport: str, size: int) -> pd.Series | None:
    """The summarised ping-pong at one size over one transport, if measured."""
    row = summary[(summary["bench"] == "pingpong") & (summary["transport"] == transport) & (summary["bytes"] == size)]
    return row.iloc[0] if len(row) else None


# --- OSU's statistic ----------------------------------------------------------------

OSU_KEYS = ["node", "kind", "transport", "bench", "ranks", "bytes", "rep", "series"]


def osu_values(table: pd.DataFrame) -> pd.DataFrame:
    """One row per series (an OSU program's run at one size): ``avg_us``,
    ``min_us`` and ``max_us`` over ranks of each rank's mean time, as
    osu_bcast and its siblings print them; for ping-pong (osu_latency, or
    our pingpong rows) half of rank 0's mean round trip in all three, as
    osu_latency prints one number. Works on rows of either method, so the
    methods can be compared on the same statistic."""
    valid = without_timer(table[~table["late"]])
    p2p = valid[valid["bench"].isin(("pingpong", OSU_LATENCY)) & (valid["rank"] == 0)]
    coll = valid[valid["bench"].isin(COLLECTIVES + OSU_COLLECTIVES)]
    frames = []
    if len(p2p):
        one_way = p2p.groupby(OSU_KEYS, sort=True)["ns"].mean() / 2000.0
        frames.append(pd.DataFrame({"avg_us": one_way, "min_us": one_way, "max_us": one_way}))
    if len(coll):
        per_rank = coll.groupby([*OSU_KEYS, "rank"], sort=True)["ns"].mean() / 1000.0
        over_ranks = per_rank.groupby(level=OSU_KEYS, sort=True)
        frames.append(
            pd.DataFrame({"avg_us": over_ranks.mean(), "min_us": over_ranks.min(), "max_us": over_ranks.max()})
        )
    cols = [*OSU_KEYS, "avg_us", "min_us", "max_us"]
    if not frames:
        return pd.DataFrame(columns=[*cols, "method", "operation"])
    out = pd.concat(frames).reset_index()[cols]
    return out.assign(
        method=np.where(out["bench"].str.startswith(OSU_PREFIX), "osu", "probe"), operation=out["bench"].map(operation)
    )


def method_ratios(values: pd.DataFrame) -> pd.DataFrame:
    """Per (node, transport, operation, ranks, bytes) measured by both
    methods: our method's OSU average over OSU's, formed within each
    repetition from the medians over its series, summarised across
    repetitions (median and 95 % interval)."""
    keys = ["node", "transport", "operation", "ranks", "bytes"]
    per_rep = values.groupby([*keys, "method", "rep"], sort=True)["avg_us"].median().unstack("method")
    cols = [*keys, "ratio", "low", "high", "reps", "probe_us", "osu_us"]
    if "probe" not in per_rep or "osu" not in per_rep:
        return pd.DataFrame(columns=cols)
    both = per_rep.dropna(subset=["probe", "osu"]).reset_index()
    rows = []
    for key, g in both.groupby(keys, sort=True):
        est = across_reps((g["probe"] / g["osu"]).to_numpy())
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "ratio": est.value,
                "low": est.low,
                "high": est.high,
                "reps": est.n,
                "probe_us": float(g["probe"].median()),
                "osu_us": float(g["osu"].median()),
            }
        )
    return pd.DataFrame(rows, columns=cols)


# --- the HPC HUB seed's view (claims M1, M2) ------------------------------------------

SEED_KEYS = ["node", "kind", "transport", "bench", "ranks", "bytes"]


def seed_view(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """What the seed compared, per series: OSU's statistic (``osu_values``'
    average) where a launch was timed with the OSU method, as the seed's OSU
    5.3.1 runs were; otherwise our series mean of the per-iteration maximum
    over ranks. ``bench`` is the operation; ``method`` says which applied.

    Returns (per repetition: the median over its series, with the launch's
    oversubscription, pinning and host count; per cell: the seed's estimator,
    the mean of the 3 smallest series values pooled over repetitions), each
    per algorithm selection (``selection``) where both ran."""
    table = with_selection(table)
    parts = [_seed_view_one(g) for _, g in table.groupby("selection", sort=True)] or [_seed_view_one(table)]
    per_rep = pd.concat([p for p, _ in parts], ignore_index=True)
    mean3 = pd.concat([m for _, m in parts], ignore_index=True)
    return per_rep, mean3


def _seed_view_one(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``seed_view`` for the rows of one algorithm selection."""
    carry_cols = ["oversubscribed", "pinned", "hosts", "selection"]
    osu = table[table["bench"].str.startswith(OSU_PREFIX)]
    ours = table[~table["bench"].str.startswith(OSU_PREFIX)]
    frames = []
    if len(osu):
        v = osu_values(osu)
        v = v.assign(time_ns=v["avg_us"] * 1000.0, bench=v["operation"])[
            [*SEED_KEYS, "rep", "series", "time_ns", "method"]
        ]
        frames.append(v)
    if len(ours):
        t = iteration_times(ours)
        t = t[t["bench"].isin(("pingpong", *COLLECTIVES))]
        s = t.groupby([*SEED_KEYS, "rep", "series"], sort=True)["time_ns"].mean().reset_index()
        frames.append(s.assign(method="probe"))
    cols = [*SEED_KEYS, "rep", "time_ns", "mean3_ns", "method", *carry_cols]
    if not frames:
        return pd.DataFrame(columns=cols), pd.DataFrame(columns=[*SEED_KEYS, "method", "mean3_ns", "selection"])
    series = pd.concat(frames, ignore_index=True)
    # One method per cell: OSU's where it was measured.
    has_osu = series[series["method"] == "osu"][SEED_KEYS].drop_duplicates().assign(_osu=True)
    series = series.merge(has_osu, on=SEED_KEYS, how="left")
    series = series[(series["method"] == "osu") | series["_osu"].isna()].drop(columns="_osu")
    launch = (
        table.assign(bench=table["bench"].map(operation))
        .groupby(["node", "transport", "bench", "ranks"], sort=True)[carry_cols]
        .first()
        .reset_index()
    )
    grouped = series.groupby([*SEED_KEYS, "rep", "method"], sort=True)["time_ns"]
    # Per repetition, the median over its series, and the seed's estimator
    # within it: the mean of the 3 smallest series (of all, with fewer).
    per_rep = (
        grouped.median()
        .reset_index()
        .merge(
            grouped.apply(lambda x: mean_of_smallest(x.to_numpy(), 3)).rename("mean3_ns").reset_index(),
            on=[*SEED_KEYS, "rep", "method"],
        )
        .merge(launch, on=["node", "transport", "bench", "ranks"], how="left")
    )
    mean3 = (
        series.groupby([*SEED_KEYS, "method"], sort=True)["time_ns"]
        .apply(lambda x: mean_of_smallest(x.to_numpy(), 3) if len(x) >= 3 else float("nan"))
        .rename("mean3_ns")
    )
    selection = table["selection"].iloc[0] if len(table) else "default"
    return per_rep[cols], mean3.reset_index().assign(selection=selection)
