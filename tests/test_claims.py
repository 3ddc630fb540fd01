"""The echo claims (U1-U4) on synthetic echo tables: paired ratios within
each repetition, each outcome, and "not testable" with its reason."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from iolab.analysis import claims, echostats
from iolab.analysis.verdicts import Outcome

DRIFT = [1.0, 1.3, 0.75, 1.15, 0.9, 1.05]   # each repetition's host speed, shared by its cells


def echo_table(rates: dict[str, float], cells: list[tuple[int, int]], noise: float = 0.0,
               seed: int = 0, cpu: dict[str, float] | None = None) -> pd.DataFrame:
    """One row per repetition, preset and cell: rps = rate * that repetition's
    drift; server CPU per request = cpu[preset] (default 1000 ns) / drift."""
    rng = np.random.default_rng(seed)
    rows = []
    for rep, d in enumerate(DRIFT, 1):
        for preset, rate in rates.items():
            for c, b in cells:
                rows.append({"node": "n1", "rep": rep, "preset": preset, "connections": c, "bytes": b,
                             "status": "ok", "rps": rate * d * (1 + noise * rng.standard_normal()),
                             "server_ns_per_request": (cpu or {}).get(preset, 1000.0) / d})
    return pd.DataFrame(rows)


SOURCE_CELLS = [(50, 128), (50, 512), (500, 128), (500, 512)]
PART3_CELLS = [(100, 128), (500, 128), (1000, 1024)]


def test_u1_only_judges_the_sources_cells_on_throughput_and_cpu() -> None:
    table = echo_table({"default": 110.0, "epoll": 100.0}, [*SOURCE_CELLS, (1, 128), (50, 1024)],
                       cpu={"default": 1040.0, "epoll": 1000.0})
    parts = claims.u1(table)
    assert [p.part.split(",")[0] for p in parts] == [c for c in ["c=50 128 B", "c=50 512 B", "c=500 128 B",
                                                                "c=500 512 B"] for _ in range(2)]
    rps, cpu = parts[0::2], parts[1::2]
    # The drift cancels within each repetition: every ratio is exact.
    assert all(p.outcome is Outcome.REPRODUCED and p.estimate.value == pytest.approx(1.1) for p in rps)
    assert all("CPU load about the same" in p.part and p.estimate.value == pytest.approx(1.04)
               and p.outcome is Outcome.REPRODUCED for p in cpu)
    assert rps[0].quoted.startswith("1.12") and cpu[0].quoted == ""
    assert parts[0].decides == {"echo": [["default", 50, 128], ["epoll", 50, 128]]}
    # io_uring spending 30 % more CPU per request is not "about the same".
    heavy = claims.u1(echo_table({"default": 110.0, "epoll": 100.0}, [(50, 128)],
                                 cpu={"default": 1300.0, "epoll": 1000.0}))
    assert heavy[1].outcome is Outcome.NOT_REPRODUCED


@pytest.mark.parametrize("uring,noise,outcome", [
    (110.0, 0.0, Outcome.REPRODUCED), (90.0, 0.0, Outcome.NOT_REPRODUCED), (100.0, 0.08, Outcome.UNDECIDED)])
def test_u1_outcomes(uring: float, noise: float, outcome: Outcome) -> None:
    parts = claims.u1(echo_table({"default": uring, "epoll": 100.0}, [(50, 128)], noise=noise, seed=4))
    assert parts[0].outcome is outcome


def test_u1_not_testable_without_the_sources_cells() -> None:
    (part,) = claims.u1(echo_table({"default": 1.0, "epoll": 1.0}, [(1, 1024)]))
    assert part.outcome is Outcome.NOT_TESTABLE and "none of the source's cells" in part.reason


def _part3(rates_at: dict[str, dict[int, float]], cells: list[tuple[int, int]]) -> pd.DataFrame:
    """Part 3's systems with a rate per preset and c (drift applied)."""
    table = echo_table({p: 1.0 for p in rates_at}, cells)
    rate = [rates_at[p].get(c, 1.0) for p, c in zip(table["preset"], table["connections"], strict=True)]
    return table.assign(rps=np.array(rate) * table["rep"].map(dict(enumerate(DRIFT, 1))))


