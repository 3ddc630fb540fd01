"""Each claim's two verdicts, one line each in the claims table:

- **this machine**: the run's own repetitions decide what holds on the
  launch it measured, over the run's time (iolab.claims.verdicts);
- **this machine kind**: the launches recorded so far (data/records/, each
  run once, grouped by its boot ids) and this run's decide what holds on
  machines of its kind (iolab.claims.kind_verdicts, the anytime-valid sign test
  over launches), with the launches still needed (iolab.planning.launches).

The method says once what each scope generalises to (``SCOPES_TEXT``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .. import claims
from ..claims import kind_verdicts as pooled
from ..claims import records
from ..claims.verdicts import Finding, Outcome, claim_verdict, interval_text
from ..estimation import occasion_spread as occasions
from ..planning import launches as planning
from .outputs import finding_rows

SCOPES_TEXT = (
    "Each claim gets two verdicts. The verdict about *this machine* is decided by this run's repetitions: "
    "it says what holds on the launch the run measured (this VM's CPU placement, its neighbours, its "
    "kernel), over the run's time, and its unit is the repetition. The verdict about *this machine kind* "
    "is decided by launches: each launch of a machine of this kind (a boot of the VM, another node) gives "
    "each part one value, the median of its repetitions, and a sign test over launches decides: "
    "anytime-valid, since launches accumulate and are looked at as they come, or exact when a study "
    "fixes its launches in advance. "
    "A launch can differ from another by more than its repetitions show (a VM lands on other CPUs, even "
    "another CPU model, and beside other neighbours at every boot), while runs of one launch differ by about "
    "what their repetitions predict; so further runs of one launch add little to the second verdict, and "
    "only new launches move it. A part needs at least six launches before the second verdict can be reached."
)


@dataclass(frozen=True)
class KindVerdict:
    """A claim's verdict about the machine kind, what it rests on, and what
    it still needs."""

    outcome: Outcome
    launches: int
    runs: int
    still: int | None  # launches still needed (80 % power), None: out of reach or unknown
    reason: str = ""

    def text(self) -> str:
        if self.outcome is Outcome.NOT_TESTABLE:
            return f"{self.outcome.value}"
        said = f"{self.outcome.value}, {self.launches} launch{'es' if self.launches != 1 else ''}"
        if self.outcome in (Outcome.REPRODUCED, Outcome.NOT_REPRODUCED, Outcome.INCOMPLETE):
            return said
        if self.still is None:
            return said + "; out of reach at the spread between launches"
        return said + f"; about {self.still} more needed"


def machine_of(syscall: pd.DataFrame, node: str) -> str:
    """This run's machine kind (iolab.claims.records.machine_kind)."""
    mine = syscall[syscall["node"] == node]
    first = mine.iloc[0]
    facts = {
        "kind": str(first["kind"]),
        "cpus": int(mine["cpus"].max()),
        "kernel": str(first["kernel"]),
        "mitigations": str(first["mitigations"]),
    }
    return records.machine_kind({node: facts})


def this_run(findings: Sequence[Finding], tables: Sequence[pd.DataFrame | None], node: str) -> pooled.RunFindings:
    """This run as one run among the recorded ones: its findings as a
    crate records them, its launch (the boot ids its sidecars recorded on
    ``node``) and its first start."""
    rows = finding_rows(findings)
    boots: set[str] = set()
    starts: list[str] = []
    for t in tables:
        if t is None or not len(t) or "node" not in t:
            continue
        mine = t[t["node"] == node]
        if "boot_id" in mine:
            boots |= {b for b in mine["boot_id"].astype(str) if b}
        if "started" in mine:
            starts += [s for s in mine["started"].astype(str) if s]
    identity = records.RunIdentity(
        "", min(starts) if starts else "", launch="+".join(sorted(boots)), findings=records.findings_digest(rows)
    )
    return pooled.RunFindings(identity.ident, identity.first_start, rows, identity.launch)


@dataclass(frozen=True)
class KindPool:
    """The parts pooled over this machine kind's launches."""

    machine: str
    parts: list[pooled.PooledPart]
    runs: int
    launches: int
    said: list[str]


def pool_kind(
    here: pooled.RunFindings,
    machine: str,
    record_dir: Path | None = records.DIRECTORY,
    say: Callable[[str], None] | None = None,
) -> KindPool:
    """This run and every record of its machine kind under ``record_dir``
    (None: this run alone), each run once."""
    said: list[str] = []
    kept = [here]
    idents = [
        records.RunIdentity("", here.measured, launch=here.launch, findings=records.findings_digest(here.findings))
    ]
    held = records.read_all(record_dir, claims.CLAIM_TESTS, say=said.append) if record_dir is not None else []
    for rec in held:
        if rec.machine != machine or any(rec.identity.same_run(i) for i in idents):
            continue
        idents.append(rec.identity)
        kept.append(
            pooled.RunFindings(rec.identity.ident, rec.identity.first_start, list(rec.findings), rec.identity.launch)
        )
    if say is not None:
        for line in said:
            say(line)
    launches = len({r.launch or f"run:{r.run}" for r in kept})
    return KindPool(machine, pooled.pool(kept, "accumulating"), len(kept), launches, said)


