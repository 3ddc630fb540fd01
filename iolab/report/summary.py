"""The abstract, the limitations and the conclusion, written from what the
run decided (paper/generated/numbers.json). The abstract:

1. at most five findings, the first figure's answer first, each a number
   with its interval (or a count), whose intervals exclude the point they
   are compared with; a family of comparisons (every io_uring server
   against epoll) is counted with its intervals widened for the number of
   comparisons, and no configuration is singled out by its median;
2. the claims' verdicts about this machine, in counts, and the launches
   the verdicts about the machine kind still need.

The conclusion answers the study's two questions from the same numbers;
the limitations say what the machine and the design could not give. Every
sentence is assembled from numbers with their repetitions' values, so
nothing in it is typed by hand.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from ..claims import CLAIM_TESTS
from ..estimation.intervals import median_ci
from ..rooms.echo.summaries import GO_BASE
from . import checks

Numbers = Mapping[str, Any]
ALPHA = 0.05
# What each claim says, in a few words (iolab.claims.ClaimTest.short).
CLAIM_WORDS = {claim: t.short for claim, t in CLAIM_TESTS.items()}


def _interval(entry: Mapping[str, Any]) -> tuple[float, float] | None:
    ci = entry.get("ci95")
    if not isinstance(ci, list) or len(ci) != 2 or None in ci or not entry.get("ci_bounded", True):
        return None
    return float(ci[0]), float(ci[1])


def _excludes(entry: Mapping[str, Any], point: float) -> bool:
    iv = _interval(entry)
    return iv is not None and (iv[0] > point or iv[1] < point)


def _fmt(x: float) -> str:
    return f"{x:.2f}" if abs(x) < 10 else f"{x:,.0f}".replace(",", "\u2009")


def _with_interval(entry: Mapping[str, Any]) -> str:
    iv = _interval(entry)
    assert iv is not None
    return f"{_fmt(float(entry['value']))} (95 % interval {_fmt(iv[0])}\u2013{_fmt(iv[1])})"


def _family_ci(entry: Mapping[str, Any], family: int) -> tuple[float, float] | None:
    """The median's interval from the repetitions' values at the level
    adjusted for ``family`` comparisons (Bonferroni); None without values."""
    reps = [float(v) for v in entry.get("reps") or [] if v is not None]
    if len(reps) < 3:
        return None
    low, high = median_ci(reps, 1 - ALPHA / max(family, 1))
    return (low, high) if math.isfinite(low) and math.isfinite(high) else None


def reps_for_family(family: int) -> int:
    """The fewest repetitions whose median has a finite interval at the
    level adjusted for ``family`` comparisons."""
    n = 3
    while not math.isfinite(median_ci([float(i) for i in range(n)], 1 - ALPHA / max(family, 1))[0]):
        n += 1
    return n


def c_ring_ratios(numbers: Numbers) -> dict[int, dict[str, Mapping[str, Any]]]:
    """Each C io_uring server's CPU per request over epoll's, by connection
    count and preset (the Go servers have their own base)."""
    pattern = re.compile(r"^echo_ratio_(?P<preset>.+)_c(?P<c>\d+)_cpu$")
    out: dict[int, dict[str, Mapping[str, Any]]] = {}
    for k, e in numbers.items():
        if (m := pattern.match(k)) and isinstance(e, dict) and not m["preset"].startswith("go_"):
            out.setdefault(int(m["c"]), {})[m["preset"]] = e
    return out


def servers_out_of_reach(numbers: Numbers) -> str:
    """Why ``servers`` said nothing, when its comparisons ran but this run's
    repetitions cannot bound a median at the level their number demands."""
    rings = c_ring_ratios(numbers)
    if not rings:
        return ""
    family = max(len(v) for v in rings.values())
    reps = max(len(e.get("reps") or []) for v in rings.values() for e in v.values())
    if reps >= reps_for_family(family):
        return ""
    return (
        f"With {reps} repetitions, none of the {family} io_uring server configurations can be set against "
        f"epoll once the intervals are widened for the {family} comparisons (that takes at least "
        f"{reps_for_family(family)} repetitions); each cell's own interval is in the echo figures"
    )


def servers(numbers: Numbers, connections: int = 50) -> str:
    """Every io_uring server against its base at ``connections``, CPU per
    request: how many cost significantly more and how many less, with the
    intervals widened for the comparisons (none singled out)."""
    c_ring = c_ring_ratios(numbers).get(connections, {})
    if not c_ring:
        return ""
    adjusted = {p: _family_ci(e, len(c_ring)) for p, e in c_ring.items()}
    judged = {p: iv for p, iv in adjusted.items() if iv is not None}
    if not judged:
        return ""
    dearer = sorted((p for p, iv in judged.items() if iv[0] > 1), key=lambda p: -c_ring[p]["value"])
    cheaper = sorted(p for p, iv in judged.items() if iv[1] < 1)
    text = (
        f"At {connections} connections, of {len(judged)} io_uring server configurations compared with epoll "
        f"on server CPU per request (intervals widened for the {len(judged)} comparisons), "
        + (
            f"{len(cheaper)} cost significantly less ({', '.join(cheaper)})"
            if cheaper
            else "none costs significantly less"
        )
        + (
            f" and {len(dearer)} significantly more ("
            + ", ".join(f"{p} {_fmt(c_ring[p]['value'])}" for p in dearer)
            + ")"
            if dearer
            else " and none significantly more"
        )
        + "."
    )
    go = numbers.get(f"echo_ratio_go_uring_c{connections}_cpu")
    if isinstance(go, dict) and _excludes(go, 1.0):
        text += (
            f" The Go io_uring reactor uses {_with_interval(go)} of the CPU per request of Go's net server ({GO_BASE})."
        )
    return text


def cost_model(numbers: Numbers) -> str:
    """Model B's per-SQE cost against an epoll request, where its interval
    excludes 1; the crossover n* only with a bounded interval."""
    e = numbers.get("per_sqe_over_epoll")
    if not isinstance(e, dict) or not _excludes(e, 1.0):
        return ""
    side = "less" if float(e["value"]) < 1 else "more"
    text = (
        f"A receive and a send added to an io_uring batch cost {_with_interval(e)} of an epoll request's two "
        f"system calls: {side} than epoll"
    )
    nstar = numbers.get("nstar_B")
    if isinstance(nstar, dict) and _interval(nstar) is not None:
        text += f", so batching pays from about {_with_interval(nstar)} SQEs per io_uring_enter"
    return text + " (the linear-batch model)."


def zero_copy(numbers: Numbers) -> str:
    """SEND_ZC against a plain send, over the sizes whose intervals all sit
    on one side of 1."""
    sizes = sorted(
        (int(m[1]), e)
        for k, e in numbers.items()
        if (m := re.match(r"^zc_ratio_send_zc_(\d+)$", k)) and isinstance(e, dict)
    )
    if not sizes or not all(_excludes(e, 1.0) for _, e in sizes):
        return ""
    values = [float(e["value"]) for _, e in sizes]
    if not (all(v > 1 for v in values) or all(v < 1 for v in values)):
        return ""
    side = "above" if values[0] > 1 else "below"
    return (
        f"On loopback a zero-copy send costs {_fmt(min(values))}\u2013{_fmt(max(values))} times a plain send "
        f"from {sizes[0][0] // 1024} to {sizes[-1][0] // 1024} KiB, each interval wholly {side} 1."
    )


def claim_words(claim: str) -> str:
    return f"{claim} ({CLAIM_WORDS[claim]})"


# The abstract states at most this many findings.
MAX_FINDINGS = 5


def _finding_value(numbers: Numbers, claim: str) -> dict[str, Any] | None:
    """The counted, measured part of ``claim`` as the findings table
    recorded it (its first), or None."""
    entry = numbers.get("findings")
    rows = entry.get("value") if isinstance(entry, dict) else None
    for r in rows if isinstance(rows, list) else []:
        if isinstance(r, dict) and r.get("claim") == claim and not r.get("context") and r.get("per_rep"):
            return r
    return None


def headline_cell(numbers: Numbers) -> str:
    """io_uring's default ring against epoll, CPU per request, in the cell of
    our setup with the most connections and the smallest message, beside
    the cost model's prediction: the first figure's answer in words."""
    cells = sorted(
        ((int(m[1]), int(m[2]), k) for k in numbers if (m := re.fullmatch(r"headline_cpu_c(\d+)_b(\d+)", k))),
        key=lambda x: (-x[0], x[1]),
    )
    for c, b, key in cells:
        e = numbers[key]
        interval = _interval(e)
        if interval is None:
            continue
        low, high = interval
        side = (
            "more than epoll"
            if low > 1
            else "less than epoll"
            if high < 1
            else "its interval includes 1: neither is shown to cost less"
        )
        text = (
            f"At {c} connections and {b} B, io_uring's default ring costs {_with_interval(e)} times epoll's "
            f"server CPU per echoed request ({side})"
        )
        pred = numbers.get(f"{key}_predicted")
        if isinstance(pred, dict) and _interval(pred) is not None:
            text += f"; the cost model, at the batch size the server reached, predicts {_with_interval(pred)}"
        return text + "."
    return ""


def large_messages(numbers: Numbers) -> str:
    """C4's part: the OpenAnolis server's CPU per request over epoll's at
    large messages, where the source expected about the same."""
    r = _finding_value(numbers, "C4")
    estimate = r.get("estimate") if r else None
    if r is None or not isinstance(estimate, dict):
        return ""
    # The abstract gives every number its 95 % interval over repetitions,
    # not the verdict's interval (adjusted over the claim's parts).
    iv = _family_ci({"reps": r["per_rep"]}, 1)
    if iv is None:
        return ""
    # The cell the part measured, not the range the claim speaks of.
    cell = re.search(r"c = (\d+), (\d+) B", str(r.get("part", "")))
    where = (
        f"At {cell[1]} connections and {int(cell[2]) // 1024} KiB messages"
        if cell and int(cell[2]) % 1024 == 0
        else "With large messages"
    )
    return (
        f"{where}, the OpenAnolis-style io_uring server (poll first, then receive and "
        f"send in one enter) costs {_fmt(float(estimate['value']))} (95 % interval {_fmt(iv[0])}–{_fmt(iv[1])}) "
        "times epoll's server CPU per request, where the source expected about the same."
    )


def io_wq(numbers: Numbers) -> str:
    """U6's part: io-wq workers at the default ring's exit."""
    r = _finding_value(numbers, "U6")
    values = r.get("per_rep") if r else None
    if not values or any(v is None for v in values):
        return ""
    most = max(float(v) for v in values)
    if most > 0:
        return ""
    return (
        f"No io-wq worker started for the default ring in any of {len(values)} repetitions, where the source's "
        "author said the pool starts in any case."
    )


def model_fit(numbers: Numbers) -> str:
    """Which batch-time model the probes support, where the AIC decides."""
    model, gap = _text(numbers, "preferred_model"), numbers.get("aic_gap")
    if model != "B" or not isinstance(gap, dict) or not isinstance(gap.get("value"), int | float) or gap["value"] <= 0:
        return ""
    return (
        "An io_uring_enter's time grows linearly with its batch (the linear model fits it better than the "
        f"source's constant batch cost by a summed AIC gap of {gap['text']}), so batching saves only the per-enter "
        "part of a request's cost."
    )


def unflagged(numbers: Numbers) -> dict[str, Any]:
    """``numbers`` without those a failed check flags: the abstract prints
    no flag beside its numbers, so it states none that carries one."""
    flagged = checks.flags(numbers)
    return {k: e for k, e in numbers.items() if k not in flagged}


def findings(numbers: Numbers) -> list[str]:
    """The abstract's findings, most telling first, each a number with its
    interval (or a count), at most MAX_FINDINGS; a number one of the run's
    checks flags never reaches them (iolab.report.checks): each finding is
    written from the numbers no check flags, so a flagged number is left
    out (or a finding that needs it is not written) rather than stated
    without its flag."""
    numbers = unflagged(numbers)
    candidates = (
        headline_cell(numbers),
        cost_model(numbers),
        large_messages(numbers),
        model_fit(numbers),
        zero_copy(numbers),
        io_wq(numbers),
        servers(numbers, 500),
    )
    return [s for s in candidates if s][:MAX_FINDINGS]


def verdict_sentence(numbers: Numbers, outcomes: Mapping[str, str]) -> str:
    """The claims' verdicts about this machine, in counts, and what the
    verdicts about the machine kind still need."""
    if not outcomes:
        return ""
    tested = {c: o for c, o in outcomes.items() if o != "not testable here"}
    counts: dict[str, list[str]] = {}
    for c, o in tested.items():
        counts.setdefault(o, []).append(c)
    said = "; ".join(f"{o}: {', '.join(cs)}" for o, cs in counts.items())
    text = (
        f"Of the sources' {len(outcomes)} claims, {len(tested)} could be tested on this machine ({said}); "
        f"{len(outcomes) - len(tested)} cannot be tested here (the claims table says why)."
    )
    launches = numbers.get("kind_launches")
    fewest, most = numbers.get("kind_launches_needed_fewest"), numbers.get("kind_launches_needed")
    if isinstance(launches, dict):
        n = launches["value"]
        text += (
            f" The verdicts about this machine kind rest on {launches['text']} launch{'es' if n != 1 else ''} so far"
        )
        if isinstance(fewest, dict) and isinstance(most, dict):
            needs = (
                f"about {most['text']} more"
                if fewest["value"] == most["value"]
                else f"from about {fewest['text']} to about {most['text']} more, claim by claim"
            )
            text += f"; deciding them needs {needs}"
            out_of_reach = _text(numbers, "kind_out_of_reach")
            text += f", and {out_of_reach} are out of reach at the spread between launches." if out_of_reach else "."
        else:
            text += "; none can yet be planned."
    return text


def write(numbers: Numbers) -> dict[str, dict[str, Any]]:
    """The abstract's entries for numbers.json."""
    table = (
        numbers.get("claim_outcomes", {}).get("value", []) if isinstance(numbers.get("claim_outcomes"), dict) else []
    )
    outcomes = {r["claim"]: r["outcome"] for r in table}
    found = findings(numbers)
    sentences = {
        "abstract_findings": " ".join(found)
        or "No comparison in this run has an interval that excludes its comparison point.",
        "abstract_verdicts": verdict_sentence(numbers, outcomes),
        "conclusion": " ".join(conclusion(numbers, outcomes)),
        **checks.entries(numbers),
    }
    sentences["limitations"] = " ".join(limitations({**numbers, **_as_numbers(sentences)}, outcomes))
    return {
        k: {"value": v, "text": v, "unit": "", "notebook": None, "note": "written from the run's numbers"}
        for k, v in sentences.items()
        if v
    }