def test_u2_judges_the_go_systems_in_part_3s_cells_with_the_c_analogues_as_context() -> None:
    table = _part3({"go_uring": {100: 0.3, 500: 1.1, 1000: 1.2}, "go_net": {100: 1.0, 500: 1.0, 1000: 1.0},
                    "rings_granule": {100: 0.8, 500: 0.9, 1000: 0.9}, "epoll": {100: 1.0, 500: 1.0, 1000: 1.0}},
                   [*PART3_CELLS, (50, 128)])
    parts = claims.u2(table.assign(cpus=4))
    counted = [p for p in parts if not p.context]
    assert [p.part.split(",")[0] for p in counted] == ["c=100 128 B", "c=500 128 B", "c=1000 1024 B"]
    assert all(p.outcome is Outcome.REPRODUCED and "Go reactor/Go net" in p.part for p in counted)
    assert "few connections" in counted[0].part and "many connections" in counted[1].part
    assert counted[0].quoted.startswith("0.26")                 # 34 202 / 132 664, as printed
    second = [p for p in parts if p.context]
    assert len(second) == 3 and all("second row" in p.part and p.quoted == "" for p in second)
    assert [p.outcome for p in second] == [Outcome.REPRODUCED, Outcome.NOT_REPRODUCED, Outcome.NOT_REPRODUCED]
    # Without the Go servers the claim is not testable; the C row stays as context.
    no_go = claims.u2(table[~table["preset"].str.startswith("go_")].assign(cpus=4))
    assert no_go[0].outcome is Outcome.NOT_TESTABLE and no_go[0].reason == "not measured: go_uring, go_net"
    assert all(p.context for p in no_go[1:]) and len(no_go) == 4


def test_u2_needs_as_many_cpus_as_the_sources_machine() -> None:
    table = _part3({"go_uring": {100: 0.3, 500: 1.1}, "go_net": {100: 1.0, 500: 1.0}},
                   [(100, 128), (500, 128)]).assign(cpus=2)
    first, *rest = claims.u2(table)
    assert first.outcome is Outcome.NOT_TESTABLE
    assert first.reason.startswith("needs >= 4 CPUs (the source's reactor ran 6 rings on 4 cores; this node "
                                   "has 2)")
    # What was measured is still shown, as context: it decides nothing.
    assert len(rest) == 2 and all(p.context and p.outcome is Outcome.REPRODUCED for p in rest)


def test_u3_every_part_3_cell_and_a_missing_preset() -> None:
    table = echo_table({"go_uring_sqpoll": 120.0, "go_uring": 100.0, "sqpoll": 90.0, "default": 100.0},
                       PART3_CELLS)
    parts = claims.u3(table)
    counted = [p for p in parts if not p.context]
    assert len(counted) == 3 and all(p.outcome is Outcome.NOT_REPRODUCED for p in counted)
    assert all(p.outcome is Outcome.REPRODUCED for p in parts if p.context)
    (missing, *context) = claims.u3(table[table["preset"] != "go_uring_sqpoll"])
    assert missing.outcome is Outcome.NOT_TESTABLE and missing.reason == "not measured: go_uring_sqpoll"
    assert len(context) == 3 and all(p.context for p in context)


def test_u4_equivalence_parts_use_the_margin() -> None:
    rates = {"default": 100.0, "sqpoll": 100.0, "sqpoll_sq_aff_spare": 90.0, "async_iowq_spare": 125.0,
             "buf_select": 102.0, "fixed_files": 110.0}
    sq_aff, async_, buf_select, fixed = claims.u4(echo_table(rates, [(50, 128), (500, 128), (500, 512)]))
    assert "c=500 128 B" in sq_aff.part                      # the largest c, smallest size
    assert sq_aff.outcome is Outcome.REPRODUCED and async_.outcome is Outcome.REPRODUCED
    assert buf_select.outcome is Outcome.REPRODUCED          # 1.02: inside +-5 %
    assert fixed.outcome is Outcome.NOT_REPRODUCED           # 1.10: wholly outside


