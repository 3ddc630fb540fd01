"""Internal checks that speak: what a run's own numbers say of the
instruments and of the paper's directional sentences.

Each check reads the merged numbers (paper/generated/numbers.json, before
the abstract is written) and gives a sentence for the place the number is
used, generated from the quantity itself, never fixed prose about measured
behaviour; a check that fails also gives a line for Limitations and, for
each number it concerns, the words printed beside that number (``flags``,
``flagged``), so that no flagged number reaches a headline unsaid. A check
whose numbers the run lacks gives nothing, and the paper shows nothing.

    shaper        mpi: the fitted bandwidth of the tbf-shaped link over the
                  imposed rate (at least 0.9 to say the probe recovers it)
    tails         latency: open-loop p99 at the highest load against the
                  closed-loop p99 at capacity (does closed loop understate?)
    load_order    latency: p99 should not fall as the offered load rises
    low_load_tail latency: open-loop p99 at the lowest load should not
                  exceed the closed-loop p99 at full capacity
    achieved      latency: each open-loop cell delivered its offered rate
    mpi_methods   mpi: our method against OSU's, agreeing within 10 % in at
                  least half the cells
    client        echo: the load generator's busy share, under 90 % of a CPU
    w_order       cost model: w of send against w of recv, by their intervals
    zero_copy     send_zc: what zero copy adds where the kernel copied
    bimodal       any number: repetitions in two separate groups, the
                  median in the gap between them (a value none measured)

Each is named by its experiment's manifest (``checks``), checked at
import, except those that read any number (``RUN_CHECKS``).
"""

from __future__ import annotations

import itertools
import math
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..manifests import ManifestError, manifests
from .quantities import quantity_words

Numbers = Mapping[str, Any]

# A shaper whose rate the probe recovers: the fitted bandwidth within 10 %.
SHAPER_RECOVERED = 0.9
# "Agree": the two MPI methods within 10 % of each other, in half the cells.
METHODS_AGREE = 0.5
# A load generator busy this share of a CPU or more sets the pace itself.
CLIENT_BUSY_PCT = 90.0
# An open-loop cell that delivered less than this share of its offered rate
# ran at another load than its label: the loads are 5 points apart at the
# top (90, 95 %), and 2 % short of 95 % is 93.1 %, still nearer its label.
ACHIEVED_MIN = 0.98


@dataclass(frozen=True)
class Check:
    """One check's outcome: the sentence for where its number is used, and
    for a failed check the line Limitations lists and, for each number it
    concerns (a numbers.json key), the words printed beside that number."""

    name: str
    ok: bool
    sentence: str
    limitation: str = ""
    flags: Mapping[str, str] = field(default_factory=dict)


def _value(numbers: Numbers, key: str) -> float | None:
    e = numbers.get(key)
    v = e.get("value") if isinstance(e, dict) else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _ci(numbers: Numbers, key: str) -> tuple[float, float] | None:
    e = numbers.get(key)
    if not isinstance(e, dict):
        return None
    ci = e.get("ci95")
    if not isinstance(ci, list) or len(ci) != 2 or None in ci or not e.get("ci_bounded", True):
        return None
    return float(ci[0]), float(ci[1])


def _f(x: float, digits: int = 2) -> str:
    return f"{x:,.{digits}f}".replace(",", "\u2009")


def shaper(numbers: Numbers) -> Check | None:
    ratio, imposed = _value(numbers, "mpi_tbf_fitted_ratio"), _value(numbers, "mpi_tbf_rate_mbit")
    if ratio is None or imposed is None:
        return None
    if ratio >= SHAPER_RECOVERED and ratio <= 1 / SHAPER_RECOVERED:
        return Check("shaper", True, f"the probe recovers the imposed rate (fitted over imposed {_f(ratio, 3)}).")
    said = (
        f"the probe recovers only {_f(ratio, 3)} of the imposed rate, so the shaped link did not carry "
        f"the {_f(imposed, 0)} Mbit/s it was given as the fit reads it"
        if ratio < SHAPER_RECOVERED
        else f"the fitted bandwidth is {_f(ratio, 3)} times the imposed rate, beyond it"
    )
    return Check(
        "shaper",
        False,
        said + "; this run did not separate the shaper's bursts from the fit's size range.",
        f"The tbf-shaped link's fitted bandwidth was {_f(ratio, 3)} of the imposed rate: the shaped "
        "namespaces are not a calibrated slow link in this run.",
        _on(numbers, ("mpi_tbf_fitted_mbit", "mpi_tbf_fitted_ratio"), "The shaped link's fit " + said + "."),
    )


