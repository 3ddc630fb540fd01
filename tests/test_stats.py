"""The statistics every interval comes from (iolab.estimation.intervals), checked
on synthetic data whose truth is known: repetitions that differ far more
than the batches within them, as on the shared machines this runs on."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from iolab.estimation import intervals as stats

DATASETS = 200


def repetitions(
    rng: np.random.Generator,
    reps: int = 6,
    batches: int = 100,
    between: float = 0.15,
    within: float = 0.01,
    center: float = 1.0,
) -> list[np.ndarray]:
    """Each repetition's batches: a repetition effect (lognormal, ``between``)
    times small batch noise (``within``). The median of a repetition's
    estimate is ``center`` by symmetry in log space."""
    return [d * rng.lognormal(0, within, batches) for d in center * rng.lognormal(0, between, reps)]


def test_median_ci_is_the_order_statistic_interval() -> None:
    # n = 100: ranks 40 and 61 (1-based), the binomial table's 95 % interval.
    assert stats.median_ci(np.arange(1, 101)) == (40.0, 61.0)
    # n = 6: the extremes, which cover the median with probability 1 - 2/64.
    assert stats.median_ci([3, 1, 2, 6, 5, 4]) == (1.0, 6.0)


def test_median_ci_equals_scipys_quantile_test_on_the_data_itself() -> None:
    """median_ci asks scipy for the ranks once per sample size; on any data
    (ties, infinities, unsorted) it must equal scipy's interval on that data."""
    rng = np.random.default_rng(3)
    for n in range(1, 60):
        for confidence in (0.9, 0.95, 0.99):
            a = rng.lognormal(0, 0.2, n).round(1)  # rounding makes ties
            if n > 3:
                a[rng.integers(n)] = math.inf
            ci = sps.quantile_test(a, p=0.5).confidence_interval(confidence)
            want = (-math.inf if math.isnan(ci.low) else ci.low, math.inf if math.isnan(ci.high) else ci.high)
            assert stats.median_ci(a, confidence) == want, (n, confidence)


def test_too_few_repetitions_give_an_unbounded_interval() -> None:
    est = stats.across_reps([1.0, 1.1, 0.9])
    assert est.value == 1.0 and (est.low, est.high) == (-math.inf, math.inf) and est.n == 3
    assert not est.bounded and est.rel_halfwidth == math.inf


def test_infinite_per_rep_values_stay_ordered() -> None:
    # A crossover that never happens in one repetition is +inf, not a gap.
    est = stats.across_reps([4.0, 5.0, math.inf, 6.0, 5.5, 4.5])
    assert est.value == 5.25 and est.low == 4.0 and est.high == math.inf


def test_interval_across_repetitions_covers_the_truth() -> None:
    rng = np.random.default_rng(11)
    hits = 0
    for _ in range(DATASETS):
        est = stats.across_reps([np.median(b) for b in repetitions(rng)])
        hits += est.low <= 1.0 <= est.high
    assert 0.90 <= hits / DATASETS <= 0.99


def test_pooling_batches_of_all_repetitions_does_not() -> None:
    # The old estimator: one order-statistic interval over every batch of
    # every repetition, as if they were independent. Far too narrow.
    rng = np.random.default_rng(11)
    hits = 0
    for _ in range(DATASETS):
        ci = sps.quantile_test(np.concatenate(repetitions(rng)), p=0.5).confidence_interval(0.95)
        hits += ci.low <= 1.0 <= ci.high
    assert hits / DATASETS < 0.6


def test_paired_ratio_interval_covers_the_truth() -> None:
    # Both configurations share each repetition's drift; the ratio within a
    # repetition cancels it.
    rng = np.random.default_rng(12)
    hits = 0
    for _ in range(DATASETS):
        drift = rng.lognormal(0, 0.2, 6)
        a = [2.0 * d * np.median(rng.lognormal(0, 0.03, 100)) for d in drift]
        b = [d * np.median(rng.lognormal(0, 0.03, 100)) for d in drift]
        est = stats.across_reps(np.divide(a, b))
        hits += est.low <= 2.0 <= est.high
    assert 0.90 <= hits / DATASETS <= 0.99


def test_prediction_interval_holds_the_next_runs_estimate() -> None:
    rng = np.random.default_rng(13)
    hits = 0
    for _ in range(DATASETS):
        first = stats.across_reps([np.median(b) for b in repetitions(rng)])
        second = np.median([np.median(b) for b in repetitions(rng)])
        hits += first.pred_low <= second <= first.pred_high
    assert hits / DATASETS >= 0.90


def test_expected_ci_narrows_with_more_repetitions() -> None:
    per_rep = np.random.default_rng(3).normal(100, 10, 6)
    widths = [np.subtract(*stats.expected_ci(per_rep, n)[::-1]) for n in (6, 20, 100)]
    assert widths[0] > widths[1] > widths[2] > 0
    assert stats.expected_ci(per_rep, 5) == (-math.inf, math.inf)


