"""The numbers each notebook hands to the paper: one function per notebook,
so that notebooks only load tables, call iolab and plot, and every number's
derivation is tested code (tests/test_notebooks.py records every number the
reference data gives).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import claims
from ..claims import evidence, faithful, records, setups
from ..claims.verdicts import MAX_REPS, RULE_TEXT, Finding, Outcome, error_text
from ..estimation.intervals import ESTIMATOR, across_reps
from ..procedure import power
from ..rooms.context import software
from ..rooms.cost_probes import cost_model as costmodel
from ..rooms.cost_probes import summaries as models
from ..rooms.echo import summaries as echostats
from . import over_runs, scopes
from .claim_texts import (
    ESTIMAND,
    claim_verdict_objects,
    claim_verdicts,
    occasions_sentence,
    reach_text,
    replication,
    short_reason,
)
from .outputs import Outputs
from .summary import CLAIM_WORDS

COST_QUANTITIES = (
    "w_send",
    "w_recv",
    "w_mean",
    "t1_send",
    "t1_recv",
    "t1_mean",
    "a_send",
    "b_send",
    "a_recv",
    "b_recv",
    "epoll_request",
    "floor_request",
    "t1_over_w",
    "per_sqe_over_epoll",
    "w_rr_send",
    "w_rr_recv",
    "floor_request_single",
    "b_request",
    "b_over_floor",
    "t1_over_s_plus_w",
)
RATIOS = ("t1_over_w", "per_sqe_over_epoll", "b_over_floor", "t1_over_s_plus_w")


def cost_model(
    out: Outputs,
    *,
    node: str,
    syscall: pd.DataFrame,
    sendrecv: pd.DataFrame,
    overall: pd.DataFrame,
    summary: pd.DataFrame,
    per_rep_point: pd.DataFrame,
    inputs: costmodel.CostInputs,
    uring_batch_source: str | Path,
    kernel_view: Mapping[str, Any] | None,
    overlay: pd.DataFrame | None,
    w_pattern: str = "",
    enter: pd.DataFrame | None = None,
    cost_per_rep: pd.DataFrame | None = None,
) -> None:
    """The cost-model section: s, w, t(n), the fits, crossovers, spreads and
    the kernel-side view (``summary``: costmodel.summarize); ``w_pattern``:
    which series the model's w came from; ``enter``: costmodel.enter_overhead,
    the bound on how far our t(1) is from the source's io_submit_sqes;
    ``cost_per_rep``: costmodel.per_rep."""
    for variant in ("getppid", "enosys"):
        row = overall[(overall["node"] == node) & (overall["variant"] == variant)]
        if len(row):
            out.number(
                f"s_{variant}_ns",
                row["median_ns"].iloc[0],
                unit="ns",
                digits=1,
                estimate=row["estimate"].iloc[0],
                kind="time",
            )
    for key, fact in models.node_context(syscall, node).items():
        out.text(f"s_{key}", str(fact))
    mine = syscall[syscall["node"] == node]
    out.number("s_repeats", mine["rep"].nunique())
    out.number("s_batches", int((~mine["warmup"]).sum()))
    for q in COST_QUANTITIES:
        if q not in summary.index:
            continue
        digits = 2 if q in RATIOS else 0
        out.number(
            f"{q}_ns" if digits == 0 else q,
            summary.loc[q, "value"],
            unit="ns" if digits == 0 else "",
            digits=digits,
            estimate=models.as_estimate(summary, q),
            kind="ratio" if q in RATIOS else "time",
        )
    if w_pattern:
        out.text("model_w_pattern", w_pattern)
    if enter is not None and len(enter):
        for col, name in (("enter0_beyond_s", "enter0_beyond_s_ns"), ("nop_per_sqe", "nop_per_sqe_ns")):
            e = across_reps(enter[col].to_numpy(float))
            out.number(name, e.value, unit="ns", estimate=e, kind="time")
        if cost_per_rep is not None:
            t_bound(out, enter, cost_per_rep)
    for q in ("nstar_A", "nstar_B"):
        if math.isinf(summary.loc[q, "value"]):
            out.text(q, "never")
        else:
            out.number(q, summary.loc[q, "value"], digits=1, estimate=models.as_estimate(summary, q), kind="count")
    point = summary["value"].to_dict()
    out.text("preferred_model", costmodel.preferred_model(point))
    out.number("aic_gap", sum(point[f"aic_A_{op}"] - point[f"aic_B_{op}"] for op in costmodel.OPS), digits=1)
    for name, value in models.unix_w(sendrecv, node, summary.loc["s", "value"]).items():
        out.number(name, value, unit="ns")
    out.number("ack_cost_ns", models.ack_cost(sendrecv, node), unit="ns")
    out.text(
        "sendrecv_bytes", ", ".join(str(b) for b in sorted(sendrecv.loc[sendrecv["node"] == node, "bytes"].unique()))
    )
    for name, value in models.spreads(per_rep_point).items():
        out.number(f"spread_{name}_pct", value, unit="%", digits=1)
    out.text("method_spread", spread_sentence(syscall, node, models.spreads(per_rep_point).get("s")))
    out.text("unavailable_presets", models.unavailable_text(uring_batch_source))
    for name, value in (kernel_view or {}).items():
        if isinstance(value, str):
            out.text(name, value)
        elif name.endswith("_ns"):
            out.number(name, value, unit="ns")
        else:  # counts per enter or per request
            out.number(name, value, digits=2)
    if overlay is not None:
        ratios = costmodel.overlay_ratios(inputs, overlay)
        for name, value in ratios.items():
            out.number(name, value, digits=1)
        out.text(
            "overlay_direction",
            "more than"
            if min(ratios.values()) > 1
            else "less than"
            if max(ratios.values()) < 1
            else "not uniformly more or less than",
        )
    if "b_over_floor" in summary.index:
        e = models.as_estimate(summary, "b_over_floor")
        out.text(
            "b_floor_sentence",
            (
                "its whole interval lies below 1, so 2w bounds what a request costs through system calls, not "
                "through a batch. Why a request in a batch can cost less than its system calls' kernel work was not "
                "measured here; one candidate is that an SQE inside an enter that is already in the kernel skips "
                "what each system call pays beyond the null call s (its own descriptor lookup and argument copies)."
                if e.bounded and e.high < 1
                else "its whole interval lies above 1: a request in a batch costs more than that kernel work."
                if e.bounded and e.low > 1
                else "its interval includes 1, so this run does not tell whether a request in a batch "
                "costs less than that kernel work."
                if e.bounded
                else f"it has no interval from {e.n} repetitions, so this run does not tell whether a request in a "
                "batch costs less than that kernel work."
            ),
        )
    rate = (kernel_view or {}).get("trace_echo_poll_first_poll_arm_per_request")
    if isinstance(rate, (int, float)):
        out.text(
            "trace_poll_first_sentence",
            (
                "at most one request in a hundred waited for a poll of io_uring's own, so its receives and sends "
                "completed in the enter that submitted them, as the OpenAnolis server's did"
                if rate <= 0.01
                else "more than one request in a hundred waited for a poll of io_uring's own, so its receives "
                "and sends did not all complete in the enter that submitted them, unlike the OpenAnolis server's"
            ),
        )


def spread_sentence(syscall: pd.DataFrame, node: str, between_pct: float | None) -> str:
    """How much repetitions differ, against how much batches within one do,
    for s (getppid), as this run measured them."""
    rows = syscall[(syscall["node"] == node) & ~syscall["warmup"] & (syscall["variant"] == "getppid")]
    within = [
        float((g["ns_per_call"].quantile(0.75) - g["ns_per_call"].quantile(0.25)) / g["ns_per_call"].median())
        for _, g in rows.groupby("rep")
        if len(g) >= 4 and g["ns_per_call"].median() > 0
    ]
    if between_pct is None or not within:
        return "this run has too few repetitions or batches to say how much each level varies."
    return (
        f"in this run the repetitions' medians of s differ by {between_pct:.0f} % ((max - min)/median), "
        f"while the batches within one repetition spread by {100 * float(np.median(within)):.1f} % "
        "(interquartile range over median, the median over repetitions)."
    )


def interval_sentence(reps: Sequence[int], level: float = 0.95) -> str:
    """What the 95 % interval of the median over repetitions is, for the
    repetition counts this run has: which order statistics bound it, and
    with how many the interval is simply the minimum and maximum."""
    import scipy.stats as sps

    from ..estimation.intervals import _median_ci_ranks

    parts = []
    for n in sorted(set(reps)):
        ranks = _median_ci_ranks(n, level)
        if ranks is None:
            parts.append(f"with {n} repetitions there is none")
            continue
        lo, hi = ranks
        cover = 1 - 2 * float(sps.binom.cdf(lo, n, 0.5))
        where = (
            "their minimum and maximum"
            if lo == 0 and hi == n - 1
            else f"the {lo + 1}th smallest and the {lo + 1}th largest of them"
        )
        parts.append(f"with {n} repetitions it is {where}, which hold the median with probability {cover:.1%}")
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."


def t_bound(out: Outputs, enter: pd.DataFrame, cost_per_rep: pd.DataFrame) -> None:
    """How far our t(1) (a whole io_uring_enter minus s) can be from the
    source's (io_submit_sqes alone). A bare enter skips the ring's lock and
    the submission, so it costs at most what a real enter spends outside
    submission: t(1) less a bare enter's cost beyond s is an upper bound on
    the source's t. Per repetition, over w; and the sentence saying how far
    that bound is from t(1)/w, against the spread of t(1)/w itself."""
    both = enter.join(cost_per_rep[["t1_mean", "w_mean"]], how="inner")
    if not len(both):
        return
    upper = across_reps(((both["t1_mean"] - both["enter0_beyond_s"].clip(lower=0)) / both["w_mean"]).to_numpy(float))
    measured = across_reps((both["t1_mean"] / both["w_mean"]).to_numpy(float))
    out.number("t1_over_w_upper_bound", upper.value, digits=2, estimate=upper, kind="ratio")
    gap = measured.value - upper.value
    if measured.bounded:
        width = measured.high - measured.low
        compare = f"{'less' if gap < width else 'more'} than the width of t(1)/w's own 95 % interval ({width:.2f})"
    else:
        compare = f"with no interval for t(1)/w to compare it with ({measured.n} repetitions)"
    out.text(
        "t_bound_sentence",
        (
            f"A bare enter skips the ring's lock and the submission, so it costs at most what a real enter spends "
            f"outside submission; taking its cost beyond s off t(1) bounds the source's t/w from above at "
            f"{upper.value:.2f}, against {measured.value:.2f} for t(1)/w as measured: a difference of {gap:.2f}, "
            f"{compare}."
        ),
    )


def claims_numbers(
    out: Outputs, findings: Sequence[Finding], power_runs: int = power.RUNS, faithful_runs: int = faithful.RUNS
) -> None:
    """The claims table: every finding, and per claim its verdict line, the
    error its verdict is held to, the outcomes it can reach and its power;
    then what holds across claims."""
    out.findings("findings", list(findings))
    out.text("method_estimator", ESTIMATOR)
    out.text("method_estimand", ESTIMAND)
    out.text("method_rule", RULE_TEXT)
    budget = next((f.budget for f in findings if f.rule is not None and f.estimate is not None), evidence.FIXED)
    out.text("method_error", error_text(budget))
    out.text("method_occasions", occasions_sentence())
    out.text("method_interval", interval_sentence([len(f.per_rep) for f in findings if f.estimate is not None] or [6]))
    verdicts = claim_verdict_objects(findings)
    machinery = []
    for claim, text in claim_verdicts(findings, short=True).items():
        out.text(f"{claim.lower()}_verdict", text)
        counted = [f for f in findings if f.claim == claim and not f.context and f.estimate is not None]
        out.text(
            f"{claim.lower()}_error",
            (
                f"Holm over {len(counted)} tested parts"
                if len(counted) > 1
                else "one tested part"
                if counted
                else "nothing tested"
            )
            + f"; at most {evidence.ALPHA_SIDE:.1%} wrong each way, per claim",
        )
        out.text(f"{claim.lower()}_reach", reach_text(claim, findings))
        out.text(f"{claim.lower()}_runs", over_runs.runs_text(claim, findings))
        pw = power.claim_power([f for f in findings if f.claim == claim], runs=power_runs) if counted else None
        out.text(f"{claim.lower()}_power", pw.text() if pw else "")
        rep = replication(claim, findings, runs=faithful_runs)
        if rep is not None:
            out.text(f"{claim.lower()}_faithful", rep.text())
        if counted:
            machinery.append(
                {
                    "claim": claim,
                    "reach": reach_words(counted),
                    "power": f"{pw.reproduce:.0%} / {pw.refute:.0%}" if pw else "",
                    "faithful": rep.short() if rep is not None else "no source table",
                    "decide": decide_words(verdicts[claim].outcome, counted),
                }
            )
    tested = [c for c, v in verdicts.items() if v.outcome is not Outcome.NOT_TESTABLE]
    out.number("claims_tested_count", len(tested))
    out.text(
        "claims_family_error",
        (
            f"Across the {len(tested)} claims tested here, the chance that at least one of their verdicts is wrong "
            f"is at most {min(1.0, len(tested) * evidence.ALPHA_SIDE):.1%} each way (the union bound). The claims come "
            "from three sources and answer separate questions, so each verdict is controlled on its own and the "
            "bound across them is stated rather than spent: controlling it would cut each claim's power."
        ),
    )
    setups = {f.part[f.part.rindex(" [") + 2 : -1] for f in findings if f.part.endswith("]") and " [" in f.part}
    out.text("findings_setup", "; ".join(sorted(setups)) or "no echo part was measured")
    counts = {o: sum(f.outcome is o for f in findings if not f.context) for o in Outcome}
    for o, n in counts.items():
        out.number(f"findings_{o.name.lower()}", n)
    out.rows("claims_tested", claims_tested(findings))
    out.rows("claims_machinery", pd.DataFrame(machinery, columns=["claim", "reach", "power", "faithful", "decide"]))


def reach_words(parts: Sequence[Finding]) -> str:
    """The outcomes a claim's repetitions planned in advance can reach."""
    can = ["reproduced"] * all(f.reachable[0] for f in parts)
    can += ["not reproduced"] * any(f.reachable[1] for f in parts)
    return ", ".join([*can, "undecided"]) + f" (at {max(f.n0 for f in parts)} repetitions)"


