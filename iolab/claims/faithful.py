"""What a faithful replication would give here: each source's own table,
measured again as many times as a config repeats it, with a machine's
spread between repetitions, judged by the real rules and the real error
control. A rule a faithful replication cannot reproduce at a realistic
spread is either wrong or needs more repetitions; the claims table says
which, with the share of replications that reproduce it.

The spread is the log standard deviation of a paired ratio between
repetitions (each side's value gets half its variance). Only the claims
whose source printed a table are replicated: U1 (part 1), U2 and U3 (part
3, on the source's 4 CPUs), C1-C3 (OpenAnolis's numbers, in their
mitigation regime). The rest state opinions or summaries without a table.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from ..quoted import QUOTED, U1_RPS, U2_COLUMNS, U2_RPS, cell_of
from ..rooms.echo import summaries as echostats
from . import evidence, habr, openanolis
from .kind_verdicts import Mode, RunFindings, entry_of, pool
from .kind_verdicts import claim_verdict as pooled_verdict
from .verdicts import Finding, Outcome, claim_verdict, settle

SOURCE_SETUP = dict(echostats.SOURCE_SETUP)
RUNS = 200


def _side(rng: np.random.Generator, spread: float, n: int) -> np.ndarray:
    return np.exp(rng.normal(0.0, spread / math.sqrt(2), n))


def _echo_rows(
    rates: dict[str, dict[tuple[int, int], float]],
    reps: int,
    spread: float,
    rng: np.random.Generator,
    cpus: int,
    busy: float = 0.6,
) -> pd.DataFrame:
    """One row per repetition, preset and cell: the source's rate with
    ``spread``, the server's CPU per request at equal load; the server
    never the bottleneck's twin (busy 0.6, client 0.6 of 4 CPUs)."""
    rows = []
    for rep in range(1, reps + 1):
        for preset, cells in rates.items():
            noise = _side(rng, spread, len(cells))
            for ((c, b), rate), e in zip(cells.items(), noise, strict=True):
                rows.append(
                    {
                        "node": "n1",
                        "rep": rep,
                        "round": 0,
                        "preset": preset,
                        "connections": c,
                        "bytes": b,
                        "status": "ok",
                        "rps": rate * e,
                        "server_busy": busy,
                        "server_ns_per_request": busy * 1e9 / (rate * e),
                        "client_busy": busy,
                        "cpus": cpus,
                        "iowq_workers": 0,
                        **SOURCE_SETUP,
                    }
                )
    return pd.DataFrame(rows)


def part1(reps: int, spread: float, rng: np.random.Generator) -> pd.DataFrame:
    """Part 1's table (U1): the default ring and epoll in its six cells."""
    return _echo_rows({"default": U1_RPS["io_uring"], "epoll": U1_RPS["epoll"]}, reps, spread, rng, cpus=4)


def part3(reps: int, spread: float, rng: np.random.Generator, cpus: int = 4) -> pd.DataFrame:
    """Part 3's table (U2, U3): each system in go-uring's Benchmark.md cells."""
    rates = {
        preset: {cell_of(label): rps for label, rps in zip(U2_COLUMNS, U2_RPS[system], strict=True)}
        for system, preset in echostats.PART3_SYSTEMS.items()
    }
    return _echo_rows(rates, reps, spread, rng, cpus)


def openanolis_cost(mitigations: str, reps: int, spread: float, rng: np.random.Generator) -> pd.DataFrame:
    """The cost model's quantities per repetition at OpenAnolis's s, w and t
    (per SQE, so b = t and a = 0 in model B) for one mitigation regime."""
    s_key = "c1_s_mitigations_off_ns" if mitigations == "off" else "c1_s_mitigations_on_ns"
    s, w, t = QUOTED[s_key].value, QUOTED["c1_w_ns"].value, QUOTED["c1_t1_ns"].value
    rows = []
    for rep in range(1, reps + 1):
        e = _side(rng, spread, 4)
        rows.append(
            {
                "rep": rep,
                "s": s * e[0],
                "w_mean": w * e[1],
                "t1_mean": t * e[2],
                "epoll_request_single": 2 * (s + w) * e[3],
            }
        )
    cost = pd.DataFrame(rows).set_index("rep")
    cost["t1_over_w"] = cost["t1_mean"] / cost["w_mean"]
    cost["uring_n1_over_epoll"] = (cost["t1_mean"] + cost["s"]) / (cost["s"] + cost["w_mean"])
    cost["t1_over_s_plus_w"] = cost["t1_mean"] / (cost["s"] + cost["w_mean"])
    cost["per_sqe_over_epoll"] = cost["t1_mean"] / (cost["s"] + cost["w_mean"])
    return cost


