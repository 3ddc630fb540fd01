"""The source articles' claims (DESIGN.md, claims table), re-tested.

Each claim function turns tidy tables into findings (iolab.claims.verdicts):
one per part the source states, each with its quantity estimated within
every repetition and judged across repetitions; a part this node cannot
test is "not testable here", with the reason, and still counts as a part of
the claim. Ratios are paired: both sides come from the same repetition.
``evaluate`` runs them all; the claims notebook, the paper and the
adaptive-precision planner call it, so a verdict is computed in one place.

One module per source (``openanolis``, ``habr``, ``hpchub``), each rule
beside the source's words (translated; the originals are in shared/seeds/);
``rules`` holds what they share, and words every margin's reason from the
rule's own numbers. tests/test_claims.py checks each rule against the
source's own numbers, with and without noise.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ..estimation import occasion_spread as occasions
from ..estimation.intervals import across_reps
from ..rooms.cost_probes import cost_model as costmodel
from ..rooms.cost_probes.summaries import trace_not_run, trace_rates
from ..rooms.echo import summaries as echostats
from ..rooms.mpi import stats as mpistats
from . import evidence
from .design import RULES as DESIGN_RULES
from .design import u5, u6
from .findings import not_testable
from .habr import (
    REACTOR_MIN_CPUS,
    SOURCE_U1_BYTES,
    SOURCE_U1_CONNECTIONS,
    SOURCE_U2_BYTES,
    SOURCE_U2_CONNECTIONS,
    u1,
    u2,
    u3,
    u4,
)
from .habr import RULES as HABR_RULES
from .habr import SOURCE_CELLS as HABR_CELLS
from .habr import TESTS as HABR_TESTS
from .hpchub import M3_FASTER, m1, m1_perftest, m2, m3
from .hpchub import RULES as HPCHUB_RULES
from .hpchub import TESTS as HPCHUB_TESTS
from .model import RULES as MODEL_RULES
from .model import c5
from .openanolis import LARGE_W_BYTES, SOURCE_URING_SERVER, c1, c2, c3, c4, poll_first_inline, regime
from .openanolis import RULES as OPENANOLIS_RULES
from .openanolis import TESTS as OPENANOLIS_TESTS
from .rules import ClaimTest, cell_label
from .verdicts import Finding, Rule, settle

# The source cells each claim covers (for "source cells covered x of y").
SOURCE_CELLS: dict[str, list[str]] = {**HABR_CELLS, "C3": ["c=1000"]}
# What the paper's "How each claim is tested" says of each, in the claims table's order.
CLAIM_TESTS: dict[str, ClaimTest] = {**OPENANOLIS_TESTS, **HABR_TESTS, **HPCHUB_TESTS}
# Every rule each claim judges a part by, as this checkout states them: a run
# pooled with others (iolab.claims.kind_verdicts) is judged by these, never by a
# rule its crate or record carries.
RULES: dict[str, tuple[Rule, ...]] = {
    claim: {**OPENANOLIS_RULES, **MODEL_RULES, **HABR_RULES, **DESIGN_RULES, **HPCHUB_RULES}.get(claim, ())
    for claim in CLAIM_TESTS
}

__all__ = [
    "CLAIM_TESTS",
    "HABR_CLAIMS",
    "LARGE_W_BYTES",
    "M3_FASTER",
    "REACTOR_MIN_CPUS",
    "RULES",
    "SOURCE_CELLS",
    "SOURCE_U1_BYTES",
    "SOURCE_U1_CONNECTIONS",
    "SOURCE_U2_BYTES",
    "SOURCE_U2_CONNECTIONS",
    "SOURCE_URING_SERVER",
    "ClaimTest",
    "Rule",
    "c1",
    "c2",
    "c3",
    "c4",
    "c5",
    "cell_label",
    "evaluate",
    "m1",
    "m2",
    "m3",
    "regime",
    "rounds_of",
    "u1",
    "u2",
    "u3",
    "u4",
    "u5",
    "u6",
]


HABR_CLAIMS = ("U1", "U2", "U3", "U4", "U5", "U6")
# The part that stands, in a run that did not measure the sources' setup,
# for the parts measured under it.
STAND_IN = "echo servers under the sources' setup"


def _sources_setup_gate(findings: list[Finding], echo: pd.DataFrame) -> list[Finding]:
    """The Habr claims (U1-U5) were measured with rust_echo_bench (a blocking
    thread per connection) and nothing pinned. An echo part measured under
    another setup is context; a claim left with no counted echo part then
    reads not testable, naming the configs that measure the sources' setup."""
    setup = echostats.with_setup(echo)
    if set(setup["client"]) == {echostats.SOURCE_CLIENT} and set(setup["layout"]) == {echostats.SOURCE_LAYOUT}:
        return findings
    why = (
        "the sources' setup (a blocking thread per connection in the load generator, nothing pinned) was "
        "not measured; the default config and the smoke, part3 and paper overlays measure it"
    )
    out = []
    for claim in HABR_CLAIMS:
        mine = [f for f in findings if f.claim == claim]
        on_echo = [f for f in mine if "echo" in f.decides or (claim != "U5" and f.estimate is None)]
        for f in on_echo:
            # Context whatever its client-bound gate says, in every run.
            f.context, f.cell, f.gate, f.gate_note = True, "", None, False
        if on_echo:
            stand_in = not_testable(claim, STAND_IN, why)
            stand_in.stand_in = True
            out.append(stand_in)
        out += mine
    return out + [f for f in findings if f.claim not in HABR_CLAIMS]