def decide_words(outcome: Outcome, parts: Sequence[Finding]) -> str:
    """The repetitions that would be expected to decide an undecided claim:
    the most its undecided parts need."""
    if outcome is not Outcome.UNDECIDED:
        return "decided"
    needs = [f.needed for f in parts if f.outcome is Outcome.UNDECIDED]
    if not needs or any(n is None for n in needs):
        return f"more than {MAX_REPS}"
    return f"about {max(n for n in needs if n is not None)}"


def claim_scopes(
    out: Outputs,
    findings: Sequence[Finding],
    tables: Sequence[pd.DataFrame | None],
    syscall: pd.DataFrame,
    node: str,
    record_dir: Path | str = "auto",
) -> scopes.KindPool:
    """Each claim's two verdicts (iolab.report.scopes): about this machine,
    from this run, and about this machine kind, over this run and the
    records of earlier launches of its kind; the claims table, one line per
    claim; and what the verdicts about the kind rest on and still need.
    ``record_dir``: "auto" (data/records/), "" (none) or a folder."""
    machine = scopes.machine_of(syscall, node)
    folder = records.DIRECTORY if record_dir == "auto" else Path(record_dir) if record_dir else None
    pool = scopes.pool_kind(scopes.this_run(findings, tables, node), machine, folder)
    kind = scopes.kind_verdicts(pool)
    out.text("scopes_method", scopes.SCOPES_TEXT)
    out.text("kind_machine", machine)
    judged = scopes.launches_judged(kind)
    out.number("kind_launches", judged)
    out.text("kind_launches_said", f"{judged} launch{'es' if judged != 1 else ''}")
    out.number("kind_runs", pool.runs)
    for claim, k in kind.items():
        out.text(f"{claim.lower()}_kind", k.text())
    needed = scopes.launches_needed(kind)
    beyond = sorted(c for c, k in kind.items() if k.outcome is Outcome.UNDECIDED and k.still is None)
    if beyond:
        out.text("kind_out_of_reach", ", ".join(beyond))
    if needed is not None:
        out.number("kind_launches_needed_fewest", needed[0])
        out.number("kind_launches_needed", needed[1])
    if pool.said:
        out.text("kind_records_left_out", "; ".join(pool.said))
    out.rows("claims_table", scopes.claims_table(findings, kind, CLAIM_WORDS))
    return pool


