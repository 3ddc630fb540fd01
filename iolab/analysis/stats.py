"""Every interval iolab reports, computed one way (DESIGN.md, methodology).

The unit of replication is the repetition: an independent launch at another
time. A quantity is first estimated within each repetition (the median of its
batches or iterations, or a fit to them), and the reported value is the
median of those per-repetition estimates, with a distribution-free 95 %
confidence interval for that median from binomial order statistics
(``scipy.stats.quantile_test``). Batches within one repetition never count as
independent: on shared machines repetitions differ by 10-30 % while batches
within one agree within about 1 %, so pooling them gives intervals that the
next run does not honour.

With fewer than 6 repetitions no pair of order statistics covers the median
with 95 % probability; the interval is then unbounded, and every verdict that
depends on it is undecided.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

CONFIDENCE = 0.95
# The fewest repetitions whose extreme order statistics cover the median with
# probability >= 95 %: 1 - 2 * 0.5**6 = 0.969.
MIN_REPS_FOR_CI = 6
ESTIMATOR = ("the median of per-repetition estimates, with a distribution-free 95 % confidence "
             "interval for that median from binomial order statistics over repetitions")


@dataclass(frozen=True)
class Estimate:
    """A value with its 95 % interval; ``n`` is the number of repetitions."""

    value: float
    low: float
    high: float
    n: int
    # Where a repeated run's value is expected, with 95 % probability.
    pred_low: float = math.nan
    pred_high: float = math.nan

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)

    @property
    def rel_halfwidth(self) -> float:
        if not self.bounded or not self.value:
            return math.inf
        return (self.high - self.low) / 2 / abs(self.value)

    def scaled(self, factor: float) -> Estimate:
        """The same estimate in other units (factor > 0)."""
        return Estimate(self.value * factor, self.low * factor, self.high * factor, self.n,
                        self.pred_low * factor, self.pred_high * factor)


def _finite_or_inf(values: ArrayLike) -> np.ndarray:
    a = np.asarray(values, dtype=float).ravel()
    return np.sort(a[~np.isnan(a)])


@functools.lru_cache(maxsize=None)
def _median_ci_ranks(n: int, confidence: float) -> tuple[int, int] | None:
    """The 0-based order statistics that bound the median's CI for a sample
    of ``n``, or None when no pair covers it. They depend on n alone, so
    scipy's interval is asked once per n (the claims ask thousands of times)."""
    ci = sps.quantile_test(np.arange(n, dtype=float), p=0.5).confidence_interval(confidence)
    if math.isnan(ci.low) or math.isnan(ci.high):
        return None
    return int(ci.low), int(ci.high)


def median_ci(values: ArrayLike, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Distribution-free CI for the median of ``values`` (one per repetition):
    ``scipy.stats.quantile_test``'s order statistics; (-inf, inf) when there
    are too few of them for the confidence asked."""
    a = _finite_or_inf(values)
    if a.size == 0:
        raise ValueError("median_ci of an empty sample")
    ranks = _median_ci_ranks(int(a.size), confidence)
    if ranks is None:
        return -math.inf, math.inf
    return float(a[ranks[0]]), float(a[ranks[1]])


def across_reps(per_rep: ArrayLike, confidence: float = CONFIDENCE, seed: int = 0) -> Estimate:
    """The estimate of a quantity from its per-repetition values (inf allowed,
    NaN dropped): their median, the median's CI, and a prediction interval
    for the median a repeated run of as many repetitions would give."""
    a = _finite_or_inf(per_rep)
    if a.size == 0:
        raise ValueError("across_reps of an empty sample")
    med = float(np.median(a))
    low, high = median_ci(a, confidence)
    return Estimate(med, low, high, int(a.size), *prediction_interval(a, confidence, seed))


def prediction_interval(per_rep: ArrayLike, confidence: float = CONFIDENCE,
                        seed: int = 0) -> tuple[float, float]:
    """Where the median of a new, independent set of as many repetitions is
    expected: median +- t * sqrt(2) * SE, with SE the bootstrap standard error
    of the median (scipy.stats.bootstrap). The sqrt(2) counts the uncertainty
    of both runs' medians. Unbounded below 3 finite repetitions."""
    a = _finite_or_inf(per_rep)
    if a.size < 3 or not np.isfinite(a).all():
        return -math.inf, math.inf
    if np.ptp(a) == 0:
        return float(a[0]), float(a[0])
    res = sps.bootstrap((a,), np.median, confidence_level=confidence, n_resamples=2000,
                        method="percentile", rng=np.random.default_rng(seed))
    half = float(sps.t.ppf(0.5 + confidence / 2, a.size - 1)) * math.sqrt(2) * float(res.standard_error)
    med = float(np.median(a))
    return med - half, med + half


def expected_ci(per_rep: ArrayLike, reps: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The interval ``reps`` repetitions would be expected to give, if they
    came from the distribution the ones at hand show: the order statistics
    scipy's interval picks for ``reps``, placed at the observed quantiles."""
    a = _finite_or_inf(per_rep)
    ranks = _median_ci_ranks(reps, confidence)
    if ranks is None:
        return -math.inf, math.inf
    # 1-based rank k of reps sits near quantile k / (reps + 1). Infinite
    # values (a crossover that never happens) rule out interpolation.
    method = "linear" if np.isfinite(a).all() else "inverted_cdf"
    return tuple(float(np.quantile(a, (r + 1) / (reps + 1), method=method))  # type: ignore[return-value]
                 for r in ranks)


def mean_of_smallest(x: ArrayLike, k: int = 3) -> float:
    """The HPC HUB seed's estimator: the mean of the k smallest of a series."""
    a = np.sort(np.asarray(x, dtype=float))
    if a.size == 0:
        raise ValueError("mean_of_smallest of an empty sample")
    return float(a[: min(k, a.size)].mean())


def spread_pct(values: Sequence[float] | np.ndarray) -> float:
    """(max - min) / median of repeated estimates, in percent."""
    a = np.asarray(values, dtype=float)
    return float((a.max() - a.min()) / np.median(a) * 100)
