"""The three levels of variation (iolab.procedure.variance_components): the REML fit
recovers known variances, says where a level cannot be told, and the lag
structure within a run shows a drift and nothing where there is none."""

from __future__ import annotations

import numpy as np
import pytest

from iolab.procedure import variance_components as components
from iolab.procedure.variance_components import Series


def simulated(
    launch_sd: float, run_sd: float, rep_sd: float, launches: int, runs: int, reps: int, parts: int, seed: int = 0
) -> list[Series]:
    rng = np.random.default_rng(seed)
    out = []
    for q in range(parts):
        mu = rng.normal(0, 1)
        for lch in range(launches):
            a = rng.normal(0, launch_sd)
            for r in range(runs):
                b = rng.normal(0, run_sd)
                values = np.exp(mu + a + b + rng.normal(0, rep_sd, reps))
                out.append(Series(f"q{q}", f"L{lch}", f"L{lch}r{r}", tuple(values)))
    return out


def test_the_fit_recovers_each_level() -> None:
    series = simulated(0.10, 0.03, 0.06, launches=8, runs=2, reps=6, parts=20)
    c = components.components(series, boots=20)
    assert c is not None
    assert c.sd["launch"] == pytest.approx(0.10, abs=0.025)
    assert c.sd["repetition"] == pytest.approx(0.06, abs=0.008)
    assert c.sd["run"] == pytest.approx(0.03, abs=0.02)
    for level in components.LEVELS:
        assert c.low[level] <= c.sd[level] <= c.high[level]
    assert (c.launches, c.runs, c.quantities) == (8, 16, 20)


def test_runs_of_one_launch_that_differ_only_by_their_repetitions_give_no_run_level() -> None:
    # Negative control for the fit: with no run effect it must not invent one.
    c = components.components(simulated(0.10, 0.0, 0.06, launches=6, runs=2, reps=6, parts=20, seed=3), boots=20)
    assert c is not None and c.sd["run"] < 0.02


def test_too_few_runs_give_no_estimate() -> None:
    one = [Series("q", "L", "r", (1.0, 1.1, 0.9))]
    assert components.components(one) is None


def test_the_lag_structure_shows_a_drift_and_nothing_in_shuffled_order() -> None:
    rng = np.random.default_rng(1)
    iid = [Series("q", "L", f"r{i}", tuple(np.exp(rng.normal(0, 0.05, 6)))) for i in range(300)]
    lag = components.lag_structure(iid, shuffles=40, boots=200)
    assert lag is not None and lag.low < 0 < lag.high
    # A level shift half-way through each run: neighbours agree more than shuffled ones.
    shift = [
        Series("q", "L", f"r{i}", tuple(np.exp(rng.normal(0, 0.05, 6) + np.r_[0, 0, 0, 0.1, 0.1, 0.1])))
        for i in range(300)
    ]
    drift = components.lag_structure(shift, shuffles=40, boots=200)
    assert drift is not None and drift.low > 0.05


def test_series_come_from_counted_parts_with_values_only() -> None:
    runs = [
        (
            "r1",
            "L1",
            [
                {"claim": "U1", "part": "p", "setup": "s", "per_rep": [1.0, 1.1]},
                {"claim": "U1", "part": "c", "context": True, "per_rep": [1.0]},
            ],
        ),
        (
            "r2",
            "",
            [{"claim": "U1", "part": "p", "setup": "s", "per_rep": [1.2]}, {"claim": "U1", "part": "q", "per_rep": []}],
        ),
    ]
    got = components.series_of(runs)
    assert [(s.quantity, s.launch, s.values) for s in got] == [
        ("U1: p [s]", "L1", (1.0, 1.1)),
        ("U1: p [s]", "run:r2", (1.2,)),
    ]
