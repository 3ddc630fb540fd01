"""mpi-probe --method osu: OSU micro-benchmarks 5.3's timing method, checked
against OSU's published definitions with real Open MPI and a known delay."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_mpi import mpirun, settings

from iolab import formats, tables
from iolab.experiments import mpi
from iolab.rooms.mpi import stats as mpistats


def _rows(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, comment="#")


def _meta(path: Path) -> dict:
    return json.loads(path.read_text().splitlines()[0].split(":", 1)[1])


def _with_context(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(node="local", kind="vm", transport="shm", rep=1, late=frame["late"].astype(bool))


def test_osu_counts_by_size_and_element_type(mpi_build: Path, tmp_path: Path) -> None:
    out = tmp_path / "osu.csv"
    res = mpirun(
        str(mpi_build / "mpi-probe"),
        "--method",
        "osu",
        "--bench",
        "pingpong,bcast,allreduce",
        "--sizes",
        "2,4,16384,65536",
        "--series",
        "1",
        "--output",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    meta = _meta(out)
    assert meta["method"] == "osu" and meta["osu"]["counts_from_command_line"] is False
    per_rank = _rows(out).groupby(["bench", "bytes"])["rank"].value_counts().unstack("rank")
    # osu_coll.h: 1000 timed iterations, 100 above 8192 elements; osu_latency
    # (osu_pt2pt.h): 10000, and 1000 above 8192 B.
    want = {
        ("osu_bcast", 2): 1000,
        ("osu_bcast", 4): 1000,
        ("osu_bcast", 16384): 100,
        ("osu_bcast", 65536): 100,
        # osu_allreduce counts floats: 16384 B is 4096 of them, still
        # "small"; 2 B is no whole float and is left out, as OSU does.
        ("osu_allreduce", 4): 1000,
        ("osu_allreduce", 16384): 1000,
        ("osu_allreduce", 65536): 100,
        ("osu_latency", 2): 10000,
        ("osu_latency", 4): 10000,
        ("osu_latency", 16384): 1000,
        ("osu_latency", 65536): 1000,
    }
    assert {k: int(v) for k, v in per_rank[0].items()} == want
    assert (per_rank[1] == per_rank[0]).all()


@pytest.mark.parametrize("san", [False, True])
def test_command_line_counts_override_osu_at_every_size(mpi_build: Path, tmp_path: Path, san: bool) -> None:
    exe = mpi_build / ("san/mpi-probe" if san else "mpi-probe")
    out = tmp_path / "osu.csv"
    res = mpirun(
        str(exe),
        "--method",
        "osu",
        "--sizes",
        "1,8,65536",
        "--series",
        "2",
        "--iterations",
        "3",
        "--warmup",
        "1",
        "--output",
        str(out),
        np_=3,
        env_extra={"ASAN_OPTIONS": "detect_leaks=0"} if san else None,
    )
    assert res.returncode == 0, res.stderr
    frame = _rows(out)
    assert set(frame["bench"]) == {"osu_latency", "osu_bcast", "osu_allreduce", "osu_alltoall", "osu_barrier"}
    counts = frame.groupby(["bench", "bytes", "series", "rank"]).size()
    assert (counts == 3).all()
    assert set(frame[frame["bench"] == "osu_allreduce"]["bytes"]) == {8, 65536}
    assert set(frame[frame["bench"] == "osu_latency"]["rank"]) == {0, 2}
    assert _meta(out)["osu"]["counts_from_command_line"] is True


def test_osu_statistic_under_a_known_delay(mpi_build: Path, tmp_path: Path) -> None:
    """Rank 1 spins 2 ms inside every timed iteration. OSU prints, per size,
    the average, minimum and maximum over ranks of each rank's mean: the
    root's 4 B bcast returns at once (eager), rank 1's takes the delay; in a
    barrier both wait for rank 1."""
    out = tmp_path / "osu.csv"
    res = mpirun(
        str(mpi_build / "mpi-probe"),
        "--method",
        "osu",
        "--bench",
        "bcast,barrier",
        "--sizes",
        "4",
        "--series",
        "1",
        "--iterations",
        "20",
        "--warmup",
        "2",
        "--delay-rank",
        "1",
        "--delay-us",
        "2000",
        "--output",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    raw = _rows(out)
    values = mpistats.osu_values(_with_context(raw)).set_index("bench")
    for bench in ("osu_bcast", "osu_barrier"):
        means = raw[raw["bench"] == bench].groupby("rank")["ns"].mean() / 1000.0
        row = values.loc[bench]
        assert row["avg_us"] == pytest.approx(means.mean())
        assert row["min_us"] == pytest.approx(means.min()) and row["max_us"] == pytest.approx(means.max())
        assert means[1] >= 2000.0
    assert values.loc["osu_bcast", "min_us"] < 1000.0 <= 2000.0 <= values.loc["osu_bcast", "max_us"]
    assert values.loc["osu_barrier", "min_us"] >= 1500.0


@pytest.mark.parametrize("bench,liar", [("pingpong", 1), ("bcast", 0), ("allreduce", 2), ("alltoall", 1)])
def test_validation_still_catches_a_wrong_result(mpi_build: Path, bench: str, liar: int) -> None:
    np_ = 2 if bench == "pingpong" else 3
    args = ["--method", "osu", "--bench", bench, "--sizes", "64", "--series", "1", "--iterations", "2"]
    res = mpirun(str(mpi_build / "mpi-probe"), *args, "--inject-error", str(liar), np_=np_)
    assert res.returncode != 0
    assert f"mpi-probe: validation failed: {bench} 64 B" in res.stderr
    assert mpirun(str(mpi_build / "mpi-probe"), *args, np_=np_).returncode == 0


def test_osu_values_follow_osus_definitions() -> None:
    """A fake clock: known per-iteration times give OSU's printed numbers."""
    rows = [
        ("osu_bcast", 8, 0, 0, 1000),
        ("osu_bcast", 8, 0, 1, 3000),  # rank 0: mean 2 us
        ("osu_bcast", 8, 1, 0, 5000),
        ("osu_bcast", 8, 1, 1, 7000),  # rank 1: mean 6 us
        ("osu_bcast", 8, 2, 0, 9000),
        ("osu_bcast", 8, 2, 1, 11000),  # rank 2: mean 10 us
        ("osu_latency", 8, 0, 0, 2000),
        ("osu_latency", 8, 0, 1, 4000),  # round trips: 3 us
        ("osu_latency", 8, 2, 0, 9999),
        ("osu_latency", 8, 2, 1, 9999),
    ]  # the peer: not reported
    frame = pd.DataFrame(rows, columns=["bench", "bytes", "rank", "iteration", "ns"])
    frame = _with_context(frame.assign(ranks=3, series=0, late=0))
    values = mpistats.osu_values(frame).set_index("bench")
    assert values.loc["osu_bcast", ["avg_us", "min_us", "max_us"]].tolist() == [6.0, 2.0, 10.0]
    assert values.loc["osu_latency", ["avg_us", "min_us", "max_us"]].tolist() == [1.5, 1.5, 1.5]
    assert values.loc["osu_bcast", "operation"] == "bcast" and values.loc["osu_latency", "operation"] == "pingpong"
    assert set(values["method"]) == {"osu"}