def _as_numbers(sentences: Mapping[str, str]) -> dict[str, dict[str, str]]:
    return {k: {"text": v} for k, v in sentences.items()}


def _text(numbers: Numbers, key: str) -> str:
    e = numbers.get(key)
    return str(e.get("text", "")) if isinstance(e, dict) else ""


def conclusion(numbers: Numbers, outcomes: Mapping[str, str]) -> list[str]:
    """The study's two questions, answered from the run: when io_uring beats
    epoll here, and what virtualization costs MPI collectives."""
    # Its numbers, like the abstract's, are those no check flags.
    clean = unflagged(numbers)
    echo_q = [s for s in (cost_model(clean), servers(clean, 50), servers(clean, 500)) if s]
    # Without the run's checks there would be something to say: the checks
    # held it back, which is not the same as finding nothing.
    held_back = not echo_q and any(s for s in (cost_model(numbers), servers(numbers, 50), servers(numbers, 500)))
    if echo_q:
        answer = " ".join(echo_q)
    elif reach := servers_out_of_reach(numbers):
        answer = f"{reach}; the claims' parts, in the sources' setup, are judged in the claims table."
    elif held_back:
        answer = (
            "This run's comparisons of io_uring servers with epoll are flagged by its own checks (the run's "
            "checks section says which and why), so none is stated here; the claims' parts, in the sources' "
            "setup, are judged in the claims table."
        )
    else:
        answer = (
            "In our setup, no comparison of an io_uring server with epoll has an interval that excludes 1; "
            "the claims' parts, in the sources' setup, are judged in the claims table."
        )
    first = (
        "When does io_uring beat epoll for a TCP echo server here? "
        + answer
        + " "
        + (
            "The io_uring networking features of kernels 6.9 to 6.15 (bundles, incremental buffers, batched "
            "waits) were not measured in this run."
            if not any(k.startswith("echo_ratio_bundle") for k in numbers)
            else ""
        )
    )
    m = {c: outcomes.get(c, "") for c in ("M1", "M2", "M3")}
    if all(o in ("", "not testable here") for o in m.values()):
        second = (
            "What does virtualization cost MPI collectives? Not answered here: it needs MPI between two "
            "bare-metal nodes and between two virtual machines; this run "
            + ("measured MPI within one node." if any(k.startswith("mpi_") for k in numbers) else "measured no MPI.")
        )
    else:
        second = (
            "What does virtualization cost MPI collectives? "
            + "; ".join(f"{claim_words(c)}: {o}" for c, o in m.items() if o)
            + "."
        )
    learned = what_was_learned(clean)
    return [first.strip(), second, *([learned] if learned else [])]