def claims_tested(findings: Sequence[Finding] = ()) -> pd.DataFrame:
    """The paper's "How each claim is tested": per claim, the source's words
    (translated), what we measure, the margins and why (each claim's rules'
    own, worded from their numbers), the setup it needs, and what we could
    not match (iolab.claims.CLAIM_TESTS)."""
    margins = {
        claim: list(
            dict.fromkeys(f.rule.why for f in findings if f.claim == claim and f.rule is not None and not f.context)
        )
        for claim in claims.CLAIM_TESTS
    }
    return pd.DataFrame(
        [
            {
                "claim": claim,
                "source": t.source,
                "words": t.words,
                "measure": t.measure,
                "margin": "; ".join(margins[claim]) or "no part was tested here",
                "needs": t.needs,
                "unmatched": t.unmatched,
            }
            for claim, t in claims.CLAIM_TESTS.items()
        ]
    )


def claims_setups(
    out: Outputs, *, syscall: pd.DataFrame, echo: pd.DataFrame | None, mpi: pd.DataFrame | None, node: str
) -> None:
    """How each source measured beside how we did, the sentences that say
    which setup and which mitigation regime the claims used, and the
    sources' quoted echo tables (parts 1 and 3) beside our cells."""
    out.rows("setups_compared", setups.compared(syscall, echo, mpi, node))
    out.text("our_machine", setups.our_machine(syscall, node))
    tools = software(syscall[syscall["node"] == node])
    if tools:
        out.text("our_software", tools)
    here = echostats.claims_view(echo, node)
    out.text("claims_echo_setup", claims_echo_setup_sentence(here))
    if here is None:
        return  # the echo experiment ran on other nodes than the claims' node
    part1 = echostats.seed_table(here)
    measured = part1.dropna(subset=["io_uring (ours)", "epoll (ours)"])
    missing = part1[~part1.index.isin(measured.index)]
    out.rows("quoted_part1", measured.drop(columns="our setup"), note=str(part1["our setup"].iloc[0]))
    out.text(
        "quoted_part1_missing", ", ".join(f"c = {r.connections}, {r.bytes} B" for r in missing.itertuples()) or "none"
    )
    part3 = echostats.part3_table(here)
    measured3 = part3.dropna(subset=["measured"])
    out.rows("quoted_part3", measured3.drop(columns="our setup"), note=str(part3["our setup"].iloc[0]))
    missing3 = part3[part3["measured"].isna()]
    out.text(
        "quoted_part3_missing",
        "; ".join(f"{s}: {', '.join(g['cell'])}" for s, g in missing3.groupby("system (quoted)")) or "none",
    )
    out.text("quoted_setup", str(part3["our setup"].iloc[0]))


