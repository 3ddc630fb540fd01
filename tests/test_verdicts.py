"""The verdict rule (iolab.claims.verdicts): each outcome, the equivalence
margin, combining parts, and the repetitions an undecided part needs."""

from __future__ import annotations

import numpy as np
import pytest

from iolab.claims.findings import finding, not_testable
from iolab.claims.verdicts import Finding, Outcome, Rule, combine, interval_text, reps_needed
from iolab.estimation.intervals import Estimate

R, N, U = Outcome.REPRODUCED, Outcome.NOT_REPRODUCED, Outcome.UNDECIDED


@pytest.mark.parametrize(
    "rule,low,high,expected",
    [
        (Rule("above", 1.0), 1.02, 1.3, R),  # the whole interval at or above
        (Rule("above", 1.0), 0.7, 0.98, N),  # the whole interval below
        (Rule("above", 1.0), 0.95, 1.05, U),  # straddles the bound
        (Rule("below", 1.0), 0.8, 0.99, R),
        (Rule("below", 1.0), 1.01, 1.2, N),
        (Rule("below", 1.0), 0.99, 1.01, U),
        (Rule("above", 1.0), 1.0, 1.2, R),  # "at least": the bound itself satisfies it
    ],
)
def test_one_sided_rules(rule: Rule, low: float, high: float, expected: Outcome) -> None:
    assert rule.judge(low, high) is expected


@pytest.mark.parametrize(
    "low,high,expected",
    [
        (0.97, 1.04, R),  # wholly inside +-5 %: no visible difference
        (1.06, 1.20, N),  # wholly above the margin
        (0.80, 0.94, N),  # wholly below it
        (0.97, 1.08, U),  # partly outside: not equivalent at this precision, nor different
        (0.90, 1.10, U),  # wider than the margin on both sides
    ],
)
def test_equivalence_margin_is_two_one_sided(low: float, high: float, expected: Outcome) -> None:
    assert Rule("within", 1.0, 0.05).judge(low, high) is expected


def test_unbounded_interval_is_undecided_whatever_the_value() -> None:
    f = finding("U1", "ratio", [2.0, 2.1, 1.9], Rule("above", 1.0))
    assert f.outcome is U and "no interval: 3 repetitions, 6 needed" in f.summary()


def test_finding_from_per_rep_values_judges_the_interval() -> None:
    f = finding("U3", "sqpoll/default", [0.8, 0.82, 0.85, 0.79, 0.81, 0.84], Rule("below", 1.0))
    assert f.outcome is R and f.estimate is not None and f.estimate.high == 0.85
    assert f.needed is None
    assert f.summary().startswith("reproduced: sqpoll/default = 0.815 [0.790, 0.850], claim ≤ 1")


def test_undecided_part_says_how_many_repetitions_would_decide_it() -> None:
    rng = np.random.default_rng(5)
    per_rep = rng.normal(1.04, 0.05, 6)  # a real 4 % gain, noisy repetitions
    f = finding("U1", "ratio", per_rep, Rule("above", 1.0))
    assert f.outcome is U
    assert f.needed is not None and 6 < f.needed < 200
    # On the bound itself no count decides it.
    assert reps_needed([0.9, 1.1, 0.95, 1.05, 0.98, 1.02], Rule("above", 1.0)) is None


def test_not_testable_is_never_not_reproduced() -> None:
    f = not_testable("U2", "rings", "needs at least 4 CPUs (this node has 2)")
    assert f.outcome is Outcome.NOT_TESTABLE
    assert f.summary() == "not testable here: needs at least 4 CPUs (this node has 2)"


def _f(outcome: Outcome) -> Finding:
    """A part whose ten repetitions give ``outcome``: all above the bound,
    all below it, or on both sides."""
    if outcome is Outcome.NOT_TESTABLE:
        return not_testable("X", "p", "why")
    values = {R: [1.2] * 10, N: [0.8] * 10, U: [0.9, 1.1] * 5}[outcome]
    f = finding("X", "p", values, Rule("above", 1.0))
    assert f.outcome is outcome
    return f


@pytest.mark.parametrize(
    "parts,expected",
    [
        ([R, R], R),
        ([R, N], N),
        ([R, U], U),
        ([U, N], N),
        ([R, Outcome.NOT_TESTABLE], Outcome.INCOMPLETE),
        ([N, Outcome.NOT_TESTABLE], N),
        ([U, Outcome.NOT_TESTABLE], U),
        ([Outcome.NOT_TESTABLE], Outcome.NOT_TESTABLE),
    ],
)
def test_combining_parts(parts: list[Outcome], expected: Outcome) -> None:
    assert combine([_f(p) for p in parts]) is expected