def what_was_learned(numbers: Numbers) -> str:
    """What this run measured that the sources did not have, or that
    contradicts how they modelled it, each from its numbers."""
    said = []
    model, gap = _text(numbers, "preferred_model"), numbers.get("aic_gap")
    if model == "B" and isinstance(gap, dict) and isinstance(gap.get("value"), (int, float)) and gap["value"] > 0:
        said.append(
            "an io_uring_enter's time grows with its batch (the linear-batch model B fits it better than the "
            f"source's constant t, by a summed AIC gap of {gap['text']}), so batching removes only the per-batch "
            "part a/n, not the per-SQE cost"
        )
    elif model == "A":
        said.append("the source's constant-t model fits an io_uring_enter's time better than the linear-batch model")
    ratio = numbers.get("t1_over_w")
    iv = _interval(ratio) if isinstance(ratio, dict) else None
    if iv is not None and isinstance(ratio, dict):
        said.append(
            f"t(1)/w is {ratio['text']} (95 % interval {_fmt(iv[0])}\u2013{_fmt(iv[1])}) against the source's "
            f"{_text(numbers, 'c1_t1_ns')}/{_text(numbers, 'c1_w_ns')} ns"
        )
    copied = numbers.get("zc_copied_pct_min")
    if isinstance(copied, dict) and isinstance(copied.get("value"), (int, float)):
        said.append(
            "over loopback the kernel copied every zero-copy send it was asked to report on"
            if copied["value"] >= 99.95
            else f"over loopback the kernel copied at least {copied['text']} % of the zero-copy sends at every size"
        )
    return ("What this run learned: " + "; ".join(said) + ".") if said else ""


