"""The Habr series' design claims (seeds 000-002): part 3's reactor (U5)
and part 1's author on io-wq's worker pool (U6)."""

from __future__ import annotations

import pandas as pd

from .findings import finding, not_testable
from .habr import REACTOR_MIN_CPUS
from .rules import DIRECTION, above, below, cell_finding, client_gate, cpu_gate, missing_presets
from .verdicts import Finding, Rule

# U5, part 3's reactor design. "The optimum number of rings varies from system
# to system ... on my test bench it was (cores x 2) - 2"; "if the routing
# function is FD % rings, with few connections we get a very big performance
# drop", because "the ring-based event loop, and io_uring itself, work rather
# slowly at a low frequency of operations"; several rings "really give an
# excellent performance boost", and
# "working with several instances is much better" than one ring with ASYNC;
# ATTACH_WQ: "in practice one can get some gain by reducing the number of
# pools"; "the main work happens in the context of the thread that called
# io_uring_enter, and the worker pool is used very rarely".
REACTOR_RING_COUNTS = (1, 2, 4, 8)
VERY_RARELY = 0.01  # io-wq requests per echoed request: at most 1 in 100
BIG_DROP = 0.80  # "a very big drop": at least a fifth of the throughput lost
RINGS_CONTEXT = (
    "the source: 'the optimum number of rings varies from system to system'; (cores x 2) - 2 was best "
    "on its own bench only, so this is shown as context, never counted"
)


# "Такой подход действительно дает отличный буст производительности" (several
# rings really give an excellent performance boost): read as at least the
# gain the same article calls significant (ASYNC's, ``ASYNC_GAIN``).
RINGS_BOOST = 1.10
RINGS_BOOST_WHY = (
    "'an excellent boost': at least the +10 % the same article's 'significant gain' is read as, several rings "
    "(2, granule 75) against the default single ring"
)


RARELY_USED = below(VERY_RARELY, "'very rarely': at most 1 in 100 requests")
ANY_GAIN = above(1.0, DIRECTION)
A_BIG_DROP = below(BIG_DROP, "'a very big drop': at least a fifth lost")
EXCELLENT_BOOST = above(RINGS_BOOST, RINGS_BOOST_WHY)
SLOW_AT_LOW_RATE = below(1.0, "'works rather slowly at a low frequency of operations': slower than epoll; " + DIRECTION)


