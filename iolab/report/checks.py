"""Internal checks that speak: what a run's own numbers say of the
instruments and of the paper's directional sentences.

Each check reads the merged numbers (paper/generated/numbers.json, before
the abstract is written) and gives a sentence for the place the number is
used, generated from the quantity itself, never fixed prose about measured
behaviour; a check that fails also gives a line for Limitations. A check
whose numbers the run lacks gives nothing, and the paper shows nothing.

    shaper        mpi: the fitted bandwidth of the tbf-shaped link over the
                  imposed rate (at least 0.9 to say the probe recovers it)
    tails         latency: open-loop p99 at the highest load against the
                  closed-loop p99 at capacity (does closed loop understate?)
    load_order    latency: p99 should not fall as the offered load rises
    mpi_methods   mpi: our method against OSU's, agreeing within 10 % in at
                  least half the cells
    client        echo: the load generator's busy share, under 90 % of a CPU
    w_order       cost model: w of send against w of recv, by their intervals
    zero_copy     send_zc: what zero copy adds where the kernel copied

Each is named by its experiment's manifest (``checks``), checked at import.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..manifests import ManifestError, manifests

Numbers = Mapping[str, Any]

# A shaper whose rate the probe recovers: the fitted bandwidth within 10 %.
SHAPER_RECOVERED = 0.9
# "Agree": the two MPI methods within 10 % of each other, in half the cells.
METHODS_AGREE = 0.5
# A load generator busy this share of a CPU or more sets the pace itself.
CLIENT_BUSY_PCT = 90.0


@dataclass(frozen=True)
class Check:
    """One check's outcome: the sentence for where its number is used, and
    for a failed check the line Limitations lists."""

    name: str
    ok: bool
    sentence: str
    limitation: str = ""


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
    )


def load_order(numbers: Numbers) -> Check | None:
    ranked = _load_p99_ci(numbers, "epoll")
    if len(ranked) < 2:
        return None
    falls = [(a, b) for i, a in enumerate(ranked) for b in ranked[i + 1 :] if _fell(a, b)]
    shown = ", ".join(f"{p:,.0f} µs at {load} %".replace(",", "\u2009") for load, p, _ in ranked)
    if not falls:
        return Check("load_order", True, f"epoll's open-loop p99 rose with the load ({shown}).")
    return Check(
        "load_order",
        False,
        f"epoll's open-loop p99 fell as the load rose ({shown}), which a server's queue does not do: a "
        "load-generator or vCPU-steal artefact, not server latency.",
        f"Open-loop p99 fell as the offered load rose ({shown}): the low-load tails measure the load "
        "generator or the VM, not the server.",
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


CHECKS = (shaper, tails, load_order, mpi_methods, client, w_order, zero_copy)


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
    return [c for fn in CHECKS if (c := fn(numbers)) is not None]


def entries(numbers: Numbers) -> dict[str, str]:
    """The checks' sentences (``check_<name>``) and the failed checks'
    Limitations lines (``check_limitations``), for numbers.json."""
    found = run(numbers)
    out = {f"check_{c.name}": c.sentence for c in found}
    failed = [c.limitation for c in found if not c.ok and c.limitation]
    if failed:
        out["check_limitations"] = " ".join(failed)
    return out
