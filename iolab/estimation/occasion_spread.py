"""The occasion as a unit of variation (Kalibera & Jones, "Rigorous
benchmarking in reasonable time", ISMM 2013).

Repetitions within one run vary; runs on different occasions (another
hour, another launch of the virtual machine) vary more. An interval built
from one run's repetitions describes that run's occasion only: on these
machines two independent default runs put 87 % of the second's values
inside the first's 95 % prediction intervals, with the misses leaning
slow. So the between-occasion spread is estimated from archived runs of
distinct identity and folded into every prediction interval (with its own
uncertainty: runs - 1 degrees of freedom) and, at its upper confidence
bound, into a single run's drift allowance (iolab.claims.verdicts). A
verdict pooled over runs uses none of it (iolab.claims.kind_verdicts).

Quantities are grouped by what they are, as declared where each is
recorded (``KINDS``: a paired ratio, an absolute time, a rate, a count),
within a notebook or a claim family, never by their unit: a paired ratio
moves between occasions far less than the costs it divides.

The model, per quantity group, on the log scale (every quantity a positive
cost, rate, count or ratio): a repetition's value of quantity q in run r is
log y = mu_q + a_qr + e, with a_qr ~ N(0, sigma_occasion^2) the run's
(occasion's) effect and e ~ N(0, sigma_within^2) the repetition's. The two
variances are estimated by restricted maximum likelihood (REML), which does
not bias them by the per-quantity means it estimates.

The estimate this checkout uses is ``data/occasions.json``, shipped with its
provenance (which runs, when, on which machine); a user re-estimates it
from their own archived runs with one command (iolab.archive.spread):

    ./repro occasions estimate CRATE.zip CRATE.zip [...]
"""

from __future__ import annotations

import functools
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import optimize
from scipy import stats as sps

from .. import paths

SHIPPED = paths.REPO / "data" / "occasions.json"
METHOD = (
    "REML one-way random-effects model on log values per quantity group (a notebook's or a claim family's "
    "quantities of one declared kind): log y = mu_quantity + a_run + e_repetition; the occasion variance "
    "carries runs - 1 degrees of freedom (a run's effect may be shared by all its quantities)"
)
# What a number is, declared where it is recorded (``Outputs.number(kind=)``,
# ``Finding.kind``): its occasion effect depends on it, not on its unit.
# - ratio: two like quantities measured in the same repetition (paired);
# - time: an absolute time or cost (ns per request, a latency);
# - rate: an absolute throughput (requests/s, MB/s);
# - count: events per unit of work (SQEs per enter, IPIs per request, a
#   batch size);
# - share: a proportion in [0, 1] (or %), and difference: a signed gap;
#   neither is a positive quantity on a log scale, so neither has an
#   occasion estimate.
KINDS = ("ratio", "time", "rate", "count", "share", "difference")
LOG_KINDS = ("ratio", "time", "rate", "count")
# Crates written before kinds were declared: a unit that names a time or a
# rate still tells; a unit-less number could be a ratio or a count, and is
# left out rather than guessed.
_LEGACY_UNITS = {
    "ns": "time",
    "\u00b5s": "time",
    "us": "time",
    "ms": "time",
    "s": "time",
    "MB/s": "rate",
    "Mbit/s": "rate",
}
# The one-sided level of the occasion spread's upper bound.
UPPER_LEVEL = 0.05


def kind_of(entry: Mapping[str, Any]) -> str | None:
    """A recorded number's kind: its declared ``kind``, else (a crate from
    before kinds) what its unit says for certain, else None (unknown)."""
    kind = entry.get("kind")
    if isinstance(kind, str) and kind in KINDS:
        return kind
    unit = entry.get("unit")
    return _LEGACY_UNITS.get(unit) if isinstance(unit, str) else None


def group_of(family: str, kind: str | None) -> str:
    """The quantity group of a number: its notebook (or claim family) and
    its declared kind; "unknown" where the kind is not known."""
    return f"{family}:{kind or 'unknown'}"


