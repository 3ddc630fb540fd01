"""The OpenAnolis echo cost model, and the linear-batch alternative.

Per operation (one send or one recv):
  epoll             s + w
  io_uring (A)      (t + s) / n          t constant per io_uring_enter
  io_uring (B)      (s + a) / n + b      batch time T(n) = a + b n

What the probes give:
  s        median ns per getppid call (cost-probe syscall)
  s + w    median ns per send or recv call, 16 B, TCP, echo (ping-pong) ACK
           regime (cost-probe sendrecv), on one connection (``w``) and
           round-robin over many (``w_rr``)
  U(n)     ns per io_uring_enter with n SQEs = s + T(n) (cost-probe uring-batch);
           its n SQEs go to n connections

Like is compared with like. The source's cell, t at n = 1 against w (C1),
has one connection on both sides: w from one connection. Model B's per-SQE
cost b comes from batches spread over many connections, so everything it is
compared with (the epoll request, the crossover n*, the floor) takes w from
the round-robin series; where a run measured no round-robin series, from the
single connection (``w_rr`` then equals ``w``).

Per echo request there is one recv and one send, so request costs add the
two operations; at batch size n each enter carries n SQEs.
Fits are weighted by 1/U(n)^2 (relative errors: U spans three decades) on
the per-n medians, with non-negativity on every parameter.

Every quantity is estimated within each repetition (``per_rep``), and
reported as the median over repetitions with its interval (``summarize``;
iolab.estimation.intervals).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.optimize import lsq_linear

from ...estimation.intervals import across_reps

OPS = ("send", "recv")


@dataclass(frozen=True)
class Fit:
    """One model fitted to U(n) of one operation."""

    model: str  # "A" or "B"
    params: dict[str, float]  # A: {"t"}; B: {"a", "b"}
    rss: float  # weighted residual sum of squares on per-n medians
    points: int

    @property
    def aic(self) -> float:
        k = len(self.params)
        return self.points * math.log(max(self.rss, 1e-300) / self.points) + 2 * k

    def batch_time(self, n: np.ndarray | float) -> np.ndarray | float:
        """T(n): kernel time of one io_uring_enter with n SQEs, without s."""
        if self.model == "A":
            return np.zeros_like(np.asarray(n, dtype=float)) + self.params["t"]
        return self.params["a"] + self.params["b"] * np.asarray(n, dtype=float)


def _weighted_nnls(design: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    w = 1.0 / y
    res = lsq_linear(design * w[:, None], y * w, bounds=(0, np.inf))
    return res.x, float(np.sum(((design @ res.x) - y) ** 2 * w**2))


def fit_model_a(n: np.ndarray, enter_ns: np.ndarray, s: float) -> Fit:
    """(A): U(n) = s + t."""
    y = np.asarray(enter_ns, dtype=float) - s
    x, rss = _weighted_nnls(np.ones((len(y), 1)), np.maximum(y, 1e-9))
    return Fit("A", {"t": float(x[0])}, rss, len(y))


def fit_model_b(n: np.ndarray, enter_ns: np.ndarray, s: float) -> Fit:
    """(B): U(n) = s + a + b n."""
    y = np.asarray(enter_ns, dtype=float) - s
    design = np.column_stack([np.ones(len(y)), np.asarray(n, dtype=float)])
    x, rss = _weighted_nnls(design, np.maximum(y, 1e-9))
    return Fit("B", {"a": float(x[0]), "b": float(x[1])}, rss, len(y))


@dataclass(frozen=True)
class CostInputs:
    """Point estimates the request-cost formulas need (ns)."""

    s: float
    w: Mapping[str, float]  # per op, one connection
    fits: Mapping[str, Mapping[str, Fit]]  # op -> model -> Fit
    t1: Mapping[str, float]  # per op: U(1) - s, the article's t at n = 1
    w_rr: Mapping[str, float] = field(default_factory=dict)  # per op, round-robin over connections

    def w_many(self, op: str) -> float:
        """w as model B's batches meet it: round-robin, else one connection."""
        return self.w_rr.get(op, self.w[op])


def epoll_request(ci: CostInputs) -> float:
    """One recv plus one send through plain syscalls, on a server with many
    connections (round-robin w)."""
    return sum(ci.s + ci.w_many(op) for op in OPS)


