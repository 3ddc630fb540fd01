"""The sanity checks a headline relies on (iolab.report.checks): an
open-loop tail at low load above the saturated one, a bimodal estimate, an
open-loop cell that fell short of its offered rate. Each flags the numbers
it concerns with words a reader understands (``flagged``), which the
abstract asks before stating a number, and each has a run that must not
trip it. The values are the issue's (main at 10a8834)."""

from __future__ import annotations

import pytest

from iolab.report import checks


def num(value: float, reps: list[float] | None = None, unit: str = "", text: str | None = None) -> dict:
    entry: dict = {"value": value, "text": text if text is not None else f"{value}", "unit": unit}
    if reps is not None:
        entry["reps"] = reps
    return entry


# Issue 83: at 10 % load epoll's open-loop p99 was 1 384 µs, above the
# closed-loop p99 at full capacity, 860 µs.
LOW_LOAD_ABOVE = {
    "open_loop_epoll_capacity_p99_us": num(860.0, unit="µs"),
    "open_loop_epoll_load10_p99_us": num(1384.0, unit="µs"),
    "open_loop_epoll_load10_p999_us": num(3000.0, unit="µs"),
    "open_loop_epoll_load95_p99_us": num(27214.0, unit="µs"),
}
# Another launch's run: 515 µs at 10 % against 696 µs at capacity.
LOW_LOAD_BELOW = {
    "open_loop_epoll_capacity_p99_us": num(696.0, unit="µs"),
    "open_loop_epoll_load10_p99_us": num(515.0, unit="µs"),
    "open_loop_epoll_load95_p99_us": num(2601.0, unit="µs"),
}


def test_a_low_load_tail_above_the_saturated_one_is_flagged_beside_its_number() -> None:
    c = checks.low_load_tail(LOW_LOAD_ABOVE)
    assert c is not None and not c.ok
    words = checks.flagged(LOW_LOAD_ABOVE, "open_loop_epoll_load10_p99_us")
    assert words is not None and "1\u2009384 µs" in words and "860 µs" in words and "not the server" in words
    # Every open-loop percentile at that load is flagged, no other load.
    assert checks.flagged(LOW_LOAD_ABOVE, "open_loop_epoll_load10_p999_us") == words
    assert checks.flagged(LOW_LOAD_ABOVE, "open_loop_epoll_load95_p99_us") is None
    assert "above the saturated closed-loop p99" in checks.entries(LOW_LOAD_ABOVE)["check_limitations"]


def test_a_low_load_tail_below_the_saturated_one_passes() -> None:
    # The negative control: the same check on a run it must not trip.
    c = checks.low_load_tail(LOW_LOAD_BELOW)
    assert c is not None and c.ok and not c.flags
    assert checks.flags(LOW_LOAD_BELOW) == {}
    assert checks.low_load_tail({"open_loop_epoll_load10_p99_us": num(1.0)}) is None  # no capacity: nothing said


# Issue 83: s across the repetitions, 176 ns against 208-220 ns, median 192 ns.
S_BIMODAL = [175.91598, 175.42434, 209.36481, 208.17233, 175.89716, 219.70782]
# The launch before: one repetition away from the others, the median among them.
S_ONE_OFF = [192.11765, 176.84211, 176.19344, 176.18421, 176.19672, 165.40789]
# A 2|4 split whose median, 266 ns, is a value between two repetitions of the larger group.
S_TWO_FOUR = [209.73276, 276.73889, 274.33265, 205.46414, 259.27027, 272.73430]


def test_a_bimodal_estimate_is_flagged_with_its_two_groups() -> None:
    numbers = {"s_getppid_ns": num(192.04, S_BIMODAL, "ns", "192.0")}
    words = checks.flagged(numbers, "s_getppid_ns")
    assert words is not None
    assert "two groups, 175.4\u2013175.9 ns (3) and 208.2\u2013219.7 ns (3)" in words
    assert "192.0 ns" in words and "no repetition measured" in words
    assert "s (getppid)" in checks.entries(numbers)["check_limitations"]


