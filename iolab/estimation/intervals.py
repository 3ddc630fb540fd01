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
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy import special
from scipy import stats as sps

CONFIDENCE = 0.95
# The two ways of reading a quantile here: interpolated, or an order statistic
# where infinite values rule interpolation out.
QuantileMethod = Literal["linear", "inverted_cdf"]
# The fewest repetitions whose extreme order statistics cover the median with
# probability >= 95 %: 1 - 2 * 0.5**6 = 0.969.
MIN_REPS_FOR_CI = 6
ESTIMATOR = (
    "the median of per-repetition estimates, with a distribution-free 95 % confidence "
    "interval for that median from binomial order statistics over repetitions"
)


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
    # The per-repetition values it came from (empty where not kept).
    values: tuple[float, ...] = ()

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
        return Estimate(
            self.value * factor,
            self.low * factor,
            self.high * factor,
            self.n,
            self.pred_low * factor,
            self.pred_high * factor,
            tuple(v * factor for v in self.values),
        )


def _finite_or_inf(values: ArrayLike) -> np.ndarray:
    a = np.asarray(values, dtype=float).ravel()
    return np.sort(a[~np.isnan(a)])


@functools.cache
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


def across_reps(per_rep: ArrayLike, confidence: float = CONFIDENCE, seed: int = 0, predict: bool = True) -> Estimate:
    """The estimate of a quantity from its per-repetition values (inf allowed,
    NaN dropped): their median, the median's CI, and (``predict``) a
    prediction interval for the median a repeated run of as many repetitions
    would give."""
    a = _finite_or_inf(per_rep)
    if a.size == 0:
        raise ValueError("across_reps of an empty sample")
    med = float(np.median(a))
    low, high = median_ci(a, confidence)
    pred = prediction_interval(a, confidence, seed) if predict else (math.nan, math.nan)
    # The values in the order measured (NaN dropped), for the occasion estimate.
    measured = np.asarray(per_rep, dtype=float).ravel()
    return Estimate(med, low, high, int(a.size), *pred, tuple(float(v) for v in measured[~np.isnan(measured)]))


@functools.cache
def _mann_whitney_counts(m: int, n: int) -> tuple[int, ...]:
    """For samples of m and n distinct values in random order, how many of
    the C(m+n, m) orderings give each Mann-Whitney count U = 0..m*n (pairs
    with the first sample's value above the second's)."""
    if m == 0 or n == 0:
        return (1,)
    counts = [0] * (m * n + 1)
    # The largest value is either the first sample's (above all n of the
    # second: U grows by n) or the second's (above nothing of the first).
    for u, c in enumerate(_mann_whitney_counts(m - 1, n)):
        counts[u + n] += c
    for u, c in enumerate(_mann_whitney_counts(m, n - 1)):
        counts[u] += c
    return tuple(counts)


def _shift_ci_rank(m: int, n: int, confidence: float) -> int | None:
    """k such that the k-th smallest and k-th largest of the m*n pairwise
    differences bound a ``confidence`` interval for the shift between two
    samples (exact while m*n <= 2500, else the normal approximation);
    None if even the extremes do not (too few values)."""
    tail = (1 - confidence) / 2
    if m * n <= 2500:
        counts = np.asarray(_mann_whitney_counts(m, n), dtype=float)
        cdf = np.cumsum(counts) / counts.sum()
        # P(U <= k - 1) <= tail: the largest such k.
        k = int(np.searchsorted(cdf, tail, side="right"))
    else:
        mu, sd = m * n / 2, math.sqrt(m * n * (m + n + 1) / 12)
        k = math.floor(mu - sps.norm.ppf(1 - tail) * sd)
    return k if k >= 1 else None


