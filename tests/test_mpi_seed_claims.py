"""M1/M2 (HPC HUB) on synthetic two-kind data: only cross-node, dedicated
launches count, and every part of each claim gives each outcome."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from iolab import claims
from iolab.claims.verdicts import Outcome, combine
from iolab.report import claim_texts

DRIFT = [1.0, 1.3, 0.8, 1.1, 0.9, 1.2, 1.05, 0.85, 1.15, 0.95]  # shared by both pairs within a repetition
SIZES = [4, 1024, 16384, 65536, 1 << 20]


def rows(
    node: str,
    kind: str,
    bench: str,
    size: int,
    time_ns: float,
    transport: str = "nodes",
    ranks: int = 16,
    hosts: int = 2,
    oversubscribed: bool = False,
    pinned: bool = False,
    method: str = "osu",
    fabric: str = "infiniband",
) -> list[dict]:
    """Launch rows on the seed's fabric unless ``fabric`` says otherwise: the
    VM's NICs include an SR-IOV virtual function."""
    nic = "paravirtual, sr-iov vf" if kind == "vm" else "physical"
    return [
        {
            "node": node,
            "kind": kind,
            "transport": transport,
            "bench": bench,
            "ranks": ranks,
            "bytes": size,
            "rep": rep,
            "time_ns": time_ns * d,
            "method": method,
            "oversubscribed": oversubscribed,
            "pinned": pinned,
            "hosts": hosts,
            "fabric": fabric,
            "nic_kind": nic,
        }
        for rep, d in enumerate(DRIFT, 1)
    ]


def two_pairs(
    ratio: dict[str, list[float]], latency: float = 0.75, bandwidth: float = 0.99, **extra: object
) -> pd.DataFrame:
    """A bare-metal pair and a VM pair; ``ratio[bench]`` is native/VM time
    per size in SIZES."""
    out = []
    for bench, per_size in ratio.items():
        for size, r in zip(SIZES, per_size, strict=True):
            out += rows("metal", "bare-metal", bench, size, 1e4 * r, **extra)
            out += rows("guest", "vm", bench, size, 1e4, **extra)
    out += rows("metal", "bare-metal", "pingpong", 1, 800 * latency, **extra)
    out += rows("guest", "vm", "pingpong", 1, 800, **extra)
    out += rows("metal", "bare-metal", "pingpong", 1 << 20, 1e6 * bandwidth, **extra)
    out += rows("guest", "vm", "pingpong", 1 << 20, 1e6, **extra)
    return pd.DataFrame(out)


SEED_LIKE = {
    "bcast": [0.9, 0.85, 0.55, 0.8, 0.95],
    "allreduce": [0.9, 0.7, 0.85, 0.8, 0.9],
    "alltoall": [0.87, 0.9, 0.95, 0.9, 0.88],
}


def by_part(findings: list) -> dict[str, object]:
    return {f.part.split(" (")[0].split(";")[0]: f for f in findings}


def test_seed_like_data_reproduces_every_part() -> None:
    per_rep = two_pairs(SEED_LIKE)
    latency, bandwidth = claims.m1(per_rep)
    assert latency.estimate.value == pytest.approx(0.75) and latency.outcome is Outcome.REPRODUCED
    assert "MPI ping-pong 1 B across nodes" in latency.part and "OSU's method" in latency.part
    assert bandwidth.outcome is Outcome.REPRODUCED
    found = claims.m2(per_rep)
    assert len(found) == 7
    for f in found:
        assert f.outcome is Outcome.REPRODUCED, f.summary()
    bcast_worst = found[0]
    assert bcast_worst.estimate.value == pytest.approx(0.55) and "median at 16384 B" in bcast_worst.part
    assert "16 ranks" in bcast_worst.part and "default algorithms" in bcast_worst.part
    # bcast: 4 of 5 sizes at or above 0.8.
    assert found[1].estimate.value == pytest.approx(0.8)
    penalty = found[-1]
    want = np.mean([1 / r - 1 for per in SEED_LIKE.values() for r in per])
    assert penalty.estimate.value == pytest.approx(want)