def claims_echo_setup_sentence(here: pd.DataFrame | None) -> str:
    """Which setup the echo claims were judged under, said from the cells."""
    if here is None:
        return "The echo experiment did not run on this node, so no echo claim was tested."
    setup = echostats.with_setup(here)
    if set(setup["client"]) == {echostats.SOURCE_CLIENT} and set(setup["layout"]) == {echostats.SOURCE_LAYOUT}:
        return (
            "The echo claims were judged under the sources' setup: a blocking thread per connection in "
            "the load generator, as rust_echo_bench, and nothing pinned."
        )
    return (
        f"The sources' setup (a blocking thread per connection, nothing pinned) was not measured in this "
        f"run: the echo cells ran with the {echostats.setup_note(here).split(';')[0]}, so the part 1 and "
        "part 3 claims are shown as context and read not testable here; the smoke, part3 and paper "
        "overlays measure the sources' setup."
    )


def regime_sentence(cost: pd.DataFrame, flag: str) -> str:
    """Which mitigation regime the claims used, and why (claims.regime)."""
    state, why = claims.regime(cost, flag)
    tested, untested = ("C2", "C3") if state == "off" else ("C3", "C2")
    return (
        f"The claims read this node's syscall path as in the mitigations-{state} regime ({why}), so "
        f"{tested} is tested here and {untested} is not."
    )


