"""The HPC HUB virtual-cluster study's claims (seed 004): M1-M3.

The seed measured the virtualization penalty between two nodes: a bare-metal
pair against a pair of VMs, 20 ranks on each node, OSU 5.3.1 with Open MPI's
default algorithms, over InfiniBand (Open MPI's openib transport) with SR-IOV
virtual functions in the VMs; perftest for M1's latency and bandwidth.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from ..quoted import QUOTED
from ..rooms.mpi import stats as mpistats
from .extremes import extreme_finding
from .findings import finding, not_testable
from .nodecompare import NATIVE_KINDS, VIRTUAL_KINDS
from .rules import ClaimTest, above, band_between, within
from .verdicts import Finding, Rule

#
# The seed measured the virtualization penalty between two nodes: a bare-metal
# pair against a pair of VMs, 20 ranks on each node, OSU 5.3.1 with Open MPI's
# default algorithms, over InfiniBand (Open MPI's openib transport) with SR-IOV
# virtual functions in the VMs. So M1/M2 use cross-node launches only (the
# ``nodes`` transport spanning two or more hosts), never oversubscribed ones,
# at the largest rank count both pairs ran, OSU's statistic where the OSU
# method ran (``mpistats.seed_view``), and default algorithm selection where
# it ran (pinned algorithms otherwise, and the part says so). Where both
# selections ran, the pinned algorithms' M2 parts follow as a second row,
# shown as context. A pair whose fabric is not the seed's (InfiniBand
# verbs between the nodes, an SR-IOV virtual function in each VM), as each
# launch's record says, is measured as context only: the penalty the seed
# reports is that of SR-IOV InfiniBand. Verdicts use the median ratio over
# repetitions with its interval; the seed's estimator is shown beside it.

CROSS_NODE = "nodes"
# "mostly": half of the sizes measured or more.
MOSTLY = 0.5
# The seed's fabric: InfiniBand verbs between the nodes, SR-IOV VFs in the VMs.
SEED_FABRIC = "InfiniBand verbs between the nodes, an SR-IOV virtual function in each VM"
# M1 "0.75": the ratio of the seed's two latencies (0.83 against 1.10 µs);
# ±20 % (0.60-0.90) keeps a visible penalty, clear of none (1.0) and of a
# doubled latency (0.5).
M1_LATENCY_MARGIN = 0.20
M1_LATENCY = "a visible VM latency penalty, clear of none (1.0) and of twice the native latency (0.5)"
# M1 "0.99": the VM's bandwidth is native within 1 %: ±5 % (0.94-1.04) is
# "the same bandwidth", a band that admits a VM a few per cent faster.
M1_BANDWIDTH_MARGIN = 0.05
M1_BANDWIDTH = "'the same bandwidth' within 5 %, a band that also admits a VM a few per cent faster"
M1_MARGINS = {
    "m1_latency_ratio": (M1_LATENCY_MARGIN, M1_LATENCY),
    "m1_bandwidth_ratio": (M1_BANDWIDTH_MARGIN, M1_BANDWIDTH),
}
# M2's worst ratios (bcast 0.55, allreduce 0.7, alltoall 0.87): the margin
# is the widest whole per cent that keeps each collective's band apart from
# the next one's (they meet at the geometric midpoint) and the highest below
# 1, so that the bands still say which collective suffers most.
M2_WORST_RATIOS = tuple(QUOTED[f"m2_{b}_worst_ratio"].value for b in ("bcast", "allreduce", "alltoall"))


def _widest_apart(ratios: tuple[float, ...]) -> float:
    limits = [1 / ratios[-1] - 1]
    for lo, hi in itertools.pairwise(ratios):
        mid = (lo * hi) ** 0.5
        limits += [mid / lo - 1, 1 - mid / hi]
    return math.floor(100 * min(limits)) / 100


M2_WORST_MARGIN = _widest_apart(M2_WORST_RATIOS)
M2_WORST = (
    "the widest margin that keeps the three collectives' worst cases apart ("
    + ", ".join(f"{r * (1 - M2_WORST_MARGIN):.3f}\u2013{r * (1 + M2_WORST_MARGIN):.3f}" for r in M2_WORST_RATIOS)
    + ") and below 1"
)
# M2's average penalty, "about 20 %": 15-25 %.
M2_PENALTY = "'about 20 %' read as 15 to 25 %"


def cross_node(per_rep: pd.DataFrame) -> pd.DataFrame:
    """The rows M1/M2 may use: launches across nodes, not oversubscribed."""
    per_rep = mpistats.with_selection(per_rep)
    return per_rep[(per_rep["transport"] == CROSS_NODE) & (per_rep["hosts"] >= 2) & ~per_rep["oversubscribed"]]


def _vm_has_vf(rows: pd.DataFrame, vm: str) -> tuple[bool, str]:
    """Whether the VM node's recorded NICs include an SR-IOV VF, and their kinds."""
    kinds = sorted(set(rows.loc[rows["node"] == vm, "nic_kind"].astype(str))) if "nic_kind" in rows else []
    text = ", ".join(k for k in kinds if k) or "not recorded"
    return any("sr-iov vf" in k for k in kinds), text


