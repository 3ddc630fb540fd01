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
               seed: int = 0) -> pd.DataFrame:
    """One row per repetition, preset and cell: rps = rate * that repetition's drift."""
    rng = np.random.default_rng(seed)
    rows = []
    for rep, d in enumerate(DRIFT, 1):
        for preset, rate in rates.items():
            for c, b in cells:
                rows.append({"node": "n1", "rep": rep, "preset": preset, "connections": c, "bytes": b,
                             "status": "ok", "rps": rate * d * (1 + noise * rng.standard_normal())})
    return pd.DataFrame(rows)


SOURCE_CELLS = [(50, 128), (50, 512), (500, 128), (500, 512)]


def test_u1_only_judges_the_sources_cells() -> None:
    table = echo_table({"default": 110.0, "epoll": 100.0}, [*SOURCE_CELLS, (1, 128), (50, 1024)])
    parts = claims.u1(table)
    assert [p.part.split(",")[0] for p in parts] == ["c=50 128 B", "c=50 512 B", "c=500 128 B", "c=500 512 B"]
    # The drift cancels within each repetition: every ratio is exactly 1.1.
    assert all(p.outcome is Outcome.REPRODUCED and p.estimate.value == pytest.approx(1.1) for p in parts)
    assert parts[0].decides == {"echo": [["default", 50, 128], ["epoll", 50, 128]]}


@pytest.mark.parametrize("uring,noise,outcome", [
    (110.0, 0.0, Outcome.REPRODUCED), (90.0, 0.0, Outcome.NOT_REPRODUCED), (100.0, 0.08, Outcome.UNDECIDED)])
def test_u1_outcomes(uring: float, noise: float, outcome: Outcome) -> None:
    parts = claims.u1(echo_table({"default": uring, "epoll": 100.0}, [(50, 128)], noise=noise, seed=4))
    assert parts[0].outcome is outcome


def test_u1_not_testable_without_the_sources_cells() -> None:
    (part,) = claims.u1(echo_table({"default": 1.0, "epoll": 1.0}, [(1, 1024)]))
    assert part.outcome is Outcome.NOT_TESTABLE and "none of the source's cells" in part.reason


def test_u2_few_connections_slower_many_ahead() -> None:
    parts = claims.u2(echo_table({"rings_granule": 1.0, "epoll": 1.0}, [(50, 128), (500, 128)])
                      .assign(rps=lambda t: np.where((t["preset"] == "rings_granule") & (t["connections"] == 50),
                                                     0.5, np.where(t["preset"] == "rings_granule", 1.2, 1.0))
                              * t["rep"].map(dict(enumerate(DRIFT, 1)))))
    assert [p.outcome for p in parts] == [Outcome.REPRODUCED, Outcome.REPRODUCED]
    assert "few connections" in parts[0].part and "many connections" in parts[1].part


def test_u3_every_cell_and_a_missing_preset() -> None:
    parts = claims.u3(echo_table({"sqpoll": 120.0, "default": 100.0}, SOURCE_CELLS))
    assert len(parts) == 4 and all(p.outcome is Outcome.NOT_REPRODUCED for p in parts)
    (missing,) = claims.u3(echo_table({"default": 100.0}, SOURCE_CELLS))
    assert missing.outcome is Outcome.NOT_TESTABLE and missing.reason == "not measured: sqpoll"


def test_u4_equivalence_parts_use_the_margin() -> None:
    rates = {"default": 100.0, "sqpoll": 100.0, "sqpoll_sq_aff": 90.0, "async": 125.0,
             "buf_select": 102.0, "fixed_files": 110.0}
    sq_aff, async_, buf_select, fixed = claims.u4(echo_table(rates, [(50, 128), (500, 128), (500, 512)]))
    assert "c=500 128 B" in sq_aff.part                      # the largest c, smallest size
    assert sq_aff.outcome is Outcome.REPRODUCED and async_.outcome is Outcome.REPRODUCED
    assert buf_select.outcome is Outcome.REPRODUCED          # 1.02: inside +-5 %
    assert fixed.outcome is Outcome.NOT_REPRODUCED           # 1.10: wholly outside


def test_c3_throughput_part_needs_1000_connections() -> None:
    cost = pd.DataFrame({"per_sqe_over_epoll": [0.8] * 6})
    _, throughput = claims.c3(cost, "on", echo_table({"multishot": 1.0, "epoll": 1.0}, [(500, 128)]))
    assert throughput.outcome is Outcome.NOT_TESTABLE and "c = 1000 was not measured (largest: 500" in throughput.reason
    _, throughput = claims.c3(cost, "on", echo_table({"multishot": 112.0, "epoll": 100.0}, [(1000, 128)]))
    assert throughput.outcome is Outcome.REPRODUCED and throughput.estimate.value == pytest.approx(1.12)


def test_claims_that_need_more_cpus_than_the_node_has_are_not_testable() -> None:
    rates = {"default": 100.0, "epoll": 100.0, "rings_granule": 90.0, "sqpoll": 100.0, "sqpoll_sq_aff": 90.0,
             "async": 125.0, "buf_select": 100.0, "fixed_files": 100.0}
    two = echo_table(rates, [(50, 128), (500, 128)]).assign(cpus=2)
    (u2,) = claims.u2(two)
    assert u2.outcome is Outcome.NOT_TESTABLE and u2.reason.startswith("needs at least 4 CPUs")
    sq_aff, async_, buf_select, fixed = claims.u4(two)
    assert sq_aff.outcome is async_.outcome is Outcome.NOT_TESTABLE
    assert "needs a CPU besides the server's and the load generator's (this node has 2)" in sq_aff.reason
    assert buf_select.outcome is Outcome.REPRODUCED and fixed.outcome is Outcome.REPRODUCED
    # Enough CPUs: tested.
    assert claims.u2(two.assign(cpus=8))[0].outcome is not Outcome.NOT_TESTABLE


def test_the_claims_use_the_sources_client_model_where_it_ran() -> None:
    ours = echo_table({"default": 110.0, "epoll": 100.0}, [(50, 128)]).assign(client="event-loop")
    theirs = echo_table({"default": 90.0, "epoll": 100.0}, [(50, 128)]).assign(client="thread-per-connection")
    both = pd.concat([ours, theirs], ignore_index=True)
    (part,) = claims.u1(echostats.one_client(both, echostats.SOURCE_CLIENT))
    assert part.outcome is Outcome.NOT_REPRODUCED and part.estimate.value == pytest.approx(0.9)
    assert echostats.client_note(echostats.one_client(both, echostats.SOURCE_CLIENT)) == \
        "thread-per-connection client, as the sources"
    # A node that ran only ours keeps ours, and says so.
    (part,) = claims.u1(echostats.one_client(ours, echostats.SOURCE_CLIENT))
    assert part.outcome is Outcome.REPRODUCED
    assert echostats.client_note(ours) == "event-loop client; the sources used thread-per-connection"