def test_no_penalty_is_not_reproduced() -> None:
    same = {b: [1.0] * len(SIZES) for b in ("bcast", "allreduce", "alltoall")}
    found = claims.m2(two_pairs(same, latency=1.0, bandwidth=1.0))
    assert [f.outcome for f in found] == [Outcome.NOT_REPRODUCED, Outcome.REPRODUCED] * 3 + [Outcome.NOT_REPRODUCED]
    # "Mostly at or above 0.8" holds with no penalty; the worst ratios and the
    # 20 % average penalty do not (alltoall's worst-ratio band once reached
    # 1.0005, and read no penalty as its 0.87).
    assert found[-1].estimate.value == pytest.approx(0.0)
    latency, bandwidth = claims.m1(two_pairs(same, latency=1.0, bandwidth=0.5))
    assert latency.outcome is Outcome.NOT_REPRODUCED and bandwidth.outcome is Outcome.NOT_REPRODUCED


def test_shares_and_a_worst_ratio_that_straddles_its_band() -> None:
    per_rep = two_pairs(SEED_LIKE)
    noise = {r: 0.79 if r % 2 else 0.81 for r in range(1, len(DRIFT) + 1)}
    sel = (per_rep["node"] == "metal") & (per_rep["bench"] == "alltoall") & per_rep["bytes"].isin(SIZES[:3])
    per_rep.loc[sel, "time_ns"] = [1e4 * noise[r] * DRIFT[r - 1] for r in per_rep.loc[sel, "rep"]]
    alltoall_share = next(f for f in claims.m2(per_rep) if f.part.startswith("alltoall: share"))
    # 0.79-0.81 against a bound of 0.88: no size of the three passes; the
    # other two (0.9, 0.88) do: 2 of 5 every time.
    assert alltoall_share.estimate.value == pytest.approx(0.4)
    assert alltoall_share.outcome is Outcome.NOT_REPRODUCED
    bcast = per_rep.copy()
    flip = (bcast["node"] == "metal") & (bcast["bench"] == "bcast") & (bcast["bytes"] == 65536)
    bcast.loc[flip, "time_ns"] = [1e4 * (0.75 if r % 2 else 0.85) * DRIFT[r - 1] for r in bcast.loc[flip, "rep"]]
    share = next(f for f in claims.m2(bcast) if f.part.startswith("bcast: share"))
    assert sorted(set(share.per_rep)) == [0.6, 0.8] and share.outcome is Outcome.REPRODUCED
    worst = two_pairs(SEED_LIKE)
    flip = (worst["node"] == "metal") & (worst["bench"] == "allreduce") & (worst["bytes"] == 1024)
    worst.loc[flip, "time_ns"] = [1e4 * (0.5 if r % 2 else 0.9) * DRIFT[r - 1] for r in worst.loc[flip, "rep"]]
    allreduce_worst = next(f for f in claims.m2(worst) if f.part.startswith("allreduce worst"))
    assert allreduce_worst.outcome is Outcome.UNDECIDED, allreduce_worst.summary()


def test_intra_node_transports_and_oversubscribed_launches_are_ignored() -> None:
    per_rep = two_pairs(SEED_LIKE)
    # A shm launch and an oversubscribed cross-node launch that would make
    # everything "not reproduced" if they counted.
    noise = pd.concat(
        [
            two_pairs({b: [0.1] * len(SIZES) for b in SEED_LIKE}, latency=0.1, bandwidth=0.1, transport="shm", hosts=1),
            two_pairs(
                {b: [0.1] * len(SIZES) for b in SEED_LIKE}, latency=0.1, bandwidth=0.1, ranks=64, oversubscribed=True
            ),
        ]
    )
    found = [*claims.m1(pd.concat([per_rep, noise])), *claims.m2(pd.concat([per_rep, noise]))]
    assert all(f.outcome is Outcome.REPRODUCED for f in found), [f.summary() for f in found]


def test_intra_node_data_alone_is_not_testable() -> None:
    shm_only = two_pairs(SEED_LIKE, transport="shm", hosts=1)
    for f in [*claims.m1(shm_only), *claims.m2(shm_only)]:
        assert f.outcome is Outcome.NOT_TESTABLE
        assert "needs MPI between two bare-metal nodes and between two VMs" in f.reason and "shared memory" in f.reason
    vm_pair_only = two_pairs(SEED_LIKE)
    vm_pair_only = vm_pair_only[vm_pair_only["kind"] == "vm"]
    (f,) = claims.m2(vm_pair_only)
    assert f.outcome is Outcome.NOT_TESTABLE and "needs MPI between two bare-metal nodes;" in f.reason