def fabric_matches(per_rep: pd.DataFrame, pair: tuple[str, str]) -> str:
    """ "" when both nodes' cross-node launches ran on the seed's fabric
    (the launch records' ``fabric``, the VM's ``nic_kind``), else why not."""
    rows = cross_node(per_rep)
    rows = rows[rows["node"].isin(pair)]
    fabrics = sorted(set(rows["fabric"].astype(str)) - {""}) if "fabric" in rows else []
    vf, nics = _vm_has_vf(rows, pair[1])
    if fabrics == ["infiniband"] and vf:
        return ""
    return (
        f"the source ran {SEED_FABRIC}; these launches ran {', '.join(fabrics) or 'an unrecorded fabric'}"
        f" with the VM's NICs {nics}, so the parts are context"
    )


def _kind_pair(per_rep: pd.DataFrame) -> tuple[str, str] | str:
    """(a native node, a virtual node) that both ran MPI across nodes, or
    why there is none."""
    cross = cross_node(per_rep)
    kinds = dict(cross[["node", "kind"]].drop_duplicates().itertuples(index=False))
    native = sorted(n for n, k in kinds.items() if k in NATIVE_KINDS)
    virtual = sorted(n for n, k in kinds.items() if k in VIRTUAL_KINDS)
    if native and virtual:
        return native[0], virtual[0]
    missing = " and between ".join(
        w for w, have in (("two bare-metal nodes", native), ("two VMs", virtual)) if not have
    )
    seen = [mpistats.TRANSPORT_NAMES.get(t, t) for t in mpistats.TRANSPORT_ORDER if t in set(per_rep["transport"])]
    kinds_seen = " and ".join(sorted({"VM" if k == "vm" else k for k in per_rep["kind"]})) if len(per_rep) else ""
    return (
        f"needs MPI between {missing}; this run measured "
        + (f"{', '.join(seen)} on one {kinds_seen} node" if seen else "no MPI")
        + ", which shows no cross-node penalty"
    )


def _bench_rows(per_rep: pd.DataFrame, pair: tuple[str, str], bench: str) -> pd.DataFrame:
    """``cross_node`` rows of one bench on the pair's nodes."""
    rows = cross_node(per_rep)
    return rows[(rows["bench"] == bench) & rows["node"].isin(pair)]


def _selections_both_ran(rows: pd.DataFrame, pair: tuple[str, str]) -> list[str]:
    """The algorithm selections both nodes of ``rows`` (``_bench_rows``)
    ran, default (the seed's) first."""
    return [
        s for s in ("default", "pinned") if all(((rows["node"] == n) & (rows["selection"] == s)).any() for n in pair)
    ]


