"""The cost-model fits recover known parameters from synthetic data with
noise, and the verdict rules say what they should."""

from __future__ import annotations

import math

import numpy as np
import pytest

from iolab.analysis import claims, costmodel

NS = [1, 2, 4, 8, 16, 32, 64, 128, 256]


def synthetic(s: float, w: dict[str, float], a: dict[str, float], b: dict[str, float],
              noise: float = 0.03, seed: int = 0) -> costmodel.Samples:
    rng = np.random.default_rng(seed)
    samples = costmodel.Samples(
        s=s * rng.lognormal(0, noise, 400),
        sw={op: (s + w[op]) * rng.lognormal(0, noise, 400) for op in costmodel.OPS},
    )
    samples.enter = {op: {n: (s + a[op] + b[op] * n) * rng.lognormal(0, noise, 150) for n in NS}
                     for op in costmodel.OPS}
    return samples


TRUE = dict(s=120.0, w={"send": 1300.0, "recv": 260.0}, a={"send": 300.0, "recv": 330.0},
            b={"send": 2000.0, "recv": 380.0})


def test_model_b_recovers_a_and_b() -> None:
    point = costmodel.derived(costmodel.estimate(synthetic(**TRUE)))
    for op in costmodel.OPS:
        assert point[f"b_{op}"] == pytest.approx(TRUE["b"][op], rel=0.01)
        assert point[f"a_{op}"] == pytest.approx(TRUE["a"][op], rel=0.10)
        assert point[f"w_{op}"] == pytest.approx(TRUE["w"][op], rel=0.02)
    assert point["s"] == pytest.approx(120, rel=0.01)


def test_bootstrap_intervals_cover_the_truth() -> None:
    # A 95 % interval misses now and then; over many data sets it must cover
    # the true value most of the time (and not be absurdly wide).
    hits, trials = 0, 0
    for seed in range(12):
        boot = costmodel.bootstrap(synthetic(**TRUE, seed=seed), resamples=150, seed=seed)
        for q, truth in (("b_send", 2000.0), ("a_recv", 330.0)):
            row = boot.loc[q]
            hits += row["low"] <= truth <= row["high"]
            trials += 1
            assert (row["high"] - row["low"]) / truth < 0.5
    assert hits / trials >= 0.75


def test_aic_prefers_b_on_linear_data_and_a_on_constant_data() -> None:
    linear = costmodel.derived(costmodel.estimate(synthetic(**TRUE)))
    assert costmodel.preferred_model(linear) == "B"
    flat = dict(TRUE, a={"send": 1500.0, "recv": 1500.0}, b={"send": 0.0, "recv": 0.0})
    constant = costmodel.derived(costmodel.estimate(synthetic(**flat)))
    assert costmodel.preferred_model(constant) == "A"


def test_fits_respect_non_negativity() -> None:
    n = np.array(NS, dtype=float)
    # Data that an unconstrained line would fit with a negative intercept.
    u = 100 + 50 * n - 40
    fit = costmodel.fit_model_b(n, u, s=100)
    assert fit.params["a"] >= 0 and fit.params["b"] > 0


def test_crossover_matches_the_closed_form() -> None:
    ci = costmodel.estimate(synthetic(**dict(TRUE, b={"send": 500.0, "recv": 300.0}), noise=0.001))
    epoll = costmodel.epoll_request(ci)
    nstar = costmodel.crossover(ci, "B")
    at = costmodel.uring_request(ci, "B", np.array([nstar * 0.9, nstar, nstar * 1.1]))
    assert at[0] > epoll and abs(at[1] - epoll) / epoll < 1e-9 and at[2] < epoll
    # With b above the epoll request cost, io_uring never wins.
    assert math.isinf(costmodel.crossover(costmodel.estimate(synthetic(**TRUE, noise=0.001)), "B"))


def test_t1_is_the_enter_time_at_n1_minus_s() -> None:
    ci = costmodel.estimate(synthetic(**TRUE, noise=0.001))
    assert ci.t1["send"] == pytest.approx(TRUE["a"]["send"] + TRUE["b"]["send"], rel=0.01)


@pytest.mark.parametrize("mitigations,nstar,expected", [
    ("on", math.inf, "not reproduced: per SQE"),
    ("on", 12.0, "reproduced in the model: io_uring wins above n* = 12.0"),
    ("off", 3.0, "not testable on this node (mitigations off)"),
])
def test_c3_verdict(mitigations: str, nstar: float, expected: str) -> None:
    point = {"nstar_B": nstar, "b_send": 2000, "b_recv": 400, "epoll_request": 1800}
    assert claims.c3(mitigations, point).startswith(expected)


@pytest.mark.parametrize("mitigations,nstar,expected", [
    ("off", math.inf, "reproduced: here t(1) = 1565 ns > w = 770 ns"),
    ("off", 4.0, "not reproduced:"),
    ("on", math.inf, "not testable on this node (mitigations on)"),
])
def test_c2_verdict(mitigations: str, nstar: float, expected: str) -> None:
    point = {"nstar_B": nstar, "t1_mean": 1565, "w_mean": 770}
    assert claims.c2(mitigations, point).startswith(expected)


def test_overlay_ratios_compare_servers_with_the_model() -> None:
    import pandas as pd

    ci = costmodel.estimate(synthetic(**TRUE, noise=0.001))
    epoll = costmodel.epoll_request(ci)
    at8 = float(costmodel.uring_request(ci, "B", np.array([8.0]))[0])
    overlay = pd.DataFrame({"server": ["epoll", "uring"], "n": [1.0, 8.0],
                            "server_ns_per_request": [3 * epoll, 2 * at8]})
    ratios = costmodel.overlay_ratios(ci, overlay)
    assert ratios["overlay_epoll_ratio"] == pytest.approx(3.0)
    assert ratios["overlay_uring_ratio"] == pytest.approx(2.0)
