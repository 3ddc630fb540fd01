"""The source articles' claims (DESIGN.md, claims table), re-tested.

Each claim function turns tidy tables into findings (iolab.analysis.verdicts):
one per testable part, each with its quantity estimated within every
repetition and judged on the 95 % interval across repetitions. Ratios are
paired: both sides come from the same repetition. ``evaluate`` runs them
all; the claims notebook, the paper and the adaptive-precision planner call
it, so a verdict is computed in one place.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from . import costmodel, echostats, mpistats
from .nodecompare import NATIVE_KINDS, VIRTUAL_KINDS, mpi_ratios
from .sources import QUOTED, quoted_ratio
from .verdicts import EQUIVALENCE_MARGIN, Finding, Rule, finding, not_testable

# Whole experiments a cost-model finding depends on (the planner repeats them).
COST_EXPERIMENTS = {"syscall": [], "sendrecv": [], "uring_batch": []}
# A measurement "agrees" with an absolute figure measured on other hardware
# when it lies within this relative distance of it (C1, M1, M2). That tests
# whether the machines are alike as much as the claim; the paper says so.
ABSOLUTE_MARGIN = 0.25
# U4: "a big gain" from IOSQE_ASYNC.
BIG_GAIN = 1.10


def _quoted(key: str) -> str:
    return QUOTED[key].display


# --- the OpenAnolis cost model --------------------------------------------------

def c1(cost: pd.DataFrame, mitigations: str) -> list[Finding]:
    """C1: s, w and t(1) against the article's absolute values (context: the
    CPU differs). ``cost``: costmodel.per_rep, one row per repetition."""
    s_key = "c1_s_mitigations_off_ns" if mitigations == "off" else "c1_s_mitigations_on_ns"
    parts = [("C1 (s)", "s (ns)", "s", s_key), ("C1 (w)", "w, mean of send and recv (ns)", "w_mean", "c1_w_ns"),
             ("C1 (t)", "t(1), mean of send and recv (ns)", "t1_mean", "c1_t1_ns")]
    return [finding(claim, label, cost[col], Rule("within", QUOTED[key].value, ABSOLUTE_MARGIN),
                    _quoted(key), COST_EXPERIMENTS)
            for claim, label, col, key in parts]


def c2(cost: pd.DataFrame, mitigations: str) -> list[Finding]:
    """C2: with mitigations off io_uring never beats epoll, because t > w."""
    parts = [("t(1)/w", "t1_over_w", Rule("above", 1.0)),
             ("model B per-SQE cost / epoll request", "per_sqe_over_epoll", Rule("above", 1.0))]
    if mitigations != "off":
        why = (f"the claim is about CPU mitigations off, and this node runs with them {mitigations} "
               "(a vm node with mitigations=off on the guest command line can test it)")
        return [not_testable("C2", label, why) for label, _, _ in parts]
    return [finding("C2", label, cost[col], rule, "t > w", COST_EXPERIMENTS) for label, col, rule in parts]


def c3(cost: pd.DataFrame, mitigations: str, echo: pd.DataFrame | None) -> list[Finding]:
    """C3: with mitigations on io_uring wins once n is large (model B's
    per-SQE request cost below the epoll request), and a multishot server is
    about 10 % ahead of epoll at 1000 connections."""
    if mitigations != "on":
        why = f"the claim is about CPU mitigations on, and this node runs with them {mitigations}"
        return [not_testable("C3", "model", why), not_testable("C3", "throughput", why)]
    out = [finding("C3", "model B per-SQE cost / epoll request", cost["per_sqe_over_epoll"],
                   Rule("below", 1.0), "io_uring wins at large n", COST_EXPERIMENTS)]
    label = "multishot/epoll requests/s at c = 1000"
    if echo is None:
        out.append(not_testable("C3", label, "the echo experiment did not run"))
        return out
    ok = echo[echo["status"] == "ok"]
    if 1000 not in set(ok["connections"]):
        largest = int(ok["connections"].max()) if len(ok) else 0
        out.append(not_testable("C3", label, f"c = 1000 was not measured (largest: {largest}; "
                                "the paper profile measures it)"))
        return out
    b = int(ok["bytes"].min())
    r = echostats.paired_ratios(echo, "multishot", "epoll")
    out.append(finding("C3", f"{label}, {b} B", echostats.ratio_per_rep(r, 1000, b), Rule("above", 1.0),
                       "+10 %", {"echo": [["multishot", 1000, b], ["epoll", 1000, b]]}))
    return out


# --- the Habr io_uring series -----------------------------------------------------

SOURCE_U1_CONNECTIONS = (50, 500, 1000)
SOURCE_U1_BYTES = (128, 512)


def _cells(echo: pd.DataFrame, connections: Sequence[int] | None = None,
           sizes: Sequence[int] | None = None) -> list[tuple[int, int]]:
    ok = echo[echo["status"] == "ok"]
    cells = sorted({(int(c), int(b)) for c, b in zip(ok["connections"], ok["bytes"], strict=True)})
    return [(c, b) for c, b in cells if (connections is None or c in connections)
            and (sizes is None or b in sizes)]


def _ratio_findings(claim: str, echo: pd.DataFrame, num: str, den: str, cells: list[tuple[int, int]],
                    rule: Rule, what: str) -> list[Finding]:
    """One finding per cell; "quoted" is the source's ratio in that cell,
    where its tables have the cell."""
    r = echostats.paired_ratios(echo, num, den)
    return [finding(claim, f"c={c} {b} B, {what}", echostats.ratio_per_rep(r, c, b), rule,
                    quoted_ratio(claim, c, b), {"echo": [[num, c, b], [den, c, b]]}) for c, b in cells]


def _measured(echo: pd.DataFrame, *presets: str) -> str:
    ok = set(echo.loc[echo["status"] == "ok", "preset"])
    return ", ".join(p for p in presets if p not in ok)


def u1(echo: pd.DataFrame) -> list[Finding]:
    """U1: io_uring echo requests/s >= epoll's, in the source's cells."""
    missing = _measured(echo, "default", "epoll")
    cells = _cells(echo, SOURCE_U1_CONNECTIONS, SOURCE_U1_BYTES)
    if missing or not cells:
        why = f"not measured: {missing}" if missing else "none of the source's cells (c 50/500/1000, 128/512 B) was measured"
        return [not_testable("U1", "io_uring/epoll requests/s", why)]
    return _ratio_findings("U1", echo, "default", "epoll", cells, Rule("above", 1.0),
                           "io_uring/epoll requests/s")


# The source's reactor ran 6 rings (2 x cores - 2) on a 4-core machine.
U2_MIN_CPUS = 4


def node_cpus(table: pd.DataFrame) -> int:
    """The CPUs of the node a table's rows come from (0: not recorded)."""
    return int(table["cpus"].max()) if "cpus" in table and len(table) else 0