def _pair_rows(
    per_rep: pd.DataFrame, pair: tuple[str, str], bench: str, selection: str | None = None
) -> tuple[pd.DataFrame, str] | str:
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
    algos = (
        "Open MPI's default algorithms"
        if selection == "default"
        else "pinned algorithms (the source used the defaults)"
    )
    return rows, f"{max(ranks)} ranks, {method}, {algos}"


def _ratios(rows: pd.DataFrame, pair: tuple[str, str], value: str = "time_ns") -> pd.DataFrame:
    """native/VM time per size, one column per repetition both measured
    (``value``: "time_ns", the median over a repetition's series, or
    "mean3_ns", the seed's mean of its 3 smallest)."""
    wide = rows.pivot_table(index=["bytes", "rep"], columns="node", values=value, aggfunc="first")
    wide = wide.dropna(subset=list(pair))
    return (wide[pair[0]] / wide[pair[1]]).unstack("rep")


def _seed_ratios(
    mean3: pd.DataFrame, pair: tuple[str, str], bench: str, ranks: int, selection: str | None = None
) -> pd.Series:
    sel = mean3[(mean3["bench"] == bench) & (mean3["ranks"] == ranks) & (mean3["transport"] == CROSS_NODE)]
    if selection is not None and "selection" in sel:
        sel = sel[sel["selection"] == selection]
    wide = sel.pivot_table(index="bytes", columns="node", values="mean3_ns", aggfunc="first")
    if not all(n in wide for n in pair):
        return pd.Series(dtype=float)
    return (wide[pair[0]] / wide[pair[1]]).dropna()


def _seed_text(x: float) -> str:
    return f"; the source's estimator (mean of 3 smallest series) {x:.3g}" if np.isfinite(x) else ""


def _ib_pair_ratio(
    ib: pd.DataFrame, pair: tuple[str, str], program: str, metric: str, size_pick: str
) -> tuple[int, np.ndarray] | None:
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


def _ib_fabric(ib: pd.DataFrame, pair: tuple[str, str]) -> str:
    """ "" when perftest ran over InfiniBand with an SR-IOV VF in the VM, as
    the seed's (the ib experiment's link layer and NIC columns), else why not."""
    rows = ib[ib["node"].isin(pair)]
    links = sorted(set(rows["link_layer"].dropna().astype(str)) - {""}) if "link_layer" in rows else []
    vf, nics = _vm_has_vf(rows, pair[1])
    if links == ["InfiniBand"] and vf:
        return ""
    return (
        f"the source ran {SEED_FABRIC}; perftest here ran over {', '.join(links) or 'an unrecorded link layer'} "
        f"with the VM's NICs {nics}, so the parts are context"
    )


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
    mismatch = _ib_fabric(measured, pair)
    lat = _ib_pair_ratio(measured, pair, "ib_send_lat", "t_typical_us", "min")
    # Bandwidth ratio VM/native = native/VM time, so the same orientation.
    bw = _ib_pair_ratio(measured, (pair[1], pair[0]), "ib_send_bw", "bw_average_mb_s", "max")
    out = []
    for got, label, key in (
        (lat, "native/VM ib_send_lat typical latency", "m1_latency_ratio"),
        (bw, "VM/native ib_send_bw average bandwidth", "m1_bandwidth_ratio"),
    ):
        if got is None:
            out.append(not_testable("M1", label, "perftest did not measure it on both kinds", QUOTED[key].display))
            continue
        size, per_rep = got
        out.append(
            finding(
                "M1",
                f"{label}, {size} B ({pair[0]} against {pair[1]})",
                per_rep,
                m1_rule(key),
                QUOTED[key].display,
                {"ib": []},
                context=bool(mismatch),
            )
        )
    if mismatch:
        out.insert(0, not_testable("M1", "latency and bandwidth ratios on the source's fabric", mismatch))
    return out