def claims_family(experiments: Iterable[str]) -> str:
    """The claim family of a part, from the experiments it decides (the
    cost probes share one family)."""
    names = sorted(set(experiments))
    kind = (
        "echo" if "echo" in names else "mpi" if {"mpi", "ib"} & set(names) else "trace" if "trace" in names else "cost"
    )
    return f"claims:{kind}"


def claims_group(experiments: Iterable[str], kind: str) -> str:
    """The group of a claim part: its family and its declared kind."""
    return group_of(claims_family(experiments), kind)


@dataclass(frozen=True)
class Spread:
    """One group's estimate: the between-occasion and within-run standard
    deviations of log values, and what they rest on. The occasion sd is
    uncertain: ``df`` (distinct runs - 1: a run's effect may be shared by
    every quantity it measured, so the quantities add no independent
    occasions) and its one-sided 95 % upper bound (chi-squared)."""

    sigma_occasion: float
    sigma_within: float
    quantities: int
    runs: int
    observations: int

    @property
    def df(self) -> int:
        return max(self.runs - 1, 0)

    @property
    def upper(self) -> float:
        """The occasion sd's one-sided upper confidence bound at 1 -
        UPPER_LEVEL: sigma x sqrt(df / chi2_UPPER_LEVEL(df)); infinite
        with a single run."""
        if self.df < 1:
            return math.inf
        return self.sigma_occasion * math.sqrt(self.df / float(sps.chi2.ppf(UPPER_LEVEL, self.df)))

    def to_json(self) -> dict[str, Any]:
        return {
            "sigma_occasion": round(self.sigma_occasion, 5),
            "sigma_within": round(self.sigma_within, 5),
            "quantities": self.quantities,
            "runs": self.runs,
            "observations": self.observations,
            "df": self.df,
            "upper95": round(self.upper, 5) if math.isfinite(self.upper) else None,
        }


def _neg2_reml(theta: np.ndarray, blocks: Sequence[Sequence[np.ndarray]]) -> float:
    """-2 x the REML log-likelihood (up to a constant) of the one-way model
    with a free mean per quantity; ``theta`` = (log sigma_w^2, log sigma_b^2);
    ``blocks``: per quantity, each run's log values."""
    sw2, sb2 = math.exp(theta[0]), math.exp(theta[1])
    total = 0.0
    for runs in blocks:
        n = np.array([len(r) for r in runs], dtype=float)
        means = np.array([r.mean() for r in runs])
        ss = sum(float(((r - r.mean()) ** 2).sum()) for r in runs)
        lam = sw2 + n * sb2
        w = n / lam
        mu = float((w * means).sum() / w.sum())
        total += float(
            ((n - 1) * math.log(sw2)).sum()
            + np.log(lam).sum()
            + ss / sw2
            + (n * (means - mu) ** 2 / lam).sum()
            + math.log(w.sum())
        )
    return total


def reml(blocks: Sequence[Sequence[Sequence[float] | np.ndarray]], runs: int | None = None) -> Spread:
    """REML estimates of (sigma_occasion, sigma_within) from ``blocks``: per
    quantity, per run, the repetitions' log values; ``runs``: how many
    distinct runs the blocks come from (default: the most any quantity
    has). Quantities seen in a single run, and runs of a single repetition,
    add nothing to the between-run part; at least two runs of some quantity
    are needed."""
    usable = [[np.asarray(r, dtype=float) for r in runs if len(r) >= 1] for runs in blocks]
    usable = [runs for runs in usable if len(runs) >= 2]
    if not usable:
        raise ValueError("the occasion effect needs a quantity measured in at least two runs")
    within = [float(((r - r.mean()) ** 2).sum()) / max(len(r) - 1, 1) for runs in usable for r in runs if len(r) > 1]
    start_w = max(float(np.mean(within)) if within else 1e-4, 1e-8)
    start = np.array([math.log(start_w), math.log(start_w / 4)])
    res = optimize.minimize(_neg2_reml, start, args=(usable,), method="L-BFGS-B", bounds=[(-30.0, 5.0), (-30.0, 5.0)])
    sw2, sb2 = math.exp(res.x[0]), math.exp(res.x[1])
    # The lower bound stands for zero: no detectable occasion effect.
    sigma_b = math.sqrt(sb2) if res.x[1] > -29.0 else 0.0
    return Spread(
        sigma_b,
        math.sqrt(sw2),
        len(usable),
        runs if runs is not None else max(len(r) for r in usable),
        sum(len(r) for q in usable for r in q),
    )


