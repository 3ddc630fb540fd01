"""Latency models for MPI: Hockney for ping-pong, and the collective formulas.

Every fit is a non-negative least-squares fit of summarised medians,
weighted by 1/T so that 1 B and 1 MiB points count alike (relative error).
Parameter intervals come from the same fit made to each repetition alone
(its own medians), summarised across repetitions (iolab.estimation.intervals).

- Hockney, piecewise: T(m) = t_s + t_w*m separately below and above a
  breakpoint (eager vs rendezvous protocol), the breakpoint chosen among the
  measured sizes by least total weighted error.
- The paper's collective formulas (HPC HUB): bcast and allreduce
  (t_s + t_w*m)*log2 p; alltoall (t_s + t_w*p*m/2)*log2 p.
- The formula of the algorithm that ran (Thakur, Rabenseifner & Gropp 2005),
  with alpha (per message) and beta (per byte); computation (gamma) folds into
  beta for allreduce.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from ...estimation.intervals import across_reps

# (p, m) -> (coefficient of the per-message term, coefficient of the per-byte term)
Terms = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def _lg(p: np.ndarray) -> np.ndarray:
    return np.log2(p)


PAPER_FORMULAS: dict[str, tuple[str, Terms]] = {
    "bcast": ("(t_s + t_w m) log2 p", lambda p, m: (_lg(p), m * _lg(p))),
    "allreduce": ("(t_s + t_w m) log2 p", lambda p, m: (_lg(p), m * _lg(p))),
    "alltoall": ("(t_s + t_w p m / 2) log2 p", lambda p, m: (_lg(p), p * m / 2 * _lg(p))),
}

ALGORITHM_FORMULAS: dict[tuple[str, str], tuple[str, Terms]] = {
    ("bcast", "binomial"): ("lg p (alpha + m beta)", lambda p, m: (_lg(p), m * _lg(p))),
    ("bcast", "basic_linear"): ("(p-1)(alpha + m beta)", lambda p, m: (p - 1, (p - 1) * m)),
    ("bcast", "scatter_allgather"): (
        "(lg p + p - 1) alpha + 2 m (p-1)/p beta",
        lambda p, m: (_lg(p) + p - 1, 2 * m * (p - 1) / p),
    ),
    ("allreduce", "recursive_doubling"): ("lg p (alpha + m beta + m gamma)", lambda p, m: (_lg(p), m * _lg(p))),
    # beta' = beta + gamma/2: computation cannot be told apart from transfer here.
    ("allreduce", "ring"): ("2(p-1) alpha + 2 m (p-1)/p beta'", lambda p, m: (2 * (p - 1), 2 * m * (p - 1) / p)),
    ("allreduce", "rabenseifner"): ("2 lg p alpha + 2 m (p-1)/p beta'", lambda p, m: (2 * _lg(p), 2 * m * (p - 1) / p)),
    ("allreduce", "basic_linear"): ("2(p-1)(alpha + m beta)", lambda p, m: (2 * (p - 1), 2 * (p - 1) * m)),
    ("alltoall", "pairwise"): ("(p-1)(alpha + m beta)", lambda p, m: (p - 1, (p - 1) * m)),
    ("alltoall", "linear"): ("(p-1)(alpha + m beta)", lambda p, m: (p - 1, (p - 1) * m)),
    ("alltoall", "modified_bruck"): ("lg p alpha + (m p / 2) lg p beta", lambda p, m: (_lg(p), m * p / 2 * _lg(p))),
}


@dataclass
class LinearFit:
    """T = ts * c_s(p, m) + tw * c_w(p, m), fitted to summarised medians."""

    formula: str
    ts_ns: float
    tw_ns_per_byte: float
    points: int
    ts_ci: tuple[float, float] = (float("nan"), float("nan"))
    tw_ci: tuple[float, float] = (float("nan"), float("nan"))
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def bandwidth_mb_s(self) -> float:
        return 1e3 / self.tw_ns_per_byte if self.tw_ns_per_byte > 0 else float("inf")


def _fit(cs: np.ndarray, cw: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    w = 1.0 / np.maximum(y, 1e-9)
    design = np.column_stack([cs, cw]) * w[:, None]
    x, _ = nnls(design, y * w)
    resid = (np.column_stack([cs, cw]) @ x - y) * w
    return x, float(resid @ resid)


def _rep_intervals(
    terms: Terms, per_rep: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
) -> tuple[tuple[float, float], tuple[float, float]]:
    """(t_s CI, t_w CI): the fit made to each repetition's points alone,
    summarised across repetitions."""
    fits = []
    for p, m, y in per_rep:
        if len(np.unique(m)) < 2:
            continue
        cs, cw = (np.broadcast_to(np.asarray(c, dtype=float), y.shape).copy() for c in terms(p, m))
        fits.append(_fit(cs, cw, y)[0])
    if not fits:
        return (float("nan"),) * 2, (float("nan"),) * 2
    d = np.array(fits)
    ts, tw = across_reps(d[:, 0]), across_reps(d[:, 1])
    return (ts.low, ts.high), (tw.low, tw.high)


def fit_terms(
    formula: str,
    terms: Terms,
    p: np.ndarray,
    m: np.ndarray,
    y: np.ndarray,
    per_rep: list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None,
) -> LinearFit:
    """Fit to the points (p, m, y); ``per_rep``: each repetition's own points,
    for the parameters' intervals."""
    p, m, y = (np.asarray(a, dtype=float) for a in (p, m, y))
    cs, cw = (np.broadcast_to(np.asarray(c, dtype=float), y.shape).copy() for c in terms(p, m))
    x, rss = _fit(cs, cw, y)
    ts_ci, tw_ci = _rep_intervals(terms, per_rep) if per_rep else ((float("nan"),) * 2, (float("nan"),) * 2)
    return LinearFit(formula, float(x[0]), float(x[1]), len(y), ts_ci, tw_ci, {"weighted_rss": rss})


