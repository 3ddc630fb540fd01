"""The occasion as a unit of variation (Kalibera & Jones, "Rigorous
benchmarking in reasonable time", ISMM 2013).

Repetitions within one run vary; runs on different occasions (another
hour, another launch of the virtual machine) vary more. An interval built
from one run's repetitions describes that run's occasion only: on these
machines two independent default runs put 87 % of the second's values
inside the first's 95 % prediction intervals, with the misses leaning
slow. So the between-occasion spread is estimated from archived runs and
folded into every prediction interval and into the verdicts' drift
allowance (iolab.analysis.verdicts).

The model, per quantity group, on the log scale (every quantity a positive
cost, rate or ratio): a repetition's value of quantity q in run r is
log y = mu_q + a_qr + e, with a_qr ~ N(0, sigma_occasion^2) the run's
(occasion's) effect and e ~ N(0, sigma_within^2) the repetition's. The two
variances are estimated by restricted maximum likelihood (REML), which does
not bias them by the per-quantity means it estimates.

The estimate this checkout uses is ``data/occasions.json``, shipped with its
provenance (which runs, when, on which machine); a user re-estimates it
from their own archived runs with one command (iolab.archive.occasions):

    ./repro occasions CRATE.zip CRATE.zip [...]
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
# A number whose unit is one of these is a ratio of two like quantities
# measured in the same repetition (paired): its occasion effect is far
# smaller than a cost's, so the two are estimated apart.
RATIO_UNITS = ("", "×")
METHOD = (
    "REML one-way random-effects model on log values per quantity group: log y = mu_quantity + a_run + e_repetition"
)


def group_of(notebook: str, unit: str) -> str:
    """The quantity group of a number: its notebook and whether it is a
    paired ratio or an absolute quantity."""
    return f"{notebook}:{'ratio' if unit in RATIO_UNITS else 'absolute'}"


def claims_group(experiments: Iterable[str]) -> str:
    """The group of a claim part: the experiment its ratio comes from (the
    cost probes share one group)."""
    names = sorted(set(experiments))
    kind = (
        "echo" if "echo" in names else "mpi" if {"mpi", "ib"} & set(names) else "trace" if "trace" in names else "cost"
    )
    return f"claims:{kind}"


@dataclass(frozen=True)
class Spread:
    """One group's estimate: the between-occasion and within-run standard
    deviations of log values, and what they rest on."""

    sigma_occasion: float
    sigma_within: float
    quantities: int
    runs: int
    observations: int

    def to_json(self) -> dict[str, Any]:
        return {
            "sigma_occasion": round(self.sigma_occasion, 5),
            "sigma_within": round(self.sigma_within, 5),
            "quantities": self.quantities,
            "runs": self.runs,
            "observations": self.observations,
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


def reml(blocks: Sequence[Sequence[Sequence[float] | np.ndarray]]) -> Spread:
    """REML estimates of (sigma_occasion, sigma_within) from ``blocks``: per
    quantity, per run, the repetitions' log values. Quantities seen in a
    single run, and runs of a single repetition, add nothing to the
    between-run part; at least two runs of some quantity are needed."""
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
        max(len(runs) for runs in usable),
        sum(len(r) for runs in usable for r in runs),
    )


def _positive(values: Any) -> np.ndarray | None:
    a = np.asarray(values, dtype=float) if isinstance(values, (list, tuple)) else None
    if a is None or a.size == 0 or not np.all(np.isfinite(a)) or not np.all(a > 0):
        return None
    return np.log(a)


def observations(numbers: Mapping[str, Any]) -> dict[tuple[str, str], np.ndarray]:
    """(group, quantity) -> the log values of each repetition, from one
    run's numbers (paper/generated/numbers.json): every number that records
    its repetitions' values, and every claim part's."""
    out: dict[tuple[str, str], np.ndarray] = {}
    for key, entry in numbers.items():
        if not isinstance(entry, dict):
            continue
        logs = _positive(entry.get("reps"))
        if logs is not None and isinstance(entry.get("notebook"), str):
            out[(group_of(entry["notebook"], str(entry.get("unit", ""))), str(key))] = logs
    findings = numbers.get("findings", {}).get("value", []) if isinstance(numbers.get("findings"), dict) else []
    for f in findings if isinstance(findings, list) else []:
        if not isinstance(f, dict):
            continue
        logs = _positive(f.get("per_rep"))
        if logs is not None and isinstance(f.get("group"), str) and f["group"]:
            out[(f["group"], f"{f.get('claim')}: {f.get('part')}")] = logs
    return out


def estimate(runs: Sequence[Mapping[str, Any]]) -> dict[str, Spread]:
    """Per group, REML over every quantity the runs share, and ``all``:
    every group at once (the fallback for a group too small to estimate)."""
    per_run = [observations(r) for r in runs]
    quantities = sorted(set().union(*(set(o) for o in per_run)))
    blocks: dict[str, list[list[np.ndarray]]] = defaultdict(list)
    for q in quantities:
        runs_of_q = [o[q] for o in per_run if q in o]
        if len(runs_of_q) >= 2:
            blocks[q[0]].append(runs_of_q)
            blocks["all"].append(runs_of_q)
    if not blocks:
        raise ValueError(
            "the occasion effect needs a quantity measured in at least two runs, with its repetitions' values"
        )
    return {g: reml(b) for g, b in sorted(blocks.items())}


@dataclass(frozen=True)
class Occasions:
    """The estimate in use: per group, and where it came from."""

    groups: dict[str, Spread]
    provenance: dict[str, Any]

    def sigma(self, group: str) -> float:
        """The group's between-occasion sd (log scale); the pooled one for a
        group the runs did not cover; 0 with no estimate at all."""
        spread = self.groups.get(group) or self.groups.get("all")
        return spread.sigma_occasion if spread else 0.0

    def source(self) -> str:
        """One sentence: what the estimate rests on."""
        p = self.provenance
        if not self.groups:
            return "no between-occasion estimate is available: intervals describe this run's occasion only"
        runs = p.get("runs", [])
        return (
            f"the between-occasion spread was estimated by REML from {len(runs)} archived runs "
            f"({p.get('estimated', 'undated')}; {p.get('machines', 'machines unrecorded')})"
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


def prediction_interval(
    values: Sequence[float] | np.ndarray, sigma_occasion: float, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Where the median of a re-run of as many repetitions, on another
    occasion, is expected: on the log scale, this run's median plus or
    minus t x sqrt(2 SE^2 + 2 sigma_occasion^2), with SE the bootstrap
    standard error of the median of the log values (one SE and one
    occasion effect for each run); back on the original scale the interval
    is asymmetric. Values that are not all positive get the same on the
    original scale, without the occasion term. Unbounded below 3 finite
    values."""
    a = np.asarray(values, dtype=float)
    a = a[~np.isnan(a)]
    if a.size < 3 or not np.isfinite(a).all():
        return -math.inf, math.inf
    logs = bool(np.all(a > 0))
    x = np.log(a) if logs else a
    center = float(np.median(x))
    if np.ptp(x) == 0:
        se = 0.0
    else:
        res = sps.bootstrap(
            (x,),
            np.median,
            confidence_level=confidence,
            n_resamples=2000,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
        se = float(res.standard_error)
    occasion = sigma_occasion if logs else 0.0
    half = float(sps.t.ppf(0.5 + confidence / 2, a.size - 1)) * math.sqrt(2 * se**2 + 2 * occasion**2)
    if logs:
        return math.exp(center - half), math.exp(center + half)
    return center - half, center + half