@pytest.mark.parametrize("reps", [S_ONE_OFF, S_TWO_FOUR], ids=["one-off", "two-four"])
def test_repetitions_whose_median_a_repetition_is_near_are_not_flagged(reps: list[float]) -> None:
    # The negative control: a lone outlier, or two groups whose median lies
    # inside one of them, is no median "that no repetition had".
    import statistics

    numbers = {"s_getppid_ns": num(statistics.median(reps), reps, "ns")}
    assert checks.flagged(numbers, "s_getppid_ns") is None
    c = checks.bimodal(numbers)
    assert c is not None and c.ok


def test_the_bimodal_check_needs_the_median_in_the_gap() -> None:
    # Without the median-in-gap condition the detector would call every
    # gapped sample bimodal: a split 2|4 with the median a repetition's
    # neighbour is not flagged, the 3|3 split is.
    assert checks.two_groups(S_TWO_FOUR, 266.0) is None
    assert checks.two_groups(S_BIMODAL, 192.04) is not None
    # Too few repetitions to speak of groups.
    assert checks.two_groups([1.0, 1.0, 5.0], 1.0) is None


SHORT = {
    "open_loop_epoll_load95_achieved": num(0.93),
    "open_loop_epoll_load95_p99_us": num(4000.0, unit="µs"),
    "open_loop_epoll_load10_achieved": num(0.9996),
    "open_loop_epoll_load10_p99_us": num(150.0, unit="µs"),
}


def test_an_open_loop_cell_short_of_its_offered_rate_is_flagged() -> None:
    c = checks.achieved(SHORT)
    assert c is not None and not c.ok and "epoll at 95 % (0.930)" in c.sentence
    words = checks.flagged(SHORT, "open_loop_epoll_load95_p99_us")
    assert words is not None and "0.930 of the rate offered at 95 %" in words
    assert checks.flagged(SHORT, "open_loop_epoll_load10_p99_us") is None


def test_open_loop_cells_that_kept_their_schedule_pass() -> None:
    kept = {k: v for k, v in SHORT.items() if "load10" in k}
    c = checks.achieved(kept)
    assert c is not None and c.ok and "at least 0.9996 of its offered rate" in c.sentence
    assert checks.flags(kept) == {}


def test_a_number_two_checks_flag_carries_both_checks_words() -> None:
    numbers = {
        **LOW_LOAD_ABOVE,
        "open_loop_epoll_load10_achieved": num(0.90),
    }
    words = checks.flagged(numbers, "open_loop_epoll_load10_p99_us")
    assert words is not None and "not the server" in words and "0.900 of the rate offered" in words


def test_every_failed_check_flags_the_numbers_it_concerns() -> None:
    # A failed check that flags nothing would let its number reach a
    # headline unsaid: each one here names at least one number of its run.
    runs = {
        "low_load_tail": LOW_LOAD_ABOVE,
        "achieved": SHORT,
        "bimodal": {"s_getppid_ns": num(192.04, S_BIMODAL, "ns")},
        "shaper": {"mpi_tbf_fitted_ratio": num(0.5), "mpi_tbf_rate_mbit": num(100.0), "mpi_tbf_fitted_mbit": num(50.0)},
        "client": {"echo_client_busy_c500_pct": num(97.0), "echo_epoll_c500_rps": num(1.0)},
        "load_order": {
            "open_loop_epoll_load10_p99_us": num(9568.0),
            "open_loop_epoll_load90_p99_us": num(400.0),
        },
        "mpi_methods": {
            "mpi_osu_method_cells": num(105.0),
            "mpi_osu_method_within_10pct": num(11.0),
            "mpi_shm_latency_us": num(0.4),
        },
    }
    for name, numbers in runs.items():
        (c,) = [c for c in checks.run(numbers) if c.name == name]
        assert not c.ok and c.flags, name
        assert set(c.flags) <= set(numbers), name