def predict(fit: LinearFit, terms: Terms, p: np.ndarray, m: np.ndarray) -> np.ndarray:
    cs, cw = terms(np.asarray(p, dtype=float), np.asarray(m, dtype=float))
    return fit.ts_ns * np.asarray(cs) + fit.tw_ns_per_byte * np.asarray(cw)


def hockney_terms(p: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hockney's terms: one start-up plus m bytes."""
    return np.ones_like(m), m


@dataclass
class Hockney:
    """Piecewise T(m) = t_s + t_w m: ``small`` up to ``breakpoint`` bytes, ``large`` above."""

    small: LinearFit
    large: LinearFit | None
    breakpoint: float

    def predict(self, m: np.ndarray) -> np.ndarray:
        m = np.asarray(m, dtype=float)
        lo = predict(self.small, hockney_terms, np.ones_like(m), m)
        if self.large is None:
            return lo
        return np.where(m <= self.breakpoint, lo, predict(self.large, hockney_terms, np.ones_like(m), m))


def _rep_points(
    per_rep: pd.DataFrame | None, select: np.ndarray | None = None
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None:
    """Each repetition's (p, m, time) from a ``mpistats.rep_medians`` slice,
    restricted to the sizes in ``select``."""
    if per_rep is None or per_rep.empty:
        return None
    out = []
    for _, g in per_rep.groupby("rep"):
        if select is not None:
            g = g[g["bytes"].isin(select)]
        out.append((g["ranks"].to_numpy(float), g["bytes"].to_numpy(float), g["time_ns"].to_numpy(float)))
    return out


def fit_hockney(m: np.ndarray, t_ns: np.ndarray, min_points: int = 3, per_rep: pd.DataFrame | None = None) -> Hockney:
    """Piecewise Hockney fit of one-way latency medians over sizes ``m``;
    ``per_rep``: the same ping-pong's ``mpistats.rep_medians`` rows, for the
    intervals (each repetition fitted on the same ranges)."""
    order = np.argsort(m)
    m, t = np.asarray(m, dtype=float)[order], np.asarray(t_ns, dtype=float)[order]
    ones = np.ones_like(m)
    best: tuple[float, int] | None = None
    for k in range(min_points, len(m) - min_points + 1):
        rss = _fit(ones[:k], m[:k], t[:k])[1] + _fit(ones[k:], m[k:], t[k:])[1]
        if best is None or rss < best[0]:
            best = (rss, k)
    if best is None:  # too few sizes to split: one line
        return Hockney(fit_terms("t_s + t_w m", hockney_terms, ones, m, t, _rep_points(per_rep)), None, float(m[-1]))
    k = best[1]
    small = fit_terms("t_s + t_w m (eager)", hockney_terms, ones[:k], m[:k], t[:k], _rep_points(per_rep, m[:k]))
    large = fit_terms("t_s + t_w m (rendezvous)", hockney_terms, ones[k:], m[k:], t[k:], _rep_points(per_rep, m[k:]))
    return Hockney(small, large, float(m[k - 1]))


def hockney_fits(summary: pd.DataFrame, per_rep: pd.DataFrame | None = None) -> dict[str, Hockney]:
    """Per transport with two or more ping-pong sizes, the piecewise Hockney
    fit. The tbf-shaped link gets ``transfer_rate`` instead: its burst makes
    the intercept negative, which Hockney's t_s >= 0 cannot express."""
    out = {}
    for transport in sorted(set(summary["transport"]) - {"netns_tbf"}):
        pp = summary[(summary["bench"] == "pingpong") & (summary["transport"] == transport)]
        if len(pp) >= 2:
            reps = (
                None
                if per_rep is None
                else per_rep[(per_rep["bench"] == "pingpong") & (per_rep["transport"] == transport)]
            )
            out[transport] = fit_hockney(pp["bytes"].to_numpy(), pp["median_ns"].to_numpy(), per_rep=reps)
    return out


def hockney_table(fits: dict[str, Hockney]) -> pd.DataFrame:
    """One row per transport and range: t_s, t_w, bandwidth and t_w's interval."""
    rows = []
    for transport, h in fits.items():
        for part, fit in (("small", h.small), ("large", h.large)):
            if fit is not None:
                rows.append(
                    {
                        "transport": transport,
                        "range": part,
                        "breakpoint_bytes": h.breakpoint,
                        "t_s_us": fit.ts_ns / 1e3,
                        "t_w_ns_per_byte": fit.tw_ns_per_byte,
                        "bandwidth_MB_s": fit.bandwidth_mb_s,
                        "tw_ci": fit.tw_ci,
                    }
                )
    return pd.DataFrame(rows)


def collective_fits(summary: pd.DataFrame, per_rep: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (node, transport, bench): the paper's formula and, where the
    algorithm was pinned and has a known formula, the algorithm's; fitted to
    ``summary``'s medians, with intervals from each repetition's own fit
    (``per_rep``: ``mpistats.rep_medians``).

    Oversubscribed points (more ranks than CPUs) time the scheduler as much
    as the network, so fits use them only when nothing else was measured
    (``oversubscribed_in_fit`` says so)."""
    rows = []
    for (node, transport, bench), g in summary[summary["bench"].isin(PAPER_FORMULAS)].groupby(
        ["node", "transport", "bench"]
    ):
        dedicated = g[~g["oversubscribed"]]
        with_over = dedicated.empty
        g = g if with_over else dedicated
        p, m, y = g["ranks"].to_numpy(), g["bytes"].to_numpy(), g["median_ns"].to_numpy()
        candidates: list[tuple[str, str, Terms]] = [("paper", *PAPER_FORMULAS[bench])]
        algorithms = set(g["algorithm"])
        pinned = bool(g["pinned"].all()) and len(algorithms) == 1
        algorithm = algorithms.pop() if pinned else "not pinned"
        if pinned and (bench, algorithm) in ALGORITHM_FORMULAS:
            candidates.append(("algorithm", *ALGORITHM_FORMULAS[(bench, algorithm)]))
        reps = None
        if per_rep is not None:
            mine = per_rep[
                (per_rep["node"] == node)
                & (per_rep["transport"] == transport)
                & (per_rep["bench"] == bench)
                & per_rep["ranks"].isin(set(p.tolist()))
            ]
            reps = _rep_points(mine)
        for model, formula, terms in candidates:
            fit = fit_terms(formula, terms, p, m, y, reps)
            pred = predict(fit, terms, p, m)
            err = (pred - y) / y
            rows.append(
                {
                    "node": node,
                    "transport": transport,
                    "bench": bench,
                    "model": model,
                    "algorithm": algorithm,
                    "formula": formula,
                    "ts_ns": fit.ts_ns,
                    "ts_low": fit.ts_ci[0],
                    "ts_high": fit.ts_ci[1],
                    "tw_ns_per_byte": fit.tw_ns_per_byte,
                    "tw_low": fit.tw_ci[0],
                    "tw_high": fit.tw_ci[1],
                    "points": fit.points,
                    "ranks_fitted": sorted({int(x) for x in p}),
                    "oversubscribed_in_fit": with_over,
                    "median_abs_error": float(np.median(np.abs(err))),
                    "errors": list(zip(p.tolist(), m.tolist(), err.tolist(), strict=True)),
                }
            )
    return pd.DataFrame(rows)


def prediction_errors(fits: pd.DataFrame) -> pd.DataFrame:
    """Long table of relative prediction error per (model, p, size)."""
    rows = [
        {
            "node": r.node,
            "transport": r.transport,
            "bench": r.bench,
            "model": r.model,
            "ranks": int(p),
            "bytes": int(m),
            "error": e,
        }
        for r in fits.itertuples()
        for p, m, e in r.errors
    ]
    return pd.DataFrame(rows)


def transfer_rate(m: np.ndarray, t_ns: np.ndarray) -> tuple[float, float]:
    """Bandwidth (MB/s) and intercept (ns) from an unconstrained least-squares
    line through large-message times. For a rate-shaped link the intercept
    may be negative (tbf lets its burst through at line rate), which
    Hockney's non-negative t_s cannot express, so the tbf check uses this."""
    m, t = np.asarray(m, dtype=float), np.asarray(t_ns, dtype=float)
    if len(np.unique(m)) < 2:
        raise ValueError("transfer_rate needs at least two message sizes")
    slope, intercept = np.polyfit(m, t, 1)
    return float(1e3 / slope), float(intercept)


def fit_curves(fits: pd.DataFrame) -> dict[tuple[str, str, str], Callable[[np.ndarray, np.ndarray], np.ndarray]]:
    """(transport, bench, model) -> T(p, m) in ns, for drawing the fitted models."""
    curves: dict[tuple[str, str, str], Callable[[np.ndarray, np.ndarray], np.ndarray]] = {}
    for r in fits.itertuples():
        terms = PAPER_FORMULAS[r.bench][1] if r.model == "paper" else ALGORITHM_FORMULAS[(r.bench, r.algorithm)][1]
        fit = LinearFit(r.formula, r.ts_ns, r.tw_ns_per_byte, r.points)
        curves[(r.transport, r.bench, r.model)] = functools.partial(predict, fit, terms)
    return curves