def other_client_sign(f: Finding, other: pd.DataFrame) -> str:
    """Where an echo part's paired ratio lies on one side of 1 under the
    setup it was judged in and on the other side under ``other`` (our
    pinned event-loop client), each beyond its 95 % interval of the median:
    a clause saying so, for the part's note; "" otherwise. The client's model
    changes how requests batch at the server, and so can flip the answer."""
    pairs = f.decides.get("echo", [])
    if not f.metric or len(pairs) != 2 or f.estimate is None or f.context:
        return ""
    (num_p, c, b), (den_p, _, _) = pairs
    r = echostats.paired_ratios(other, str(num_p), str(den_p), f.metric)
    theirs = echostats.ratio_per_rep(r, int(str(c)), int(str(b))).dropna()
    if theirs.empty:
        return ""
    mine, alt = across_reps(f.per_rep), across_reps(theirs.to_numpy(float))
    if not (mine.bounded and alt.bounded):
        return ""
    if (mine.low > 1 and alt.high < 1) or (mine.high < 1 and alt.low > 1):
        client = "/".join(sorted(set(echostats.with_setup(other)["client"])))
        return (
            f"under our {client} client, pinned, the ratio is {alt.value:.2f} [{alt.low:.2f}, {alt.high:.2f}]: "
            "the other side of 1"
        )
    return ""


def rounds_of(tables: Mapping[str, pd.DataFrame | None], round0_reps: int = 0) -> dict[str, dict[int, int]]:
    """experiment -> repetition -> round (0: planned in advance), from each
    table's ``round`` column; a table from before it was recorded counts
    the repetitions after ``round0_reps`` as one later round."""
    out: dict[str, dict[int, int]] = {}
    for name, table in tables.items():
        if table is None or not len(table) or "rep" not in table:
            continue
        if "round" in table:
            pairs = table[["rep", "round"]].drop_duplicates()
            out[name] = {int(r): int(k) for r, k in zip(pairs["rep"], pairs["round"], strict=True)}
        elif round0_reps:
            out[name] = {int(r): 0 if int(r) <= round0_reps else 1 for r in table["rep"].unique()}
    return out


def evaluate(
    syscall: pd.DataFrame,
    sendrecv: pd.DataFrame,
    uring: pd.DataFrame,
    echo: pd.DataFrame | None = None,
    mpi: pd.DataFrame | None = None,
    node: str | None = None,
    ib: pd.DataFrame | None = None,
    trace: pd.DataFrame | None = None,
    anytime_after: int = 0,
    sigma: Mapping[str, occasions.Spread] | float | None = None,
) -> list[Finding]:
    """Every claim's findings for ``node`` (default: the first in name order),
    with their error control (iolab.claims.evidence). ``anytime_after``:
    adaptive precision is on, with a round 0 of this many repetitions (0:
    off; the error budget is chosen by this, before any data are seen).
    ``sigma``: the between-occasion spread per group (default: the shipped
    estimate, iolab.estimation.occasion_spread)."""
    out = _findings(syscall, sendrecv, uring, echo, mpi, node, ib, trace)
    spread = sigma if sigma is not None else occasions.load().groups
    tables = {"syscall": syscall, "echo": echo, "mpi": mpi, "ib": ib, "trace": trace}
    settle(out, evidence.budget(bool(anytime_after)), spread, rounds_of(tables, anytime_after))
    return out


