"""The source articles' claims (DESIGN.md, claims table), re-tested.

Each claim function turns tidy tables into findings (iolab.analysis.verdicts):
one per testable part, each with its quantity estimated within every
repetition and judged on the 95 % interval across repetitions. Ratios are
paired: both sides come from the same repetition. ``evaluate`` runs them
all; the claims notebook, the paper and the adaptive-precision planner call
it, so a verdict is computed in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from . import costmodel, echostats, mpistats
from .nodecompare import NATIVE_KINDS, VIRTUAL_KINDS
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

def regime(cost: pd.DataFrame, flag: str) -> tuple[str, str]:
    """Which of the source's two states this node's syscall path is in,
    judged by the measured s, not by the kernel's mitigation flag: "off"
    when the median s is nearer (on a log scale) the source's 230 ns than its
    700 ns, else "on"; and a sentence saying why. A CPU that needs no
    mitigations, or mitigations that cost little, read as "off"."""
    s_on, s_off = QUOTED["c1_s_mitigations_on_ns"].value, QUOTED["c1_s_mitigations_off_ns"].value
    s = float(np.median(cost["s"]))
    state = "off" if s < (s_on * s_off) ** 0.5 else "on"
    return state, (f"s = {s:.0f} ns here, nearer the source's {s_off if state == 'off' else s_on:.0f} ns "
                   f"(mitigations {state}) than its {s_on if state == 'off' else s_off:.0f} ns; the kernel "
                   f"reports mitigations {flag}")


def c1(cost: pd.DataFrame, mitigations: str) -> list[Finding]:
    """C1: what carries over between machines is counted: t(1) against w,
    and an io_uring request at n = 1, t(1) + s, against epoll's s + w, each
    within 25 % of the source's own ratio (for ``mitigations``, the regime
    of s). The absolute s, w and t(1) follow as context: the CPU differs.
    ``cost``: costmodel.per_rep, one row per repetition."""
    s_key = "c1_s_mitigations_off_ns" if mitigations == "off" else "c1_s_mitigations_on_ns"
    s, w, t1 = QUOTED[s_key].value, QUOTED["c1_w_ns"].value, QUOTED["c1_t1_ns"].value
    out = [finding("C1 (t/w)", "t(1)/w, mean of send and recv", cost["t1_over_w"],
                   Rule("within", t1 / w, ABSOLUTE_MARGIN), f"{t1 / w:.2f} ({t1:.0f}/{w:.0f} ns)", COST_EXPERIMENTS),
           finding("C1 (n = 1)", f"(t(1) + s)/(s + w), mitigations {mitigations}",
                   cost["uring_n1_over_epoll"], Rule("within", (t1 + s) / (s + w), ABSOLUTE_MARGIN),
                   f"{(t1 + s) / (s + w):.2f} ({t1 + s:.0f}/{s + w:.0f} ns)", COST_EXPERIMENTS)]
    parts = [("C1 (s)", "s (ns), absolute: the CPU differs", "s", s_key),
             ("C1 (w)", "w, mean of send and recv (ns), absolute", "w_mean", "c1_w_ns"),
             ("C1 (t)", "t(1), mean of send and recv (ns), absolute", "t1_mean", "c1_t1_ns")]
    return out + [finding(claim, label, cost[col], Rule("within", QUOTED[key].value, ABSOLUTE_MARGIN),
                          _quoted(key), COST_EXPERIMENTS, context=True)
                  for claim, label, col, key in parts]


def c2(cost: pd.DataFrame, mitigations: str, why: str = "") -> list[Finding]:
    """C2: with mitigations off io_uring never beats epoll, because t > w.
    ``mitigations``: the regime of s (``regime``); ``why``: its reason."""
    parts = [("t(1)/w", "t1_over_w", Rule("above", 1.0)),
             ("model B per-SQE cost / epoll request", "per_sqe_over_epoll", Rule("above", 1.0))]
    if mitigations != "off":
        why = (f"the claim is about CPU mitigations off, and this node's syscall path is in the 'on' "
               f"regime ({why or 'mitigations ' + mitigations}; a vm node with mitigations=off on the guest "
               "command line can test it)")
        return [not_testable("C2", label, why) for label, _, _ in parts]
    return [finding("C2", label, cost[col], rule, "t > w", COST_EXPERIMENTS) for label, col, rule in parts]


def c3(cost: pd.DataFrame, mitigations: str, echo: pd.DataFrame | None, why: str = "") -> list[Finding]:
    """C3: with mitigations on io_uring wins once n is large (model B's
    per-SQE request cost below the epoll request), and a multishot server is
    about 10 % ahead of epoll at 1000 connections."""
    if mitigations != "on":
        why = (f"the claim is about CPU mitigations on, and this node's syscall path is in the 'off' regime "
               f"({why or 'mitigations ' + mitigations})")
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
    # The claim's server is single-threaded with no io-wq: a cell where the
    # kernel started io-wq workers measured something else.
    cells = ok[ok["preset"].isin(["multishot", "epoll"]) & (ok["connections"] == 1000) & (ok["bytes"] == b)]
    workers = int(pd.to_numeric(cells.get("iowq_workers", pd.Series(dtype=float)), errors="coerce").fillna(0).max()
                  if len(cells) else 0)
    if workers:
        out.append(not_testable("C3", f"{label}, {b} B", f"io-wq workers ran ({workers} at exit in a cell); "
                                "the claim is about a server without them"))
        return out
    r = echostats.paired_ratios(echo, "multishot", "epoll")
    out.append(finding("C3", f"{label}, {b} B (no io-wq worker ran)", echostats.ratio_per_rep(r, 1000, b),
                       Rule("above", 1.0), "+10 %", {"echo": [["multishot", 1000, b], ["epoll", 1000, b]]}))
    return out


# --- the Habr io_uring series -----------------------------------------------------

SOURCE_U1_CONNECTIONS = (50, 500, 1000)
SOURCE_U1_BYTES = (128, 512)
# Part 3's cells (its table also has c = 50 at 1024 B).
SOURCE_U2_CONNECTIONS = (100, 500, 1000)
SOURCE_U2_BYTES = (128, 1024)
# U1: "the CPU load was about the same": server CPU per request within this
# relative distance.
SIMILAR_CPU_MARGIN = 0.10


def _cells(echo: pd.DataFrame, connections: Sequence[int] | None = None,
           sizes: Sequence[int] | None = None) -> list[tuple[int, int]]:
    ok = echo[echo["status"] == "ok"]
    cells = sorted({(int(c), int(b)) for c, b in zip(ok["connections"], ok["bytes"], strict=True)})
    return [(c, b) for c, b in cells if (connections is None or c in connections)
            and (sizes is None or b in sizes)]


def _ratio_findings(claim: str, echo: pd.DataFrame, num: str, den: str, cells: list[tuple[int, int]],
                    rule: Rule, what: str, metric: str = "rps", context: bool = False,
                    quoted: bool = True) -> list[Finding]:
    """One finding per cell; "quoted" is the source's ratio in that cell,
    where its tables have the cell."""
    r = echostats.paired_ratios(echo, num, den, metric)
    return [finding(claim, f"c={c} {b} B, {what}", echostats.ratio_per_rep(r, c, b), rule,
                    quoted_ratio(claim, c, b) if quoted else "", {"echo": [[num, c, b], [den, c, b]]},
                    context=context) for c, b in cells]


def _measured(echo: pd.DataFrame, *presets: str) -> str:
    ok = set(echo.loc[echo["status"] == "ok", "preset"])
    return ", ".join(p for p in presets if p not in ok)


def u1(echo: pd.DataFrame) -> list[Finding]:
    """U1: C io_uring (default ring) echoes at least as many requests/s as
    C epoll, at about the same server CPU per request, in the source's cells."""
    missing = _measured(echo, "default", "epoll")
    cells = _cells(echo, SOURCE_U1_CONNECTIONS, SOURCE_U1_BYTES)
    if missing or not cells:
        why = (f"not measured: {missing}" if missing else
               "none of the source's cells (c 50/500/1000 x 128/512 B) was measured (the paper profile does)")
        return [not_testable("U1", "io_uring/epoll requests/s", why)]
    out = []
    for c, b in cells:
        out += _ratio_findings("U1", echo, "default", "epoll", [(c, b)], Rule("above", 1.0),
                               "io_uring/epoll requests/s")
        out += _ratio_findings("U1", echo, "default", "epoll", [(c, b)],
                               Rule("within", 1.0, SIMILAR_CPU_MARGIN),
                               "io_uring/epoll server CPU per request (CPU load about the same)",
                               metric="server_ns_per_request", quoted=False)
    return out