def test_u4_never_judges_helpers_that_share_the_servers_cpu() -> None:
    # sqpoll_sq_aff and async keep the SQPOLL thread and io-wq on the
    # server's CPU: U4 reads only the presets that move them off it.
    rates = {"default": 100.0, "sqpoll": 100.0, "sqpoll_sq_aff": 90.0, "async": 125.0,
             "buf_select": 100.0, "fixed_files": 100.0}
    sq_aff, async_, *_ = claims.u4(echo_table(rates, [(500, 128)]).assign(cpus=8))
    assert sq_aff.outcome is async_.outcome is Outcome.NOT_TESTABLE
    assert sq_aff.reason == "not measured: sqpoll_sq_aff_spare"
    assert async_.reason == "not measured: async_iowq_spare"


def test_c3_throughput_part_needs_1000_connections_and_no_io_wq() -> None:
    cost = pd.DataFrame({"per_sqe_over_epoll": [0.8] * 6})
    _, throughput = claims.c3(cost, "on", echo_table({"multishot": 1.0, "epoll": 1.0}, [(500, 128)]))
    assert throughput.outcome is Outcome.NOT_TESTABLE and "c = 1000 was not measured (largest: 500" in throughput.reason
    table = echo_table({"multishot": 112.0, "epoll": 100.0}, [(1000, 128)]).assign(iowq_workers=0)
    _, throughput = claims.c3(cost, "on", table)
    assert throughput.outcome is Outcome.REPRODUCED and throughput.estimate.value == pytest.approx(1.12)
    assert "no io-wq worker ran" in throughput.part
    table.loc[3, "iowq_workers"] = 2
    _, throughput = claims.c3(cost, "on", table)
    assert throughput.outcome is Outcome.NOT_TESTABLE and throughput.reason.startswith("io-wq workers ran (2")


def test_claims_that_need_more_cpus_than_the_node_has_are_not_testable() -> None:
    rates = {"default": 100.0, "epoll": 100.0, "rings_granule": 90.0, "sqpoll": 100.0, "sqpoll_sq_aff_spare": 90.0,
             "async_iowq_spare": 125.0, "buf_select": 100.0, "fixed_files": 100.0}
    two = echo_table(rates, [(50, 128), (500, 128)]).assign(cpus=2)
    sq_aff, async_, buf_select, fixed = claims.u4(two)
    assert sq_aff.outcome is async_.outcome is Outcome.NOT_TESTABLE
    assert "needs a CPU besides the server's and the load generator's (this node has 2)" in sq_aff.reason
    assert buf_select.outcome is Outcome.REPRODUCED and fixed.outcome is Outcome.REPRODUCED
    # Enough CPUs: tested.
    assert claims.u4(two.assign(cpus=8))[0].outcome is not Outcome.NOT_TESTABLE


def test_the_claims_use_the_sources_setup_where_it_ran() -> None:
    ours = echo_table({"default": 110.0, "epoll": 100.0}, [(50, 128)]).assign(client="event-loop",
                                                                              layout="pinned")
    theirs = echo_table({"default": 90.0, "epoll": 100.0}, [(50, 128)]).assign(
        client="thread-per-connection", layout="shared")
    half = echo_table({"default": 95.0, "epoll": 100.0}, [(50, 128)]).assign(
        client="thread-per-connection", layout="pinned")
    both = pd.concat([ours, theirs, half], ignore_index=True)
    part = claims.u1(echostats.one_setup(both, echostats.SOURCE_SETUP))[0]
    assert part.outcome is Outcome.NOT_REPRODUCED and part.estimate.value == pytest.approx(0.9)
    assert echostats.setup_note(echostats.one_setup(both, echostats.SOURCE_SETUP)) == \
        "thread-per-connection client, shared CPUs, as the sources"
    assert echostats.setup_note(echostats.one_setup(both, echostats.OUR_SETUP)) == \
        "event-loop client, pinned CPUs; the sources used thread-per-connection, shared CPUs"
    # A node that ran only ours keeps ours, and says so.
    part = claims.u1(echostats.one_setup(ours, echostats.SOURCE_SETUP))[0]
    assert part.outcome is Outcome.REPRODUCED
    # Several setups in one cell are never pooled into one ratio.
    with pytest.raises(ValueError, match="keep one setup"):
        claims.u1(both)
