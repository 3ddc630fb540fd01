"""Change points in a timeline of medians (iolab.estimation.changepoints):
found where a constructed series steps, at the step, and in at most about
α of series that do not step, under the drift between occasions these
machines show. Without the drift term the same search raises false alarms
in most series: the negative control."""

from __future__ import annotations

import numpy as np
import pytest

from iolab.archive import compare, store, timeline
from iolab.codehash import analysing_digest, measuring_digest
from iolab.estimation import changepoints
from iolab.estimation import occasion_spread as occasions
from iolab.estimation.changepoints import Point

# A cost probe's spread here (data/occasions.json, cost_model:absolute):
# between occasions 0.17, and a median of 6 repetitions known to about 0.05
# (both standard deviations of log values).
SIGMA_OCCASION, SE = 0.17, 0.05
RUNS, STEP_AT, SERIES = 12, 6, 400


def series(rng: np.random.Generator, step: float) -> list[Point]:
    points = []
    for i in range(RUNS):
        value = (
            1000.0 * (step if i >= STEP_AT else 1.0) * float(np.exp(rng.normal(0, SIGMA_OCCASION) + rng.normal(0, SE)))
        )
        half = 1.96 * SE
        points.append(Point(value, value * float(np.exp(-half)), value * float(np.exp(half))))
    return points


def test_a_step_is_found_where_it_is_with_its_size() -> None:
    rng = np.random.default_rng(2026)
    found = [changepoints.changes(series(rng, 2.0), SIGMA_OCCASION) for _ in range(SERIES)]
    exact = [f for f in found if [c.at for c in f] == [STEP_AT]]
    assert len(exact) / SERIES > 0.85  # power at a doubling, 6 runs either side
    assert np.median([f[0].ratio for f in exact]) == pytest.approx(2.0, rel=0.1)


def test_a_series_without_a_step_rarely_raises_an_alarm() -> None:
    rng = np.random.default_rng(7)
    alarms = sum(bool(changepoints.changes(series(rng, 1.0), SIGMA_OCCASION)) for _ in range(SERIES))
    # α = 0.05, Bonferroni over the places a first change could sit; the
    # binomial 99.9 % bound over 400 series is 0.08.
    assert alarms / SERIES <= 0.08


def test_without_the_drift_between_occasions_most_flat_series_raise_alarms() -> None:
    # The negative control: weigh each point by its own interval only.
    rng = np.random.default_rng(7)
    alarms = sum(bool(changepoints.changes(series(rng, 1.0), 0.0)) for _ in range(SERIES))
    assert alarms / SERIES > 0.5


def test_short_and_bad_series() -> None:
    assert changepoints.changes([Point(100.0, 90.0, 110.0)], 0.1) == []
    (change,) = changepoints.changes([Point(100.0, 95.0, 105.0), Point(300.0, 285.0, 315.0)], 0.1)
    assert change.at == 1 and change.ratio == pytest.approx(3.0)
    with pytest.raises(ValueError, match="positive"):
        changepoints.changes([Point(0.0), Point(1.0)], 0.1)
    with pytest.raises(ValueError, match="neither an interval nor an occasion spread"):
        changepoints.changes([Point(1.0), Point(2.0)], 0.0)


def test_a_timeline_of_stored_runs_draws_older_code_apart_and_finds_the_step() -> None:
    # Five runs of one key: four measured with today's code, cost doubling
    # after the second; one between them measured with older code, far off.
    today = {"measured": {e: measuring_digest(e) for e in ("syscall", "echo")}, "analysed": analysing_digest()}
    older = {"measured": {"syscall": "0" * 12, "echo": today["measured"]["echo"]}, "analysed": "x"}
    values = [(100.0, today), (104.0, today), (900.0, older), (205.0, today), (198.0, today)]
    runs, numbers = [], {}
    for i, (value, code) in enumerate(values):
        sha = f"{i:064d}"
        runs.append(store.Record(sha, "f", "p", f"run {i}", f"c{i}", "", f"2026-11-2{i}", {}, code, {}, {}))
        numbers[sha] = {
            "s_getppid_ns": store.StoredNumber(
                "s_getppid_ns", value, value * 0.97, value * 1.03, 6, "ns", "cost_model", "time"
            )
        }
    group = timeline.KeyGroup("k", {}, tuple(runs))
    marks = {r.crate_sha256: timeline.experiment_code(compare.stale(r.as_run())) for r in runs}
    # An occasion spread of 0.10 for the number's kind, as the test's own.
    spread = occasions.Occasions({"cost_model:time": occasions.Spread(0.10, 0.05, 1, 6, 36)}, {})
    (line,) = timeline.timelines(group, numbers, marks, spread)
    assert [p.code for p in line.points] == [timeline.TODAY] * 2 + [timeline.OLDER] + [timeline.TODAY] * 2
    ((at, ratio),) = line.changes
    assert at == 3 and ratio == pytest.approx(2.0, rel=0.05)  # the older point neither causes nor hides it
    spec = timeline.chart(line)
    assert [row["change"] for row in spec["data"]["values"]] == ["", "", "", f"×{ratio:.3g} from here", ""]
    assert (
        spec["hconcat"][0]["layer"][0]["encoding"]["y"]["title"] == "s (getppid) (ns)"
    )  # the quantity in words, not its key
