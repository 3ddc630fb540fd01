"""Open-loop latency curves from the latency experiment's histograms.

Each cell's raw buckets (the load generator's log-linear histogram, 64
sub-buckets per power of two of nanoseconds) are loaded into an
HdrHistogram with 2 significant digits (128 sub-buckets per power of two,
finer than the load generator's), each bucket's count at its lower bound.
A percentile is then resolved to the load generator's bucket (< 1.6 %).

Two views per (preset, offered load):
- a percentile per repetition, summarised across repetitions like every
  other quantity (the median with its distribution-free 95 % interval;
  ``stats.across_reps``): what the figure plots and the paper quotes;
- the percentile of the repetitions' histograms merged (HdrHistogram's
  add): every request of every repetition counted once, the tail that a
  single repetition has too few requests to resolve.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
from hdrh.histogram import HdrHistogram

from ...estimation.intervals import across_reps

LOWEST_NS = 1
HIGHEST_NS = 3_600 * 10**9  # one hour: far above any --timeout
SIGNIFICANT_DIGITS = 2
PERCENTILES = {"p50": 50.0, "p99": 99.0, "p999": 99.9}


def histogram(low_ns: Sequence[int], counts: Sequence[int]) -> HdrHistogram:
    """One cell's buckets as an HdrHistogram."""
    h = HdrHistogram(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS)
    for low, count in zip(low_ns, counts, strict=True):
        if count:
            h.record_value(max(int(low), LOWEST_NS), int(count))
    return h


def merged(histograms: Iterable[HdrHistogram]) -> HdrHistogram:
    """The sum of several histograms (every request of each counted once)."""
    out = HdrHistogram(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS)
    for h in histograms:
        out.add(h)
    return out


def recorded(h: HdrHistogram) -> list[tuple[int, int]]:
    """Every non-empty bucket as (its highest equivalent value, count)."""
    return [(int(v.value_iterated_to), int(v.count_at_value_iterated_to)) for v in h.get_recorded_iterator()]


def percentile_us(h: HdrHistogram, percentile: float) -> float:
    """The value at ``percentile`` in µs (NaN for an empty histogram)."""
    if h.get_total_count() == 0:
        return float("nan")
    return h.get_value_at_percentile(percentile) / 1000.0


def cell_histograms(table: pd.DataFrame) -> list[HdrHistogram]:
    return [histogram(low, count) for low, count in zip(table["hist_low_ns"], table["hist_count"], strict=True)]


