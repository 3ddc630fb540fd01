"""C5, OpenAnolis's conclusion (seed 003): the model's four variables
decide which of io_uring and epoll wins."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..rooms.cost_probes.cost_model import CostInputs, epoll_request, uring_request
from .findings import finding, not_testable
from .rules import COST_EXPERIMENTS, above, within
from .verdicts import Finding, Rule

# C5. OpenAnolis's conclusion: "孰优孰劣完全由评估模型中定义的4个变量决定"
# (which is better is decided entirely by the four variables the model
# defines). Model B at the batch size each io_uring server reached (its own
# SQEs per io_uring_enter) against the epoll request, both priced from the
# probes of the same repetition, names a winner; the servers' measured CPU
# per request names another. Where the model predicts a clear winner (5 %
# or more apart), "entirely" is read as at least 4 cells in 5 agreeing;
# a model with no bearing on the winner agrees in half.
MODEL_AGREES = 0.8
CLEAR = 0.05
AGREES_WHY = (
    "'decided entirely by the 4 variables': the model names the measured winner in at least 4 of 5 cells where it "
    "predicts a clear one (5 % or more apart); a model with no bearing agrees in 1 of 2"
)
MODEL_ERROR_WHY = "context: how far the measured io_uring/epoll ratio sits from the model's, over the same cells"


def model_cells(inputs: Mapping[int, CostInputs], echo: pd.DataFrame | None) -> pd.DataFrame:
    """Per repetition and io_uring server cell (C servers, 50 connections or
    more, the smallest message): model B's io_uring/epoll price ratio at
    the server's own SQEs per enter, and the measured server CPU per
    request over epoll's in the same repetition and cell."""
    cols = ["rep", "preset", "connections", "bytes", "predicted", "measured"]
    if echo is None or not len(echo) or not {"server", "sqes_per_enter"} <= set(echo.columns):
        return pd.DataFrame(columns=cols)
    ok = echo[(echo["status"] == "ok") & (echo["connections"] >= 50) & echo["server"].isin(["uring", "epoll"])]
    if ok.empty:
        return pd.DataFrame(columns=cols)
    ok = ok[ok["bytes"] == ok["bytes"].min()]
    base = ok[ok["server"] == "epoll"].groupby(["rep", "connections", "bytes"])["server_ns_per_request"].median()
    rows = []
    for r in ok[(ok["server"] == "uring") & ok["sqes_per_enter"].notna()].itertuples():
        ci = inputs.get(int(r.rep))
        key = (int(r.rep), int(r.connections), int(r.bytes))
        if ci is None or key not in base.index or not (r.sqes_per_enter > 0):
            continue
        predicted = float(uring_request(ci, "B", float(r.sqes_per_enter))) / epoll_request(ci)
        rows.append(
            (int(r.rep), str(r.preset), key[1], key[2], predicted, float(r.server_ns_per_request) / float(base[key]))
        )
    return pd.DataFrame(rows, columns=cols)


def c5(inputs: Mapping[int, CostInputs], echo: pd.DataFrame | None) -> list[Finding]:
    """C5: the model's predicted winner against the measured winner, per
    cell, as the share of cells (with a clear prediction) that agree in
    each repetition; the model's error (measured over predicted ratio, the
    median over cells) follows as context."""
    label = "model B's predicted winner against the measured one, io_uring servers against epoll"
    cells = model_cells(inputs, echo)
    if cells.empty:
        return [not_testable("C5", label, "no io_uring server and epoll measured at 50 connections or more")]
    clear = cells[np.abs(np.log(cells["predicted"])) >= np.log1p(CLEAR)]
    agree = (np.sign(np.log(clear["predicted"])) == np.sign(np.log(clear["measured"]))).groupby(clear["rep"]).mean()
    where = (
        f"{cells['preset'].nunique()} presets at c = "
        + "/".join(str(c) for c in sorted(set(cells["connections"])))
        + f", {int(cells['bytes'].iloc[0])} B, server CPU per request"
    )
    decides = {
        **COST_EXPERIMENTS,
        "echo": [
            [p, int(c), int(b)]
            for p, c, b in cells[["preset", "connections", "bytes"]].drop_duplicates().itertuples(index=False)
        ],
    }
    out: list[Finding] = []
    if agree.empty:
        out.append(
            not_testable("C5", label, f"the model predicts no clear winner (5 % or more apart) in any of {where}")
        )
    else:
        out.append(
            finding(
                "C5",
                f"{label}: share of cells with a clear prediction that agree ({where})",
                agree.astype(float),
                AGREES,
                "decided entirely by the 4 variables",
                decides,
                kind="share",
            )
        )
    error = (cells["measured"] / cells["predicted"]).groupby(cells["rep"]).median()
    out.append(
        finding(
            "C5",
            f"model B's error: measured over predicted io_uring/epoll ratio, median over the cells ({where})",
            error.astype(float),
            MODEL_ERROR,
            "",
            decides,
            context=True,
        )
    )
    return out


AGREES = above(MODEL_AGREES, AGREES_WHY)
MODEL_ERROR = within(1.0, 0.25, MODEL_ERROR_WHY)
# Every rule C5 judges a part by: pooling across runs judges each run's
# parts by these, never by a rule a run recorded.
RULES: dict[str, tuple[Rule, ...]] = {"C5": (AGREES, MODEL_ERROR)}