def u2(echo: pd.DataFrame) -> list[Finding]:
    """U2: a multi-ring reactor is slower than epoll with few connections
    (the source: c = 100) and ahead at c >= 500. Its advantage is spreading
    rings over cores: on a node with fewer CPUs than the source's it is not
    testable."""
    cpus = node_cpus(echo)
    if 0 < cpus < U2_MIN_CPUS:
        return [not_testable("U2", "rings/epoll requests/s",
                             f"needs at least {U2_MIN_CPUS} CPUs (the source's reactor ran 6 rings on 4 cores; "
                             f"this node has {cpus})")]
    missing = _measured(echo, "rings_granule", "epoll")
    if missing:
        return [not_testable("U2", "rings/epoll requests/s", f"not measured: {missing}")]
    b = min(b for _, b in _cells(echo))
    few = [(c, b) for c, _ in _cells(echo, sizes=[b]) if 1 < c < 500]
    many = [(c, b) for c, _ in _cells(echo, sizes=[b]) if c >= 500]
    out = _ratio_findings("U2", echo, "rings_granule", "epoll", few, Rule("below", 1.0),
                          "rings/epoll requests/s (few connections: slower)")
    out += _ratio_findings("U2", echo, "rings_granule", "epoll", many, Rule("above", 1.0),
                           "rings/epoll requests/s (many connections: ahead)")
    return out or [not_testable("U2", "rings/epoll requests/s", "no cell with c > 1 was measured")]


