"""A number of numbers.json named in words a reader understands, never by
its key: what a check or an appendix row says a number is ("s (getppid)",
"epoll, c = 50: requests/s", "epoll's open-loop p99 at 10 % of
capacity")."""

from __future__ import annotations

import re

from ..rooms.mpi.stats import TRANSPORT_NAMES

# The cost model's terms as the paper writes them.
TERM_WORDS = {"s": "s", "w": "w", "t1": "t(1)", "a": "a", "b": "b"}
SIDE_WORDS = {"getppid": "getppid", "enosys": "an unimplemented call", "send": "send", "recv": "recv"}
# An echo cell's metric as its figure's axis names it.
METRIC_WORDS = {
    "rps": "requests/s",
    "cpu": "server CPU per request",
    "server_ns_per_request": "server CPU per request",
    "client_ns_per_request": "load generator CPU per request",
    "sqes_per_enter": "SQEs per io_uring_enter",
    "resched_ipis_per_request": "rescheduling IPIs per request",
    "p50_us": "p50 latency",
    "p99_us": "p99 latency",
    "p999_us": "p99.9 latency",
}
PERCENTILE_WORDS = {"p50": "p50", "p99": "p99", "p999": "p99.9"}


def _metric(metric: str) -> str:
    return METRIC_WORDS.get(metric, metric.replace("_", " "))


def quantity_words(key: str) -> str:
    """The number ``key`` in words (module docstring); a key of no known
    family in words from its parts."""
    if m := re.fullmatch(r"(s|w|t1|a|b)_(?:(rr)_)?(getppid|enosys|send|recv)_ns", key):
        term, rr, side = m.groups()
        many = ", round-robin over many connections" if rr else ""
        return f"{TERM_WORDS[term]} ({SIDE_WORDS[side]}{many})"
    if m := re.fullmatch(r"echo_ratio_(.+)_c(\d+)_([a-z]+)", key):
        return f"{m[1]} over epoll, c = {m[2]}: {_metric(m[3])}"
    if m := re.fullmatch(r"echo_(.+?)_c(\d+)_(" + "|".join(METRIC_WORDS) + ")", key):
        return f"{m[1]}, c = {m[2]}: {_metric(m[3])}"
    if m := re.fullmatch(r"open_loop_(.+)_(capacity|load\d+|fixed\d+)_(p50|p99|p999)_us(_merged)?", key):
        preset, cell, pct, merged = m.groups()
        where = (
            "closed loop at capacity"
            if cell == "capacity"
            else f"open loop at {cell[4:]} % of capacity"
            if cell.startswith("load")
            else f"open loop at a fixed rate ({cell[5:]} % of the slowest capacity)"
        )
        return f"{preset}'s {PERCENTILE_WORDS[pct]} latency, {where}" + (", histograms merged" if merged else "")
    if m := re.fullmatch(r"mpi_(.+)_(latency_us|bandwidth_mb_s)", key):
        return f"MPI {'latency' if m[2] == 'latency_us' else 'bandwidth'}, {TRANSPORT_NAMES.get(m[1], m[1])}"
    return key.replace("_", " ")