def ratio_interval(a: ArrayLike, b: ArrayLike, confidence: float = CONFIDENCE) -> Estimate | None:
    """The ratio b/a of two runs' per-repetition values (positive), as the
    Hodges-Lehmann shift between their logarithms, with the distribution-free
    interval of the Mann-Whitney test inverted (Hollander & Wolfe): the
    median of every pairwise ratio b_j/a_i, between the k-th smallest and
    k-th largest of them. None where a value is not positive and finite;
    unbounded where the samples are too small for any interval."""
    x, y = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    x, y = x[~np.isnan(x)], y[~np.isnan(y)]
    if not x.size or not y.size or not (np.isfinite(x).all() and np.isfinite(y).all()):
        return None
    if (x <= 0).any() or (y <= 0).any():
        return None
    diffs = np.sort((np.log(y)[:, None] - np.log(x)[None, :]).ravel())
    value = float(np.exp(np.median(diffs)))
    k = _shift_ci_rank(x.size, y.size, confidence)
    if k is None:
        return Estimate(value, 0.0, math.inf, int(min(x.size, y.size)))
    low, high = float(np.exp(diffs[k - 1])), float(np.exp(diffs[diffs.size - k]))
    return Estimate(value, low, high, int(min(x.size, y.size)))


def prediction_interval(per_rep: ArrayLike, confidence: float = CONFIDENCE, seed: int = 0) -> tuple[float, float]:
    """Where the median of a new, independent set of as many repetitions is
    expected, from this run alone (no occasion effect: the numbers of the
    paper add it, iolab.estimation.occasion_spread.prediction_interval)."""
    from .occasion_spread import prediction_interval as with_occasions

    return with_occasions(np.asarray(per_rep, dtype=float).ravel(), None, confidence, seed, within_only=True)


def expected_ci(
    per_rep: ArrayLike, reps: int, confidence: float = CONFIDENCE, anytime: bool = False
) -> tuple[float, float]:
    """The interval ``reps`` repetitions would be expected to give, if they
    came from the distribution the ones at hand show: the order statistics
    scipy's interval (``anytime``: the confidence sequence's) picks for
    ``reps``, placed at the observed quantiles."""
    a = _finite_or_inf(per_rep)
    ranks = _anytime_ranks(reps, confidence) if anytime else _median_ci_ranks(reps, confidence)
    if ranks is None:
        return -math.inf, math.inf
    # 1-based rank k of reps sits near quantile k / (reps + 1). Infinite
    # values (a crossover that never happens) rule out interpolation.
    method: QuantileMethod = "linear" if np.isfinite(a).all() else "inverted_cdf"
    low, high = (float(np.quantile(a, (r + 1) / (reps + 1), method=method)) for r in ranks)
    return low, high


def expected_cis(
    per_rep: ArrayLike, reps: Sequence[int] | np.ndarray, confidence: float = CONFIDENCE, anytime: bool = False
) -> list[tuple[float, float]]:
    """``expected_ci`` for each count in ``reps`` at once (one quantile pass)."""
    a = _finite_or_inf(per_rep)
    method: QuantileMethod = "linear" if np.isfinite(a).all() else "inverted_cdf"
    probs: list[float] = []
    where: list[bool] = []
    for n in reps:
        ranks = _anytime_ranks(int(n), confidence) if anytime else _median_ci_ranks(int(n), confidence)
        where.append(ranks is not None)
        if ranks is not None:
            probs += [(ranks[0] + 1) / (n + 1), (ranks[1] + 1) / (n + 1)]
    q = iter(np.quantile(a, probs, method=method).tolist() if probs else [])
    return [(next(q), next(q)) if ok else (-math.inf, math.inf) for ok in where]


def mean_of_smallest(x: ArrayLike, k: int = 3) -> float:
    """The HPC HUB seed's estimator: the mean of the k smallest of a series."""
    a = np.sort(np.asarray(x, dtype=float))
    if a.size == 0:
        raise ValueError("mean_of_smallest of an empty sample")
    return float(a[: min(k, a.size)].mean())


def abba_log_ratio(a1: float, b1: float, b2: float, a2: float) -> float:
    """log(B/A) of one ABBA quartet measured in that order: the mean log of
    its two B values less that of its two A values, so that a drift linear
    in time over the quartet cancels."""
    return (math.log(b1) + math.log(b2) - math.log(a1) - math.log(a2)) / 2