def u3(echo: pd.DataFrame) -> list[Finding]:
    """U3: SQPOLL is slower than the default ring at every c."""
    missing = _measured(echo, "sqpoll", "default")
    if missing:
        return [not_testable("U3", "sqpoll/default requests/s", f"not measured: {missing}")]
    return _ratio_findings("U3", echo, "sqpoll", "default", _cells(echo), Rule("below", 1.0),
                           "sqpoll/default requests/s")


def u4(echo: pd.DataFrame) -> list[Finding]:
    """U4: SQ_AFF degrades; IOSQE_ASYNC gives a big gain with one ring;
    buffer select and fixed files make no visible difference. At the largest
    c measured, smallest message size."""
    cells = _cells(echo)
    if not cells:
        return [not_testable("U4", "ring options", "no echo cell was measured")]
    c = max(c for c, _ in cells)
    b = min(b for cc, b in cells if cc == c)
    # SQ_AFF pins the SQPOLL thread, and IOSQE_ASYNC's io-wq workers run
    # beside the server: both need a CPU besides the server's and the load
    # generator's, or they only compete with them.
    cpus = node_cpus(echo)
    spare = cpus == 0 or cpus >= 3
    why = f"needs a CPU besides the server's and the load generator's (this node has {cpus})"
    checks = (("SQ_AFF degrades", "sqpoll_sq_aff", "sqpoll", Rule("below", 1.0)),
              ("ASYNC gives a big gain", "async", "default", Rule("above", BIG_GAIN)),
              ("buffer select: no visible difference", "buf_select", "default",
               Rule("within", 1.0, EQUIVALENCE_MARGIN)),
              ("fixed files: no visible difference", "fixed_files", "default",
               Rule("within", 1.0, EQUIVALENCE_MARGIN)))
    out = []
    for what, num, den, rule in checks:
        missing = _measured(echo, num, den)
        if not spare and num in ("sqpoll_sq_aff", "async"):
            out.append(not_testable("U4", what, why))
        elif missing:
            out.append(not_testable("U4", what, f"not measured: {missing}"))
        else:
            out += _ratio_findings("U4", echo, num, den, [(c, b)], rule, f"{what}, {num}/{den} requests/s")
    return out


# --- HPC HUB: bare metal against VMs ------------------------------------------------

def _kind_pair(per_rep: pd.DataFrame) -> tuple[str, str] | None:
    kinds = dict(per_rep[["node", "kind"]].drop_duplicates().itertuples(index=False))
    native = sorted(n for n, k in kinds.items() if k in NATIVE_KINDS)
    virtual = sorted(n for n, k in kinds.items() if k in VIRTUAL_KINDS)
    return (native[0], virtual[0]) if native and virtual else None


def _no_pair(per_rep: pd.DataFrame) -> str:
    kinds = ", ".join(sorted(set(per_rep["kind"])))
    return f"every node measured is of kind {kinds}; the claim needs a bare-metal node and a VM"