def kind_verdicts(pool: KindPool) -> dict[str, KindVerdict]:
    """Per claim: its verdict over the launches and the launches still needed."""
    estimate = occasions.load()
    out = {}
    for claim in claims.CLAIM_TESTS:
        parts = [p for p in pool.parts if p.claim == claim]
        if not parts:
            continue
        verdict = pooled.claim_verdict(claim, parts)
        counted = [p for p in parts if not p.context and p.values]
        plan = planning.plan_claim(claim, parts, lambda p: estimate.sigma(p.group) if p.group else None)
        out[claim] = KindVerdict(
            verdict.outcome,
            min((p.k for p in counted), default=0),
            max((p.runs for p in counted), default=0),
            plan.still,
            verdict.reason,
        )
    return out


def lead_part(parts: Sequence[Finding]) -> Finding | None:
    """The counted part that decides a claim's verdict: where a part refutes
    it, the part that refutes it most surely; else the part furthest from
    holding (the weakest link of an intersection-union test)."""
    counted = [f for f in parts if not f.context and f.rule is not None and f.estimate is not None]
    if not counted:
        return None
    failing = [f for f in counted if f.outcome is Outcome.NOT_REPRODUCED]
    if failing:
        return min(failing, key=lambda f: f.p_fails_adjusted if f.p_fails_adjusted is not None else f.p_fails())
    # Ties (a sign test's p is the same for every part beyond the bound in
    # every repetition) go to the part whose median lies nearest the bound.
    return max(counted, key=lambda f: (f.p_holds(), -_distance_to_bound(f)))


def _distance_to_bound(f: Finding) -> float:
    assert f.rule is not None and f.estimate is not None
    value, bound = f.estimate.value, f.rule.bound
    if value > 0 and bound > 0:
        return abs(math.log(value / bound))
    return abs(value - bound)


def _machine_text(parts: Sequence[Finding]) -> str:
    v = claim_verdict(parts[0].claim, parts, claims.SOURCE_CELLS.get(parts[0].claim, ()))
    if v.outcome is Outcome.NOT_TESTABLE:
        return v.outcome.value
    counted = v.parts - v.not_testable
    return f"{v.outcome.value} ({v.decided} of {counted} part{'s' if counted != 1 else ''} decided)"


def _source_figure(lead: Finding | None) -> str:
    """The source's figure for the part, or where it gave none, its words
    as the rule quotes them ('about the same'): a blank read as missing."""
    if lead is None:
        return ""
    if lead.quoted:
        return lead.quoted
    said = re.search(r"'([^']+)'", lead.rule.why) if lead.rule is not None else None
    return f"\u201c{said[1]}\u201d" if said else ""


def claims_table(findings: Sequence[Finding], kind: dict[str, KindVerdict], words: dict[str, str]) -> pd.DataFrame:
    """The claims table, one row per claim: the claim in a few words, the
    source's figure and ours for the part that decides it, and the two
    verdicts."""
    rows = []
    for claim in claims.CLAIM_TESTS:
        parts = [f for f in findings if f.claim == claim]
        if not parts:
            continue
        lead = lead_part(parts)
        k = kind.get(claim)
        ours = ""
        if lead is not None and lead.estimate is not None:
            name = lead.part.split(" [")[0]
            ours = f"{interval_text(lead.estimate)}: {name}"
        rows.append(
            {
                "claim": claim,
                "says": words.get(claim, ""),
                "source": _source_figure(lead),
                "ours": ours,
                "this machine": _machine_text(parts),
                "this machine kind": k.text() if k is not None else "",
            }
        )
    return pd.DataFrame(rows)


def launches_needed(kind: dict[str, KindVerdict]) -> tuple[int, int] | None:
    """The fewest and the most launches still needed, over the undecided
    claims with a finite count."""
    counts = [k.still for k in kind.values() if k.outcome is Outcome.UNDECIDED and k.still is not None]
    return (min(counts), max(counts)) if counts else None


def launches_judged(kind: dict[str, KindVerdict]) -> int:
    """The most launches any testable claim's verdict about the kind rests
    on (a run whose rules this checkout does not state adds none)."""
    return max((k.launches for k in kind.values() if k.outcome is not Outcome.NOT_TESTABLE), default=0)