def headline(
    out: Outputs,
    *,
    findings: Sequence[Finding],
    syscall: pd.DataFrame,
    cost: pd.DataFrame,
    echo: pd.DataFrame | None,
    node: str,
    answer: pd.DataFrame | None = None,
) -> None:
    """The title, which states the run's first answer on its machine
    (``answer``: iolab.claims.headline's rows), and every claim's verdict
    in a word, for the abstract."""
    mine = syscall[syscall["node"] == node]
    first = mine.iloc[0]
    kind = str(first["kind"])
    cpus = int(mine["cpus"].max())
    cpu = str(first.get("cpu_model", "")) or "an unrecorded CPU"
    kernel = str(first["kernel"]).split("-")[0]
    machine = f"a {cpus}-vCPU {cpu} virtual machine" if kind == "vm" else f"a {cpus}-CPU {cpu} {kind} node"
    verdicts = claim_verdict_objects(findings)
    mpi_tested = any(v.outcome is not Outcome.NOT_TESTABLE for c, v in verdicts.items() if c.startswith("M"))
    out.text("paper_title", title(machine, kernel, answer, mpi_tested))
    # The title without a finding, and the number its finding is read from:
    # the merge step uses the first where a check flags the second.
    out.text("paper_title_plain", title(machine, kernel, None, mpi_tested))
    if (cell := title_cell(answer)) is not None:
        out.text("paper_title_cell", f"headline_cpu_c{cell[0]}_b{cell[1]}")
    out.rows(
        "claim_outcomes",
        pd.DataFrame(
            [{"claim": c, "outcome": v.outcome.value, "reason": short_reason(v.reason)} for c, v in verdicts.items()]
        ),
    )