def _load_p99(numbers: Numbers, preset: str) -> list[tuple[int, float]]:
    return [(load, v) for load, v, _ in _load_p99_ci(numbers, preset)]


def _load_p99_ci(numbers: Numbers, preset: str) -> list[tuple[int, float, tuple[float, float] | None]]:
    out = []
    for k in numbers:
        m = re.fullmatch(rf"open_loop_{re.escape(preset)}_load(\d+)_p99_us", k)
        if m and (v := _value(numbers, k)) is not None:
            out.append((int(m[1]), v, _ci(numbers, k)))
    return sorted(out, key=lambda x: x[0])


# A p99 that falls with the load by this much, where no interval tells it apart, is taken as falling.
FALL = 0.2


def _fell(a: tuple[int, float, tuple[float, float] | None], b: tuple[int, float, tuple[float, float] | None]) -> bool:
    """The p99 at the higher load ``b`` lies below the lower load's ``a``:
    beyond both intervals where they exist, else by more than FALL."""
    if a[2] is not None and b[2] is not None:
        return b[2][1] < a[2][0]
    return b[1] < a[1] * (1 - FALL)


def tails(numbers: Numbers) -> Check | None:
    loads = _load_p99(numbers, "epoll")
    closed = _value(numbers, "open_loop_epoll_capacity_p99_us")
    if not loads or closed is None:
        return None
    load, open_p99 = loads[-1]
    if open_p99 >= closed:
        # An open-loop tail above the closed loop's says closed loop
        # understates it only if the open-loop tails are the server's: not
        # where the lowest load's tail already sits above capacity's.
        low = low_load_tail(numbers)
        if low is not None and not low.ok and any(k.startswith("open_loop_epoll_load") for k in low.flags):
            return Check(
                "tails",
                True,
                f"Here open loop at {load} % of capacity put epoll's p99 at {_f(open_p99, 0)} µs, above the "
                f"closed loop's {_f(closed, 0)} µs at capacity; but its tail at the lowest load was above that "
                "too, so this run's open-loop tails are not read as the server's, and it does not tell whether "
                "closed loop understates the tail.",
            )
        return Check(
            "tails",
            True,
            f"Here open loop at {load} % of capacity put epoll's p99 at {_f(open_p99, 0)} µs, above the "
            f"closed loop's {_f(closed, 0)} µs at capacity: the closed-loop figures understate this run's tail.",
        )
    return Check(
        "tails",
        False,
        f"Here open loop at {load} % of capacity put epoll's p99 at {_f(open_p99, 0)} µs, below the closed "
        f"loop's {_f(closed, 0)} µs at capacity: in this run closed loop did not understate the tail, and the "
        "open-loop schedule, not the server, may have set it (a load generator or vCPU-steal artefact).",
        f"Open-loop p99 at {load} % load ({_f(open_p99, 0)} µs) was below the closed-loop p99 at capacity "
        f"({_f(closed, 0)} µs), against coordinated omission's direction: this run's open-loop tails are "
        "not read as the server's.",
        _on(
            numbers,
            (f"open_loop_epoll_load{load}_p99_us",),
            f"Below the closed loop's {_f(closed, 0)} µs at capacity, against coordinated omission's direction: "
            "the load generator or the VM, not the server, may have set this tail.",
        ),
    )


def _median_falls(ranked: Sequence[tuple[int, float, tuple[float, float] | None]]) -> list[tuple[int, int]]:
    """The steps between neighbouring loads where the median p99 fell."""
    return [(a[0], b[0]) for a, b in itertools.pairwise(ranked) if b[1] < a[1]]