# The source's reactor ran 6 rings (2 x cores - 2) on a 4-core machine.
U2_MIN_CPUS = 4


def node_cpus(table: pd.DataFrame) -> int:
    """The CPUs of the node a table's rows come from (0: not recorded)."""
    return int(table["cpus"].max()) if "cpus" in table and len(table) else 0


def _reactor_parts(claim: str, echo: pd.DataFrame, pairs: Sequence[tuple[str, str, str]],
                   rules: Callable[[int], tuple[Rule, str]], context_all: bool) -> list[Finding]:
    """Part 3's comparisons in its cells: the first pair is the source's
    systems (the Go servers), the others the C analogues, shown as context
    (a second, conceptual replication). ``rules(c)``: the rule and wording."""
    cells = _cells(echo, SOURCE_U2_CONNECTIONS, SOURCE_U2_BYTES)
    out = []
    for i, (num, den, what) in enumerate(pairs):
        missing = _measured(echo, num, den)
        if missing or not cells:
            why = (f"not measured: {missing}" if missing else "none of the source's cells "
                   "(c 100/500/1000 x 128/1024 B) was measured (the paper profile does)")
            if i == 0 and not context_all:
                out.append(not_testable(claim, what, why))
            continue
        for c, b in cells:
            rule, wording = rules(c)
            out += _ratio_findings(claim, echo, num, den, [(c, b)], rule, f"{what} ({wording})",
                                   context=context_all or i > 0, quoted=i == 0)
    return out