def test_interval_text_uses_significant_figures() -> None:
    assert interval_text(Estimate(1234.6, 1200.0, 1300.0, 6)) == "1\u2009235 [1\u2009200, 1\u2009300]"
    assert interval_text(Estimate(0.8149, 0.79, 0.85, 6)) == "0.815 [0.790, 0.850]"


def test_forest_says_a_shared_setup_note_once_draws_context_hollow_and_each_claims_side() -> None:
    from iolab.report import plots

    note = " [event-loop client, pinned CPUs]"
    findings = [
        Finding("U1", f"c={c} io_uring/epoll requests/s{note}", Rule("above", 1.0), Estimate(1.1, 1.0, 1.2, 6))
        for c in (50, 500)
    ]
    findings.append(Finding("C2", "t(1)/w", Rule("below", 1.0), Estimate(2.0, 1.5, 2.5, 6), context=True))
    fig = plots.claims.forest_figure(findings)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["U1: c=50 io_uring/epoll requests/s", "U1: c=500 io_uring/epoll requests/s", "C2: t(1)/w"]
    assert sum(t.get_text().count("event-loop client, pinned CPUs") for t in fig.texts) == 1
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.25", "0.5", "1", "2", "4"]
    # The context row's point is hollow; counted rows are filled.
    points = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert [line.get_markerfacecolor() for line in points].count("white") == 1
    # Each row shades the side where its claim holds: right of 1 for
    # "above", left of it for "below".
    from matplotlib.collections import PolyCollection

    shaded = [c.get_paths()[0].vertices[:, 0] for c in ax.collections if isinstance(c, PolyCollection)]
    assert shaded[0].min() == 1.0 and shaded[2].max() == 1.0


@pytest.mark.parametrize("rows", [35, 60])
def test_forest_labels_stay_whole_and_clear_of_the_other_column(rows: int) -> None:
    # A default run's 35 rows went into two columns whose labels, wrapped for
    # the full width, ran over the left column's axis.
    from iolab.report import plots
    from iolab.report.plots.style import overlapping_labels

    long = (
        "c=1000 128 B, the reactor's design: FD % rings routing drops throughput with few connections; "
        "several rings beat one with ASYNC, ATTACH_WQ helps (the load generator, not the server, set the pace)"
    )
    parts = [(long if i % 5 == 0 else "c=50 128 B, io_uring/epoll requests/s") + f" {i}" for i in range(rows)]
    findings = [Finding("U1", p, Rule("above", 1.0), Estimate(1.1, 0.9, 1.3, 6)) for p in parts]
    fig = plots.claims.forest_figure(findings)
    assert len(fig.axes) == (1 if rows <= plots.claims.ROWS_PER_COLUMN else 2)
    assert overlapping_labels(fig) == []
    shown = [" ".join(t.get_text().split()) for ax in fig.axes for t in ax.get_yticklabels()]
    assert shown == [f"U1: {p}" for p in parts]


def test_forest_draws_intervals_that_lie_wholly_off_its_axis_at_the_edge() -> None:
    # U5's io-wq share is often exactly 0 against a bound of 0.01: the whole
    # interval lies left of the axis. A default run failed here once.
    from iolab.report import plots

    findings = [
        Finding("U5", "io-wq requests per echoed request", Rule("below", 0.01), Estimate(0.0, 0.0, 0.0, 6)),
        Finding("C1", "far above", Rule("above", 1.0), Estimate(9.0, 7.0, 11.0, 6)),
        Finding("C2", "unbounded", Rule("above", 1.0), Estimate(1.1, -np.inf, np.inf, 6)),
    ]
    ax = plots.claims.forest_figure(findings).axes[0]
    points = [line.get_xdata()[0] for line in ax.get_lines() if line.get_marker() == "o"]
    assert points == [0.25, 4.0, 1.1]
    arrows = sorted(
        (line.get_marker(), line.get_xdata()[0]) for line in ax.get_lines() if line.get_marker() in ("<", ">")
    )
    assert arrows == [("<", 0.25), ("<", 0.25), (">", 4.0), (">", 4.0)]
