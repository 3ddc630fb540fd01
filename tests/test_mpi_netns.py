"""The netns cluster with real Open MPI: network namespaces, tbf shaping,
the launch's own temporary folder, teardown after a failure or a kill,
and the refusals without root or iproute2 (the probe and the launcher:
test_mpi.py)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO
from test_mpi import IS_ROOT, NO_REFERENCE, needs_root, settings

from iolab import live, readers
from iolab.experiments import mpi
from iolab.experiments.mpi import launch as mpi_launch
from iolab.experiments.mpi import netns
from iolab.rooms.mpi import latency_models as mpimodels
from iolab.runners import RunError


def _root_addresses() -> str:
    return subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True).stdout


@needs_root
def test_tbf_rate_is_recovered_across_two_namespaces(mpi_build: Path, tmp_path: Path) -> None:
    """The ping-pong over the tbf-shaped cluster recovers the imposed rate.
    At 100 Mbit/s a MiB takes 84 ms on the wire and about a millisecond of
    CPU, so busy CPUs cannot pull the fit far below the cap: 0.86-1.07 of
    it beside four busy loops on these 2 CPUs, where 400 Mbit/s gave
    0.63-0.74 (and once a fit of -4). The same ping-pong unshaped, in the
    same run and order, is the negative control: it crosses the least time
    the shaper allows a MiB."""
    rate = 100.0
    sizes = [262144, 524288, 1048576]
    out = tmp_path / "local" / "mpi" / "k" / "rep1.csv"
    out.parent.mkdir(parents=True)
    s = settings(
        transports=["netns_tbf", "netns"],
        ranks=[2],
        benchmarks=["pingpong"],
        sizes=sizes,
        methods=["probe"],
        reference=NO_REFERENCE,
        series=2,
        iterations=5,
        large_iterations=5,
        warmup=1,
        netns={"tbf_rate_mbit": rate, "tbf_sizes": sizes},
    )
    before = _root_addresses()
    extra = mpi.run_experiment(s, seed=5, output=out, progress=False)
    assert _root_addresses() == before  # nothing outside the cluster's subnet was touched
    assert netns.leftovers() == []
    (shaped,) = [lc for lc in extra["mpi"]["launches"] if lc["transport"] == "netns_tbf"]
    assert shaped["cluster"]["rate_mbit"] == rate
    assert len(set(shaped["probe_meta"]["processors"])) == 2  # two separate hosts
    frame = readers.read_mpi_csv(out)

    one_way = {
        transport: frame[(frame["rank"] == 0) & (frame["transport"] == transport)].groupby("bytes")["ns"].median() / 2
        for transport in ("netns_tbf", "netns")
    }
    mb_s, _ = mpimodels.transfer_rate(one_way["netns_tbf"].index.to_numpy(), one_way["netns_tbf"].to_numpy())
    assert 0.5 < mb_s * 8 / rate < 1.5, mb_s * 8
    # The shaper lets no MiB through faster than the rate allows beyond its
    # burst, however busy the machine (load only adds time); unshaped, the
    # same MiB in the same run is far faster (9-33 ms beside the busy loops).
    least_ns = (sizes[-1] - s.netns.tbf_burst_bytes) * 8 / (rate * 1e6) * 1e9
    assert one_way["netns_tbf"][sizes[-1]] >= least_ns > one_way["netns"][sizes[-1]], one_way


def watch_session_folders(stop: threading.Event, seen: dict[str, set[str]], roots: dict[str, Path]) -> None:
    """Until ``stop``: every path that appears under each of ``roots`` (name ->
    a folder, or a glob of folders in the shared temporary directory), into
    ``seen[name]``; Open MPI's files live only as long as its launch."""
    while not stop.is_set():
        for name, root in roots.items():
            for top in live.SHARED_TMP.glob(str(root)) if "*" in str(root) else [root]:
                for dirpath, dirs, files in os.walk(top):
                    seen[name].update(str(Path(dirpath, f).relative_to(top)) for f in [*dirs, *files])
        time.sleep(0.005)


def netns_launch_watching(tmp_path: Path, predicted: Path) -> dict[str, set[str]]:
    """One 2-rank allreduce over the netns transport, the cluster's hosts
    named for this process; what appeared in ``predicted`` and in the
    launch's own folders (iolab-mpi-<pid>-*) meanwhile."""
    s = settings(
        transports=["netns"],
        ranks=[2],
        benchmarks=["allreduce"],
        sizes=[64],
        series=1,
        iterations=2,
        warmup=1,
        methods=["probe"],
        reference=NO_REFERENCE,
    )
    seen: dict[str, set[str]] = {"predicted": set(), "own": set()}
    stop = threading.Event()
    roots = {"predicted": predicted, "own": Path(f"iolab-mpi-{os.getpid()}-*")}
    watcher = threading.Thread(target=watch_session_folders, args=(stop, seen, roots), daemon=True)
    watcher.start()
    try:
        mpi.run_experiment(s, seed=3, output=tmp_path / "rep1.csv", progress=False)
    finally:
        stop.set()
        watcher.join()
    return seen


