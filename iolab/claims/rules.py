"""What every source's claims share: the margins and how their reasons are
worded from the rules' own numbers, the echo cells and paired-ratio
findings, the gates on what a node can test, and what the paper says of
each claim's test (``ClaimTest``).

A margin's "why" is generated from the rule it explains (``band_text``,
``why``): every number it states is the rule's own, so a reason can never
say "15 % lower" where the band's edge needs 18.8 %.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..quoted import quoted_ratio
from ..registry import COST_MODEL_EXPERIMENTS
from ..rooms.echo import summaries as echostats
from .findings import finding, not_testable
from .gates import Busy, BusyGate
from .verdicts import Finding, Rule

# Whole experiments a cost-model finding depends on (the planner repeats them).
COST_EXPERIMENTS: dict[str, list[list[object]]] = {e: [] for e in COST_MODEL_EXPERIMENTS}


def num(x: float) -> str:
    """A rule's number to 3 significant figures, as the claims table prints it."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    decimals = max(2 - math.floor(math.log10(abs(x))), 0)
    return f"{x:.{decimals}f}"


def pct(x: float) -> str:
    """A relative difference as a signed percentage to 3 significant figures."""
    return f"{x * 100:+.3g} %"


def band_text(rule: Rule) -> str:
    """The values the rule accepts, in numbers: "1.05–1.42", "≥ 0.95"."""
    if rule.kind == "within":
        lo, hi = rule.band
        return f"{num(lo)}\u2013{num(hi)}"
    sign = "\u2265" if rule.kind == "above" else "\u2264"
    return f"{sign} {num(rule.bound)}"


def why(rule: Rule, reason: str) -> Rule:
    """``rule`` with its "why": the accepted values, then ``reason`` (which
    states no number of its own beyond the source's)."""
    return Rule(rule.kind, rule.bound, rule.margin, f"{band_text(rule)}: {reason}")


def within(bound: float, margin: float, reason: str) -> Rule:
    return why(Rule("within", bound, margin), reason)


def above(bound: float, reason: str) -> Rule:
    return why(Rule("above", bound), reason)


def below(bound: float, reason: str) -> Rule:
    return why(Rule("below", bound), reason)


def band_between(low: float, high: float, reason: str) -> Rule:
    """An equivalence band given by its edges (the Rule's centre and margin
    are derived): "about +10 %" read as 1.05 to 1.15."""
    centre = (low + high) / 2
    return within(centre, (high - low) / 2 / centre, reason)


def keeps_above_one(rule: Rule, what: str) -> str:
    """A band's reason, said from its lower edge: whether the whole band
    keeps ``what`` above 1."""
    lo = rule.band[0] if rule.kind == "within" else rule.bound
    return (
        f"its lower edge {num(lo)} keeps {what} above 1"
        if lo > 1
        else f"its lower edge {num(lo)} reaches 1: the band admits {what} at or below 1"
    )


# "Any difference in the stated direction counts", as the source's own part 3
# table counts a 0.1 % lead (c = 500, 1024 B: 139 313 against 139 171).
DIRECTION = "any difference in the stated direction counts"


@dataclass(frozen=True)
class ClaimTest:
    """What the paper says of a claim's test: the source's words
    (translated), what we measure, the setup it needs, and what we could not
    match. The margins come from the rules themselves (``Rule.why``)."""

    source: str
    words: str
    measure: str
    needs: str
    unmatched: str
    # The claim in at most about 12 words: the claims table's first column.
    short: str = ""


# --- the echo cells ---------------------------------------------------------------------


def cell_label(c: int, b: int) -> str:
    return f"c={c} {b} B"


def cells_of(
    echo: pd.DataFrame, connections: Sequence[int] | None = None, sizes: Sequence[int] | None = None
) -> list[tuple[int, int]]:
    ok = echo[echo["status"] == "ok"]
    cells = sorted({(int(c), int(b)) for c, b in zip(ok["connections"], ok["bytes"], strict=True)})
    return [(c, b) for c, b in cells if (connections is None or c in connections) and (sizes is None or b in sizes)]


def missing_presets(echo: pd.DataFrame, *presets: str) -> str:
    """The presets of ``presets`` with no measured cell, comma-separated."""
    ok = set(echo.loc[echo["status"] == "ok", "preset"])
    return ", ".join(p for p in presets if p not in ok)


def not_measured(echo: pd.DataFrame, missing: str, where: str = "") -> str:
    """Why a part is not testable: the presets of it ``missing`` from the
    cells the claims read (``echo``, their setup's), naming that setup, since
    another setup of the same run may have measured them for the figures."""
    setup = f" under the claims' setup ({echostats.setup_note(echo)})" if len(echo) else ""
    return f"not measured{setup}: {missing}" + (f" ({where})" if where else "")


def client_gate(echo: pd.DataFrame, presets: Sequence[str], cell: tuple[int, int]) -> BusyGate | None:
    """The figures the client-bound gate (iolab.claims.gates) reads in a
    cell: each preset's median server and client CPU there; None where the
    table has no such cell or did not record them."""
    c, b = cell
    ok = echo[
        (echo["status"] == "ok") & echo["preset"].isin(presets) & (echo["connections"] == c) & (echo["bytes"] == b)
    ]
    if ok.empty or "client_busy" not in ok or "server_busy" not in ok:
        return None
    cpus = float(ok["cpus"].max()) if "cpus" in ok and ok["cpus"].max() > 0 else math.nan
    if not math.isfinite(cpus):
        return None
    busy = tuple(
        Busy(str(preset), float(g["server_busy"].median()), float(g["client_busy"].median()))
        for preset, g in ok.groupby("preset")
    )
    if not all(math.isfinite(x.server) and math.isfinite(x.client) for x in busy):
        return None
    setup = "setup_s" in ok and bool(pd.to_numeric(ok["setup_s"], errors="coerce").notna().all())
    return BusyGate(cell_label(c, b), cpus, busy, setup=setup)


