"""How much a decision ratio varies at each level: repetitions within a
run, runs within a launch, and launches (Kalibera & Jones, 2013: the levels
of a benchmark experiment), from the per-repetition values runs recorded.

The model, per quantity (a claim part) on the log scale: the repetition i
of run r on launch l is

    log y = mu + a_l + b_lr + e_lri,   a ~ N(0, s_launch^2), b ~ N(0, s_run^2), e ~ N(0, s_rep^2),

fitted by restricted maximum likelihood (REML) over one or more
quantities that share the three variances (each its own mean), with a
parametric bootstrap for each sd's interval. Runs of one launch tell
s_run; launches tell s_launch only as far as there are several of them,
and with three launches its interval is wide: the estimate says so.

Also the lag structure within a run: the lag-1 autocorrelation of a run's
repetitions in the order measured, against its value when the same
repetitions are shuffled (the order carries nothing), so that a drift or a
level shift within a run shows as an excess over the shuffled value; on
the log values, and on their ranks (what a sign test sees: an outlier
weighs as one value).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy import stats as sps

LEVELS = ("launch", "run", "repetition")


@dataclass(frozen=True)
class Series:
    """One run's values of one quantity, in the order measured."""

    quantity: str
    launch: str
    run: str
    values: tuple[float, ...]


@dataclass(frozen=True)
class Components:
    """The three sds (log scale) with 90 % intervals, and what they rest on."""

    sd: dict[str, float]
    low: dict[str, float]
    high: dict[str, float]
    quantities: int
    runs: int
    launches: int
    observations: int


Design = list[tuple[np.ndarray, np.ndarray, np.ndarray]]


