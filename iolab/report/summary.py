"""The abstract, the limitations and the conclusion, written from what the
run decided (paper/generated/numbers.json). The abstract:

1. the results whose intervals exclude the point they are compared with,
   each with its interval; a family of comparisons (every io_uring server
   against epoll) is counted with its intervals widened for the number of
   comparisons, and no configuration is singled out by its median;
2. one plain-language verdict per source, each claim named by what it says;
3. what could not be tested here, and why.

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

from ..analysis import evidence
from ..analysis.echostats import GO_BASE
from ..analysis.stats import median_ci
from . import checks

Numbers = Mapping[str, Any]
ALPHA = 0.05
# What each claim says, in a few words, for the abstract.
CLAIM_WORDS = {
    "C1": "t(1) against w and against s + w as the source measured them, and reads and writes take most of a "
    "server's CPU",
    "C2": "with mitigations off io_uring never beats epoll",
    "C3": "with mitigations on io_uring wins by about 10 % at 1000 connections",
    "C4": "with large messages io_uring and epoll cost about the same",
    "C5": "the model's four variables decide which server wins",
    "U1": "io_uring is at least a worthy competitor of epoll",
    "U2": "the Go reactor is slow with few connections and ahead with many",
    "U3": "SQPOLL mode is slower",
    "U4": "the ring options' effects",
    "U5": "the reactor's design choices",
    "U6": "io-wq's worker pool starts in any case",
    "M1": "a VM's InfiniBand latency and bandwidth",
    "M2": "the VM penalty on collectives",
    "M3": "a VM is sometimes slightly faster",
}
SOURCES = {
    "the OpenAnolis cost study": ("C1", "C2", "C3", "C4", "C5"),
    "the Habr io_uring series": ("U1", "U2", "U3", "U4", "U5", "U6"),
    "the HPC HUB virtual-cluster study": ("M1", "M2", "M3"),
}


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


def servers(numbers: Numbers, connections: int = 50) -> str:
    """Every io_uring server against its base at ``connections``, CPU per
    request: how many cost significantly more and how many less, with the
    intervals widened for the comparisons (none singled out)."""
    pattern = re.compile(rf"^echo_ratio_(?P<preset>.+)_c{connections}_cpu$")
    c_ring = {
        m["preset"]: e
        for k, e in numbers.items()
        if (m := pattern.match(k)) and isinstance(e, dict) and not m["preset"].startswith("go_")
    }
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


def open_loop(numbers: Numbers) -> str:
    """The lowest offered load's p99 latency, with its interval."""
    loads = sorted(
        (int(m[1]), e)
        for k, e in numbers.items()
        if (m := re.match(r"^open_loop_epoll_load(\d+)_p99_us$", k)) and isinstance(e, dict)
    )
    if not loads or _interval(loads[0][1]) is None:
        return ""
    load, e = loads[0]
    return f"Under open-loop load at {load} % of capacity, epoll's p99 latency is {_with_interval(e)} µs."


def claim_words(claim: str) -> str:
    return f"{claim} ({CLAIM_WORDS[claim]})"


def per_source(outcomes: Mapping[str, str]) -> list[str]:
    """One plain-language sentence per source: which of its claims were
    reproduced, refuted or left undecided here."""
    out = []
    for source, ids in SOURCES.items():
        mine = {c: outcomes[c] for c in ids if c in outcomes}
        tested = {c: o for c, o in mine.items() if o != "not testable here"}
        if not tested:
            out.append(f"{source[0].upper()}{source[1:]}: none of its claims could be tested here.")
            continue
        groups: dict[str, list[str]] = {}
        for c, o in tested.items():
            groups.setdefault(o, []).append(claim_words(c))
        parts = [f"{o}: {'; '.join(cs)}" for o, cs in groups.items()]
        out.append(f"{source[0].upper()}{source[1:]}, the claims tested here: " + "; ".join(parts) + ".")
    return out


def untested(outcomes: Mapping[str, str], reasons: Mapping[str, str]) -> str:
    by_reason: dict[str, list[str]] = {}
    for c, o in outcomes.items():
        if o == "not testable here":
            by_reason.setdefault(reasons.get(c, ""), []).append(c)
    if not by_reason:
        return "Every claim was tested here."
    return "Not tested here: " + "; ".join(f"{', '.join(cs)} ({reason})" for reason, cs in by_reason.items()) + "."


def write(numbers: Numbers) -> dict[str, dict[str, Any]]:
    """The abstract's entries for numbers.json."""
    table = (
        numbers.get("claim_outcomes", {}).get("value", []) if isinstance(numbers.get("claim_outcomes"), dict) else []
    )
    outcomes = {r["claim"]: r["outcome"] for r in table}
    reasons = {r["claim"]: r["reason"] for r in table}
    results = [s for s in (cost_model(numbers), servers(numbers), zero_copy(numbers), open_loop(numbers)) if s]
    sentences = {
        "abstract_results": " ".join(results)
        or "No comparison in this run has an interval that excludes its comparison point.",
        "abstract_sources": " ".join(per_source(outcomes)) if outcomes else "",
        "abstract_unanswered": untested(outcomes, reasons) if outcomes else "",
        "abstract_error": (
            f"Each claim's verdict is wrong at most {evidence.ALPHA_SIDE:.1%} of the time in either "
            "direction, per claim; the method section states what that rests on."
        ),
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
    echo_q = [s for s in (cost_model(numbers), servers(numbers, 50), servers(numbers, 500)) if s]
    first = (
        "When does io_uring beat epoll for a TCP echo server here? "
        + (" ".join(echo_q) if echo_q else "This run has no interval that decides it.")
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
            "bare-metal nodes and between two virtual machines; this run measured MPI within one node."
        )
    else:
        second = (
            "What does virtualization cost MPI collectives? "
            + "; ".join(f"{claim_words(c)}: {o}" for c, o in m.items() if o)
            + "."
        )
    learned = what_was_learned(numbers)
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
        out.append(
            f"One machine: {machine}. Its CPU model, vCPU placement and neighbours change between "
            "launches, which the between-occasion spread in the method section measures."
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
    """How many interval-backed results the abstract states (for tests)."""
    return sum(bool(s) for s in (cost_model(numbers), servers(numbers), zero_copy(numbers), open_loop(numbers)))