def m1(per_rep: pd.DataFrame, mean3: pd.DataFrame | None = None, ib: pd.DataFrame | None = None) -> list[Finding]:
    """M1. HPC HUB: VM latency 1.10 µs against 0.83 µs native (ratio 0.75),
    bandwidth 6053.6 against 6116.4 MB/s (0.99): from perftest (the ib
    experiment) where it ran on both kinds, as the seed; otherwise from MPI
    ping-pong across nodes, labelled so. ``per_rep``, ``mean3``:
    ``mpistats.seed_view``."""
    if ib is not None and len(ib):
        from_perftest = m1_perftest(ib)
        if from_perftest is not None:
            return from_perftest
    quoted = QUOTED["m1_latency_ratio"].display
    pair = _kind_pair(per_rep)
    if isinstance(pair, str):
        return [
            not_testable("M1", "latency ratio", pair, quoted),
            not_testable("M1", "bandwidth ratio", pair, QUOTED["m1_bandwidth_ratio"].display),
        ]
    got = _pair_rows(per_rep, pair, "pingpong")
    if isinstance(got, str):
        return [not_testable("M1", "latency ratio", got, quoted)]
    rows, how = got
    ratios = _ratios(rows, pair)
    if ratios.empty:
        return [not_testable("M1", "latency ratio", "no repetition measured ping-pong on both pairs")]
    mismatch = fabric_matches(per_rep, pair)
    seed = _seed_ratios(mean3, pair, "pingpong", int(rows["ranks"].iloc[0])) if mean3 is not None else None
    out = [not_testable("M1", "latency and bandwidth ratios on the source's fabric", mismatch)] if mismatch else []
    for label, size, key in (
        ("native/VM latency", ratios.index.min(), "m1_latency_ratio"),
        ("VM/native bandwidth (native/VM time)", ratios.index.max(), "m1_bandwidth_ratio"),
    ):
        s = float(seed.get(size, np.nan)) if seed is not None else np.nan
        out.append(
            finding(
                "M1",
                f"{label}, MPI ping-pong {int(size)} B across nodes ({how}){_seed_text(s)}",
                ratios.loc[size],
                m1_rule(key),
                QUOTED[key].display,
                {"mpi": []},
                context=bool(mismatch),
            )
        )
    return out


M2_MOSTLY = {"bcast": "m2_bcast_mostly", "allreduce": "m2_allreduce_mostly", "alltoall": "m2_alltoall_mostly"}


def m2(per_rep: pd.DataFrame, mean3: pd.DataFrame | None = None) -> list[Finding]:
    """M2, every part. HPC HUB: native/VM time ratio for bcast 0.55 at worst
    (16-32 KB) and >= 0.8 mostly; allreduce 0.7 at worst, >= 0.8 mostly;
    alltoall 0.87 at worst, >= 0.88 mostly; the VM penalty about 20 % on
    average. Per collective the worst ratio and where it falls, the share of
    sizes at or above the "mostly" bound, and over all three the average
    penalty, each within a repetition over the sizes both pairs measured.
    Where both algorithm selections ran, the pinned algorithms' parts follow
    as context; on another fabric than the seed's every part is context."""
    pair = _kind_pair(per_rep)
    if isinstance(pair, str):
        return [not_testable("M2", "collective ratios", pair)]
    mismatch = fabric_matches(per_rep, pair)
    out = _m2_parts(per_rep, mean3, pair, None, context=bool(mismatch))
    if all(len(_selections_both_ran(_bench_rows(per_rep, pair, b), pair)) == 2 for b in M2_MOSTLY):
        out += _m2_parts(per_rep, mean3, pair, "pinned", context=True)
    return ([not_testable("M2", "collective ratios on the source's fabric", mismatch)] if mismatch else []) + out