def _design(series: Sequence[Series]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per quantity: its log values, and the launch and run index of each."""
    by_q: dict[str, list[Series]] = {}
    for s in series:
        if len(s.values) and all(v > 0 and math.isfinite(v) for v in s.values):
            by_q.setdefault(s.quantity, []).append(s)
    out = []
    for group in by_q.values():
        y, launch, run = [], [], []
        launches = {name: i for i, name in enumerate(dict.fromkeys(s.launch for s in group))}
        for j, s in enumerate(group):
            y += [math.log(v) for v in s.values]
            launch += [launches[s.launch]] * len(s.values)
            run += [j] * len(s.values)
        if len(y) >= 2:
            out.append((np.asarray(y), np.asarray(launch), np.asarray(run)))
    return out


def _patterns(data: Design) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The quantities grouped by their design (which values share a launch,
    which a run): (launch, run, y stacked (quantities, n)) per design, so
    that one factorisation serves every quantity of a design."""
    groups: dict[tuple[bytes, bytes], tuple[np.ndarray, np.ndarray, list[np.ndarray]]] = {}
    for y, launch, run in data:
        key = (launch.tobytes(), run.tobytes())
        groups.setdefault(key, (launch, run, []))[2].append(y)
    return [(launch, run, np.stack(ys)) for launch, run, ys in groups.values()]


def _neg_reml(theta: np.ndarray, patterns: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> float:
    v_launch, v_run, v_rep = np.exp(theta)
    total = 0.0
    for launch, run, ys in patterns:
        n = launch.size
        cov = (
            v_launch * (launch[:, None] == launch[None, :]) + v_run * (run[:, None] == run[None, :]) + v_rep * np.eye(n)
        )
        try:
            chol = np.linalg.cholesky(cov)
        except np.linalg.LinAlgError:
            return 1e300
        inv = np.linalg.inv(cov)
        ones = np.ones(n)
        inv_1 = inv @ ones
        x_v_x = float(ones @ inv_1)
        mu = (ys @ inv_1) / x_v_x
        r = ys - mu[:, None]
        quad = np.einsum("qi,ij,qj->q", r, inv, r)
        logdet = 2 * float(np.sum(np.log(np.diag(chol))))
        total += ys.shape[0] * (logdet + math.log(x_v_x)) + float(np.sum(quad))
    return 0.5 * total


def fit(data: Design) -> dict[str, float]:
    """REML estimates of the three sds (a variance the data cannot tell
    from zero comes out near zero)."""
    patterns = _patterns(data)
    pooled = np.concatenate([y - y.mean() for y, _, _ in data])
    start = math.log(max(float(np.var(pooled)), 1e-8) / 3)
    best: optimize.OptimizeResult | None = None
    for shift in (0.0, -4.0):
        res = optimize.minimize(
            _neg_reml,
            np.full(3, start + shift),
            args=(patterns,),
            method="Nelder-Mead",
            options={"xatol": 1e-4, "fatol": 1e-6, "maxiter": 4000},
        )
        if best is None or res.fun < best.fun:
            best = res
    assert best is not None
    sds = np.sqrt(np.exp(best.x))
    # Below 1e-4 in log is nothing any run can see.
    return {name: float(s) if s > 1e-4 else 0.0 for name, s in zip(LEVELS, sds, strict=True)}


def components(series: Sequence[Series], boots: int = 100, seed: int = 0) -> Components | None:
    """The three sds of ``series`` (one or more quantities), each with a
    90 % parametric-bootstrap interval; None where fewer than two runs
    hold any quantity."""
    data = _design(series)
    if not data or all(np.unique(run).size < 2 for _, _, run in data):
        return None
    sd = fit(data)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(boots):
        fake = []
        for y, launch, run in data:
            a = rng.normal(0, sd["launch"], launch.max() + 1)[launch]
            b = rng.normal(0, sd["run"], run.max() + 1)[run]
            fake.append((y.mean() + a + b + rng.normal(0, sd["repetition"], y.size), launch, run))
        draws.append(fit(fake))
    low = {k: float(np.quantile([d[k] for d in draws], 0.05)) for k in LEVELS}
    high = {k: float(np.quantile([d[k] for d in draws], 0.95)) for k in LEVELS}
    runs = {(s.quantity, s.run) for s in series}
    return Components(
        sd,
        low,
        high,
        len(data),
        len({r for _, r in runs}),
        len({s.launch for s in series}),
        int(sum(y.size for y, _, _ in data)),
    )


def _lag1(x: np.ndarray) -> float:
    d = x - x.mean()
    den = float(d @ d)
    return float(d[:-1] @ d[1:]) / den if den > 0 else math.nan


@dataclass(frozen=True)
class Lag:
    """The mean lag-1 autocorrelation of runs' repetitions in the order
    measured, the same shuffled, and the excess with a 90 % interval
    (bootstrap over the series)."""

    ordered: float
    shuffled: float
    excess: float
    low: float
    high: float
    series: int


def lag_structure(
    series: Sequence[Series], shuffles: int = 200, boots: int = 1000, seed: int = 0, ranks: bool = False
) -> Lag | None:
    """``Lag`` over every series of at least 4 positive values, of their
    logs or (``ranks``) of their ranks."""
    logs = [np.log(np.asarray(s.values)) for s in series if len(s.values) >= 4 and all(v > 0 for v in s.values)]
    if ranks:
        logs = [sps.rankdata(x) for x in logs]
    logs = [x for x in logs if np.ptp(x) > 0]
    if not logs:
        return None
    rng = np.random.default_rng(seed)
    ordered = np.asarray([_lag1(x) for x in logs])
    shuffled = np.asarray([np.mean([_lag1(rng.permutation(x)) for _ in range(shuffles)]) for x in logs])
    excess = ordered - shuffled
    idx = rng.integers(0, excess.size, (boots, excess.size))
    means = excess[idx].mean(axis=1)
    return Lag(
        float(ordered.mean()),
        float(shuffled.mean()),
        float(excess.mean()),
        float(np.quantile(means, 0.05)),
        float(np.quantile(means, 0.95)),
        excess.size,
    )


def series_of(runs: Sequence[tuple[str, str, Sequence[Mapping[str, object]]]]) -> list[Series]:
    """Every counted claim part's values of every run, as series: ``runs``
    holds (run, launch, findings as recorded)."""
    out = []
    for run, launch, findings in runs:
        for f in findings:
            values = f.get("per_rep")
            if f.get("context") or not isinstance(values, list) or not values:
                continue
            name = f"{f.get('claim')}: {f.get('part')}" + (f" [{f.get('setup')}]" if f.get("setup") else "")
            kept = tuple(float(v) for v in values if isinstance(v, int | float) and math.isfinite(v))
            out.append(Series(name, launch or f"run:{run}", run, kept))
    return out