def u5(echo: pd.DataFrame | None, kernel: dict[int, float] | None, not_traced: str = "") -> list[Finding]:
    """U5: the reactor's design claims. ``kernel``: per repetition, the
    trace experiment's io-wq requests per echoed request (``trace_rates``);
    ``not_traced``: why the trace did not run here, where its table says.
    Each part is gated on what it needs: the Go reactor's ring routing on the
    source's 4 cores, the C server's two rings on 2 CPUs."""
    out: list[Finding] = []
    what = "io-wq requests per echoed request, default ring (trace)"
    rare = RARELY_USED
    if kernel is None or not len(kernel):
        out.append(not_testable("U5", what, not_traced or "the trace experiment did not run, or predates this count"))
    else:
        out.append(
            finding("U5", what, pd.Series(kernel).sort_index(), rare, "used very rarely", {"trace": []}, kind="count")
        )
    parts = [
        (
            "rings: 2 x cores - 2 is best (context: " + RINGS_CONTEXT + ")",
            "go_uring",
            [f"go_uring_rings{k}" for k in REACTOR_RING_COUNTS],
            ANY_GAIN,
            1000,
            REACTOR_MIN_CPUS,
            "the reactor's rings spread over the source's 4 cores",
            True,
        ),
        (
            "FD % rings routing: a very big drop with few connections",
            "go_uring_granule1",
            ["go_uring"],
            A_BIG_DROP,
            100,
            2,
            "the reactor's default 2 rings on 2 CPUs, as U2",
            False,
        ),
        (
            "several rings beat one ring with ASYNC",
            "rings_granule",
            ["async"],
            ANY_GAIN,
            1000,
            2,
            "its two rings each need a CPU",
            False,
        ),
        (
            "several rings give an excellent boost over one ring",
            "rings_granule",
            ["default"],
            EXCELLENT_BOOST,
            1000,
            2,
            "its two rings each need a CPU",
            False,
        ),
        (
            "io_uring itself is slow at a low operation rate (one connection)",
            "default",
            ["epoll"],
            SLOW_AT_LOW_RATE,
            1,
            1,
            "",
            False,
        ),
        (
            "ATTACH_WQ gives some gain",
            "rings_granule",
            ["rings_granule_own_wq"],
            ANY_GAIN,
            1000,
            2,
            "its two rings each need a CPU",
            False,
        ),
    ]
    for label, num_p, dens, rule, c, cpus, why_cpus, context in parts:
        if echo is None:
            out.append(not_testable("U5", label, "the echo experiment did not run"))
            continue
        gate = cpu_gate(echo, cpus, why_cpus)
        if gate:
            out.append(not_testable("U5", label, gate + "; the reactor overlay measures it", context=context))
            continue
        measured = [d for d in dens if not missing_presets(echo, num_p, d)]
        sizes = sorted(set(echo.loc[(echo["connections"] == c) & (echo["status"] == "ok"), "bytes"]))
        if not measured or not sizes:
            out.append(
                not_testable(
                    "U5",
                    label,
                    f"not measured at c = {c}: {num_p} against {', '.join(dens)} "
                    "(the reactor and paper overlays measure it)",
                    context=context,
                )
            )
            continue
        for den in measured:
            out.append(
                cell_finding(
                    "U5",
                    echo,
                    num_p,
                    den,
                    (c, int(sizes[0])),
                    rule,
                    f"{label}: {num_p}/{den} requests/s",
                    source_cell=False,
                    context=context,
                    gate=client_gate(echo, (num_p, den), (c, int(sizes[0]))),
                )
            )
    return out


# U6, part 1's author, answering a reader who thought io-wq workers start
# only with SQPOLL: "пул воркеров запускается в любом случае (кому то же
# нужно выполнять сисколы)" (the worker pool starts in any case: someone has
# to execute the syscalls). Counted: the io-wq workers the default ring's
# server had at exit, the most over its cells in a repetition. Workers are
# counted whole, so the bound 0.5 separates none from one.
POOL_STARTS = above(0.5, "'the pool starts in any case': at least one io-wq worker at exit (0.5 parts none from one)")


def u6(echo: pd.DataFrame | None) -> list[Finding]:
    """U6: io-wq workers were running for the default ring's server, without
    SQPOLL or IOSQE_ASYNC, in every cell (the most at exit per repetition)."""
    label = "io-wq workers at exit of the default ring's server (no SQPOLL, no IOSQE_ASYNC), most over its cells"
    if echo is None:
        return [not_testable("U6", label, "the echo experiment did not run")]
    ok = echo[(echo["status"] == "ok") & (echo["preset"] == "default")]
    if ok.empty:
        return [not_testable("U6", label, "the default ring was not measured")]
    counts = pd.to_numeric(ok.get("iowq_workers"), errors="coerce") if "iowq_workers" in ok else None
    if counts is None or counts.isna().all():
        return [
            not_testable("U6", label, "the server did not report its io-wq workers (a table from before the count)")
        ]
    per_rep = counts.groupby(ok["rep"]).max().dropna().astype(float)
    cells = sorted({(int(c), int(b)) for c, b in zip(ok["connections"], ok["bytes"], strict=True)})
    return [
        finding(
            "U6",
            f"{label} ({len(cells)} cells)",
            per_rep,
            POOL_STARTS,
            "starts in any case",
            {"echo": [["default", c, b] for c, b in cells]},
            kind="count",
        )
    ]


# Every rule U5 and U6 judge a part by: pooling across runs judges each
# run's parts by these, never by a rule a run recorded.
RULES: dict[str, tuple[Rule, ...]] = {
    "U5": (RARELY_USED, ANY_GAIN, A_BIG_DROP, EXCELLENT_BOOST, SLOW_AT_LOW_RATE),
    "U6": (POOL_STARTS,),
}