def openanolis_echo(reps: int, spread: float, rng: np.random.Generator, mitigations: str) -> pd.DataFrame:
    """C3's (and C2's) throughput at 1000 connections: the source's +10 %
    with mitigations on, no advantage (equal) with them off; and the epoll
    server's cost as the source's perf saw it (the requests 4/5 of it)."""
    s_key = "c1_s_mitigations_off_ns" if mitigations == "off" else "c1_s_mitigations_on_ns"
    s, w = QUOTED[s_key].value, QUOTED["c1_w_ns"].value
    gain = 1.10 if mitigations == "on" else 1.0
    table = _echo_rows(
        {"poll_first": {(1000, 128): 100_000 * gain}, "epoll": {(1000, 128): 100_000.0, (1, 128): 1000.0}},
        reps,
        spread,
        rng,
        4,
    )
    single = table["connections"] == 1
    table.loc[single, "server_ns_per_request"] = 2 * (s + w) / 0.8 * _side(rng, spread, int(single.sum()))
    return table


# The tracing's own cost inside a timed window, and in all per traced call
# (ns), as the traced getppid shows them on these machines (331 and 586 ns
# measured by hand on 2026-12-02).
TRACE_WINDOW_NS = 330.0
TRACE_CALL_NS = 590.0
# The source's "vast majority", read as the requests' syscalls taking 4/5 of
# each server's CPU, as the echo table reads it.
SOURCE_SHARE = 0.8


def openanolis_trace(
    reps: int, spread: float, rng: np.random.Generator, mitigations: str, share: float = SOURCE_SHARE
) -> pd.DataFrame:
    """C1's premise as the source's perf saw it, in the trace table's form:
    each server's request syscalls (the epoll server's recv and send, the
    io_uring server's one enter per request) take ``share`` of its CPU; the
    windows carry the tracing's cost inside them (TRACE_WINDOW_NS), each call
    its whole cost (TRACE_CALL_NS), which the traced getppid shows."""
    s_key = "c1_s_mitigations_off_ns" if mitigations == "off" else "c1_s_mitigations_on_ns"
    s, w, t = QUOTED[s_key].value, QUOTED["c1_w_ns"].value, QUOTED["c1_t1_ns"].value
    requests = 100_000
    rows = []

    def row(rep: int, workload: str, name: str, count: float, avg: float, total: float) -> dict[str, object]:
        return {
            "node": "n1",
            "rep": rep,
            "workload": workload,
            "map": name,
            "count": count,
            "avg_ns": avg,
            "total_ns": total,
        }

    for rep in range(1, reps + 1):
        e = _side(rng, spread, 5)
        c, whole = TRACE_WINDOW_NS * e[0], TRACE_CALL_NS * e[0]
        # Each side of the share (the requests' cost, the server's) with
        # half the spread's variance, as a paired ratio's two sides.
        for workload, window, calls, kernel, inside_e, cpu_e in (
            ("premise_epoll", "ns_server_rw", 2 * requests, 2 * w, e[1], e[2]),
            ("premise_poll_first", "ns_server_enter", requests, 2 * t, e[3], e[4]),
        ):
            inside = (kernel * requests + calls * s) * inside_e  # the requests' own cost, untraced
            cpu = (kernel * requests + calls * s) / share * cpu_e + calls * whole
            windows = inside - calls * s + calls * c
            rows += [
                row(rep, workload, window, calls, windows / calls, windows),
                row(rep, workload, "echoed_requests", requests, 0, 0),
                row(rep, workload, "server_cpu", 1, 0, cpu),
            ]
        rows += [
            row(rep, "premise_getppid", "ns_server_cal", 1000, c, 1000 * c),
            row(rep, "premise_getppid", "traced_ns_per_call", 100, s + whole, 0),
        ]
    return pd.DataFrame(rows)


def _judge(found: list[Finding], claim: str, adaptive: bool) -> Outcome:
    settle(found, evidence.budget(adaptive), 0.0, predict=False)
    return claim_verdict(claim, [f for f in found if f.claim == claim]).outcome