def _m2_parts(
    per_rep: pd.DataFrame, mean3_table: pd.DataFrame | None, pair: tuple[str, str], selection: str | None, context: bool
) -> list[Finding]:
    """M2's parts on one algorithm selection (None: ``_pair_rows``' choice)."""
    out, penalties = [], []
    second = " [second row: pinned algorithms, context]" if selection == "pinned" else ""
    for bench in ("bcast", "allreduce", "alltoall"):
        worst_key, mostly_key = f"m2_{bench}_worst_ratio", M2_MOSTLY[bench]
        got = _pair_rows(per_rep, pair, bench, selection)
        ratios = _ratios(got[0], pair) if not isinstance(got, str) else pd.DataFrame()
        if isinstance(got, str) or ratios.empty:
            why = got if isinstance(got, str) else f"no repetition measured {bench} on both pairs"
            out += [
                not_testable("M2", f"{bench} worst ratio{second}", why, QUOTED[worst_key].display, context=context),
                not_testable(
                    "M2",
                    f"{bench} sizes at or above the usual ratio{second}",
                    why,
                    QUOTED[mostly_key].display,
                    context=context,
                ),
            ]
            continue
        rows, how = got
        # The worst size, as the seed found it: each size's ratio from the mean
        # of its 3 smallest series, tested size by size (the minimum over
        # sizes would otherwise pick the noisiest).
        mean3 = _ratios(rows, pair, "mean3_ns") if "mean3_ns" in rows else ratios
        where = int(mean3.median(axis=1).idxmin())
        chosen = str(rows["selection"].iloc[0]) if "selection" in rows and len(rows) else None
        seed = (
            _seed_ratios(mean3_table, pair, bench, int(rows["ranks"].iloc[0]), chosen)
            if mean3_table is not None
            else None
        )
        seed_worst = float(seed.min()) if seed is not None and len(seed) else np.nan
        out.append(
            extreme_finding(
                "M2",
                f"{bench} worst native/VM time ratio over {len(mean3)} sizes (lowest "
                f"median at {where} B), mean of each repetition's 3 smallest series, across "
                f"nodes ({how}){_seed_text(seed_worst)}{second}",
                {str(size): mean3.loc[size] for size in mean3.index},
                "min",
                m2_worst_rule(worst_key),
                QUOTED[worst_key].display,
                {"mpi": []},
                context=context,
            )
        )
        bound = QUOTED[mostly_key].value
        share = (ratios >= bound).mean(axis=0)
        out.append(
            finding(
                "M2",
                f"{bench}: share of the {len(ratios)} sizes with native/VM \u2265 {bound:g}{second}",
                share.to_numpy(),
                MOSTLY_RULE,
                QUOTED[mostly_key].display,
                {"mpi": []},
                context=context,
                kind="share",
            )
        )
        penalties.append(1.0 / ratios)
    if penalties:
        per_rep_penalty = (pd.concat(penalties) - 1.0).mean(axis=0)
        out.append(
            finding(
                "M2",
                f"average VM time penalty (VM/native time \u2212 1, over collectives and sizes){second}",
                per_rep_penalty.to_numpy(),
                PENALTY_RULE,
                QUOTED["m2_mean_penalty"].display,
                {"mpi": []},
                context=context,
                kind="difference",
            )
        )
    else:
        out.append(
            not_testable(
                "M2",
                f"average VM penalty{second}",
                "no collective was measured on both pairs",
                QUOTED["m2_mean_penalty"].display,
                context=context,
            )
        )
    return out


# M3. HPC HUB: "results that seem contradictory, where the virtualized test
# runs slightly faster (2-5 % speedup) than the non-virtualized one": at some
# size the VM is 2 % or more faster, and nowhere more than 5 % ("slightly":
# a VM 20 % faster would be another finding). "Sometimes": at least one size.
M3_FASTER = 1.02
M3_AT_MOST = 1.05