def curves(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (node, preset, phase, load): the achieved load, and each
    percentile across repetitions (value, low, high) and merged. The
    capacity cell (closed loop) is the row with phase "capacity", load 1."""
    ok = table[table["status"] == "ok"]
    rows = []
    for (node, preset, phase, load), g in ok.groupby(["node", "preset", "phase", "load"], sort=True):
        hists = cell_histograms(g)
        row = {
            "node": node,
            "preset": preset,
            "phase": phase,
            "load": 1.0 if phase == "capacity" else float(load),
            "reps": int(g["rep"].nunique()),
            "requests": int(g["requests"].sum()),
        }
        rps = across_reps(g["rps"].to_numpy(float))
        row.update(rps=rps.value, rps_low=rps.low, rps_high=rps.high, rps_estimate=rps)
        if phase in ("open", "fixed"):
            ratio = across_reps(g["achieved_over_offered"].to_numpy(float))
            row.update(achieved_over_offered=ratio.value, achieved_low=ratio.low, achieved_high=ratio.high)
        pooled = merged(hists)
        for name, pct in PERCENTILES.items():
            est = across_reps(np.array([percentile_us(h, pct) for h in hists]))
            row.update(
                {
                    f"{name}_us": est.value,
                    f"{name}_us_low": est.low,
                    f"{name}_us_high": est.high,
                    f"{name}_us_estimate": est,
                    f"{name}_us_merged": percentile_us(pooled, pct),
                }
            )
        rows.append(row)
    return pd.DataFrame(rows)


def paired_ratio(
    table: pd.DataFrame, numerator: str, denominator: str, load: float, percentile: str = "p99"
) -> np.ndarray:
    """numerator/denominator of a percentile at one offered load, per
    repetition (the two cells of a repetition were measured seconds apart)."""
    ok = table[(table["status"] == "ok") & (table["phase"] == "open") & (table["load"] == load)]
    values = {}
    for (preset, rep), g in ok.groupby(["preset", "rep"]):
        values[(preset, rep)] = percentile_us(merged(cell_histograms(g)), PERCENTILES[percentile])
    reps = sorted({r for p, r in values if p == numerator} & {r for p, r in values if p == denominator})
    return np.array([values[(numerator, r)] / values[(denominator, r)] for r in reps])


def paired_ratios(table: pd.DataFrame, denominator: str = "epoll", percentile: str = "p99") -> pd.DataFrame:
    """Every other preset's percentile over ``denominator``'s at each offered
    load, formed within each repetition and summarised across them. Rows:
    preset, load, ratio, low, high, reps, estimate."""
    ok = table[(table["status"] == "ok") & (table["phase"] == "open")]
    rows = []
    for preset in sorted(set(ok["preset"]) - {denominator}):
        for load in sorted(set(ok.loc[ok["preset"] == preset, "load"])):
            per_rep = paired_ratio(table, preset, denominator, load, percentile)
            if len(per_rep):
                e = across_reps(per_rep, predict=False)
                rows.append(
                    {
                        "preset": preset,
                        "load": float(load),
                        "ratio": e.value,
                        "low": e.low,
                        "high": e.high,
                        "reps": e.n,
                        "estimate": e,
                    }
                )
    return pd.DataFrame(rows, columns=["preset", "load", "ratio", "low", "high", "reps", "estimate"])


FIXED_RATE_COLUMNS = ["preset", "load", "offered_rps", "base_ns", "ratio", "low", "high", "reps", "estimate"]


def fixed_rate_cpu(table: pd.DataFrame, denominator: str = "epoll") -> pd.DataFrame:
    """Every other preset's server CPU per request over ``denominator``'s
    at each fixed offered rate (the same requests/s for every preset in a
    repetition), formed within each repetition and summarised across them.
    Rows: preset, load (share of the slowest capacity), offered_rps and
    base_ns (the rate and the denominator's ns per request, medians across
    repetitions), ratio, low, high, reps, estimate."""
    if "server_ns_per_request" not in table:  # a table from before the fixed-rate phase
        return pd.DataFrame(columns=FIXED_RATE_COLUMNS)
    ok = table[(table["status"] == "ok") & (table["phase"] == "fixed")].dropna(subset=["server_ns_per_request"])
    rows = []
    for load, at_load in ok.groupby("load", sort=True):
        by_rep = at_load.pivot_table(index="rep", columns="preset", values="server_ns_per_request", aggfunc="first")
        if denominator not in by_rep:
            continue
        for preset in sorted(set(by_rep.columns) - {denominator}):
            per_rep = (by_rep[preset] / by_rep[denominator]).dropna().to_numpy(float)
            if not len(per_rep):
                continue
            e = across_reps(per_rep, predict=False)
            rows.append(
                {
                    "preset": preset,
                    "load": float(load),
                    "offered_rps": float(at_load["offered_rps"].median()),
                    "base_ns": float(by_rep[denominator].median()),
                    "ratio": e.value,
                    "low": e.low,
                    "high": e.high,
                    "reps": e.n,
                    "estimate": e,
                }
            )
    return pd.DataFrame(rows, columns=FIXED_RATE_COLUMNS)


def select(table: pd.DataFrame, node: str) -> pd.DataFrame:
    """The node's rows (the echo notebook's node)."""
    return table[table["node"] == node].reset_index(drop=True)


def describe(table: pd.DataFrame, node: str) -> str:
    """One line: what the curves are made of."""
    sub = select(table, node)
    bad = sub[sub["status"] != "ok"]
    return (
        f"open-loop latency on {node}: {sub['rep'].nunique()} repetitions, "
        f"{int(sub['connections'].iloc[0]) if len(sub) else 0} connections, "
        f"{int(sub['bytes'].iloc[0]) if len(sub) else 0} B, presets {', '.join(sorted(sub['preset'].unique()))}; "
        f"{len(bad)} of {len(sub)} cells not measured"
        + ("".join(f"\n  {r.preset} load {r.load:g}: {r.reason}" for r in bad.itertuples()) if len(bad) else "")
    )
