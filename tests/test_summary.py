"""The abstract's results, written from the run's numbers: a result is
stated only where its interval excludes the comparison point; no
configuration is singled out by its median; n* only with a bounded
interval. Each case is one a referee found stated without that support."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iolab.report import summary


def entry(value: float, low: float, high: float, reps: list[float] | None = None) -> dict[str, Any]:
    return {
        "value": value,
        "ci95": [low, high],
        "ci_bounded": True,
        "text": f"{value:.2f}",
        "reps": reps if reps is not None else [value] * 6,
    }


def test_batching_is_not_said_to_pay_without_an_interval_that_says_so() -> None:
    # The referee's case: 0.83 [0.66, 1.19] and n* = 3.2 [1.5, inf] gave "batching pays from about 3 SQEs".
    undecided = {
        "per_sqe_over_epoll": entry(0.83, 0.66, 1.19),
        "nstar_B": {"value": 3.2, "ci95": [1.5, None], "ci_bounded": False},
    }
    assert summary.cost_model(undecided) == ""
    decided = {**undecided, "per_sqe_over_epoll": entry(0.80, 0.70, 0.90)}
    text = summary.cost_model(decided)
    assert text.startswith("A receive and a send added to an io_uring batch cost 0.80 (95 % interval 0.70\u20130.90)")
    assert "less than epoll" in text and "batching pays" not in text
    bounded = {**decided, "nstar_B": entry(3.2, 2.5, 4.1)}
    assert "batching pays from about 3.20 (95 % interval 2.50\u20134.10) SQEs" in summary.cost_model(bounded)


def test_no_server_is_singled_out_by_its_median() -> None:
    # "cheapest" by median with an interval across 1, one dearer, one alike:
    # only the dearer is named, and none is called cheaper.
    numbers = {
        "echo_ratio_rings_granule_c50_cpu": entry(
            0.90, 0.84, 1.25, [0.84, 0.86, 0.88, 0.9, 0.9, 0.92, 0.95, 1.0, 1.1, 1.2, 1.25, 0.87]
        ),
        "echo_ratio_sqpoll_c50_cpu": entry(
            1.86, 1.5, 2.4, [1.5, 1.6, 1.7, 1.8, 1.85, 1.86, 1.9, 2.0, 2.1, 2.2, 2.3, 2.4]
        ),
        "echo_ratio_default_c50_cpu": entry(
            1.0, 0.9, 1.1, [0.9, 0.95, 1.0, 1.05, 1.1, 0.97, 1.02, 0.99, 1.01, 1.0, 0.98, 1.03]
        ),
    }
    text = summary.servers(numbers)
    assert "of 3 io_uring server configurations" in text and "none costs significantly less" in text
    assert "1 significantly more (sqpoll 1.86)" in text and "rings_granule" not in text
    # A broken reading that picks by median would name rings_granule: the same
    # numbers with its interval below 1 do name it, so the check can tell.
    numbers["echo_ratio_rings_granule_c50_cpu"]["reps"] = [
        0.8,
        0.82,
        0.84,
        0.85,
        0.86,
        0.87,
        0.88,
        0.89,
        0.9,
        0.91,
        0.92,
        0.93,
    ]
    assert "1 cost significantly less (rings_granule)" in summary.servers(numbers)


def test_zero_copy_is_stated_only_when_every_size_sits_on_one_side() -> None:
    one_side = {"zc_ratio_send_zc_1024": entry(1.2, 1.1, 1.3), "zc_ratio_send_zc_65536": entry(1.3, 1.2, 1.4)}
    assert summary.zero_copy(one_side) == (
        "On loopback a zero-copy send costs 1.20\u20131.30 times a plain send "
        "from 1 to 64 KiB, each interval wholly above 1."
    )
    assert summary.zero_copy({**one_side, "zc_ratio_send_zc_65536": entry(1.1, 0.95, 1.2)}) == ""


def test_the_abstract_says_so_when_nothing_is_decided() -> None:
    written = summary.write({"per_sqe_over_epoll": entry(1.0, 0.9, 1.1)})
    assert written["abstract_findings"]["text"] == (
        "No comparison in this run has an interval that excludes its comparison point."
    )
    assert summary.result_count({"per_sqe_over_epoll": entry(1.0, 0.9, 1.1)}) == 0


def test_the_first_finding_is_the_headline_cell_with_the_models_prediction() -> None:
    numbers = {
        "headline_cpu_c50_b128": entry(1.1, 1.0, 1.2),
        "headline_cpu_c500_b512": entry(1.3, 1.2, 1.4),
        "headline_cpu_c500_b512_predicted": entry(0.9, 0.85, 0.95),
        "headline_cpu_c500_b128": entry(1.25, 1.15, 1.35),
    }
    text = summary.headline_cell(numbers)
    # The most connections, the smallest message; its side said from its interval.
    assert text.startswith("At 500 connections and 128 B, io_uring's default ring costs 1.25 (95 % interval")
    assert "(more than epoll)" in text and "predicts" not in text
    across = {**numbers, "headline_cpu_c500_b128": entry(1.02, 0.95, 1.1)}
    # An interval across 1 says no side: never "about as much" (it shows no equivalence).
    assert "(its interval includes 1: neither is shown to cost less)" in summary.headline_cell(across)
    below = {"headline_cpu_c500_b512": entry(0.8, 0.7, 0.9), "headline_cpu_c500_b512_predicted": entry(0.9, 0.85, 0.95)}
    said = summary.headline_cell(below)
    assert "(less than epoll)" in said and "the cost model, at the batch size the server reached, predicts 0.90" in said
    # Negative control: a cell with no interval is never the headline.
    assert summary.headline_cell({"headline_cpu_c500_b128": {"value": 1.3, "text": "1.30"}}) == ""


def test_the_abstract_states_at_most_five_findings_from_parts_and_counts() -> None:
    findings = {
        "value": [
            {
                "claim": "C4",
                "part": "p",
                "value": "3.40 [3.10, 3.70]",
                "estimate": {"value": 3.4, "low": 3.1, "high": 3.7},
                "per_rep": [3.1, 3.3, 3.4, 3.4, 3.5, 3.7],
            },
            {"claim": "U6", "part": "w", "value": "0", "per_rep": [0.0] * 6},
            {"claim": "U6", "part": "ctx", "value": "5", "per_rep": [5.0] * 6, "context": True},
        ]
    }
    numbers = {
        "findings": findings,
        "headline_cpu_c500_b128": entry(1.25, 1.15, 1.35),
        "per_sqe_over_epoll": entry(0.8, 0.7, 0.9),
        "preferred_model": {"value": "B", "text": "B"},
        "aic_gap": {"value": 90.0, "text": "90.0"},
        "zc_ratio_send_zc_1024": entry(1.2, 1.1, 1.3),
    }
    found = summary.findings(numbers)
    assert len(found) == summary.MAX_FINDINGS
    assert (
        found[0].startswith("At 500 connections")
        and "costs 3.40 (95 % interval 3.10\u20133.70) times epoll's server CPU" in found[2]
    )
    assert "summed AIC gap of 90.0" in found[3]
    assert summary.io_wq(numbers).startswith("No io-wq worker started for the default ring in any of 6 repetitions")
    # A worker in some repetition: nothing is said.
    busy = {"findings": {"value": [{"claim": "U6", "part": "w", "value": "1", "per_rep": [0.0, 1.0]}]}}
    assert summary.io_wq(busy) == ""


def test_the_verdict_sentence_counts_each_outcome_and_the_launches_still_needed() -> None:
    outcomes = {"C4": "not reproduced", "U1": "undecided at this precision", "M1": "not testable here"}
    numbers = {
        "kind_launches": {"value": 3, "text": "3"},
        "kind_launches_needed_fewest": {"value": 4, "text": "4"},
        "kind_launches_needed": {"value": 17, "text": "17"},
    }
    text = summary.verdict_sentence(numbers, outcomes)
    assert text.startswith("Of the sources' 3 claims, 2 could be tested on this machine (")
    assert "not reproduced: C4" in text and "undecided at this precision: U1" in text
    assert "1 cannot be tested here (the claims table says why)" in text
    assert text.endswith(
        "The verdicts about this machine kind rest on 3 launches so far; deciding them needs from about 4 to "
        "about 17 more, claim by claim."
    )
    one = {
        **numbers,
        "kind_launches": {"value": 1, "text": "1"},
        "kind_launches_needed_fewest": numbers["kind_launches_needed"],
    }
    assert summary.verdict_sentence(one, outcomes).endswith(
        "rest on 1 launch so far; deciding them needs about 17 more."
    )
    # The claims no count of launches can decide are named, not left out.
    beyond = {**numbers, "kind_out_of_reach": {"value": "C5, U4", "text": "C5, U4"}}
    assert summary.verdict_sentence(beyond, outcomes).endswith(
        "claim by claim, and C5, U4 are out of reach at the spread between launches."
    )
    assert summary.verdict_sentence({}, {}) == ""


def test_the_conclusion_says_what_the_run_learned_from_its_numbers() -> None:
    def n(value: float, text: str, ci: list[float] | None = None) -> dict:
        return {"value": value, "text": text, **({"ci95": ci, "ci_bounded": True} if ci else {})}

    numbers = {
        "preferred_model": {"value": "B", "text": "B"},
        "aic_gap": n(74.9, "74.9"),
        "t1_over_w": n(1.58, "1.58", [1.47, 1.77]),
        "c1_t1_ns": n(1900.0, "1 900"),
        "c1_w_ns": n(1500.0, "1 500"),
        "zc_copied_pct_min": n(100.0, "100"),
    }
    learned = summary.what_was_learned(numbers)
    assert "model B fits it better than the source's constant t, by a summed AIC gap of 74.9" in learned
    assert "t(1)/w is 1.58 (95 % interval 1.47–1.77)" in learned and "copied every zero-copy send" in learned
    # Another run, another answer: the same sentence does not stand.
    other = {**numbers, "preferred_model": {"value": "A", "text": "A"}, "zc_copied_pct_min": n(40.0, "40")}
    flipped = summary.what_was_learned(other)
    assert "constant-t model fits" in flipped and "at least 40 %" in flipped
    assert summary.what_was_learned({}) == ""


def test_the_cell_length_said_is_every_cell_length_the_run_had() -> None:
    one = {"echo_cell_seconds": {"value": 0.75, "text": "0.75"}, "claim_outcomes": {"value": []}}
    assert "Echo cells ran 0.75 s each" in summary.write(one)["limitations"]["text"]
    # A setup that ran longer cells: the sentence gives the span, not one length.
    two = {**one, "echo_cell_seconds_max": {"value": 1.25, "text": "1.25"}}
    text = summary.write(two)["limitations"]["text"]
    assert "Echo cells ran 0.75\u20131.25 s each" in text and "0.75 s each" not in text


def test_the_cell_lengths_come_from_every_setup_the_run_measured(tmp_path: Path) -> None:
    import pandas as pd

    from iolab.report.outputs import Outputs
    from iolab.rooms.echo import present

    # Our setup's cells ran 0.5 + 0.25 s, the sources' setup's 1 + 0.25 s.
    table = pd.DataFrame({"layout": ["pinned"] * 4 + ["shared"] * 2, "loaded_s": [0.75] * 4 + [1.25] * 2})
    out = Outputs("echo", str(tmp_path / "fig"), str(tmp_path / "n.json"), str(tmp_path / "m.json"), tables={})
    present.cell_lengths(out, table)
    numbers = {**out.numbers, "claim_outcomes": {"value": []}}
    assert "Echo cells ran 0.75\u20131.25 s each" in summary.write(numbers)["limitations"]["text"]
    # Our setup's cells alone (what the echo notebook's figures read) miss the longer ones.
    ours = Outputs("echo", str(tmp_path / "fig"), str(tmp_path / "o.json"), str(tmp_path / "m.json"), tables={})
    present.cell_lengths(ours, table[table["layout"] == "pinned"])
    assert "echo_cell_seconds_max" not in ours.numbers


# Issue 83: s's repetitions fell in two groups, 176 ns and 208-220 ns, and
# the median lay between them; here the batch cost's, in the same shape.
BIMODAL = [0.70, 0.71, 0.70, 0.90, 0.91, 0.90]


def test_a_number_a_check_flags_is_not_one_of_the_abstracts_findings(monkeypatch) -> None:
    from iolab.report import checks

    two_states = {"per_sqe_over_epoll": entry(0.80, 0.70, 0.91, BIMODAL)}
    assert checks.flagged(two_states, "per_sqe_over_epoll") is not None
    assert not [s for s in summary.findings(two_states) if "io_uring batch cost" in s]
    assert "io_uring batch cost" not in " ".join(summary.conclusion(two_states, {}))
    # The same number without the second state is stated: the finding is
    # left out for its flag, not for its value.
    one_state = {"per_sqe_over_epoll": entry(0.80, 0.70, 0.91, [0.79, 0.80, 0.80, 0.81, 0.80, 0.78])}
    assert checks.flagged(one_state, "per_sqe_over_epoll") is None
    assert [s for s in summary.findings(one_state) if "io_uring batch cost 0.80" in s]
    # The negative control: with the flagged numbers kept, the abstract
    # states the flagged number, and the test above would catch it.
    monkeypatch.setattr(summary, "unflagged", dict)
    assert [s for s in summary.findings(two_states) if "io_uring batch cost 0.80" in s]


def test_the_conclusion_never_says_no_interval_excludes_1_when_one_does() -> None:
    # The referee's case: 22 configurations at 6 repetitions, the default
    # ring at 0.78 [0.54, 0.98]; Bonferroni over 22 needs 10 repetitions, so
    # servers() had nothing to say, and the conclusion said no comparison
    # excluded 1, which the title's own cell does.
    presets = [f"p{i:02d}" for i in range(21)]
    numbers = {f"echo_ratio_{p}_c500_cpu": entry(1.0, 0.9, 1.1, [0.9, 0.95, 1.0, 1.0, 1.05, 1.1]) for p in presets}
    numbers["echo_ratio_default_c500_cpu"] = entry(0.78, 0.54, 0.98, [0.54, 0.7, 0.76, 0.8, 0.9, 0.98])
    assert summary.servers(numbers, 500) == ""
    first = summary.conclusion(numbers, {})[0]
    assert "has an interval that excludes 1" not in first
    assert "With 6 repetitions, none of the 22 io_uring server configurations" in first
    assert f"at least {summary.reps_for_family(22)} repetitions" in first and summary.reps_for_family(22) == 10
    # Negative control: at 12 repetitions the comparisons are judged and the
    # out-of-reach sentence does not appear.
    for e in numbers.values():
        e["reps"] = e["reps"] * 2
    assert summary.servers_out_of_reach(numbers) == ""
    assert "of 22 io_uring server configurations" in summary.servers(numbers, 500)


def test_the_large_message_finding_names_the_cell_it_measured() -> None:
    # The referee's case: one 16384 B cell was stated as "messages of 16 KiB or more".
    row = {
        "claim": "C4",
        "part": "io_uring/epoll server CPU per request at messages of 16 KiB or more: c = 1000, 16384 B",
        "per_rep": [2.35, 2.82, 3.20, 2.57, 3.40, 2.94],
        "estimate": {"value": 2.88},
        "context": False,
    }
    text = summary.large_messages({"findings": {"value": [row], "text": ""}})
    assert text.startswith("At 1000 connections and 16 KiB messages, the OpenAnolis-style io_uring server")
    assert "or more" not in text and "2.88 (95 % interval" in text
