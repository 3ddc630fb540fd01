"""The smoke pipeline through `--profile profiles/slurm` on a real
single-machine SLURM (slurmctld + slurmd with munge) that the test starts on
free ports with its own slurm.conf, and stops."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import copy_workflow, snakemake, tool_env

from iolab import tables

NEEDED = ("slurmctld", "slurmd", "munged", "sbatch", "squeue")
MARKER = "# written by iolab's tests/test_slurm.py; removed when the test ends"
pytestmark = [
    pytest.mark.skipif(
        any(shutil.which(t) is None and not os.path.exists(f"/usr/sbin/{t}") for t in NEEDED),
        reason="slurm-wlm and munge are not installed",
    ),
    pytest.mark.skipif(os.geteuid() != 0, reason="the test cluster runs its daemons as root"),
]


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _sbin(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    d = tmp_path_factory.mktemp("slurm")
    host = socket.gethostname().split(".")[0]
    ctld_port, d_port = _free_ports(2)
    mem_mb = int(Path("/proc/meminfo").read_text().split()[1]) // 1024 - 1024
    for sub in ("state", "spool"):
        (d / sub).mkdir()
    conf = d / "slurm.conf"
    conf.write_text(f"""{MARKER}
ClusterName=iolabtest
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
MinJobAge=86400
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} RealMemory={mem_mb} State=UNKNOWN
PartitionName=iolab Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
    env = dict(os.environ, SLURM_CONF=str(conf))
    # munge: its own socket and pid file, so an existing munged is untouched.
    munge_sock = d / "munge.socket"
    Path("/run/munge").mkdir(exist_ok=True)
    procs = []
    munged = subprocess.run(
        [
            _sbin("munged"),
            "--force",
            f"--socket={munge_sock}",
            f"--pid-file={d}/munged.pid",
            f"--log-file={d}/munged.log",
            f"--seed-file={d}/munged.seed",
        ],
        capture_output=True,
        text=True,
    )
    assert munged.returncode == 0, munged.stderr
    conf.write_text(conf.read_text() + f"AuthInfo=socket={munge_sock}\n")
    # The executor plugin's job steps drop SLURM_CONF from the environment,
    # so srun inside a job reads the standard location, as on a real cluster.
    # The test owns that file only if there was none.
    system_conf = Path("/etc/slurm/slurm.conf")
    if system_conf.exists() and not system_conf.read_text().startswith(MARKER):
        pytest.skip("/etc/slurm/slurm.conf exists; the test will not replace a real cluster's config")
    system_conf.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(conf, system_conf)
    for daemon in (["slurmctld", "-D"], ["slurmd", "-D", "-N", host]):
        procs.append(
            subprocess.Popen(
                [_sbin(daemon[0]), *daemon[1:]], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        )
        time.sleep(1)
    deadline = time.monotonic() + 60
    while True:
        res = subprocess.run(["sinfo", "--noheader", "--format=%T"], env=env, capture_output=True, text=True)
        if res.stdout.strip() == "idle":
            break
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"slurm did not come up: {res.stdout} {res.stderr} {(d / 'slurmctld.log').read_text()[-2000:]}"
            )
        time.sleep(0.5)
    yield {"env": env, "host": host, "dir": d}
    subprocess.run(["scancel", "--user", "root"], env=env, capture_output=True)
    for p in reversed(procs):
        p.terminate()
        p.wait(timeout=30)
    pid = (d / "munged.pid").read_text().strip() if (d / "munged.pid").exists() else ""
    if pid:
        subprocess.run(["kill", pid])
    system_conf.unlink()