def load_order(numbers: Numbers) -> Check | None:
    ranked = _load_p99_ci(numbers, "epoll")
    if len(ranked) < 2:
        return None
    falls = [(a, b) for i, a in enumerate(ranked) for b in ranked[i + 1 :] if _fell(a, b)]
    shown = ", ".join(f"{p:,.0f} µs at {load} %".replace(",", "\u2009") for load, p, _ in ranked)
    if falls:
        said = (
            f"epoll's open-loop p99 fell as the load rose ({shown}), which a server's queue does not do: a "
            "load-generator or vCPU-steal artefact, not server latency."
        )
        return Check(
            "load_order",
            False,
            said,
            f"Open-loop p99 fell as the offered load rose ({shown}): the low-load tails measure the load "
            "generator or the VM, not the server.",
            _on(
                numbers,
                [f"open_loop_epoll_load{load}_p99_us" for load, _, _ in ranked],
                "Open-loop p99 fell as the offered load rose in this run: a load-generator or VM artefact, "
                "not the server's latency.",
            ),
        )
    (first, low, _), (last, high, _) = ranked[0], ranked[-1]
    steps = _median_falls(ranked)
    if not steps:
        return Check("load_order", True, f"epoll's open-loop p99 rose with the load ({shown}).")
    where = " and ".join(f"from {a} to {b} %" for a, b in steps)
    within = "within the repetitions' intervals" if len(steps) > 1 else "within the repetitions' interval"
    fell = f"it fell {where}, {'each fall ' if len(steps) > 1 else ''}{within}"
    if high > low:
        return Check(
            "load_order",
            True,
            f"epoll's open-loop p99 rose from {_f(low, 0)} µs at {first} % to {_f(high, 0)} µs at {last} %, "
            f"though not at every step: {fell} ({shown}).",
        )
    return Check(
        "load_order",
        True,
        f"epoll's open-loop p99 did not rise with the load: {_f(low, 0)} µs at {first} % and {_f(high, 0)} µs "
        f"at {last} %; {fell} ({shown}).",
    )


def low_load_tail(numbers: Numbers) -> Check | None:
    """Each server's open-loop p99 at its lowest offered load against its
    closed-loop p99 at full capacity: a server a tenth as busy queues less
    than a saturated one, so a higher tail there is the load generator's
    schedule or the VM's wake-ups (a vCPU woken from idle), not the server."""
    found = []
    for key in sorted(numbers):
        m = re.fullmatch(r"open_loop_(.+)_capacity_p99_us", key)
        closed = _value(numbers, key) if m else None
        ranked = _load_p99_ci(numbers, m[1]) if m else []
        if m and closed is not None and ranked:
            found.append((m[1], closed, ranked[0][0], ranked[0][1]))
    if not found:
        return None
    above = [(p, closed, load, v) for p, closed, load, v in found if v > closed]
    shown = "; ".join(
        f"{p} {_f(v, 0)} µs at {load} % against {_f(closed, 0)} µs at capacity" for p, closed, load, v in found
    )
    if not above:
        return Check(
            "low_load_tail",
            True,
            f"At the lowest offered load each server's open-loop p99 stayed below its closed-loop p99 at "
            f"capacity ({shown}).",
        )
    flags: dict[str, str] = {}
    for p, closed, load, v in above:
        words = (
            f"At {load} % of capacity {p}'s open-loop p99 ({_f(v, 0)} µs) was above its closed-loop p99 at full "
            f"capacity ({_f(closed, 0)} µs): a server this lightly loaded queues less than a saturated one, so "
            "this tail measures the load generator's schedule or the VM's wake-ups, not the server."
        )
        flags.update(_on(numbers, [k for k in numbers if k.startswith(f"open_loop_{p}_load{load}_p")], words))
    names = ", ".join(f"{p} ({_f(v, 0)} µs at {load} % against {_f(c, 0)} µs)" for p, c, load, v in above)
    return Check(
        "low_load_tail",
        False,
        f"At the lowest offered load the open-loop p99 was above the closed-loop p99 at full capacity for "
        f"{names}: that tail is not the server's ({shown}).",
        f"Open-loop p99 at the lowest load was above the saturated closed-loop p99 for {names}: those low-load "
        "tails measure the load generator or the VM, not the server.",
        flags,
    )