def test_default_algorithms_are_preferred_and_pinned_ones_are_labelled() -> None:
    pinned = two_pairs(SEED_LIKE, pinned=True)
    assert "pinned algorithms (the source used the defaults)" in claims.m2(pinned)[0].part
    # With both, the default selection decides (here it reproduces) and the
    # pinned algorithms follow as a second row of context parts, which would
    # not reproduce and do not count.
    mixed = pd.concat([two_pairs(SEED_LIKE), two_pairs({b: [0.1] * len(SIZES) for b in SEED_LIKE}, pinned=True)])
    found = claims.m2(mixed)
    decided, second = [f for f in found if not f.context], [f for f in found if f.context]
    assert len(decided) == len(second) == 7
    assert all(
        f.outcome is Outcome.REPRODUCED and "Open MPI's default algorithms" in f.part
        for f in decided
        if "worst" in f.part
    )
    assert all("[second row: pinned algorithms, context]" in f.part for f in second)
    assert second[0].outcome is Outcome.NOT_REPRODUCED and second[0].estimate.value == pytest.approx(0.1)
    assert combine(found) is Outcome.REPRODUCED
    assert claim_texts.claim_verdicts(found)["M2"] == "reproduced (decided 7 of 7 parts, 0 not testable here)"


def test_another_fabric_than_the_seeds_makes_every_part_context() -> None:
    tcp = two_pairs(SEED_LIKE, fabric="tcp")
    for fn in (claims.m1, claims.m2, claims.m3):
        first, *rest = fn(tcp)
        assert first.outcome is Outcome.NOT_TESTABLE and not first.context
        assert first.reason.startswith(
            "the source ran InfiniBand verbs between the nodes, an SR-IOV virtual "
            "function in each VM; these launches ran tcp"
        )
        assert rest and all(f.context for f in rest)
    # An InfiniBand fabric with a VM whose NIC is paravirtual only: still not the seed's.
    no_vf = two_pairs(SEED_LIKE).assign(nic_kind="paravirtual")
    assert "VM's NICs paravirtual" in claims.m2(no_vf)[0].reason


def noisy_pairs(
    rng: np.random.Generator,
    ratio: float | dict[tuple[str, int], float],
    reps: int,
    sizes: list[int],
    noise: float = 0.02,
) -> pd.DataFrame:
    """Both pairs over ``reps`` repetitions, each size's time with its own
    lognormal noise per node; native/VM is ``ratio`` (per (bench, size))."""
    out = []
    for bench in ("bcast", "allreduce", "alltoall"):
        for size in sizes:
            r = ratio if isinstance(ratio, float) else ratio.get((bench, size), 1.0)
            for rep in range(1, reps + 1):
                for node, kind, t in (("metal", "bare-metal", 1e4 * r), ("guest", "vm", 1e4)):
                    nic = "paravirtual, sr-iov vf" if kind == "vm" else "physical"
                    out.append(
                        {
                            "node": node,
                            "kind": kind,
                            "transport": "nodes",
                            "bench": bench,
                            "ranks": 16,
                            "bytes": size,
                            "rep": rep,
                            "time_ns": t * rng.lognormal(0, noise),
                            "method": "osu",
                            "oversubscribed": False,
                            "pinned": False,
                            "hosts": 2,
                            "fabric": "infiniband",
                            "nic_kind": nic,
                        }
                    )
    return pd.DataFrame(out)


def _judged(findings: list) -> list:
    from iolab.claims import evidence
    from iolab.claims.verdicts import settle

    settle(findings, evidence.FIXED, 0.0, predict=False)
    return findings


SIZES_21 = [1 << k for k in range(21)]