def u2(echo: pd.DataFrame) -> list[Finding]:
    """U2: the Go io_uring reactor is slower than Go's net package with few
    connections (c = 100) and ahead at c >= 500, in part 3's cells. The C
    multi-ring server against C epoll follows as context. The reactor's
    advantage is spreading rings over cores: on a node with fewer CPUs than
    the source's the claim is not testable, and the parts are context."""
    def rules(c: int) -> tuple[Rule, str]:
        return (Rule("below", 1.0), "few connections: slower") if c < 500 else \
            (Rule("above", 1.0), "many connections: ahead")

    cpus = node_cpus(echo)
    short = 0 < cpus < U2_MIN_CPUS
    pairs = [("go_uring", "go_net", "Go reactor/Go net requests/s"),
             ("rings_granule", "epoll", "C rings/C epoll requests/s, second row")]
    out = _reactor_parts("U2", echo, pairs, rules, context_all=short)
    if short:
        out.insert(0, not_testable("U2", "Go reactor/Go net requests/s",
                                   f"needs >= {U2_MIN_CPUS} CPUs (the source's reactor "
                                   f"ran 6 rings on 4 cores; this node has {cpus}); the measured parts are "
                                   "shown as context"))
    return out


def u3(echo: pd.DataFrame) -> list[Finding]:
    """U3: the Go reactor in SQPOLL mode is slower than without, at every c
    of part 3. The C sqpoll/default rings follow as context."""
    pairs = [("go_uring_sqpoll", "go_uring", "Go reactor SQPOLL/Go reactor requests/s"),
             ("sqpoll", "default", "C sqpoll/C default requests/s, second row")]
    return _reactor_parts("U3", echo, pairs, lambda c: (Rule("below", 1.0), "slower"), context_all=False)


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
    # The presets put the SQPOLL thread and the io-wq workers on CPUs besides
    # the server's and the load generator's (config.yaml: *_spare).
    checks = (("SQ_AFF degrades", "sqpoll_sq_aff_spare", "sqpoll", Rule("below", 1.0)),
              ("ASYNC gives a big gain", "async_iowq_spare", "default", Rule("above", BIG_GAIN)),
              ("buffer select: no visible difference", "buf_select", "default",
               Rule("within", 1.0, EQUIVALENCE_MARGIN)),
              ("fixed files: no visible difference", "fixed_files", "default",
               Rule("within", 1.0, EQUIVALENCE_MARGIN)))
    out = []
    for what, num, den, rule in checks:
        missing = _measured(echo, num, den)
        if not spare and num in ("sqpoll_sq_aff_spare", "async_iowq_spare"):
            out.append(not_testable("U4", what, why))
        elif missing:
            out.append(not_testable("U4", what, f"not measured: {missing}"))
        else:
            out += _ratio_findings("U4", echo, num, den, [(c, b)], rule, f"{what}, {num}/{den} requests/s")
    return out


