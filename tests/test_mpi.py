"""MPI probes and the netns cluster, with real Open MPI, real network
namespaces and real tbf shaping (the analysis: test_mpi_models.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO

from iolab import formats, readers, tables
from iolab.experiments import mpi
from iolab.experiments.mpi import launch as mpi_launch
from iolab.rooms.mpi import stats as mpistats
from iolab.runners import RunError
from iolab.settings import MpiSettings

IS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="network namespaces need root")


def mpirun(
    *args: str, np_: int = 2, btl: str = "self,vader", timeout: float = 120, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", **(env_extra or {}))
    cmd = ["mpirun", "-np", str(np_), "--oversubscribe", "--mca", "btl", btl]
    if np_ > 2:
        cmd += ["--mca", "mpi_yield_when_idle", "1"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout, env=env)


def settings(**over: object) -> MpiSettings:
    """The default config's MPI section with ``over`` changed, typed as the
    measurement entry point types it."""
    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["experiments"]["mpi"]
    base.update(over)
    return MpiSettings.of(base)


NO_REFERENCE = {"enabled": False}


# ---- the probe -------------------------------------------------------------


def test_help_and_bad_flags(mpi_build: Path) -> None:
    res = subprocess.run([str(mpi_build / "mpi-probe"), "--help"], capture_output=True, text=True)
    assert res.returncode == 0
    for flag in (
        "--bench",
        "--sizes",
        "--warmup",
        "--iterations",
        "--series",
        "--sync",
        "--window-us",
        "--inject-error",
        "--output",
        "--method",
        "--delay-rank",
    ):
        assert flag in res.stdout
    res = subprocess.run([str(mpi_build / "mpi-probe"), "--sync", "sometimes"], capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr.strip() == "mpi-probe: --sync: 'sometimes' is not barrier or window"
    # Under mpirun a bad flag is still one line, not one per rank.
    res = mpirun(str(mpi_build / "mpi-probe"), "--bench", "gather", np_=4)
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("mpi-probe:")]
    assert lines == ["mpi-probe: --bench: unknown value 'gather' (known: pingpong,bcast,allreduce,alltoall,barrier)"], (
        res.stderr
    )


@pytest.mark.parametrize("sync", ["barrier", "window"])
@pytest.mark.parametrize("san", [False, True])
def test_every_iteration_on_every_rank(mpi_build: Path, tmp_path: Path, sync: str, san: bool) -> None:
    exe = mpi_build / ("san/mpi-probe" if san else "mpi-probe")
    out = tmp_path / "out.csv"
    res = mpirun(
        str(exe),
        "--sizes",
        "1,100,5000",
        "--series",
        "2",
        "--iterations",
        "4",
        "--warmup",
        "1",
        "--large-bytes",
        "1000",
        "--large-iterations",
        "3",
        "--sync",
        sync,
        "--output",
        str(out),
        np_=3,
        # Open MPI's own allocations are not ours to report.
        env_extra={"ASAN_OPTIONS": "detect_leaks=0"} if san else None,
    )
    assert res.returncode == 0, res.stderr
    meta = [json.loads(ln.split(":", 1)[1]) for ln in out.read_text().splitlines() if ln.startswith("# meta:")]
    assert meta[0]["ranks"] == 3 and meta[0]["sync"] == sync and meta[0]["validated"] is True
    frame = pd.read_csv(out, comment="#")
    assert list(frame.columns) == formats.MPI_PROBE_COLUMNS
    for bench, g in frame.groupby("bench"):
        sizes = [0] if bench == "barrier" else [1, 100, 5000]
        ranks = {0, 2} if bench == "pingpong" else {0, 1, 2}  # ping-pong: rank 0 and the last
        assert set(g["rank"]) == ranks
        for size in sizes:
            per = 4 if size <= 1000 else 3
            cell = g[g["bytes"] == size]
            assert len(cell) == 2 * per * len(ranks), (bench, size)
            assert (cell["ns"] > 0).all()
    window = frame[frame["bench"] != "pingpong"]["window_ns"]
    assert (window > 0).all() if sync == "window" else (window == 0).all()


@pytest.mark.parametrize(
    "bench,liar", [("pingpong", 1), ("pingpong", 0), ("bcast", 0), ("allreduce", 2), ("alltoall", 1)]
)
def test_validation_catches_a_wrong_result(mpi_build: Path, bench: str, liar: int) -> None:
    np_ = 2 if bench == "pingpong" else 3
    res = mpirun(
        str(mpi_build / "mpi-probe"),
        "--bench",
        bench,
        "--sizes",
        "64",
        "--series",
        "1",
        "--iterations",
        "2",
        "--inject-error",
        str(liar),
        np_=np_,
    )
    assert res.returncode != 0
    assert f"mpi-probe: validation failed: {bench} 64 B" in res.stderr
    assert mpi_launch.mpi_error_line(res.stderr).startswith(f"mpi-probe: validation failed: {bench} 64 B")
    # The same run without the injected error passes validation.
    ok = mpirun(
        str(mpi_build / "mpi-probe"), "--bench", bench, "--sizes", "64", "--series", "1", "--iterations", "2", np_=np_
    )
    assert ok.returncode == 0, ok.stderr


def test_pinned_algorithm_is_recorded(mpi_build: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.csv"
    res = mpirun(
        "--mca",
        "coll_tuned_use_dynamic_rules",
        "1",
        "--mca",
        "coll_tuned_bcast_algorithm",
        "binomial",
        "--mca",
        "coll_tuned_alltoall_algorithm",
        "pairwise",
        str(mpi_build / "mpi-probe"),
        "--bench",
        "bcast,allreduce,alltoall",
        "--sizes",
        "8",
        "--series",
        "1",
        "--iterations",
        "1",
        "--output",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    meta = json.loads(out.read_text().splitlines()[0].split(":", 1)[1])
    algos = meta["algorithms"]
    assert algos["bcast"] == {"pinned": True, "value": 6, "algorithm": "binomial"}
    assert algos["alltoall"]["algorithm"] == "pairwise" and algos["alltoall"]["pinned"]
    assert algos["allreduce"] == {"pinned": False, "value": 0, "algorithm": "tuned fixed decision rules"}


def test_a_full_disk_aborts_the_launch_and_names_the_file(mpi_build: Path) -> None:
    res = mpirun(
        str(mpi_build / "mpi-probe"),
        "--bench",
        "pingpong",
        "--sizes",
        "8",
        "--series",
        "1",
        "--iterations",
        "2",
        "--output",
        "/dev/full",
    )
    assert res.returncode != 0
    assert "mpi-probe: writing /dev/full: No space left on device" in res.stderr


# ---- the experiment launcher and the loaders ---------------------------------


def test_plan_runs_pingpong_in_the_two_rank_launch_only() -> None:
    launches = mpi.plan(settings(transports=["shm", "netns_tbf"], ranks=[2, 4]), seed=1)
    labels = sorted(lc.label() for lc in launches)
    assert labels == [
        "netns_tbf p=2 pingpong",
        "shm p=2 pingpong,bcast,allreduce,alltoall,barrier",
        "shm p=2 reference ping-pong",
        "shm p=4 bcast,allreduce,alltoall,barrier",
    ]
    assert [lc.label() for lc in mpi.plan(settings(), 7)] == [lc.label() for lc in mpi.plan(settings(), 7)]


def test_raw_file_is_parsed_by_the_loaders(mpi_build: Path, tmp_path: Path) -> None:
    out = tmp_path / "local" / "mpi" / "k" / "rep1.csv"
    out.parent.mkdir(parents=True)
    s = settings(
        transports=["shm", "tcp"],
        ranks=[2, 3],
        sizes=[1, 2048],
        series=3,
        iterations=5,
        warmup=1,
        reference={"enabled": True, "sizes": [1], "iterations": 50, "series": 3, "warmup": 5},
    )
    extra = mpi.run_experiment(s, seed=3, output=out, progress=False)
    (out.with_name("rep1.provenance.json")).write_text(
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
    assert len(extra["mpi"]["launches"]) == 6
    assert set(table["transport"]) == {"shm", "tcp"}
    assert set(table["bench"]) == {"pingpong", "bcast", "allreduce", "alltoall", "barrier", formats.REFERENCE_BENCH}
    p3 = table[table["ranks"] == 3]
    assert p3["oversubscribed"].all() and (p3["binding"] == "none").all()
    assert not table[table["ranks"] == 2]["oversubscribed"].any()
    bcast = table[table["bench"] == "bcast"]
    assert (bcast["algorithm"] == "binomial").all() and bcast["pinned"].all()
    times = mpistats.iteration_times(table)
    # A collective iteration's time is the slowest rank's.
    one = table[
        (table["bench"] == "alltoall")
        & (table["transport"] == "tcp")
        & (table["ranks"] == 3)
        & (table["bytes"] == 2048)
        & (table["series"] == 0)
        & (table["iteration"] == 0)
    ]
    got = times[
        (times["bench"] == "alltoall")
        & (times["transport"] == "tcp")
        & (times["ranks"] == 3)
        & (times["bytes"] == 2048)
        & (times["series"] == 0)
        & (times["iteration"] == 0)
    ]
    # Less one clock reading's cost, which the probe measured at launch (the
    # reference ping-pong times its whole loop: nothing to take off).
    probe = table[table["bench"] != formats.REFERENCE_BENCH]
    assert (probe["timer_ns"] > 0).all() and (probe["timer_ns"] < 10_000).all()
    assert (table[table["bench"] == formats.REFERENCE_BENCH]["timer_ns"] == 0).all()
    assert got["time_ns"].item() == (one["ns"] - one["timer_ns"]).max() and len(one) == 3
    summary = mpistats.summarize(times)
    row = summary[(summary["bench"] == "pingpong") & (summary["transport"] == "shm") & (summary["bytes"] == 1)].iloc[0]
    # 3 series x 5 iterations in one repetition: a median, but no interval
    # across repetitions from one.
    assert row["iterations"] == 15 and row["reps"] == 1 and row["low_ns"] == -np.inf
    assert np.isfinite(row["mean3_ns"])
    agreement = mpistats.reference_agreement(times)
    assert set(agreement["transport"]) == {"shm", "tcp"} and (agreement["ratio"] > 0).all()
    # A truncated raw file is refused, not half-read.
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines[:-1]) + "\n" + lines[-1].rsplit(",", 3)[0] + "\n")
    with pytest.raises(readers.RawFormatError):
        readers.read_mpi_csv(out)


def test_plan_runs_both_algorithm_selections_and_ping_pong_once() -> None:
    both = settings(transports=["shm"], ranks=[2, 4], selections=["pinned", "default"], reference=NO_REFERENCE)
    labels = sorted(lc.label() for lc in mpi.plan(both, seed=1))
    assert labels == [
        "shm p=2 bcast,allreduce,alltoall,barrier (Open MPI's default algorithms)",
        "shm p=2 pingpong,bcast,allreduce,alltoall,barrier",
        "shm p=4 bcast,allreduce,alltoall,barrier",
        "shm p=4 bcast,allreduce,alltoall,barrier (Open MPI's default algorithms)",
    ]
    # Nothing pinned: "pinned" is Open MPI's default selection, one launch.
    assert mpi.selections(settings(algorithms=None)) == ["default"]
    assert mpi.selections(settings(algorithms=None, selections=["pinned", "default"])) == ["default"]
    default = next(lc for lc in mpi.plan(both, seed=1) if lc.selection == "default")
    mca = mpi_launch.mca_params(both, default, "vader", None, False)
    assert not any(k.startswith("coll_tuned") for k in mca)


def test_both_selections_are_told_apart_in_the_raw_file(mpi_build: Path, tmp_path: Path) -> None:
    """Two launches of one transport, rank count and program: each row is its
    own launch's, and the probe's own reading of coll_tuned agrees with the
    selection that launch asked for."""
    out = tmp_path / "local" / "mpi" / "k" / "rep1.csv"
    out.parent.mkdir(parents=True)
    s = settings(
        transports=["shm"],
        ranks=[2],
        sizes=[64],
        series=1,
        iterations=3,
        warmup=1,
        benchmarks=["bcast", "alltoall"],
        selections=["pinned", "default"],
        reference=NO_REFERENCE,
    )
    extra = mpi.run_experiment(s, seed=5, output=out, progress=False)
    assert sorted(r["selection"] for r in extra["mpi"]["launches"]) == ["default", "pinned"]
    (out.with_name("rep1.provenance.json")).write_text(
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
    bcast = table[table["bench"] == "bcast"]
    assert len(bcast) == 2 * 2 * 3  # two launches x 2 ranks x 3 iterations
    pinned, default = (bcast[bcast["selection"] == s] for s in ("pinned", "default"))
    assert (pinned["algorithm"] == "binomial").all() and pinned["pinned"].all()
    assert not default["pinned"].any() and (default["algorithm"] == "tuned fixed decision rules").all()
    with pytest.raises(ValueError, match=r"keep one with mpistats\.one_selection"):
        mpistats.iteration_times(table)
    for prefer in ("pinned", "default"):
        times = mpistats.iteration_times(mpistats.one_selection(table, prefer))
        assert set(times["selection"]) == {prefer} and len(times[times["bench"] == "bcast"]) == 3
    # The seed's view keeps them apart: one repetition median per selection.
    per_rep, mean3 = mpistats.seed_view(table)
    bcast_rep = per_rep[per_rep["bench"] == "bcast"]
    assert sorted(bcast_rep["selection"]) == ["default", "pinned"] and sorted(bcast_rep["pinned"]) == [False, True]
    assert sorted(mean3.loc[mean3["bench"] == "bcast", "selection"]) == ["default", "pinned"]
    # A row under another launch's record is refused, not attributed to it.
    lines = out.read_text().splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("shm,"))
    lines[first] = lines[first].replace("shm,", "tcp,", 1)
    out.write_text("\n".join(lines) + "\n")
    with pytest.raises(readers.RawFormatError, match="under the launch record of"):
        tables.load("mpi", tmp_path)


def test_mpi_error_line_skips_open_mpi_banners() -> None:
    stderr = (
        "mpi-probe: validation failed: bcast 8 B, series 0 iteration 1: rank 1 has 0x01 at byte 0, expected 0x02\n"
        "--------------------------------------------------------------------------\n"
        "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD\n"
        "[vm:123] 1 more process has sent help message help-mpi-api.txt / mpi-abort\n"
    )
    assert mpi_launch.mpi_error_line(stderr).startswith("mpi-probe: validation failed: bcast 8 B")


def test_config_errors_are_one_line(tmp_path: Path) -> None:
    from iolab.config import ConfigError, check_semantics, load

    cfg = load()  # validated: the semantic checks see the schema's defaults
    cfg["experiments"]["mpi"]["ranks"] = [4]
    with pytest.raises(ConfigError, match=r"^config error at experiments.mpi.ranks: ping-pong runs in the 2-rank"):
        check_semantics(cfg)
    cfg["experiments"]["mpi"].update(ranks=[2], min_bytes=4096, max_bytes=16)
    with pytest.raises(ConfigError, match="min_bytes: 4096 is above max_bytes"):
        check_semantics(cfg)


def test_timeout_kills_the_launch_and_says_so(mpi_build: Path, tmp_path: Path) -> None:
    s = settings(
        transports=["shm"],
        ranks=[2],
        benchmarks=["bcast"],
        sizes=[1],
        series=1000,
        iterations=100000,
        warmup=0,
        timeout=2,
        reference={"enabled": False, "sizes": [1], "iterations": 1, "series": 1, "warmup": 0},
    )
    with pytest.raises(RunError, match=r"shm p=2 bcast did not finish within 2 s"):
        mpi.run_experiment(s, seed=1, output=tmp_path / "rep1.csv", progress=False)


def test_an_rdma_fabric_counts_as_infiniband_only_where_every_node_showed_a_port() -> None:
    ucx, openib = {"pml": "ucx"}, {"btl": "self,openib"}
    assert mpi_launch.fabric(ucx, {"metal": True, "vm": True})["kind"] == "infiniband"
    # One side without an active InfiniBand port: UCX fell back to TCP or
    # shared memory, and that is what the launch is called.
    assert mpi_launch.fabric(ucx, {"metal": True, "vm": False})["kind"] == "ucx"
    assert mpi_launch.fabric(ucx)["kind"] == "ucx"
    assert mpi_launch.fabric(openib, {"metal": True, "vm": False})["kind"] == "rdma, no InfiniBand port seen"
    assert mpi_launch.fabric({"btl": "self,tcp"}, {"metal": True})["kind"] == "tcp"
    assert mpi_launch.fabric(ucx, {"metal": True, "vm": True})["infiniband_seen"] == {"metal": True, "vm": True}


def test_host_facts_read_the_rdma_ports_the_kernel_shows() -> None:
    from iolab import hostfacts

    here = hostfacts.gather()
    shown = Path("/sys/class/infiniband")
    ports = list(shown.glob("*/ports/*")) if shown.exists() else []
    assert len(here.rdma_ports) == len(ports)
    assert here.infiniband_active == any(
        (p / "link_layer").read_text().strip() == "InfiniBand" and "ACTIVE" in (p / "state").read_text() for p in ports
    )
    # The script's line format, as a node with an HCA prints it.
    facts = hostfacts.HostFacts({"rdma_ports": "mlx5_0 1 InfiniBand 4: ACTIVE\nmlx5_1 1 Ethernet 4: ACTIVE"})
    assert facts.infiniband_active and [p["link_layer"] for p in facts.rdma_ports] == ["InfiniBand", "Ethernet"]
    assert not hostfacts.HostFacts({"rdma_ports": "mlx5_0 1 InfiniBand 1: DOWN"}).infiniband_active