@needs_root
def test_a_session_folder_another_user_made_first_goes_unused(mpi_build: Path, tmp_path: Path) -> None:
    """The netns hosts are named for the measuring process (iol<pid>-N), so
    Open MPI's session folder in the shared temporary directory,
    ompi.<host>.<uid>, can be known in advance. Made first by uid 65534 with
    mode 0777, it stays empty: mpirun, its daemons and PMIx keep their files
    in the launch's own 0700 folder (iolab.live.private_tmp_env), where the
    session folder is seen to appear."""
    predicted = live.SHARED_TMP / f"ompi.iol{os.getpid()}-0.0"
    predicted.mkdir()
    try:
        os.chown(predicted, 65534, 65534)
        predicted.chmod(0o777)
        seen = netns_launch_watching(tmp_path, predicted)
        assert seen["predicted"] == set() and list(predicted.iterdir()) == []
        assert any(p.startswith(f"ompi.iol{os.getpid()}-0.0") for p in seen["own"]), sorted(seen["own"])[:20]
        assert netns.leftovers() == []
        # The negative control: without the launch's own folder (Open MPI's
        # defaults), mpirun writes into the folder nobody made.
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(mpi_launch, "_mpi_env", lambda private_tmp=None, own=mpi_launch._mpi_env: own(None))
            seen = netns_launch_watching(tmp_path, predicted)
        assert seen["predicted"], "the control launch did not use the predicted folder"
    finally:
        shutil.rmtree(predicted, ignore_errors=True)


@needs_root
def test_failed_run_leaves_no_namespace_veth_or_bridge(mpi_build: Path) -> None:
    with pytest.raises(RunError, match="validation failed"):
        with netns.NetnsCluster(2) as cluster:
            assert len(netns.leftovers()) >= 5  # 2 namespaces, 2 veth, bridge, /etc/netns
            s = settings(extra_mca={})
            launch = mpi_launch.Launch("netns", 2, "mpi-probe", ["allreduce"], [64])
            argv, _ = mpi_launch.mpirun_argv(
                s,
                launch,
                mpi_build / "mpi-probe",
                ["--bench", "allreduce", "--sizes", "64", "--series", "1", "--iterations", "2", "--inject-error", "1"],
                "vader",
                cluster,
            )
            from iolab.runners import LocalRunner

            LocalRunner().run(
                argv, Path(os.devnull), timeout=120, error_line=mpi_launch.mpi_error_line, env=mpi_launch._mpi_env()
            )
    assert netns.leftovers() == []


@needs_root
def test_leftovers_of_a_killed_run_are_removed(tmp_path: Path) -> None:
    # A process builds a cluster and is killed with SIGKILL: no teardown ran.
    code = (
        "import time\nfrom iolab.experiments.mpi.netns import NetnsCluster\n"
        "c = NetnsCluster(2).__enter__()\nprint('up', flush=True)\ntime.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert any(name.startswith(f"iol{proc.pid}") for name in netns.leftovers())
    with netns.NetnsCluster(2):
        assert not any(name.startswith(f"iol{proc.pid}") for name in netns.leftovers())
    assert netns.leftovers() == []


def test_refuses_without_root_or_iproute2() -> None:
    # The module is imported first, then the process drops to nobody: a clone
    # under a directory only root can enter (root's home) stays readable.
    code = (
        "import os\nfrom iolab.experiments.mpi.netns import require_root_and_iproute2 as r\n"
        "if os.environ.get('DROP'):\n os.setuid(65534)\n"
        "try:\n r()\nexcept Exception as e:\n print(e)\n"
    )
    if IS_ROOT:
        res = subprocess.run(
            [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, env=dict(os.environ, DROP="1")
        )
        assert res.stdout.strip() == (
            "netns transport needs root (it creates network namespaces); "
            "run as root or drop 'netns' from experiments.mpi.transports"
        ), res.stderr
        empty = Path("/nonexistent-path")
        res = subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO,
            capture_output=True,
            text=True,
            env=dict(os.environ, PATH=str(empty)),
        )
        assert res.stdout.strip() == "netns transport needs 'ip'; install it with: apt-get install iproute2"
    else:
        with pytest.raises(RunError, match="needs root"):
            netns.require_root_and_iproute2()


def test_subnet_choice_avoids_the_hosts_networks() -> None:
    net = netns.pick_subnet()
    assert net.prefixlen == 24 and net.subnet_of(netns.CANDIDATE_SUPERNET)
    with pytest.raises(RunError, match="must be a private IPv4"):
        netns.pick_subnet("8.8.8.0/24")
    with pytest.raises(RunError, match=r"overlaps 127\.0\.0\.0/8"):
        netns.pick_subnet("127.0.0.0/24")