def uring_request(ci: CostInputs, model: str, n: np.ndarray | float) -> np.ndarray:
    """One recv SQE plus one send SQE at n SQEs per io_uring_enter."""
    n = np.asarray(n, dtype=float)
    total = np.zeros_like(n)
    for op in OPS:
        p = ci.fits[op][model].params
        if model == "A":
            total = total + (ci.s + p["t"]) / n
        else:
            total = total + (ci.s + p["a"]) / n + p["b"]
    return total


def overlay_prices(ci: CostInputs, overlay: pd.DataFrame) -> np.ndarray:
    """What the model prices each measured server's request at: the epoll
    request for epoll, model B at the batch size it reached for io_uring."""
    uring = (overlay["server"] == "uring").to_numpy()
    return np.where(uring, uring_request(ci, "B", overlay["n"].to_numpy(float)), epoll_request(ci))


def overlay_ratios(ci: CostInputs, overlay: pd.DataFrame) -> dict[str, float]:
    """How far measured servers sit above the model: the median over servers
    of measured CPU per request over the model's price (``overlay_prices``),
    for epoll and for io_uring."""
    ratio = overlay["server_ns_per_request"].to_numpy(float) / overlay_prices(ci, overlay)
    out = {}
    for server in ("epoll", "uring"):
        mine = (overlay["server"] == server).to_numpy()
        if mine.any():
            out[f"overlay_{server}_ratio"] = float(np.median(ratio[mine]))
    return out


def batch_at_ratio(ci: CostInputs, model: str, ratio: np.ndarray | float) -> np.ndarray:
    """The batch size n at which a model prices io_uring's request at
    ``ratio`` times epoll's (inf where it never gets that low): the
    inverse of ``uring_request / epoll_request``, exact for both models."""
    ratio = np.asarray(ratio, dtype=float)
    epoll = epoll_request(ci)
    if model == "A":
        fixed = sum(ci.s + ci.fits[op]["A"].params["t"] for op in OPS)
        per_sqe = 0.0
    else:
        fixed = sum(ci.s + ci.fits[op]["B"].params["a"] for op in OPS)
        per_sqe = sum(ci.fits[op]["B"].params["b"] for op in OPS)
    excess = ratio * epoll - per_sqe
    with np.errstate(divide="ignore"):
        return np.where(excess > 0, fixed / np.where(excess > 0, excess, 1.0), math.inf)


def crossover(ci: CostInputs, model: str) -> float:
    """Smallest batch size n* at which io_uring costs less per request than
    epoll (inf when it never does)."""
    return float(batch_at_ratio(ci, model, 1.0))


# --- from tidy tables ------------------------------------------------------------


@dataclass
class Samples:
    """Raw per-batch samples behind every estimate, for the bootstrap."""

    s: np.ndarray
    sw: dict[str, np.ndarray]  # op -> s+w per call, one connection
    enter: dict[str, dict[int, np.ndarray]] = field(default_factory=dict)  # op -> n -> U
    sw_rr: dict[str, np.ndarray] = field(default_factory=dict)  # op -> s+w per call, round-robin


def collect(
    syscall: pd.DataFrame,
    sendrecv: pd.DataFrame,
    uring: pd.DataFrame,
    *,
    node: str,
    bytes_: int = 16,
    preset: str = "default",
    transport: str = "tcp",
    rep: int | None = None,
) -> Samples:
    """Per-batch samples of one node (and optionally one repetition),
    warm-up excluded."""

    def keep(t: pd.DataFrame) -> pd.Series:
        m = (t["node"] == node) & ~t["warmup"]
        return m & (t["rep"] == rep) if rep is not None else m

    sc = syscall[keep(syscall) & (syscall["variant"] == "getppid")]
    sr = sendrecv[
        keep(sendrecv)
        & (sendrecv["transport"] == transport)
        & (sendrecv["ack"] == ("pingpong" if transport == "tcp" else "-"))
        & (sendrecv["bytes"] == bytes_)
    ]
    ub = uring[keep(uring) & (uring["pattern"] == preset) & (uring["bytes"] == bytes_)]

    def calls(pattern: str) -> dict[str, np.ndarray]:
        rows = sr[sr["pattern"] == pattern]
        return {op: rows.loc[rows["variant"] == op, "ns_per_call"].to_numpy(float) for op in OPS}

    rr = calls("roundrobin")
    samples = Samples(
        s=sc["ns_per_call"].to_numpy(float), sw=calls("single"), sw_rr=rr if all(a.size for a in rr.values()) else {}
    )
    for op in OPS:
        rows = ub[ub["variant"] == op]
        samples.enter[op] = {int(n): g["ns_per_call"].to_numpy(float) for n, g in rows.groupby("n")}
    empty = [name for name, arr in [("syscall", samples.s), *samples.sw.items()] if arr.size == 0]
    empty += [f"uring_batch {op}" for op in OPS if not samples.enter[op]]
    if empty:
        raise ValueError(f"no samples for {', '.join(empty)} on node {node!r}")
    return samples


