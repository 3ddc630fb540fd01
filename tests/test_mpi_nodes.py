"""MPI across nodes: the hostfile from the inventory, mpirun on the first
node launching its peers over ssh. The nodes are two real OpenSSH sshd,
each in a network namespace of its own (own address, port 22, own
hostname), which the test module starts and stops; each node builds the
probes itself."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, copy_workflow, snakemake, write_sshd_files

from iolab import formats, readers, tables
from iolab.experiments import mpi
from iolab.experiments.mpi.group import Member, MpiNodeGroup, ssh_config_block
from iolab.experiments.mpi.netns import NetnsCluster, _ip
from iolab.inventory import NodeEntry
from iolab.measure import measure
from iolab.rooms.mpi import stats as mpistats
from iolab.runners import LocalRunner, RunError, SshRunner
from iolab.settings import MpiSettings

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
needs_services = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None or not os.path.exists(SSHD) or shutil.which("mpirun") is None,
    reason="needs root, iproute2, openssh-server and Open MPI",
)


# -- without services ------------------------------------------------------------


def _member(name: str, address: str, slots: int | None = None, setup: list[str] | None = None) -> Member:
    entry = {
        "name": name,
        "runner": "ssh",
        "host": address,
        "address": address,
        "setup": setup or [],
        "mpi": {"ranks_per_node": slots},
    }
    return Member(NodeEntry.of(entry), LocalRunner(), None)


def test_node_transports_follow_the_runner_and_the_peers() -> None:
    settings = MpiSettings.of({"transports": ["shm", "tcp", "netns", "netns_tbf"]})
    assert mpi.node_transports(NodeEntry.of({"name": "a", "runner": "local"}), settings) == (
        ["shm", "tcp", "netns", "netns_tbf"],
        [],
    )
    # An ssh node cannot host this machine's namespaces; peers add "nodes".
    ssh = {"name": "b", "runner": "ssh", "host": "b", "mpi": {"peers": ["c"]}}
    assert mpi.node_transports(NodeEntry.of(ssh), settings) == (["shm", "tcp", "nodes"], ["netns", "netns_tbf"])
    # A node's own list is taken as written.
    own = {**ssh, "mpi": {"peers": ["c"], "transports": ["nodes"]}}
    assert mpi.node_transports(NodeEntry.of(own), settings) == (["nodes"], [])


def test_ranks_go_in_blocks_one_context_per_node_with_its_own_build() -> None:
    group = MpiNodeGroup(_member("a", "10.0.0.1", 2), [_member("b", "10.0.0.2", 2), _member("c", "10.0.0.3", 2)])
    assert group.distribution(2) == [1, 1, 0]
    assert group.distribution(4) == [2, 1, 1]
    assert group.distribution(7) == [3, 2, 2]
    assert not group.oversubscribed(6) and group.oversubscribed(7)
    ctx = group.contexts(2, "mpi-probe", ["--bench", "pingpong"])
    build = str(Path(LocalRunner().exe("mpi-probe")))
    assert ctx == [
        "-np",
        "1",
        "--host",
        "10.0.0.1:1",
        build,
        "--bench",
        "pingpong",
        ":",
        "-np",
        "1",
        "--host",
        "10.0.0.2:1",
        build,
        "--bench",
        "pingpong",
    ]
    assert group.hostfile_text().splitlines()[1:] == [
        "10.0.0.1 slots=2  # a",
        "10.0.0.2 slots=2  # b",
        "10.0.0.3 slots=2  # c",
    ]


def test_agent_runs_each_peers_setup_and_refuses_strangers(tmp_path: Path) -> None:
    group = MpiNodeGroup(_member("a", "10.0.0.1"), [_member("b", "10.0.0.2", setup=["module load openmpi/4.1"])])
    group._dir = str(tmp_path)
    agent = tmp_path / "agent"
    agent.write_text(group.agent_text())
    agent.chmod(0o700)
    proc = subprocess.run([str(agent), "10.9.9.9", "true"], capture_output=True, text=True, check=False)
    assert proc.returncode == 255 and "10.9.9.9 is not a peer of node a" in proc.stderr
    assert "10.0.0.2) setup='module load openmpi/4.1 && '" in group.agent_text()
    block = ssh_config_block(
        NodeEntry.of(
            {
                "name": "b",
                "runner": "ssh",
                "address": "10.0.0.2",
                "port": 2222,
                "user": "bench",
                "identity_file": "~/.ssh/id",
                "known_hosts": "~/.ssh/kh",
            }
        )
    )
    assert "Host 10.0.0.2\n" in block and "Port 2222" in block and "StrictHostKeyChecking yes" in block
    assert "IdentityFile ~/.ssh/id" in block and "UserKnownHostsFile ~/.ssh/kh" in block


def test_no_value_changes_meaning_by_its_spelling(tmp_path: Path) -> None:
    # The schema refuses these first (tests/test_config.py); an entry that
    # did not come through it is refused here, before a file is written.
    with pytest.raises(RunError, match="node b: ssh User 'bench\\\\nHost \\*' contains a line break"):
        ssh_config_block(NodeEntry.of({"name": "b", "runner": "ssh", "address": "10.0.0.2", "user": "bench\nHost *"}))
    group = MpiNodeGroup(_member("a", "10.0.0.1"), [_member("b", "10.0.0.2\n10.6.6.6 slots=64")])
    group._dir = str(tmp_path)
    with pytest.raises(RunError, match="node b: address"):
        group.hostfile_text()
    # ssh reads the host after "--" as the destination, never as an option.
    argv = SshRunner(NodeEntry.of({"name": "b", "runner": "ssh", "host": "-oProxyCommand=x"})).ssh_argv()
    assert argv[-2:] == ["--", "-oProxyCommand=x"]
    assert "exec ssh -F" in group.agent_text() and ' -- "$host"' in group.agent_text()


def test_report_rows_bring_in_the_nodes_transport_from_the_node_that_ran_it() -> None:
    frame = pd.DataFrame(
        {"node": ["local", "local", "metal1", "metal1"], "transport": ["shm", "tcp", "shm", "nodes"], "x": [1, 2, 3, 4]}
    )
    rows = mpistats.report_rows(frame, "local")
    assert list(rows["x"]) == [1, 2, 4]
    assert list(mpistats.report_rows(frame, "metal1")["x"]) == [3, 4]


# -- two sshd in two network namespaces ------------------------------------------


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    d = tmp_path_factory.mktemp("nodes")
    write_sshd_files(d, "Port 22\nPidFile none\n")
    with NetnsCluster(2) as cluster:
        assert cluster.subnet is not None
        # This machine reaches the namespaces through an address on the bridge.
        gateway = str(list(cluster.subnet.hosts())[-1])
        _ip("addr", "add", f"{gateway}/{cluster.subnet.prefixlen}", "dev", cluster.bridge)
        sshds = [
            subprocess.Popen(
                cluster.wrap([SSHD, "-D", "-e", "-f", str(d / "sshd_config")], host=i),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(2)
        ]
        try:
            pub = (d / "host_key.pub").read_text().split()
            (d / "known_hosts").write_text("".join(f"{a} {pub[0]} {pub[1]}\n" for a in cluster.addresses))
            base = {
                "runner": "ssh",
                "user": "root",
                "identity_file": str(d / "user_key"),
                "known_hosts": str(d / "known_hosts"),
                "connect_timeout": 5,
            }
            # Both namespaces share one machine's CPUs: one rank per "node",
            # and no binding (each namespace would bind to the same core).
            first = {
                **base,
                "name": "nsa",
                "host": cluster.addresses[0],
                "address": cluster.addresses[0],
                "mpi": {"peers": ["nsb"], "ranks_per_node": 1, "bind_to": "none", "interface": str(cluster.subnet)},
            }
            peer = {**base, "name": "nsb", "host": cluster.addresses[1], "address": cluster.addresses[1]}
            deadline = time.monotonic() + 20
            while True:
                try:
                    for node in (first, peer):
                        SshRunner(NodeEntry.of(node)).check_reachable()
                    break
                except RunError:
                    if time.monotonic() > deadline or any(p.poll() is not None for p in sshds):
                        raise
                    time.sleep(0.2)
            yield {"first": first, "peer": peer, "dir": d, "cluster": cluster, "gateway": gateway}
        finally:
            for p in sshds:
                p.terminate()
                p.wait(timeout=10)


def _settings(**overrides: object) -> dict:
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["experiments"]["mpi"]
    return {
        **config,
        "sizes": [1, 4096, 65536],
        "warmup": 2,
        "iterations": 8,
        "series": 3,
        "large_iterations": 3,
        "ranks": [2],
        "benchmarks": ["pingpong", "allreduce"],
        "reference": {**config["reference"], "enabled": False},
        **overrides,
    }


@needs_services
def test_peer_unreachable_from_the_first_node_is_one_line_and_writes_nothing(two_nodes: dict, tmp_path: Path) -> None:
    # This machine reaches the peer (its host), but the address the first
    # node is told to use leads nowhere: mpirun would hang or fail there, so
    # the group says so first.
    cluster = two_nodes["cluster"]
    nowhere = str(list(cluster.subnet.hosts())[100])
    peer = {**two_nodes["peer"], "address": nowhere, "connect_timeout": 3}
    out = tmp_path / "rep1.csv"
    with pytest.raises(RunError) as e:
        measure("mpi", two_nodes["first"], _settings(transports=["shm"]), 1, 1, out, peer_entries=[peer])
    msg = str(e.value)
    assert "\n" not in msg, msg
    assert msg.startswith(f"node nsa cannot reach its MPI peer nsb ({nowhere}) over ssh: unreachable"), msg
    assert list(tmp_path.iterdir()) == []


@needs_services
def test_this_machine_launches_across_an_ssh_peer(two_nodes: dict, tmp_path: Path) -> None:
    # A local first node: mpirun here, the peer reached with the inventory's
    # ssh settings as this machine uses them.
    cluster = two_nodes["cluster"]
    local = {
        "name": "here",
        "runner": "local",
        "address": two_nodes["gateway"],
        "mpi": {"peers": ["nsb"], "ranks_per_node": 1, "bind_to": "none", "interface": str(cluster.subnet)},
    }
    out = tmp_path / "rep1.csv"
    measure("mpi", local, _settings(transports=["shm"]), 1, 7, out, peer_entries=[two_nodes["peer"]])
    launches = {(r["transport"], r["ranks"]): r for r in formats.launch_rows(out)[0]}
    across = launches[("nodes", 2)]
    assert across["probe_meta"]["processors"] == [os.uname().nodename, cluster.names[1]]
    assert across["argv"][0].startswith("/") and "--allow-run-as-root" in across["argv"]
    frame = readers.read_mpi_csv(out)
    assert (frame.loc[frame["transport"] == "nodes", "ns"] > 0).all()


@needs_services
def test_pipeline_runs_echo_mpi_and_ib_on_ssh_nodes(two_nodes: dict, tmp_path: Path) -> None:
    # One pipeline for every multi-node path (a whole pipeline takes a minute
    # or two here): this machine runs the cost probes; ssh node nsa runs the
    # echo servers with their load generator on this machine (requests cross
    # the bridge), MPI within itself and across to nsb, and perftest against nsb.
    wd = copy_workflow(tmp_path / "iolab")
    local = {
        "name": "local",
        "runner": "local",
        "cpus": {"probe": 1, "server": 0, "client": 1},
        "experiments": ["syscall", "sendrecv", "uring_batch", "nop"],
    }
    # Neither namespace has an RDMA device, so ib is skipped with the reason and M1 uses MPI.
    first = {
        **two_nodes["first"],
        "experiments": ["echo", "mpi", "ib"],
        "ib": {"peer": "nsb"},
        "echo_client": "local",
        "cpus": {"probe": 1, "server": 0, "client": 1},
    }
    peer = {**two_nodes["peer"], "experiments": []}
    (wd / "config" / "test-nodes.yaml").write_text(yaml.safe_dump({"nodes": [local, first, peer]}))
    (wd / "config" / "test-overlay.yaml").write_text(
        yaml.safe_dump(
            {
                "repeats": 1,
                "experiments": {
                    "trace": {"enabled": False},
                    "echo": {"only": ["epoll", "default"], "connections": [50]},
                    # tcp left out (each launch over ssh costs about 2 s); netns
                    # stays, to show an ssh node leaving it out.
                    "mpi": {"transports": ["shm", "netns"], "ranks": [2, 4], "selections": ["pinned", "default"]},
                },
            }
        )
    )
    res = snakemake(
        wd,
        "--cores",
        "all",
        "--configfile",
        "config/overlays/smoke.yaml",
        "config/test-nodes.yaml",
        "config/test-overlay.yaml",
        timeout=1500,
    )
    assert res.returncode == 0, res.stderr[-4000:]
    for experiment in ("echo", "mpi"):
        raws = list((wd / "data" / "raw" / "nsa" / experiment).glob("*/rep1.csv"))
        assert len(raws) == 1, experiment
        side = json.loads(raws[0].with_name("rep1.provenance.json").read_text())
        assert side["runner"] == "ssh" and side["node"]["name"] == "nsa"
        assert side["host"]["kernel"] == os.uname().release and side["toolchain"]["cc"]
    echo_raw = next((wd / "data" / "raw" / "nsa" / "echo").glob("*/rep1.csv"))
    echo = readers.read_echo_csv(echo_raw)
    # Both servers at c = 50 under both client setups, the client on this machine.
    assert (echo["status"] == "ok").all()
    assert echo["client"].value_counts().to_dict() == {"event-loop-uring": 2, "thread-per-connection": 2}
    assert echo["layout"].value_counts().to_dict() == {"pinned": 2, "shared": 2}
    side = json.loads(echo_raw.with_name("rep1.provenance.json").read_text())
    assert side["echo"]["client_node"] == "local" and side["echo"]["bind"] == "0.0.0.0"
    assert not (wd / "data" / "raw" / "local" / "echo").exists()
    raw = next((wd / "data" / "raw" / "nsa" / "mpi").glob("*/rep1.csv"))
    records, _ = formats.launch_rows(raw)
    launches = {(r["transport"], r["ranks"], r["program"]): r for r in records if r["selection"] == "pinned"}
    # The transports on an ssh node: no namespaces of this machine, plus nodes.
    assert {t for t, _, _ in launches} == {"shm", "nodes"}
    # Across nodes, Open MPI's default algorithms ran too, as the seed ran them.
    default = [r for r in records if r["transport"] == "nodes" and r["selection"] == "default"]
    assert {(r["ranks"], r["method"]) for r in default} == {(p, m) for p in (2, 4) for m in ("probe", "osu")}
    assert not any(a["pinned"] for r in default for a in r["probe_meta"]["algorithms"].values())
    across = launches[("nodes", 2, "mpi-probe")]
    group = across["group"]
    assert group["nodes"] == ["nsa", "nsb"] and group["ranks_per_node"] == [1, 1]
    assert group["hostfile"].splitlines()[1:] == [
        f"{two_nodes['first']['address']} slots=1  # nsa",
        f"{two_nodes['peer']['address']} slots=1  # nsb",
    ]
    # Each rank ran on its own node (the namespaces' host names), from that node's build.
    cluster = two_nodes["cluster"]
    assert across["probe_meta"]["processors"] == cluster.names
    assert any(a.endswith("-nsb/native/build/mpi-probe") for a in across["argv"])
    four = launches[("nodes", 4, "mpi-probe")]
    assert four["group"]["ranks_per_node"] == [2, 2] and four["oversubscribed"]
    side = json.loads(raw.with_name("rep1.provenance.json").read_text())
    assert side["mpi"]["transports"] == ["shm", "nodes"]
    assert side["mpi"]["transports_left_out"] == ["netns"]
    table = tables.load("mpi", wd / "results" / "tables" / "mpi.parquet")
    nodes_rows = table[table["transport"] == "nodes"]
    assert set(nodes_rows["peers"]) == {"nsb"} and set(nodes_rows["hosts"]) == {2}
    assert set(nodes_rows["selection"]) == {"pinned", "default"}
    numbers = json.loads((wd / "results" / "numbers" / "collectives.json").read_text())
    assert numbers["mpi_nodes_latency_us"]["value"] > 0 and numbers["mpi_nodes_peers"]["text"] == "nsb"
    status = json.loads((wd / "results" / "nodes.json").read_text())
    assert status["nsa"]["mpi_peers"] == ["nsb"] and status["nsb"]["mpi_peer_of"] == ["nsa"]
    assert status["nsa"]["experiments"] == ["echo", "mpi", "ib"]
    assert (wd / "paper" / "paper.pdf").exists()
    ib_raw = next((wd / "data" / "raw" / "nsa" / "ib").glob("*/rep1.csv"))
    reason = "no RDMA device under /sys/class/infiniband on nsa or nsb"
    assert reason in readers.read_metadata(ib_raw)["skipped"]
    assert ib_raw.with_name("rep1.perftest.txt").read_text().startswith(f"skipped: {reason}")
    assert tables.load("ib", wd / "results" / "tables" / "ib.parquet")["skipped"].str.startswith(reason).all()
    claims_numbers = json.loads((wd / "results" / "numbers" / "claims.json").read_text())
    assert "results/tables/ib.parquet" in (wd / "results" / "figures" / "claims.json").read_text()
    assert claims_numbers["m1_verdict"]["text"].startswith("not testable")
    # Both nodes' scratch directories are gone.
    for node in (two_nodes["first"], two_nodes["peer"]):
        runner = SshRunner(NodeEntry.of(node))
        assert runner.shell(f"ls -d .cache/iolab/*-{node['name']} 2>/dev/null").stdout == ""