def test_mean_of_smallest_is_the_seed_estimator() -> None:
    assert stats.mean_of_smallest([5, 1, 9, 2, 3, 8]) == 2.0
    assert stats.mean_of_smallest([4, 2]) == 3.0


def test_scaled_estimate_keeps_every_bound() -> None:
    est = stats.Estimate(1000.0, 900.0, 1100.0, 6, 800.0, 1200.0).scaled(1e-3)
    assert (est.value, est.low, est.high, est.n, est.pred_low, est.pred_high) == pytest.approx(
        (1.0, 0.9, 1.1, 6, 0.8, 1.2)
    )


def test_the_ratio_interval_ranks_are_the_mann_whitney_table() -> None:
    # Critical values of the two-sided 5 % Mann-Whitney test: U <= 5 for 6
    # and 6, U <= 23 for 10 and 10, U <= 0 for 4 and 4; 3 and 3 have none.
    assert stats._shift_ci_rank(6, 6, 0.95) == 6
    assert stats._shift_ci_rank(10, 10, 0.95) == 24
    assert stats._shift_ci_rank(4, 4, 0.95) == 1
    assert stats._shift_ci_rank(3, 3, 0.95) is None
    assert sum(stats._mann_whitney_counts(6, 6)) == math.comb(12, 6)
    # Past the exact table, the normal approximation lands within one rank.
    assert abs(stats._shift_ci_rank(50, 51, 0.95) - stats._shift_ci_rank(50, 50, 0.95)) <= 30
    e = stats.ratio_interval([1.0, 2.0, 3.0], [2.0, 4.0, 6.0])
    assert e is not None and e.value == pytest.approx(2.0) and (e.low, e.high) == (0.0, math.inf)
    assert stats.ratio_interval([1.0, -1.0], [1.0, 2.0]) is None


def test_the_ratio_interval_covers_and_finds_what_disjoint_intervals_miss() -> None:
    """Two runs of 6 repetitions, 10 % lognormal noise: with equal medians
    the interval holds 1 in about 96 % of runs (exact: 0.959); one built from
    ranks 3 places too far in (the negative control) falls well short. With
    a true ratio of 1.15 it excludes 1 in about half the runs, where two
    disjoint median intervals are seen in under a tenth."""
    rng = np.random.default_rng(20261128)
    held = narrow_held = 0
    for _ in range(2000):
        a, b = np.exp(rng.normal(0, 0.1, 6)), np.exp(rng.normal(0, 0.1, 6))
        e = stats.ratio_interval(a, b)
        assert e is not None
        held += e.low <= 1 <= e.high
        diffs = np.sort((np.log(b)[:, None] - np.log(a)[None, :]).ravel())
        narrow_held += diffs[6 - 1 + 3] <= 0 <= diffs[diffs.size - 6 - 3]
    assert 0.94 <= held / 2000 <= 0.98
    assert narrow_held / 2000 < 0.9
    ratio_found = disjoint_found = 0
    for _ in range(1000):
        a, b = np.exp(rng.normal(0, 0.1, 6)), np.exp(rng.normal(math.log(1.15), 0.1, 6))
        e = stats.ratio_interval(a, b)
        assert e is not None
        ratio_found += not e.low <= 1 <= e.high
        (la, ha), (lb, hb) = stats.median_ci(a), stats.median_ci(b)
        disjoint_found += ha < lb or hb < la
    assert ratio_found > 3 * disjoint_found and ratio_found / 1000 > 0.35


def test_an_abba_quartet_cancels_a_drift_linear_in_log() -> None:
    # B is 1.2 A; each cell runs 4 % slower than the one before (a drift linear in log).
    a1, b1, b2, a2 = (side * 1.04**i for i, side in enumerate((1.0, 1.2, 1.2, 1.0)))
    assert stats.abba_log_ratio(a1, b1, b2, a2) == pytest.approx(math.log(1.2), abs=1e-12)
    # The negative control: the same four in AABB order keep the drift.
    assert abs(stats.abba_log_ratio(a1, b2, a2, b1) - math.log(1.2)) > 0.03


@pytest.mark.parametrize("n", [4, 6, 12])
def test_the_sd_interval_covers_the_true_spread_at_its_level(n: int) -> None:
    rng = np.random.default_rng(n)
    covered = [
        low <= 0.1 <= high for low, high in (stats.sd_interval(rng.normal(0, 0.1, n))[1:] for _ in range(DATASETS * 5))
    ]
    # 1000 draws at 90 %: 3 binomial sd is 0.028.
    assert abs(np.mean(covered) - 0.90) < 0.03
    # The negative control: the sd alone as its own interval's middle, at a
    # halved width, covers far less often.
    narrow = [
        (sd - (sd - low) / 2) <= 0.1 <= (sd + (high - sd) / 2)
        for sd, low, high in (stats.sd_interval(rng.normal(0, 0.1, n)) for _ in range(DATASETS * 5))
    ]
    assert np.mean(narrow) < 0.80


def test_an_sd_interval_needs_two_values() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        stats.sd_interval([0.1])