def estimate(samples: Samples) -> CostInputs:
    """Point estimates from the medians of the batches."""
    s = float(np.median(samples.s))
    w = {op: float(np.median(samples.sw[op])) - s for op in OPS}
    w_rr = {op: float(np.median(samples.sw_rr[op])) - s for op in samples.sw_rr}
    fits: dict[str, dict[str, Fit]] = {}
    t1: dict[str, float] = {}
    for op in OPS:
        ns = np.array(sorted(samples.enter[op]))
        u = np.array([float(np.median(samples.enter[op][n])) for n in ns])
        fits[op] = {"A": fit_model_a(ns, u, s), "B": fit_model_b(ns, u, s)}
        t1[op] = float(u[ns == 1][0] - s) if (ns == 1).any() else math.nan
    return CostInputs(s=s, w=w, fits=fits, t1=t1, w_rr=w_rr)


def derived(ci: CostInputs) -> dict[str, float]:
    """Every scalar the paper reports, from one set of inputs."""
    out = {
        "s": ci.s,
        "epoll_request": epoll_request(ci),
        "w_mean": (ci.w["send"] + ci.w["recv"]) / 2,
        "t1_mean": (ci.t1["send"] + ci.t1["recv"]) / 2,
        # The kernel work of one echo request through system calls, 2w,
        # with w as model B meets it (many connections), and on one.
        "floor_request": ci.w_many("send") + ci.w_many("recv"),
        "floor_request_single": ci.w["send"] + ci.w["recv"],
        "epoll_request_single": sum(ci.s + ci.w[op] for op in OPS),
        "nstar_A": crossover(ci, "A"),
        "nstar_B": crossover(ci, "B"),
    }
    # Ratios that carry over between machines (claims C1-C3), each side from
    # the same connection pattern. The source's cell (one connection): t at
    # n = 1 against w, and a request at n = 1, t(1) + s, against epoll's s + w.
    out["t1_over_w"] = out["t1_mean"] / out["w_mean"]
    out["uring_n1_over_epoll"] = (out["t1_mean"] + ci.s) / (ci.s + out["w_mean"])
    # The source's model read per SQE: an operation costs s/n + t against
    # s + w, which io_uring never undercuts at any n exactly when t >= s + w.
    out["t1_over_s_plus_w"] = out["t1_mean"] / (ci.s + out["w_mean"])
    # Model B's per-SQE cost of a request against the epoll request (both
    # over many connections): io_uring wins at some n only when it is below 1.
    out["b_request"] = ci.fits["send"]["B"].params["b"] + ci.fits["recv"]["B"].params["b"]
    out["per_sqe_over_epoll"] = out["b_request"] / out["epoll_request"]
    # Below 1: a batch's per-SQE kernel work undercuts a system call's w.
    out["b_over_floor"] = out["b_request"] / out["floor_request"]
    for op in OPS:
        out[f"w_{op}"] = ci.w[op]
        out[f"w_rr_{op}"] = ci.w_many(op)
        out[f"t_{op}"] = ci.fits[op]["A"].params["t"]
        out[f"t1_{op}"] = ci.t1[op]
        out[f"a_{op}"] = ci.fits[op]["B"].params["a"]
        out[f"b_{op}"] = ci.fits[op]["B"].params["b"]
        out[f"aic_A_{op}"] = ci.fits[op]["A"].aic
        out[f"aic_B_{op}"] = ci.fits[op]["B"].aic
    return out


def reps_of(syscall: pd.DataFrame, sendrecv: pd.DataFrame, uring: pd.DataFrame, node: str) -> list[int]:
    """The repetitions in which all three cost probes ran on ``node``."""

    def of(t: pd.DataFrame) -> set[int]:
        return set(t.loc[t["node"] == node, "rep"].astype(int))

    return sorted(of(syscall) & of(sendrecv) & of(uring))


def per_rep_inputs(
    syscall: pd.DataFrame, sendrecv: pd.DataFrame, uring: pd.DataFrame, *, node: str
) -> dict[int, CostInputs]:
    """The model's inputs estimated from each repetition alone."""
    reps = reps_of(syscall, sendrecv, uring, node)
    if not reps:
        raise ValueError(f"no repetition of node {node!r} ran syscall, sendrecv and uring_batch")
    return {rep: estimate(collect(syscall, sendrecv, uring, node=node, rep=rep)) for rep in reps}