# --- HPC HUB: bare metal against VMs ------------------------------------------------
#
# The seed measured the virtualization penalty between two nodes: a bare-metal
# pair against a pair of VMs, 20 ranks on each node, OSU 5.3.1 with Open MPI's
# default algorithms, each point the mean of the 3 smallest of a series. So
# M1/M2 use cross-node launches only (the ``nodes`` transport spanning two or
# more hosts), never oversubscribed ones, at the largest rank count both pairs
# ran, OSU's statistic where the OSU method ran (``mpistats.seed_view``), and
# default algorithm selection where it ran (pinned algorithms otherwise, and
# the part says so). Where both selections ran, the pinned algorithms' M2
# parts follow as a second row, shown as context: the claim's verdict is the
# default selection's, as the seed measured. Verdicts use the median ratio
# over repetitions with its interval; the seed's estimator is shown beside it.

CROSS_NODE = "nodes"
# "mostly": more than half of the sizes measured.
MOSTLY = 0.5


def cross_node(per_rep: pd.DataFrame) -> pd.DataFrame:
    """The rows M1/M2 may use: launches across nodes, not oversubscribed."""
    per_rep = mpistats.with_selection(per_rep)
    return per_rep[(per_rep["transport"] == CROSS_NODE) & (per_rep["hosts"] >= 2) & ~per_rep["oversubscribed"]]


def _kind_pair(per_rep: pd.DataFrame) -> tuple[str, str] | str:
    """(a native node, a virtual node) that both ran MPI across nodes, or
    why there is none."""
    cross = cross_node(per_rep)
    kinds = dict(cross[["node", "kind"]].drop_duplicates().itertuples(index=False))
    native = sorted(n for n, k in kinds.items() if k in NATIVE_KINDS)
    virtual = sorted(n for n, k in kinds.items() if k in VIRTUAL_KINDS)
    if native and virtual:
        return native[0], virtual[0]
    missing = " and ".join(w for w, have in (("two bare-metal nodes", native), ("two VMs", virtual)) if not have)
    seen = sorted(set(per_rep["transport"]))
    return (f"needs MPI across {missing} (the nodes transport: a node whose mpi.peers are of its kind); "
            f"measured: {', '.join(seen) or 'nothing'}"
            + (f" on {', '.join(sorted(set(per_rep['kind'])))} nodes" if len(per_rep) else "")
            + ", and intra-node transports do not show the cross-node penalty")


def _bench_rows(per_rep: pd.DataFrame, pair: tuple[str, str], bench: str) -> pd.DataFrame:
    """``cross_node`` rows of one bench on the pair's nodes."""
    rows = cross_node(per_rep)
    return rows[(rows["bench"] == bench) & rows["node"].isin(pair)]


def _selections_both_ran(rows: pd.DataFrame, pair: tuple[str, str]) -> list[str]:
    """The algorithm selections both nodes of ``rows`` (``_bench_rows``)
    ran, default (the seed's) first."""
    return [s for s in ("default", "pinned")
            if all(((rows["node"] == n) & (rows["selection"] == s)).any() for n in pair)]


