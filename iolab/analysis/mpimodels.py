"""Latency models for MPI: Hockney for ping-pong, and the collective formulas.

Every fit is a non-negative least-squares fit of summarised medians,
weighted by 1/T so that 1 B and 1 MiB points count alike (relative error),
with a bootstrap CI from resampling the points.

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

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.optimize import nnls

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
    ("bcast", "scatter_allgather"): ("(lg p + p - 1) alpha + 2 m (p-1)/p beta",
                                     lambda p, m: (_lg(p) + p - 1, 2 * m * (p - 1) / p)),
    ("allreduce", "recursive_doubling"): ("lg p (alpha + m beta + m gamma)",
                                          lambda p, m: (_lg(p), m * _lg(p))),
    # beta' = beta + gamma/2: computation cannot be told apart from transfer here.
    ("allreduce", "ring"): ("2(p-1) alpha + 2 m (p-1)/p beta'",
                            lambda p, m: (2 * (p - 1), 2 * m * (p - 1) / p)),
    ("allreduce", "rabenseifner"): ("2 lg p alpha + 2 m (p-1)/p beta'",
                                    lambda p, m: (2 * _lg(p), 2 * m * (p - 1) / p)),
    ("allreduce", "basic_linear"): ("2(p-1)(alpha + m beta)", lambda p, m: (2 * (p - 1), 2 * (p - 1) * m)),
    ("alltoall", "pairwise"): ("(p-1)(alpha + m beta)", lambda p, m: (p - 1, (p - 1) * m)),
    ("alltoall", "linear"): ("(p-1)(alpha + m beta)", lambda p, m: (p - 1, (p - 1) * m)),
    ("alltoall", "modified_bruck"): ("lg p alpha + (m p / 2) lg p beta",
                                     lambda p, m: (_lg(p), m * p / 2 * _lg(p))),
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


def _bootstrap(cs: np.ndarray, cw: np.ndarray, y: np.ndarray, resamples: int = 400,
               seed: int = 0) -> tuple[tuple[float, float], tuple[float, float]]:
    rng = np.random.default_rng(seed)
    n = len(y)
    if n < 3:
        return (float("nan"),) * 2, (float("nan"),) * 2  # type: ignore[return-value]
    draws = []
    for _ in range(resamples):
        i = rng.integers(0, n, n)
        if len(np.unique(cw[i])) < 2:
            continue
        draws.append(_fit(cs[i], cw[i], y[i])[0])
    if not draws:
        return (float("nan"),) * 2, (float("nan"),) * 2  # type: ignore[return-value]
    d = np.array(draws)
    lo, hi = np.percentile(d, [2.5, 97.5], axis=0)
    return (float(lo[0]), float(hi[0])), (float(lo[1]), float(hi[1]))


def fit_terms(formula: str, terms: Terms, p: np.ndarray, m: np.ndarray, y: np.ndarray) -> LinearFit:
    p, m, y = (np.asarray(a, dtype=float) for a in (p, m, y))
    cs, cw = (np.broadcast_to(np.asarray(c, dtype=float), y.shape).copy() for c in terms(p, m))
    x, rss = _fit(cs, cw, y)
    ts_ci, tw_ci = _bootstrap(cs, cw, y)
    return LinearFit(formula, float(x[0]), float(x[1]), len(y), ts_ci, tw_ci, {"weighted_rss": rss})


def predict(fit: LinearFit, terms: Terms, p: np.ndarray, m: np.ndarray) -> np.ndarray:
    cs, cw = terms(np.asarray(p, dtype=float), np.asarray(m, dtype=float))
    return fit.ts_ns * np.asarray(cs) + fit.tw_ns_per_byte * np.asarray(cw)


HOCKNEY: Terms = lambda p, m: (np.ones_like(m), m)  # noqa: E731


@dataclass
class Hockney:
    """Piecewise T(m) = t_s + t_w m: ``small`` up to ``breakpoint`` bytes, ``large`` above."""
    small: LinearFit
    large: LinearFit | None
    breakpoint: float

    def predict(self, m: np.ndarray) -> np.ndarray:
        m = np.asarray(m, dtype=float)
        lo = predict(self.small, HOCKNEY, np.ones_like(m), m)
        if self.large is None:
            return lo
        return np.where(m <= self.breakpoint, lo, predict(self.large, HOCKNEY, np.ones_like(m), m))


def fit_hockney(m: np.ndarray, t_ns: np.ndarray, min_points: int = 3) -> Hockney:
    """Piecewise Hockney fit of one-way latency medians over sizes ``m``."""
    order = np.argsort(m)
    m, t = np.asarray(m, dtype=float)[order], np.asarray(t_ns, dtype=float)[order]
    ones = np.ones_like(m)
    best: tuple[float, int] | None = None
    for k in range(min_points, len(m) - min_points + 1):
        rss = _fit(ones[:k], m[:k], t[:k])[1] + _fit(ones[k:], m[k:], t[k:])[1]
        if best is None or rss < best[0]:
            best = (rss, k)
    if best is None:  # too few sizes to split: one line
        return Hockney(fit_terms("t_s + t_w m", HOCKNEY, ones, m, t), None, float(m[-1]))
    k = best[1]
    small = fit_terms("t_s + t_w m (eager)", HOCKNEY, ones[:k], m[:k], t[:k])
    large = fit_terms("t_s + t_w m (rendezvous)", HOCKNEY, ones[k:], m[k:], t[k:])
    return Hockney(small, large, float(m[k - 1]))


def collective_fits(summary: pd.DataFrame) -> pd.DataFrame:
    """Per (node, transport, bench): the paper's formula and, where the
    algorithm was pinned and has a known formula, the algorithm's.

    Oversubscribed points (more ranks than CPUs) time the scheduler as much
    as the network, so fits use them only when nothing else was measured
    (``oversubscribed_in_fit`` says so)."""
    rows = []
    for (node, transport, bench), g in summary[summary["bench"].isin(PAPER_FORMULAS)].groupby(
            ["node", "transport", "bench"]):
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
        for model, formula, terms in candidates:
            fit = fit_terms(formula, terms, p, m, y)
            pred = predict(fit, terms, p, m)
            err = (pred - y) / y
            rows.append({"node": node, "transport": transport, "bench": bench, "model": model,
                         "algorithm": algorithm, "formula": formula, "ts_ns": fit.ts_ns,
                         "ts_low": fit.ts_ci[0], "ts_high": fit.ts_ci[1],
                         "tw_ns_per_byte": fit.tw_ns_per_byte, "tw_low": fit.tw_ci[0],
                         "tw_high": fit.tw_ci[1], "points": fit.points,
                         "ranks_fitted": sorted({int(x) for x in p}), "oversubscribed_in_fit": with_over,
                         "median_abs_error": float(np.median(np.abs(err))),
                         "errors": list(zip(p.tolist(), m.tolist(), err.tolist(), strict=True))})
    return pd.DataFrame(rows)


def prediction_errors(fits: pd.DataFrame) -> pd.DataFrame:
    """Long table of relative prediction error per (model, p, size)."""
    rows = [{"node": r.node, "transport": r.transport, "bench": r.bench, "model": r.model,
             "ranks": int(p), "bytes": int(m), "error": e}
            for r in fits.itertuples() for p, m, e in r.errors]
    return pd.DataFrame(rows)


def algorithm_note(fits: pd.DataFrame) -> Mapping[str, str]:
    """bench -> the algorithm that ran, as recorded by the probe."""
    return {b: str(g["algorithm"].iloc[0]) for b, g in fits.groupby("bench")}


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
    curves = {}
    for r in fits.itertuples():
        terms = (PAPER_FORMULAS[r.bench][1] if r.model == "paper"
                 else ALGORITHM_FORMULAS[(r.bench, r.algorithm)][1])
        fit = LinearFit(r.formula, r.ts_ns, r.tw_ns_per_byte, r.points)
        curves[(r.transport, r.bench, r.model)] = (
            lambda p, m, fit=fit, terms=terms: predict(fit, terms, p, m))
    return curves