def test_both_methods_through_the_launcher_and_loaders(mpi_build: Path, tmp_path: Path) -> None:
    out = tmp_path / "local" / "mpi" / "k" / "rep1.csv"
    out.parent.mkdir(parents=True)
    s = settings(
        transports=["shm"],
        ranks=[2],
        sizes=[4, 1024],
        series=3,
        iterations=5,
        warmup=1,
        benchmarks=["pingpong", "bcast", "allreduce", "alltoall"],
        methods=["probe", "osu"],
        osu_iterations=50,
        reference={"enabled": False},
    )
    extra = mpi.run_experiment(s, seed=3, output=out, progress=False)
    assert sorted(r["method"] for r in extra["mpi"]["launches"]) == ["osu", "probe"]
    out.with_name("rep1.provenance.json").write_text(
        json.dumps(
            {
                "node": {"name": "local", "kind": "vm"},
                "mitigations": {"state": "on"},
                "host": {"kernel": "test"},
                "settings": {"rep": 1},
            }
        )
    )
    table = tables.load("mpi", tmp_path)
    assert {formats.bench_method(b) for b in table["bench"]} == {"probe", "osu"}
    osu_bcast = table[table["bench"] == "osu_bcast"]
    # The pinned algorithm of the launch is recorded for OSU's rows too.
    assert (osu_bcast["algorithm"] == "binomial").all() and osu_bcast["pinned"].all()
    assert len(osu_bcast[(osu_bcast["bytes"] == 4) & (osu_bcast["series"] == 0)]) == 2 * 50
    times = mpistats.iteration_times(table)
    assert {"osu_latency", "osu_bcast", "pingpong", "bcast"} <= set(times["bench"])
    ratios = mpistats.method_ratios(mpistats.osu_values(table))
    assert set(ratios["operation"]) == {"pingpong", "bcast", "allreduce", "alltoall"}
    assert set(ratios["bytes"]) == {4, 1024}
    assert (ratios["reps"] == 1).all() and np.isfinite(ratios["ratio"]).all() and (ratios["ratio"] > 0).all()