def _pair_rows(per_rep: pd.DataFrame, pair: tuple[str, str], bench: str,
               selection: str | None = None) -> tuple[pd.DataFrame, str] | str:
    """One bench's rows of both nodes at their largest common rank count,
    of one algorithm selection (default: Open MPI's default selection where
    both nodes ran it, else the pinned one; ping-pong has no algorithm to
    select); with a label of what was used."""
    rows = _bench_rows(per_rep, pair, bench)
    if bench != "pingpong":
        ran = _selections_both_ran(rows, pair)
        selection = selection or (ran[0] if ran else None)
        if selection is not None:
            rows = rows[rows["selection"] == selection]
    ranks = set.intersection(*(set(rows.loc[rows["node"] == n, "ranks"]) for n in pair))
    if not ranks:
        return f"{bench} was not measured across nodes at a rank count both pairs ran"
    rows = rows[rows["ranks"] == max(ranks)]
    method = "OSU's method" if (rows["method"] == "osu").all() else "our method"
    if bench == "pingpong":
        return rows, f"{max(ranks)} ranks, {method}"
    algos = ("Open MPI's default algorithms" if selection == "default"
             else "pinned algorithms (the seed used the defaults)")
    return rows, f"{max(ranks)} ranks, {method}, {algos}"


def _ratios(rows: pd.DataFrame, pair: tuple[str, str]) -> pd.DataFrame:
    """native/VM time per size, one column per repetition both measured."""
    wide = rows.pivot_table(index=["bytes", "rep"], columns="node", values="time_ns", aggfunc="first")
    wide = wide.dropna(subset=list(pair))
    return (wide[pair[0]] / wide[pair[1]]).unstack("rep")


def _seed_ratios(mean3: pd.DataFrame, pair: tuple[str, str], bench: str, ranks: int,
                 selection: str | None = None) -> pd.Series:
    sel = mean3[(mean3["bench"] == bench) & (mean3["ranks"] == ranks) & (mean3["transport"] == CROSS_NODE)]
    if selection is not None and "selection" in sel:
        sel = sel[sel["selection"] == selection]
    wide = sel.pivot_table(index="bytes", columns="node", values="mean3_ns", aggfunc="first")
    if not all(n in wide for n in pair):
        return pd.Series(dtype=float)
    return (wide[pair[0]] / wide[pair[1]]).dropna()


def _seed_text(x: float) -> str:
    return f"; seed's estimator (mean of 3 smallest series) {x:.3g}" if np.isfinite(x) else ""


def _ib_pair_ratio(ib: pd.DataFrame, pair: tuple[str, str], program: str, metric: str,
                   size_pick: str) -> tuple[int, np.ndarray] | None:
    """native/VM ``metric`` of ``program`` per repetition both measured, at
    the smallest or largest (``size_pick``) size both measured."""
    sel = ib[(ib["program"] == program) & (ib["metric"] == metric) & ib["node"].isin(pair)]
    wide = sel.pivot_table(index=["bytes", "rep"], columns="node", values="value", aggfunc="first")
    if not all(n in wide for n in pair):
        return None
    # A ratio needs a reading on both sides: not missing (NaN > 0 is false)
    # and not the 0.00 perftest prints below its print's resolution.
    wide = wide[(wide[list(pair)] > 0).all(axis=1)]
    if wide.empty:
        return None
    sizes = wide.index.get_level_values("bytes")
    size = int(sizes.min() if size_pick == "min" else sizes.max())
    at = wide.xs(size, level="bytes")
    return size, (at[pair[0]] / at[pair[1]]).to_numpy()


def m1_perftest(ib: pd.DataFrame) -> list[Finding] | None:
    """M1 as the seed measured it: perftest between two bare-metal nodes
    against two VMs (the ib experiment). None when the ib experiment has no
    results for both kinds; ``m1`` then falls back to MPI ping-pong."""
    measured = ib.dropna(subset=["value"]) if "value" in ib else ib.iloc[0:0]
    kinds = dict(measured[["node", "kind"]].drop_duplicates().itertuples(index=False))
    native = sorted(n for n, k in kinds.items() if k in NATIVE_KINDS)
    virtual = sorted(n for n, k in kinds.items() if k in VIRTUAL_KINDS)
    if not native or not virtual:
        return None
    pair = (native[0], virtual[0])
    lat = _ib_pair_ratio(measured, pair, "ib_send_lat", "t_typical_us", "min")
    # Bandwidth ratio VM/native = native/VM time, so the same orientation.
    bw = _ib_pair_ratio(measured, (pair[1], pair[0]), "ib_send_bw", "bw_average_mb_s", "max")
    out = []
    for got, label, key in ((lat, "native/VM ib_send_lat typical latency", "m1_latency_ratio"),
                            (bw, "VM/native ib_send_bw average bandwidth", "m1_bandwidth_ratio")):
        if got is None:
            out.append(not_testable("M1", label, "perftest did not measure it on both kinds", _quoted(key)))
            continue
        size, per_rep = got
        out.append(finding("M1", f"{label}, {size} B ({pair[0]} against {pair[1]})", per_rep,
                           Rule("within", QUOTED[key].value, ABSOLUTE_MARGIN), _quoted(key), {"ib": []}))
    return out