def achieved(numbers: Numbers) -> Check | None:
    """Each open-loop cell's achieved over offered requests/s (median over
    repetitions) at ACHIEVED_MIN or more: a cell that fell short ran at
    another load than its label, so its latency is not that load's."""
    cells = sorted(
        (m[1], int(m[2]), v)
        for k in numbers
        if (m := re.fullmatch(r"open_loop_(.+)_load(\d+)_achieved", k)) and (v := _value(numbers, k)) is not None
    )
    if not cells:
        return None
    short = [(p, load, v) for p, load, v in cells if v < ACHIEVED_MIN]
    lowest = min(v for _, _, v in cells)
    if not short:
        return Check(
            "achieved",
            True,
            f"Every open-loop cell delivered at least {_f(math.floor(lowest * 1e4) / 1e4, 4)} of its offered rate "
            "(median over "
            "repetitions).",
        )
    names = ", ".join(f"{p} at {load} % ({_f(v, 3)})" for p, load, v in short)
    flags: dict[str, str] = {}
    for p, load, v in short:
        flags.update(
            _on(
                numbers,
                [k for k in numbers if k.startswith(f"open_loop_{p}_load{load}_p")],
                f"The load generator delivered {_f(v, 3)} of the rate offered at {load} % of capacity: this "
                "latency is not that load's.",
            )
        )
    return Check(
        "achieved",
        False,
        f"The load generator delivered less than {_f(ACHIEVED_MIN)} of the offered rate for {names}: the "
        "latency there is not that of the load it is labelled with.",
        f"Open-loop cells that delivered less than {_f(ACHIEVED_MIN)} of their offered rate: {names}; their "
        "latencies are not those of their labelled loads.",
        flags,
    )


def mpi_methods(numbers: Numbers) -> Check | None:
    cells, within = _value(numbers, "mpi_osu_method_cells"), _value(numbers, "mpi_osu_method_within_10pct")
    lo, hi = _value(numbers, "mpi_osu_method_ratio_min"), _value(numbers, "mpi_osu_method_ratio_max")
    if cells is None or within is None or not cells:
        return None
    span = f" (ratios {_f(lo)} to {_f(hi)})" if lo is not None and hi is not None else ""
    said = f"our own method agrees with OSU's within 10 % in {within:.0f} of {cells:.0f} cells{span}"
    if within / cells >= METHODS_AGREE:
        return Check("mpi_methods", True, said + ".")
    return Check(
        "mpi_methods",
        False,
        said + ": the two methods disagree in most cells, so the MPI numbers depend on how they are timed.",
        f"Our MPI timing and OSU's agree within 10 % in only {within:.0f} of {cells:.0f} cells{span}.",
        _on(
            numbers,
            [k for k in numbers if re.fullmatch(r"mpi_.+_(latency_us|bandwidth_mb_s)", k)],
            f"Our MPI timing and OSU's agree within 10 % in only {within:.0f} of {cells:.0f} cells: this "
            "figure depends on how it is timed.",
        ),
    )