@pytest.mark.parametrize("runs", [60, pytest.param(400, marks=pytest.mark.full)])
def test_m3_under_pure_noise_is_rarely_reproduced(runs: int) -> None:
    # Every native/VM ratio is 1.00, with 2 % noise, over 63 cells. The old
    # statistic (each repetition's largest ratio over the cells) sat above
    # 1.02 in every run and read "reproduced" in all of them; tested cell by
    # cell with the maximum's correction, at 12 repetitions (enough for the
    # outcome to be reachable over 63 cells) it is reproduced at most 2.5 %
    # of the time.
    rng = np.random.default_rng(31)
    reproduced, old = 0, 0
    for _ in range(runs):
        (part,) = _judged(claims.m3(noisy_pairs(rng, 1.0, 12, SIZES_21)))
        assert part.reachable[0], "12 repetitions make 'reproduced' reachable over 63 cells"
        reproduced += part.outcome is Outcome.REPRODUCED
        old += float(np.median(part.per_rep)) >= claims.M3_FASTER
    assert old == runs
    assert reproduced / runs <= 0.025 + 2 * math.sqrt(0.025 * 0.975 / runs), reproduced


def test_m3_finds_a_real_speed_up_at_a_few_cells_and_reads_a_large_one_as_another_finding() -> None:
    # A VM 3.5 % faster at three cells: the same test can come out the other way.
    rng = np.random.default_rng(32)
    cells = [("bcast", 1 << 14), ("allreduce", 1 << 14), ("alltoall", 1 << 14)]
    slight = dict.fromkeys(cells, 1.035)
    outcomes = [_judged(claims.m3(noisy_pairs(rng, slight, 12, SIZES_21, 0.005)))[0].outcome for _ in range(20)]
    assert outcomes.count(Outcome.REPRODUCED) >= 15
    # "Slightly faster (2-5 %)": a VM 10 % faster is not what the source saw.
    large = dict.fromkeys(cells, 1.10)
    outcomes = [_judged(claims.m3(noisy_pairs(rng, large, 12, SIZES_21, 0.005)))[0].outcome for _ in range(5)]
    assert outcomes.count(Outcome.NOT_REPRODUCED) == 5


def test_m2_worst_ratio_bands_keep_the_collectives_apart_and_below_one() -> None:
    from iolab.claims import hpchub

    bands = [(r * (1 - hpchub.M2_WORST_MARGIN), r * (1 + hpchub.M2_WORST_MARGIN)) for r in hpchub.M2_WORST_RATIOS]
    assert all(a[1] < b[0] for a, b in itertools.pairwise(bands)) and bands[-1][1] < 1
    # The widest whole per cent that does so: one more and two bands meet.
    wider = hpchub.M2_WORST_MARGIN + 0.01
    assert any(
        r1 * (1 + wider) >= r2 * (1 - wider)
        for r1, r2 in zip(hpchub.M2_WORST_RATIOS, hpchub.M2_WORST_RATIOS[1:], strict=False)
    )
    assert "0.495\u20130.605" in hpchub.M2_WORST and "below 1" in hpchub.M2_WORST
    # M1's margins are named once and keep what their reasons say.
    lat, bw = hpchub.M1_MARGINS["m1_latency_ratio"][0], hpchub.M1_MARGINS["m1_bandwidth_ratio"][0]
    assert 0.75 * (1 + lat) < 0.95 and 0.75 * (1 - lat) > 0.5  # a visible penalty, short of a doubled latency
    assert 0.99 * (1 + bw) > 1.0  # admits a VM a few per cent faster, as its reason says


def test_m3_a_vm_faster_at_some_size() -> None:
    faster = {b: [*r[:-1], 1.04] for b, r in SEED_LIKE.items()}
    (part,) = claims.m3(two_pairs(faster))
    assert part.outcome is Outcome.REPRODUCED and part.estimate.value == pytest.approx(1.04)
    (part,) = claims.m3(two_pairs(SEED_LIKE))
    assert part.outcome is Outcome.NOT_REPRODUCED


def test_the_seeds_estimator_is_shown_beside_the_median() -> None:
    per_rep = two_pairs(SEED_LIKE)
    mean3 = pd.DataFrame(
        [
            {
                "node": n,
                "kind": k,
                "transport": "nodes",
                "bench": "bcast",
                "ranks": 16,
                "bytes": s,
                "method": "osu",
                "mean3_ns": 1e4 * (r if n == "metal" else 1.0),
            }
            for n, k in (("metal", "bare-metal"), ("guest", "vm"))
            for s, r in zip(SIZES, [0.9, 0.85, 0.6, 0.8, 0.95], strict=True)
        ]
    )
    assert "the source's estimator (mean of 3 smallest series) 0.6" in claims.m2(per_rep, mean3)[0].part