def m3(per_rep: pd.DataFrame) -> list[Finding]:
    """M3: in at least one size of some collective the VM is at least 2 %
    faster than bare metal (native/VM time >= 1.02) and in none more than 5 %
    (<= 1.05), per repetition the largest native/VM ratio over collectives
    and sizes."""
    label = "largest native/VM time ratio over collectives and sizes (VM faster: above 1)"
    pair = _kind_pair(per_rep)
    if isinstance(pair, str):
        return [not_testable("M3", label, pair, "1.02-1.05")]
    mismatch = fabric_matches(per_rep, pair)
    cells: dict[str, pd.Series] = {}
    for bench in ("bcast", "allreduce", "alltoall"):
        got = _pair_rows(per_rep, pair, bench)
        if not isinstance(got, str):
            ratios = _ratios(got[0], pair, "mean3_ns" if "mean3_ns" in got[0] else "time_ns")
            cells.update({f"{bench} {int(size)} B": ratios.loc[size] for size in ratios.index})
    if not cells:
        return [not_testable("M3", label, "no collective was measured on both pairs", "1.02-1.05")]
    rule = SLIGHTLY_FASTER
    out = [
        extreme_finding(
            "M3",
            f"{label}, over {len(cells)} cells, each the mean of its 3 smallest series",
            cells,
            "max",
            rule,
            "1.02-1.05",
            {"mpi": []},
            context=bool(mismatch),
        )
    ]
    return ([not_testable("M3", "VM speed-ups on the source's fabric", mismatch)] if mismatch else []) + out


TESTS = {
    "M1": ClaimTest(
        "HPC HUB",
        "VM latency 1.10 against 0.83 µs native (ib_send_lat, InfiniBand in datagram mode); "
        "bandwidth 6053.6 against 6116.4 MB/s",
        "perftest native/VM ratios across two nodes of each kind, or, where perftest did not run on "
        "both kinds, MPI ping-pong across nodes (labelled so)",
        "two bare-metal nodes and two VMs with SR-IOV InfiniBand",
        "no InfiniBand here: a soft-RoCE guest tests the path only",
        short="a VM's InfiniBand latency is 0.75 of native, bandwidth 0.99",
    ),
    "M2": ClaimTest(
        "HPC HUB",
        "native/VM time ratios: bcast 0.55 at worst, allreduce 0.7, alltoall 0.87; mostly "
        "above 0.8-0.88; about 20 % penalty on average (the study's own summary also says 'no more "
        "than 20 %', which its +80 % worst case, bcast at 16 and 32 KB, contradicts)",
        "each collective's worst ratio over sizes (tested size by size, with the minimum's correction), "
        "its share of sizes above the bound, and the mean penalty",
        "as M1, OSU's method and Open MPI's default algorithms",
        "Open MPI 1.10, 20 ranks per node",
        short="collectives in a VM: worst 0.55-0.87 of native, 20 % penalty",
    ),
    "M3": ClaimTest(
        "HPC HUB",
        "sometimes the virtualized test is slightly faster (2-5 %)",
        "the largest native/VM time ratio over collectives and sizes, tested cell by cell with the "
        "maximum's correction",
        "as M1",
        "as M2",
        short="a VM is sometimes 2-5 % faster than bare metal",
    ),
}


def m1_rule(key: str) -> Rule:
    """M1's band around the source's ratio ``key``."""
    margin, why = M1_MARGINS[key]
    return within(QUOTED[key].value, margin, why)


def m2_worst_rule(key: str) -> Rule:
    """M2's band around the source's worst ratio ``key`` of a collective."""
    return within(QUOTED[key].value, M2_WORST_MARGIN, M2_WORST)


MOSTLY_RULE = above(MOSTLY, "'mostly': half the sizes or more")
PENALTY_RULE = within(QUOTED["m2_mean_penalty"].value, 0.25, M2_PENALTY)
SLIGHTLY_FASTER = band_between(M3_FASTER, M3_AT_MOST, "'slightly faster (2-5 % speedup)': the source's own range")
# Every rule M1-M3 judge a part by: pooling across runs judges each run's
# parts by these, never by a rule a run recorded.
RULES: dict[str, tuple[Rule, ...]] = {
    "M1": tuple(m1_rule(k) for k in M1_MARGINS),
    "M2": (
        *(m2_worst_rule(f"m2_{b}_worst_ratio") for b in ("bcast", "allreduce", "alltoall")),
        MOSTLY_RULE,
        PENALTY_RULE,
    ),
    "M3": (SLIGHTLY_FASTER,),
}
