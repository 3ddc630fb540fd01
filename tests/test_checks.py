"""The run's own checks (iolab.report.checks): each trips on a constructed
run that should trip it and says so where its number is used and in
Limitations; every directional sentence changes when its quantity flips;
and the paper's text states no direction about measured behaviour that a
run can contradict."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from iolab.report import checks, summary

REPO = Path(__file__).resolve().parent.parent
# The last commit whose paper stated them as fixed text.
BEFORE = "4c554dc"


def num(value: float, low: float | None = None, high: float | None = None) -> dict:
    entry: dict = {"value": value, "text": f"{value}"}
    if low is not None and high is not None:
        entry |= {"ci95": [low, high], "ci_bounded": True}
    return entry


def test_a_shaper_that_loses_half_its_rate_fails_and_says_so_in_limitations() -> None:
    good = {"mpi_tbf_fitted_ratio": num(0.97), "mpi_tbf_rate_mbit": num(100.0)}
    bad = {"mpi_tbf_fitted_ratio": num(0.531), "mpi_tbf_rate_mbit": num(100.0)}
    ok, failed = checks.shaper(good), checks.shaper(bad)
    assert ok is not None and ok.ok and "recovers the imposed rate" in ok.sentence
    assert failed is not None and not failed.ok and "only 0.531 of the imposed rate" in failed.sentence
    assert "0.531" in checks.entries(bad)["check_limitations"]
    assert checks.shaper({}) is None  # no shaper: nothing said


def test_open_loop_tails_below_closed_loop_are_called_out_not_called_understated() -> None:
    base = {"open_loop_epoll_capacity_p99_us": num(17_400.0)}
    above = {**base, "open_loop_epoll_load10_p99_us": num(900.0), "open_loop_epoll_load90_p99_us": num(25_000.0)}
    below = {**base, "open_loop_epoll_load10_p99_us": num(900.0), "open_loop_epoll_load90_p99_us": num(11_900.0)}
    a, b = checks.tails(above), checks.tails(below)
    assert a is not None and a.ok and "understate this run's tail" in a.sentence
    assert b is not None and not b.ok and "did not understate" in b.sentence and "11\u2009900" in b.sentence
    # The referee's run: the tail at 10 % load already above capacity's,
    # so the 90 % tail above it says nothing about closed loop.
    artefact = {**above, "open_loop_epoll_load10_p99_us": num(20_000.0)}
    c = checks.tails(artefact)
    assert c is not None and "understate this run's tail" not in c.sentence
    assert "does not tell whether closed loop understates" in c.sentence


def test_p99_falling_as_the_load_rises_is_an_anomaly() -> None:
    rising = {f"open_loop_epoll_load{p}_p99_us": num(v) for p, v in ((10, 100.0), (50, 150.0), (90, 900.0))}
    falling = {f"open_loop_epoll_load{p}_p99_us": num(v) for p, v in ((10, 9_568.0), (50, 500.0), (90, 400.0))}
    assert checks.load_order(rising).ok
    bad = checks.load_order(falling)
    assert bad is not None and not bad.ok and "fell as the load rose" in bad.sentence
    assert "fell as the offered load rose" in checks.entries(falling)["check_limitations"]


def test_mpi_methods_that_disagree_in_most_cells_trip_their_check() -> None:
    def run(within: float) -> dict:
        return {
            "mpi_osu_method_cells": num(105.0),
            "mpi_osu_method_within_10pct": num(within),
            "mpi_osu_method_ratio_min": num(0.05),
            "mpi_osu_method_ratio_max": num(44.6),
        }

    assert checks.mpi_methods(run(90.0)).ok
    bad = checks.mpi_methods(run(11.0))
    assert bad is not None and not bad.ok and "11 of 105" in bad.sentence and "disagree" in bad.sentence


def test_a_saturated_client_trips_its_check() -> None:
    assert checks.client({"echo_client_busy_c50_pct": num(60.0)}).ok
    bad = checks.client({"echo_client_busy_c50_pct": num(60.0), "echo_client_busy_c500_pct": num(97.0)})
    assert bad is not None and not bad.ok and "c = 500" in bad.sentence and "c = 50," not in bad.limitation


# Each directional sentence from a run and from the same run with its
# quantity flipped: the sentence must differ (it once stayed the same).
FLIPS = {
    "w_order": (
        {"w_send_ns": num(2_900.0, 2_800.0, 3_000.0), "w_recv_ns": num(900.0, 850.0, 950.0)},
        {"w_send_ns": num(900.0, 850.0, 950.0), "w_recv_ns": num(2_900.0, 2_800.0, 3_000.0)},
    ),
    "zero_copy": (
        {"zc_ratio_send_zc_65536": num(1.4), "zc_copied_pct_min": num(100.0)},
        {"zc_ratio_send_zc_65536": num(0.6), "zc_copied_pct_min": num(20.0)},
    ),
    "tails": (
        {"open_loop_epoll_capacity_p99_us": num(100.0), "open_loop_epoll_load90_p99_us": num(900.0)},
        {"open_loop_epoll_capacity_p99_us": num(900.0), "open_loop_epoll_load90_p99_us": num(100.0)},
    ),
    "load_order": (
        {"open_loop_epoll_load10_p99_us": num(100.0), "open_loop_epoll_load90_p99_us": num(900.0)},
        {"open_loop_epoll_load10_p99_us": num(900.0), "open_loop_epoll_load90_p99_us": num(100.0)},
    ),
    "shaper": (
        {"mpi_tbf_fitted_ratio": num(0.98), "mpi_tbf_rate_mbit": num(100.0)},
        {"mpi_tbf_fitted_ratio": num(0.50), "mpi_tbf_rate_mbit": num(100.0)},
    ),
}


@pytest.mark.parametrize("name", sorted(FLIPS))
def test_every_directional_sentence_flips_with_its_quantity(name: str) -> None:
    one, other = (checks.entries(n)[f"check_{name}"] for n in FLIPS[name])
    assert one != other


# Phrases the paper once stated about measured behaviour, whatever the run
# measured (issue 67's list): now generated from the quantity, so none may
# come back as fixed text.
FIXED = (
    "the probe recovers a known rate",
    "The closed-loop figures understate tails",
    "so the tail is understated",
    "is far above",
    "adds its own bookkeeping to a copy it cannot",
    "the error grows at the sizes where the",
    "the figure's last panel draws it beside the saturated cells.",
)


def fixed_phrases(body: str) -> list[str]:
    flat = " ".join(body.split())
    return [p for p in FIXED if p in flat]


def test_the_paper_states_no_fixed_direction_about_what_a_run_measures() -> None:
    texts = [REPO / "paper" / "paper.typ", *sorted((REPO / "iolab" / "rooms").glob("*/*.rst"))]
    texts += sorted((REPO / "report" / "captions").glob("*.rst"))
    for path in texts:
        assert not fixed_phrases(path.read_text()), path.name
    # The check can fail: the paper of the commit before it found six.
    before = subprocess.run(
        ["git", "show", f"{BEFORE}:paper/paper.typ"], cwd=REPO, capture_output=True, text=True, check=False
    )
    if before.returncode != 0:
        pytest.skip(f"commit {BEFORE} is not in this clone's history")
    assert len(fixed_phrases(before.stdout)) >= 5


def test_failed_checks_reach_the_limitations() -> None:
    numbers = {
        "mpi_tbf_fitted_ratio": num(0.531),
        "mpi_tbf_rate_mbit": num(100.0),
        "claim_outcomes": {"value": []},
    }
    written = summary.write(numbers)
    assert "The run's own checks found" in written["limitations"]["text"]
    assert re.search(r"0\.531 of the imposed rate", written["limitations"]["text"])
    assert written["check_shaper"]["text"].startswith("the probe recovers only 0.531")


def test_each_check_is_named_by_one_experiments_manifest() -> None:
    from iolab.manifests import ManifestError, manifests

    checks.check_manifests(checks.CHECKS, manifests())
    found = {name: dict(m) for name, m in manifests().items()}
    found["echo"] = {**found["echo"], "checks": []}
    with pytest.raises(ManifestError, match=r"^check client is named by no experiment's manifest"):
        checks.check_manifests(checks.CHECKS, found)
    found["echo"] = {**found["echo"], "checks": ["client", "clients"]}
    with pytest.raises(ManifestError, match=r"echo\.yaml names check clients, which iolab\.report\.checks does not"):
        checks.check_manifests(checks.CHECKS, found)
    found["latency"] = {**found["latency"], "checks": ["tails", "load_order", "client"]}
    found["echo"] = {**found["echo"], "checks": ["client"]}
    with pytest.raises(ManifestError, match=r"check client is named by echo, latency"):
        checks.check_manifests(checks.CHECKS, found)