def _positive(values: Any) -> np.ndarray | None:
    a = np.asarray(values, dtype=float) if isinstance(values, (list, tuple)) else None
    if a is None or a.size == 0 or not np.all(np.isfinite(a)) or not np.all(a > 0):
        return None
    return np.log(a)


def observations(numbers: Mapping[str, Any]) -> dict[tuple[str, str], np.ndarray]:
    """(group, quantity) -> the log values of each repetition, from one
    run's numbers (paper/generated/numbers.json): every number that records
    its repetitions' values, and every claim part's, each in the group of
    its declared kind. A number of no known kind, or of a kind with no log
    scale (a share, a difference), adds nothing."""
    out: dict[tuple[str, str], np.ndarray] = {}
    for key, entry in numbers.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("notebook"), str):
            continue
        kind = kind_of(entry)
        logs = _positive(entry.get("reps"))
        if logs is not None and kind in LOG_KINDS:
            out[(group_of(entry["notebook"], kind), str(key))] = logs
    findings = numbers.get("findings", {}).get("value", []) if isinstance(numbers.get("findings"), dict) else []
    for f in findings if isinstance(findings, list) else []:
        if not isinstance(f, dict) or f.get("kind") not in LOG_KINDS:
            continue
        logs = _positive(f.get("per_rep"))
        group = f.get("group")
        # The group a run recorded, which names the kind (crates from before
        # kinds recorded "claims:echo" alone, and are left out above).
        if (
            logs is not None
            and isinstance(group, str)
            and group.startswith("claims:")
            and group.endswith(f":{f['kind']}")
        ):
            out[(group, f"{f.get('claim')}: {f.get('part')}")] = logs
    return out


def estimate(runs: Sequence[Mapping[str, Any]]) -> dict[str, Spread]:
    """Per group, REML over every quantity at least two of the runs share.
    Each group rests on its own runs: there is no pooled fallback, because
    paired ratios, absolute costs and counts move between occasions by
    different amounts (a group the runs do not cover has no estimate)."""
    per_run = [observations(r) for r in runs]
    quantities = sorted(set().union(*(set(o) for o in per_run)))
    blocks: dict[str, list[list[np.ndarray]]] = defaultdict(list)
    members: dict[str, set[int]] = defaultdict(set)
    for q in quantities:
        holders = [i for i, o in enumerate(per_run) if q in o]
        if len(holders) >= 2:
            blocks[q[0]].append([per_run[i][q] for i in holders])
            members[q[0]].update(holders)
    if not blocks:
        raise ValueError(
            "the occasion effect needs a quantity of a declared kind measured in at least two runs, with its "
            "repetitions' values (a crate from before kinds were declared: ./repro reanalyse it first)"
        )
    return {g: reml(b, len(members[g])) for g, b in sorted(blocks.items())}


@dataclass(frozen=True)
class Occasions:
    """The estimate in use: per group, and where it came from."""

    groups: dict[str, Spread]
    provenance: dict[str, Any]

    def spread(self, group: str) -> Spread | None:
        """The group's estimate; None where the runs did not cover it (its
        occasion spread is unknown, and said so)."""
        return self.groups.get(group)

    def sigma(self, group: str) -> float | None:
        """The group's between-occasion sd (log scale), None where unknown."""
        s = self.groups.get(group)
        return s.sigma_occasion if s else None

    def source(self) -> str:
        """One sentence: what the estimate rests on."""
        p = self.provenance
        if not self.groups:
            return "no between-occasion estimate is available: intervals describe this run's occasion only"
        runs = p.get("runs", [])
        return (
            f"the between-occasion spread was estimated by REML from {len(runs)} archived runs of distinct "
            f"identity ({p.get('estimated', 'undated')}; {p.get('machines', 'machines unrecorded')}), each "
            "group with runs \u2212 1 degrees of freedom"
        )