def evaluate_tables(
    loaded: Mapping[str, pd.DataFrame], node: str | None = None, anytime_after: int = 0
) -> list[Finding]:
    """``evaluate`` over the tidy tables of a run by experiment name (the
    cost probes' three required, the rest where measured)."""
    return evaluate(
        loaded["syscall"],
        loaded["sendrecv"],
        loaded["uring_batch"],
        loaded.get("echo"),
        loaded.get("mpi"),
        node=node,
        ib=loaded.get("ib"),
        trace=loaded.get("trace"),
        anytime_after=anytime_after,
    )


def _openanolis(
    cost: pd.DataFrame,
    inputs: Mapping[int, costmodel.CostInputs],
    mitigations: str,
    why: str,
    echo: pd.DataFrame | None,
    trace: pd.DataFrame | None,
    node: str,
) -> list[Finding]:
    """C1-C5 on ``node``: the model's parts from the probes (``cost``, per
    repetition; ``inputs``, the model's inputs per repetition), the servers'
    throughput under the sources' setup where it ran (the OpenAnolis study
    does not say how it drove its servers), and what reads a server's own
    CPU (C1's probe premise, C5) under our pinned client, each labelled
    with the setup it was measured in."""
    echo_here = echostats.claims_view(echo, node)
    inline = poll_first_inline(trace, node)
    ours = echostats.our_view(echo, node)
    on_ours = [*c1(cost, mitigations, ours, trace, node), *c5(inputs, ours)]
    if ours is not None:
        for f in on_ours:
            if f.estimate is not None and "echo" in f.decides:
                f.part += f" [{echostats.setup_note(ours)}]"
    first = [f for f in on_ours if f.claim == "C1"]
    return [
        *first,
        *c2(cost, mitigations, why, echo_here, inline),
        *c3(cost, mitigations, echo_here, why, inline),
        *c4(echo_here),
        *[f for f in on_ours if f.claim == "C5"],
    ]


def _findings(
    syscall: pd.DataFrame,
    sendrecv: pd.DataFrame,
    uring: pd.DataFrame,
    echo: pd.DataFrame | None,
    mpi: pd.DataFrame | None,
    node: str | None,
    ib: pd.DataFrame | None,
    trace: pd.DataFrame | None,
) -> list[Finding]:
    node = node or str(sorted(syscall["node"].unique())[0])
    flag = str(syscall.loc[syscall["node"] == node, "mitigations"].iloc[0])
    inputs = costmodel.per_rep_inputs(syscall, sendrecv, uring, node=node)
    cost = costmodel.per_rep(inputs)
    # The premises of C2 and C3 are about the measured cost of a syscall, not the flag.
    mitigations, why = regime(cost, flag)
    out = _openanolis(cost, inputs, mitigations, why, echo, trace, node)
    # The sources drove their servers with rust_echo_bench, unpinned: that
    # setup where it ran; ours, to check each part's sign under our client.
    echo_here, ours = echostats.claims_view(echo, node), echostats.our_view(echo, node)
    measured_echo: list[Finding] = []
    for claim, fn in (("U1", u1), ("U2", u2), ("U3", u3), ("U4", u4)):
        measured_echo += (
            fn(echo_here)
            if echo_here is not None
            else [not_testable(claim, "echo servers", "the echo experiment did not run on this node")]
        )
    rates = trace_rates(trace, node, "echo_default", "queue_async_work") if trace is not None else None
    measured_echo += u5(echo_here, rates, trace_not_run(trace, node))
    measured_echo += u6(echo_here) if echo_here is not None else u6(None)
    if echo_here is not None:
        measured_echo = _sources_setup_gate(measured_echo, echo_here)
        note = echostats.setup_note(echo_here)
        for f in [*out, *measured_echo]:
            if f.estimate is not None and "echo" in f.decides and not f.part.endswith("]"):
                f.part += f" [{note}]"
        if ours is not None:
            for f in [*out, *measured_echo]:
                f.note = "; ".join(x for x in (f.note, other_client_sign(f, ours)) if x)
    out += measured_echo
    if mpi is not None and len(mpi):
        per_rep, mean3 = mpistats.seed_view(mpi)
        out += [*m1(per_rep, mean3, ib), *m2(per_rep, mean3), *m3(per_rep)]
    else:
        from_perftest = m1_perftest(ib) if ib is not None and len(ib) else None
        out += from_perftest or [not_testable("M1", "MPI", "the MPI experiment did not run")]
        out += [
            not_testable("M2", "MPI", "the MPI experiment did not run"),
            not_testable("M3", "MPI", "the MPI experiment did not run"),
        ]
    return out