def client(numbers: Numbers) -> Check | None:
    busy = sorted(
        (int(m[1]), v)
        for k in numbers
        if (m := re.fullmatch(r"echo_client_busy_c(\d+)_pct", k)) and (v := _value(numbers, k)) is not None
    )
    if not busy:
        return None
    hot = [(c, v) for c, v in busy if v >= CLIENT_BUSY_PCT]
    shown = ", ".join(f"{v:.0f} % at c = {c}" for c, v in busy)
    if not hot:
        return Check("client", True, f"The load generator stayed below {CLIENT_BUSY_PCT:.0f} % of its CPU ({shown}).")
    return Check(
        "client",
        False,
        f"The load generator was busy {shown}: at {', '.join(f'c = {c}' for c, _ in hot)} it may have set the "
        "pace, and requests/s there measure the client as much as the servers (server CPU per request does not).",
        f"The load generator was {CLIENT_BUSY_PCT:.0f} % busy or more at "
        f"{', '.join(f'c = {c}' for c, _ in hot)}: requests/s there are read with that caveat.",
        {
            k: f"The load generator was {v:.0f} % busy at c = {c}: these requests/s may measure the client."
            for c, v in hot
            for k in numbers
            if re.fullmatch(rf"echo_.+_c{c}_rps", k)
        },
    )


def w_order(numbers: Numbers) -> Check | None:
    send, recv = _value(numbers, "w_send_ns"), _value(numbers, "w_recv_ns")
    if send is None or recv is None or recv <= 0:
        return None
    a, b = _ci(numbers, "w_send_ns"), _ci(numbers, "w_recv_ns")
    ratio = send / recv
    if a is not None and b is not None and a[0] > b[1]:
        word = "far above" if ratio >= 1.5 else "above"
    elif a is not None and b is not None and a[1] < b[0]:
        word = "far below" if ratio <= 1 / 1.5 else "below"
    else:
        word = "not told apart from"
    return Check("w_order", True, f"{word} (a ratio of {_f(ratio)})")


def zero_copy(numbers: Numbers) -> Check | None:
    ratio, copied = _value(numbers, "zc_ratio_send_zc_65536"), _value(numbers, "zc_copied_pct_min")
    if ratio is None or copied is None:
        return None
    if copied >= 99.0 and ratio > 1:
        said = (
            f"so here zero copy adds its own bookkeeping to a copy it cannot avoid ({_f(ratio)} times a plain "
            "send at 64 KiB)"
        )
    elif copied >= 99.0:
        said = f"yet at 64 KiB it still took {_f(ratio)} times a plain send's time, copy and all"
    else:
        said = f"and at 64 KiB it took {_f(ratio)} times a plain send's time, with some sends not copied"
    return Check("zero_copy", True, said)


# Two groups of repetitions, the median in the gap between them: the gap is
# at least GAP_OVER_SPREAD times the pooled standard deviation within the
# groups (under one normal or log-normal law, 6 repetitions show it in
# about 0.7 % of numbers, 8 in 0.1 %; simulated), at least twice the wider
# group's range (the median lies farther from every repetition than the
# groups' own widths) and GAP_OVER_MEDIAN of the median (a reader would
# notice it).
GAP_OVER_SPREAD = 6.0
GAP_OVER_MEDIAN = 0.05
MIN_REPS_FOR_GROUPS = 4


def two_groups(values: Sequence[float | None], median: float) -> tuple[list[float], list[float]] | None:
    """The two groups the repetitions' ``values`` fall into, split at their
    largest gap, when ``median`` lies inside that gap and the gap stands
    out (GAP_OVER_SPREAD, GAP_OVER_MEDIAN); None otherwise."""
    v = sorted(float(x) for x in values if x is not None and math.isfinite(x))
    if len(v) < MIN_REPS_FOR_GROUPS:
        return None
    gap, i = max((v[j + 1] - v[j], j) for j in range(len(v) - 1))
    low, high = v[: i + 1], v[i + 1 :]
    if len(low) < 2 or len(high) < 2 or not low[-1] < median < high[0]:
        return None
    within = sum((x - statistics.fmean(g)) ** 2 for g in (low, high) for x in g)
    sd = math.sqrt(within / (len(v) - 2))
    widest = max(low[-1] - low[0], high[-1] - high[0])
    if gap < GAP_OVER_SPREAD * sd or gap < 2 * widest or gap < GAP_OVER_MEDIAN * abs(median):
        return None
    return low, high


def _decimals(text: str) -> int:
    """How many decimals a number's text shows (its own precision)."""
    return len(text.rsplit(".", 1)[1]) if "." in text else 0