@functools.lru_cache(maxsize=4)
def load(path: Path = SHIPPED) -> Occasions:
    """The estimate in ``path`` (default: the shipped data/occasions.json)."""
    if not Path(path).exists():
        return Occasions({}, {})
    doc = json.loads(Path(path).read_text())
    groups = {
        g: Spread(
            float(v["sigma_occasion"]),
            float(v["sigma_within"]),
            int(v["quantities"]),
            int(v["runs"]),
            int(v["observations"]),
        )
        for g, v in doc.get("groups", {}).items()
    }
    return Occasions(groups, {k: v for k, v in doc.items() if k != "groups"})


@dataclass(frozen=True)
class RunMedian:
    """What a prediction interval needs of one run's repetitions: the median
    (of log values where all are positive), its bootstrap standard error and
    the number of repetitions."""

    center: float
    se: float
    n: int
    logs: bool

    @classmethod
    def of(cls, values: Sequence[float] | np.ndarray, seed: int = 0) -> RunMedian | None:
        """None below 3 finite values."""
        a = np.asarray(values, dtype=float)
        a = a[~np.isnan(a)]
        if a.size < 3 or not np.isfinite(a).all():
            return None
        logs = bool(np.all(a > 0))
        x = np.log(a) if logs else a
        if np.ptp(x) == 0:
            se = 0.0
        else:
            res = sps.bootstrap(
                (x,),
                np.median,
                confidence_level=0.95,
                n_resamples=2000,
                method="percentile",
                rng=np.random.default_rng(seed),
            )
            se = float(res.standard_error)
        return cls(float(np.median(x)), se, int(a.size), logs)

    def interval(
        self, occasion: Spread | None, confidence: float = 0.95, *, within_only: bool = False
    ) -> tuple[float, float]:
        """Where a re-run's median is expected at ``confidence`` (see
        ``prediction_interval``)."""
        if self.logs and occasion is None and not within_only:
            return math.nan, math.nan
        v_run = 2 * self.se**2
        with_occasion = self.logs and occasion is not None and not within_only
        v_occ = 2 * occasion.sigma_occasion**2 if with_occasion and occasion is not None else 0.0
        if v_occ > 0 and occasion is not None and occasion.df < 1:
            return 0.0, math.inf
        terms = [(v_run, self.n - 1)] + ([(v_occ, occasion.df)] if v_occ > 0 and occasion is not None else [])
        total = sum(v for v, _ in terms)
        nu = total**2 / sum(v**2 / d for v, d in terms) if total > 0 else float(self.n - 1)
        half = float(sps.t.ppf(0.5 + confidence / 2, nu)) * math.sqrt(total)
        if self.logs:
            return math.exp(self.center - half), math.exp(self.center + half)
        return self.center - half, self.center + half


def prediction_interval(
    values: Sequence[float] | np.ndarray,
    occasion: Spread | None,
    confidence: float = 0.95,
    seed: int = 0,
    *,
    within_only: bool = False,
) -> tuple[float, float]:
    """Where the median of a re-run of as many repetitions, on another
    occasion, is expected: on the log scale, this run's median plus or
    minus t_nu x sqrt(2 SE^2 + 2 sigma_occasion^2), with SE the bootstrap
    standard error of the median of the log values (one SE and one
    occasion effect for each run) and nu the Welch-Satterthwaite degrees of
    freedom of the two variance terms (n - 1 for SE, the occasion
    estimate's runs - 1), so that an occasion spread estimated from few
    runs widens the interval as much as its own uncertainty asks. Back on
    the original scale the interval is asymmetric. ``occasion`` None: the
    spread is unknown and no interval can claim to cover a re-run, (nan,
    nan), unless ``within_only`` (this run's own repetitions only, no
    occasion term, as iolab.estimation.intervals gives it). Values that are not
    all positive get the within-run interval on the original scale.
    Unbounded below 3 finite values."""
    m = RunMedian.of(values, seed)
    if m is None:
        return -math.inf, math.inf
    return m.interval(occasion, confidence, within_only=within_only)