def perftest_rows(latency_ratio: list[float], bandwidth_ratio: float = 0.99) -> pd.DataFrame:
    """ib experiment rows for a bare-metal and a VM node; latency native/VM
    per repetition as given, bandwidth VM/native."""
    out = []
    for rep, (r, d) in enumerate(zip(latency_ratio, DRIFT, strict=True), 1):
        for node, kind, lat, bw in (
            ("metal", "bare-metal", 1.0 * r * d, 6000.0),
            ("guest", "vm", 1.0 * d, 6000.0 * bandwidth_ratio),
        ):
            fabric = {"link_layer": "InfiniBand", "nic_kind": "sr-iov vf" if kind == "vm" else "physical"}
            out += [
                {
                    "node": node,
                    "kind": kind,
                    "rep": rep,
                    "program": "ib_send_lat",
                    "bytes": 2,
                    "iterations": 1000,
                    "metric": "t_typical_us",
                    "value": lat,
                    **fabric,
                },
                {
                    "node": node,
                    "kind": kind,
                    "rep": rep,
                    "program": "ib_send_bw",
                    "bytes": 1 << 23,
                    "iterations": 1000,
                    "metric": "bw_average_mb_s",
                    "value": bw,
                    **fabric,
                },
            ]
    return pd.DataFrame(out)


def test_m1_uses_perftest_where_both_kinds_ran_it() -> None:
    mpi_only = two_pairs(SEED_LIKE, latency=0.1)  # MPI would say "not reproduced"
    latency, bandwidth = claims.m1(mpi_only, ib=perftest_rows([0.75] * len(DRIFT)))
    assert latency.part.startswith("native/VM ib_send_lat typical latency, 2 B (metal against guest)")
    assert latency.estimate.value == pytest.approx(0.75) and latency.outcome is Outcome.REPRODUCED
    assert bandwidth.estimate.value == pytest.approx(0.99) and bandwidth.outcome is Outcome.REPRODUCED
    latency, _ = claims.m1(mpi_only, ib=perftest_rows([1.0] * len(DRIFT)))
    assert latency.outcome is Outcome.NOT_REPRODUCED
    # Repetitions on both sides of the band's edge (0.75 - 20 % = 0.6): undecided.
    latency, _ = claims.m1(mpi_only, ib=perftest_rows([0.55, 0.65] * (len(DRIFT) // 2)))
    assert latency.outcome is Outcome.UNDECIDED


def test_m1_bandwidth_is_taken_where_both_kinds_printed_a_reading() -> None:
    # The guest's 8 MiB row printed 0.00 MB/s (below the print's resolution,
    # or its clock failed): the ratio comes from 4 MiB, not 0/6000.
    rows = perftest_rows([0.75] * len(DRIFT), bandwidth_ratio=0.9)
    bw = rows[rows["program"] == "ib_send_bw"]
    half = bw.assign(bytes=1 << 22)
    rows.loc[(rows["program"] == "ib_send_bw") & (rows["kind"] == "vm"), "value"] = 0.0
    _, bandwidth = claims.m1(two_pairs(SEED_LIKE), ib=pd.concat([rows, half], ignore_index=True))
    assert bandwidth.part.startswith("VM/native ib_send_bw average bandwidth, 4194304 B")
    assert bandwidth.estimate.value == pytest.approx(0.9)


def test_m1_falls_back_to_mpi_without_perftest_on_both_kinds() -> None:
    vm_only = perftest_rows([0.75] * len(DRIFT))
    vm_only = vm_only[vm_only["kind"] == "vm"]
    latency, _ = claims.m1(two_pairs(SEED_LIKE), ib=vm_only)
    assert latency.part.startswith("native/VM latency, MPI ping-pong 1 B across nodes")
    skipped = pd.DataFrame(
        [
            {
                "node": "metal",
                "kind": "bare-metal",
                "rep": 1,
                "program": None,
                "bytes": None,
                "iterations": None,
                "metric": None,
                "value": None,
                "skipped": "no RDMA device",
            }
        ]
    )
    latency, _ = claims.m1(two_pairs(SEED_LIKE), ib=skipped)
    assert "MPI ping-pong" in latency.part
