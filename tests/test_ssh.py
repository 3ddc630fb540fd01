"""The ssh runner against a real OpenSSH sshd that each test module starts on
127.0.0.1 (a free high port, generated host and user keys) and stops. A whole
pipeline over ssh nodes (echo with its client on this machine, MPI, ib) runs
in tests/test_mpi_nodes.py."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import copy_workflow, snakemake, write_sshd_files

from iolab import readers
from iolab.inventory import NodeEntry
from iolab.runners import RunError, SshRunner

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
pytestmark = pytest.mark.skipif(not os.path.exists(SSHD), reason="openssh-server is not installed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    d = tmp_path_factory.mktemp("sshd")
    port = _free_port()
    write_sshd_files(d, f"Port {port}\nListenAddress 127.0.0.1\nPidFile {d / 'sshd.pid'}\nAcceptEnv OMPI_*\n")
    proc = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(d / "sshd_config")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"sshd did not start: {proc.stdout.read() if proc.stdout else ''}") from None
            time.sleep(0.1)
    host_pub = (d / "host_key.pub").read_text().split()
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    (d / "empty_known_hosts").write_text("")
    node = {
        "name": "sshnode",
        "runner": "ssh",
        "host": "127.0.0.1",
        "user": os.environ.get("USER", "root"),
        "port": port,
        "identity_file": str(d / "user_key"),
        "known_hosts": str(d / "known_hosts"),
        "address": "127.0.0.1",
        "cpus": {"probe": 1, "server": 0, "client": 1},
    }
    if os.geteuid() == 0:
        node["user"] = "root"
    yield {"node": node, "dir": d, "port": port}
    proc.terminate()
    proc.wait(timeout=10)


def test_probe_runs_on_the_node_and_comes_back(sshd: dict, tmp_path: Path) -> None:
    runner = SshRunner(NodeEntry.of(sshd["node"]))
    with runner.session(["cost-probe"]) as r:
        assert r.shell(f"test -x {r.exe('cost-probe')}").returncode == 0  # built there
        out = tmp_path / "syscall.csv"
        r.run([r.exe("cost-probe"), "syscall", "--batches", "20", "--warmup-batches", "2"], out)
        frame = readers.read_raw_csv(out)
        assert len(frame) >= 20 and (frame["ns"] > 0).all()
        facts = r.facts()
        assert facts.get("kernel") == os.uname().release and facts.cpu_count
        assert facts.kind().kind in ("bare-metal", "vm", "container")
    # The scratch directory is gone after the session.
    assert runner.shell(f"test -e {runner.workdir}").returncode != 0


def test_unknown_host_key_is_refused_not_ignored(sshd: dict) -> None:
    node = {**sshd["node"], "known_hosts": str(sshd["dir"] / "empty_known_hosts")}
    with pytest.raises(RunError) as e:
        SshRunner(NodeEntry.of(node)).check_reachable()
    assert str(e.value).startswith(f"node sshnode (root@127.0.0.1:{sshd['port']}): its host key is not in known_hosts")
    # Trusting on first use is an explicit choice, and then it connects.
    scratch = sshd["dir"] / "tofu_known_hosts"
    scratch.write_text("")
    SshRunner(NodeEntry.of({**node, "known_hosts": str(scratch), "accept_new_host_key": True})).check_reachable()
    assert "ssh-ed25519" in scratch.read_text()


def test_unreachable_node_is_one_line() -> None:
    node = {"name": "gone", "runner": "ssh", "host": "127.0.0.1", "port": _free_port(), "connect_timeout": 3}
    with pytest.raises(RunError) as e:
        SshRunner(NodeEntry.of(node)).check_reachable()
    msg = str(e.value)
    assert msg.startswith("node gone (127.0.0.1:") and "unreachable" in msg and "\n" not in msg


def test_missing_remote_dependency_names_node_and_package(sshd: dict) -> None:
    node = {**sshd["node"], "setup": ["export CC=/nonexistent/cc"]}
    with pytest.raises(RunError) as e:
        with SshRunner(NodeEntry.of(node)).session(["cost-probe"]):
            pass
    assert str(e.value) == (
        "node sshnode: remote build failed: missing dependency: C compiler "
        "'/nonexistent/cc'; install it with: apt-get install build-essential (conda: c-compiler)"
    )


def test_unreachable_node_fails_its_jobs_and_keeps_the_rest(sshd: dict, tmp_path: Path) -> None:
    wd = copy_workflow(tmp_path / "iolab")
    gone = {
        "name": "gone",
        "runner": "ssh",
        "host": "127.0.0.1",
        "port": _free_port(),
        "connect_timeout": 3,
        "experiments": ["syscall"],
    }
    local = {"name": "local", "runner": "local", "experiments": ["syscall", "sendrecv", "uring_batch", "nop"]}
    (wd / "config" / "test-nodes.yaml").write_text(yaml.safe_dump({"nodes": [local, gone]}))
    res = snakemake(
        wd,
        "--cores",
        "all",
        "--keep-going",
        "--configfile",
        "config/overlays/smoke.yaml",
        "config/test-nodes.yaml",
        "--until",
        "measure_syscall",
        "measure_sendrecv",
        "measure_uring_batch",
        "measure_nop",
        timeout=600,
    )
    text = res.stdout + res.stderr
    assert res.returncode != 0
    assert "iolab: node gone (127.0.0.1:" in text and "unreachable" in text, text[-3000:]
    assert len(list((wd / "data" / "raw" / "local" / "syscall").glob("*/rep*.csv"))) == 2
    assert not (wd / "data" / "raw" / "gone").exists() or not list((wd / "data" / "raw" / "gone").rglob("rep*.csv"))