def m1(per_rep: pd.DataFrame, mean3: pd.DataFrame | None = None,
       ib: pd.DataFrame | None = None) -> list[Finding]:
    """M1: native/VM latency ratio 0.75 and VM/native bandwidth 0.99: from
    perftest (the ib experiment) where it ran on both kinds, as the seed;
    otherwise from MPI ping-pong across nodes, labelled so. ``per_rep``,
    ``mean3``: ``mpistats.seed_view``."""
    if ib is not None and len(ib):
        from_perftest = m1_perftest(ib)
        if from_perftest is not None:
            return from_perftest
    pair = _kind_pair(per_rep)
    if isinstance(pair, str):
        return [not_testable("M1", "latency ratio", pair, _quoted("m1_latency_ratio"))]
    got = _pair_rows(per_rep, pair, "pingpong")
    if isinstance(got, str):
        return [not_testable("M1", "latency ratio", got, _quoted("m1_latency_ratio"))]
    rows, how = got
    ratios = _ratios(rows, pair)
    if ratios.empty:
        return [not_testable("M1", "latency ratio", "no repetition measured ping-pong on both pairs")]
    seed = _seed_ratios(mean3, pair, "pingpong", int(rows["ranks"].iloc[0])) if mean3 is not None else None
    out = []
    for label, size, key in (("native/VM latency", ratios.index.min(), "m1_latency_ratio"),
                             ("VM/native bandwidth (native/VM time)", ratios.index.max(), "m1_bandwidth_ratio")):
        s = float(seed.get(size, np.nan)) if seed is not None else np.nan
        out.append(finding("M1", f"{label}, MPI ping-pong {int(size)} B across nodes ({how}){_seed_text(s)}",
                           ratios.loc[size].to_numpy(), Rule("within", QUOTED[key].value, ABSOLUTE_MARGIN),
                           _quoted(key), {"mpi": []}))
    return out


M2_MOSTLY = {"bcast": "m2_bcast_mostly", "allreduce": "m2_allreduce_mostly", "alltoall": "m2_alltoall_mostly"}


def m2(per_rep: pd.DataFrame, mean3: pd.DataFrame | None = None) -> list[Finding]:
    """M2, every part: per collective the worst native/VM time ratio (bcast
    0.55, allreduce 0.7, alltoall 0.87) and where it falls, the fraction of
    sizes at or above the "mostly" bound (0.8, 0.8, 0.88), and over all three
    the average VM penalty (about 20 %). Each is computed within a
    repetition over the sizes both pairs measured. Where both algorithm
    selections ran, the pinned algorithms' parts follow as context."""
    pair = _kind_pair(per_rep)
    if isinstance(pair, str):
        return [not_testable("M2", "collective ratios", pair)]
    out = _m2_parts(per_rep, mean3, pair, None, context=False)
    if all(len(_selections_both_ran(_bench_rows(per_rep, pair, b), pair)) == 2 for b in M2_MOSTLY):
        out += _m2_parts(per_rep, mean3, pair, "pinned", context=True)
    return out