def limitations(numbers: Numbers, outcomes: Mapping[str, str]) -> list[str]:
    """What the machine and the design could not give, each from the run."""
    out = []
    machine = _text(numbers, "our_machine")
    if machine:
        # The machine itself is described under the title; here only what
        # being one machine limits.
        out.append(
            "One machine, the one described under the title: its CPU model, vCPU placement and neighbours "
            "change between launches, which the between-occasion spread in the method section measures."
        )
    cell = numbers.get("echo_cell_seconds")
    if isinstance(cell, dict):
        longest = numbers.get("echo_cell_seconds_max")
        span = f"{cell['text']}–{longest['text']}" if isinstance(longest, dict) else cell["text"]
        out.append(
            f"Echo cells ran {span} s each, warm-up included, against the sources' 60 s: many "
            "short cells in a random order over each repetition, for intervals across repetitions, "
            "rather than a few long ones."
        )
    untested_ids = [c for c, o in outcomes.items() if o == "not testable here"]
    if untested_ids:
        out.append(f"Not tested here: {', '.join(untested_ids)}; the claims table gives each reason.")
    faithful = [_text(numbers, f"{c.lower()}_faithful") for c in outcomes]
    short = [t for t in faithful if "cannot be expected" in t]
    if short:
        out.append(
            f"For {len(short)} claims a faithful replication of the source's own table would rarely be "
            "reproduced from this run's repetitions at its spread (the appendix says how often): the spread "
            "between repetitions is wide against their margins, and more repetitions decide them."
        )
    regime = _text(numbers, "regime_sentence")
    if "the kernel reports mitigations on" in regime and "mitigations-off regime" in regime:
        out.append(
            "The mitigations-off claim C2 is tested on a node whose kernel reports mitigations on: its system "
            "calls cost what the source measured with them off, so the regime is read from s, not from the flag."
        )
    setup = _text(numbers, "claims_echo_setup")
    if "nothing pinned" in setup:
        out.append(
            "The echo claims' setup shares the node's CPUs between the load generator and the servers, as the "
            "sources did; where the load generator set the pace, a part is not testable"
            + (
                ", and the two load generators can give the comparison opposite signs (see the section on them)."
                if _text(numbers, "echo_clients_sentence")
                else "."
            )
        )
    occ = _text(numbers, "method_occasions")
    if occ:
        out.append(occ)
    caveats = _text(numbers, "check_limitations")
    if caveats:
        out.append("The run's own checks found: " + caveats)
    return out


def result_count(numbers: Numbers) -> int:
    """How many findings the abstract states (for tests)."""
    return len(findings(numbers))
