"""The Habr io_uring series' claims (seeds 000-002): U1-U4 here, the design
claims U5 and U6 in iolab.claims.design; what the paper says of
each claim's test (TESTS) for all six.

Part 1 measured C echo servers on liburing and epoll; part 3 a Go io_uring
reactor against Go's net package, and the reactor's ring options, all with
rust_echo_bench (a blocking thread per connection) and nothing pinned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from ..quoted import U1_RPS, U2_COLUMNS, U2_RPS, cell_of, quoted_ratio
from ..rooms.echo import summaries as echostats
from .findings import finding, not_testable
from .gates import over_cells
from .rules import (
    DIRECTION,
    ClaimTest,
    Ratios,
    above,
    below,
    cell_finding,
    cell_label,
    cells_of,
    client_gate,
    cpu_gate,
    gate_note,
    geometric_mean_per_rep,
    missing_presets,
    not_measured,
    pct,
    unmeasured_cells,
    within,
)
from .verdicts import Finding, Rule

SOURCE_U1_CONNECTIONS = (50, 500, 1000)
SOURCE_U1_BYTES = (128, 512)
# Part 3's cells, as go-uring's Benchmark.md (which the article links as its
# method) gives them; the article's printed header is garbled.
SOURCE_U2_CONNECTIONS = (100, 500, 1000)
SOURCE_U2_BYTES = (128, 1024)
# "Few" and "more or less large" numbers of connections in part 3's table.
MANY = 500

# The source cells each claim covers (for "source cells covered x of y").
SOURCE_CELLS: dict[str, list[str]] = {
    "U1": [cell_label(c, b) for c in SOURCE_U1_CONNECTIONS for b in SOURCE_U1_BYTES],
    "U2": [cell_label(c, b) for c in SOURCE_U2_CONNECTIONS for b in SOURCE_U2_BYTES],
    "U3": [cell_label(c, b) for c in SOURCE_U2_CONNECTIONS for b in SOURCE_U2_BYTES],
}

# U1: "The CPU load in both cases was about the same" (part 1): a
# utilisation, the server's CPU time over the cell's duration (we read it as
# the server's; the source does not say whether it meant the server or the
# machine). At equal load the source's own rates give io_uring 0.90x epoll's
# CPU per request, so that quantity is context only. "One can conclude that
# io_uring is at least a worthy competitor of epoll in performance":
# non-inferiority, io_uring at most 5 % slower.
U1_LEADS = [U1_RPS["io_uring"][k] / U1_RPS["epoll"][k] - 1 for k in U1_RPS["epoll"]]
SIMILAR_LOAD = within(
    1.0,
    0.10,
    f"'about the same' load: a gap wider than io_uring's largest lead in the source's "
    f"table ({pct(max(U1_LEADS))}) would undo 'at least a worthy competitor'",
)
NON_INFERIOR = above(0.95, "'at least a worthy competitor': non-inferiority, io_uring at most 5 % slower")
EQUAL_LOAD_CPU = within(0.9, 0.10, "context: equal load at the source's rates gives 0.90")
# Part 3's reactor leads over Go net at c >= 500, which the article calls
# "even better performance": U4's "significant gain" is read from them.
PART3_LEADS = [
    U2_RPS["go-uring reactor"][i] / U2_RPS["net/http (epoll netpoller)"][i] - 1
    for i, label in enumerate(U2_COLUMNS)
    if cell_of(label)[0] >= MANY
]


def u1(echo: pd.DataFrame) -> list[Finding]:
    """U1: C io_uring (default ring) against C epoll in each of the source's
    six cells: requests/s not more than 5 % behind, and the server's CPU load
    (utilisation) within +-10 %; CPU per request follows as context. A cell
    where the load generator, not the server, set the pace is context (its
    requests/s would measure the client)."""
    missing = missing_presets(echo, "default", "epoll")
    if missing:
        return [not_testable("U1", "io_uring/epoll requests/s", not_measured(echo, missing))]
    out: list[Finding] = []
    ratios = Ratios(echo)
    for cell in cells_of(echo, SOURCE_U1_CONNECTIONS, SOURCE_U1_BYTES):
        gate = client_gate(echo, ("default", "epoll"), cell)
        rps = cell_finding("U1", ratios, "default", "epoll", cell, NON_INFERIOR, "io_uring/epoll requests/s", gate=gate)
        load = cell_finding(
            "U1",
            ratios,
            "default",
            "epoll",
            cell,
            SIMILAR_LOAD,
            "io_uring/epoll server CPU load (utilisation): 'about the same'",
            metric="server_busy",
            quoted=False,
            gate=gate,
        )
        if gate is not None and gate.reason():
            out.append(
                gate_note(
                    "U1", f"{cell_label(*cell)}, io_uring/epoll", gate, quoted_ratio("U1", *cell), cell_label(*cell)
                )
            )
        out += [rps, load]
        out.append(
            cell_finding(
                "U1",
                ratios,
                "default",
                "epoll",
                cell,
                EQUAL_LOAD_CPU,
                "io_uring/epoll server CPU per request",
                metric="server_ns_per_request",
                quoted=False,
                context=True,
            )
        )
    return out + unmeasured_cells("U1", echo, SOURCE_U1_CONNECTIONS, SOURCE_U1_BYTES, "io_uring/epoll")


# The source's reactor ran 6 rings (2 x cores - 2) on a 4-core machine. Its
# defaults scale with the CPUs the process may run on (native/go's
# echo-go-uring: rings = 2 x CPUs - 2, at least 1; GOMAXPROCS 2 x CPUs;
# granule 75; 2 shared worker pools), so on 2 CPUs the reactor is the same
# design at its own default: 2 rings, each a consumer and a publisher locked
# to OS threads (4 on 2 CPUs, against the source's 12 on 4: less crowded,
# not more), fds routed (fd / 75) % 2, so that 100 connections still land
# mostly on one ring, which is what the source blames for the slow few-
# connection cells. U2 compares it with Go's net package on the same CPUs,
# as the source did (client, reactor and net/http on one VM): testable on 2
# CPUs, with the ring count said. Its SQ_POLL mode (U3) is not: its 2 kernel
# threads each poll a CPU, and on 2 CPUs they take every CPU the reactor and
# the load generator need, where the source's left them 2 of 4.
REACTOR_MIN_CPUS = 4
SQPOLL_MIN_CPUS = 4


def _reactor_parts(
    claim: str,
    echo: pd.DataFrame,
    pairs: Sequence[tuple[str, str, str]],
    rules: Callable[[int], tuple[Rule, str]],
    gate: str,
) -> list[Finding]:
    """Part 3's comparisons in its cells: the first pair is the source's
    systems (the Go servers), the others the C analogues, shown as context
    (a second, conceptual replication). ``rules(c)``: the rule and wording.
    With a ``gate`` (a reason the node cannot test the claim) every
    measured part is context and each source cell reads not testable."""
    cells = cells_of(echo, SOURCE_U2_CONNECTIONS, SOURCE_U2_BYTES)
    ratios = Ratios(echo)
    out = []
    for i, (num_p, den_p, what) in enumerate(pairs):
        missing = missing_presets(echo, num_p, den_p)
        if missing:
            if i == 0 and not gate:
                out.append(
                    not_testable(
                        claim, what, not_measured(echo, missing, "the part3 and paper overlays measure them there")
                    )
                )
            continue
        for c, b in cells:
            rule, wording = rules(c)
            busy = client_gate(echo, (num_p, den_p), (c, b)) if i == 0 and not gate else None
            out.append(
                cell_finding(
                    claim,
                    ratios,
                    num_p,
                    den_p,
                    (c, b),
                    rule,
                    f"{what} ({wording})",
                    context=bool(gate) or i > 0,
                    quoted=i == 0,
                    gate=busy,
                )
            )
            if busy is not None and busy.reason():
                out.append(
                    gate_note(claim, f"{cell_label(c, b)}, {what}", busy, quoted_ratio(claim, c, b), cell_label(c, b))
                )
        if i == 0 and not gate:
            out += unmeasured_cells(claim, echo, SOURCE_U2_CONNECTIONS, SOURCE_U2_BYTES, what)
    if gate:
        out = [
            not_testable(
                claim,
                f"{cell_label(c, b)}, {pairs[0][2]}",
                gate + "; the measured parts are context",
                quoted_ratio(claim, c, b),
                cell=cell_label(c, b),
            )
            for c in SOURCE_U2_CONNECTIONS
            for b in SOURCE_U2_BYTES
        ] + out
    return out


SLOWER_FEW = below(1.0, "'a decent rps with a small number of connections was not achieved': slower; " + DIRECTION)
NOT_BEHIND = above(
    0.95,
    "'even better performance' with many connections, read cell by cell as not behind by "
    "more than 5 %: the source's own closest cell is "
    f"{pct(min(PART3_LEADS))} (c = 500, 1024 B)",
)
AHEAD_ON_BALANCE = above(
    1.0,
    "'even better performance' with many connections: ahead over those cells taken "
    f"together (their geometric mean; the source's own is "
    f"{pct(float(np.exp(np.mean(np.log1p(PART3_LEADS)))) - 1)})",
)


def u2(echo: pd.DataFrame) -> list[Finding]:
    """U2. Part 3: "with a more or less large number of connections we
    squeezed out even better performance than the usual runtime ... on the
    other hand, a decent rps with a small number of connections was not
    achieved". The Go io_uring reactor against Go's net package in part 3's
    cells: slower at c = 100; at c >= 500 not behind by more than 5 % in any
    cell (the source's own c = 500, 1024 B cell is a tie, +0.1 %) and ahead
    over those cells together. The C multi-ring server against C epoll
    follows as context. The reactor's rings follow its own default rule
    (2 x CPUs - 2): 2 rings on 2 CPUs (see REACTOR_MIN_CPUS)."""

    def rules(c: int) -> tuple[Rule, str]:
        return (SLOWER_FEW, "few connections: slower") if c < MANY else (NOT_BEHIND, "many connections: not behind")

    pairs = [
        ("go_uring", "go_net", "Go reactor/Go net requests/s"),
        ("rings_granule", "epoll", "C rings/C epoll requests/s, second row"),
    ]
    out = _reactor_parts("U2", echo, pairs, rules, "")
    # Every many-connection cell the run measured, gated or not: a name that
    # counted only the cells a run's own gate let through would differ from
    # run to run, and such runs never pool. A cell whose client set the pace
    # makes the whole mean context, by one gate over its cells.
    many = [
        f
        for f in out
        if f.estimate is not None
        and (not f.context or f.gate is not None)
        and f.cell
        and cell_of(f.cell)[0] >= MANY
        and f.part.startswith("c=")
        and "Go reactor" in f.part
    ]
    if many:
        r = echostats.paired_ratios(echo, "go_uring", "go_net")
        per_cell = [echostats.ratio_per_rep(r, *cell_of(f.cell)) for f in many]
        together = finding(
            "U2",
            f"Go reactor/Go net requests/s, geometric mean over the {len(many)} cells with "
            f"c \u2265 {MANY} ('more or less large')",
            geometric_mean_per_rep(per_cell),
            AHEAD_ON_BALANCE,
            f"{np.exp(np.mean(np.log1p(PART3_LEADS))):.2f}",
            {"echo": [[p, *cell_of(f.cell)] for f in many for p in ("go_uring", "go_net")]},
        )
        cell_gates = [f.gate for f in many if f.gate is not None]
        if len(cell_gates) == len(many):
            together.gate = over_cells(cell_gates, f"c \u2265 {MANY}: {len(many)} cells")
            together.reason = together.gate.reason()
            together.context = bool(together.reason)
        out.append(together)
    return out


def u3(echo: pd.DataFrame) -> list[Finding]:
    """U3. Part 3's table: the reactor in SQ_POLL mode has fewer requests/s
    than without, in every cell. Its SQ_POLL mode ran 2 rings against the
    default's 6, so ring count is confounded with SQPOLL, in the source and
    here alike. The C sqpoll/default rings follow as context. SQ_POLL's
    kernel threads each poll on a CPU: with fewer CPUs than the source's they
    take the CPUs the reactor and the load generator need, so the claim is
    not testable there, as U2."""
    pairs = [
        ("go_uring_sqpoll", "go_uring", "Go reactor SQPOLL (2 rings)/Go reactor (its default rings) requests/s"),
        ("sqpoll", "default", "C sqpoll/C default requests/s, second row"),
    ]
    gate = cpu_gate(echo, SQPOLL_MIN_CPUS, "the source's 2 SQ_POLL threads polled beside 4 cores of reactor and client")
    return _reactor_parts("U3", echo, pairs, lambda c: (SLOWER_EVERY, "slower"), gate)


ASYNC_GAIN = above(
    1.10,
    "'a significant gain': about the middle of the leads the same article calls 'even better' "
    f"({pct(min(PART3_LEADS))} to {pct(max(PART3_LEADS))}, median "
    f"{pct(float(np.median(PART3_LEADS)))})",
)
# IOSQE_ASYNC's gain rests on io-wq workers running beside the ring's thread:
# "если … не против параллельно запущенных worker'ов" (if you don't mind
# workers running in parallel). The server's thread, the load generator and
# at least one worker each need a CPU for that: 3.
ASYNC_MIN_CPUS = 3
ASYNC_CPUS_WHY = (
    "the source's gain rests on io-wq workers running in parallel with the ring's thread and the load "
    "generator, each on a CPU of its own"
)
SLOWER_EVERY = below(1.0, "slower in every cell; " + DIRECTION)
DEGRADES = below(1.0, "'rather a degradation'; " + DIRECTION)
NOT_IMPRESSIVE = below(1.10, "'not very impressive': below the gain the same article calls significant (ASYNC's)")
NOT_NOTICEABLE = within(1.0, 0.05, "'the difference is not noticeable'")


def u4(echo: pd.DataFrame) -> list[Finding]:
    """U4, part 3's ring options, the author's opinion (no table):
    - SQ_AFF: "in my tests I rather got a performance degradation";
    - IOSQE_ASYNC: "with a single io_uring instance ... enabling this option
      gives a significant performance gain";
    - buffer select: "in practice the effect is not very impressive";
    - fixed files: "in practice, so far, the difference is not noticeable".
    At the largest c measured, smallest message size. The source says
    nothing of where the SQPOLL thread or io-wq's workers ran: SQ_AFF pins
    the thread to CPU 0, ASYNC's workers inherit the server's CPUs."""
    cells = cells_of(echo)
    if not cells:
        return [not_testable("U4", "ring options", "no echo cell was measured")]
    c = max(c for c, _ in cells)
    b = min(b for cc, b in cells if cc == c)
    checks = (
        ("SQ_AFF degrades", "sqpoll_sq_aff", "sqpoll", DEGRADES, ""),
        (
            "ASYNC gives a significant gain",
            "async",
            "default",
            ASYNC_GAIN,
            cpu_gate(echo, ASYNC_MIN_CPUS, ASYNC_CPUS_WHY),
        ),
        ("buffer select: effect not impressive", "buf_select", "default", NOT_IMPRESSIVE, ""),
        ("fixed files: difference not noticeable", "fixed_files", "default", NOT_NOTICEABLE, ""),
    )
    out = []
    for what, num_p, den_p, rule, gate in checks:
        missing = missing_presets(echo, num_p, den_p)
        if missing:
            out.append(not_testable("U4", what, not_measured(echo, missing, "the paper overlay measures it")))
            continue
        busy = None if gate else client_gate(echo, (num_p, den_p), (c, b))
        if gate:
            out.append(not_testable("U4", what, gate))
        elif busy is not None and busy.reason():
            out.append(gate_note("U4", what, busy))
        out.append(
            cell_finding(
                "U4",
                echo,
                num_p,
                den_p,
                (c, b),
                rule,
                f"{what}, {num_p}/{den_p} requests/s",
                source_cell=False,
                context=bool(gate),
                gate=busy,
            )
        )
    return out


TESTS = {
    "U1": ClaimTest(
        "Habr part 1",
        "the CPU load in both cases was about the same; io_uring is at least a worthy "
        "competitor of epoll in performance",
        "default-ring/epoll requests/s and server CPU load in each of the six cells",
        "the sources' setup: a blocking thread per connection, nothing pinned; a cell where the load "
        "generator set the pace is context",
        "their 4-core i5 and 60 s cells; whether 'load' meant the server or the machine",
        short="io_uring is at least a worthy competitor of epoll",
    ),
    "U2": ClaimTest(
        "Habr part 3",
        "with a more or less large number of connections the reactor squeezed out even "
        "better performance than Go's runtime; with few, a decent rps was not achieved",
        "Go reactor/Go net requests/s in the six cells of go-uring's Benchmark.md: slower at c = 100, "
        "not behind by more than 5 % in each cell with c \u2265 500 and ahead over them together",
        "the sources' setup; the reactor's default rings follow the CPUs (2 x CPUs - 2: 2 on 2 CPUs, 6 on the "
        "source's 4)",
        "VirtualBox and Linux 5.16; the go-uring module itself (rewritten here in pure Go)",
        short="the Go reactor is slow with few connections, ahead with many",
    ),
    "U3": ClaimTest(
        "Habr part 3",
        "the table: SQ_POLL mode below the default reactor in every cell",
        "Go reactor SQPOLL/Go reactor requests/s in the six cells",
        "at least 4 CPUs (its 2 polling threads each take a CPU) and the sources' setup",
        "as U2; its SQ_POLL mode ran 2 rings against the default's 6, so ring count is confounded with "
        "SQPOLL, there and here",
        short="the Go reactor's SQPOLL mode is slower",
    ),
    "U4": ClaimTest(
        "Habr part 3",
        "SQ_AFF: rather a degradation; IOSQE_ASYNC with one ring: a significant gain; "
        "buffer select: not very impressive; fixed files: the difference is not noticeable",
        "each option against its base ring at the largest c, smallest message",
        "the sources' setup (where the SQPOLL thread and io-wq ran, the source does not say); at least 3 CPUs "
        "for ASYNC's workers to run in parallel",
        "the author's opinion has no table or cells",
        short="SQ_AFF hurts, ASYNC helps; buffer select and fixed files barely matter",
    ),
    "U5": ClaimTest(
        "Habr part 3",
        "the best ring count was 2 x cores - 2 (on its bench; the optimum varies from "
        "system to system); FD % rings routing drops performance a lot with few connections, because "
        "io_uring itself is slow at a low operation rate; several rings give an excellent boost and are "
        "much better than one with ASYNC; ATTACH_WQ gives some gain; the worker pool is used very rarely",
        "the reactor's granules, C rings against one ring, against ASYNC and against separate io-wq pools "
        "(2 CPUs), the default ring against epoll at one connection, io-wq requests per request (trace); "
        "the ring count as context",
        "at least 4 CPUs for the ring count (context), 2 for the routing and the C server's parts",
        "no table in the source",
        short="the reactor's design: ring routing, several rings, ATTACH_WQ, rare io-wq",
    ),
    "U6": ClaimTest(
        "Habr part 1 (the author's reply to a reader)",
        "the worker pool starts in any case: someone has to execute the syscalls",
        "the io-wq workers the default ring's server had at exit, in every cell",
        "a kernel whose io_uring reports them (ours: counted from /proc at exit)",
        "the source's kernel 5.11 created io-wq with each ring; the claim is a reply, not a measurement",
        short="io-wq's worker pool starts in any case (said of Linux 5.11)",
    ),
}


# Every rule part 1's and part 3's claims judge a part by: pooling across
# runs judges each run's parts by these, never by a rule a run recorded.
RULES: dict[str, tuple[Rule, ...]] = {
    "U1": (NON_INFERIOR, SIMILAR_LOAD, EQUAL_LOAD_CPU),
    "U2": (SLOWER_FEW, NOT_BEHIND, AHEAD_ON_BALANCE),
    "U3": (SLOWER_EVERY,),
    "U4": (DEGRADES, ASYNC_GAIN, NOT_IMPRESSIVE, NOT_NOTICEABLE),
}
