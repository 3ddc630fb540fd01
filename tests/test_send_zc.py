"""Zero-copy send against plain send: where zero copy starts to pay, and
what the shipped reference data says about it."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from iolab import tables
from iolab.estimation.intervals import Estimate
from iolab.rooms.send_zc import present
from iolab.rooms.send_zc import stats as zerocopy


def summary(intervals: dict[int, tuple[float, float, float]], variant: str = "send_zc") -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"variant": variant, "bytes": size, "ratio": v, "low": lo, "high": hi, "estimate": Estimate(v, lo, hi, 6)}
            for size, (lo, v, hi) in intervals.items()
        ]
    )


def test_zero_copy_pays_from_the_smallest_size_after_which_every_interval_is_below_one() -> None:
    rows = summary({4096: (0.97, 1.02, 1.08), 16384: (0.85, 0.9, 0.96), 65536: (0.6, 0.7, 0.8)})
    cross = zerocopy.crossover(rows, "send_zc")
    assert cross.bytes == 16384 and cross.ratio.value == 0.9
    assert "from 16384 B on" in cross.sentence()


def test_a_size_that_pays_below_one_that_does_not_is_no_crossover() -> None:
    # 4 KiB below 1 but 16 KiB not: zero copy does not pay "from 4 KiB on".
    rows = summary({4096: (0.8, 0.9, 0.95), 16384: (0.95, 1.0, 1.05), 65536: (0.6, 0.7, 0.8)})
    assert zerocopy.crossover(rows, "send_zc").bytes == 65536


def test_an_interval_that_touches_one_does_not_pay() -> None:
    rows = summary({4096: (0.9, 0.95, 1.0), 65536: (0.9, 0.95, math.inf)})
    cross = zerocopy.crossover(rows, "send_zc")
    assert cross.bytes is None and cross.largest_measured == 65536
    assert "at no size measured, up to 65536 B" in cross.sentence()


def test_a_variant_that_was_not_measured_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="no send_zc_fixed rows"):
        zerocopy.crossover(summary({4096: (0.9, 0.95, 1.0)}), "send_zc_fixed")


def test_the_reference_data_copies_every_zero_copy_send_on_loopback() -> None:
    table = tables.load("send_zc", tables.REFERENCE)
    node = sorted(set(table["node"]))[0]
    rows = zerocopy.ratios(table, node)
    assert sorted(set(rows["variant"])) == list(zerocopy.ZERO_COPY)
    assert (rows["reps"] >= 6).all()
    # Loopback gives the receiver a copy of data still in user pages.
    assert (rows["copied_share"] == 1.0).all()
    # Each ratio is of two medians measured in the same repetitions.
    plain = zerocopy.per_rep_medians(table, node)
    plain = plain[plain["variant"] == zerocopy.PLAIN].groupby("bytes")["ns_per_send"].median()
    for row in rows.itertuples():
        assert row.send_ns_per_byte == pytest.approx(plain[row.bytes] / row.bytes)
        assert row.low <= row.ratio <= row.high


def test_plain_send_alone_gives_an_empty_summary_that_still_draws_and_reports(tmp_path) -> None:
    from iolab.report.outputs import Outputs

    table = tables.load("send_zc", tables.REFERENCE)
    rows = zerocopy.ratios(table[table["variant"] == zerocopy.PLAIN], "local")
    assert rows.empty and list(rows.columns) == zerocopy.RATIO_COLUMNS
    assert zerocopy.crossover_text(rows) == "no zero-copy variant was measured beside plain send"
    present.figure(rows)
    out = Outputs(
        "cost_model", str(tmp_path / "fig"), str(tmp_path / "numbers.json"), str(tmp_path / "m.json"), tables={}
    )
    present.numbers(out, rows)
    assert not [k for k in out.texts() if k.startswith("zc_")]


def test_an_unbounded_interval_reads_as_none_in_the_sentence() -> None:
    # Fewer than 6 repetitions give no distribution-free interval: the
    # paper's text must not print "inf".
    rows = summary({4096: (-math.inf, 1.1, math.inf)})
    sentence = zerocopy.crossover(rows, "send_zc").sentence()
    assert "inf" not in sentence and "no interval from 6 repetitions" in sentence
