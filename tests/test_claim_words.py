"""Every margin's reason worded from its rule's own numbers, and the claims
table and the abstract that print them: each claim under one outcome, with
the outcomes it can reach."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from claims_support import echo_table, judged

from iolab import claims
from iolab.claims import evidence, faithful, habr, rules
from iolab.claims.findings import finding, not_testable
from iolab.claims.verdicts import Finding, Outcome, Rule, settle
from iolab.report import claim_texts, numbers

# --- every margin's reason from its rule's own numbers --------------------------------


def _all_rules() -> list[Finding]:
    rng = np.random.default_rng(0)
    return [
        *habr.u1(faithful.part1(10, 0.0, rng)),
        *habr.u2(faithful.part3(10, 0.0, rng)),
        *habr.u3(faithful.part3(10, 0.0, rng)),
        *habr.u4(
            echo_table(
                {p: 1.0 for p in ("default", "sqpoll", "sqpoll_sq_aff", "async", "buf_select", "fixed_files")},
                [(500, 128)],
            )
        ),
        *claims.u5(None, {1: 0.0}),
        *faithful.replications("C1")(8, 0.0, rng),
        *faithful.replications("C2")(8, 0.0, rng),
        *faithful.replications("C3")(8, 0.0, rng),
    ]


def test_every_why_starts_with_the_values_its_rule_accepts() -> None:
    found = [f for f in _all_rules() if f.rule is not None]
    assert found
    for f in found:
        assert f.rule.why.startswith(rules.band_text(f.rule) + ": "), (f.claim, f.rule.why)


def test_the_whys_arithmetic_is_the_rules_own() -> None:
    found = {f.part.split(",")[0]: f for f in _all_rules() if f.rule is not None}
    # C1's n = 1 band: its lower edge (1.23 x 0.85 = 1.05) keeps io_uring dearer.
    n1 = next(f for f in found.values() if f.part.startswith("(t(1) + s)/(s + w)"))
    lo = n1.rule.band[0]
    assert f"lower edge {rules.num(lo)} keeps" in n1.rule.why and lo > 1
    # C1's t/w band: 1.27 x 0.8 = 1.01, still above 1.
    tw = next(f for f in found.values() if f.part.startswith("t(1)/w"))
    assert f"lower edge {rules.num(tw.rule.band[0])} keeps t/w above 1" in tw.rule.why
    # ASYNC's "significant gain": the article's own leads, as computed.
    leads = [float(x) for x in re.findall(r"([+-][0-9.]+) %", habr.ASYNC_GAIN.why)]
    assert leads == pytest.approx(
        [100 * min(habr.PART3_LEADS), 100 * max(habr.PART3_LEADS), 100 * float(np.median(habr.PART3_LEADS))], abs=0.05
    )
    # "about 10 %": the band's own edges.
    gain = next(f for f in _all_rules() if f.claim == "C3" and f.rule is not None and f.rule.kind == "within")
    assert gain.rule.band == pytest.approx((1.05, 1.15)) and "+5 % to +15 %" in gain.rule.why
    # M1's bandwidth band admits a faster VM, and says so.
    from iolab.claims import hpchub

    band = rules.within(0.99, 0.05, hpchub.M1_BANDWIDTH)
    assert band.band[1] > 1 and "faster" in band.why
    # "mostly": the rule is at least half, and so is its reason.
    assert "half the sizes or more" in rules.above(hpchub.MOSTLY, "'mostly': half the sizes or more").why


def test_the_claims_table_prints_each_claims_margins_from_its_rules() -> None:
    found = judged(_all_rules())
    table = numbers.claims_tested(found)
    assert list(table["claim"]) == list(claim_texts.CLAIM_IDS)
    u1 = table.loc[table["claim"] == "U1", "margin"].iloc[0]
    assert habr.NON_INFERIOR.why in u1 and habr.SIMILAR_LOAD.why in u1


def test_the_abstract_puts_each_claim_under_one_outcome() -> None:
    fs = judged(
        [
            finding("U5", "one part", [0.0001] * 10, rules.below(0.01, "test")),
            not_testable("U5", "another part", "needs at least 4 CPUs"),
            not_testable("C3", "a part", "the claim is about CPU mitigations on"),
        ]
    )
    v = claim_texts.claim_verdict_objects(fs)
    assert v["U5"].line().startswith(Outcome.INCOMPLETE.value)
    assert {c: x.outcome for c, x in v.items()} == {"C3": Outcome.NOT_TESTABLE, "U5": Outcome.INCOMPLETE}
    outcomes = {
        "C1": Outcome.UNDECIDED,
        "C3": Outcome.NOT_TESTABLE,
        "U1": Outcome.NOT_REPRODUCED,
        "U2": Outcome.REPRODUCED,
        "U5": Outcome.INCOMPLETE,
    }
    assert claim_texts.claims_by_outcome(outcomes) == (
        "Of the sources' claims, reproduced: U2; not reproduced: U1; undecided at this precision: C1; "
        "not testable here: C3; reproduced where testable, not testable in part: U5."
    )


def test_the_claims_table_says_which_outcomes_each_claim_can_reach() -> None:
    six = judged([finding("U1", f"p{i}", [1.2] * 6, rules.above(1.0, "t")) for i in range(2)])
    assert claim_texts.reach_text("U1", six) == (
        "With 6 repetitions planned in advance, U1 can be reproduced or "
        "undecided, not \u201cnot reproduced\u201d (its 2 parts need 7 repetitions to refute it)."
    )
    # No allowance moves a band's edges: a narrow band is reachable either way.
    narrow = [finding("C1", "p", [1.0] * 10, Rule("within", 1.0, 0.05))]
    settle(narrow, evidence.FIXED, 0.10, predict=False)
    assert narrow[0].reachable == (True, True)
    assert claim_texts.reach_text("C1", narrow) == (
        "With 10 repetitions planned in advance, C1 can be reproduced, not reproduced or undecided."
    )
    seven = judged([finding("U1", f"p{i}", [1.2] * 7, rules.above(1.0, "t")) for i in range(2)])
    assert claim_texts.reach_text("U1", seven) == (
        "With 7 repetitions planned in advance, U1 can be reproduced, not reproduced or undecided."
    )
    assert math.isclose(evidence.FIXED.side, 0.025)