def _title_row(answer: pd.DataFrame | None) -> pd.Series | None:
    """The first figure's CPU cell with the most connections and the
    smallest message among those with a bounded interval."""
    cpu = answer[answer["metric"] == "server_ns_per_request"] if answer is not None and len(answer) else None
    bounded = cpu[np.isfinite(cpu["low"]) & np.isfinite(cpu["high"])] if cpu is not None else None
    if bounded is None or bounded.empty:
        return None
    return bounded.sort_values(["connections", "bytes"], ascending=[False, True]).iloc[0]


def title_cell(answer: pd.DataFrame | None) -> tuple[int, int] | None:
    """(connections, bytes) of the cell the title states, or None."""
    row = _title_row(answer)
    return None if row is None else (int(row["connections"]), int(row["bytes"]))


def title(machine: str, kernel: str, answer: pd.DataFrame | None, mpi_tested: bool = False) -> str:
    """The paper's title: what this run found on its machine, from the first
    figure's cell with the most connections and the smallest message (CPU
    per request, io_uring's default ring over epoll), said from its interval."""
    # A CPU's trademark marks belong in the machine line, not a title.
    plain = re.sub(r"\s*\((?:R|TM|tm|r)\)", "", machine)
    where = f"On {plain} (Linux {kernel})"
    tail = ": the sources' claims re-measured" + (", with MPI across node kinds" if mpi_tested else "")
    pick = _title_row(answer)
    if pick is None:
        return f"io_uring against epoll {where[0].lower()}{where[1:]}{tail}"
    # One run on one launch: the title says so (its scope; the kind's
    # verdicts need launches, the claims table says how many).
    at = f"at {int(pick['connections'])} connections"
    if pick["low"] > 1:
        said = f"io_uring's default ring cost {pick['value']:.2f}\u00d7 epoll's CPU per echoed request {at} in one run"
    elif pick["high"] < 1:
        said = f"io_uring's default ring used {pick['value']:.2f}\u00d7 epoll's CPU per echoed request {at} in one run"
    else:
        said = f"one run showed no difference between io_uring's default ring and epoll in CPU per echoed request {at}"
    return f"{where}, {said}{tail}"


def nodes(
    out: Outputs,
    *,
    kinds: Mapping[str, str],
    costs: pd.DataFrame,
    pair: tuple[str, str] | None,
    mpi_ratios: pd.DataFrame | None,
    echo_ratios: pd.DataFrame | None,
) -> None:
    """The node-comparison section."""
    out.number("node_kinds", len(set(kinds.values())))
    out.text("node_list", ", ".join(f"{n} ({k})" for n, k in kinds.items()))
    for r in costs.itertuples():
        out.number(f"node_{r.node}_s_ns", r.s_ns, unit="ns")
        out.number(f"node_{r.node}_w_mean_ns", r.w_mean_ns, unit="ns")
    if pair is None:
        return
    out.text("node_pair", f"{pair[0]} ({kinds[pair[0]]}) and {pair[1]} ({kinds[pair[1]]})")
    if mpi_ratios is not None and len(mpi_ratios):
        for bench, g in mpi_ratios[~mpi_ratios["oversubscribed"]].groupby("bench"):
            out.number(f"nodes_mpi_{bench}_worst_ratio", g["ratio"].min(), digits=2)
    if echo_ratios is not None and len(echo_ratios):
        for metric, g in echo_ratios.groupby("metric"):
            out.number(f"nodes_echo_{metric}_median_ratio", g["ratio"].median(), digits=2)


def headline_numbers(out: Outputs, rows: pd.DataFrame) -> None:
    """The first figure's numbers (iolab.claims.headline): per cell, the
    io_uring/epoll ratio of each metric with its interval, and model B's
    predicted ratio of the CPU."""
    short = {"server_ns_per_request": "cpu", "rps": "rps"}
    for r in rows.itertuples():
        key = f"headline_{short[r.metric]}_c{r.connections}_b{r.bytes}"
        out.number(key, r.value, digits=2, estimate=r.estimate, kind="ratio")
        if r.predicted_estimate is not None:
            out.number(f"{key}_predicted", r.predicted, digits=2, estimate=r.predicted_estimate, kind="ratio")
