"""The evidence a claim part's verdict rests on within one run, and its
error budget: the verdict about **this machine** (the launch the run
measured, over the run's time), whose unit is the repetition.

A part asks on which side of a bound the median of its per-repetition
values lies (the estimand: the median of per-repetition paired ratios or
costs, on this launch). Each way (a wrong "reproduced", a wrong "not
reproduced") a claim's verdict may err at most ``ALPHA_SIDE`` = 2.5 %,
spent in two pieces (``Budget``) fixed before any data are seen:

- **round0**: an exact sign test on the repetitions fixed in advance
  (round 0);
- **later**: where adaptive precision adds rounds after looking at the
  data, an anytime-valid sign test (Robbins' beta-binomial mixture, a
  test martingale: iolab.estimation.intervals) over every value so far, in the
  order measured. If the later rounds drift away from round 0 (a trend
  test on the round index), their evidence is withheld.

The two tests are combined by weighted Bonferroni, p = min(p0 T/round0,
pL T/later) with T = round0 + later, so a part decided at round 0 stays
decided whatever later rounds add (p0 never changes), and later rounds can
still decide what round 0 could not. A claim is reproduced only when every
part is (an intersection-union test: no adjustment needed); it is not
reproduced when a part is, after Holm's step-down adjustment over the
claim's counted parts. By the union bound each way's error is at most
round0 + later.

Nothing here speaks for another launch: the verdict about the machine
kind pools launches (iolab.claims.kind_verdicts), where the unit is the launch.

Everything here works on arrays: a part's values (..., n) with any leading
dimensions, so that the verdict code, the power simulation and the
error-rate simulation run the same functions.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import special
from scipy import stats as sps

from ..estimation.intervals import CONFIDENCE, confidence_sequence, log_mixture

ALPHA_SIDE = (1 - CONFIDENCE) / 2
# Later rounds are left out of a part's evidence when their values trend
# with the round index at this level (Kendall's tau, two-sided): a machine
# that drifts during the run would otherwise push a part over its bound.
TREND_LEVEL = 0.05

Side = Literal["above", "below"]


@dataclass(frozen=True)
class Budget:
    """How a claim's 2.5 % each way is spent: the round-0 sign test and the
    anytime-valid test over later rounds."""

    round0: float
    later: float

    @property
    def tests(self) -> float:
        """The level of the combined test (round 0 and later rounds)."""
        return self.round0 + self.later

    @property
    def side(self) -> float:
        return self.round0 + self.later

    def text(self) -> str:
        parts = [f"{self.round0 * 100:.1f} % for the exact sign test on the repetitions planned in advance"]
        if self.later:
            parts.append(f"{self.later * 100:.1f} % for the anytime-valid test over adaptive rounds")
        return ", ".join(parts)


# A run without adaptive precision spends everything on round 0; one with
# it keeps 0.5 % for the later rounds. Round 0's share is at least 1/64 (=
# 1.56 %), so that 6 repetitions can decide a one-part claim either way.
FIXED = Budget(round0=0.025, later=0.0)
ADAPTIVE = Budget(round0=0.020, later=0.005)
assert math.isclose(FIXED.side, ALPHA_SIDE) and math.isclose(ADAPTIVE.side, ALPHA_SIDE)


def budget(adaptive: bool) -> Budget:
    return ADAPTIVE if adaptive else FIXED


def sign_tail(k: np.ndarray | int, n: np.ndarray | int) -> np.ndarray:
    """P(Binomial(n, 1/2) >= k): the exact sign test's p-value for k of n
    values on the alternative's side (scipy's binomial complement, which
    sums the tail above k - 1)."""
    k, n = np.asarray(k, dtype=np.int64), np.asarray(n, dtype=np.int64)
    return np.where(k <= 0, 1.0, special.bdtrc(np.maximum(k - 1, 0), n, 0.5))


def _beyond(values: np.ndarray, bound: float, side: Side) -> np.ndarray:
    return values > bound if side == "above" else values < bound


def fixed_p(values: np.ndarray, bound: float, side: Side) -> np.ndarray:
    """The exact sign test against "the median is at or beyond ``bound`` on
    the far side", from values (..., n) (NaN: not measured, left out)."""
    v = np.asarray(values, dtype=float)
    n = np.sum(~np.isnan(v), axis=-1)
    return np.where(n > 0, sign_tail(np.sum(_beyond(v, bound, side), axis=-1), n), 1.0)


def anytime_p(values: np.ndarray, bound: float, side: Side) -> np.ndarray:
    """The anytime-valid sign test over values (..., n) in the order
    measured: 1 / the running maximum of the mixture martingale, valid
    however many looks were taken and whenever one stopped."""
    v = np.asarray(values, dtype=float)
    if v.shape[-1] == 0:
        return np.ones(v.shape[:-1])
    hits = np.cumsum(_beyond(v, bound, side), axis=-1)
    n = np.arange(1, v.shape[-1] + 1)
    logm = log_mixture(hits, np.broadcast_to(n, hits.shape))
    return np.minimum(1.0, np.exp(-np.max(logm, axis=-1)))