def gate_note(claim: str, part: str, gate: BusyGate, quoted: str = "", cell: str = "") -> Finding:
    """The not-testable part that says a gated cell's client set the pace;
    pooled over runs it stands only where the runs' gate trips."""
    f = not_testable(claim, part, gate.reason(), quoted, cell=cell)
    f.gate, f.gate_note = gate, True
    return f


class Ratios:
    """Paired ratios of an echo table, each pair of presets and metric
    computed once and split by cell (a claim reads the same pair in every
    cell): per cell, the per-repetition ratios (indexed by repetition) and
    the ratio of the two sides' means."""

    def __init__(self, echo: pd.DataFrame) -> None:
        self.echo = echo
        self._done: dict[tuple[str, str, str], dict[tuple[int, int], tuple[pd.Series, float]]] = {}

    def cell(self, num_preset: str, den_preset: str, metric: str, c: int, b: int) -> tuple[pd.Series, float]:
        key = (num_preset, den_preset, metric)
        if key not in self._done:
            r = echostats.paired_ratios(self.echo, num_preset, den_preset, metric)
            if r[["node", *echostats.SETUP]].drop_duplicates().shape[0] > 1:
                raise ValueError(
                    "ratios of several nodes or setups in one cell; select one node "
                    "and keep one setup with echostats.one_setup"
                )
            self._done[key] = {
                (int(cc), int(bb)): (
                    g.sort_values("rep").set_index("rep")["ratio"].astype(float),
                    float(g["numerator"].mean() / g["denominator"].mean()),
                )
                for (cc, bb), g in r.groupby(["connections", "bytes"], sort=False)
            }
        return self._done[key].get((c, b), (pd.Series(dtype=float), float("nan")))


def cell_finding(
    claim: str,
    echo: pd.DataFrame | Ratios,
    num_preset: str,
    den_preset: str,
    cell: tuple[int, int],
    rule: Rule,
    what: str,
    metric: str = "rps",
    context: bool = False,
    quoted: bool = True,
    source_cell: bool = True,
    gate: BusyGate | None = None,
) -> Finding:
    """One paired-ratio finding in one cell; "quoted" is the source's ratio
    in that cell, where its tables have the cell. ``echo``: the table, or
    its ``Ratios`` to reuse. ``context``: the part is context whatever the
    cell's CPU figures; else a ``gate`` (``client_gate``) that trips makes it
    context, says why in its reason, and travels with it so that runs
    pooled decide it once (iolab.claims.kind_verdicts)."""
    c, b = cell
    gated = gate is not None and not context
    why_gated = gate.reason() if gate is not None and gated else ""
    per_rep, means = (echo if isinstance(echo, Ratios) else Ratios(echo)).cell(num_preset, den_preset, metric, c, b)
    f = finding(
        claim,
        f"{cell_label(c, b)}, {what}",
        per_rep,
        rule,
        quoted_ratio(claim, c, b) if quoted else "",
        {"echo": [[num_preset, c, b], [den_preset, c, b]]},
        context=context or bool(why_gated),
        cell=cell_label(c, b) if source_cell and not context else "",
        metric=metric,
    )
    f.ratio_of_means = means
    if gated:
        f.gate, f.reason = gate, why_gated
    return f


def unmeasured_cells(
    claim: str, echo: pd.DataFrame, connections: Sequence[int], sizes: Sequence[int], what: str, context: bool = False
) -> list[Finding]:
    """A not-testable part for each source cell not measured here."""
    measured = set(cells_of(echo, connections, sizes))
    return [
        not_testable(
            claim,
            f"{cell_label(c, b)}, {what}",
            "this cell was not measured (the paper overlay measures every source cell)",
            quoted_ratio(claim, c, b),
            cell=cell_label(c, b),
            context=context,
        )
        for c in connections
        for b in sizes
        if (c, b) not in measured
    ]


def node_cpus(table: pd.DataFrame) -> int:
    """The CPUs of the node a table's rows come from (0: not recorded)."""
    return int(table["cpus"].max()) if "cpus" in table and len(table) else 0


def cpu_gate(echo: pd.DataFrame, needed: int, why_needed: str) -> str:
    """Why a node with fewer than ``needed`` CPUs cannot test a part ("" when it can)."""
    cpus = node_cpus(echo)
    if 0 < cpus < needed:
        return f"needs at least {needed} CPUs ({why_needed}; this node has {cpus})"
    return ""


def iowq_workers(cells: pd.DataFrame) -> int | None:
    """The most io-wq workers a cell's server reported at exit; None where
    the server did not report the count (not measured, never 0)."""
    if "iowq_workers" not in cells or not len(cells):
        return None
    counts = pd.to_numeric(cells["iowq_workers"], errors="coerce").dropna()
    return int(counts.max()) if len(counts) else None


def paired_by_rep(a: pd.Series, b: pd.Series) -> pd.Series:
    """a / b for the repetitions both have (Series indexed by repetition)."""
    both = pd.concat([a.rename("a"), b.rename("b")], axis=1, join="inner").dropna()
    return (both["a"] / both["b"]).astype(float) if len(both) else pd.Series(dtype=float)


def geometric_mean_per_rep(parts: Sequence[pd.Series]) -> pd.Series:
    """Per repetition every part has, the geometric mean over the parts."""
    frame = pd.concat(list(parts), axis=1, join="inner").dropna()
    return pd.Series(np.exp(np.log(frame).mean(axis=1)), index=frame.index) if len(frame) else pd.Series(dtype=float)
