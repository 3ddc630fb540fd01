"""What the claim tests share: synthetic echo and cost tables whose
repetitions drift together, the rules judged with no occasion allowance,
and this machine's spread from the shipped reference run."""

from __future__ import annotations

import numpy as np
import pandas as pd

from iolab import tables
from iolab.claims import evidence
from iolab.claims.verdicts import Finding, Outcome, claim_verdict, settle
from iolab.rooms.echo import summaries as echostats

# Each repetition's host speed, shared by its cells: ten repetitions, so
# that every outcome of a claim of up to 12 parts is reachable.


# Each repetition's host speed, shared by its cells: ten repetitions, so
# that every outcome of a claim of up to 12 parts is reachable.
DRIFT = [1.0, 1.3, 0.75, 1.15, 0.9, 1.05, 1.2, 0.85, 0.95, 1.1]
SOURCE = {"client": "thread-per-connection", "layout": "shared"}
# The paper overlay's round-0 repetitions of the claims' experiments.
PAPER_REPS = {"U": 10, "C": 8}


def judged(found: list[Finding], adaptive: bool = False) -> list[Finding]:
    # The rules' own logic, with no occasion allowance (a spread known to be
    # 0); judging over runs is tests/test_pooled.py's.
    settle(found, evidence.budget(adaptive), 0.0, predict=False)
    return found


def verdict(claim: str, found: list[Finding]) -> Outcome:
    return claim_verdict(claim, judged(found)).outcome


def echo_table(
    rates: dict[str, float],
    cells: list[tuple[int, int]],
    cpu: dict[str, float] | None = None,
    busy: dict[str, float] | None = None,
    client_busy: float = 0.5,
    cpus: int = 4,
    **setup: str,
) -> pd.DataFrame:
    """One row per repetition, preset and cell: rps = rate * that repetition's
    drift; server CPU per request = cpu[preset] (default 1000 ns) / drift;
    server utilisation busy[preset] (default 0.9). The sources' setup unless
    ``setup`` says otherwise."""
    rows = []
    for rep, d in enumerate(DRIFT, 1):
        for preset, rate in rates.items():
            for c, b in cells:
                rows.append(
                    {
                        "node": "n1",
                        "rep": rep,
                        "preset": preset,
                        "connections": c,
                        "bytes": b,
                        "status": "ok",
                        "rps": rate * d,
                        "server_ns_per_request": (cpu or {}).get(preset, 1000.0) / d,
                        "server_busy": (busy or {}).get(preset, 0.9),
                        "client_busy": client_busy,
                        "cpus": cpus,
                        "iowq_workers": 0,
                        **{**SOURCE, **setup},
                    }
                )
    return pd.DataFrame(rows)


def cost(**values: float) -> pd.DataFrame:
    return pd.DataFrame(
        {k: [v] * len(DRIFT) for k, v in values.items()}, index=pd.Index(range(1, len(DRIFT) + 1), name="rep")
    )


def reference_spread(kind: str) -> float:
    """This machine's spread between repetitions, from the shipped reference
    run: echo paired ratios (per cell, every preset against epoll) or the
    cost model's ratios."""
    if kind == "echo":
        echo = tables.load("echo", tables.REFERENCE)
        sds = []
        for preset in sorted(set(echo["preset"]) - {"epoll"}):
            r = echostats.paired_ratios(echo, preset, "epoll")
            sds += [
                float(np.std(np.log(g["ratio"]), ddof=1)) for _, g in r.groupby(["connections", "bytes"]) if len(g) >= 3
            ]
        return float(np.median(sds))
    from iolab.rooms.cost_probes import cost_model as costmodel

    syscall = tables.load("syscall", tables.REFERENCE)
    per_rep = costmodel.per_rep(
        costmodel.per_rep_inputs(
            syscall,
            tables.load("sendrecv", tables.REFERENCE),
            tables.load("uring_batch", tables.REFERENCE),
            node=str(sorted(syscall["node"].unique())[0]),
        )
    )
    return float(
        np.median(
            [np.std(np.log(per_rep[q]), ddof=1) for q in ("t1_over_w", "uring_n1_over_epoll", "per_sqe_over_epoll")]
        )
    )