def per_rep(inputs: Mapping[int, CostInputs]) -> pd.DataFrame:
    """Every derived quantity, one row per repetition (index: rep)."""
    return pd.DataFrame([{"rep": rep, **derived(ci)} for rep, ci in sorted(inputs.items())]).set_index("rep")


def summarize(per_rep_frame: pd.DataFrame) -> pd.DataFrame:
    """Median over repetitions of every quantity, with its 95 % interval and
    the interval a re-run is expected to fall in. Rows: quantity; columns:
    value, low, high, n, pred_low, pred_high."""
    rows = []
    for q in per_rep_frame.columns:
        e = across_reps(per_rep_frame[q].to_numpy(float))
        rows.append(
            {
                "quantity": q,
                "value": e.value,
                "low": e.low,
                "high": e.high,
                "n": e.n,
                "pred_low": e.pred_low,
                "pred_high": e.pred_high,
                "estimate": e,
            }
        )
    return pd.DataFrame(rows).set_index("quantity")


def central_inputs(inputs: Mapping[int, CostInputs]) -> CostInputs:
    """Inputs whose every parameter is the median over repetitions, for
    drawing the models (the reported numbers come from ``summarize``)."""
    cis = list(inputs.values())

    def med(values: list[float]) -> float:
        return float(np.median(values))

    fits = {
        op: {
            m: Fit(
                m,
                {k: med([c.fits[op][m].params[k] for c in cis]) for k in cis[0].fits[op][m].params},
                med([c.fits[op][m].rss for c in cis]),
                cis[0].fits[op][m].points,
            )
            for m in ("A", "B")
        }
        for op in OPS
    }
    w_rr = {op: med([c.w_many(op) for c in cis]) for op in OPS} if all(c.w_rr for c in cis) else {}
    return CostInputs(
        s=med([c.s for c in cis]),
        w={op: med([c.w[op] for c in cis]) for op in OPS},
        fits=fits,
        t1={op: med([c.t1[op] for c in cis]) for op in OPS},
        w_rr=w_rr,
    )


def w_pattern(inputs: Mapping[int, CostInputs]) -> str:
    """Which series the model's w (epoll request, floor, n*) came from."""
    return (
        "round-robin over many connections"
        if all(ci.w_rr for ci in inputs.values())
        else "one connection (no round-robin series was measured)"
    )


def enter_overhead(nop: pd.DataFrame, syscall: pd.DataFrame, node: str) -> pd.DataFrame:
    """Per repetition, from the nop probe on the default ring: a bare
    io_uring_enter (n = 0) beyond s, the part of an enter that the source's
    t (io_submit_sqes alone) leaves out, which our t(1) (the whole enter
    minus s) includes; and io_uring's own cost per SQE (the NOP slope).
    Rows: rep; columns: s, enter0_beyond_s, nop_per_sqe."""

    def mine(t: pd.DataFrame) -> pd.DataFrame:
        return t[(t["node"] == node) & ~t["warmup"]]

    n = mine(nop)
    n = n[n["pattern"] == "default"] if "default" in set(n["pattern"]) else n
    sc = mine(syscall)
    sc = sc[sc["variant"] == "getppid"]
    rows = []
    for rep in sorted(set(n["rep"].astype(int)) & set(sc["rep"].astype(int))):
        s = float(sc.loc[sc["rep"] == rep, "ns_per_call"].median())
        med = n[n["rep"] == rep].groupby("n")["ns_per_call"].median()
        if 0 not in med.index or len(med) < 2:
            continue
        slope = float(np.polyfit(med.index.to_numpy(float), med.to_numpy(float), 1)[0])
        rows.append({"rep": rep, "s": s, "enter0_beyond_s": float(med.loc[0]) - s, "nop_per_sqe": slope})
    return pd.DataFrame(rows, columns=["rep", "s", "enter0_beyond_s", "nop_per_sqe"]).set_index("rep")


def preferred_model(point: Mapping[str, float]) -> str:
    """The model with the lower AIC summed over both operations (``point``:
    each AIC's median over repetitions)."""
    a = sum(point[f"aic_A_{op}"] for op in OPS)
    b = sum(point[f"aic_B_{op}"] for op in OPS)
    return "B" if b < a else "A"