def abba_log_ratios(values: Sequence[float]) -> list[float]:
    """log(B/A) of each whole ABBA quartet of ``values``, measured in the
    order A B B A A B B A ...; an incomplete last quartet is left out."""
    return [abba_log_ratio(*values[i : i + 4]) for i in range(0, len(values) - 3, 4)]


def sd_interval(values: Sequence[float], level: float = 0.90) -> tuple[float, float, float]:
    """The sample sd of ``values`` and its two-sided ``level`` interval
    (chi-square, which assumes them normal): how well a handful of
    repetitions pins a spread down."""
    df = len(values) - 1
    if df < 1:
        raise ValueError("sd_interval needs at least 2 values")
    sd = float(np.std(np.asarray(values, dtype=float), ddof=1))
    tail = (1 - level) / 2
    return sd, sd * math.sqrt(df / sps.chi2.ppf(1 - tail, df)), sd * math.sqrt(df / sps.chi2.ppf(tail, df))


def spread_pct(values: Sequence[float] | np.ndarray) -> float:
    """(max - min) / median of repeated estimates, in percent."""
    a = np.asarray(values, dtype=float)
    return float((a.max() - a.min()) / np.median(a) * 100)


# --- sign tests: fixed-sample and anytime-valid ------------------------------------
#
# A claim part asks on which side of a bound the median of the per-repetition
# values lies. The sign test counts the repetitions on one side: under "the
# median is on the other side (or at the bound)", each falls there with
# probability at most 1/2. With a count fixed in advance, its p-value is the
# binomial tail, and inverting it gives the order-statistic interval above.
# Adaptive precision looks at the data after every round and adds
# repetitions while a verdict is undecided: re-checking a fixed-sample
# p-value that way inflates the error with every look. There the evidence is
# Robbins' (1970) beta-binomial mixture of likelihood ratios, a nonnegative
# supermartingale under the null, so by Ville's inequality its running
# maximum exceeds 1/alpha with probability at most alpha however many looks
# are taken and whenever one stops (Howard & Ramdas, "Sequential estimation
# of quantiles with applications to A/B-testing and best-arm
# identification", Bernoulli 2022). Inverted, it gives a confidence sequence
# for the median: an interval valid at every number of repetitions at once.


def log_mixture(k: ArrayLike, n: ArrayLike) -> np.ndarray:
    """log of the one-sided beta-binomial mixture after k of n repetitions
    fell on the alternative's side: 2^n times the mean over theta, uniform on
    (1/2, 1], of theta^k (1 - theta)^(n - k)."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    with np.errstate(divide="ignore"):
        tail = np.log1p(-special.betainc(k + 1, n - k + 1, 0.5))
    return (n + 1) * math.log(2) + special.betaln(k + 1, n - k + 1) + tail


def confidence_sequence(values: ArrayLike, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The median's anytime-valid interval from values in the order measured:
    every bound the one-sided tests (each at (1 - confidence)/2) do not
    reject, over all repetitions so far. Unbounded on a side none rejects."""
    a = np.asarray(values, dtype=float)
    a = a[~np.isnan(a)]
    side_alpha = (1 - confidence) / 2
    low, high = -math.inf, math.inf
    n = np.arange(1, a.size + 1)
    for c in np.unique(a):
        # Just below c: the values at or above c are above it.
        if math.exp(-float(np.max(log_mixture(np.cumsum(a >= c), n)))) <= side_alpha:
            low = float(c)
    for c in np.unique(a)[::-1]:
        if math.exp(-float(np.max(log_mixture(np.cumsum(a <= c), n)))) <= side_alpha:
            high = float(c)
    return low, high


@functools.cache
def _anytime_ranks(n: int, confidence: float) -> tuple[int, int] | None:
    """The 0-based order statistics a confidence sequence ends at after n
    repetitions whose counts only grew at the end (its last look alone):
    for forecasting how many repetitions would decide a part."""
    side_alpha = (1 - confidence) / 2
    ks = np.arange(n + 1)
    strong = ks[np.exp(-log_mixture(ks, np.full(n + 1, n))) <= side_alpha]
    if strong.size == 0:
        return None
    k = int(strong.min())  # at least k values beyond a bound reject it
    return n - k, k - 1