def _m2_parts(per_rep: pd.DataFrame, mean3: pd.DataFrame | None, pair: tuple[str, str],
              selection: str | None, context: bool) -> list[Finding]:
    """M2's parts on one algorithm selection (None: ``_pair_rows``' choice)."""
    out, penalties = [], []
    second = " [second row: pinned algorithms, context]" if context else ""
    for bench in ("bcast", "allreduce", "alltoall"):
        worst_key, mostly_key = f"m2_{bench}_worst_ratio", M2_MOSTLY[bench]
        got = _pair_rows(per_rep, pair, bench, selection)
        ratios = _ratios(got[0], pair) if not isinstance(got, str) else pd.DataFrame()
        if isinstance(got, str) or ratios.empty:
            why = got if isinstance(got, str) else f"no repetition measured {bench} on both pairs"
            out += [not_testable("M2", f"{bench} worst ratio{second}", why, _quoted(worst_key)),
                    not_testable("M2", f"{bench} sizes at or above the usual ratio{second}", why,
                                 _quoted(mostly_key))]
            continue
        rows, how = got
        where = int(ratios.median(axis=1).idxmin())
        chosen = str(rows["selection"].iloc[0]) if "selection" in rows and len(rows) else None
        seed = (_seed_ratios(mean3, pair, bench, int(rows["ranks"].iloc[0]), chosen)
                if mean3 is not None else None)
        seed_worst = float(seed.min()) if seed is not None and len(seed) else np.nan
        out.append(finding("M2", f"{bench} worst native/VM time ratio (median at {where} B) across nodes "
                           f"({how}){_seed_text(seed_worst)}{second}", ratios.min(axis=0).to_numpy(),
                           Rule("within", QUOTED[worst_key].value, ABSOLUTE_MARGIN), _quoted(worst_key),
                           {"mpi": []}, context=context))
        bound = QUOTED[mostly_key].value
        share = (ratios >= bound).mean(axis=0)
        out.append(finding("M2", f"{bench}: share of the {len(ratios)} sizes with native/VM \u2265 {bound:g}"
                           f"{second}", share.to_numpy(), Rule("above", MOSTLY), _quoted(mostly_key),
                           {"mpi": []}, context=context))
        penalties.append(1.0 / ratios)
    if penalties:
        per_rep_penalty = (pd.concat(penalties) - 1.0).mean(axis=0)
        out.append(finding("M2", "average VM time penalty (VM/native time \u2212 1, over collectives and sizes)"
                           f"{second}", per_rep_penalty.to_numpy(),
                           Rule("within", QUOTED["m2_mean_penalty"].value, ABSOLUTE_MARGIN),
                           _quoted("m2_mean_penalty"), {"mpi": []}, context=context))
    else:
        out.append(not_testable("M2", f"average VM penalty{second}", "no collective was measured on both pairs",
                                _quoted("m2_mean_penalty")))
    return out


# --- all of them ---------------------------------------------------------------------

def evaluate(syscall: pd.DataFrame, sendrecv: pd.DataFrame, uring: pd.DataFrame,
             echo: pd.DataFrame | None = None, mpi: pd.DataFrame | None = None,
             node: str | None = None, ib: pd.DataFrame | None = None) -> list[Finding]:
    """Every claim's findings for ``node`` (default: the first in name order)."""
    node = node or str(sorted(syscall["node"].unique())[0])
    flag = str(syscall.loc[syscall["node"] == node, "mitigations"].iloc[0])
    cost = costmodel.per_rep(costmodel.per_rep_inputs(syscall, sendrecv, uring, node=node))
    # The premises of C2 and C3 are about the measured cost of a syscall, not the flag.
    mitigations, why = regime(cost, flag)
    # The sources drove their servers with rust_echo_bench, unpinned: that
    # setup where it ran.
    echo_here = echostats.claims_view(echo, node)
    out = [*c1(cost, mitigations), *c2(cost, mitigations, why)]
    measured_echo = [*c3(cost, mitigations, echo_here, why)]
    for claim, fn in (("U1", u1), ("U2", u2), ("U3", u3), ("U4", u4)):
        measured_echo += fn(echo_here) if echo_here is not None else [
            not_testable(claim, "echo servers", "the echo experiment did not run on this node")]
    if echo_here is not None:
        note = echostats.setup_note(echo_here)
        for f in measured_echo:
            if f.estimate is not None and "echo" in f.decides:
                f.part += f" [{note}]"
    out += measured_echo
    if mpi is not None and len(mpi):
        per_rep, mean3 = mpistats.seed_view(mpi)
        out += [*m1(per_rep, mean3, ib), *m2(per_rep, mean3)]
    else:
        from_perftest = m1_perftest(ib) if ib is not None and len(ib) else None
        out += from_perftest or [not_testable("M1", "MPI", "the MPI experiment did not run")]
        out += [not_testable("M2", "MPI", "the MPI experiment did not run")]
    return out
