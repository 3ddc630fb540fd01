"""Summary statistics that follow the methodology rules in DESIGN.md:
medians with nonparametric confidence intervals, the seeds' own estimator,
and bootstrap intervals for fitted parameters."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float
    high: float
    n: int

    @property
    def rel_halfwidth(self) -> float:
        return (self.high - self.low) / 2 / self.value if self.value else float("nan")


def median_ci(x: ArrayLike, confidence: float = 0.95) -> Estimate:
    """Median with a distribution-free CI from binomial order statistics
    (Le Boudec; Hoefler & Belli): ranks ``lo`` and ``hi`` such that
    P(X_(lo) <= median <= X_(hi)) >= confidence."""
    a = np.sort(np.asarray(x, dtype=float))
    a = a[~np.isnan(a)]
    n = a.size
    if n == 0:
        raise ValueError("median_ci of an empty sample")
    med = float(np.median(a))
    if n < 6:
        # Too few samples for a 95 % order-statistic interval: report the range.
        return Estimate(med, float(a[0]), float(a[-1]), n)
    # j: smallest count with P(B <= j) >= alpha/2 for B ~ Bin(n, 1/2); the
    # interval [X_(j), X_(n-j+1)] (1-based ranks) then covers the median with
    # probability 1 - 2 P(B <= j-1) >= confidence.
    j = int(sps.binom.ppf((1 - confidence) / 2, n, 0.5))
    lo = max(j - 1, 0)
    hi = min(n - j, n - 1)
    return Estimate(med, float(a[lo]), float(a[hi]), n)


def mean_of_smallest(x: ArrayLike, k: int = 3) -> float:
    """The HPC HUB seed's estimator: the mean of the k smallest of a series."""
    a = np.sort(np.asarray(x, dtype=float))
    if a.size == 0:
        raise ValueError("mean_of_smallest of an empty sample")
    return float(a[: min(k, a.size)].mean())


def bootstrap_ci(
    data: ArrayLike,
    statistic: Callable[[np.ndarray], float],
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Estimate:
    """Percentile bootstrap CI of ``statistic`` over rows of ``data``."""
    arr = np.asarray(data)
    rng = np.random.default_rng(seed)
    n = arr.shape[0]
    point = float(statistic(arr))
    reps = np.empty(resamples)
    for i in range(resamples):
        reps[i] = statistic(arr[rng.integers(0, n, n)])
    alpha = (1 - confidence) / 2
    return Estimate(point, float(np.quantile(reps, alpha)), float(np.quantile(reps, 1 - alpha)), n)


def spread_pct(values: ArrayLike) -> float:
    """(max - min) / median of repeated estimates, in percent."""
    a = np.asarray(values, dtype=float)
    return float((a.max() - a.min()) / np.median(a) * 100)
