"""The claims (C1-C4, U1-U5, M1-M3) on synthetic tables: paired ratios
within each repetition, each outcome, "not testable" with its reason; every
rule checked against the source's own numbers, noise-free and as faithful
replications with this machine's spread (iolab.claims.faithful).
Their wording: test_claim_words.py."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from claims_support import DRIFT, PAPER_REPS, cost, echo_table, judged, reference_spread, verdict

from iolab import claims
from iolab import quoted as sources
from iolab.claims import faithful, habr, openanolis, rules
from iolab.claims.findings import finding, not_testable
from iolab.claims.verdicts import Finding, Outcome, claim_verdict, combine
from iolab.report import claim_texts
from iolab.rooms.echo import summaries as echostats

# --- every rule against the source's own numbers ------------------------------------


@pytest.mark.parametrize("claim", ["U1", "U2", "U3", "C1", "C2", "C3"])
def test_the_sources_own_table_reproduces_its_claim(claim: str) -> None:
    # Noise-free: the source's numbers as printed, at the paper overlay's repetitions.
    assert faithful.reproduce_share(claim, PAPER_REPS[claim[0]], 0.0, runs=1) == 1.0


@pytest.mark.parametrize("claim", ["U1", "U2", "U3", "C1", "C2", "C3"])
@pytest.mark.parametrize("runs", [40, pytest.param(200, marks=pytest.mark.full)])
def test_a_faithful_replication_reproduces_each_claim_or_the_paper_says_why(claim: str, runs: int) -> None:
    # With this machine's spread, at the paper overlay's repetitions: the
    # source's verdict in at least 80 % of replications, or the claims
    # table's sentence says it cannot be expected, with the share.
    kind = "echo" if claim.startswith("U") else "cost"
    spread, reps = reference_spread(kind), PAPER_REPS[claim[0]]
    share = faithful.reproduce_share(claim, reps, spread, runs=runs)
    assert share is not None
    if share >= claim_texts.FAITHFUL_GOAL:
        return
    parts = [
        f
        for f in judged(faithful.replications(claim)(reps, spread, np.random.default_rng(1)), adaptive=True)
        if f.claim == claim and not f.context and f.estimate is not None
    ]
    for f in parts:
        f.group = f"claims:{kind}"
    text = claim_texts.faithful_text(claim, parts, runs=runs)
    assert f"reproduces {claim} in" in text and "cannot be expected from one run at this spread" in text, text
    share_printed = int(re.search(r"in (\d+)% of", text).group(1))
    assert abs(share_printed / 100 - share) <= 0.15  # the same simulation on the claim's own parts


def test_u1_passes_on_part_1s_own_table_which_the_old_cpu_rule_failed() -> None:
    parts = judged(habr.u1(faithful.part1(10, 0.0, np.random.default_rng(0))))
    counted = [p for p in parts if not p.context]
    assert len(counted) == 12 and all(p.outcome is Outcome.REPRODUCED for p in counted)
    assert (
        claim_verdict("U1", parts, claims.SOURCE_CELLS["U1"]).line()
        == "reproduced (decided 12 of 12 parts, 0 not testable here; source cells covered 6 of 6)"
    )
    # At equal load the source's own rates put io_uring's CPU per request at
    # 0.895-0.898 of epoll's: context now, never counted.
    per_request = {p.part.split(",")[0]: p.estimate.value for p in parts if p.context}
    assert per_request["c=50 128 B"] == pytest.approx(223135 / 249297)


def test_u2_reads_the_tied_cell_as_not_behind_and_the_many_cells_as_ahead_together() -> None:
    parts = judged(habr.u2(faithful.part3(10, 0.0, np.random.default_rng(0))))
    counted = [p for p in parts if not p.context]
    # Six cells and the pooled part over the four with c >= 500.
    assert len(counted) == 7 and all(p.outcome is Outcome.REPRODUCED for p in counted)
    (tie,) = [p for p in counted if p.cell == "c=500 1024 B"]
    assert tie.estimate.value == pytest.approx(139313 / 139171) and tie.rule.bound == 0.95
    (pooled,) = [p for p in counted if "geometric mean" in p.part]
    assert pooled.estimate.value == pytest.approx(
        np.exp(np.mean(np.log([147362 / 133039, 139313 / 139171, 158483 / 133480, 154194 / 139617])))
    )
    # A reactor behind by 10 % in one many-connection cell is not reproduced.
    table = faithful.part3(10, 0.0, np.random.default_rng(0))
    table.loc[(table["preset"] == "go_uring") & (table["connections"] == 1000) & (table["bytes"] == 128), "rps"] = (
        0.9 * 133480
    )
    assert verdict("U2", habr.u2(table)) is Outcome.NOT_REPRODUCED


def test_quoted_ratios_sit_under_benchmark_mds_cells() -> None:
    assert sources.quoted_ratio("U2", 1000, 128).startswith("1.19")  # 158 483 / 133 480
    assert sources.quoted_ratio("U3", 1000, 128).startswith("0.81")  # 127 896 / 158 483
    assert sources.quoted_ratio("U2", 100, 1024).startswith("0.24")  # 33 159 / 139 206
    assert sources.quoted_ratio("U2", 500, 1024).startswith("1.00")  # 139 313 / 139 171
    assert sources.quoted_ratio("U2", 50, 1024) == ""  # no such cell
    assert [sources.cell_of(c) for c in sources.U2_COLUMNS] == [
        (c, b) for c in claims.SOURCE_U2_CONNECTIONS for b in claims.SOURCE_U2_BYTES
    ]


def test_c2_decides_on_the_models_own_condition_and_t1_counts_only_against() -> None:
    # C2 holds when b >= s + w; t(1) = a + b >= b is necessary only.
    ok = cost(per_sqe_over_epoll=1.2, t1_over_s_plus_w=1.3)
    level = echo_table({"poll_first": 101.0, "epoll": 100.0}, [(1000, 128)])
    found = judged(openanolis.c2(ok, "off", echo=level))
    assert [f.outcome for f in found] == [Outcome.REPRODUCED] * 3
    assert found[1].role == "against" and "never for it" in found[1].part
    # t(1) >= s + w alone does not reproduce C2 where b < s + w ...
    b_below = cost(per_sqe_over_epoll=0.82, t1_over_s_plus_w=1.34)  # the reference run's numbers
    assert verdict("C2", openanolis.c2(b_below, "off", echo=level)) is Outcome.NOT_REPRODUCED
    # ... and t(1) < s + w contradicts it even when b's part is undecided.
    t_below = cost(per_sqe_over_epoll=1.0, t1_over_s_plus_w=0.8)
    parts = judged(openanolis.c2(t_below, "off", echo=level))
    assert parts[1].outcome is Outcome.NOT_REPRODUCED and combine(parts) is Outcome.NOT_REPRODUCED
    ahead = echo_table({"poll_first": 120.0, "epoll": 100.0}, [(1000, 128)])
    assert judged(openanolis.c2(ok, "off", echo=ahead))[2].outcome is Outcome.NOT_REPRODUCED
    assert all(p.outcome is Outcome.NOT_TESTABLE for p in openanolis.c2(ok, "on", echo=level))


def test_c3_counts_io_uring_ahead_and_shows_the_size_of_its_gain_as_context() -> None:
    # "about 10 % higher" is one number from one run: the direction counts,
    # the 5-15 % band is context (a faithful replication of the source's own
    # +10 % lands in that band too rarely to decide it).
    model = cost(per_sqe_over_epoll=0.8)
    for gain, counted, band in (
        (1.10, Outcome.REPRODUCED, Outcome.REPRODUCED),
        (1.02, Outcome.REPRODUCED, Outcome.NOT_REPRODUCED),
        (1.40, Outcome.REPRODUCED, Outcome.NOT_REPRODUCED),
        (0.95, Outcome.NOT_REPRODUCED, Outcome.NOT_REPRODUCED),
    ):
        table = echo_table({"poll_first": 100.0 * gain, "epoll": 100.0}, [(1000, 128)])
        _, throughput, size = judged(openanolis.c3(model, "on", table))
        assert (throughput.outcome, size.outcome) == (counted, band), gain
        assert not throughput.context and size.context and size.rule.band == pytest.approx((1.05, 1.15))
        assert claim_verdict("C3", [throughput, size]).outcome is counted
    table = echo_table({"poll_first": 110.0, "epoll": 100.0}, [(500, 128)])
    _, throughput = openanolis.c3(model, "on", table)
    assert throughput.outcome is Outcome.NOT_TESTABLE and "c = 1000 was not measured (largest: 500" in throughput.reason
    table = echo_table({"poll_first": 110.0, "epoll": 100.0}, [(1000, 128)])
    table.loc[table["preset"] == "poll_first", "iowq_workers"] = 2
    assert openanolis.c3(model, "on", table)[1].reason.startswith("io-wq workers ran (2")
    # A server that did not report its io-wq workers: not measured, never taken as none.
    unknown = echo_table({"poll_first": 110.0, "epoll": 100.0}, [(1000, 128)]).drop(columns="iowq_workers")
    assert "did not report its io-wq workers (not measured)" in openanolis.c3(model, "on", unknown)[1].reason
    # The trace saw its requests wait for polls: not the source's server.
    waited = openanolis.c3(
        model,
        "on",
        echo_table({"poll_first": 110.0, "epoll": 100.0}, [(1000, 128)]),
        inline=(False, "the trace counted up to 0.300 polls armed per echoed request"),
    )
    assert waited[1].outcome is Outcome.NOT_TESTABLE and "0.300 polls" in waited[1].reason
    assert all(p.outcome is Outcome.NOT_TESTABLE for p in openanolis.c3(model, "off", table))


@pytest.mark.parametrize("claim", ["C2", "C3"])
def test_c2_and_c3_throughput_is_not_testable_where_the_load_generator_set_the_pace(claim: str) -> None:
    # A thousand client threads on the server's 2 CPUs pull the ratio toward
    # 1: that favours C2's "no advantage" and works against C3's gain.
    table = echo_table(
        {"poll_first": 101.0, "epoll": 100.0},
        [(1000, 128)],
        busy={"poll_first": 0.6, "epoll": 0.6},
        client_busy=1.4,
        cpus=2,
    )
    model = cost(per_sqe_over_epoll=1.2 if claim == "C2" else 0.8, t1_over_s_plus_w=1.3)
    regime = "off" if claim == "C2" else "on"
    parts = judged(openanolis.c2(model, regime, echo=table) if claim == "C2" else openanolis.c3(model, regime, table))
    (why,) = [p for p in parts if p.outcome is Outcome.NOT_TESTABLE]
    assert why.reason.startswith("the load generator, not the server, set the pace") and why.cell == "c=1000"
    shown = [p for p in parts if p.context and p.estimate is not None and "requests/s" in p.part]
    assert shown and shown[0].estimate.value == pytest.approx(1.01)
    # The server set the pace: the same part counts.
    free = echo_table({"poll_first": 101.0, "epoll": 100.0}, [(1000, 128)], cpus=2)
    parts = judged(openanolis.c2(model, regime, echo=free) if claim == "C2" else openanolis.c3(model, regime, free))
    assert not [p for p in parts if p.outcome is Outcome.NOT_TESTABLE]


def test_c1_times_the_premise_inside_each_server_and_keeps_the_probes_ratio_as_context() -> None:
    # "perf showed that the read/write requests themselves take the vast
    # majority": the share of each server's CPU inside its request syscalls,
    # from the trace, the tracing's own cost taken out of the windows (c)
    # and of the CPU (the traced getppid less s, per call).
    s, w, t = 230.0, 1500.0, 1900.0
    base = dict(s=s, w_mean=w, t1_mean=t, t1_over_w=t / w, uring_n1_over_epoll=(t + s) / (s + w))
    model = cost(**base, epoll_request_single=2 * (s + w))
    echo = echo_table({"epoll": 1000.0}, [(1, 16)], cpu={"epoll": 2 * (s + w) / 0.8})
    for share, outcome in ((0.8, Outcome.REPRODUCED), (0.4, Outcome.NOT_REPRODUCED)):
        trace = faithful.openanolis_trace(len(DRIFT), 0.0, np.random.default_rng(0), "off", share=share)
        found = judged(openanolis.c1(model, "off", echo, trace, "n1"))
        inside = [f for f in found if "trace" in f.decides]
        assert len(inside) == 2 and {"epoll server" in f.part for f in inside} == {True, False}
        assert all(f.outcome is outcome and not f.context for f in inside), [f.summary() for f in inside]
        assert all(f.estimate.value == pytest.approx(share) for f in inside)
    # The probes' 2s + 2w over a whole server's cost is context now.
    (probes,) = [f for f in found if "2s + 2w" in f.part]
    assert probes.context
    # Without the trace the premise is not testable, and says why.
    missing = [f for f in openanolis.c1(model, "off", echo) if "inside the server [" in f.part]
    assert all(f.outcome is Outcome.NOT_TESTABLE and "trace experiment did not time" in f.reason for f in missing)


def test_the_premise_is_labelled_with_the_setup_it_was_measured_in() -> None:
    # It once carried the sources' label, measured under our pinned client.
    s, w, t = 230.0, 1500.0, 1900.0
    theirs = echo_table({"poll_first": 100.0, "epoll": 100.0}, [(1, 128), (1000, 128)])
    ours = echo_table({"poll_first": 100.0, "epoll": 100.0}, [(1, 128), (1000, 128)], client="event-loop-uring")
    ours["layout"] = "pinned"
    table = pd.concat([theirs, ours], ignore_index=True)
    premise = [
        f
        for f in claims._openanolis(
            cost(
                s=s,
                w_mean=w,
                t1_mean=t,
                t1_over_w=t / w,
                uring_n1_over_epoll=1.2,
                epoll_request_single=2 * (s + w),
                t1_over_s_plus_w=1.1,
                per_sqe_over_epoll=1.1,
            ),
            {},
            "off",
            "",
            table,
            None,
            "n1",
        )
        if f.claim == "C1" and "2s + 2w" in f.part
    ]
    assert premise and all(
        f.part.endswith("[event-loop-uring client, pinned CPUs; the sources used thread-per-connection, shared CPUs]")
        for f in premise
    ), premise[0].part


def test_c4_needs_large_messages_and_names_the_profile_that_measures_them() -> None:
    (part,) = openanolis.c4(echo_table({"poll_first": 1.0, "epoll": 1.0}, [(50, 1024)]))
    assert part.outcome is Outcome.NOT_TESTABLE and "largest: 1024 B" in part.reason
    assert "the paper overlay measures them" in part.reason
    big = echo_table(
        {"poll_first": 1.0, "epoll": 1.0}, [(50, 1024), (50, 65536)], cpu={"poll_first": 1020.0, "epoll": 1000.0}
    )
    (part,) = judged(openanolis.c4(big))
    assert part.outcome is Outcome.REPRODUCED and "65536 B" in part.part
    assert part.ratio_of_means == pytest.approx(1.02)


# --- the verdict line: parts decided, not testable, cells covered -------------------


def test_a_claim_with_untestable_parts_is_never_reproduced() -> None:
    rule = rules.above(1.0, "test")
    ok = [finding("U4", f"part {i}", [1.2] * 10, rule) for i in range(2)]
    untestable = [not_testable("U4", f"part {i}", "needs a spare CPU") for i in (2, 3)]
    assert combine(judged(ok)) is Outcome.REPRODUCED
    assert combine(judged(ok + untestable)) is Outcome.INCOMPLETE
    assert claim_verdict("U4", ok + untestable).line() == (
        "reproduced where testable, not testable in part (decided 2 of 4 parts, 2 not testable here)"
    )


def test_u1_counts_an_unmeasured_source_cell_as_a_part_not_tested() -> None:
    table = echo_table({"default": 110.0, "epoll": 100.0}, [(50, 128), (50, 512), (500, 128), (500, 512)])
    parts = judged(habr.u1(table))
    v = claim_verdict("U1", parts, claims.SOURCE_CELLS["U1"])
    assert v.outcome is Outcome.INCOMPLETE
    assert v.line().endswith("(decided 8 of 10 parts, 2 not testable here; source cells covered 4 of 6)")
    missing = [p for p in parts if p.outcome is Outcome.NOT_TESTABLE]
    assert [p.cell for p in missing] == ["c=1000 128 B", "c=1000 512 B"]
    assert missing[0].quoted.startswith("1.02")  # the source's 158 911 / 156 449 still shown


def test_u1_judges_non_inferiority_and_load() -> None:
    slower = judged(habr.u1(echo_table({"default": 90.0, "epoll": 100.0}, [(50, 128)])))
    assert slower[0].outcome is Outcome.NOT_REPRODUCED  # 10 % slower
    close = judged(habr.u1(echo_table({"default": 97.0, "epoll": 100.0}, [(50, 128)])))
    assert close[0].outcome is Outcome.REPRODUCED  # 3 % slower: "a worthy competitor"
    heavy = judged(
        habr.u1(echo_table({"default": 110.0, "epoll": 100.0}, [(50, 128)], busy={"default": 0.99, "epoll": 0.80}))
    )
    assert heavy[1].outcome is Outcome.NOT_REPRODUCED and "load" in heavy[1].part
    assert heavy[0].decides == {"echo": [["default", 50, 128], ["epoll", 50, 128]]}


def test_u1_is_context_where_the_load_generator_set_the_pace() -> None:
    # The server had CPU to spare while server and client filled the node:
    # requests/s there measures the client.
    table = echo_table(
        {"default": 100.0, "epoll": 100.0}, [(1000, 128)], busy={"default": 0.6, "epoll": 0.6}, client_busy=1.4, cpus=2
    )
    parts = habr.u1(table)
    (why,) = [p for p in parts if p.outcome is Outcome.NOT_TESTABLE and p.cell == "c=1000 128 B"]
    assert (
        why.reason.startswith("the load generator, not the server, set the pace") and "client 1.40 CPUs" in why.reason
    )
    assert all(p.context for p in parts if p.estimate is not None and p.part.startswith("c=1000 128 B"))


def test_parts_measured_under_another_setup_are_context_and_the_claim_not_testable() -> None:
    ours = echo_table({"default": 110.0, "epoll": 100.0}, [(50, 128)], client="event-loop", layout="pinned")
    found = claims._sources_setup_gate(habr.u1(ours), ours)
    assert found[0].outcome is Outcome.NOT_TESTABLE and "the sources' setup" in found[0].reason
    assert "the default config and the smoke, part3 and paper overlays measure it" in found[0].reason
    assert all(f.context for f in found[1:])
    assert claim_verdict("U1", found).outcome is Outcome.NOT_TESTABLE
    theirs = echo_table({"default": 110.0, "epoll": 100.0}, [(50, 128)])
    assert len(claims._sources_setup_gate(habr.u1(theirs), theirs)) == len(habr.u1(theirs))


def test_u2_is_tested_at_the_reactors_own_default_rings_and_u3_needs_the_sources_cpus() -> None:
    # The reactor's defaults follow the CPUs (2 x CPUs - 2 rings): on 2 CPUs
    # it is the same design at 2 rings, compared with Go net on the same
    # CPUs, so U2 counts there. SQPOLL's 2 polling threads would take both
    # CPUs: U3 still needs the source's 4.
    parts = habr.u2(faithful.part3(10, 0.0, np.random.default_rng(0), cpus=2))
    counted = [p for p in judged(parts) if not p.context]
    assert len(counted) == 7 and all(p.outcome is Outcome.REPRODUCED for p in counted)
    parts = habr.u3(faithful.part3(10, 0.0, np.random.default_rng(0), cpus=2))
    counted = [p for p in parts if not p.context]
    assert len(counted) == 6 and all(p.outcome is Outcome.NOT_TESTABLE for p in counted)
    assert counted[0].reason.startswith(f"needs at least {habr.SQPOLL_MIN_CPUS} CPUs")
    assert any(p.context and p.estimate is not None for p in parts)
    assert claim_verdict("U3", parts, claims.SOURCE_CELLS["U3"]).outcome is Outcome.NOT_TESTABLE
    # U3 says SQPOLL's 2 rings ran against the default's 6.
    assert "2 rings" in habr.u3(faithful.part3(10, 0.0, np.random.default_rng(0)))[0].part


def test_u4_compares_each_option_with_its_base_ring_wherever_its_helpers_ran() -> None:
    rates = {
        "default": 100.0,
        "sqpoll": 100.0,
        "sqpoll_sq_aff": 90.0,
        "async": 125.0,
        "buf_select": 102.0,
        "fixed_files": 110.0,
    }
    sq_aff, async_, buf_select, fixed = judged(habr.u4(echo_table(rates, [(50, 128), (500, 128), (500, 512)], cpus=3)))
    assert "c=500 128 B" in sq_aff.part  # the largest c, smallest size
    assert sq_aff.outcome is Outcome.REPRODUCED and async_.outcome is Outcome.REPRODUCED
    assert buf_select.outcome is Outcome.REPRODUCED  # +2 %: "not impressive"
    assert fixed.outcome is Outcome.NOT_REPRODUCED  # +10 %: noticeable
    # ASYNC's gain rests on workers running in parallel: on 2 CPUs the
    # server's thread and the load generator leave them none, so the part is
    # not testable there and its ratio is context.
    two = judged(habr.u4(echo_table(rates, [(500, 128)], cpus=2)))
    (gate,) = [p for p in two if p.outcome is Outcome.NOT_TESTABLE]
    assert gate.part == "ASYNC gives a significant gain" and gate.reason.startswith("needs at least 3 CPUs")
    assert "in parallel" in gate.reason
    assert [p.context for p in two if "async/default" in p.part] == [True]


def test_u5_gates_each_part_on_what_it_needs() -> None:
    parts = judged(
        claims.u5(
            echo_table(
                {
                    "go_uring": 1.0,
                    "go_uring_granule1": 0.5,
                    "rings_granule": 1.2,
                    "default": 1.0,
                    "epoll": 1.2,
                    "async": 1.0,
                    "rings_granule_own_wq": 1.05,
                },
                [(1, 128), (100, 128), (1000, 128)],
                cpus=2,
            ),
            {r: 0.0 for r in range(1, 11)},
        )
    )
    assert parts[0].outcome is Outcome.REPRODUCED and "io-wq" in parts[0].part

    def by(words: str) -> Finding:
        (found,) = [p for p in parts[1:] if words in p.part and p.estimate is not None]
        return found

    # The routing and the C server's rings count on 2 CPUs; the ring count
    # (the source's own optimum, which it says varies) is context and needs 4.
    assert by("FD % rings routing").outcome is Outcome.REPRODUCED
    assert by("several rings beat one ring with ASYNC").outcome is Outcome.REPRODUCED
    assert by("several rings give an excellent boost").outcome is Outcome.REPRODUCED  # +20 %
    assert by("slow at a low operation rate").outcome is Outcome.REPRODUCED  # 1.0 against epoll's 1.2 at c = 1
    assert "c=1 128 B" in by("slow at a low operation rate").part
    assert by("ATTACH_WQ gives some gain").outcome is Outcome.REPRODUCED
    (ring_count,) = [p for p in parts if "2 x cores - 2" in p.part]
    assert ring_count.context and ring_count.outcome is Outcome.NOT_TESTABLE
    # A +5 % from several rings is no "excellent boost".
    small = judged(claims.u5(echo_table({"rings_granule": 1.05, "default": 1.0}, [(1000, 128)], cpus=2), None))
    (boost,) = [p for p in small if "excellent boost" in p.part and p.estimate is not None]
    assert boost.outcome is Outcome.NOT_REPRODUCED
    assert judged(claims.u5(None, {r: 0.2 for r in range(1, 11)}))[0].outcome is Outcome.NOT_REPRODUCED


def test_u6_counts_the_default_rings_io_wq_workers() -> None:
    # "The worker pool starts in any case": at least one worker at exit.
    table = echo_table({"default": 1.0, "epoll": 1.0}, [(50, 128), (500, 128)])
    table.loc[table["preset"] == "default", "iowq_workers"] = 2
    (part,) = judged(claims.u6(table))
    assert part.outcome is Outcome.REPRODUCED and part.kind == "count" and "2 cells" in part.part
    none = echo_table({"default": 1.0, "epoll": 1.0}, [(50, 128)])
    (part,) = judged(claims.u6(none))
    assert part.outcome is Outcome.NOT_REPRODUCED
    unknown = none.drop(columns="iowq_workers")
    (part,) = claims.u6(unknown)
    assert part.outcome is Outcome.NOT_TESTABLE and "did not report" in part.reason


def test_one_setup_keeps_the_sources_where_it_ran() -> None:
    ours = echo_table({"default": 110.0, "epoll": 100.0}, [(50, 128)], client="event-loop", layout="pinned")
    theirs = echo_table({"default": 90.0, "epoll": 100.0}, [(50, 128)])
    half = echo_table({"default": 95.0, "epoll": 100.0}, [(50, 128)], layout="pinned")
    both = pd.concat([ours, theirs, half], ignore_index=True)
    part = judged(habr.u1(echostats.one_setup(both, echostats.SOURCE_SETUP)))[0]
    assert part.outcome is Outcome.NOT_REPRODUCED and part.estimate.value == pytest.approx(0.9)
    with pytest.raises(ValueError, match="keep one setup"):
        habr.u1(both)


# --- C5: the model's four variables decide the winner ------------------------------


def cost_inputs(s: float, w: float, a: float, b: float) -> dict:
    from iolab.rooms.cost_probes import cost_model as costmodel

    fit = {
        "A": costmodel.Fit("A", {"t": a + b}, 0.0, 3),
        "B": costmodel.Fit("B", {"a": a, "b": b}, 0.0, 3),
    }
    ci = costmodel.CostInputs(
        s=s, w={"send": w, "recv": w}, fits={"send": fit, "recv": fit}, t1={"send": a + b, "recv": a + b}
    )
    return dict.fromkeys(range(1, len(DRIFT) + 1), ci)


def model_table(measured: dict[str, float], batch: dict[str, float]) -> pd.DataFrame:
    table = echo_table(
        dict.fromkeys(measured, 1.0), [(50, 128), (500, 128)], cpu=measured, client="event-loop-uring", layout="pinned"
    )
    table["server"] = np.where(table["preset"] == "epoll", "epoll", "uring")
    table["sqes_per_enter"] = table["preset"].map(batch)
    return table


def test_c5_asks_whether_the_model_names_the_measured_winner() -> None:
    # s = 100, w = 1000, a = 200, b = 700 (per SQE): the epoll request costs
    # 2200 ns; io_uring at n SQEs per enter 2 x (300/n + 700) ns: 2000 at
    # n = 1.5 (ahead), 1433 at n = 8 (well ahead).
    inputs = cost_inputs(100.0, 1000.0, 200.0, 700.0)
    batch = {"small": 1.0, "large": 8.0, "epoll": 1.0}
    agree = model_table({"small": 2100.0, "large": 1500.0, "epoll": 2200.0}, batch)
    share, error = judged(claims.c5(inputs, agree))
    assert share.outcome is Outcome.REPRODUCED and share.estimate.value == 1.0 and share.kind == "share"
    assert error.context and error.estimate.value == pytest.approx(
        np.median([2100 / 2000, 1500 / (2 * (300 / 8 + 700))])
    )
    # The servers order themselves against the model: it decides nothing.
    disagree = model_table({"small": 2600.0, "large": 2500.0, "epoll": 2200.0}, batch)
    share, _ = judged(claims.c5(inputs, disagree))
    assert share.outcome is Outcome.NOT_REPRODUCED and share.estimate.value == 0.0
    # Where the model predicts no clear winner (within 5 %), there is nothing to agree on.
    tie = model_table({"tie": 2200.0, "epoll": 2200.0}, {"tie": 300 / (2200 / 2 - 700), "epoll": 1.0})
    assert claims.c5(inputs, tie)[0].outcome is Outcome.NOT_TESTABLE


def test_a_part_whose_sign_flips_under_our_client_says_so_in_its_row() -> None:
    theirs = echo_table({"default": 116.0, "epoll": 100.0}, [(50, 128)])
    ours = echo_table({"default": 75.0, "epoll": 100.0}, [(50, 128)], client="event-loop", layout="pinned")
    (rps,) = [p for p in judged(habr.u1(theirs)) if "requests/s" in p.part]
    said = claims.other_client_sign(rps, ours)
    assert said.startswith("under our event-loop client, pinned, the ratio is 0.75 [0.75, 0.75]")
    assert said.endswith("the other side of 1")
    # The same side of 1 under both clients: nothing to say.
    alike = echo_table({"default": 105.0, "epoll": 100.0}, [(50, 128)], client="event-loop", layout="pinned")
    assert claims.other_client_sign(rps, alike) == ""


def test_what_a_run_says_beside_a_part_never_renames_it() -> None:
    # Runs pooled find a part by its name. C2 and C3 once named the trace's
    # poll count in theirs ("at most 0.0003 polls ..."), and U1 the other
    # client's reading, so no two runs shared those parts.
    model = cost(per_sqe_over_epoll=0.8)
    table = echo_table({"poll_first": 110.0, "epoll": 100.0}, [(1000, 128)])
    runs = [
        openanolis.c3(model, "on", table, inline=(True, f"the trace counted at most {polls} polls armed"))
        for polls in ("0.0003", "0.0005")
    ]
    assert [p.part for p in runs[0]] == [p.part for p in runs[1]]
    assert runs[0][1].note == "the trace counted at most 0.0003 polls armed"
    assert runs[1][1].note.endswith("0.0005 polls armed") and "polls" not in runs[1][1].part
    # The other client's reading goes into the note, beside the part's setup.
    theirs = echo_table({"default": 116.0, "epoll": 100.0}, [(50, 128)])
    ours = echo_table({"default": 75.0, "epoll": 100.0}, [(50, 128)], client="event-loop", layout="pinned")
    from iolab import tables

    probes = {e: tables.load(e, tables.REFERENCE) for e in ("syscall", "sendrecv", "uring_batch")}
    node = str(sorted(probes["syscall"]["node"].unique())[0])
    both = pd.concat([theirs, ours]).assign(node=node)
    found = claims._findings(probes["syscall"], probes["sendrecv"], probes["uring_batch"], both, None, node, None, None)
    (rps,) = [f for f in found if f.claim == "U1" and "requests/s" in f.part and not f.context]
    assert rps.part.endswith("]") and rps.note.startswith("under our event-loop client")


def test_the_two_clients_view_says_where_they_flip_the_sign_and_where_it_cannot_tell() -> None:
    theirs = echo_table({"default": 116.0, "epoll": 100.0}, [(50, 128), (500, 128)])
    ours = echo_table({"default": 75.0, "epoll": 100.0}, [(50, 128), (500, 128)], client="event-loop", layout="pinned")
    view = echostats.clients_view(pd.concat([theirs, ours], ignore_index=True), "n1")
    assert set(view["setup"]) == {"thread-per-connection client, shared CPUs", "event-loop client, pinned CPUs"}
    said = echostats.clients_sentence(view)
    assert said.startswith("The two clients give opposite signs: at c = 50 the requests/s ratio is 1.16")
    # One setup alone: no view; both on one side: the same sign, said so.
    assert echostats.clients_view(theirs, "n1").empty
    alike = echo_table({"default": 110.0, "epoll": 100.0}, [(50, 128)], client="event-loop", layout="pinned")
    same = echostats.clients_view(pd.concat([echo_table({"default": 116.0, "epoll": 100.0}, [(50, 128)]), alike]), "n1")
    assert "the two clients give the comparison the same sign" in echostats.clients_sentence(same)
