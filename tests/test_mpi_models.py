"""The MPI analysis: the latency models fitted to known parameters, the
transport ratios and the collective figures, on tables built here (no
launch)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from iolab.rooms.mpi import latency_models as mpimodels
from iolab.rooms.mpi import present as mpi_present
from iolab.rooms.mpi import stats as mpistats

# ---- the models ----------------------------------------------------------------


def test_hockney_recovers_a_piecewise_line() -> None:
    m = 2.0 ** np.arange(0, 21)
    t = np.where(m <= 4096, 500 + 0.5 * m, 3000 + 0.2 * m)
    rng = np.random.default_rng(1)
    medians = t * rng.normal(1, 0.01, m.size)
    reps = np.random.default_rng(2)
    per_rep = pd.DataFrame(
        [
            {"rep": r, "ranks": 2, "bytes": mm, "time_ns": tt * d * reps.normal(1, 0.01)}
            for r, d in enumerate(reps.lognormal(0, 0.1, 6), 1)
            for mm, tt in zip(m, t, strict=True)
        ]
    )
    h = mpimodels.fit_hockney(m, medians, per_rep=per_rep)
    assert h.breakpoint == 4096
    assert abs(h.small.ts_ns / 500 - 1) < 0.05 and abs(h.large.tw_ns_per_byte / 0.2 - 1) < 0.05
    # The interval comes from each repetition's own fit.
    assert h.large.tw_ci[0] <= h.large.tw_ns_per_byte <= h.large.tw_ci[1]
    assert h.large.tw_ci[1] / h.large.tw_ci[0] > 1.05


def test_collective_fits_recover_known_parameters_and_skip_oversubscribed_points() -> None:
    rows = []
    for p in (2, 4, 8):
        for m in 2.0 ** np.arange(0, 21, 2):
            t = (2000 + 0.3 * m) * np.log2(p)
            rows.append(
                {
                    "node": "n",
                    "kind": "vm",
                    "transport": "tcp",
                    "bench": "bcast",
                    "ranks": p,
                    "bytes": m,
                    "median_ns": t if p < 8 else 50 * t,
                    "algorithm": "binomial",
                    "pinned": True,
                    "oversubscribed": p == 8,
                }
            )
    fits = mpimodels.collective_fits(pd.DataFrame(rows))
    assert set(fits["model"]) == {"paper", "algorithm"}
    for r in fits.itertuples():
        assert abs(r.ts_ns / 2000 - 1) < 1e-3 and abs(r.tw_ns_per_byte / 0.3 - 1) < 1e-3
        assert r.ranks_fitted == [2, 4] and not r.oversubscribed_in_fit
        assert r.median_abs_error < 1e-6
    errors = mpimodels.prediction_errors(fits)
    assert len(errors) == 2 * 2 * 11


def test_transfer_rate_allows_a_negative_intercept() -> None:
    m = np.array([65536.0, 262144, 1048576])
    t = m / 50.0 * 1e3 - 300_000  # 50 MB/s, a burst let through for free
    mb_s, intercept = mpimodels.transfer_rate(m, t)
    assert abs(mb_s - 50) < 1e-6 and intercept < 0


def test_transport_ratios_are_formed_within_each_repetition() -> None:
    drift = [1.0, 1.5, 0.7, 1.2, 0.9, 1.1]
    rows = []
    for transport, v in (("shm", 1000.0), ("tcp", 4000.0)):
        rows += [
            {
                "transport": transport,
                "bench": "bcast",
                "ranks": 2,
                "bytes": 8,
                "rep": r,
                "time_ns": v * d,
                "oversubscribed": False,
            }
            for r, d in enumerate(drift, 1)
        ]
    r = mpistats.ratios(pd.DataFrame(rows), "shm", "tcp")
    # The drift cancels within each repetition: every ratio is 0.25.
    assert r["ratio"].item() == pytest.approx(0.25)
    assert (r["low"].item(), r["high"].item()) == pytest.approx((0.25, 0.25)) and r["reps"].item() == 6


def test_the_ratio_figure_says_so_when_no_transport_pair_was_measured() -> None:
    # transports: [shm] (or shm and nodes on an ssh node) forms no pair; the
    # workflow still lists the figure, so the notebook must draw one.

    rows = [
        {
            "transport": "shm",
            "bench": "bcast",
            "ranks": 2,
            "bytes": 8,
            "rep": r,
            "time_ns": 1000.0,
            "oversubscribed": False,
        }
        for r in (1, 2)
    ]
    tables_ = mpistats.transport_ratios(pd.DataFrame(rows), ["shm", "nodes"])
    assert tables_ == []
    fig = mpi_present.ratio_figure(tables_)
    (text,) = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert text.startswith("No transport pair was measured") and "tcp/nodes" in text
    assert mpi_present.transport_comparison(tables_) == "no transport comparison was measured"


def _collective_summary() -> pd.DataFrame:
    """bcast over shared memory at p = 2 (fits the CPUs) and p = 4 (oversubscribed)."""
    rows = []
    for p, over in ((2, False), (4, True)):
        for m in (8, 512, 32768):
            t = (1000 + 0.5 * m) * np.log2(p)
            rows.append(
                {
                    "transport": "shm",
                    "bench": "bcast",
                    "ranks": p,
                    "bytes": m,
                    "oversubscribed": over,
                    "median_ns": t,
                    "low_ns": 0.9 * t,
                    "high_ns": 1.1 * t,
                }
            )
    return pd.DataFrame(rows)


@pytest.mark.parametrize("algorithm_ts,dotted", [(1000.0, 0), (3000.0, 1)])
def test_collective_figures_draw_the_algorithm_formula_only_where_it_differs(algorithm_ts: float, dotted: int) -> None:

    summary = _collective_summary()
    curves = {
        ("shm", "bcast", "paper"): lambda p, m: (1000 + 0.5 * m) * np.log2(p),
        ("shm", "bcast", "algorithm"): lambda p, m: (algorithm_ts + 0.5 * m) * np.log2(p),
    }
    fig = mpi_present.collectives_figure(summary, curves)
    (ax,) = fig.axes
    drawn = [line for line in ax.get_lines() if line.get_linestyle() == ":" and len(line.get_xdata())]
    assert len(drawn) == dotted
    # The oversubscribed launch is left out, as the fits leave it out.
    (points,) = ax.containers
    assert len(points.lines[0].get_xdata()) == 3
    errors = pd.DataFrame(
        [
            {"transport": "shm", "bench": "bcast", "ranks": 2, "bytes": m, "model": model, "error": 0.05}
            for m in (8, 512, 32768)
            for model in ("paper", "algorithm")
        ]
    )
    fig = mpi_present.prediction_error_figure(errors, summary, curves)
    assert len(fig.axes[0].get_lines()) - 1 == 1 + dotted  # one line per formula drawn, plus y = 0


def test_oversubscribed_launches_are_drawn_as_the_paper_says() -> None:

    assert (
        "hollow" in mpi_present.OVERSUBSCRIBED_DRAWN
        and "left out of the collectives" in mpi_present.OVERSUBSCRIBED_DRAWN
    )
    ratios = pd.DataFrame(
        [
            {
                "numerator": "shm",
                "denominator": "tcp",
                "bench": "bcast",
                "ranks": p,
                "bytes": m,
                "ratio": 0.5,
                "low": 0.4,
                "high": 0.6,
                "oversubscribed": p > 2,
            }
            for p in (2, 4)
            for m in (8, 64)
        ]
    )
    fig = mpi_present.ratio_figure([ratios])
    faces = sorted(str(c.lines[0].get_markerfacecolor()) for c in fig.axes[0].containers)
    assert faces[-1] == "none" and faces[0] != "none"


def test_the_formulas_shape_is_compared_only_where_p_can_tell_them_apart() -> None:

    fits = pd.DataFrame({"model": ["paper", "algorithm"], "median_abs_error": [0.20, 0.08]})
    assert "cannot be told apart here" in mpi_present.fit_shapes_sentence(fits, [2])
    assert mpi_present.fit_shapes_sentence(fits, [2, 4]) == (
        "Median error over transports and collectives: algorithm formula 8 %; paper formula 20 %."
    )


def test_every_transport_the_schema_allows_has_words_and_a_place() -> None:
    # The order comes from the schema; the words are typed here, so a
    # transport added to the schema without them fails (the paper would
    # print its bare key).
    from iolab.schema import subschema

    allowed = subschema("nodes", "[]", "mpi", "transports")["items"]["enum"]
    assert list(mpistats.TRANSPORT_ORDER) == allowed
    assert set(mpistats.TRANSPORT_NAMES) == set(allowed)
    experiment = subschema("experiments", "mpi", "transports")["items"]["enum"]
    assert set(experiment) <= set(allowed)
    assert {t for pair in mpistats.TRANSPORT_PAIRS for t in pair} <= set(allowed)