def trend_p(values: Sequence[float], rounds: Sequence[int]) -> float:
    """Kendall's tau between the round index and the value, two-sided:
    small when later rounds drift away from round 0; 1 with a single round."""
    r = np.asarray(rounds)
    if len(set(r.tolist())) < 2 or len(r) < 4:
        return 1.0
    res = sps.kendalltau(r, np.asarray(values, dtype=float))
    return 1.0 if math.isnan(res.pvalue) else float(res.pvalue)


def combine(p0: np.ndarray, p_later: np.ndarray, b: Budget) -> np.ndarray:
    """Weighted Bonferroni: a valid p-value at level ``b.tests`` from the
    round-0 test (weight round0) and the later rounds' (weight later)."""
    out = np.asarray(p0, dtype=float) * b.tests / b.round0
    if b.later > 0:
        out = np.minimum(out, np.asarray(p_later, dtype=float) * b.tests / b.later)
    return np.minimum(out, 1.0)


def one_sided(
    values: np.ndarray, n0: int, bound: float, side: Side, b: Budget, withhold_later: bool | np.ndarray = False
) -> np.ndarray:
    """The combined p-value that the median lies ``side`` of ``bound``:
    the first ``n0`` values are round 0's; all of them feed the anytime
    test unless withheld."""
    v = np.asarray(values, dtype=float)
    p0 = fixed_p(v[..., :n0], bound, side)
    if b.later <= 0 or v.shape[-1] <= n0:
        p_later = np.ones_like(p0)
    else:
        p_later = np.where(withhold_later, 1.0, anytime_p(v, bound, side))
    return combine(p0, p_later, b)


def p_holds(
    kind: str,
    bound: float,
    band: tuple[float, float],
    values: np.ndarray,
    n0: int,
    b: Budget,
    withhold: bool | np.ndarray = False,
) -> np.ndarray:
    """The combined p-value against the claim failing (small: reproduced)."""
    if kind == "above":
        return one_sided(values, n0, bound, "above", b, withhold)
    if kind == "below":
        return one_sided(values, n0, bound, "below", b, withhold)
    lo, hi = band
    # Inside the band: both one-sided tests must reject (intersection-union).
    return np.maximum(one_sided(values, n0, lo, "above", b, withhold), one_sided(values, n0, hi, "below", b, withhold))


def p_fails(
    kind: str,
    bound: float,
    band: tuple[float, float],
    values: np.ndarray,
    n0: int,
    b: Budget,
    withhold: bool | np.ndarray = False,
) -> np.ndarray:
    """The combined p-value against the claim holding (small: not
    reproduced, before the adjustment over the claim's parts): the
    opposite side's test, or, for a band, either side outside it."""
    if kind in ("above", "below"):
        return p_holds("below" if kind == "above" else "above", bound, band, values, n0, b, withhold)
    lo, hi = band
    # Outside the band, on either side: the truth cannot be on both.
    return np.minimum(
        p_holds("below", lo, band, values, n0, b, withhold),
        p_holds("above", hi, band, values, n0, b, withhold),
    )


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values over the last axis."""
    p = np.asarray(p, dtype=float)
    k = p.shape[-1]
    order = np.argsort(p, axis=-1)
    ranked = np.take_along_axis(p, order, axis=-1) * (k - np.arange(k))
    adjusted = np.minimum(np.maximum.accumulate(ranked, axis=-1), 1.0)
    out = np.empty_like(adjusted)
    np.put_along_axis(out, order, adjusted, axis=-1)
    return out


@functools.cache
def _rank_bound(n: int, level: float) -> int | None:
    """The fewest of n values beyond a bound that reject it at ``level``."""
    for k in range(1, n + 1):
        if float(sign_tail(k, n)) <= level:
            return k
    return None


def interval(values: Sequence[float], n0: int, b: Budget, withhold: bool = False) -> tuple[float, float]:
    """The verdict interval at the combined level: every bound neither
    combined one-sided test rejects. Unbounded on a side no test can
    reject. A rule judged on it agrees with ``p_holds``."""
    v = np.asarray([x for x in values if not math.isnan(x)], dtype=float)
    first = np.sort(v[:n0]) if n0 else np.array([])
    low, high = -math.inf, math.inf
    k = _rank_bound(first.size, b.round0) if first.size else None
    if k is not None:
        low, high = float(first[first.size - k]), float(first[k - 1])
    if b.later > 0 and v.size > n0 and not withhold:
        cs_low, cs_high = confidence_sequence(v, 1 - 2 * b.later)
        low, high = max(low, cs_low), min(high, cs_high)
    return low, high


def reps_to_reach(family: int, b: Budget) -> int:
    """The fewest round-0 repetitions at which a claim of ``family`` counted
    parts can be "not reproduced" (Holm's smallest threshold, 2^-n <=
    round0 / family); a "reproduced" needs 2^-n <= round0 alone."""
    n = 1
    while 0.5**n > b.round0 / max(family, 1):
        n += 1
    return n


def reachable(n0: int, family: int, b: Budget) -> tuple[bool, bool]:
    """(reproduced, not reproduced): which outcomes round 0's exact test can
    reach with ``n0`` repetitions in a claim of ``family`` counted parts."""
    return 0.5**n0 <= b.round0, n0 >= reps_to_reach(family, b)
