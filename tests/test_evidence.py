"""The statistics behind every verdict and interval, each against values
computed independently here: exact binomial tails from counting, the
mixture martingale by numerical integration, the confidence sequence by
inverting that integral on a grid, Holm's step-down by hand, the
prediction interval in closed form, REML against the balanced ANOVA
estimator it equals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate
from scipy import stats as sps

from iolab.claims import evidence
from iolab.claims.findings import finding
from iolab.claims.verdicts import Rule, settle
from iolab.estimation import intervals as stats
from iolab.estimation import occasion_spread as occasions


def exact_tail(k: int, n: int) -> float:
    """P(Bin(n, 1/2) >= k), by counting."""
    return sum(math.comb(n, j) for j in range(max(k, 0), n + 1)) / 2**n


def mixture_by_quadrature(k: int, n: int) -> float:
    """2^n times the mean, over theta uniform on (1/2, 1], of theta^k (1-theta)^(n-k)."""
    value, _ = integrate.quad(lambda t: t**k * (1 - t) ** (n - k), 0.5, 1.0, epsabs=1e-14, epsrel=1e-12)
    return 2**n * 2 * value


def test_the_sign_tests_tail_is_the_exact_binomial_tail() -> None:
    for n in range(1, 25):
        for k in range(0, n + 2):
            assert float(evidence.sign_tail(k, n)) == pytest.approx(exact_tail(k, n), rel=1e-12, abs=1e-15)


def test_the_mixture_martingale_is_its_integral() -> None:
    for n in (1, 2, 5, 10, 30):
        for k in range(n + 1):
            assert math.exp(float(stats.log_mixture(k, n))) == pytest.approx(mixture_by_quadrature(k, n), rel=1e-8)


def test_the_anytime_p_value_is_one_over_the_running_maximum() -> None:
    rng = np.random.default_rng(4)
    values = rng.normal(0.3, 1.0, 40)
    hits = np.cumsum(values > 0.0)
    best = max(mixture_by_quadrature(int(hits[t]), t + 1) for t in range(40))
    assert float(evidence.anytime_p(values, 0.0, "above")) == pytest.approx(min(1.0, 1 / best), rel=1e-8)
    # Fixed-sample: the exact tail of the final count.
    assert float(evidence.fixed_p(values, 0.0, "above")) == pytest.approx(exact_tail(int(hits[-1]), 40), rel=1e-12)


def test_the_confidence_sequence_is_every_bound_the_anytime_tests_keep() -> None:
    rng = np.random.default_rng(9)
    values = rng.lognormal(0.0, 0.2, 30)
    low, high = stats.confidence_sequence(values, 0.95)
    grid = np.linspace(values.min() * 0.9, values.max() * 1.1, 2001)

    def rejected(c: float, side: str) -> bool:
        beyond = values > c if side == "above" else values < c
        hits = np.cumsum(beyond)
        return max(mixture_by_quadrature(int(hits[t]), t + 1) for t in range(len(values))) >= 1 / 0.025

    kept = [c for c in grid if not rejected(c, "above") and not rejected(c, "below")]
    # The interval's ends are data points; the grid's kept bounds lie within them.
    assert low <= min(kept) and max(kept) <= high
    assert min(kept) - low < np.ptp(values) / 100 and high - max(kept) < np.ptp(values) / 100


def test_holm_step_down_by_hand() -> None:
    p = np.array([0.01, 0.04, 0.03, 0.005])
    # Sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04 -> running max.
    assert evidence.holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # 0.5 x 2 = 1.0; 0.9 x 1 = 0.9, raised to the running maximum 1.0.
    assert evidence.holm(np.array([[0.5, 0.9]]))[0] == pytest.approx([1.0, 1.0])


def test_weighted_bonferroni_keeps_round_zeros_decision() -> None:
    b = evidence.ADAPTIVE
    # Round 0 alone at its share: p0 = 1/64 <= 0.016.
    assert float(evidence.combine(1 / 64, 1.0, b)) <= b.tests
    # A later-round p-value counts at its own share only.
    assert float(evidence.combine(1.0, 0.004, b)) <= b.tests
    assert float(evidence.combine(1.0, 0.006, b)) > b.tests
    assert float(evidence.combine(0.5, 0.5, b)) == pytest.approx(
        min(1.0, 0.5 * b.tests / b.round0, 0.5 * b.tests / b.later)
    )


def test_the_budget_spends_the_whole_rate_on_the_tests() -> None:
    # The verdict about this machine carries no occasion allowance: its
    # 2.5 % each way goes to round 0's exact test, and with adaptive
    # precision 0.5 % of it to the anytime test over later rounds.
    assert math.isclose(evidence.FIXED.round0, 0.025) and evidence.FIXED.later == 0
    assert math.isclose(evidence.ADAPTIVE.round0 + evidence.ADAPTIVE.later, 0.025)
    assert evidence.budget(False) is evidence.FIXED and evidence.budget(True) is evidence.ADAPTIVE


def test_which_outcomes_a_claim_can_reach() -> None:
    b = evidence.ADAPTIVE
    assert [evidence.reps_to_reach(k, b) for k in (1, 2, 3, 12)] == [6, 7, 8, 10]
    # 6 repetitions: one part either way; two parts cannot be refuted (2/64 > 0.016).
    assert evidence.reachable(6, 1, b) == (True, True)
    assert evidence.reachable(6, 2, b) == (True, False)
    assert evidence.reachable(5, 1, b) == (False, False)


@pytest.mark.parametrize("kind", ["above", "below", "within"])
def test_the_verdict_interval_and_the_tests_agree(kind: str) -> None:
    rng = np.random.default_rng(21)
    rule = Rule(kind, 1.0, 0.1 if kind == "within" else 0.0)
    for _ in range(300):
        values = list(1.0 * np.exp(rng.normal(rng.normal(0, 0.15), 0.15, int(rng.integers(6, 14)))))
        f = finding("X", "p", values, rule, decides={"echo": []})
        settle([f], evidence.ADAPTIVE, 0.03, predict=False)
        by_interval = rule.judge(f.estimate.low, f.estimate.high).value == "reproduced"
        assert by_interval == (f.p_holds() <= f.budget.tests)


def test_the_prediction_interval_in_closed_form() -> None:
    # Equal values: no within-run error, only the two occasions' spread,
    # estimated from 4 runs: t with their 3 degrees of freedom.
    lo, hi = occasions.prediction_interval([2.0] * 6, occasions.Spread(0.1, 0.0, 1, 4, 0))
    half = sps.t.ppf(0.975, 3) * math.sqrt(2 * 0.1**2)
    assert (lo, hi) == pytest.approx((2.0 * math.exp(-half), 2.0 * math.exp(half)))
    # Asymmetric on the original scale, symmetric on the log scale.
    assert hi / 2.0 == pytest.approx(2.0 / lo)
    values = np.random.default_rng(2).lognormal(0, 0.2, 8)
    wide = occasions.prediction_interval(values, occasions.Spread(0.1, 0.0, 1, 4, 0))
    narrow = occasions.prediction_interval(values, occasions.Spread(0.0, 0.0, 1, 4, 0))
    assert wide[0] < narrow[0] and wide[1] > narrow[1]


def test_reml_equals_the_balanced_anova_estimator() -> None:
    rng = np.random.default_rng(1)
    blocks = [[mu + rng.normal(0, 0.08) + rng.normal(0, 0.15, 6) for _ in range(5)] for mu in rng.normal(0, 1, 40)]
    got = occasions.reml(blocks)
    msw = np.mean([np.var(r, ddof=1) for runs in blocks for r in runs])
    msb = np.mean([6 * np.var([r.mean() for r in runs], ddof=1) for runs in blocks])
    assert got.sigma_within == pytest.approx(math.sqrt(msw), rel=1e-4)
    assert got.sigma_occasion == pytest.approx(math.sqrt((msb - msw) / 6), rel=1e-3)
    # No occasion effect at all: estimated at (or near) zero.
    flat = [[rng.normal(0, 0.15, 6) for _ in range(5)] for _ in range(40)]
    assert occasions.reml(flat).sigma_occasion < 0.03
