"""The paper's first answer: io_uring's default ring against epoll on this
machine, server CPU per request and requests/s in every cell of our
setup (connections x message size), each with its interval over
repetitions, and beside the CPU the cost model's prediction (model B at
the batch size the server itself reached, iolab.rooms.cost_probes.cost_model).

The ratios are paired within each repetition (both servers measured in
the same repetition, seconds apart), summarised by their median over
repetitions with its 95 % interval (iolab.estimation.intervals.across_reps).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..estimation.intervals import across_reps
from ..rooms.cost_probes.cost_model import CostInputs, epoll_request, uring_request
from ..rooms.echo import summaries as echostats

# The io_uring server the sources' first article measured: liburing's
# default ring, one SQE per operation.
PRESET = "default"
BASE = "epoll"
METRICS = {"server_ns_per_request": "server CPU per request", "rps": "requests/s"}
COLUMNS = [
    "metric",
    "connections",
    "bytes",
    "value",
    "low",
    "high",
    "reps",
    "predicted",
    "predicted_low",
    "predicted_high",
    "estimate",
    "predicted_estimate",
]


def table(echo: pd.DataFrame | None, inputs: Mapping[int, CostInputs], node: str) -> pd.DataFrame:
    """One row per metric and cell of our setup on ``node``: the median
    ratio io_uring/epoll over repetitions with its 95 % interval and, for
    the CPU, model B's predicted ratio at the server's own SQEs per
    io_uring_enter in each repetition (NaN where the cost probes did not
    run in that repetition). Empty where neither server ran."""
    ours = echostats.our_view(echo, node)
    if ours is None or not {PRESET, BASE} <= set(ours["preset"]):
        return pd.DataFrame(columns=COLUMNS)
    rows = []
    for metric in METRICS:
        carry = ["sqes_per_enter"] if metric == "server_ns_per_request" and "sqes_per_enter" in ours else []
        ratios = echostats.paired_ratios(ours, PRESET, BASE, metric, carry=carry)
        for (c, b), cell in ratios.groupby(["connections", "bytes"]):
            cell = cell.sort_values("rep")
            est = across_reps(cell["ratio"].to_numpy(float))
            predicted: list[float] = []
            if carry:
                for rep, n in zip(cell["rep"], cell["sqes_per_enter_numerator"], strict=True):
                    ci = inputs.get(int(rep))
                    if ci is not None and n > 0:
                        predicted.append(float(uring_request(ci, "B", float(n))) / epoll_request(ci))
            pred = across_reps(np.asarray(predicted)) if predicted else None
            rows.append(
                {
                    "metric": metric,
                    "connections": int(c),
                    "bytes": int(b),
                    "value": est.value,
                    "low": est.low,
                    "high": est.high,
                    "reps": est.n,
                    "predicted": pred.value if pred else np.nan,
                    "predicted_low": pred.low if pred else np.nan,
                    "predicted_high": pred.high if pred else np.nan,
                    "estimate": est,
                    "predicted_estimate": pred,
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)
