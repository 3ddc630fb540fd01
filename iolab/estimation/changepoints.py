"""Where did a quantity change over a series of runs? Change points in a
timeline of medians, each weighed by its uncertainty.

Each run gives a median with a 95 % interval. On log values, a run's point
has variance se² + σ²_occasion: its own interval's standard error, and the
drift between occasions on one machine (data/occasions.json), which a single
run's repetitions cannot show. Without the second term two runs of one
commit minutes apart would "change" wherever the drift exceeds their
repetitions' spread (tests/test_changepoints.py keeps that as a negative
control).

The segments are fitted by PELT (ruptures) with a weighted-normal cost: a
segment costs Σ wᵢ(xᵢ − x̄_w)², wᵢ = 1/varᵢ. Under no change that is χ² with
one degree of freedom less than the segment's points, so a split must lower
it by more than the χ²₁ quantile at α/(n − 1): Bonferroni over the n − 1
places a first change could sit, which holds a series without a change to a
false alarm rate of at most about α.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import ruptures as rpt
from ruptures.base import BaseCost
from scipy import stats as sps

ALPHA = 0.05
Z95 = float(sps.norm.ppf(0.975))


@dataclass(frozen=True)
class Point:
    """One run's estimate: its value and 95 % interval (positive, or None)."""

    value: float
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class Change:
    """A change between points ``at - 1`` and ``at``: the ratio of the
    weighted geometric means of the segments after and before it."""

    at: int
    ratio: float


class WeightedNormalCost(BaseCost):
    """Σ wᵢ(xᵢ − x̄_w)² of a segment, from cumulative sums (O(1) per segment)."""

    model = "iolab_weighted_normal"
    min_size = 1

    def fit(self, signal: np.ndarray) -> WeightedNormalCost:
        self.signal = signal
        x, w = signal[:, 0], signal[:, 1]
        zero = np.zeros(1)
        self.w = np.concatenate([zero, np.cumsum(w)])
        self.wx = np.concatenate([zero, np.cumsum(w * x)])
        self.wxx = np.concatenate([zero, np.cumsum(w * x * x)])
        return self

    def error(self, start: int, end: int) -> float:
        w = self.w[end] - self.w[start]
        wx = self.wx[end] - self.wx[start]
        return float(max(self.wxx[end] - self.wxx[start] - wx * wx / w, 0.0))


def log_variance(point: Point, sigma_occasion: float) -> float:
    """The variance of a point's log value: its interval's, plus the occasions'."""
    se = 0.0
    if point.low is not None and point.high is not None and 0 < point.low <= point.high:
        se = (math.log(point.high) - math.log(point.low)) / (2 * Z95)
    return se * se + sigma_occasion * sigma_occasion


def penalty(n: int, alpha: float = ALPHA) -> float:
    """What a change must lower the cost by: χ²₁ at α/(n − 1)."""
    return float(sps.chi2.isf(alpha / max(n - 1, 1), 1))


def changes(points: Sequence[Point], sigma_occasion: float, alpha: float = ALPHA) -> list[Change]:
    """The change points of a series in time order. Points without a
    positive value are an error (a timeline holds medians of costs and
    rates); a point with no interval and no occasion spread cannot be
    weighed, and neither can a series of one."""
    if any(not (p.value > 0 and math.isfinite(p.value)) for p in points):
        raise ValueError("change points need positive, finite values")
    if len(points) < 2:
        return []
    variances = np.array([log_variance(p, sigma_occasion) for p in points])
    if np.any(variances <= 0):
        raise ValueError("a point has neither an interval nor an occasion spread to weigh it by")
    x = np.log([p.value for p in points])
    w = 1 / variances
    signal = np.column_stack([x, w])
    ends = (
        rpt.Pelt(custom_cost=WeightedNormalCost(), min_size=1, jump=1).fit(signal).predict(pen=penalty(len(x), alpha))
    )
    found, start = [], 0
    bounds = [*ends]
    for i, at in enumerate(bounds[:-1]):
        nxt = bounds[i + 1]
        before = np.average(x[start:at], weights=w[start:at])
        after = np.average(x[at:nxt], weights=w[at:nxt])
        found.append(Change(int(at), float(math.exp(after - before))))
        start = at
    return found