def bimodal(numbers: Numbers) -> Check | None:
    found: dict[str, str] = {}
    for key in sorted(numbers):
        e = numbers[key]
        value = _value(numbers, key)
        if value is None or not isinstance(e, dict) or not isinstance(e.get("reps"), list):
            continue
        groups = two_groups(e["reps"], value)
        if groups is None:
            continue
        digits = _decimals(str(e.get("text", "")))
        unit = f" {e['unit']}" if e.get("unit") and e["unit"] != "%" else str(e.get("unit") or "")
        shown = " and ".join(f"{_f(g[0], digits)}\u2013{_f(g[-1], digits)}{unit} ({len(g)})" for g in groups)
        found[key] = (
            f"Its {len(e['reps'])} repetitions fall in two groups, {shown}, and the median, "
            f"{e.get('text', _f(value, digits))}{unit}, lies between them: a value no repetition measured."
        )
    if not found:
        return Check("bimodal", True, "No number's repetitions fell in two groups with the median between them.")
    named = "; ".join(quantity_words(k) for k in found)
    return Check(
        "bimodal",
        False,
        f"{len(found)} numbers' repetitions fell in two groups with the median between them: {named}.",
        f"For {len(found)} numbers the repetitions fell in two separate groups and the median lies between "
        f"them, a value no repetition measured ({named}): the machine ran in two states across repetitions, "
        "and wherever the paper prints one of them, its groups are printed beside it.",
        found,
    )


# Checks named by an experiment's manifest, and the checks of any number.
CHECKS = (shaper, tails, load_order, low_load_tail, achieved, mpi_methods, client, w_order, zero_copy)
RUN_CHECKS = (bimodal,)


def check_manifests(checks: tuple[Callable[[Numbers], Check | None], ...], found: Mapping[str, Any]) -> None:
    """Each check is named by exactly one experiment's manifest (its
    ``checks``), and each name a manifest gives is a check here; a
    ManifestError says which are not, in one line."""
    named: dict[str, list[str]] = {}
    for experiment, manifest in found.items():
        for name in manifest.get("checks") or ():
            named.setdefault(name, []).append(experiment)
    have = [fn.__name__ for fn in checks]
    problems = [
        f"check {n} is named by no experiment's manifest (add it to one's checks)" for n in have if n not in named
    ]
    problems += [f"check {n} is named by {', '.join(e)}" for n, e in named.items() if len(e) > 1]
    problems += [
        f"config/experiments/{e[0]}.yaml names check {n}, which iolab.report.checks does not have"
        for n, e in named.items()
        if n not in have
    ]
    if problems:
        raise ManifestError("; ".join(problems))


check_manifests(CHECKS, manifests())


def run(numbers: Numbers) -> list[Check]:
    """Every check whose numbers the run has."""
    return [c for fn in (*CHECKS, *RUN_CHECKS) if (c := fn(numbers)) is not None]


def _on(numbers: Numbers, keys: Sequence[str], words: str) -> dict[str, str]:
    """``words`` for each of ``keys`` the run has."""
    return {k: words for k in keys if k in numbers}


def flags(numbers: Numbers) -> dict[str, str]:
    """Every number a failed check concerns (its numbers.json key), with the
    words printed beside it; a number two checks flag gets both."""
    out: dict[str, str] = {}
    for c in run(numbers):
        if not c.ok:
            for key, words in c.flags.items():
                out[key] = f"{out[key]} {words}" if key in out else words
    return out


def flagged(numbers: Numbers, key: str) -> str | None:
    """The words of any check that flags the number ``key`` (None: none
    does): what the abstract and conclusion ask before they state it."""
    return flags(numbers).get(key)


def entries(numbers: Numbers) -> dict[str, str]:
    """The checks' sentences (``check_<name>``) and the failed checks'
    Limitations lines (``check_limitations``), for numbers.json."""
    found = run(numbers)
    out = {f"check_{c.name}": c.sentence for c in found}
    failed = [c.limitation for c in found if not c.ok and c.limitation]
    if failed:
        out["check_limitations"] = " ".join(failed)
    return out