def test_under_the_profile_every_measured_node_is_a_slurm_node(slurm: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a cluster that answers, planning refuses a node whose
    measurements are not SLURM jobs (the default inventory's local node)."""
    from iolab.inventory import NodeEntry
    from iolab.runners import cluster_problem

    monkeypatch.setenv("SLURM_CONF", slurm["env"]["SLURM_CONF"])
    cn1 = NodeEntry.of({"name": "cn1", "runner": "slurm"})
    assert cluster_problem([cn1]) is None
    local = NodeEntry.of({"name": "local", "runner": "local"})
    assert (cluster_problem([cn1, local]) or "").startswith("node local has runner local, and the slurm profile")


def test_measurements_run_as_slurm_jobs_through_the_profile(slurm: dict, tmp_path: Path) -> None:
    """Each kind of measurement rule (cost probe, echo sweep, MPI) runs as
    its own SLURM job pinned to the node; the tables after them are local
    rules. The analysis downstream is the smoke pipeline's (test_workflow)."""
    wd = copy_workflow(tmp_path / "iolab")
    node = {
        "name": "cn1",
        "runner": "slurm",
        "cpus": {"probe": 1, "server": 0, "client": 1},
        "slurm": {"partition": "iolab", "slurm_extra": f"--nodelist={slurm['host']}", "cpus_per_task": os.cpu_count()},
    }
    (wd / "config" / "test-nodes.yaml").write_text(yaml.safe_dump({"nodes": [node]}))
    # Few echo cells: the jobs run one at a time on this one-node cluster
    # (each asks for all its CPUs). All are submitted at once (bench, one per
    # target's measurement job): the executor's status checks back off by
    # 10 s per check that finds no job finished, so one job in the queue at a
    # time waited ~20 s per job. One repetition: each kind of measurement is
    # one job.
    (wd / "config" / "test-overlay.yaml").write_text(
        yaml.safe_dump(
            {
                "repeats": 1,
                "experiments": {
                    "mpi": {"transports": ["shm", "tcp"]},
                    "echo": {"only": ["epoll", "default"], "connections": [50]},
                },
            }
        )
    )
    env = {**tool_env(), "SLURM_CONF": slurm["env"]["SLURM_CONF"]}
    targets = [f"results/tables/{e}.parquet" for e in ("syscall", "echo", "mpi")]
    res = snakemake(
        wd,
        *targets,
        "--profile",
        "profiles/slurm",
        "--slurm-init-seconds-before-status-checks",
        "1",
        "--resources",
        f"bench={len(targets)}",
        "--configfile",
        "config/overlays/smoke.yaml",
        "config/test-nodes.yaml",
        "config/test-overlay.yaml",
        env=env,
        timeout=2400,
    )
    assert res.returncode == 0, (res.stdout + res.stderr)[-5000:]
    # Every measurement ran as its own SLURM job on the pinned node.
    sides = [json.loads(p.read_text()) for p in (wd / "data" / "raw" / "cn1").rglob("rep*.provenance.json")]
    assert len(sides) == 3 and all(s["slurm_job_id"] for s in sides)
    assert len({s["slurm_job_id"] for s in sides}) == len(sides)
    assert {s["experiment"] for s in sides} == {"syscall", "echo", "mpi"}
    side = json.loads(next((wd / "data" / "raw" / "cn1" / "mpi").glob("*/rep1.provenance.json")).read_text())
    assert side["runner"] == "slurm" and side["mpi"]["launcher"] == "srun"
    assert all(r["argv"][0] == "srun" for r in side["mpi"]["launches"])
    mpi = tables.load("mpi", wd / "results" / "tables" / "mpi.parquet")
    assert set(mpi["transport"]) == {"shm", "tcp"} and set(mpi["ranks"]) == {2, 4}
    echo = tables.load("echo", wd / "results" / "tables" / "echo.parquet")
    assert (echo["status"] == "ok").all() and set(echo["node"]) == {"cn1"}
    # The tables were built here, not submitted: SLURM saw the three measurements only.
    jobs = subprocess.run(
        ["squeue", "--noheader", "--states=all", "--format=%j"],
        env=slurm["env"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert len(jobs) == 3, jobs