def m1(per_rep: pd.DataFrame) -> list[Finding]:
    """M1: native/VM ping-pong latency ratio 0.75, VM/native bandwidth 0.99.
    ``per_rep``: mpistats.rep_medians over every node."""
    pair = _kind_pair(per_rep)
    if pair is None:
        return [not_testable("M1", "latency ratio", _no_pair(per_rep), _quoted("m1_latency_ratio"))]
    r = mpi_ratios(per_rep, *pair)
    pp = r[(r["bench"] == "pingpong") & ~r["oversubscribed"]]
    if pp.empty:
        return [not_testable("M1", "latency ratio", "no ping-pong was measured on both nodes")]
    transport = sorted(set(pp["transport"]))[0]
    pp = pp[pp["transport"] == transport]
    small, large = pp.loc[pp["bytes"].idxmin()], pp.loc[pp["bytes"].idxmax()]
    return [finding("M1", f"native/VM latency, {int(small['bytes'])} B over {transport}", small["per_rep"],
                    Rule("within", QUOTED["m1_latency_ratio"].value, ABSOLUTE_MARGIN),
                    _quoted("m1_latency_ratio"), {"mpi": []}),
            finding("M1", f"VM/native bandwidth (native/VM time), {int(large['bytes'])} B over {transport}",
                    large["per_rep"], Rule("within", QUOTED["m1_bandwidth_ratio"].value, ABSOLUTE_MARGIN),
                    _quoted("m1_bandwidth_ratio"), {"mpi": []})]


def m2(per_rep: pd.DataFrame) -> list[Finding]:
    """M2: the worst native/VM time ratio per collective (bcast 0.55,
    allreduce 0.7, alltoall 0.87): per repetition, the smallest ratio over
    the sizes both nodes measured, without oversubscribed launches."""
    pair = _kind_pair(per_rep)
    if pair is None:
        return [not_testable("M2", "worst collective ratios", _no_pair(per_rep))]
    r = mpi_ratios(per_rep, *pair)
    out = []
    for bench in ("bcast", "allreduce", "alltoall"):
        key = f"m2_{bench}_worst_ratio"
        sel = r[(r["bench"] == bench) & ~r["oversubscribed"]]
        if sel.empty:
            out.append(not_testable("M2", f"{bench} worst ratio", "not measured on both nodes", _quoted(key)))
            continue
        transport = sorted(set(sel["transport"]))[0]
        sel = sel[sel["transport"] == transport]
        worst = np.min(np.array(sel["per_rep"].tolist(), dtype=float), axis=0)
        out.append(finding("M2", f"{bench} worst native/VM time ratio over {transport}", worst,
                           Rule("within", QUOTED[key].value, ABSOLUTE_MARGIN), _quoted(key), {"mpi": []}))
    return out


# --- all of them ---------------------------------------------------------------------

def evaluate(syscall: pd.DataFrame, sendrecv: pd.DataFrame, uring: pd.DataFrame,
             echo: pd.DataFrame | None = None, mpi: pd.DataFrame | None = None,
             node: str | None = None) -> list[Finding]:
    """Every claim's findings for ``node`` (default: the first in name order)."""
    node = node or str(sorted(syscall["node"].unique())[0])
    mitigations = str(syscall.loc[syscall["node"] == node, "mitigations"].iloc[0])
    cost = costmodel.per_rep(costmodel.per_rep_inputs(syscall, sendrecv, uring, node=node))
    echo_here = echo[echo["node"] == node] if echo is not None and len(echo) else None
    out = [*c1(cost, mitigations), *c2(cost, mitigations), *c3(cost, mitigations, echo_here)]
    for claim, fn in (("U1", u1), ("U2", u2), ("U3", u3), ("U4", u4)):
        out += fn(echo_here) if echo_here is not None and len(echo_here) else [
            not_testable(claim, "echo servers", "the echo experiment did not run on this node")]
    if mpi is not None and len(mpi):
        per_rep = mpistats.rep_medians(mpistats.iteration_times(mpi))
        out += [*m1(per_rep), *m2(per_rep)]
    else:
        out += [not_testable(c, "MPI", "the MPI experiment did not run") for c in ("M1", "M2")]
    return out