def replications(claim: str) -> Callable[[int, float, np.random.Generator], list[Finding]] | None:
    """The claim's findings on one faithful replication of its source's
    table, or None for a claim whose source printed no table."""

    def u(
        fn: Callable[[pd.DataFrame], list[Finding]], table: Callable[..., pd.DataFrame]
    ) -> Callable[[int, float, np.random.Generator], list[Finding]]:
        return lambda reps, spread, rng: fn(table(reps, spread, rng))

    def c(name: str) -> Callable[[int, float, np.random.Generator], list[Finding]]:
        regime = "on" if name == "C3" else "off"

        def run(reps: int, spread: float, rng: np.random.Generator) -> list[Finding]:
            cost = openanolis_cost(regime, reps, spread, rng)
            echo = openanolis_echo(reps, spread, rng, regime)
            if name == "C1":
                trace = openanolis_trace(reps, spread, rng, regime)
                return openanolis.c1(cost, regime, echo[echo["preset"] == "epoll"], trace, "n1")
            if name == "C2":
                return openanolis.c2(cost, regime, echo=echo)
            return openanolis.c3(cost, regime, echo)

        return run

    table: dict[str, Callable[[int, float, np.random.Generator], list[Finding]]] = {
        "U1": u(habr.u1, part1),
        "U2": u(habr.u2, part3),
        "U3": u(habr.u3, part3),
        "C1": c("C1"),
        "C2": c("C2"),
        "C3": c("C3"),
    }
    return table.get(claim)


def reproduce_share(
    claim: str, reps: int, spread: float, *, adaptive: bool = True, runs: int = RUNS, seed: int = 0
) -> float | None:
    """The share of ``runs`` faithful replications, at ``reps`` repetitions
    and ``spread``, that reproduce ``claim`` (None: no source table)."""
    make = replications(claim)
    if make is None:
        return None
    rng = np.random.default_rng(seed)
    hits = sum(_judge(make(reps, spread, rng), claim, adaptive) is Outcome.REPRODUCED for _ in range(runs))
    return hits / runs


# --- faithful replications as runs, pooled (iolab.claims.kind_verdicts) -------------------

# The numbers of runs a pooled verdict is looked at, for runs_to_decide.
RUN_COUNTS = (6, 8, 12, 16, 24, 32, 48, 64)


def replicated_runs(
    claim: str, runs: int, reps: int, within: float, sigma: float, seed: int = 0
) -> list[RunFindings] | None:
    """``runs`` faithful replications of ``claim``'s source table as runs on
    different occasions: each through the real claim functions at ``reps``
    repetitions with ``within`` spread between them, then moved by the run's
    occasion effect (normal, sd ``sigma`` in log), shared by its parts."""
    make = replications(claim)
    if make is None:
        return None
    rng = np.random.default_rng(seed)
    out = []
    for i in range(runs):
        effect = math.exp(float(rng.normal(0.0, sigma)))
        entries = []
        for f in make(reps, within, rng):
            if f.claim != claim:
                continue
            entry = entry_of(f)
            entry["per_rep"] = [v * effect for v in entry["per_rep"]]
            entries.append(entry)
        out.append(RunFindings(f"run{i}", f"{i:04d}", entries))
    return out


def runs_to_decide(
    claim: str,
    reps: int,
    within: float,
    sigma: float,
    *,
    mode: Mode = "planned",
    share: float = 0.5,
    studies: int = 200,
    seed: int = 0,
) -> tuple[int | None, dict[int, float]]:
    """The fewest runs (of RUN_COUNTS) at which ``share`` of pooled studies
    of the source's own table reproduce ``claim``, and the share at each
    count. Studies draw their runs from one set of replicated runs."""
    pool_of = replicated_runs(claim, max(RUN_COUNTS) * 2, reps, within, sigma, seed)
    if pool_of is None:
        return None, {}
    rng = np.random.default_rng(seed + 1)
    shares: dict[int, float] = {}
    for k in RUN_COUNTS:
        hits = 0
        for _ in range(studies):
            chosen = [pool_of[i] for i in rng.choice(len(pool_of), k, replace=False)]
            parts = [p for p in pool(chosen, mode) if p.claim == claim]
            hits += pooled_verdict(claim, parts).outcome is Outcome.REPRODUCED
        shares[k] = hits / studies
    first = next((k for k in RUN_COUNTS if shares[k] >= share), None)
    return first, shares
